//! The mock's script: ordered rules (a condition and a canned reply) plus fault-injection
//! knobs. Loaded from JSON (or YAML in the binary), at start or via `POST /_mock/script`.
//!
//! ```json
//! {
//!   "rules": [
//!     {"when": {"user_contains": "weather", "assistant_turns": 0, "has_tools": true},
//!      "reply": {"reasoning": "I need the forecast.",
//!                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
//!     {"when": {"last_is_tool_result": true}, "reply": {"text": "It is sunny."}},
//!     {"when": {"model": "flaky"}, "reply": {"status": 503, "retry_after": 1}, "times": 2},
//!     {"when": {"system_contains": "JSON"}, "reply": {"json": {"title": "T", "score": 3}}}
//!   ],
//!   "faults": {"latency_ms": 20, "rate_limit_every": 10, "retry_after": "1",
//!              "error_every": 7, "error_status": 500}
//! }
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::view::View;

/// Everything that shapes the mock's answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Tried in order; the first that matches (and has `times` left) answers.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Faults applied to every request before the rules.
    #[serde(default)]
    pub faults: Faults,
    /// How many request bodies to keep for `GET /_mock/requests` (default 200).
    #[serde(default = "default_history_limit")]
    pub history_limit: usize,
}

fn default_history_limit() -> usize {
    200
}

// Written out so `Script::default()` keeps history like an empty JSON script does.
impl Default for Script {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            faults: Faults::default(),
            history_limit: default_history_limit(),
        }
    }
}

/// A condition and the reply it gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// All present conditions must hold; an empty `when` matches everything.
    #[serde(default)]
    pub when: When,
    /// What to answer.
    #[serde(default)]
    pub reply: Reply,
    /// Apply this many times, then fall through to later rules; absent = forever.
    #[serde(default)]
    pub times: Option<u32>,
}

/// Conditions on the incoming request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The request's `model` equals this.
    pub model: Option<String>,
    /// `openai` (`/v1/chat/completions`), `anthropic` (`/v1/messages`), `embeddings`
    /// (`/v1/embeddings`) or `images` (`/v1/images/generations`).
    pub api: Option<Api>,
    /// Substring of the last user message that has text (tool results are not user text); for
    /// embeddings the inputs joined by newlines, for images the prompt.
    pub user_contains: Option<String>,
    /// Substring of the system prompt.
    pub system_contains: Option<String>,
    /// Number of assistant messages in the conversation so far.
    pub assistant_turns: Option<u32>,
    /// Whether tools were offered.
    pub has_tools: Option<bool>,
    /// Whether the last message is a tool result.
    pub last_is_tool_result: Option<bool>,
    /// Substring of the tool results that end the conversation (e.g. `Error:` or the
    /// refusal text).
    pub tool_result_contains: Option<String>,
    /// Whether `tool_choice` forbids tool calls.
    pub tools_forbidden: Option<bool>,
}

/// The wire protocol of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI Chat Completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI-compatible embeddings (`/v1/embeddings`): deterministic vectors.
    Embeddings,
    /// OpenAI-compatible image generation (`/v1/images/generations`): a small PNG.
    Images,
}

/// A canned answer. Content precedence: `json`, then `text`, then `""` when there are tool
/// calls, else the default reply. `status` turns it into an error; `malformed`, `reset` and
/// `endless` break the transport.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Assistant text.
    pub text: Option<String>,
    /// Reasoning (`reasoning_content` for OpenAI, a `thinking` block for Anthropic).
    pub reasoning: Option<String>,
    /// Tool calls to request; ids are generated as `call_<n>`.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// A JSON value returned as the content, fenced as ```json (structured columns).
    pub json: Option<Value>,
    /// Answer with the mock's PNG in `message.images` too (OpenAI chat: how image models on
    /// the chat route answer).
    #[serde(default)]
    pub image: bool,
    /// `finish_reason` / `stop_reason` override (e.g. `length`).
    pub finish_reason: Option<String>,
    /// Answer with this HTTP error status instead.
    pub status: Option<u16>,
    /// Error body: a string is sent as text, anything else as JSON; absent = the protocol's
    /// usual error object.
    pub body: Option<Value>,
    /// `Retry-After` header on the error (seconds as a number, or any string such as a date).
    pub retry_after: Option<Value>,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: u64,
    /// Answer only once the mock is released (`MockLlm::release`, `POST /_mock/release`),
    /// after `delay_ms`: a test opens what must be open before any answer, then releases,
    /// instead of guessing a delay long enough.
    #[serde(default)]
    pub hold: bool,
    /// Send a 200 whose body is truncated JSON.
    #[serde(default)]
    pub malformed: bool,
    /// Send the headers and part of the body, then drop the connection.
    #[serde(default)]
    pub reset: bool,
    /// Send a 200 whose body never ends (the start of an answer, then spaces until the client
    /// hangs up): a provider, or a proxy in front of one, that streams without bound.
    #[serde(default)]
    pub endless: bool,
}

