//! SQL code validators: DataDesigner lints with sqlfluff and counts only its parse (`PRS`)
//! errors, plus one custom check (`DECIMAL(p)` without a scale). Here the query is parsed with
//! `sqlparser` in the matching dialect, then checked for statements and clauses the dialect
//! lacks (`super::sql_dialects`: `sqlparser` takes `PRINT` or `SELECT TOP` in any dialect,
//! sqlfluff does not). The two are different programs, so an unusual query may still be
//! accepted by one and refused by the other (tests/api/sql_conformance.rs measures where);
//! messages follow DataDesigner's `PRS: Line L, Position P: ...` form.

use serde_json::{Value, json};
use sqlparser::dialect::{
    AnsiDialect, BigQueryDialect, Dialect, MsSqlDialect, MySqlDialect, PostgreSqlDialect,
    SQLiteDialect,
};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::domain::dataset::SqlDialect;

/// DataDesigner's extra check, word for word (its message starts with a newline).
const DECIMAL_MESSAGE: &str =
    "\nCustom Check: Found DECIMAL definitions without a scale, which may be incorrect.";

/// Most tokens (blanks and comments aside) of a query that is parsed. The parser's recursion
/// limit bounds nesting, but not a long flat chain such as `1+1+...+1`: that parses in a loop
/// into a tree as deep as the chain, whose drop then recurses once per operator. The chain
/// can be no longer than the tokens, so this bounds that depth; far above any real query.
pub(super) const MAX_TOKENS: usize = 20_000;

/// Stack of the thread a query is parsed on: room for a tree [`MAX_TOKENS`] deep (measured
/// under 1 KiB a level in a debug build; a runtime worker's stack is 2 MiB). Reserved, not
/// used: the pages are only touched by a deep tree.
const PARSE_STACK_BYTES: usize = 64 << 20;

/// Parses `query` and returns DataDesigner's per-record output: `is_valid` and
/// `error_messages` (empty when valid).
pub(crate) fn validate(dialect: SqlDialect, query: &str) -> Value {
    let parsed = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("sql-validate".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(s, || parse_error(dialect, query))
            .map(|thread| thread.join())
    });
    let mut messages = match parsed {
        Ok(Ok(None)) => String::new(),
        Ok(Ok(Some(e))) => prs_message(&e),
        // No thread (the system refused one) or a panic in the parser: not a verdict on the
        // query, but the record cannot be said to be valid either.
        Ok(Err(_)) => "PRS: the SQL parser failed on this query".to_owned(),
        Err(e) => format!("PRS: the query could not be parsed here ({e})"),
    };
    if has_unscaled_decimal(query) {
        messages.push_str(DECIMAL_MESSAGE);
    }
    json!({"is_valid": messages.is_empty(), "error_messages": messages})
}

/// The parser's error for `query`, if any; more than [`MAX_TOKENS`] tokens is one.
fn parse_error(dialect_name: SqlDialect, query: &str) -> Option<String> {
    let dialect: &dyn Dialect = match dialect_name {
        SqlDialect::Sqlite => &SQLiteDialect {},
        SqlDialect::Tsql => &MsSqlDialect {},
        SqlDialect::Bigquery => &BigQueryDialect {},
        SqlDialect::Mysql => &MySqlDialect {},
        SqlDialect::Postgres => &PostgreSqlDialect {},
        SqlDialect::Ansi => &AnsiDialect {},
    };
    let tokens = match Tokenizer::new(dialect, query).tokenize_with_location() {
        Ok(tokens) => tokens,
        Err(e) => return Some(ParserError::from(e).to_string()),
    };
    let count = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .count();
    if count > MAX_TOKENS {
        return Some(format!(
            "the query has {count} tokens, more than the {MAX_TOKENS} a query may have to be validated"
        ));
    }
    if let Err(e) = Parser::new(dialect)
        .with_tokens_with_locations(tokens.clone())
        .parse_statements()
    {
        return Some(e.to_string());
    }
    super::sql_dialects::foreign_construct(dialect_name, &tokens)
}

