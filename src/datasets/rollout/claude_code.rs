//! Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`): follows
//! DataDesigner 0.9.6's `engine/resources/agent_rollout/claude_code.py`
//! (`ClaudeCodeAgentRolloutFormatHandler`, `load_claude_session_index`).

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::Tree;
use super::common::{
    Failure, Parsed, Record, build_message, coerce_nonempty, coerce_optional_str,
    keep_first_truthy, load_jsonl_rows, min_max_timestamps, parse_error, path_name, path_parts,
    path_stem, path_suffix, require_string, stringify_json_value, stringify_text_value, tool_call,
};
use super::pyjson;
use crate::pytext::{py_repr, py_str, truthy, type_name};

/// `sessions-index.json` entries by session id.
pub(crate) type SessionIndex = HashMap<String, Map<String, Value>>;

/// `is_handled_file`: `.jsonl` transcripts, except anything under a `tool-results` folder and
/// the global `history.jsonl`.
pub(crate) fn is_handled_file(rel: &str) -> bool {
    path_suffix(rel) == ".jsonl"
        && !path_parts(rel).contains(&"tool-results")
        && path_name(rel) != "history.jsonl"
}

/// `load_claude_session_index`: every `sessions-index.json` in the tree (only the top one
/// unless recursive), later files overriding earlier ones. A malformed index is skipped with a
/// warning; one that is not UTF-8 escapes the loader's `except` (as in DataDesigner, which then
/// reports the file being parsed as malformed), and one whose top level is not an object
/// raises `AttributeError`, which ends DataDesigner's read.
pub(crate) fn load_session_index(
    tree: &Tree<'_>,
    recursive: bool,
    warnings: &mut Vec<String>,
) -> Parsed<SessionIndex> {
    let mut index = SessionIndex::new();
    for rel in tree.find_named("sessions-index.json", recursive) {
        let index_path = tree.abs(rel);
        let text = pyjson::read_text(tree.bytes(rel)?).map_err(Failure::Decode)?;
        let payload = match pyjson::loads(&text) {
            Ok(Value::Object(payload)) => payload,
            Ok(other) => {
                return Err(Failure::Fatal(format!(
                    "'{}' object has no attribute 'get'",
                    type_name(&other)
                )));
            }
            Err(error) => {
                warnings.push(format!(
                    "Skipping malformed Claude sessions index {index_path}: {}",
                    error.full
                ));
                continue;
            }
        };
        let entries = match payload.get("entries") {
            None => continue,
            Some(Value::Array(entries)) => entries,
            Some(_) => {
                warnings.push(format!(
                    "Skipping malformed Claude sessions index {index_path}: Claude sessions \
                     index at {index_path} is missing an 'entries' list"
                ));
                continue;
            }
        };
        for entry in entries {
            if let Value::Object(entry) = entry
                && let Some(session_id) = coerce_nonempty(entry.get("sessionId"))
            {
                index.insert(session_id, entry.clone());
            }
        }
    }
    Ok(index)
}

/// `parse_file`: one transcript becomes one row; its index entry (by session id, else the
/// file stem) adds the project path, summary and first prompt.
pub(crate) fn parse_file(
    tree: &Tree<'_>,
    rel: &str,
    index: &SessionIndex,
    warnings: &mut Vec<String>,
) -> Parsed<Vec<Record>> {
    let file_path = tree.abs(rel);
    let rows = load_jsonl_rows(tree, rel)?;
    if rows.is_empty() {
        warnings.push(format!("Skipping empty Claude Code trace file {file_path}"));
        return Ok(Vec::new());
    }

    let mut messages = Vec::new();
    let mut timestamps = Vec::new();
    let mut versions = BTreeSet::new();
    let mut raw_types = BTreeSet::new();
    let (mut session_id, mut agent_id, mut cwd, mut git_branch) = (None, None, None, None);
    let mut is_sidechain = false;

    for record in &rows {
        raw_types.insert(
            record
                .get("type")
                .map_or_else(|| "unknown".to_owned(), py_str),
        );
        if let Some(timestamp) = coerce_nonempty(record.get("timestamp")) {
            timestamps.push(timestamp);
        }
        session_id = keep_first_truthy(session_id, record.get("sessionId"));
        agent_id = keep_first_truthy(agent_id, record.get("agentId"));
        cwd = keep_first_truthy(cwd, record.get("cwd"));
        git_branch = keep_first_truthy(git_branch, record.get("gitBranch"));
        if let Some(version) = coerce_nonempty(record.get("version")) {
            versions.insert(version);
        }
        is_sidechain = is_sidechain || record.get("isSidechain").is_some_and(truthy);

        match record.get("type").and_then(Value::as_str) {
            Some("assistant") => messages.extend(assistant_messages(record)?),
            Some("user") => messages.extend(user_messages(record)?),
            _ => {}
        }
    }

    let (started_at, ended_at) = min_max_timestamps(&timestamps);
    let session_key = session_id
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| path_stem(rel).to_owned());
    let empty = Map::new();
    let index_entry = index.get(&session_key).unwrap_or(&empty);
    let project_path = coerce_nonempty(index_entry.get("projectPath")).or_else(|| cwd.clone());
    let trace_id = match agent_id.as_deref() {
        Some(agent) if !agent.is_empty() => format!("{session_key}:{agent}"),
        _ => session_key.clone(),
    };

    let mut source_meta = Map::new();
    source_meta.insert("record_count".into(), Value::from(rows.len()));
    source_meta.insert("record_types".into(), raw_types.into_iter().collect());
    if !versions.is_empty() {
        source_meta.insert("claude_versions".into(), versions.into_iter().collect());
    }
    if let Some(summary) = coerce_nonempty(index_entry.get("summary")) {
        source_meta.insert("summary".into(), Value::String(summary));
    }
    if let Some(first_prompt) = coerce_nonempty(index_entry.get("firstPrompt")) {
        source_meta.insert("first_prompt".into(), Value::String(first_prompt));
    }

    Ok(vec![Record {
        trace_id,
        source_kind: "claude_code",
        source_path: file_path,
        root_session_id: session_key,
        agent_id,
        is_sidechain,
        cwd,
        project_path,
        git_branch,
        started_at,
        ended_at,
        messages,
        source_meta,
    }])
}