/// A tool call in a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments: an object, or a string sent verbatim (to script invalid JSON).
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// OpenAI only: send the call without its `function` object (`{"id", "type", "name"}`),
    /// a malformed native call.
    #[serde(default)]
    pub broken: bool,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Faults injected into every request, counted over all requests since the last reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Added to every request, before anything else.
    #[serde(default)]
    pub latency_ms: u64,
    /// Every k-th request gets a 429.
    pub rate_limit_every: Option<u64>,
    /// `Retry-After` on those 429s (a number of seconds, or a string).
    pub retry_after: Option<Value>,
    /// Every k-th request gets `error_status`.
    pub error_every: Option<u64>,
    /// Each request gets `error_status` with this probability (seeded, reproducible).
    pub error_probability: Option<f64>,
    /// Seed for `error_probability`.
    #[serde(default)]
    pub seed: u64,
    /// Status of injected errors (default 500).
    #[serde(default = "default_error_status")]
    pub error_status: u16,
    /// Answer a request with a message whose `content` is a list of text parts the way
    /// llama-cpp-python's server does (0.3.36: HTTP 500, "can only concatenate str (not
    /// "list") to str", from its chat template): only string content is read.
    #[serde(default)]
    pub string_content_only: bool,
}

fn default_error_status() -> u16 {
    500
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            rate_limit_every: None,
            retry_after: None,
            error_every: None,
            error_probability: None,
            seed: 0,
            error_status: default_error_status(),
            string_content_only: false,
        }
    }
}

impl When {
    /// True when every present condition holds for `v`.
    pub fn matches(&self, v: &View) -> bool {
        self.model.as_ref().is_none_or(|m| *m == v.model)
            && self.api.is_none_or(|a| a == v.api)
            && self
                .user_contains
                .as_ref()
                .is_none_or(|s| v.last_user.contains(s.as_str()))
            && self
                .system_contains
                .as_ref()
                .is_none_or(|s| v.system.contains(s.as_str()))
            && self.assistant_turns.is_none_or(|n| n == v.assistant_turns)
            && self.has_tools.is_none_or(|b| b == v.has_tools)
            && self
                .last_is_tool_result
                .is_none_or(|b| b == v.last_is_tool_result)
            && self
                .tool_result_contains
                .as_ref()
                .is_none_or(|s| v.last_tool_text.contains(s.as_str()))
            && self.tools_forbidden.is_none_or(|b| b == v.tools_forbidden)
    }
}

/// A header value from a number or string.
pub(crate) fn header_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_documented_example_parses() {
        let text = include_str!("script.rs")
            .split("//! ```json\n")
            .nth(1)
            .and_then(|s| s.split("//! ```\n").next())
            .unwrap()
            .lines()
            .map(|l| l.trim_start_matches("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let s: Script = serde_json::from_str(&text).unwrap();
        assert_eq!(s.rules.len(), 4);
        assert_eq!(s.rules[2].times, Some(2));
        assert_eq!(s.faults.error_status, 500);
        assert_eq!(s.history_limit, 200);
        assert!(serde_json::from_value::<Script>(json!({"rulez": []})).is_err());
    }

    #[test]
    fn conditions_all_must_hold() {
        let v = View {
            api: Api::Openai,
            model: "m".into(),
            system: "be terse".into(),
            last_user: "what is the weather".into(),
            assistant_turns: 1,
            has_tools: true,
            last_is_tool_result: true,
            last_tool_text: "Error: boom".into(),
            tools_forbidden: true,
            all_text: String::new(),
            text_part_lists: false,
        };
        let when = |j| serde_json::from_value::<When>(j).unwrap();
        assert!(when(json!({})).matches(&v));
        assert!(
            when(
                json!({"model": "m", "api": "openai", "user_contains": "weather",
            "system_contains": "terse", "assistant_turns": 1, "has_tools": true,
            "last_is_tool_result": true})
            )
            .matches(&v)
        );
        assert!(!when(json!({"model": "x"})).matches(&v));
        assert!(
            when(json!({"tool_result_contains": "Error:", "tools_forbidden": true})).matches(&v)
        );
        assert!(!when(json!({"tool_result_contains": "refused"})).matches(&v));
        assert!(!when(json!({"api": "anthropic"})).matches(&v));
        assert!(!when(json!({"assistant_turns": 0})).matches(&v));
        assert!(!when(json!({"has_tools": false})).matches(&v));
    }
}
