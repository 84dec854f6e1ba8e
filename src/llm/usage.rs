//! Usage accounting: token and request counters per model alias. The client keeps a
//! process-wide book ([`LlmClient::usage_snapshot`](super::LlmClient::usage_snapshot)); callers
//! that need per-job totals keep their own [`ModelUsage`] and feed it each result.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use super::error::LlmError;
use super::types::{ChatResponse, Usage};

/// Counters for one model alias.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Calls that returned a response.
    pub calls: u64,
    /// Calls that ended in an [`LlmError`] (cancellations included).
    pub failed_calls: u64,
    /// HTTP requests sent, retries included.
    pub attempts: u64,
    /// Attempts beyond the first of each call.
    pub retries: u64,
    /// Input tokens of successful calls.
    pub prompt_tokens: u64,
    /// Output tokens of successful calls.
    pub completion_tokens: u64,
    /// Reasoning tokens, where the provider reports them.
    pub reasoning_tokens: u64,
}

impl ModelUsage {
    /// Counts a successful call.
    pub fn record_response(&mut self, r: &ChatResponse) {
        self.record_call(r.attempts, &r.usage);
    }

    /// Counts a successful call of any kind (chat, embeddings).
    pub fn record_call(&mut self, attempts: u32, usage: &Usage) {
        self.calls += 1;
        self.count_attempts(attempts);
        self.prompt_tokens += usage.prompt_tokens;
        self.completion_tokens += usage.completion_tokens;
        self.reasoning_tokens += usage.reasoning_tokens.unwrap_or(0);
    }

    /// Counts a failed call.
    pub fn record_error(&mut self, e: &LlmError) {
        self.failed_calls += 1;
        self.count_attempts(e.attempts());
    }

    /// Adds another set of counters (e.g. summing aliases or jobs).
    pub fn add(&mut self, o: &ModelUsage) {
        self.calls += o.calls;
        self.failed_calls += o.failed_calls;
        self.attempts += o.attempts;
        self.retries += o.retries;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.reasoning_tokens += o.reasoning_tokens;
    }

    fn count_attempts(&mut self, attempts: u32) {
        self.attempts += u64::from(attempts);
        self.retries += u64::from(attempts.saturating_sub(1));
    }
}

/// The client's running totals, per alias.
#[derive(Debug, Default)]
pub(crate) struct UsageBook {
    by_alias: Mutex<BTreeMap<String, ModelUsage>>,
}

impl UsageBook {
    pub(crate) fn record(&self, alias: &str, result: &Result<ChatResponse, LlmError>) {
        self.record_usage(alias, result.as_ref().map(|r| (r.attempts, &r.usage)));
    }

    /// Counts one call of any kind: `Ok((attempts, usage))` or the error.
    pub(crate) fn record_usage(&self, alias: &str, result: Result<(u32, &Usage), &LlmError>) {
        let mut map = self.by_alias.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = match map.get_mut(alias) {
            Some(e) => e,
            None => map.entry(alias.to_owned()).or_default(),
        };
        match result {
            Ok((attempts, usage)) => entry.record_call(attempts, usage),
            Err(e) => entry.record_error(e),
        }
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<String, ModelUsage> {
        self.by_alias
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ChatMessage;

    #[test]
    fn counts_calls_retries_and_tokens() {
        let book = UsageBook::default();
        let ok = ChatResponse {
            message: ChatMessage::assistant("x"),
            finish_reason: None,
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 4,
                reasoning_tokens: Some(2),
            },
            attempts: 3,
            cached: false,
        };
        book.record("a", &Ok(ok));
        book.record(
            "a",
            &Err(LlmError::Cancelled {
                model: "a".into(),
                attempts: 1,
            }),
        );
        let snap = book.snapshot();
        assert_eq!(
            snap["a"],
            ModelUsage {
                calls: 1,
                failed_calls: 1,
                attempts: 4,
                retries: 2,
                prompt_tokens: 10,
                completion_tokens: 4,
                reasoning_tokens: 2,
            }
        );
        let mut total = ModelUsage::default();
        total.add(&snap["a"]);
        total.add(&snap["a"]);
        assert_eq!(total.attempts, 8);
    }
}
