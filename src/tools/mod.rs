//! Tools for LLM columns: which tools a column may call (a `ToolConfig` resolved against the
//! MCP pool and the inline tools), and running one call so that every failure comes back to
//! the model as an `Error:` tool message it can recover from.
//!
//! Routing follows DataDesigner: a tool config's `providers` are scanned in order and each
//! tool goes to the provider that lists it; the same name on two providers of one tool config
//! is a config error. Unlike DataDesigner, a call that is not allowed, unknown, has bad
//! arguments, times out or hits a broken server does not fail the record: the model is told.

mod coerce;
mod content;
pub mod events;
mod inline;
pub mod prompt;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::InlineToolConfig;
use crate::domain::models::{ModelConfig, ToolConfig, duration_from_secs};
use crate::domain::usage::ToolOutcome;
use crate::llm::{ChatMessage, ContentBlock, ToolCall, ToolSpec};
use crate::mcp::{CallScope, McpError, McpPool, ToolList};

pub use inline::InlineTool;

/// The exact refusal DataDesigner 0.9.7 sends once the turn budget is spent.
pub const REFUSAL_MESSAGE: &str = "Tool call refused: You have reached the maximum number of tool-calling turns. Please provide your final response without requesting additional tool calls.";

/// Every tool source of the server: the MCP pool and the inline (HTTP) tools.
#[derive(Clone)]
pub struct ToolHub {
    pool: McpPool,
    inline: Arc<HashMap<String, Arc<InlineTool>>>,
    /// `limits.max_tool_result_chars`.
    max_result_chars: usize,
}

/// Why a tool config cannot be used with a model. At submit these are config errors (or `503
/// mcp_unavailable`); after submit they fail the record; `GET /v1/tools` shows them.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolsetError {
    /// The model's `mcp_servers` access list allows none of the tool config's providers.
    #[error(
        "model '{model}' may not use any provider of tool config '{tool_alias}' (its mcp_servers list allows: {})",
        list_or_none(.allowed)
    )]
    ModelNotAllowed {
        /// The model alias.
        model: String,
        /// The tool config.
        tool_alias: String,
        /// The model's `mcp_servers` list.
        allowed: Vec<String>,
    },
    /// A provider could not list its tools (unreachable, refused, broken).
    #[error("tool config '{tool_alias}': {error}")]
    ProviderUnavailable {
        /// The tool config.
        tool_alias: String,
        /// What the provider did. Not a `source`: the message already quotes it.
        error: McpError,
    },
    /// The same tool name is offered by two providers of the tool config.
    #[error(
        "tool config '{tool_alias}': duplicate tool names found across MCP providers: {}. Each tool name must be unique across all providers in a ToolConfig.",
        duplicates(.names)
    )]
    DuplicateToolName {
        /// The tool config.
        tool_alias: String,
        /// Each duplicated name with the providers that offer it.
        names: Vec<(String, Vec<String>)>,
    },
    /// `allow_tools` names tools no provider of the tool config offers.
    #[error(
        "tool config '{tool_alias}': allowed tool(s) {} not found on any of its providers ({})",
        quoted(.missing),
        .providers.join(", ")
    )]
    AllowedToolNotFound {
        /// The tool config.
        tool_alias: String,
        /// The allowed names no provider has.
        missing: Vec<String>,
        /// The providers searched (after the model's access list).
        providers: Vec<String>,
    },
}

impl ToolsetError {
    /// Stable code, as `GET /v1/tools` shows it (the config issue and record error codes of
    /// the same names are mapped from the variants where they are raised).
    pub fn code(&self) -> &'static str {
        match self {
            Self::ModelNotAllowed { .. } => "invalid_tool_config",
            Self::ProviderUnavailable { .. } => "mcp_unavailable",
            Self::DuplicateToolName { .. } => "duplicate_tool_name",
            Self::AllowedToolNotFound { .. } => "unknown_tool",
        }
    }
}

impl ToolHub {
    /// A hub with no MCP provider and no inline tool: a server that configures none.
    pub fn empty() -> Self {
        crate::install_crypto_provider();
        let http = reqwest::Client::new();
        let max_result_chars = crate::config::LimitsConfig::default().max_tool_result_chars;
        Self::new(McpPool::new(&[], http.clone()), &[], http, max_result_chars)
    }

