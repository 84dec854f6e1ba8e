//! Hermes Agent sessions (`~/.hermes/sessions`): follows DataDesigner 0.9.6's
//! `engine/resources/agent_rollout/hermes_agent.py` (`HermesAgentRolloutFormatHandler`). CLI
//! session logs are `session_*.json`; gateway transcripts are `<session id>.jsonl`, described
//! by `sessions.json` indexes.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::Tree;
use super::common::{
    Failure, Parsed, Record, build_message, coerce_nonempty, coerce_optional_str, load_json_object,
    load_jsonl_rows, normalize_message_content, normalize_message_role, parse_error, path_name,
    path_stem, path_suffix, py_or, require_string, stringify_json_value, tool_call,
};
use crate::pytext::type_name;

/// `sessions.json` entries by session id.
pub(crate) type SessionIndex = HashMap<String, Map<String, Value>>;

/// `is_handled_file`: `session_*.json` logs and `.jsonl` transcripts, never `sessions.json`.
pub(crate) fn is_handled_file(rel: &str) -> bool {
    let name = path_name(rel);
    if name == "sessions.json" {
        return false;
    }
    match path_suffix(rel) {
        ".json" => name.starts_with("session_"),
        suffix => suffix == ".jsonl",
    }
}

/// `should_warn_unhandled_file`: other JSON files Hermes writes next to its sessions (request
/// dumps, `sessions.json`) are skipped quietly.
pub(crate) fn should_warn_unhandled_file(rel: &str) -> bool {
    path_suffix(rel) != ".json" || path_name(rel).starts_with("session_")
}

/// `load_hermes_session_index`: a `sessions.json` maps session keys to the active session id
/// (a string) or to a richer entry carrying `session_id`. Parse errors skip the index with a
/// warning; a decode error escapes, as in DataDesigner.
pub(crate) fn load_session_index(
    tree: &Tree<'_>,
    recursive: bool,
    warnings: &mut Vec<String>,
) -> Parsed<SessionIndex> {
    let mut index = SessionIndex::new();
    for rel in tree.find_named("sessions.json", recursive) {
        let payload = match load_json_object(tree, rel) {
            Ok(payload) => payload,
            Err(Failure::Parse(message)) => {
                let index_path = tree.abs(rel);
                warnings.push(format!(
                    "Skipping malformed Hermes sessions index {index_path}: {message}"
                ));
                continue;
            }
            Err(other) => return Err(other),
        };
        for (session_key, entry) in payload {
            match entry {
                Value::String(session_id) if !session_id.is_empty() => {
                    let mut meta = Map::new();
                    meta.insert("session_key".into(), Value::String(session_key));
                    index.insert(session_id, meta);
                }
                Value::Object(mut meta) => {
                    let Some(session_id) = coerce_nonempty(meta.get("session_id")) else {
                        continue;
                    };
                    meta.entry("session_key")
                        .or_insert(Value::String(session_key));
                    index.insert(session_id, meta);
                }
                _ => {}
            }
        }
    }
    Ok(index)
}

/// `parse_file`: `.json` files are CLI session logs, the rest gateway transcripts.
pub(crate) fn parse_file(
    tree: &Tree<'_>,
    rel: &str,
    index: &SessionIndex,
    warnings: &mut Vec<String>,
) -> Parsed<Vec<Record>> {
    if path_suffix(rel) == ".json" {
        return Ok(vec![parse_cli_session_log(tree, rel)?]);
    }
    parse_gateway_transcript(tree, rel, index, warnings)
}

fn record(file_path: String, session_id: String, messages: Vec<Value>) -> Record {
    Record {
        trace_id: session_id.clone(),
        source_kind: "hermes_agent",
        source_path: file_path,
        root_session_id: session_id,
        agent_id: None,
        is_sidechain: false,
        cwd: None,
        project_path: None,
        git_branch: None,
        started_at: None,
        ended_at: None,
        messages,
        source_meta: Map::new(),
    }
}

