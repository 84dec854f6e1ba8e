//! Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): follows DataDesigner
//! 0.9.6's `engine/resources/agent_rollout/codex.py` (`CodexAgentRolloutFormatHandler`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::Tree;
use super::common::{
    Parsed, Record, build_message, coerce_nonempty, coerce_optional_str, load_jsonl_rows,
    min_max_timestamps, path_name, path_stem, path_suffix, require_string, stringify_json_value,
    stringify_text_value, tool_call,
};
use crate::pytext::repr_str;

/// `is_handled_file`: `.jsonl` files whose name starts with `rollout-`.
pub(crate) fn is_handled_file(rel: &str) -> bool {
    path_suffix(rel) == ".jsonl" && path_name(rel).starts_with("rollout-")
}

/// `parse_file`: one rollout becomes one row. Reasoning (summaries of `reasoning` items and
/// `agent_reasoning` events) waits for the next assistant message or tool call.
pub(crate) fn parse_file(
    tree: &Tree<'_>,
    rel: &str,
    warnings: &mut Vec<String>,
) -> Parsed<Vec<Record>> {
    let file_path = tree.abs(rel);
    let fp = file_path.as_str();
    let rows = load_jsonl_rows(tree, rel)?;
    if rows.is_empty() {
        warnings.push(format!("Skipping empty Codex rollout file {fp}"));
        return Ok(Vec::new());
    }

    let mut messages = Vec::new();
    let mut timestamps = Vec::new();
    let mut pending_reasoning: Vec<String> = Vec::new();
    let mut raw_types = BTreeSet::new();
    let mut item_types = BTreeSet::new();
    let empty = Map::new();
    let mut session_meta = &empty;

    for record in &rows {
        let record_type = coerce_nonempty(record.get("type")).unwrap_or_else(|| "unknown".into());
        raw_types.insert(record_type.clone());
        if let Some(timestamp) = coerce_nonempty(record.get("timestamp")) {
            timestamps.push(timestamp);
        }
        let Some(Value::Object(payload)) = record.get("payload") else {
            continue;
        };
        match record_type.as_str() {
            "session_meta" => {
                session_meta = payload;
                if let Some(timestamp) = coerce_nonempty(payload.get("timestamp")) {
                    timestamps.push(timestamp);
                }
                continue;
            }
            "event_msg" => {
                if coerce_optional_str(payload.get("type")).as_deref() == Some("agent_reasoning")
                    && let Some(text) = coerce_nonempty(payload.get("text"))
                {
                    pending_reasoning.push(text);
                }
                continue;
            }
            "response_item" => {}
            _ => continue,
        }

        let item_type = coerce_nonempty(payload.get("type")).unwrap_or_else(|| "unknown".into());
        item_types.insert(item_type.clone());
        let take_reasoning = |pending: &mut Vec<String>| {
            let joined = (!pending.is_empty()).then(|| pending.join("\n\n"));
            pending.clear();
            joined
        };
        match item_type.as_str() {
            "message" => {
                let role =
                    require_string(payload.get("role"), &format!("Codex message role in {fp}"))?;
                let reasoning =
                    take_reasoning(&mut pending_reasoning).filter(|_| role == "assistant");
                let content = payload.get("content").unwrap_or(&Value::Null);
                messages.push(build_message(&role, content, reasoning, Vec::new(), None)?);
            }
            "function_call" | "custom_tool_call" | "apply_patch_call" => {
                let reasoning = take_reasoning(&mut pending_reasoning);
                let id = require_string(
                    payload.get("call_id"),
                    &format!("Codex tool call id in {fp}"),
                )?;
                let name =
                    require_string(payload.get("name"), &format!("Codex tool name in {fp}"))?;
                let arguments = if payload.contains_key("arguments") {
                    stringify_json_value(payload.get("arguments"))
                } else {
                    stringify_text_value(payload.get("input"))
                };
                let call = tool_call(Value::String(id), Value::String(name), arguments);
                let content = Value::String(String::new());
                messages.push(build_message(
                    "assistant",
                    &content,
                    reasoning,
                    vec![call],
                    None,
                )?);
            }
            "function_call_output" | "custom_tool_call_output" | "apply_patch_call_output" => {
                let id = require_string(
                    payload.get("call_id"),
                    &format!("Codex tool output id in {fp}"),
                )?;
                let output = payload.get("output").unwrap_or(&Value::Null);
                messages.push(build_message("tool", output, None, Vec::new(), Some(id))?);
            }
            "reasoning" => {
                if let Some(Value::Array(summaries)) = payload.get("summary") {
                    pending_reasoning.extend(summaries.iter().filter_map(
                        |summary| match summary {
                            Value::Object(summary) => coerce_nonempty(summary.get("text")),
                            _ => None,
                        },
                    ));
                }
            }
            other => warnings.push(format!(
                "Skipping unrecognized Codex response_item type {} in {fp}",
                repr_str(other)
            )),
        }
    }

    let session_id =
        coerce_nonempty(session_meta.get("id")).unwrap_or_else(|| path_stem(rel).to_owned());
    let mut source_meta = Map::new();
    source_meta.insert("record_count".into(), Value::from(rows.len()));
    source_meta.insert("record_types".into(), raw_types.into_iter().collect());
    source_meta.insert(
        "response_item_types".into(),
        item_types.into_iter().collect(),
    );
    for field in ["originator", "cli_version", "model_provider", "source"] {
        if let Some(value) = coerce_nonempty(session_meta.get(field)) {
            source_meta.insert(field.into(), Value::String(value));
        }
    }
    if !pending_reasoning.is_empty() {
        source_meta.insert(
            "unattached_reasoning".into(),
            pending_reasoning.into_iter().collect(),
        );
    }

    let (earliest, latest) = min_max_timestamps(&timestamps);
    let cwd = coerce_optional_str(session_meta.get("cwd"));
    Ok(vec![Record {
        trace_id: session_id.clone(),
        source_kind: "codex",
        source_path: file_path.clone(),
        root_session_id: session_id,
        agent_id: None,
        is_sidechain: false,
        project_path: cwd.clone(),
        cwd,
        git_branch: coerce_optional_str(session_meta.get("git_branch")),
        started_at: coerce_nonempty(session_meta.get("timestamp")).or(earliest),
        ended_at: latest,
        messages,
        source_meta,
    }])
}
