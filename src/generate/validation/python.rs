//! Python code validators: ruff with DataDesigner's rule selection, and its pylint-style
//! verdict (`engine/validators/python.py`): each message gets a pylint type from its rule
//! prefix; the code is valid unless a `fatal` (syntax) or `error` message is present; the
//! score is pylint's `10 - (5*error + warning + refactor + convention) / statements * 10`.
//!
//! One ruff process per record, the code on stdin: about 8 ms of wall time and 6 ms of CPU
//! each (ruff 0.17.6, 2 cores); a 500-record job took 1.6 to 3.2 s longer with a Python
//! validator. That is small next to the LLM call that wrote the code, so records are not
//! batched into one ruff call (which would couple records that are otherwise independent).

use std::process::Stdio;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::ValidatorEnv;
use super::statements::count_statements;
use crate::domain::record::RecordErrorCode;
use crate::generate::columns::StepError;

/// DataDesigner's `--select`: pycodestyle errors, pyflakes F6-F8, simplify, pylint.
const RULES: &str = "E,F6,F7,F8,SIM,PLC,PLE,PLR,PLW";
/// Ruff's codes for a syntax error (older versions used E999).
const SYNTAX_ERROR_CODES: &[&str] = &["invalid-syntax", "E999", "SyntaxError"];
/// Pylint message types, most severe first (DataDesigner sorts messages by this, then line).
const TYPES: &[&str] = &["fatal", "error", "warning", "convention", "refactor"];

#[derive(Deserialize)]
struct Diagnostic {
    code: Option<String>,
    location: Location,
    message: String,
}

#[derive(Deserialize)]
struct Location {
    row: u64,
    column: u64,
}

/// Lints `code` and returns DataDesigner's per-record output: `is_valid`,
/// `python_linter_score`, `python_linter_severity`, `python_linter_messages`.
pub(super) async fn validate(env: &ValidatorEnv, code: &str) -> Result<Value, StepError> {
    let stdout = run_ruff(env, code).await?;
    let diagnostics: Vec<Diagnostic> = serde_json::from_slice(&stdout).map_err(|e| {
        StepError::new(
            RecordErrorCode::ValidatorError,
            format!("ruff's JSON output could not be read: {e}"),
        )
    })?;
    Ok(verdict(code, diagnostics))
}

async fn run_ruff(env: &ValidatorEnv, code: &str) -> Result<Vec<u8>, StepError> {
    let fail = |msg: String| StepError::new(RecordErrorCode::ValidatorError, msg);
    // `--isolated`: no ruff config file from the server's working directory changes verdicts.
    // The ruff the column was compiled against (a plan with a Python validator exists only
    // once one was found).
    let ruff = env.ruff_ready().map_err(fail)?;
    let mut child = tokio::process::Command::new(ruff)
        .args(["check", "--isolated", "--no-cache", "--select", RULES])
        .args(["--output-format=json", "--stdin-filename", "record.py", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("ruff could not be started: {e}")))?;
    let mut stdin = child.stdin.take();
    let input = code.as_bytes().to_vec();
    let write = async move {
        if let Some(stdin) = stdin.as_mut() {
            // A broken pipe means ruff exited early; its status says why.
            let _ = stdin.write_all(&input).await;
        }
        drop(stdin);
    };
    let run = async {
        let ((), out) = tokio::join!(write, child.wait_with_output());
        out
    };
    let out = match tokio::time::timeout(env.code_timeout(), run).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(fail(format!("ruff failed: {e}"))),
        Err(_) => {
            return Err(fail(format!(
                "ruff ran past validators.code_timeout_sec ({} s)",
                env.code_timeout().as_secs()
            )));
        }
    };
    // 0: no findings, 1: findings; anything else is ruff failing.
    match out.status.code() {
        Some(0 | 1) => Ok(out.stdout),
        status => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = stderr.lines().next().unwrap_or_default();
            let status = status.map_or("a signal".into(), |c| format!("status {c}"));
            Err(fail(format!("ruff exited with {status}: {first}")))
        }
    }
}

/// DataDesigner's message type for a ruff code.
fn message_type(code: Option<&str>) -> &'static str {
    let Some(code) = code.filter(|c| !SYNTAX_ERROR_CODES.contains(c)) else {
        return "fatal";
    };
    let prefix: String = code.chars().filter(char::is_ascii_alphabetic).collect();
    match prefix.as_str() {
        "E" | "SIM" | "PLR" => "refactor",
        "F" | "PLE" => "error",
        "PLC" => "convention",
        _ => "warning",
    }
}