/// `sql parser error: Expected: X, found: Y at Line: 1, Column: 5` →
/// `PRS: Line 1, Position 5: Expected: X, found: Y`.
fn prs_message(error: &str) -> String {
    let text = error.strip_prefix("sql parser error: ").unwrap_or(error);
    let located = text.rsplit_once(" at Line: ").and_then(|(msg, loc)| {
        let (line, column) = loc.split_once(", Column: ")?;
        let (line, column) = (line.parse::<u64>().ok()?, column.parse::<u64>().ok()?);
        Some(format!("PRS: Line {line}, Position {column}: {msg}"))
    });
    located.unwrap_or_else(|| format!("PRS: {text}"))
}

/// DataDesigner's `re.findall(r"DECIMAL\(\d+\)", content)`: case-sensitive, no spaces.
fn has_unscaled_decimal(query: &str) -> bool {
    query.match_indices("DECIMAL(").any(|(i, m)| {
        let rest = &query[i + m.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(')')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_queries() {
        let ok = validate(SqlDialect::Postgres, "SELECT a FROM t WHERE b = 1");
        assert_eq!(ok, json!({"is_valid": true, "error_messages": ""}));
        assert_eq!(
            validate(SqlDialect::Sqlite, ""),
            json!({"is_valid": true, "error_messages": ""})
        );
        let bad = validate(SqlDialect::Postgres, "SELEC * FROM t");
        assert_eq!(bad["is_valid"], json!(false));
        let msg = bad["error_messages"].as_str().unwrap();
        assert!(msg.starts_with("PRS: Line 1, Position 1: "), "{msg}");
        let bad = validate(SqlDialect::Mysql, "SELECT * FROM t WHERE");
        assert_eq!(bad["is_valid"], json!(false));
    }

    #[test]
    fn dialects_differ() {
        // Backtick-quoted identifiers are MySQL's, not Postgres's (sqlfluff agrees).
        let q = "SELECT `name` FROM users";
        assert_eq!(validate(SqlDialect::Mysql, q)["is_valid"], json!(true));
        assert_eq!(validate(SqlDialect::Postgres, q)["is_valid"], json!(false));
    }

    #[test]
    fn decimal_without_scale_is_flagged_as_datadesigner_does() {
        let v = validate(SqlDialect::Postgres, "CREATE TABLE t (a DECIMAL(10))");
        assert_eq!(
            v,
            json!({"is_valid": false, "error_messages": DECIMAL_MESSAGE})
        );
        let v = validate(SqlDialect::Postgres, "CREATE TABLE t (a DECIMAL(10, 2))");
        assert_eq!(v["is_valid"], json!(true));
    }

    /// A flat chain parses in a loop into a tree as deep as the chain; dropping that tree
    /// overflowed a worker's stack and aborted the process.
    #[test]
    fn long_operator_chains_are_parsed_or_refused_never_a_crash() {
        // Just under the bound: parsed, on the parse thread's stack.
        let q = format!("SELECT 1{}", "+1".repeat(MAX_TOKENS / 2 - 2));
        assert_eq!(validate(SqlDialect::Postgres, &q)["is_valid"], json!(true));
        let q = format!("SELECT a{}", "->b".repeat(MAX_TOKENS / 2 - 2));
        assert_eq!(validate(SqlDialect::Postgres, &q)["is_valid"], json!(true));
        // The probe's inputs: refused by the bound, with a message that says so.
        for q in [
            format!("SELECT 1{}", "+1".repeat(100_000)),
            format!("SELECT a{}", "->b".repeat(50_000)),
        ] {
            let v = validate(SqlDialect::Postgres, &q);
            assert_eq!(v["is_valid"], json!(false));
            let msg = v["error_messages"].as_str().unwrap();
            assert!(msg.starts_with("PRS: ") && msg.contains("tokens"), "{msg}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let q = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
        let v = validate(SqlDialect::Ansi, &q);
        assert_eq!(v["is_valid"], json!(false));
        assert!(v["error_messages"].as_str().unwrap().contains("recursion"));
    }
}
