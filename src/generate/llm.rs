//! LLM columns: render the prompts, ask the model, run the tool calls it asks for, parse the
//! answer by column type, and keep the conversation as the column's trace.
//!
//! The tool loop is DataDesigner 0.9.7's: a turn is one response with tool calls; its calls run
//! together and their results return in call order; past `max_tool_call_turns` each call gets
//! the refusal text. Unlike DataDesigner, the model is then asked once more with tool calls
//! forbidden and a model that still calls tools fails the column (DataDesigner refuses forever),
//! and tool failures reach the model as `Error:` results (see [`crate::tools`]).
//!
//! Follows DataDesigner 0.9.7: structured, judge and code columns are prompt-based (format
//! instructions appended to the user prompt; no `response_format`); a parse failure first
//! gets up to `max_conversation_correction_steps` correction messages, then the conversation
//! restarts up to `max_conversation_restarts` times; the trace is the final conversation only.

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::code::extract_code;
use crate::domain::dataset::{LlmColumn, LlmKind, Score, TraceType};
use crate::domain::models::{ModelConfig, ToolCallStrategy, ToolConfig};
use crate::domain::record::RecordErrorCode;
use crate::domain::usage::{ToolOutcome, ToolUsage};
use crate::llm::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ContentBlock, LlmError, ToolSpec, Usage,
};
use crate::mcp::CallScope;
use crate::tools::events::{ToolEvent, ToolEvents};
use crate::tools::{REFUSAL_MESSAGE, ToolHub, Toolset, ToolsetError, prompt};

/// What LLM columns need from the worker: the client, the job's model configs, cancellation,
/// and the job's retry and trace settings.
pub struct LlmRuntime<'a> {
    /// The shared client (or the mock's client in tests).
    pub chat: &'a dyn ChatModel,
    /// Model configs by alias: the server's, overridden by the job's.
    pub models: &'a HashMap<String, ModelConfig>,
    /// Where the record's waits other than model calls give back its worker slot.
    pub waits: &'a dyn super::Waits,
    /// Cancels the record's requests (drain deadline, job cancel).
    pub cancel: &'a CancellationToken,
    /// `run_config.debug_override_save_all_column_traces`.
    pub save_all_traces: bool,
    /// `run_config.max_conversation_restarts` (DataDesigner default 5).
    pub max_restarts: u32,
    /// `run_config.max_conversation_correction_steps` (DataDesigner default 0).
    pub max_corrections: u32,
    /// MCP and inline tools (one MCP session pool per process).
    pub tools: &'a ToolHub,
    /// Tool configs by alias: the server's, overridden by the job's.
    pub tool_configs: &'a HashMap<String, ToolConfig>,
    /// The job and record the calls are made for (picks per-job / per-record MCP sessions).
    pub scope: Option<CallScope>,
    /// `limits.max_prompt_chars`: longest rendered system + user prompt.
    pub max_prompt_chars: usize,
    /// `limits.max_image_bytes`: largest image an `image` column stores.
    pub max_image_bytes: usize,
    /// Where the record's CPU work (samplers, templates) runs, off the runtime threads.
    pub cpu: &'a crate::cpu::CpuGate,
    /// Where each answered tool call is announced (the job's event stream), if anywhere.
    pub tool_events: Option<&'a ToolEvents>,
}

/// A compiled LLM column.
pub(crate) struct LlmStep {
    pub(crate) column: LlmColumn,
    /// Template names of the prompts.
    pub(crate) prompt: String,
    pub(crate) system: Option<String>,
    /// Appended to the rendered user prompt (structured, judge, code).
    pub(crate) instructions: Option<String>,
    /// Validates parsed JSON answers (structured, judge).
    pub(crate) validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for LlmStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmStep")
            .field("column", &self.column)
            .field("prompt", &self.prompt)
            .finish_non_exhaustive()
    }
}

/// A column's answer.
pub(crate) struct LlmAnswer {
    pub(crate) value: Value,
    pub(crate) reasoning: Option<String>,
}

/// What one LLM column left behind, answered or failed: the record keeps it either way, so a
/// column that failed after some tool turns still has its conversation to debug and its
/// requests in the job's usage.
#[derive(Default)]
pub(crate) struct LlmSpent {
    /// The final conversation (up to the failure, for a failed column), per `with_trace`;
    /// `None` when no trace is kept or no request was made.
    pub(crate) trace: Option<Vec<ChatMessage>>,
    pub(crate) usage: Usage,
    pub(crate) requests: u32,
    pub(crate) tools: ToolUsage,
}

