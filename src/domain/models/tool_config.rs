//! DataDesigner's `ToolConfig` (`data_designer.config.mcp`): which MCP providers and tools an
//! LLM column may call, and how many turns and how long it may take.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{FieldProblem, check_timeout_sec};

/// DataDesigner's `ToolConfig`: which MCP providers an LLM column may call, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// Name that columns use in `tool_alias`.
    pub tool_alias: String,
    /// MCP provider names (server config); each call goes to the provider that has the tool.
    pub providers: Vec<String>,
    /// Only these tools are shown to the model and may be called; absent = all.
    #[serde(default)]
    pub allow_tools: Option<Vec<String>>,
    /// Tool-calling turns before calls are refused (default 5).
    #[serde(default = "default_max_tool_call_turns")]
    pub max_tool_call_turns: u32,
    /// Per-call timeout in seconds; absent = the server default.
    #[serde(default)]
    pub timeout_sec: Option<f64>,
    /// synthgate's addition: convert a call's arguments to its input schema's types where
    /// that loses nothing (`"42"` to `42`) before validating them. Off by default: DataDesigner
    /// passes arguments on unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coerce_arguments: bool,
}

fn default_max_tool_call_turns() -> u32 {
    5
}

/// The most tool-calling turns a tool config may allow. DataDesigner sets no upper bound; a
/// conversation of a hundred tool turns is already far past what a record's context holds.
pub const MAX_TOOL_CALL_TURNS: u32 = 100;

impl ToolConfig {
    /// Checks the ranges and duplicates DataDesigner enforces.
    pub fn problems(&self) -> Vec<FieldProblem> {
        let mut out = Vec::new();
        if self.tool_alias.trim().is_empty() {
            out.push(FieldProblem {
                field: "tool_alias".into(),
                message: "must not be empty".into(),
            });
        }
        if self.max_tool_call_turns == 0 {
            out.push(FieldProblem {
                field: "max_tool_call_turns".into(),
                message: "must be at least 1".into(),
            });
        }
        // Each turn is a model request and its tool calls: 2^32-1 turns is no budget at all.
        if self.max_tool_call_turns > MAX_TOOL_CALL_TURNS {
            out.push(FieldProblem {
                field: "max_tool_call_turns".into(),
                message: format!("must be at most {MAX_TOOL_CALL_TURNS}"),
            });
        }
        if let Some(t) = self.timeout_sec
            && let Err(message) = check_timeout_sec(t)
        {
            out.push(FieldProblem {
                field: "timeout_sec".into(),
                message,
            });
        }
        if let Some(allow) = &self.allow_tools {
            let mut seen = std::collections::HashSet::new();
            for t in allow {
                if !seen.insert(t) {
                    out.push(FieldProblem {
                        field: "allow_tools".into(),
                        message: format!("tool '{t}' is listed more than once"),
                    });
                }
            }
        }
        out
    }
}
