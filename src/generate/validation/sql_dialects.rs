//! What `sqlparser` accepts in every dialect but sqlfluff (DataDesigner's SQL validator) does
//! not: statements and clauses that belong to some dialects only. `sqlparser` parses them
//! wherever they appear (`PRINT 'x'` is a statement in its ANSI dialect too); sqlfluff's
//! dialect grammars refuse them. Each rule below is a dialect fact, checked against
//! sqlfluff's verdicts (tests/api/sql_conformance.rs runs both on the same queries): a token
//! pattern and the dialects whose grammar has it. The first use outside those dialects is a
//! parse error that says where, in DataDesigner's `PRS: Line L, Position P: ...` form.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::domain::dataset::SqlDialect::{self, Ansi, Bigquery, Mysql, Postgres, Sqlite, Tsql};

/// Where a rule's pattern stands.
enum At {
    /// The first word of a statement.
    Statement(&'static str),
    /// A word anywhere (unquoted).
    Word(&'static str),
    /// Consecutive words anywhere.
    Words(&'static [&'static str]),
    /// `TOP` right after `SELECT` (or `SELECT DISTINCT`).
    Top,
    /// A statement that is `BEGIN` alone.
    BareBegin,
    /// An identifier quoted with this character (`` ` `` or `[`).
    Quoted(char),
    /// A double-quoted name where a table goes (after `FROM`, `JOIN`, `INTO`, `UPDATE`,
    /// `TABLE`): a string literal in dialects that quote identifiers otherwise.
    DoubleQuotedTable,
    /// A `$1` placeholder.
    DollarPlaceholder,
}

/// A construct and the dialects whose grammar has it.
struct Rule {
    at: At,
    allowed: &'static [SqlDialect],
    what: &'static str,
}

/// One rule a line: the construct, the dialects that have it, and what the error says.
#[rustfmt::skip]
const RULES: &[Rule] = &[
    Rule { at: At::Statement("PRINT"), allowed: &[Tsql], what: "PRINT is T-SQL's" },
    Rule { at: At::Statement("EXEC"), allowed: &[Tsql], what: "EXEC is T-SQL's" },
    Rule { at: At::Statement("EXECUTE"), allowed: &[Tsql, Postgres, Mysql, Bigquery], what: "EXECUTE is not in this dialect" },
    Rule { at: At::Statement("GO"), allowed: &[Tsql], what: "GO is T-SQL's batch separator" },
    Rule { at: At::Statement("RETURN"), allowed: &[Tsql, Mysql], what: "RETURN outside a routine is not in this dialect" },
    Rule { at: At::Statement("PRAGMA"), allowed: &[Sqlite, Tsql], what: "PRAGMA is SQLite's" },
    Rule { at: At::Statement("VACUUM"), allowed: &[Sqlite, Postgres, Tsql], what: "VACUUM is not in this dialect" },
    Rule { at: At::Statement("SHOW"), allowed: &[Postgres, Mysql, Tsql], what: "SHOW is not in this dialect" },
    Rule { at: At::Statement("USE"), allowed: &[Ansi, Postgres, Mysql, Tsql, Bigquery], what: "USE is not in SQLite" },
    Rule { at: At::Statement("SET"), allowed: &[Postgres, Mysql, Tsql, Bigquery], what: "SET is not in this dialect" },
    Rule { at: At::Statement("CALL"), allowed: &[Postgres, Mysql, Bigquery], what: "CALL is not in this dialect" },
    Rule { at: At::Statement("GRANT"), allowed: &[Ansi, Postgres, Mysql, Tsql], what: "GRANT is not in this dialect" },
    Rule { at: At::Statement("TRUNCATE"), allowed: &[Ansi, Postgres, Mysql, Tsql, Bigquery], what: "TRUNCATE is not in SQLite (use DELETE FROM)" },
    Rule { at: At::Statement("MERGE"), allowed: &[Ansi, Postgres, Mysql, Tsql, Bigquery], what: "MERGE is not in SQLite" },
    Rule { at: At::BareBegin, allowed: &[Ansi, Sqlite, Postgres, Mysql, Bigquery], what: "a bare BEGIN is not T-SQL (BEGIN TRANSACTION)" },
    Rule { at: At::Top, allowed: &[Tsql], what: "SELECT TOP is T-SQL's (use LIMIT)" },
    Rule { at: At::Word("LIMIT"), allowed: &[Ansi, Sqlite, Postgres, Mysql, Bigquery], what: "LIMIT is not T-SQL (use TOP or OFFSET ... FETCH)" },
    // T-SQL has it after OFFSET only; that order is not checked here.
    Rule { at: At::Word("FETCH"), allowed: &[Ansi, Postgres, Tsql], what: "FETCH FIRST/NEXT is not in this dialect (use LIMIT)" },
    Rule { at: At::Word("QUALIFY"), allowed: &[Bigquery], what: "QUALIFY is BigQuery's" },
    Rule { at: At::Word("ILIKE"), allowed: &[Ansi, Postgres, Tsql, Bigquery], what: "ILIKE is not in this dialect (use LOWER(...) LIKE)" },
    Rule { at: At::Word("REGEXP"), allowed: &[Sqlite, Mysql, Tsql], what: "REGEXP is not in this dialect" },
    Rule { at: At::Word("TABLESAMPLE"), allowed: &[Ansi, Postgres, Mysql, Tsql], what: "TABLESAMPLE is not in this dialect" },
    Rule { at: At::Words(&["ON", "CONFLICT"]), allowed: &[Sqlite, Postgres], what: "ON CONFLICT is PostgreSQL's and SQLite's" },
    Rule { at: At::Words(&["ON", "DUPLICATE", "KEY"]), allowed: &[Mysql], what: "ON DUPLICATE KEY is MySQL's" },
    Rule { at: At::Words(&["ADD", "COLUMN"]), allowed: &[Ansi, Sqlite, Postgres, Mysql, Bigquery], what: "ADD COLUMN is not T-SQL (ADD name type)" },
    Rule { at: At::Quoted('`'), allowed: &[Sqlite, Mysql, Bigquery], what: "backtick-quoted names are not in this dialect" },
    Rule { at: At::Quoted('['), allowed: &[Tsql], what: "bracket-quoted names are T-SQL's" },
    Rule { at: At::DoubleQuotedTable, allowed: &[Ansi, Sqlite, Postgres, Tsql], what: "a double-quoted table name is a string in this dialect" },
    Rule { at: At::DollarPlaceholder, allowed: &[Sqlite, Postgres, Mysql, Tsql], what: "$n placeholders are not in this dialect" },
];

/// The first construct of `tokens` that `dialect`'s grammar lacks, worded as the parser's
/// errors are (`... at Line: L, Column: C`).
pub(super) fn foreign_construct(dialect: SqlDialect, tokens: &[TokenWithSpan]) -> Option<String> {
    let toks: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let word = |i: usize| match toks.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let mut statement_start = true;
    for (i, t) in toks.iter().enumerate() {
        let starts = statement_start;
        statement_start = matches!(t.token, Token::SemiColon);
        let hit = RULES.iter().find(|r| {
            !r.allowed.contains(&dialect)
                && match &r.at {
                    At::Statement(w) => starts && word(i).as_deref() == Some(*w),
                    At::Word(w) => word(i).as_deref() == Some(*w),
                    At::Words(ws) => ws
                        .iter()
                        .enumerate()
                        .all(|(k, w)| word(i + k).as_deref() == Some(*w)),
                    At::Top => {
                        word(i).as_deref() == Some("TOP")
                            && (word(i.wrapping_sub(1)).as_deref() == Some("SELECT")
                                || (word(i.wrapping_sub(1)).as_deref() == Some("DISTINCT")
                                    && word(i.wrapping_sub(2)).as_deref() == Some("SELECT")))
                    }
                    At::BareBegin => {
                        starts
                            && word(i).as_deref() == Some("BEGIN")
                            && toks
                                .get(i + 1)
                                .is_none_or(|n| matches!(n.token, Token::SemiColon))
                    }
                    At::Quoted(q) => {
                        matches!(&t.token, Token::Word(w) if w.quote_style == Some(*q))
                    }
                    At::DoubleQuotedTable => {
                        matches!(t.token, Token::DoubleQuotedString(_))
                            && matches!(
                                toks.get(i.wrapping_sub(1)).map(|p| &p.token),
                                Some(Token::Word(w)) if matches!(
                                    w.keyword,
                                    Keyword::FROM | Keyword::JOIN | Keyword::INTO
                                        | Keyword::UPDATE | Keyword::TABLE
                                )
                            )
                    }
                    At::DollarPlaceholder => {
                        matches!(&t.token, Token::Placeholder(p) if p.starts_with('$'))
                    }
                }
        });
        if let Some(rule) = hit {
            let at = t.span.start;
            return Some(format!(
                "{} (dialect {}) at Line: {}, Column: {}",
                rule.what,
                name(dialect),
                at.line,
                at.column
            ));
        }
    }
    None
}

/// The dialect as `code_lang` names it.
fn name(dialect: SqlDialect) -> &'static str {
    match dialect {
        Ansi => "sql:ansi",
        Sqlite => "sql:sqlite",
        Postgres => "sql:postgres",
        Mysql => "sql:mysql",
        Tsql => "sql:tsql",
        Bigquery => "sql:bigquery",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::validation::sql::validate;

    #[test]
    fn dialect_constructs_are_refused_where_the_dialect_lacks_them() {
        for (dialect, query, says) in [
            (Sqlite, "print(1)", "PRINT is T-SQL's"),
            (Postgres, "SELECT TOP 5 * FROM t", "SELECT TOP is T-SQL's"),
            (Sqlite, "SELECT * FROM t FETCH FIRST 5 ROWS ONLY", "FETCH"),
            (
                Mysql,
                "SELECT * FROM t\nWHERE a ILIKE 'x'",
                "Line 2, Position 9: ILIKE",
            ),
            (Tsql, "SELECT * FROM t LIMIT 5", "LIMIT is not T-SQL"),
            (Ansi, "SELECT `a` FROM t", "backtick"),
        ] {
            let v = validate(dialect, query);
            assert_eq!(v["is_valid"], false, "{dialect:?}: {query}");
            let msg = v["error_messages"].as_str().unwrap();
            assert!(msg.starts_with("PRS: Line "), "{msg}");
            assert!(msg.contains(says), "{dialect:?}: {query}: {msg}");
        }
        for (dialect, query) in [
            (Tsql, "PRINT 'x'"),
            (Tsql, "SELECT TOP 5 * FROM t"),
            (Postgres, "SELECT * FROM t FETCH FIRST 5 ROWS ONLY"),
            (Mysql, "SELECT `a` FROM t LIMIT 1"),
            (
                Postgres,
                "INSERT INTO t VALUES (1) ON CONFLICT (id) DO NOTHING",
            ),
        ] {
            assert_eq!(
                validate(dialect, query)["is_valid"],
                true,
                "{dialect:?}: {query}"
            );
        }
    }
}