/// The conversation of one column while it runs, and what it has spent so far.
#[derive(Default)]
struct Conversation<'c> {
    /// The column's name (tool events carry it).
    column: &'c str,
    messages: Vec<ChatMessage>,
    usage: Usage,
    requests: u32,
    tools: ToolUsage,
}

/// Why an LLM column failed: a record error code and message.
pub(crate) struct LlmFailure {
    pub(crate) code: RecordErrorCode,
    pub(crate) message: String,
}

impl From<LlmError> for LlmFailure {
    fn from(e: LlmError) -> Self {
        Self {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// A tool config that stopped resolving after submit (where it was checked) fails the record
/// with the code submit would have refused it with.
impl From<ToolsetError> for LlmFailure {
    fn from(e: ToolsetError) -> Self {
        let code = match &e {
            ToolsetError::ModelNotAllowed { .. } => RecordErrorCode::InvalidToolConfig,
            ToolsetError::ProviderUnavailable { .. } => RecordErrorCode::McpUnavailable,
            ToolsetError::DuplicateToolName { .. } => RecordErrorCode::DuplicateToolName,
            ToolsetError::AllowedToolNotFound { .. } => RecordErrorCode::UnknownTool,
        };
        Self {
            code,
            message: e.to_string(),
        }
    }
}

impl LlmStep {
    /// Builds the step; `Err` is a config problem (field, message).
    pub(crate) fn new(
        column: LlmColumn,
        prompt: String,
        system: Option<String>,
    ) -> Result<Self, (String, String)> {
        let (instructions, schema) = match &column.kind {
            LlmKind::Text => (None, None),
            LlmKind::Code { code_lang } => (Some(code_instructions(code_lang)), None),
            LlmKind::Structured { output_format } => {
                let schema = Value::Object(output_format.clone());
                (
                    Some(json_instructions(&schema)),
                    Some(("output_format", schema)),
                )
            }
            LlmKind::Judge { scores } => {
                let schema = judge_schema(scores);
                (
                    Some(judge_instructions(scores, &schema)),
                    Some(("scores", schema)),
                )
            }
        };
        let validator = match schema {
            Some((field, schema)) => Some(
                jsonschema::validator_for(&schema)
                    .map_err(|e| (field.to_owned(), format!("is not a valid JSON Schema: {e}")))?,
            ),
            None => None,
        };
        Ok(Self {
            column,
            prompt,
            system,
            instructions,
            validator,
        })
    }

    /// Runs the conversation for one record. `system`/`user` are the rendered prompts, `media`
    /// the `multi_modal_context` parts that go before the user text. What the column spent
    /// (trace, usage, tool calls) comes back whether it answered or failed.
    pub(crate) async fn run(
        &self,
        rt: &LlmRuntime<'_>,
        name: &str,
        system: Option<String>,
        user: String,
        media: Vec<ContentBlock>,
    ) -> (Result<LlmAnswer, LlmFailure>, LlmSpent) {
        let mut conv = Conversation {
            column: name,
            ..Conversation::default()
        };
        let result = self.converse(rt, system, user, media, &mut conv).await;
        let trace = if conv.requests == 0 {
            None
        } else {
            self.trace(rt, conv.messages)
        };
        let spent = LlmSpent {
            trace,
            usage: conv.usage,
            requests: conv.requests,
            tools: conv.tools,
        };
        (result, spent)
    }

    async fn converse(
        &self,
        rt: &LlmRuntime<'_>,
        system: Option<String>,
        user: String,
        media: Vec<ContentBlock>,
        conv: &mut Conversation<'_>,
    ) -> Result<LlmAnswer, LlmFailure> {
        let model = rt
            .models
            .get(&self.column.model_alias)
            .ok_or_else(|| LlmFailure {
                code: RecordErrorCode::UnknownModelAlias,
                message: format!("model alias '{}' is not defined", self.column.model_alias),
            })?;
        self.check_prompt_size(rt, system.as_deref(), &user)?;
        let mut toolset = self.toolset(rt, model).await?;
        // The offered tools move into each request and back (see `ask`).
        let mut specs = toolset
            .as_mut()
            .map(|ts| std::mem::take(&mut ts.specs))
            .unwrap_or_default();
        let prompt_based =
            toolset.is_some() && model.tool_call_strategy == Some(ToolCallStrategy::PromptBased);
        let mentions = toolset
            .as_ref()
            .filter(|_| prompt_based && model.tool_call_fallback)
            .map(|ts| ts.offered());
        let base = &mut conv.messages;
        // An empty rendered system prompt means no system message (DataDesigner).
        if let Some(s) = system.filter(|s| !s.trim().is_empty()) {
            base.push(ChatMessage::system(s));
        }
        let user = match &self.instructions {
            Some(i) => format!("{user}\n\n{i}"),
            None => user,
        };
        base.push(if media.is_empty() {
            ChatMessage::user(user)
        } else {
            let mut content = media;
            content.push(ContentBlock::text(user));
            ChatMessage::user_blocks(content)
        });

        let mut last_error = String::new();
        // DataDesigner restarts from the conversation after the last tool turn: completed tool
        // calls are not run again. The conversation only grows between checkpoints, so a
        // checkpoint is its length and a restart cuts back to it (a copy per tool turn, kept
        // for a restart that text columns never make, cost more than the turn itself).
        let mut checkpoint = (conv.messages.len(), 0u32);
        for _restart in 0..=rt.max_restarts {
            conv.messages.truncate(checkpoint.0);
            let mut turns = checkpoint.1;
            let mut corrections = 0;
            loop {
                let turn = Turn {
                    toolset: toolset.as_ref(),
                    prompt_based,
                    turns,
                };
                let resp = turn.ask(rt, model, &mut conv.messages, &mut specs).await?;
                conv.requests += 1;
                add_usage(&mut conv.usage, &resp.usage);
                let mut msg = resp.message;
                if prompt_based {
                    let (text, calls) = prompt::parse_calls(&msg.text(), turns + 1, mentions);
                    if !calls.is_empty() {
                        msg.content = vec![ContentBlock::text(text)];
                        msg.tool_calls = calls;
                    }
                }
                if let Some(ts) = toolset.as_ref().filter(|_| !msg.tool_calls.is_empty()) {
                    turns = self.tool_turn(ts, rt, msg, conv, turns).await?;
                    checkpoint = (conv.messages.len(), turns);
                    continue;
                }
                // A final answer (tool calls from a column without tools are not acted on).
                msg.tool_calls.clear();
                let text = msg.text().trim().to_owned();
                msg.content = vec![ContentBlock::text(text.clone())];
                let reasoning = msg
                    .reasoning_content
                    .as_deref()
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned);
                conv.messages.push(msg);
                match self.parse(&text) {
                    Ok(value) => return Ok(LlmAnswer { value, reasoning }),
                    Err(e) if corrections < rt.max_corrections => {
                        corrections += 1;
                        conv.messages.push(ChatMessage::user(format!(
                            "Your previous response could not be used: {e}\nPlease answer again, following the format instructions exactly."
                        )));
                    }
                    Err(e) => {
                        last_error = e;
                        break;
                    }
                }
            }
        }
        Err(LlmFailure {
            code: RecordErrorCode::LlmOutputInvalid,
            message: format!(
                "the model's answer could not be parsed after {} correction steps and {} conversation restarts: {last_error}",
                rt.max_corrections, rt.max_restarts
            ),
        })
    }

    /// Answers one model response that holds tool calls: runs them together (results in call
    /// order), or, past the budget, refuses each; a model still calling tools after that fails
    /// the column. Counts the turn and each call, and announces each answered call. Returns the
    /// new turn count.
    async fn tool_turn(
        &self,
        ts: &Toolset,
        rt: &LlmRuntime<'_>,
        mut msg: ChatMessage,
        conv: &mut Conversation<'_>,
        turns: u32,
    ) -> Result<u32, LlmFailure> {
        if turns > ts.max_turns {
            // Kept in the trace: the call the model would not give up is what failed it.
            conv.messages.push(msg);
            return Err(LlmFailure {
                code: RecordErrorCode::ToolTurnsExceeded,
                message: format!(
                    "the model kept calling tools after its {} tool-calling turns were used up and it was asked for a final answer without tools",
                    ts.max_turns
                ),
            });
        }
        let turns = turns + 1;
        conv.tools.tool_turns += 1;
        strip_tool_turn(&mut msg);
        let calls = std::mem::take(&mut msg.tool_calls);
        let answers: Vec<crate::tools::Answered> = if turns > ts.max_turns {
            calls
                .iter()
                .map(|c| crate::tools::Answered {
                    message: ChatMessage::tool_text(&c.id, REFUSAL_MESSAGE),
                    outcome: ToolOutcome::Refused,
                    source: None,
                    elapsed: std::time::Duration::ZERO,
                })
                .collect()
        } else {
            // Tool calls wait on MCP servers: without the record's worker slot.
            let calls =
                futures::future::join_all(calls.iter().map(|c| ts.execute(c, rt.scope.as_ref())));
            super::waiting(rt.waits, calls).await
        };
        for (call, a) in calls.iter().zip(&answers) {
            conv.tools.count_call(&call.function.name, a.outcome);
            if let Some(events) = rt.tool_events.filter(|e| e.listened()) {
                events.send(ToolEvent {
                    column: conv.column.to_owned(),
                    turn: turns,
                    tool: call.function.name.clone(),
                    provider: a.source.clone(),
                    duration_ms: a.elapsed.as_secs_f64() * 1000.0,
                    outcome: a.outcome,
                });
            }
        }
        msg.tool_calls = calls;
        conv.messages.push(msg);
        conv.messages.extend(answers.into_iter().map(|a| a.message));
        Ok(turns)
    }

    /// Fails the column before any token is spent when the rendered prompt is over
    /// `limits.max_prompt_chars`.
    fn check_prompt_size(
        &self,
        rt: &LlmRuntime<'_>,
        system: Option<&str>,
        user: &str,
    ) -> Result<(), LlmFailure> {
        let chars = system.map_or(0, |s| s.chars().count())
            + user.chars().count()
            + self
                .instructions
                .as_deref()
                .map_or(0, |s| s.chars().count());
        if chars > rt.max_prompt_chars {
            return Err(LlmFailure {
                code: RecordErrorCode::PromptTooLarge,
                message: format!(
                    "the rendered prompt has {chars} characters, more than limits.max_prompt_chars ({})",
                    rt.max_prompt_chars
                ),
            });
        }
        Ok(())
    }

    /// The column's tools for this generation (fetched once per generation, as DataDesigner
    /// does; the MCP tool-list cache makes that cheap).
    async fn toolset(
        &self,
        rt: &LlmRuntime<'_>,
        model: &ModelConfig,
    ) -> Result<Option<Toolset>, LlmFailure> {
        let Some(alias) = &self.column.tool_alias else {
            return Ok(None);
        };
        let cfg = rt.tool_configs.get(alias).ok_or_else(|| LlmFailure {
            code: RecordErrorCode::UnknownToolAlias,
            message: format!("tool alias '{alias}' is not defined"),
        })?;
        // Listing may open an MCP session: a wait, without the record's worker slot.
        super::waiting(
            rt.waits,
            rt.tools.toolset(cfg, Some(model), rt.scope.as_ref()),
        )
        .await
        .map(Some)
        .map_err(LlmFailure::from)
    }

    fn trace(&self, rt: &LlmRuntime<'_>, messages: Vec<ChatMessage>) -> Option<Vec<ChatMessage>> {
        let kind = if rt.save_all_traces {
            TraceType::AllMessages
        } else {
            self.column.with_trace
        };
        match kind {
            TraceType::None => None,
            TraceType::AllMessages => Some(messages),
            TraceType::LastMessage => Some(
                messages
                    .into_iter()
                    .rev()
                    .find(|m| m.role == crate::llm::Role::Assistant)
                    .into_iter()
                    .collect(),
            ),
        }
    }

    /// The column value from the model's (stripped) text.
    fn parse(&self, text: &str) -> Result<Value, String> {
        match &self.column.kind {
            LlmKind::Text => Ok(Value::String(text.to_owned())),
            LlmKind::Code { code_lang } => extract_code(text, code_lang).map(Value::String),
            LlmKind::Structured { .. } | LlmKind::Judge { .. } => {
                let raw = extract_json(text);
                let mut value: Value = serde_json::from_str(raw)
                    .map_err(|e| format!("the response is not valid JSON ({e})"))?;
                if let LlmKind::Judge { scores } = &self.column.kind {
                    coerce_judge_scores(scores, &mut value);
                }
                if let Some(v) = &self.validator {
                    let errors: Vec<String> = v
                        .iter_errors(&value)
                        .take(3)
                        .map(|e| format!("{} at '{}'", e, e.instance_path()))
                        .collect();
                    if !errors.is_empty() {
                        return Err(format!(
                            "the JSON does not match the schema: {}",
                            errors.join("; ")
                        ));
                    }
                }
                Ok(value)
            }
        }
    }
}

/// One request of the tool loop.
struct Turn<'t> {
    toolset: Option<&'t Toolset>,
    prompt_based: bool,
    /// Tool turns taken so far.
    turns: u32,
}

impl Turn<'_> {
    /// Sends the request for the next turn. Past the budget the tools stay defined (providers
    /// insist while the conversation holds tool calls) but calling them is forbidden;
    /// prompt-based models get the conversation lowered to plain text turns instead.
    ///
    /// The conversation and the tool specs move into the request and come back after the
    /// call (the client only borrows the request), so no turn copies them: cloning both on
    /// every turn was the tool loop's largest cost of its own in the bench profile.
    async fn ask(
        &self,
        rt: &LlmRuntime<'_>,
        model: &ModelConfig,
        messages: &mut Vec<ChatMessage>,
        specs: &mut Vec<ToolSpec>,
    ) -> Result<ChatResponse, LlmError> {
        let Some(ts) = self.toolset else {
            let req = ChatRequest::new(std::mem::take(messages));
            let resp = rt.chat.chat(model, &req, rt.cancel).await;
            *messages = req.messages;
            return resp;
        };
        if self.prompt_based {
            let req = ChatRequest::new(prompt::lower(messages, specs));
            return rt.chat.chat(model, &req, rt.cancel).await;
        }
        let mut req = ChatRequest::new(std::mem::take(messages)).with_tools(std::mem::take(specs));
        if self.turns > ts.max_turns {
            req = req.forbidding_tool_calls();
        }
        // A forced choice holds until the first tool turn (DataDesigner 0.9.7).
        if self.turns == 0 && !req.tools.is_empty() {
            req = req.with_tool_choice(model.inference_parameters.tool_choice.clone());
        }
        let resp = rt.chat.chat(model, &req, rt.cancel).await;
        *messages = req.messages;
        *specs = req.tools;
        resp
    }
}

