//! Shared record type and helpers: follows DataDesigner 0.9.6's
//! `engine/resources/agent_rollout/types.py` (`NormalizedAgentRolloutRecord`) and `utils.py`
//! (`build_message`, `load_jsonl_rows`, `coerce_optional_str`, `min_max_timestamps`, ...),
//! with `ChatMessage.to_dict` / `_normalize_content_blocks` from `engine/models/utils.py`.

use serde_json::{Map, Value};

use super::Tree;
use super::pyjson::{self, LinesError};
use crate::pytext::{
    fromisoformat_utc_micros, py_repr, py_str, py_strip, repr_str, truthy, type_name,
};

/// How parsing one file can fail, split the way `AgentRolloutSeedReader.hydrate_row` splits
/// Python's exceptions.
#[derive(Debug)]
pub(crate) enum Failure {
    /// `AgentRolloutSeedParseError`: the file is skipped with a warning carrying this message.
    Parse(String),
    /// `UnicodeDecodeError`: skipped like a parse error by the reader, but not caught by the
    /// session-index loaders, which only expect parse errors.
    Decode(String),
    /// Any other exception: DataDesigner's whole read fails with this message.
    Fatal(String),
}

pub(crate) type Parsed<T> = Result<T, Failure>;

/// `AgentRolloutSeedParseError(message)`.
pub(crate) fn parse_error<T>(message: impl Into<String>) -> Parsed<T> {
    Err(Failure::Parse(message.into()))
}

/// `NormalizedAgentRolloutRecord` before `__post_init__` adds the derived fields.
pub(crate) struct Record {
    pub trace_id: String,
    pub source_kind: &'static str,
    pub source_path: String,
    pub root_session_id: String,
    pub agent_id: Option<String>,
    pub is_sidechain: bool,
    pub cwd: Option<String>,
    pub project_path: Option<String>,
    pub git_branch: Option<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub messages: Vec<Value>,
    pub source_meta: Map<String, Value>,
}

fn opt(value: Option<String>) -> Value {
    value.map_or(Value::Null, Value::String)
}

impl Record {
    /// `to_dict()`: the dataclass fields in declaration order, the derived ones last.
    pub(crate) fn into_row(self) -> Map<String, Value> {
        let tool_call_count: usize = self
            .messages
            .iter()
            .map(|m| {
                m.get("tool_calls")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            })
            .sum();
        let final_assistant_message = final_assistant_text(&self.messages);
        let message_count = self.messages.len();
        let mut row = Map::new();
        row.insert("trace_id".into(), Value::String(self.trace_id));
        row.insert(
            "source_kind".into(),
            Value::String(self.source_kind.to_owned()),
        );
        row.insert("source_path".into(), Value::String(self.source_path));
        row.insert(
            "root_session_id".into(),
            Value::String(self.root_session_id),
        );
        row.insert("agent_id".into(), opt(self.agent_id));
        row.insert("is_sidechain".into(), Value::Bool(self.is_sidechain));
        row.insert("cwd".into(), opt(self.cwd));
        row.insert("project_path".into(), opt(self.project_path));
        row.insert("git_branch".into(), opt(self.git_branch));
        row.insert("started_at".into(), opt(self.started_at));
        row.insert("ended_at".into(), opt(self.ended_at));
        row.insert("messages".into(), Value::Array(self.messages));
        row.insert("source_meta".into(), Value::Object(self.source_meta));
        row.insert("message_count".into(), Value::from(message_count));
        row.insert("tool_call_count".into(), Value::from(tool_call_count));
        row.insert(
            "final_assistant_message".into(),
            opt(final_assistant_message),
        );
        row
    }
}

/// `_extract_final_assistant_text`: the text blocks of the last assistant message that has
/// any non-empty text, joined by blank lines.
fn final_assistant_text(messages: &[Value]) -> Option<String> {
    for message in messages.iter().rev() {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        match message.get("content") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(blocks)) => {
                let parts: Vec<&str> = blocks
                    .iter()
                    .filter_map(|block| match block {
                        Value::Object(map) => map.get("text").and_then(Value::as_str),
                        Value::String(s) => Some(s.as_str()),
                        _ => None,
                    })
                    .filter(|text| !text.is_empty())
                    .collect();
                if !parts.is_empty() {
                    return Some(parts.join("\n\n"));
                }
            }
            Some(Value::String(s)) if !s.is_empty() => return Some(s.clone()),
            Some(_) => {}
        }
    }
    None
}

