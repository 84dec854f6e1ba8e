//! `/v1/data-designer/*`: the NeMo Data Designer service API that NVIDIA's Python client
//! (`nemo-microservices`, `NeMoDataDesignerClient`) speaks, so a Data Designer user points
//! that client's `base_url` at synthgate and changes nothing else.
//!
//! A second door onto the same job service: the same config parser and validation, keys
//! (the client's `default_headers={"Authorization": "Bearer <key>"}`), ownership, limits,
//! traces and metrics as `/v1`. Only the shapes differ, and they are the client's: the facts
//! (paths, bodies, stream framing, what the client validates) are written down in
//! `docs/reference/nemo-data-designer-client-1.5.0.md`, from the client's source and runs of it.
//!
//! * [`settings`]: the server's model configs and providers, never their keys;
//! * [`preview`]: a JSON Lines stream of logs, heartbeats, the dataset and its analysis;
//! * [`jobs`], [`list`], [`logs`]: create, retrieve, status, cancel, delete, the filtered list,
//!   and the logs `wait_until_done()` polls;
//! * [`results`]: the dataset (a tar of Parquet for `load_dataset()`) and the analysis
//!   ([`analysis`]: our statistics in the client's `DatasetProfilerResults` shape).
//!
//! The seed datastore the client's `upload_seed_dataset` and `with_seed_dataset` use is the
//! Hub-compatible API at `/v1/hf` (`crate::api::hub`).

pub(in crate::api) mod analysis;
pub(in crate::api) mod jobs;
mod list;
pub(in crate::api) mod logs;
mod preview;
pub(in crate::api) mod results;
mod settings;
pub(in crate::api) mod views;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// Whether a request is answered with a stream (the preview): a long request, bounded by
/// `server.max_long_requests` rather than cut by the request timeout (its records may wait on
/// models for longer).
pub(super) fn is_streaming(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::POST && path == "/v1/data-designer/preview"
}

/// The config as NVIDIA's client sends it, made what it means. The client types
/// `DataDesignerConfig.processors` by the abstract `ProcessorConfig`, so pydantic serializes
/// each processor as its base fields only, `{"build_stage": "post_batch"}`: a drop-columns
/// processor loses `processor_type` and `column_names`, and the columns it drops are marked
/// `drop: true` instead, which the config still carries. Such an entry says nothing more, so it
/// goes (an entry with a `processor_type` is left to the parser, which checks it as always).
pub(in crate::api) fn client_config(mut config: serde_json::Value) -> serde_json::Value {
    if let Some(list) = config
        .get_mut("processors")
        .and_then(serde_json::Value::as_array_mut)
    {
        list.retain(|p| {
            !p.as_object().is_some_and(|o| {
                !o.contains_key("processor_type") && o.keys().all(|k| k == "build_stage")
            })
        });
    }
    config
}

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(settings::settings))
        .routes(routes!(preview::preview))
        .routes(routes!(jobs::create_job, list::list_jobs))
        .routes(routes!(jobs::get_job, jobs::delete_job))
        .routes(routes!(jobs::job_status))
        .routes(routes!(jobs::cancel_job))
        .routes(routes!(logs::job_logs))
        .routes(routes!(logs::data_designer_job_logs))
        .routes(routes!(results::list_results))
        .routes(routes!(results::get_result))
        .routes(routes!(results::download_result))
}
