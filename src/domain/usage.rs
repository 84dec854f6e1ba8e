//! What LLM columns cost: requests and tokens by model alias, and tool calls and turns by column.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Requests and tokens of one model alias (within a job, or added by one batch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UsageCounts {
    /// Chat requests answered (one per model turn; client-side retries not counted).
    pub requests: u64,
    /// Prompt (input) tokens as the provider reported them.
    pub prompt_tokens: u64,
    /// Completion (output) tokens as the provider reported them.
    pub completion_tokens: u64,
    /// Calls answered from the response cache: not in `requests` (no provider answered them),
    /// and no tokens (they cost nothing).
    #[serde(default)]
    pub cached_requests: u64,
    /// What the calls cost at the server's prices for the model when they were made (in
    /// billionths of the price's unit; shown as `cost`, in the unit). Absent (0) without
    /// prices: no cost is guessed.
    #[serde(
        default,
        rename = "cost",
        with = "cost_units",
        skip_serializing_if = "is_zero"
    )]
    #[schema(value_type = Option<f64>)]
    pub cost_nanos: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `cost_nanos` on the wire: a number in the price's unit.
mod cost_units {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(nanos: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(crate::domain::models::prices::from_nanos(*nanos))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Ok(crate::domain::models::prices::to_nanos(f64::deserialize(
            d,
        )?))
    }
}

impl UsageCounts {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &UsageCounts) {
        self.requests += o.requests;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.cached_requests += o.cached_requests;
        self.cost_nanos += o.cost_nanos;
    }
}

/// How one tool call ended. The four error kinds are those of the MCP client tool-execution
/// guide; each is answered to the model as an `Error:` tool message it can recover from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The tool ran and its result went to the model.
    Ok,
    /// The call could not be read: a malformed call block, arguments that are not a JSON
    /// object, no tool name.
    ExtractionError,
    /// The call was read but cannot run: an unknown or disallowed tool, or arguments that fail
    /// the tool's input schema.
    ValidationError,
    /// The tool failed: the server said `isError`, timed out, or could not be reached.
    ExecutionError,
    /// The tool ran but its result cannot be shown to the model (an image that is not one).
    FormattingError,
    /// Past `max_tool_call_turns`: refused with DataDesigner's refusal text, not run.
    Refused,
}

impl ToolOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [ToolOutcome; 6] = [
        Self::Ok,
        Self::ExtractionError,
        Self::ValidationError,
        Self::ExecutionError,
        Self::FormattingError,
        Self::Refused,
    ];

    /// The wire name (`ok`, `extraction_error`, ...), as the API and the database spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ExtractionError => "extraction_error",
            Self::ValidationError => "validation_error",
            Self::ExecutionError => "execution_error",
            Self::FormattingError => "formatting_error",
            Self::Refused => "refused",
        }
    }

    /// The outcome of a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// The tool use of one LLM column (within a job, or of one record).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolUsage {
    /// Tool-calling turns: model responses that asked for tools, however many calls each held.
    pub tool_turns: u64,
    /// Calls by tool name, then by outcome. A call that named no tool counts under `""`.
    pub tool_calls: BTreeMap<String, BTreeMap<ToolOutcome, u64>>,
}

impl ToolUsage {
    /// Counts one call of `tool`.
    pub fn count_call(&mut self, tool: &str, outcome: ToolOutcome) {
        *self
            .tool_calls
            .entry(tool.to_owned())
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }

    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &ToolUsage) {
        self.tool_turns += o.tool_turns;
        for (tool, outcomes) in &o.tool_calls {
            let mine = self.tool_calls.entry(tool.clone()).or_default();
            for (outcome, n) in outcomes {
                *mine.entry(*outcome).or_default() += n;
            }
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.tool_turns == 0 && self.tool_calls.is_empty()
    }
}
