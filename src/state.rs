//! `AppState`: built once in `app.rs`, cheap to clone (every field is a handle).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jobs::JobService;
use crate::store::Store;

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Jobs, records and traces.
    pub store: Arc<dyn Store>,
    /// Answers LLM columns (preview runs them in the request).
    pub llm: Arc<dyn crate::llm::ChatModel>,
    /// API keys (empty: authentication off).
    pub keys: crate::auth::ApiKeys,
    /// MCP and inline tools (one session pool per process).
    pub tools: crate::tools::ToolHub,
    /// Submit and cancel; compiled plans.
    pub jobs: JobService,
    /// The validated server config.
    pub config: Arc<Config>,
    /// Cancelled on shutdown; long-lived responses (event streams) end when it fires.
    pub shutdown: CancellationToken,
}