/// `build_message`: the role normalized, then `ChatMessage(...).to_dict()`, which keeps the
/// optional fields only when they are non-empty.
pub(crate) fn build_message(
    role: &str,
    content: &Value,
    reasoning_content: Option<String>,
    tool_calls: Vec<Value>,
    tool_call_id: Option<String>,
) -> Parsed<Value> {
    let role = normalize_role_str(role, &repr_str(role), "agent rollout message")?;
    let mut message = Map::new();
    message.insert("role".into(), Value::String(role.to_owned()));
    message.insert("content".into(), normalize_content_blocks(content));
    if let Some(reasoning) = reasoning_content.filter(|r| !r.is_empty()) {
        message.insert("reasoning_content".into(), Value::String(reasoning));
    }
    if !tool_calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(id) = tool_call_id.filter(|id| !id.is_empty()) {
        message.insert("tool_call_id".into(), Value::String(id));
    }
    Ok(Value::Object(message))
}

/// The OpenAI-style tool call every handler emits:
/// `{"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}`.
pub(crate) fn tool_call(id: Value, name: Value, arguments: String) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), name);
    function.insert("arguments".into(), Value::String(arguments));
    let mut call = Map::new();
    call.insert("id".into(), id);
    call.insert("type".into(), Value::String("function".into()));
    call.insert("function".into(), Value::Object(function));
    Value::Object(call)
}

/// `normalize_message_role` for a raw JSON role: `developer` becomes `system`.
pub(crate) fn normalize_message_role(raw: Option<&Value>, context: &str) -> Parsed<&'static str> {
    let role = coerce_optional_str(raw).unwrap_or_default();
    let shown = raw.map_or_else(|| "None".to_owned(), py_repr);
    normalize_role_str(&role, &shown, context)
}

fn normalize_role_str(role: &str, shown: &str, context: &str) -> Parsed<&'static str> {
    match role {
        "developer" | "system" => Ok("system"),
        "user" => Ok("user"),
        "assistant" => Ok("assistant"),
        "tool" => Ok("tool"),
        _ => parse_error(format!("Unsupported message role {shown} in {context}")),
    }
}

/// `_normalize_content_blocks`: content always becomes a list of blocks; a dict block with a
/// `type` is kept as it is, anything else becomes a text block of its `str()`.
fn normalize_content_blocks(content: &Value) -> Value {
    match content {
        Value::Array(blocks) => Value::Array(
            blocks
                .iter()
                .map(|block| match block {
                    Value::Object(map) if map.contains_key("type") => block.clone(),
                    Value::Object(map) if map.contains_key("text") => {
                        text_block(map.get("text").unwrap_or(&Value::Null))
                    }
                    other => text_block(other),
                })
                .collect(),
        ),
        Value::Null => Value::Array(Vec::new()),
        other => Value::Array(vec![text_block(other)]),
    }
}

/// `_text_block`.
fn text_block(value: &Value) -> Value {
    let text = match value {
        Value::Null => String::new(),
        other => py_str(other),
    };
    let mut block = Map::new();
    block.insert("type".into(), Value::String("text".into()));
    block.insert("text".into(), Value::String(text));
    Value::Object(block)
}

/// `load_jsonl_rows`: every non-blank line (after Python's `strip()`) must be a JSON object.
pub(crate) fn load_jsonl_rows(tree: &Tree<'_>, rel: &str) -> Parsed<Vec<Map<String, Value>>> {
    let bytes = tree.bytes(rel)?;
    let file_path = tree.abs(rel);
    let mut rows = Vec::new();
    let result = pyjson::for_each_line(bytes, |line_number, line| {
        let line = py_strip(line);
        if line.is_empty() {
            return Ok(());
        }
        match pyjson::loads(line) {
            Ok(Value::Object(map)) => {
                rows.push(map);
                Ok(())
            }
            Ok(other) => Err(format!(
                "Expected JSON object in {file_path} line {line_number}, got {}",
                type_name(&other)
            )),
            Err(e) => Err(format!(
                "Invalid JSON in {file_path} line {line_number}: {}",
                e.msg
            )),
        }
    });
    match result {
        Ok(()) => Ok(rows),
        Err(LinesError::Decode(message)) => Err(Failure::Decode(message)),
        Err(LinesError::Line(message)) => parse_error(message),
    }
}

/// `load_json_object`.
pub(crate) fn load_json_object(tree: &Tree<'_>, rel: &str) -> Parsed<Map<String, Value>> {
    let text = pyjson::read_text(tree.bytes(rel)?).map_err(Failure::Decode)?;
    let file_path = tree.abs(rel);
    match pyjson::loads(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => parse_error(format!(
            "Expected JSON object in {file_path}, got {}",
            type_name(&other)
        )),
        Err(e) => parse_error(format!("Invalid JSON in {file_path}: {}", e.msg)),
    }
}

