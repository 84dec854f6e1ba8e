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
//!
//! Beside them here: what the model is asked to answer and how it is read back
//! (`llm_output`, `code`), and the columns that call a model for embeddings and images
//! (`media`, with image context in `multimodal`).

mod code;
mod llm_output;
pub(super) mod media;
pub(super) mod multimodal;

use std::collections::HashMap;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::domain::dataset::{LlmColumn, LlmKind, TraceType};
use crate::domain::models::{ModelConfig, ToolCallStrategy, ToolConfig};
use crate::domain::record::RecordErrorCode;
use crate::domain::usage::{ToolOutcome, ToolUsage};
use crate::llm::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ContentBlock, LlmError, ToolSpec, Usage,
};
use crate::mcp::CallScope;
use crate::tools::events::{ToolEvent, ToolEvents};
use crate::tools::{REFUSAL_MESSAGE, ToolHub, Toolset, ToolsetError, prompt};
pub(crate) use llm_output::parse_answers_for_fuzzing;
use llm_output::{
    code_instructions, json_instructions, judge_instructions, judge_schema, parse_answer,
};

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
    /// The schema of those answers, for providers that take it as `response_format`
    /// (`model_providers[].structured_output`); shared by every request of the column.
    pub(crate) response_schema: Option<std::sync::Arc<Value>>,
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
    /// The final conversation (up to the failure, for a failed column: a request the provider
    /// refused ends it), per `with_trace`; `None` when no trace is kept or no request was
    /// sent.
    pub(crate) trace: Option<Vec<ChatMessage>>,
    pub(crate) usage: Usage,
    pub(crate) requests: u32,
    /// Calls answered from the response cache (not in `requests`, no tokens).
    pub(crate) cached: u32,
    pub(crate) tools: ToolUsage,
}

/// The conversation of one column while it runs, and what it has spent so far.
#[derive(Default)]
struct Conversation<'c> {
    /// The column's name (tool events carry it).
    column: &'c str,
    messages: Vec<ChatMessage>,
    usage: Usage,
    /// Requests the model answered.
    requests: u32,
    /// Calls answered from the response cache.
    cached: u32,
    /// Whether a request was sent at all, answered or not: a first request the provider
    /// refused still leaves its messages in the trace, so the refused request can be read.
    asked: bool,
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
                (Some(judge_instructions(&schema)), Some(("scores", schema)))
            }
        };
        let validator = match &schema {
            Some((field, schema)) => Some(jsonschema::validator_for(schema).map_err(|e| {
                (
                    (*field).to_owned(),
                    format!("is not a valid JSON Schema: {e}"),
                )
            })?),
            None => None,
        };
        Ok(Self {
            column,
            prompt,
            system,
            instructions,
            validator,
            response_schema: schema.map(|(_, s)| std::sync::Arc::new(s)),
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
        let trace = if conv.asked {
            self.trace(rt, conv.messages)
        } else {
            None
        };
        let spent = LlmSpent {
            trace,
            usage: conv.usage,
            requests: conv.requests,
            cached: conv.cached,
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
                    response_schema: self.response_schema.as_ref(),
                };
                conv.asked = true;
                let resp = turn.ask(rt, model, &mut conv.messages, &mut specs).await?;
                if resp.cached {
                    conv.cached += 1;
                } else {
                    conv.requests += 1;
                    add_usage(&mut conv.usage, &resp.usage);
                }
                let mut msg = resp.message;
                msg.cached = resp.cached;
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
        parse_answer(&self.column.kind, self.validator.as_ref(), text)
    }
}

/// One request of the tool loop.
struct Turn<'t> {
    toolset: Option<&'t Toolset>,
    prompt_based: bool,
    /// Tool turns taken so far.
    turns: u32,
    /// The column's answer schema (structured, judge), for `response_format`.
    response_schema: Option<&'t std::sync::Arc<Value>>,
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
            let req = self.request(std::mem::take(messages));
            let resp = rt.chat.chat(model, &req, rt.cancel).await;
            *messages = req.messages;
            return resp;
        };
        if self.prompt_based {
            let req = self.request(prompt::lower(messages, specs));
            return rt.chat.chat(model, &req, rt.cancel).await;
        }
        let mut req = self
            .request(std::mem::take(messages))
            .with_tools(std::mem::take(specs));
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

    /// A request of `messages` carrying the column's answer schema.
    fn request(&self, messages: Vec<ChatMessage>) -> ChatRequest {
        let mut req = ChatRequest::new(messages);
        req.response_schema = self.response_schema.cloned();
        req
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
    if let Some(r) = u.reasoning_tokens {
        *total.reasoning_tokens.get_or_insert(0) += r;
    }
}
