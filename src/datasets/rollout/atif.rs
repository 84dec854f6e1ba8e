//! ATIF trajectories: follows DataDesigner 0.9.6's
//! `engine/resources/agent_rollout/atif.py` (`AtifAgentRolloutFormatHandler`). One standalone
//! `.json` trajectory becomes one row; subagent and continuation references are kept as
//! metadata only.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::Tree;
use super::common::{
    Parsed, Record, build_message, coerce_nonempty, coerce_optional_str, load_json_object,
    min_max_timestamps, parse_error, require_string, stringify_json_value, tool_call,
};
use crate::pytext::{py_repr, py_str, repr_str, truthy, type_name};

/// `is_handled_file`: any `.json` file.
pub(crate) fn is_handled_file(rel: &str) -> bool {
    super::common::path_suffix(rel) == ".json"
}

/// `parse_file`.
pub(crate) fn parse_file(tree: &Tree<'_>, rel: &str) -> Parsed<Vec<Record>> {
    let file_path = tree.abs(rel);
    let payload = load_json_object(tree, rel)?;
    let fp = file_path.as_str();

    let schema_version = require_string(
        payload.get("schema_version"),
        &format!("ATIF schema_version in {fp}"),
    )?;
    let session_id = require_string(
        payload.get("session_id"),
        &format!("ATIF session_id in {fp}"),
    )?;
    let Some(Value::Object(agent)) = payload.get("agent") else {
        return parse_error(format!(
            "ATIF trajectory in {fp} is missing an agent object"
        ));
    };
    let steps = match payload.get("steps") {
        Some(Value::Array(steps)) if !steps.is_empty() => steps,
        _ => {
            return parse_error(format!(
                "ATIF trajectory in {fp} is missing a non-empty steps list"
            ));
        }
    };

    let mut messages = Vec::new();
    let mut timestamps = Vec::new();
    let mut copied_context_step_ids = Vec::new();
    let mut subagent_refs = Vec::new();

    for (index, raw_step) in steps.iter().enumerate() {
        let Value::Object(step) = raw_step else {
            return parse_error(format!(
                "Expected ATIF step object at {fp} steps[{index}], got {}",
                type_name(raw_step)
            ));
        };
        let step_id = step.get("step_id").cloned().unwrap_or(Value::Null);
        // `isinstance(step_id, int)` holds for Python's bools too (True == 1).
        let number = match &step_id {
            Value::Bool(b) => Some(u64::from(*b)),
            Value::Number(n) if n.is_u64() => n.as_u64(),
            Value::Number(n) if n.is_i64() => Some(u64::MAX),
            _ => None,
        };
        let Some(number) = number else {
            return parse_error(format!(
                "Expected integer ATIF step_id at {fp} steps[{index}], got {}",
                py_repr(&step_id)
            ));
        };
        if usize::try_from(number).ok() != Some(index + 1) {
            return parse_error(format!(
                "Expected sequential ATIF step_id {} at {fp} steps[{index}], got {}",
                index + 1,
                py_repr(&step_id)
            ));
        }
        let label = py_str(&step_id);

        if let Some(timestamp) = coerce_nonempty(step.get("timestamp")) {
            timestamps.push(timestamp);
        }
        if step.get("is_copied_context") == Some(&Value::Bool(true)) {
            copied_context_step_ids.push(step_id.clone());
        }
        if !step.contains_key("message") {
            return parse_error(format!(
                "ATIF step {label} in {fp} is missing message content"
            ));
        }

        let role = normalize_atif_role(step.get("source"), fp, &label)?;
        validate_step_fields(step, fp, &label, role)?;
        let tool_calls = normalize_tool_calls(step.get("tool_calls"), fp, &label)?;
        let reasoning = if role == "assistant" {
            coerce_optional_str(step.get("reasoning_content"))
        } else {
            None
        };
        let valid_ids: HashSet<String> = tool_calls
            .iter()
            .filter_map(|call| call.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let content = step.get("message").unwrap_or(&Value::Null);
        messages.push(build_message(role, content, reasoning, tool_calls, None)?);

        if let Some(observation) = step.get("observation").filter(|o| !o.is_null()) {
            let context = ObservationContext {
                file_path: fp,
                label: &label,
                step_id: &step_id,
            };
            messages.extend(observation_messages(
                observation,
                &context,
                &valid_ids,
                &mut subagent_refs,
            )?);
        }
    }

    let mut source_meta = Map::new();
    source_meta.insert("schema_version".into(), Value::String(schema_version));
    source_meta.insert("step_count".into(), Value::from(steps.len()));
    let agent_name = require_string(agent.get("name"), &format!("ATIF agent.name in {fp}"))?;
    source_meta.insert("agent_name".into(), Value::String(agent_name));
    for field in ["version", "model_name"] {
        if let Some(value) = coerce_nonempty(agent.get(field)) {
            source_meta.insert(field.into(), Value::String(value));
        }
    }
    if !copied_context_step_ids.is_empty() {
        source_meta.insert(
            "copied_context_step_ids".into(),
            Value::Array(copied_context_step_ids),
        );
    }
    if !subagent_refs.is_empty() {
        source_meta.insert(
            "subagent_trajectory_refs".into(),
            Value::Array(subagent_refs),
        );
    }
    for field in ["notes", "continued_trajectory_ref"] {
        if let Some(value) = coerce_nonempty(payload.get(field)) {
            source_meta.insert(field.into(), Value::String(value));
        }
    }
    for field in ["final_metrics", "extra"] {
        if let Some(value @ Value::Object(_)) = payload.get(field).filter(|v| truthy(v)) {
            source_meta.insert(field.into(), value.clone());
        }
    }

    let empty = Map::new();
    let agent_extra = match agent.get("extra") {
        Some(Value::Object(extra)) => extra,
        _ => &empty,
    };
    let cwd = coerce_optional_str(agent_extra.get("cwd"));
    let project_path = coerce_nonempty(agent_extra.get("project_path")).or_else(|| cwd.clone());
    let git_branch = coerce_optional_str(agent_extra.get("git_branch"));
    let (started_at, ended_at) = min_max_timestamps(&timestamps);

    Ok(vec![Record {
        trace_id: session_id.clone(),
        source_kind: "atif",
        source_path: file_path.clone(),
        root_session_id: session_id,
        agent_id: None,
        is_sidechain: false,
        cwd,
        project_path,
        git_branch,
        started_at,
        ended_at,
        messages,
        source_meta,
    }])
}

/// `normalize_atif_role`: `agent` speaks as the assistant.
fn normalize_atif_role(raw: Option<&Value>, fp: &str, label: &str) -> Parsed<&'static str> {
    let source = require_string(raw, &format!("ATIF source in {fp} step {label}"))?;
    match source.as_str() {
        "agent" => Ok("assistant"),
        "system" => Ok("system"),
        "user" => Ok("user"),
        _ => parse_error(format!(
            "Unsupported ATIF source {} in {fp} step {label}",
            repr_str(&source)
        )),
    }
}