/// DataDesigner's whitespace rule for a tool-call turn: content and reasoning are stripped
/// when reasoning is present; no content becomes one empty text block.
fn strip_tool_turn(msg: &mut ChatMessage) {
    let text = msg.text();
    let has_reasoning = msg
        .reasoning_content
        .as_deref()
        .is_some_and(|r| !r.is_empty());
    let text = if has_reasoning {
        msg.reasoning_content = msg.reasoning_content.take().map(|r| r.trim().to_owned());
        text.trim().to_owned()
    } else {
        text
    };
    msg.content = vec![ContentBlock::text(text)];
}

fn add_usage(total: &mut Usage, u: &Usage) {
    total.prompt_tokens += u.prompt_tokens;
    total.completion_tokens += u.completion_tokens;
}

/// A ```json fence, else any fence, else the text from the first `{`/`[` to the last `}`/`]`.
pub(crate) fn extract_json(text: &str) -> &str {
    if let Some(body) = fenced(text, Some("json")).or_else(|| fenced(text, None)) {
        return body.trim();
    }
    let start = text.find(['{', '[']);
    let end = text.rfind(['}', ']']);
    match (start, end) {
        (Some(s), Some(e)) if s < e => &text[s..=e],
        _ => text.trim(),
    }
}

/// The body of the first fence whose info string is `lang` (any fence when `None`).
fn fenced<'t>(text: &'t str, lang: Option<&str>) -> Option<&'t str> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let line_end = after.find('\n')?;
        let info = after[..line_end].trim();
        let body_start = &after[line_end + 1..];
        let close = body_start.find("```")?;
        if lang.is_none_or(|l| info.eq_ignore_ascii_case(l)) {
            return Some(&body_start[..close]);
        }
        rest = &body_start[close + 3..];
    }
    None
}

