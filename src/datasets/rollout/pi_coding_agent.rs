//! Pi Coding Agent sessions (`~/.pi/agent/sessions/<cwd>/<timestamp>_<id>.jsonl`): follows
//! DataDesigner 0.9.6's `engine/resources/agent_rollout/pi_coding_agent.py`
//! (`PiCodingAgentRolloutFormatHandler`). A session is a tree of entries linked by
//! `id`/`parentId`; the row follows the active path, from the last entry back to the root.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

use super::Tree;
use super::common::{
    Failure, Parsed, Record, build_message, coerce_nonempty, coerce_optional_str, load_jsonl_rows,
    normalize_message_content, parse_error, path_suffix, require_string, stringify_json_value,
    tool_call,
};
use crate::pytext::{py_str, truthy, type_name};

type Entry = Map<String, Value>;

/// `is_handled_file`: any `.jsonl` file.
pub(crate) fn is_handled_file(rel: &str) -> bool {
    path_suffix(rel) == ".jsonl"
}

/// `parse_file` / `parse_pi_session`.
pub(crate) fn parse_file(
    tree: &Tree<'_>,
    rel: &str,
    warnings: &mut Vec<String>,
) -> Parsed<Vec<Record>> {
    let file_path = tree.abs(rel);
    let fp = file_path.as_str();
    let rows = load_jsonl_rows(tree, rel)?;
    let Some((header, entries)) = rows.split_first() else {
        warnings.push(format!("Skipping empty Pi Coding Agent session file {fp}"));
        return Ok(Vec::new());
    };
    if header.get("type").and_then(Value::as_str) != Some("session") {
        return parse_error(format!(
            "Pi session at {fp} is missing a session header as the first entry"
        ));
    }
    let session_id = require_string(header.get("id"), &format!("Pi session header id in {fp}"))?;
    let cwd = coerce_optional_str(header.get("cwd"));

    let mut messages = Vec::new();
    let mut entry_types = BTreeSet::new();
    let mut models_used = Vec::new();
    let mut seen_models = HashSet::new();
    let mut stop_reasons = Vec::new();
    let mut seen_stop_reasons = HashSet::new();
    let mut bash_execution_count = 0usize;

    for entry in active_path(entries)? {
        let entry_type = coerce_nonempty(entry.get("type")).unwrap_or_else(|| "unknown".into());
        entry_types.insert(entry_type.clone());
        match entry_type.as_str() {
            "model_change" => {
                if let Some(model) = coerce_nonempty(entry.get("modelId"))
                    && seen_models.insert(model.clone())
                {
                    models_used.push(model);
                }
                continue;
            }
            // A compaction replaces earlier context; a branch summary describes an abandoned
            // branch. Both reach the model as system text.
            "compaction" | "branch_summary" => {
                if let Some(summary) = coerce_nonempty(entry.get("summary")) {
                    messages.push(system_message(&Value::String(summary))?);
                }
                continue;
            }
            // Extension-injected context, unlike `custom` entries, which are state only.
            "custom_message" => {
                if entry.get("display").is_some_and(truthy) {
                    let content = normalize_message_content(entry.get("content"));
                    messages.push(system_message(&content)?);
                }
                continue;
            }
            "message" => {}
            _ => continue,
        }
        let Some(Value::Object(raw_message)) = entry.get("message") else {
            continue;
        };
        let entry_id = coerce_nonempty(entry.get("id")).unwrap_or_default();
        let role = coerce_optional_str(raw_message.get("role"));
        if role.as_deref() == Some("assistant") {
            if let Some(reason) = coerce_nonempty(raw_message.get("stopReason"))
                && seen_stop_reasons.insert(reason.clone())
            {
                stop_reasons.push(reason);
            }
            if let Some(model) = coerce_nonempty(raw_message.get("model"))
                && seen_models.insert(model.clone())
            {
                models_used.push(model);
            }
        }
        if role.as_deref() == Some("bashExecution") {
            bash_execution_count += 1;
        }
        messages.extend(normalize_message(
            raw_message,
            role.as_deref(),
            fp,
            &entry_id,
        )?);
    }

    // Timestamps come from every entry, on the active path or not, and are ordered as strings.
    let timestamps: Vec<String> = std::iter::once(header)
        .chain(entries)
        .filter_map(|entry| coerce_nonempty(entry.get("timestamp")))
        .collect();

    let mut source_meta = Map::new();
    source_meta.insert("record_count".into(), Value::from(rows.len()));
    source_meta.insert("entry_types".into(), entry_types.into_iter().collect());
    source_meta.insert("stop_reasons".into(), stop_reasons.into_iter().collect());
    if let Some(version) = header.get("version").filter(|v| !v.is_null()) {
        source_meta.insert("session_version".into(), version.clone());
    }
    if !models_used.is_empty() {
        source_meta.insert("models_used".into(), models_used.into_iter().collect());
    }
    if has_branches(entries) {
        source_meta.insert("has_branches".into(), Value::Bool(true));
    }
    if bash_execution_count > 0 {
        source_meta.insert(
            "bash_execution_count".into(),
            Value::from(bash_execution_count),
        );
    }
    if let Some(parent) = coerce_nonempty(header.get("parentSession")) {
        source_meta.insert("parent_session".into(), Value::String(parent));
    }

    Ok(vec![Record {
        trace_id: session_id.clone(),
        source_kind: "pi_coding_agent",
        source_path: file_path.clone(),
        root_session_id: session_id,
        agent_id: None,
        is_sidechain: false,
        project_path: cwd.clone(),
        cwd,
        git_branch: None,
        started_at: timestamps.iter().min().cloned(),
        ended_at: timestamps.iter().max().cloned(),
        messages,
        source_meta,
    }])
}

