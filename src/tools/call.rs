//! Running one tool call of a resolved [`Toolset`]: arguments checked, the call routed and
//! bounded in time, and every failure answered to the model as an `Error:` tool message it can
//! recover from, with the outcome the job's usage counts.

use serde_json::{Map, Value};
use tracing::Instrument;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{Answered, Failure, Route, Toolset, coerce, content};
use crate::domain::usage::ToolOutcome;
use crate::llm::{ChatMessage, ContentBlock, ToolCall, ToolSpec};
use crate::mcp::{CallScope, McpError};
use crate::telemetry::SPANS;

impl Toolset {
    /// Runs one call and answers it. Never fails: every problem becomes an `Error: ...` message
    /// for the model, counted under its outcome.
    pub async fn execute(&self, call: &ToolCall, scope: Option<&CallScope>) -> Answered {
        let started = std::time::Instant::now();
        let source = self.source_of(&call.function.name).map(str::to_owned);
        let span = tool_span(call, source.as_deref());
        let (message, outcome) = match self.run(call, scope).instrument(span.clone()).await {
            Ok(content) => (
                ChatMessage::tool(&call.id, cap_text(content, self.max_result_chars)),
                ToolOutcome::Ok,
            ),
            Err((outcome, message)) => {
                tracing::debug!(tool = %call.function.name, outcome = outcome.as_str(), error = %message, "tool call answered with an error");
                (
                    ChatMessage::tool_text(&call.id, format!("Error: {message}")),
                    outcome,
                )
            }
        };
        tool_ended(&span, call, outcome, &message);
        Answered {
            message,
            outcome,
            source,
            elapsed: started.elapsed(),
        }
    }

    async fn run(
        &self,
        call: &ToolCall,
        scope: Option<&CallScope>,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let name = call.function.name.as_str();
        if let Some(why) = &call.unreadable {
            return Err((
                ToolOutcome::ExtractionError,
                format!(
                    "Your tool call could not be read: {why}. Available tools: {}.",
                    self.available()
                ),
            ));
        }
        if name.is_empty() {
            return Err((
                ToolOutcome::ExtractionError,
                format!(
                    "Your tool call names no tool. Call one of the available tools by name: {}.",
                    self.available()
                ),
            ));
        }
        let Some(route) = self.routes.get(name) else {
            if self.hidden.iter().any(|h| h == name) {
                return Err((
                    ToolOutcome::ValidationError,
                    format!(
                        "Tool '{name}' is not permitted by tool config '{}'. Available tools: {}.",
                        self.alias,
                        self.available()
                    ),
                ));
            }
            return Err((
                ToolOutcome::ValidationError,
                format!(
                    "Tool '{name}' not found on any configured provider. Available tools: {}.",
                    self.available()
                ),
            ));
        };
        let (validator, schema) = match route {
            Route::Mcp { list, index, .. } => (
                list.tools[*index].validator.as_ref(),
                list.tools[*index].input_schema.as_ref(),
            ),
            Route::Inline(t) => (t.validator.as_ref(), &t.cfg.parameters),
        };
        let args = checked_arguments(
            name,
            &call.function.arguments,
            validator.map(|v| (v, schema)),
            self.coerce,
        )?;
        match route {
            Route::Mcp { provider, .. } => {
                match self
                    .pool
                    .call(provider, scope, name, args, self.timeout)
                    .await
                {
                    Ok(result) => {
                        let (blocks, is_error) = content::to_blocks(&result).map_err(|why| {
                            (
                                ToolOutcome::FormattingError,
                                format!(
                                    "Tool '{name}' ran, but its result cannot be shown to you: {why}. Try other arguments, or answer without it."
                                ),
                            )
                        })?;
                        if is_error {
                            return Err((
                                ToolOutcome::ExecutionError,
                                server_error_text(name, &blocks),
                            ));
                        }
                        Ok(blocks)
                    }
                    Err(e @ McpError::Timeout { .. }) => Err((
                        ToolOutcome::ExecutionError,
                        format!(
                            "Tool '{name}' {e} and was cancelled. Try again with a smaller request, or answer without it."
                        ),
                    )),
                    Err(e) => Err((
                        ToolOutcome::ExecutionError,
                        format!("Tool '{name}' failed: {e}"),
                    )),
                }
            }
            Route::Inline(t) => t
                .call(args, self.timeout)
                .await
                .map_err(|m| (ToolOutcome::ExecutionError, m)),
        }
    }

    /// The provider serving `name` (`inline` for an inline tool), if the toolset offers it.
    fn source_of(&self, name: &str) -> Option<&str> {
        match self.routes.get(name)? {
            Route::Mcp { provider, .. } => Some(provider),
            Route::Inline(_) => Some("inline"),
        }
    }

    /// The names of the offered tools, in offer order (the prompt-based fallback looks for
    /// them in the reply).
    pub fn offered(&self) -> &[String] {
        &self.offered
    }