fn json_instructions(schema: &Value) -> String {
    format!(
        "* Your response must be in JSON format.\n\
         * Your JSON response must be returned within a Markdown ```json code fence.\n\
         * The JSON must follow the schema below.\n\n\
         <response_schema>\n{}\n</response_schema>",
        serde_json::to_string_pretty(schema).unwrap_or_default()
    )
}

fn code_instructions(lang: &str) -> String {
    let fence = lang.split(':').next().unwrap_or(lang);
    format!("* Return only the {lang} code, inside one Markdown ```{fence} code fence.")
}

/// DataDesigner's judge output: `{score_name: {"reasoning": str, "score": option}}`, where an
/// option is a key of the score's `options` as the config gives it: a JSON config's keys are
/// strings (`"1"`, not `1`), so DataDesigner answers with strings, and so does this.
fn judge_schema(scores: &[Score]) -> Value {
    let mut props = Map::new();
    for s in scores {
        let options: Vec<Value> = s.options.keys().map(|k| json!(k)).collect();
        props.insert(
            s.name.clone(),
            json!({
                "type": "object",
                "properties": {"reasoning": {"type": "string"}, "score": {"enum": options}},
                "required": ["reasoning", "score"],
            }),
        );
    }
    let required: Vec<&str> = scores.iter().map(|s| s.name.as_str()).collect();
    json!({"type": "object", "properties": props, "required": required})
}

