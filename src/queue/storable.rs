//! What the databases cannot store, found before a write instead of by a failed batch.
//!
//! Postgres refuses the NUL character (U+0000) in `text` and in `jsonb` strings and keys, and
//! one refused row fails the statement that carries the whole batch. So every result is
//! checked before it is written, on both backends (SQLite would store it, but a dataset should
//! not depend on the backend it was generated on):
//!
//! - a column value holding a NUL fails its record with `unstorable_value` (stage `store`,
//!   naming the column); the record's other values are kept as partial values, and the other
//!   records of the batch are written as they are;
//! - error texts and traces (model output is not ours to refuse) keep their content with each
//!   NUL replaced by U+FFFD, the Unicode replacement character.
//!
//! Submitted configs and metadata are checked with [`find_nul`] and refused with `422
//! unstorable_value` instead.

use std::borrow::Cow;

use serde_json::Value;

use super::RecordResult;
use crate::domain::record::{RecordError, RecordErrorCode, RecordOutcome, RecordStage, Trace};

/// What replaces a NUL in text that is kept (error messages, traces).
const REPLACEMENT: &str = "\u{FFFD}";

/// Where the first NUL in `v` is, as a path below `v` in the style of serde's paths
/// (`columns[0].name`; empty for `v` itself), or `None` when there is none. A NUL in an
/// object key is reported at the key's object.
///
/// Iterative, like [`has_nul`]: a submitted document's depth is not this function's to trust.
pub fn find_nul(v: &Value) -> Option<String> {
    /// A visited value: its parent's entry and how it is reached from there.
    enum Step<'a> {
        Index(usize),
        Key(&'a str),
    }
    let mut seen: Vec<(Option<usize>, Option<Step<'_>>)> = vec![(None, None)];
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    let mut found = None;
    while let Some((v, at)) = stack.pop() {
        let mut push = |seen: &mut Vec<_>, child, step| {
            seen.push((Some(at), Some(step)));
            stack.push((child, seen.len() - 1));
        };
        match v {
            Value::String(s) if s.contains('\0') => {
                found = Some(at);
                break;
            }
            Value::Object(map) if map.keys().any(|k| k.contains('\0')) => {
                found = Some(at);
                break;
            }
            // Pushed in reverse, so the first child is looked at first.
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    push(&mut seen, item, Step::Index(i));
                }
            }
            Value::Object(map) => {
                for (k, item) in map.iter().rev() {
                    push(&mut seen, item, Step::Key(k));
                }
            }
            Value::String(_) | Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    let mut at = found?;
    let mut steps = Vec::new();
    while let (Some(parent), Some(step)) = &seen[at] {
        steps.push(step);
        at = *parent;
    }
    let mut path = String::new();
    for step in steps.into_iter().rev() {
        match step {
            Step::Index(i) => path.push_str(&format!("[{i}]")),
            Step::Key(k) if path.is_empty() => path.push_str(k),
            Step::Key(k) => {
                path.push('.');
                path.push_str(k);
            }
        }
    }
    Some(path)
}

/// Whether `v` holds a NUL anywhere, in a string or a key.
fn has_nul(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if s.contains('\0') => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                if map.keys().any(|k| k.contains('\0')) {
                    return true;
                }
                stack.extend(map.values());
            }
            Value::String(_) | Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    false
}

/// Whether `r` can be written as it is.
fn is_storable(r: &RecordResult) -> bool {
    let (values, error) = match &r.outcome {
        RecordOutcome::Completed { values } => (Some(values), None),
        RecordOutcome::Failed { values, error } => (values.as_ref(), Some(error)),
    };
    !values.is_some_and(has_nul)
        && !error.is_some_and(error_has_nul)
        && !r
            .traces
            .iter()
            .any(|t| t.column.contains('\0') || has_nul(&t.messages))
        && !r.usage.keys().any(|k| k.contains('\0'))
        && !tool_usage_has_nul(r)
}

/// Tool names come from the model: a call may name a tool with a NUL in it.
fn tool_usage_has_nul(r: &RecordResult) -> bool {
    r.tool_usage
        .iter()
        .any(|(c, u)| c.contains('\0') || u.tool_calls.keys().any(|t| t.contains('\0')))
}

fn error_has_nul(e: &RecordError) -> bool {
    // Codes and stages this build produces never hold one; a read one (`Unrecognized`) may.
    e.code.as_str().contains('\0')
        || e.message.contains('\0')
        || e.column.as_deref().is_some_and(|c| c.contains('\0'))
        || e.stage.as_ref().is_some_and(|s| s.as_str().contains('\0'))
}