/// `validate_atif_step_fields`: only agent steps may reason, call tools or observe.
fn validate_step_fields(
    step: &Map<String, Value>,
    fp: &str,
    label: &str,
    role: &str,
) -> Parsed<()> {
    if role == "assistant" {
        return Ok(());
    }
    let invalid: Vec<&str> = ["reasoning_content", "tool_calls", "observation"]
        .into_iter()
        .filter(|field| step.get(*field).is_some_and(|v| !v.is_null()))
        .collect();
    if invalid.is_empty() {
        return Ok(());
    }
    parse_error(format!(
        "ATIF step {label} in {fp} with role {} cannot include {}",
        repr_str(role),
        invalid.join(", ")
    ))
}

/// `normalize_atif_tool_calls`.
fn normalize_tool_calls(raw: Option<&Value>, fp: &str, label: &str) -> Parsed<Vec<Value>> {
    let calls = match raw {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(_) => {
            return parse_error(format!(
                "ATIF tool_calls in {fp} step {label} must be a list"
            ));
        }
    };
    let mut out = Vec::with_capacity(calls.len());
    for (index, raw_call) in calls.iter().enumerate() {
        let Value::Object(call) = raw_call else {
            return parse_error(format!(
                "Expected ATIF tool_call object in {fp} step {label}, got {}",
                type_name(raw_call)
            ));
        };
        let at = format!("in {fp} step {label} tool_calls[{index}]");
        let id = require_string(call.get("tool_call_id"), &format!("ATIF tool_call_id {at}"))?;
        let name = require_string(
            call.get("function_name"),
            &format!("ATIF function_name {at}"),
        )?;
        let arguments = stringify_json_value(call.get("arguments"));
        out.push(tool_call(Value::String(id), Value::String(name), arguments));
    }
    Ok(out)
}

