//! What LLM columns cost: requests and tokens, by model alias.

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
}

impl UsageCounts {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &UsageCounts) {
        self.requests += o.requests;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
    }
}
