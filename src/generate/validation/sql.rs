//! SQL code validators: DataDesigner lints with sqlfluff and counts only its parse (`PRS`)
//! errors, plus one custom check (`DECIMAL(p)` without a scale). Here the query is parsed with
//! `sqlparser` in the matching dialect. The two parsers are different programs, so an unusual
//! query may be accepted by one and refused by the other; messages follow DataDesigner's
//! `PRS: Line L, Position P: ...` form.

use serde_json::{Value, json};
use sqlparser::dialect::{
    AnsiDialect, BigQueryDialect, Dialect, MsSqlDialect, MySqlDialect, PostgreSqlDialect,
    SQLiteDialect,
};
use sqlparser::parser::Parser;

use crate::domain::dataset::SqlDialect;

/// DataDesigner's extra check, word for word (its message starts with a newline).
const DECIMAL_MESSAGE: &str =
    "\nCustom Check: Found DECIMAL definitions without a scale, which may be incorrect.";

/// Parses `query` and returns DataDesigner's per-record output: `is_valid` and
/// `error_messages` (empty when valid).
pub(super) fn validate(dialect: SqlDialect, query: &str) -> Value {
    let dialect: &dyn Dialect = match dialect {
        SqlDialect::Sqlite => &SQLiteDialect {},
        SqlDialect::Tsql => &MsSqlDialect {},
        SqlDialect::Bigquery => &BigQueryDialect {},
        SqlDialect::Mysql => &MySqlDialect {},
        SqlDialect::Postgres => &PostgreSqlDialect {},
        SqlDialect::Ansi => &AnsiDialect {},
    };
    let mut messages = match Parser::parse_sql(dialect, query) {
        Ok(_) => String::new(),
        Err(e) => prs_message(&e.to_string()),
    };
    if has_unscaled_decimal(query) {
        messages.push_str(DECIMAL_MESSAGE);
    }
    json!({"is_valid": messages.is_empty(), "error_messages": messages})
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

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let q = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
        let v = validate(SqlDialect::Ansi, &q);
        assert_eq!(v["is_valid"], json!(false));
        assert!(v["error_messages"].as_str().unwrap().contains("recursion"));
    }
}