/// `parse_hermes_cli_session_log`.
fn parse_cli_session_log(tree: &Tree<'_>, rel: &str) -> Parsed<Record> {
    let file_path = tree.abs(rel);
    let payload = load_json_object(tree, rel)?;
    let Some(Value::Array(raw_messages)) = payload.get("messages") else {
        return parse_error(format!(
            "Hermes CLI session at {file_path} is missing a 'messages' list"
        ));
    };
    let system_prompt = coerce_optional_str(payload.get("system_prompt"));
    let messages = normalize_messages(raw_messages, &file_path, system_prompt)?;
    let session_id = coerce_nonempty(payload.get("session_id")).unwrap_or_else(|| {
        let stem = path_stem(rel);
        stem.strip_prefix("session_").unwrap_or(stem).to_owned()
    });
    let tool_names = declared_tool_names(payload.get("tools"));

    let mut meta = Map::new();
    meta.insert("record_count".into(), Value::from(raw_messages.len()));
    meta.insert(
        "session_format".into(),
        Value::String("cli_session_log".into()),
    );
    meta.insert("available_tool_count".into(), Value::from(tool_names.len()));
    meta.insert(
        "available_tool_names".into(),
        tool_names.into_iter().collect(),
    );
    meta.insert(
        "finish_reasons".into(),
        finish_reasons(raw_messages).into_iter().collect(),
    );
    for field in ["model", "base_url", "platform"] {
        if let Some(value) = coerce_nonempty(payload.get(field)) {
            meta.insert(field.into(), Value::String(value));
        }
    }
    if let Some(Value::String(prompt)) = payload.get("system_prompt")
        && !prompt.is_empty()
    {
        meta.insert("has_system_prompt".into(), Value::Bool(true));
        meta.insert(
            "system_prompt_chars".into(),
            Value::from(prompt.chars().count()),
        );
    }
    if let Some(tools @ Value::Array(list)) = payload.get("tools")
        && !list.is_empty()
    {
        meta.insert(
            "tools".into(),
            Value::String(stringify_json_value(Some(tools))),
        );
    }

    let mut record = record(file_path, session_id, messages);
    record.started_at = coerce_optional_str(payload.get("session_start"));
    record.ended_at = coerce_optional_str(payload.get("last_updated"));
    record.source_meta = meta;
    Ok(record)
}

/// `parse_hermes_gateway_transcript`: the file stem is the session id that `sessions.json`
/// entries are keyed by.
fn parse_gateway_transcript(
    tree: &Tree<'_>,
    rel: &str,
    index: &SessionIndex,
    warnings: &mut Vec<String>,
) -> Parsed<Vec<Record>> {
    let file_path = tree.abs(rel);
    let rows = load_jsonl_rows(tree, rel)?;
    if rows.is_empty() {
        warnings.push(format!(
            "Skipping empty Hermes Agent transcript file {file_path}"
        ));
        return Ok(Vec::new());
    }
    let raw_messages: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    let messages = normalize_messages(&raw_messages, &file_path, None)?;
    let session_id = path_stem(rel).to_owned();
    let empty = Map::new();
    let session_meta = index.get(&session_id).unwrap_or(&empty);

    let mut meta = Map::new();
    meta.insert("record_count".into(), Value::from(raw_messages.len()));
    meta.insert(
        "session_format".into(),
        Value::String("gateway_transcript".into()),
    );
    meta.insert(
        "finish_reasons".into(),
        finish_reasons(&raw_messages).into_iter().collect(),
    );
    meta.insert(
        "tool_names_used".into(),
        used_tool_names(&raw_messages).into_iter().collect(),
    );
    for field in [
        "session_key",
        "display_name",
        "platform",
        "chat_type",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "total_tokens",
        "last_prompt_tokens",
        "estimated_cost_usd",
        "cost_status",
        "memory_flushed",
    ] {
        if let Some(value) = session_meta.get(field) {
            meta.insert(field.into(), value.clone());
        }
    }
    if let Some(origin @ Value::Object(map)) = session_meta.get("origin")
        && !map.is_empty()
    {
        meta.insert("origin".into(), origin.clone());
    }

    let mut record = record(file_path, session_id, messages);
    record.started_at = coerce_optional_str(session_meta.get("created_at"));
    record.ended_at = coerce_optional_str(session_meta.get("updated_at"));
    record.source_meta = meta;
    Ok(vec![record])
}