/// `require_string`: a non-empty string, or a parse error naming what was there.
pub(crate) fn require_string(value: Option<&Value>, context: &str) -> Parsed<String> {
    match value {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        other => {
            let shown = other.map_or_else(|| "None".to_owned(), py_repr);
            parse_error(format!(
                "Expected non-empty string for {context}, got {shown}"
            ))
        }
    }
}

/// `coerce_optional_str`: `None` stays `None`, anything else becomes its `str()`.
pub(crate) fn coerce_optional_str(value: Option<&Value>) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(other) => Some(py_str(other)),
    }
}

/// Python's `current = current or coerce_optional_str(value)`: the first truthy string
/// sticks, but a falsy `""` is replaced by whatever comes next (even `None`).
pub(crate) fn keep_first_truthy(current: Option<String>, value: Option<&Value>) -> Option<String> {
    if current.as_deref().is_some_and(|s| !s.is_empty()) {
        current
    } else {
        coerce_optional_str(value)
    }
}

/// Python's `a or b` on two looked-up values.
pub(crate) fn py_or<'v>(a: Option<&'v Value>, b: Option<&'v Value>) -> Option<&'v Value> {
    if a.is_some_and(truthy) { a } else { b }
}

/// `coerce_optional_str(value) or None`: Python code that tests the coerced string's
/// truthiness treats `""` like `None`.
pub(crate) fn coerce_nonempty(value: Option<&Value>) -> Option<String> {
    coerce_optional_str(value).filter(|s| !s.is_empty())
}

/// `stringify_json_value`: strings as they are, `None` as `{}`, anything else as
/// `json.dumps(value, sort_keys=True)`.
pub(crate) fn stringify_json_value(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => "{}".to_owned(),
        Some(other) => crate::pytext::json_dumps(other, true),
    }
}

/// `normalize_message_content`: `None` becomes `""`, strings and lists pass, anything else is
/// stringified as JSON.
pub(crate) fn normalize_message_content(value: Option<&Value>) -> Value {
    match value {
        None | Some(Value::Null) => Value::String(String::new()),
        Some(v @ (Value::String(_) | Value::Array(_))) => v.clone(),
        Some(other) => Value::String(stringify_json_value(Some(other))),
    }
}

/// `stringify_text_value`: `None` becomes `""`, anything else its `str()`.
pub(crate) fn stringify_text_value(value: Option<&Value>) -> String {
    coerce_optional_str(value).unwrap_or_default()
}

/// `min_max_timestamps`: the earliest and latest parseable timestamps (ISO 8601, `Z` read as
/// `+00:00`, naive as UTC), returned as they were written; the first wins a tie.
pub(crate) fn min_max_timestamps(timestamps: &[String]) -> (Option<String>, Option<String>) {
    let mut earliest: Option<(i64, &String)> = None;
    let mut latest: Option<(i64, &String)> = None;
    for original in timestamps {
        let Some(instant) = fromisoformat_utc_micros(&original.replace('Z', "+00:00")) else {
            continue;
        };
        if earliest.is_none_or(|(best, _)| instant < best) {
            earliest = Some((instant, original));
        }
        if latest.is_none_or(|(best, _)| instant > best) {
            latest = Some((instant, original));
        }
    }
    (
        earliest.map(|(_, s)| s.clone()),
        latest.map(|(_, s)| s.clone()),
    )
}

/// `Path(path).name`.
pub(crate) fn path_name(path: &str) -> &str {
    path_parts(path).last().copied().unwrap_or("")
}

/// `Path(path).parts` of a relative path: `/`-separated, empty and `.` parts dropped.
pub(crate) fn path_parts(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect()
}

/// Where Python 3.11's `PurePath.suffix` / `.stem` split a name: the last `.`, unless it
/// starts or ends the name.
fn suffix_split(name: &str) -> Option<usize> {
    name.rfind('.').filter(|&i| i > 0 && i + 1 < name.len())
}

/// `Path(path).suffix`.
pub(crate) fn path_suffix(path: &str) -> &str {
    let name = path_name(path);
    suffix_split(name).map_or("", |i| &name[i..])
}

/// `Path(path).stem`.
pub(crate) fn path_stem(path: &str) -> &str {
    let name = path_name(path);
    suffix_split(name).map_or(name, |i| &name[..i])
}