/// Where an observation sits, for its messages and metadata.
struct ObservationContext<'a> {
    file_path: &'a str,
    /// `str(step_id)`, as the error messages print it.
    label: &'a str,
    /// The raw step id (an int, or Python's `True`), as `source_meta` stores it.
    step_id: &'a Value,
}

/// `normalize_atif_observation_messages`: results with content become tool messages;
/// subagent references are collected for `source_meta`.
fn observation_messages(
    observation: &Value,
    ctx: &ObservationContext<'_>,
    valid_ids: &HashSet<String>,
    subagent_refs: &mut Vec<Value>,
) -> Parsed<Vec<Value>> {
    let (fp, label) = (ctx.file_path, ctx.label);
    let Value::Object(observation) = observation else {
        return parse_error(format!(
            "ATIF observation in {fp} step {label} must be an object"
        ));
    };
    let Some(Value::Array(results)) = observation.get("results") else {
        return parse_error(format!(
            "ATIF observation.results in {fp} step {label} must be a list"
        ));
    };
    let mut messages = Vec::new();
    for (result_index, raw_result) in results.iter().enumerate() {
        let Value::Object(result) = raw_result else {
            return parse_error(format!(
                "Expected ATIF observation result object in {fp} step {label}, got {}",
                type_name(raw_result)
            ));
        };
        let source_call_id = coerce_optional_str(result.get("source_call_id"));
        if let Some(id) = &source_call_id
            && !valid_ids.contains(id)
        {
            return parse_error(format!(
                "ATIF observation source_call_id {} in {fp} step {label} does not reference a \
                 declared tool call",
                repr_str(id)
            ));
        }
        if let Some(content) = result.get("content").filter(|c| !c.is_null()) {
            let Some(id) = &source_call_id else {
                return parse_error(format!(
                    "ATIF observation result in {fp} step {label} with content is missing \
                     source_call_id"
                ));
            };
            messages.push(build_message(
                "tool",
                content,
                None,
                Vec::new(),
                Some(id.clone()),
            )?);
        }

        let raw_refs = match result.get("subagent_trajectory_ref") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(refs)) => refs,
            Some(_) => {
                return parse_error(format!(
                    "ATIF subagent_trajectory_ref in {fp} step {label} result {result_index} \
                     must be a list"
                ));
            }
        };
        let mut refs = Vec::new();
        for (ref_index, raw_ref) in raw_refs.iter().enumerate() {
            let Value::Object(reference) = raw_ref else {
                return parse_error(format!(
                    "Expected subagent trajectory ref object in {fp} step {label}, got {}",
                    type_name(raw_ref)
                ));
            };
            let session_id = require_string(
                reference.get("session_id"),
                &format!(
                    "ATIF subagent session_id in {fp} step {label} result {result_index} ref \
                     {ref_index}"
                ),
            )?;
            let mut normalized = Map::new();
            normalized.insert("session_id".into(), Value::String(session_id));
            if let Some(path) = coerce_nonempty(reference.get("trajectory_path")) {
                normalized.insert("trajectory_path".into(), Value::String(path));
            }
            if let Some(extra @ Value::Object(_)) = reference.get("extra").filter(|v| truthy(v)) {
                normalized.insert("extra".into(), extra.clone());
            }
            refs.push(Value::Object(normalized));
        }
        if !refs.is_empty() {
            let mut entry = Map::new();
            entry.insert("step_id".into(), ctx.step_id.clone());
            entry.insert("refs".into(), Value::Array(refs));
            subagent_refs.push(Value::Object(entry));
        }
    }
    Ok(messages)
}