/// `normalize_hermes_messages`: OpenAI-style messages, with the session's system prompt (if
/// any) first.
fn normalize_messages(
    raw_messages: &[Value],
    file_path: &str,
    system_prompt: Option<String>,
) -> Parsed<Vec<Value>> {
    let mut messages = Vec::new();
    if let Some(prompt) = system_prompt.filter(|p| !p.is_empty()) {
        messages.push(build_message(
            "system",
            &Value::String(prompt),
            None,
            Vec::new(),
            None,
        )?);
    }
    for (index, raw) in raw_messages.iter().enumerate() {
        let number = index + 1;
        let Value::Object(message) = raw else {
            return parse_error(format!(
                "Expected Hermes message object at index {number} in {file_path}, got {}",
                type_name(raw)
            ));
        };
        let context = format!("Hermes message #{number} in {file_path}");
        let role = normalize_message_role(message.get("role"), &context)?;
        let content = normalize_message_content(message.get("content"));
        if role == "tool" {
            let id = require_string(
                message.get("tool_call_id"),
                &format!("Hermes tool message tool_call_id #{number} in {file_path}"),
            )?;
            messages.push(build_message("tool", &content, None, Vec::new(), Some(id))?);
            continue;
        }
        let reasoning = coerce_optional_str(message.get("reasoning"));
        let tool_calls = normalize_tool_calls(message.get("tool_calls"), file_path, number)?;
        messages.push(build_message(role, &content, reasoning, tool_calls, None)?);
    }
    Ok(messages)
}

/// `normalize_hermes_tool_calls`: id from `id` or `call_id`, name and arguments from the
/// nested `function` object or the call itself.
fn normalize_tool_calls(raw: Option<&Value>, file_path: &str, number: usize) -> Parsed<Vec<Value>> {
    let calls = match raw {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(other) => {
            return parse_error(format!(
                "Expected Hermes tool_calls list for message #{number} in {file_path}, got {}",
                type_name(other)
            ));
        }
    };
    let empty = Map::new();
    let mut out = Vec::with_capacity(calls.len());
    for (index, raw_call) in calls.iter().enumerate() {
        let call_number = index + 1;
        let Value::Object(call) = raw_call else {
            return parse_error(format!(
                "Expected Hermes tool call object at message #{number} call #{call_number} in \
                 {file_path}, got {}",
                type_name(raw_call)
            ));
        };
        let function = match call.get("function") {
            Some(Value::Object(function)) => function,
            _ => &empty,
        };
        let context =
            format!("Hermes tool call #{call_number} on message #{number} in {file_path}");
        let id = require_string(
            py_or(call.get("id"), call.get("call_id")),
            &format!("{context} id"),
        )?;
        let name = require_string(
            py_or(function.get("name"), call.get("name")),
            &format!("{context} name"),
        )?;
        let arguments = if function.contains_key("arguments") {
            function.get("arguments")
        } else {
            call.get("arguments")
        };
        out.push(tool_call(
            Value::String(id),
            Value::String(name),
            stringify_json_value(arguments),
        ));
    }
    Ok(out)
}

/// Distinct non-empty strings in first-seen order.
fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    values.filter(|v| seen.insert(v.clone())).collect()
}

/// `extract_hermes_tool_names`: tool names the session declared.
fn declared_tool_names(raw_tools: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(tools)) = raw_tools else {
        return Vec::new();
    };
    distinct(tools.iter().filter_map(|tool| match tool.get("function") {
        Some(Value::Object(function)) => coerce_nonempty(function.get("name")),
        _ => None,
    }))
}

/// `_extract_finish_reasons`: assistant finish reasons in first-seen order.
fn finish_reasons(raw_messages: &[Value]) -> Vec<String> {
    distinct(raw_messages.iter().filter_map(|message| {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            return None;
        }
        coerce_nonempty(message.get("finish_reason"))
    }))
}

/// `_extract_used_tool_names`: tool names the messages' tool calls used.
fn used_tool_names(raw_messages: &[Value]) -> Vec<String> {
    distinct(raw_messages.iter().flat_map(|message| {
        let calls = match message.get("tool_calls") {
            Some(Value::Array(calls)) => calls.as_slice(),
            _ => &[],
        };
        calls.iter().filter_map(|call| match call.get("function") {
            Some(Value::Object(function)) => coerce_nonempty(function.get("name")),
            _ => None,
        })
    }))
}
