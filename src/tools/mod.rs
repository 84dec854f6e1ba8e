//! Tools for LLM columns: which tools a column may call (a `ToolConfig` resolved against the
//! MCP pool and the inline tools), and running one call so that every failure comes back to
//! the model as an `Error:` tool message it can recover from.
//!
//! Routing follows DataDesigner: a tool config's `providers` are scanned in order and each
//! tool goes to the provider that lists it; the same name on two providers of one tool config
//! is a config error. Unlike DataDesigner, a call that is not allowed, unknown, has bad
//! arguments, times out or hits a broken server does not fail the record: the model is told.
//!
//! The types are here; `resolve` builds a [`Toolset`] from a tool config, `call` runs its
//! calls.

mod call;
mod coerce;
mod content;
pub mod events;
mod inline;
pub mod prompt;
mod resolve;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::domain::usage::ToolOutcome;
use crate::llm::{ChatMessage, ToolCall, ToolSpec};
use crate::mcp::{McpError, McpPool, ToolList};

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

/// An inline tool's HTTP client could not be built (at start).
#[derive(Debug, thiserror::Error)]
#[error("inline tool '{tool}': {message}")]
pub struct InlineToolError {
    /// The tool's name.
    pub tool: String,
    /// Why.
    pub message: String,
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

/// What a tool loop does with a model's text, for the fuzz target `llm_answer`
/// (`crate::fuzzing`): its prompt-based calls read (`calls` adds the native ones), then every
/// call's arguments checked against `schema` with coercion on, as a tool with that input
/// schema has them checked.
#[doc(hidden)]
pub(crate) fn read_calls_for_fuzzing(text: &str, calls: &[ToolCall], schema: &serde_json::Value) {
    let mentions = ["lookup".to_owned(), "get_time".to_owned()];
    let (_, prompted) = prompt::parse_calls(text, 1, Some(&mentions));
    let validator = jsonschema::validator_for(schema).ok();
    for call in calls.iter().chain(&prompted) {
        let check = validator.as_ref().map(|v| (v, schema));
        let _ = call::checked_arguments(&call.function.name, &call.function.arguments, check, true);
    }
}

#[cfg(test)]
mod tests {
    use super::call::{cap_text, parse_arguments, server_error_text};
    use super::*;
    use crate::llm::ContentBlock;

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