/// DataDesigner's score coercion, before the schema check: a model's `score` that is not one
/// of the options as written but matches exactly one of them once both are normalized (text
/// trimmed and case-folded, `3` and `3.0` read as `"3"`) becomes that option, so `3` answers
/// option `"3"` and `"Good "` answers `"good"`. A boolean never matches a number's option.
fn coerce_judge_scores(scores: &[Score], value: &mut Value) {
    fn normalize(v: &Value) -> String {
        match v {
            Value::String(s) => s.trim().to_lowercase(),
            Value::Number(n) => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && n.as_i64().is_none() && n.as_u64().is_none() => {
                    format!("{}", f as i64)
                }
                _ => n.to_string(),
            },
            other => other.to_string().to_lowercase(),
        }
    }
    for s in scores {
        let Some(score) = value.get_mut(&s.name).and_then(|v| v.get_mut("score")) else {
            continue;
        };
        if score.as_str().is_some_and(|v| s.options.contains_key(v)) {
            continue;
        }
        let wanted = normalize(score);
        let mut matches = s
            .options
            .keys()
            .filter(|k| k.trim().to_lowercase() == wanted);
        if let (Some(key), None) = (matches.next(), matches.next()) {
            *score = Value::String(key.clone());
        }
    }
}

fn judge_instructions(scores: &[Score], schema: &Value) -> String {
    let mut rubric = String::from("Assess the content above on these criteria:\n");
    for s in scores {
        rubric.push_str(&format!("\n{}: {}\n", s.name, s.description));
        for (k, v) in &s.options {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            rubric.push_str(&format!("  * {k}: {v}\n"));
        }
    }
    format!("{rubric}\n{}", json_instructions(schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_in_fences_or_braces() {
        assert_eq!(extract_json("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(extract_json("sure! {\"a\": [1]} done"), "{\"a\": [1]}");
        assert_eq!(extract_json("```\n[1,2]\n```"), "[1,2]");
    }

    #[test]
    fn judge_scores_answer_with_the_option_as_written() {
        let scores = vec![
            Score {
                name: "quality".into(),
                description: "How good".into(),
                options: serde_json::from_value(json!({"1": "bad", "2": "good"})).unwrap(),
            },
            Score {
                name: "tone".into(),
                description: "Which tone".into(),
                options: serde_json::from_value(json!({"Warm": "w", "cold": "c", "1": "one"}))
                    .unwrap(),
            },
        ];
        let v = jsonschema::validator_for(&judge_schema(&scores)).unwrap();
        let answer = |quality: Value, tone: Value| {
            let mut a = json!({"quality": {"reasoning": "r", "score": quality},
                "tone": {"reasoning": "r", "score": tone}});
            coerce_judge_scores(&scores, &mut a);
            let valid = v.is_valid(&a);
            (
                a["quality"]["score"].clone(),
                a["tone"]["score"].clone(),
                valid,
            )
        };
        // As DataDesigner does: the option key, a string, whatever the model wrote.
        assert_eq!(
            answer(json!(2), json!("warm")),
            (json!("2"), json!("Warm"), true)
        );
        assert_eq!(
            answer(json!(2.0), json!(" COLD ")),
            (json!("2"), json!("cold"), true)
        );
        assert_eq!(answer(json!("1"), json!(1)), (json!("1"), json!("1"), true));
        // No option matches: left as it is, and the schema refuses it.
        assert!(!answer(json!(3), json!("warm")).2);
        assert_eq!(answer(json!(true), json!("warm")).0, json!(true));
        assert!(!v.is_valid(&json!({})));
    }
}