fn system_message(content: &Value) -> Parsed<Value> {
    build_message("system", content, None, Vec::new(), None)
}

/// `_resolve_active_path`: from the last entry up the `parentId` links (stopping at a missing
/// parent or a repeated id), returned root first. Python looks the parent id up in a dict, so
/// a list or object there raises `TypeError`, which ends DataDesigner's read.
fn active_path(entries: &[Entry]) -> Parsed<Vec<&Entry>> {
    let Some(last) = entries.last() else {
        return Ok(Vec::new());
    };
    let mut by_id: HashMap<&str, &Entry> = HashMap::new();
    for entry in entries {
        if let Some(Value::String(id)) = entry.get("id")
            && !id.is_empty()
        {
            by_id.insert(id, entry);
        }
    }
    let mut path = Vec::new();
    let mut visited: HashSet<&str> = HashSet::new();
    let mut current = Some(last);
    while let Some(entry) = current {
        if let Some(Value::String(id)) = entry.get("id")
            && !visited.insert(id)
        {
            break;
        }
        path.push(entry);
        current = match entry.get("parentId") {
            None | Some(Value::Null) => break,
            Some(Value::String(parent)) => by_id.get(parent.as_str()).copied(),
            Some(unhashable @ (Value::Array(_) | Value::Object(_))) => {
                return Err(Failure::Fatal(format!(
                    "unhashable type: '{}'",
                    type_name(unhashable)
                )));
            }
            Some(_) => None,
        };
    }
    path.reverse();
    Ok(path)
}

/// `_detect_branches`: whether two entries share a parent.
fn has_branches(entries: &[Entry]) -> bool {
    let mut seen = HashSet::new();
    entries.iter().any(|entry| match entry.get("parentId") {
        Some(Value::String(parent)) if !parent.is_empty() => !seen.insert(parent.as_str()),
        _ => false,
    })
}

