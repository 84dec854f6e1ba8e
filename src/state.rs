//! `AppState`: built once in `app.rs`, cheap to clone (every field is a handle).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jobs::JobService;

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    /// API keys (empty: authentication off).
    pub keys: crate::auth::ApiKeys,
    /// MCP and inline tools (one session pool per process), for listing them.
    pub tools: crate::tools::ToolHub,
    /// The one door to jobs, records, traces, exports and progress.
    pub jobs: JobService,
    /// Uploads, lists, previews and deletes of stored datasets.
    pub datasets: crate::datasets::DatasetService,
    /// The validated server config.
    pub config: Arc<Config>,
    /// Cancelled on shutdown; long-lived responses (event streams) end when it fires.
    pub shutdown: CancellationToken,
}