/// `normalize_content_block`: text-like blocks become plain text blocks, other typed blocks
/// (images, documents) pass through.
fn normalize_content_block(block: &Map<String, Value>) -> Value {
    let block_type = coerce_optional_str(block.get("type"));
    let is_text = matches!(
        block_type.as_deref(),
        Some("text" | "input_text" | "output_text")
    );
    if (is_text || block_type.is_none()) && block.contains_key("text") {
        return text_block(stringify_text_value(block.get("text")));
    }
    if block_type.is_some() {
        return Value::Object(block.clone());
    }
    text_block(py_repr(&Value::Object(block.clone())))
}

fn text_block(text: String) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), Value::String("text".into()));
    block.insert("text".into(), Value::String(text));
    Value::Object(block)
}

/// `coerce_raw_blocks`: message content as a list of dict blocks.
fn coerce_raw_blocks(content: Option<&Value>) -> Vec<Map<String, Value>> {
    let as_block = |value: &Value| match value {
        Value::Object(map) => map.clone(),
        other => match text_block(stringify_text_value(Some(other))) {
            Value::Object(map) => map,
            _ => Map::new(),
        },
    };
    match content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(blocks)) => blocks.iter().map(as_block).collect(),
        Some(other) => vec![as_block(other)],
    }
}

/// A `tool_result` block as a tool message.
fn tool_result_message(block: &Map<String, Value>) -> Parsed<Value> {
    let id = require_string(block.get("tool_use_id"), "Claude tool_result tool_use_id")?;
    let content = block.get("content").unwrap_or(&Value::Null);
    build_message("tool", content, None, Vec::new(), Some(id))
}

fn message_payload<'r>(
    record: &'r Map<String, Value>,
    who: &str,
) -> Parsed<&'r Map<String, Value>> {
    match record.get("message") {
        Some(Value::Object(payload)) => Ok(payload),
        _ => parse_error(format!(
            "Claude {who} record is missing a message payload: {}",
            py_repr(&Value::Object(record.clone()))
        )),
    }
}

/// `normalize_claude_assistant_messages`: text and other blocks form the assistant message,
/// thinking blocks its reasoning, `tool_use` blocks its tool calls; `tool_result` blocks
/// nested in an assistant record follow as tool messages.
fn assistant_messages(record: &Map<String, Value>) -> Parsed<Vec<Value>> {
    let payload = message_payload(record, "assistant")?;
    let mut content = Vec::new();
    let mut reasoning = Vec::new();
    let mut tool_calls = Vec::new();
    let mut tool_messages = Vec::new();
    for block in coerce_raw_blocks(payload.get("content")) {
        match coerce_optional_str(block.get("type")).as_deref() {
            Some("thinking") => {
                let text = coerce_nonempty(block.get("thinking"))
                    .or_else(|| coerce_nonempty(block.get("text")));
                reasoning.extend(text);
            }
            Some("tool_use") => {
                let id = require_string(block.get("id"), "Claude tool_use id")?;
                let name = require_string(block.get("name"), "Claude tool_use name")?;
                let arguments = stringify_json_value(block.get("input"));
                tool_calls.push(tool_call(Value::String(id), Value::String(name), arguments));
            }
            Some("tool_result") => tool_messages.push(tool_result_message(&block)?),
            _ => content.push(normalize_content_block(&block)),
        }
    }
    let mut messages = Vec::new();
    if !content.is_empty() || !reasoning.is_empty() || !tool_calls.is_empty() {
        let reasoning = (!reasoning.is_empty()).then(|| reasoning.join("\n\n"));
        messages.push(build_message(
            "assistant",
            &Value::Array(content),
            reasoning,
            tool_calls,
            None,
        )?);
    }
    messages.extend(tool_messages);
    Ok(messages)
}

/// `normalize_claude_user_messages`: a user message, with `tool_result` blocks split out
/// into tool messages after it.
fn user_messages(record: &Map<String, Value>) -> Parsed<Vec<Value>> {
    let payload = message_payload(record, "user")?;
    let content = payload.get("content");
    match content {
        Some(Value::Object(block))
            if coerce_optional_str(block.get("type")).as_deref() == Some("tool_result") =>
        {
            Ok(vec![tool_result_message(block)?])
        }
        Some(Value::Array(_)) => {
            let mut user_content = Vec::new();
            let mut tool_messages = Vec::new();
            for block in coerce_raw_blocks(content) {
                if coerce_optional_str(block.get("type")).as_deref() == Some("tool_result") {
                    tool_messages.push(tool_result_message(&block)?);
                } else {
                    user_content.push(normalize_content_block(&block));
                }
            }
            let mut messages = Vec::new();
            if !user_content.is_empty() {
                messages.push(build_message(
                    "user",
                    &Value::Array(user_content),
                    None,
                    Vec::new(),
                    None,
                )?);
            }
            messages.extend(tool_messages);
            Ok(messages)
        }
        other => Ok(vec![build_message(
            "user",
            other.unwrap_or(&Value::Null),
            None,
            Vec::new(),
            None,
        )?]),
    }
}