    /// A hub over the shared pool and the server's inline tools.
    pub fn new(
        pool: McpPool,
        inline: &[InlineToolConfig],
        http: reqwest::Client,
        max_result_chars: usize,
    ) -> Self {
        let inline = inline
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    Arc::new(InlineTool::new(t.clone(), http.clone())),
                )
            })
            .collect();
        Self {
            pool,
            inline: Arc::new(inline),
            max_result_chars,
        }
    }

    /// The MCP pool (status, shutdown, scope release).
    pub fn pool(&self) -> &McpPool {
        &self.pool
    }

    /// The providers `model` may use out of `cfg.providers`: LlamaFarm's `mcp_servers` access
    /// list (absent = all, `[]` = none) filters MCP providers; inline tools are not servers
    /// and are never filtered.
    fn providers_for<'c>(&self, cfg: &'c ToolConfig, model: Option<&ModelConfig>) -> Vec<&'c str> {
        cfg.providers
            .iter()
            .map(String::as_str)
            .filter(|p| {
                self.inline.contains_key(*p)
                    || model
                        .and_then(|m| m.mcp_servers.as_ref())
                        .is_none_or(|allowed| allowed.iter().any(|a| a == p))
            })
            .collect()
    }

    /// Resolves `cfg` for `model` (`None`: no `mcp_servers` restriction): lists each
    /// provider's tools (cached), checks duplicates and the allow list, and returns what the
    /// model is offered and where each call goes.
    pub async fn toolset(
        &self,
        cfg: &ToolConfig,
        model: Option<&ModelConfig>,
        scope: Option<&CallScope>,
    ) -> Result<Toolset, ToolsetError> {
        let providers = self.providers_for(cfg, model);
        if let Some(model) = model
            && providers.is_empty()
            && !cfg.providers.is_empty()
        {
            return Err(ToolsetError::ModelNotAllowed {
                model: model.alias.clone(),
                tool_alias: cfg.tool_alias.clone(),
                allowed: model.mcp_servers.clone().unwrap_or_default(),
            });
        }
        let mut sources: Vec<(&str, Source)> = Vec::with_capacity(providers.len());
        for p in providers {
            if let Some(t) = self.inline.get(p) {
                sources.push((p, Source::Inline(t.clone())));
                continue;
            }
            let list = self.pool.tools(p, scope).await.map_err(|error| {
                ToolsetError::ProviderUnavailable {
                    tool_alias: cfg.tool_alias.clone(),
                    error,
                }
            })?;
            sources.push((p, Source::Mcp(list)));
        }

        // Duplicates are checked before the allow list, as DataDesigner does.
        let mut owners: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (p, s) in &sources {
            for name in s.names() {
                owners.entry(name.to_owned()).or_default().push(p);
            }
        }
        let dups: Vec<(String, Vec<String>)> = owners
            .iter()
            .filter(|(_, ps)| ps.len() > 1)
            .map(|(n, ps)| (n.clone(), ps.iter().map(|p| (*p).to_owned()).collect()))
            .collect();
        if !dups.is_empty() {
            return Err(ToolsetError::DuplicateToolName {
                tool_alias: cfg.tool_alias.clone(),
                names: dups,
            });
        }
        if let Some(allow) = &cfg.allow_tools {
            let missing: Vec<String> = allow
                .iter()
                .filter(|a| !owners.contains_key(a.as_str()))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(ToolsetError::AllowedToolNotFound {
                    tool_alias: cfg.tool_alias.clone(),
                    missing,
                    providers: sources.iter().map(|(p, _)| (*p).to_owned()).collect(),
                });
            }
        }

        let allowed = |name: &str| {
            cfg.allow_tools
                .as_ref()
                .is_none_or(|a| a.iter().any(|t| t == name))
        };
        let hidden: Vec<String> = owners.into_keys().filter(|n| !allowed(n)).collect();
        let mut specs = Vec::new();
        let mut routes = HashMap::new();
        for (p, s) in sources {
            match s {
                Source::Inline(t) => {
                    if allowed(&t.cfg.name) {
                        specs.push(t.spec());
                        routes.insert(t.cfg.name.clone(), Route::Inline(t));
                    }
                }
                Source::Mcp(list) => {
                    for (i, tool) in list.tools.iter().enumerate() {
                        if allowed(&tool.name) {
                            // Shares the list's schema and its pre-written JSON.
                            specs.push(ToolSpec {
                                name: tool.name.clone(),
                                description: tool.description.clone(),
                                parameters: tool.input_schema.clone(),
                                openai: tool.openai.clone(),
                            });
                            routes.insert(
                                tool.name.clone(),
                                Route::Mcp {
                                    provider: p.to_owned(),
                                    list: list.clone(),
                                    index: i,
                                },
                            );
                        }
                    }
                }
            }
        }
        Ok(Toolset {
            alias: cfg.tool_alias.clone(),
            offered: specs.iter().map(|s| s.name.clone()).collect(),
            specs,
            routes,
            hidden,
            // Validation bounds `timeout_sec`; an unusable value means the default, not a panic.
            timeout: cfg.timeout_sec.and_then(duration_from_secs),
            max_turns: cfg.max_tool_call_turns,
            coerce: cfg.coerce_arguments,
            max_result_chars: self.max_result_chars,
            pool: self.pool.clone(),
        })
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn duplicates(names: &[(String, Vec<String>)]) -> String {
    names
        .iter()
        .map(|(n, ps)| format!("'{n}' (in: {})", ps.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

enum Source {
    Mcp(Arc<ToolList>),
    Inline(Arc<InlineTool>),
}

impl Source {
    fn names(&self) -> Vec<&str> {
        match self {
            Self::Mcp(l) => l.tools.iter().map(|t| t.name.as_str()).collect(),
            Self::Inline(t) => vec![t.cfg.name.as_str()],
        }
    }
}

enum Route {
    Mcp {
        provider: String,
        list: Arc<ToolList>,
        index: usize,
    },
    Inline(Arc<InlineTool>),
}

/// A tool config resolved for one generation: what the model is offered, and where each call
/// goes. DataDesigner fetches the schemas once per generation too.
pub struct Toolset {
    alias: String,
    /// Offered to the model, provider order then server order. The tool loop moves them into
    /// each request and back, so error messages name the tools from `offered`.
    pub specs: Vec<ToolSpec>,
    /// The names of `specs`, in their order.
    offered: Vec<String>,
    routes: HashMap<String, Route>,
    /// Tools the providers have but `allow_tools` hides.
    hidden: Vec<String>,
    timeout: Option<Duration>,
    /// `max_tool_call_turns`.
    pub max_turns: u32,
    /// `coerce_arguments`: convert arguments to the schema's types where that is lossless.
    coerce: bool,
    max_result_chars: usize,
    pool: McpPool,
}

/// One call answered: the `tool` message for the model, and what the job's usage and event
/// stream say about it.
#[derive(Debug)]
pub struct Answered {
    /// The `tool` message (a result, or an `Error:` text).
    pub message: ChatMessage,
    /// How the call ended.
    pub outcome: ToolOutcome,
    /// The provider that served the tool, `inline` for an inline tool, `None` when the call
    /// never reached one.
    pub source: Option<String>,
    /// From the call's start to its answer.
    pub elapsed: Duration,
}

/// Why a call was answered with an error: the outcome it counts as and the text the model gets
/// after `Error: `.
type Failure = (ToolOutcome, String);

impl Toolset {
    /// Runs one call and answers it. Never fails: every problem becomes an `Error: ...` message
    /// for the model, counted under its outcome.
    pub async fn execute(&self, call: &ToolCall, scope: Option<&CallScope>) -> Answered {
        let started = std::time::Instant::now();
        let source = self.source_of(&call.function.name).map(str::to_owned);
        let (message, outcome) = match self.run(call, scope).await {
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
        let mut args = parse_arguments(name, &call.function.arguments)
            .map_err(|m| (ToolOutcome::ExtractionError, m))?;
        let (validator, schema) = match route {
            Route::Mcp { list, index, .. } => (
                list.tools[*index].validator.as_ref(),
                list.tools[*index].input_schema.as_ref(),
            ),
            Route::Inline(t) => (t.validator.as_ref(), &t.cfg.parameters),
        };
        if let Some(v) = validator {
            // The arguments are lent to a `Value` for the check and taken back, not copied.
            let mut value = Value::Object(std::mem::take(&mut args));
            if self.coerce && !v.is_valid(&value) {
                coerce::to_schema(&mut value, schema);
            }
            let errors: Vec<String> = v
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
            if let Value::Object(m) = value {
                args = m;
            }
        }
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

/// The arguments as a JSON object; empty means `{}` (DataDesigner). Unlike DataDesigner, a
/// valid JSON value that is not an object is reported rather than replaced by `{}`.
fn parse_arguments(name: &str, raw: &str) -> Result<Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!(
            "Invalid arguments for tool '{name}': expected a JSON object, got {}.",
            kind(&other)
        )),
        Err(e) => Err(format!(
            "Invalid arguments for tool '{name}': not valid JSON ({e}). Arguments must be a JSON object."
        )),
    }
}

/// Cuts the text of a tool result to `max` characters in all, keeping its beginning and every
/// image, and says how much was dropped, so the model knows the result is partial (a silently
/// cut JSON document would just look broken).
fn cap_text(mut blocks: Vec<ContentBlock>, max: usize) -> Vec<ContentBlock> {
    let total: usize = blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count(),
            ContentBlock::ImageUrl { .. } => 0,
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

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A server's `isError` result as one `Error:` text: its text blocks, else a generic line.
fn server_error_text(name: &str, blocks: &[ContentBlock]) -> String {
    let text: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            ContentBlock::ImageUrl { .. } => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object() {
        assert!(parse_arguments("t", "").unwrap().is_empty());
        assert_eq!(parse_arguments("t", r#"{"a":1}"#).unwrap()["a"], 1);
        let e = parse_arguments("t", "[1]").unwrap_err();
        assert!(e.contains("expected a JSON object, got an array"), "{e}");
        let e = parse_arguments("t", "{not json").unwrap_err();
        assert!(
            e.starts_with("Invalid arguments for tool 't': not valid JSON"),
            "{e}"
        );
    }

    #[test]
    fn long_results_are_cut_with_a_marker_and_images_kept() {
        let blocks = vec![
            ContentBlock::text("a".repeat(80)),
            ContentBlock::image_url("data:image/png;base64,x"),
            ContentBlock::text("é".repeat(50)),
        ];
        let out = cap_text(blocks.clone(), 100);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0], ContentBlock::text("a".repeat(80)));
        assert_eq!(out[1], ContentBlock::image_url("data:image/png;base64,x"));
        assert_eq!(out[2], ContentBlock::text("é".repeat(20)));
        assert_eq!(
            out[3],
            ContentBlock::text(
                "[tool result truncated: 30 of 130 characters omitted (limits.max_tool_result_chars = 100)]"
            )
        );
        assert_eq!(cap_text(blocks.clone(), 130), blocks);
    }

    #[test]
    fn toolset_errors_name_the_tool_config_and_what_is_wrong() {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let e = ToolsetError::ModelNotAllowed {
            model: "m".into(),
            tool_alias: "t".into(),
            allowed: Vec::new(),
        };
        assert_eq!(e.code(), "invalid_tool_config");
        assert_eq!(
            e.to_string(),
            "model 'm' may not use any provider of tool config 't' (its mcp_servers list allows: none)"
        );
        let e = ToolsetError::ModelNotAllowed {
            model: "m".into(),
            tool_alias: "t".into(),
            allowed: strings(&["a", "b"]),
        };
        assert!(
            e.to_string()
                .ends_with("(its mcp_servers list allows: a, b)")
        );
        let e = ToolsetError::DuplicateToolName {
            tool_alias: "t".into(),
            names: vec![
                ("x".into(), strings(&["a", "b"])),
                ("y".into(), strings(&["a", "c"])),
            ],
        };
        assert_eq!(e.code(), "duplicate_tool_name");
        assert_eq!(
            e.to_string(),
            "tool config 't': duplicate tool names found across MCP providers: 'x' (in: a, b); 'y' (in: a, c). Each tool name must be unique across all providers in a ToolConfig."
        );
        let e = ToolsetError::AllowedToolNotFound {
            tool_alias: "t".into(),
            missing: strings(&["p", "q"]),
            providers: strings(&["a", "b"]),
        };
        assert_eq!(e.code(), "unknown_tool");
        assert_eq!(
            e.to_string(),
            "tool config 't': allowed tool(s) 'p', 'q' not found on any of its providers (a, b)"
        );
    }

    #[test]
    fn server_errors_are_not_double_prefixed() {
        let b = vec![ContentBlock::text("Error: kaboom")];
        assert_eq!(server_error_text("t", &b), "kaboom");
        let b = vec![ContentBlock::text("Error executing tool boom: kaboom")];
        assert_eq!(
            server_error_text("t", &b),
            "Error executing tool boom: kaboom"
        );
        assert!(server_error_text("t", &[]).contains("without a message"));
    }
}