/// `_normalize_pi_message`: one Pi `AgentMessage` as chat messages.
fn normalize_message(
    raw: &Entry,
    role: Option<&str>,
    fp: &str,
    entry_id: &str,
) -> Parsed<Vec<Value>> {
    let content = || normalize_message_content(raw.get("content"));
    Ok(match role {
        Some("user") => vec![build_message("user", &content(), None, Vec::new(), None)?],
        Some("assistant") => vec![assistant_message(raw)?],
        Some("toolResult") => {
            let id = require_string(
                raw.get("toolCallId"),
                &format!("Pi toolResult toolCallId in {fp}"),
            )?;
            vec![build_message(
                "tool",
                &content(),
                None,
                Vec::new(),
                Some(id),
            )?]
        }
        Some("bashExecution") => bash_execution(raw, entry_id)?,
        Some("custom") if raw.get("display").is_some_and(truthy) => {
            vec![system_message(&content())?]
        }
        Some("compactionSummary" | "branchSummary") => match coerce_nonempty(raw.get("summary")) {
            Some(summary) => vec![system_message(&Value::String(summary))?],
            None => Vec::new(),
        },
        _ => Vec::new(),
    })
}

/// `_normalize_pi_assistant_message`: text blocks joined into the content, thinking blocks
/// into the reasoning, `toolCall` blocks as tool calls (id and name copied as they are).
fn assistant_message(raw: &Entry) -> Parsed<Value> {
    let mut text_parts: Vec<String> = Vec::new();
    let mut thinking_parts = Vec::new();
    let mut tool_calls = Vec::new();
    match raw.get("content") {
        Some(Value::Array(blocks)) => {
            for block in blocks {
                let Value::Object(block) = block else {
                    if let Value::String(text) = block
                        && !text.is_empty()
                    {
                        text_parts.push(text.clone());
                    }
                    continue;
                };
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => text_parts.extend(coerce_nonempty(block.get("text"))),
                    Some("thinking") => {
                        thinking_parts.extend(coerce_nonempty(block.get("thinking")))
                    }
                    Some("toolCall") => {
                        let or_empty = |key: &str| {
                            block
                                .get(key)
                                .cloned()
                                .unwrap_or_else(|| Value::String(String::new()))
                        };
                        let arguments = stringify_json_value(block.get("arguments"));
                        tool_calls.push(tool_call(or_empty("id"), or_empty("name"), arguments));
                    }
                    _ => {}
                }
            }
        }
        Some(Value::String(text)) => text_parts.push(text.clone()),
        _ => {}
    }
    let content = Value::String(text_parts.join("\n\n"));
    let reasoning = (!thinking_parts.is_empty()).then(|| thinking_parts.join("\n\n"));
    build_message("assistant", &content, reasoning, tool_calls, None)
}

/// `_normalize_pi_bash_execution`: a user-run shell command as a synthetic `bash` tool call
/// and its result, unless excluded from the model's context.
fn bash_execution(raw: &Entry, entry_id: &str) -> Parsed<Vec<Value>> {
    if raw.get("excludeFromContext").is_some_and(truthy) {
        return Ok(Vec::new());
    }
    let id = if entry_id.is_empty() {
        "bash_unknown".to_owned()
    } else {
        format!("bash_{entry_id}")
    };
    let command = coerce_nonempty(raw.get("command")).unwrap_or_default();
    let output = coerce_nonempty(raw.get("output")).unwrap_or_default();
    let mut parts = Vec::new();
    if !output.is_empty() {
        parts.push(output);
    }
    if let Some(exit_code) = raw.get("exitCode").filter(|v| !v.is_null()) {
        parts.push(format!("[exit code: {}]", py_str(exit_code)));
    }
    let mut arguments = Map::new();
    arguments.insert("command".into(), Value::String(command));
    let arguments = stringify_json_value(Some(&Value::Object(arguments)));
    let call = tool_call(
        Value::String(id.clone()),
        Value::String("bash".into()),
        arguments,
    );
    Ok(vec![
        build_message(
            "assistant",
            &Value::String(String::new()),
            None,
            vec![call],
            None,
        )?,
        build_message(
            "tool",
            &Value::String(parts.join("\n")),
            None,
            Vec::new(),
            Some(id),
        )?,
    ])
}