fn verdict(code: &str, diagnostics: Vec<Diagnostic>) -> Value {
    let mut messages: Vec<(usize, u64, Value)> = diagnostics
        .into_iter()
        .map(|d| {
            let kind = message_type(d.code.as_deref());
            let order = TYPES.iter().position(|t| *t == kind).unwrap_or(TYPES.len());
            // Python's `str(None)` when ruff gives no code.
            let symbol = d.code.unwrap_or_else(|| "None".into());
            let line = d.location.row;
            let m = json!({"type": kind, "symbol": symbol, "line": line,
                "column": d.location.column, "message": d.message});
            (order, line, m)
        })
        .collect();
    // Stable, as Python's `sorted`.
    messages.sort_by_key(|(order, line, _)| (*order, *line));
    let count = |t: &str| messages.iter().filter(|(o, ..)| TYPES[*o] == t).count() as f64;
    let severity = messages.first().map_or("none", |(o, ..)| TYPES[*o]);
    let is_valid = matches!(severity, "none" | "warning" | "convention" | "refactor");
    let score = if count("fatal") > 0.0 {
        json!(0)
    } else {
        let penalty = 5.0 * count("error") + count("warning") + count("refactor");
        let penalty = penalty + count("convention");
        let statements = if messages.is_empty() {
            1
        } else {
            count_statements(code).max(1)
        };
        let raw = 10.0 - (penalty / statements as f64) * 10.0;
        // Python's `max(0, raw)` keeps the integer 0 when raw is not positive.
        if raw > 0.0 { json!(raw) } else { json!(0) }
    };
    json!({
        "is_valid": is_valid,
        "python_linter_score": score,
        "python_linter_severity": severity,
        "python_linter_messages": messages.into_iter().map(|(.., m)| m).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(code: &str, row: u64, column: u64, message: &str) -> Diagnostic {
        Diagnostic {
            code: Some(code.into()),
            location: Location { row, column },
            message: message.into(),
        }
    }

    #[test]
    fn types_follow_datadesigner_prefix_table() {
        assert_eq!(message_type(None), "fatal");
        assert_eq!(message_type(Some("invalid-syntax")), "fatal");
        assert_eq!(message_type(Some("E711")), "refactor");
        assert_eq!(message_type(Some("F821")), "error");
        assert_eq!(message_type(Some("SIM108")), "refactor");
        assert_eq!(message_type(Some("PLC0414")), "convention");
        assert_eq!(message_type(Some("PLE0101")), "error");
        assert_eq!(message_type(Some("PLR1714")), "refactor");
        assert_eq!(message_type(Some("PLW0120")), "warning");
    }

    /// Outputs DataDesigner 0.9.6 wrote for the same code and ruff findings.
    #[test]
    fn verdicts_match_datadesigner() {
        let clean = verdict("def f(x):\n    return x+1\n", vec![]);
        assert_eq!(
            clean,
            json!({"is_valid": true, "python_linter_score": 10.0,
                "python_linter_severity": "none", "python_linter_messages": []})
        );
        let code = "x = 1\nif x == None:\n    pass\n";
        let msg = "Comparison to `None` should be `cond is None`";
        let v = verdict(code, vec![diag("E711", 2, 9, msg)]);
        assert_eq!(
            v.to_string(),
            json!({"is_valid": true, "python_linter_score": 6.666666666666667,
                "python_linter_severity": "refactor", "python_linter_messages": [
                    {"type": "refactor", "symbol": "E711", "line": 2, "column": 9,
                     "message": msg}]})
            .to_string()
        );
        let v = verdict(
            "import os\ndef f(:\n",
            vec![
                diag("invalid-syntax", 2, 7, "Expected a parameter"),
                diag("invalid-syntax", 3, 1, "unexpected EOF while parsing"),
            ],
        );
        assert_eq!(v["is_valid"], json!(false));
        assert_eq!(v["python_linter_score"].to_string(), "0");
        assert_eq!(v["python_linter_severity"], json!("fatal"));
        assert_eq!(v["python_linter_messages"][1]["line"], json!(3));
    }

    #[test]
    fn an_error_makes_the_code_invalid_and_sorts_first() {
        let v = verdict(
            "a = 1\nprint(b)\n",
            vec![diag("E501", 1, 1, "long"), diag("F821", 2, 7, "undefined")],
        );
        assert_eq!(v["is_valid"], json!(false));
        assert_eq!(v["python_linter_severity"], json!("error"));
        assert_eq!(v["python_linter_messages"][0]["symbol"], json!("F821"));
        // 10 - (5 + 1) / 2 * 10 < 0: Python's max(0, ...) gives the integer 0.
        assert_eq!(v["python_linter_score"].to_string(), "0");
    }
}
