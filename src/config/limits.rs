//! The `limits:` section: bounds on what one request, job or key may ask for.

use serde::Deserialize;

/// Bounds on what one request may ask for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest `num_records` of one job.
    pub max_num_records: u32,
    /// Largest `limit` of one page of records or jobs.
    pub max_page_size: u32,
    /// Jobs one API key (or, with auth off, everyone) may have queued or running; absent =
    /// unbounded.
    pub max_jobs_in_flight_per_key: Option<u32>,
    /// Records (the `num_records` of every job) one API key may have queued or running
    /// together; absent = unbounded. A submit past it is `429 too_many_jobs`.
    pub max_records_in_flight_per_key: Option<u64>,
    /// Longest rendered prompt (system + user) sent to a model, in characters; a longer one
    /// fails the record with `prompt_too_large` instead of costing tokens.
    pub max_prompt_chars: usize,
    /// Longest tool result (text) handed back to a model, in characters; longer ones are cut
    /// with a marker saying how much was dropped.
    pub max_tool_result_chars: usize,
    /// Largest `metadata` a job may carry, in bytes of compact JSON. Metadata is stored with
    /// the job and returned with it, in list pages too, so it stays small.
    pub max_metadata_bytes: usize,
    /// Largest image an `image` column may store, in bytes (decoded); a larger one fails its
    /// record with `image_too_large`.
    pub max_image_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_num_records: 1_000_000,
            max_page_size: 1000,
            max_jobs_in_flight_per_key: Some(100),
            max_records_in_flight_per_key: Some(10_000_000),
            max_prompt_chars: 400_000,
            max_tool_result_chars: 100_000,
            max_metadata_bytes: 16 * 1024,
            max_image_bytes: 20 * 1024 * 1024,
        }
    }
}

impl LimitsConfig {
    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.max_num_records == 0 {
            out.push("config key `limits.max_num_records`: must be at least 1".into());
        }
        if self.max_page_size == 0 {
            out.push("config key `limits.max_page_size`: must be at least 1".into());
        }
        if self.max_jobs_in_flight_per_key == Some(0) {
            out.push("config key `limits.max_jobs_in_flight_per_key`: must be at least 1".into());
        }
        if self.max_records_in_flight_per_key == Some(0) {
            out.push(
                "config key `limits.max_records_in_flight_per_key`: must be at least 1".into(),
            );
        }
        if self.max_prompt_chars == 0 {
            out.push("config key `limits.max_prompt_chars`: must be at least 1".into());
        }
        if self.max_tool_result_chars < 100 {
            out.push("config key `limits.max_tool_result_chars`: must be at least 100".into());
        }
        if self.max_metadata_bytes < 2 {
            out.push("config key `limits.max_metadata_bytes`: must be at least 2 (`{}`)".into());
        }
    }
}