/// `r` as it can be stored: borrowed when it already can (the common case costs one scan).
pub(crate) fn storable(r: &RecordResult) -> Cow<'_, RecordResult> {
    if is_storable(r) {
        Cow::Borrowed(r)
    } else {
        let mut owned = r.clone();
        make_storable(&mut owned);
        Cow::Owned(owned)
    }
}

/// Rewrites `r` so that it can be stored (see the module docs); a no-op when it already can.
/// Returns whether values were dropped (the record is then failed).
pub fn make_storable(r: &mut RecordResult) -> bool {
    if is_storable(r) {
        return false;
    }
    for t in &mut r.traces {
        replace_in_string(&mut t.column);
        replace_nul(&mut t.messages);
    }
    dedup_columns(&mut r.traces);
    if r.usage.keys().any(|k| k.contains('\0')) {
        let usage = std::mem::take(&mut r.usage);
        for (mut alias, counts) in usage {
            replace_in_string(&mut alias);
            r.usage.entry(alias).or_default().add(&counts);
        }
    }
    if tool_usage_has_nul(r) {
        let tools = std::mem::take(&mut r.tool_usage);
        for (mut column, u) in tools {
            replace_in_string(&mut column);
            let mut clean = crate::domain::usage::ToolUsage {
                tool_turns: u.tool_turns,
                ..Default::default()
            };
            for (mut tool, outcomes) in u.tool_calls {
                replace_in_string(&mut tool);
                let mine = clean.tool_calls.entry(tool).or_default();
                for (o, n) in outcomes {
                    *mine.entry(o).or_default() += n;
                }
            }
            r.tool_usage.entry(column).or_default().add(&clean);
        }
    }
    let (values, error) = match &mut r.outcome {
        RecordOutcome::Completed { values } => (Some(values), None),
        RecordOutcome::Failed { values, error } => (values.as_mut(), Some(error)),
    };
    if let Some(error) = error {
        replace_in_error(error);
    }
    let Some(values) = values.filter(|v| has_nul(v)) else {
        return false;
    };
    // The first column (in the object's order) that cannot be stored names the failure; every
    // such column is dropped from the values kept.
    let (kept, column) = match std::mem::take(values) {
        Value::Object(map) => {
            let mut column = None;
            let kept: serde_json::Map<String, Value> = map
                .into_iter()
                .filter(|(k, v)| {
                    let bad = k.contains('\0') || has_nul(v);
                    if bad && column.is_none() {
                        column = Some(k.replace('\0', REPLACEMENT));
                    }
                    !bad
                })
                .collect();
            (Some(Value::Object(kept)), column)
        }
        // Values are always an object; anything else is dropped whole.
        _ => (None, None),
    };
    let message = match &column {
        Some(c) => format!(
            "column '{c}': the value contains a NUL character (\\u0000), which the database cannot store"
        ),
        None => "the values contain a NUL character (\\u0000), which the database cannot store"
            .to_owned(),
    };
    let error = RecordError::new(RecordErrorCode::UnstorableValue, column, message);
    r.outcome = match std::mem::replace(
        &mut r.outcome,
        RecordOutcome::Completed {
            values: Value::Null,
        },
    ) {
        // A record that already failed keeps its own error: it says what went wrong first.
        RecordOutcome::Failed { error: first, .. } => RecordOutcome::Failed {
            values: kept,
            error: first,
        },
        RecordOutcome::Completed { .. } => RecordOutcome::Failed {
            values: kept,
            error,
        },
    };
    true
}

fn replace_in_string(s: &mut String) {
    if s.contains('\0') {
        *s = s.replace('\0', REPLACEMENT);
    }
}

fn replace_in_error(e: &mut RecordError) {
    if e.code.as_str().contains('\0') {
        e.code = RecordErrorCode::parse(&e.code.as_str().replace('\0', REPLACEMENT));
    }
    replace_in_string(&mut e.message);
    if let Some(c) = &mut e.column {
        replace_in_string(c);
    }
    if let Some(s) = e.stage.as_mut().filter(|s| s.as_str().contains('\0')) {
        *s = RecordStage::parse(&s.as_str().replace('\0', REPLACEMENT));
    }
}