    /// Each offered tool with the provider (or inline tool) that serves it, in offer order.
    pub fn describe(&self) -> Vec<(&ToolSpec, &str)> {
        self.specs
            .iter()
            .map(|s| (s, self.source_of(&s.name).unwrap_or("inline")))
            .collect()
    }

    fn available(&self) -> String {
        if self.offered.is_empty() {
            return "none".into();
        }
        self.offered.join(", ")
    }
}

/// The GenAI `execute_tool` span of one call (exported only): the tool, the call id the model
/// gave, and who serves it (an MCP provider, or `inline`).
fn tool_span(call: &ToolCall, source: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        target: SPANS,
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.function.name),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.function.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        synthgate.tool.provider = source.unwrap_or("none"),
        synthgate.tool.outcome = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// How the call ended; with content capture on, also its arguments and the answer the model
/// got.
fn tool_ended(span: &tracing::Span, call: &ToolCall, outcome: ToolOutcome, answer: &ChatMessage) {
    if span.is_disabled() {
        return;
    }
    span.record("synthgate.tool.outcome", outcome.as_str());
    if outcome != ToolOutcome::Ok {
        span.record("error.type", outcome.as_str());
        span.record("otel.status_code", "ERROR");
    }
    if crate::telemetry::capture_content() {
        span.set_attribute(
            "gen_ai.tool.call.arguments",
            call.function.arguments.clone(),
        );
        span.set_attribute(
            "gen_ai.tool.call.result",
            serde_json::to_string(answer).unwrap_or_default(),
        );
    }
}

/// The arguments of a call to `name` as the tool receives them: read as a JSON object, coerced
/// to the tool's input schema when `coerce` is on and they do not match it as they are, then
/// checked against it (`check`: the schema's validator and the schema). The `Err` is what the
/// model is told.
pub(super) fn checked_arguments(
    name: &str,
    raw: &str,
    check: Option<(&jsonschema::Validator, &Value)>,
    coerce: bool,
) -> Result<Map<String, Value>, Failure> {
    let args = parse_arguments(name, raw).map_err(|m| (ToolOutcome::ExtractionError, m))?;
    let Some((validator, schema)) = check else {
        return Ok(args);
    };
    let mut value = Value::Object(args);
    if coerce && !validator.is_valid(&value) {
        coerce::to_schema(&mut value, schema);
    }
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{e} (at {at})")
            }
        })
        .collect();
    if !errors.is_empty() {
        return Err((
            ToolOutcome::ValidationError,
            format!(
                "Invalid arguments for tool '{name}': {}. Call it again with arguments that match its input schema.",
                errors.join("; ")
            ),
        ));
    }
    match value {
        Value::Object(m) => Ok(m),
        // Coercion keeps an object an object; this arm is not reached.
        other => Err((
            ToolOutcome::ExtractionError,
            format!("Tool '{name}' arguments are not a JSON object: {other}."),
        )),
    }
}

/// The arguments as a JSON object; empty means `{}` (DataDesigner). Unlike DataDesigner, a
/// valid JSON value that is not an object is reported rather than replaced by `{}`.
pub(super) fn parse_arguments(name: &str, raw: &str) -> Result<Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!(
            "Invalid arguments for tool '{name}': expected a JSON object, got {}.",
            crate::decode::kind(&other)
        )),
        Err(e) => Err(format!(
            "Invalid arguments for tool '{name}': not valid JSON ({e}). Arguments must be a JSON object."
        )),
    }
}

/// Cuts the text of a tool result to `max` characters in all, keeping its beginning and every
/// image, and says how much was dropped, so the model knows the result is partial (a silently
/// cut JSON document would just look broken).
pub(super) fn cap_text(mut blocks: Vec<ContentBlock>, max: usize) -> Vec<ContentBlock> {
    let total: usize = blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count(),
            _ => 0,
        })
        .sum();
    if total <= max {
        return blocks;
    }
    let mut left = max;
    for b in &mut blocks {
        if let ContentBlock::Text { text } = b {
            let n = text.chars().count();
            if n > left {
                let cut = text.char_indices().nth(left).map_or(text.len(), |(i, _)| i);
                text.truncate(cut);
            }
            left = left.saturating_sub(n);
        }
    }
    blocks.retain(|b| !matches!(b, ContentBlock::Text { text } if text.is_empty()));
    blocks.push(ContentBlock::text(format!(
        "[tool result truncated: {} of {total} characters omitted (limits.max_tool_result_chars = {max})]",
        total - max
    )));
    blocks
}

/// A server's `isError` result as one `Error:` text: its text blocks, else a generic line.
pub(super) fn server_error_text(name: &str, blocks: &[ContentBlock]) -> String {
    let text: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text = text.join("\n");
    let text = text.trim();
    let text = text
        .strip_prefix("Error:")
        .map(str::trim_start)
        .unwrap_or(text);
    if text.is_empty() {
        format!("Tool '{name}' reported an error without a message.")
    } else {
        text.to_owned()
    }
}