/// Replaces every NUL in `v`'s strings and keys.
fn replace_nul(v: &mut Value) {
    match v {
        Value::String(s) => replace_in_string(s),
        Value::Array(items) => items.iter_mut().for_each(replace_nul),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains('\0')) {
                let old = std::mem::take(map);
                for (mut k, v) in old {
                    replace_in_string(&mut k);
                    map.insert(k, v);
                }
            }
            map.values_mut().for_each(replace_nul);
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Two trace columns may have become one name; the last one wins, as in `dedup_traces`.
fn dedup_columns(traces: &mut Vec<Trace>) {
    let mut seen = std::collections::HashSet::new();
    let mut keep: Vec<bool> = traces
        .iter()
        .rev()
        .map(|t| seen.insert(t.column.clone()))
        .collect();
    keep.reverse();
    let mut it = keep.into_iter();
    traces.retain(|_| it.next().unwrap_or(true));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::RecordId;

    fn result(values: Value) -> RecordResult {
        let job_id = crate::domain::JobId::new();
        RecordResult {
            id: RecordId::new(),
            job_id,
            index: 0,
            chunk: crate::queue::ChunkKey { job_id, start: 0 },
            attempts: 1,
            outcome: RecordOutcome::Completed { values },
            traces: Vec::new(),
            usage: Default::default(),
            column_usage: Default::default(),
            tool_usage: Default::default(),
            media: Vec::new(),
            selection: None,
        }
    }

    #[test]
    fn finds_the_path_of_the_first_nul() {
        assert_eq!(find_nul(&json!({"a": [1, "x"], "b": "y"})), None);
        assert_eq!(find_nul(&json!("a\u{0}")).as_deref(), Some(""));
        let v = json!({"columns": [{"name": "ok"}, {"name": "b\u{0}d"}]});
        assert_eq!(find_nul(&v).as_deref(), Some("columns[1].name"));
        assert_eq!(find_nul(&json!([[0, "\u{0}"]])).as_deref(), Some("[0][1]"));
        let key = json!({"tags": {"k\u{0}": 1}});
        assert_eq!(find_nul(&key).as_deref(), Some("tags"));
        let deep = json!({"a": {"b": [1, {"c": "\u{0}"}]}});
        assert_eq!(find_nul(&deep).as_deref(), Some("a.b[1].c"));
        let first = json!({"x": ["ok", "\u{0}"], "y": "\u{0}"});
        assert_eq!(find_nul(&first).as_deref(), Some("x[1]"));
    }

    #[test]
    fn clean_results_are_borrowed() {
        let r = result(json!({"a": "x", "b": [1, {"c": "d"}]}));
        assert!(matches!(storable(&r), Cow::Borrowed(_)));
    }

    #[test]
    fn a_nul_value_fails_the_record_and_keeps_the_rest() {
        let mut r = result(json!({"a": "ok", "b": {"x": ["bad\u{0}"]}, "c": 1}));
        r.traces.push(Trace {
            column: "b".into(),
            messages: json!([{"role": "assistant", "content": "bad\u{0}", "k\u{0}": 1}]),
        });
        assert!(make_storable(&mut r));
        let RecordOutcome::Failed { values, error } = &r.outcome else {
            panic!("expected a failure, got {:?}", r.outcome);
        };
        assert_eq!(values.as_ref(), Some(&json!({"a": "ok", "c": 1})));
        assert_eq!(error.code, RecordErrorCode::UnstorableValue);
        assert_eq!(error.column.as_deref(), Some("b"));
        assert_eq!(error.stage, Some(RecordStage::Store));
        assert!(
            error.message.starts_with("column 'b': "),
            "{}",
            error.message
        );
        assert_eq!(
            r.traces[0].messages,
            json!([{"role": "assistant", "content": "bad\u{FFFD}", "k\u{FFFD}": 1}])
        );
        assert!(is_storable(&r));
        // Idempotent.
        let again = r.clone();
        assert!(!make_storable(&mut r));
        assert_eq!(r, again);
    }

    #[test]
    fn an_earlier_failure_keeps_its_error_and_loses_its_nul() {
        let mut r = result(json!(null));
        r.outcome = RecordOutcome::Failed {
            values: Some(json!({"a": "\u{0}", "b": 2})),
            error: RecordError::new(
                RecordErrorCode::TemplateError,
                Some("c".into()),
                "got '\u{0}'",
            ),
        };
        assert!(make_storable(&mut r));
        let RecordOutcome::Failed { values, error } = &r.outcome else {
            panic!("still failed");
        };
        assert_eq!(values.as_ref(), Some(&json!({"b": 2})));
        assert_eq!(error.code, "template_error");
        assert_eq!(error.message, "got '\u{FFFD}'");
    }

    #[test]
    fn a_nul_in_a_trace_only_is_replaced() {
        let mut r = result(json!({"a": "ok"}));
        r.traces.push(Trace {
            column: "a".into(),
            messages: json!(["\u{0}"]),
        });
        assert!(!make_storable(&mut r));
        assert!(matches!(r.outcome, RecordOutcome::Completed { .. }));
        assert_eq!(r.traces[0].messages, json!(["\u{FFFD}"]));
    }
}
