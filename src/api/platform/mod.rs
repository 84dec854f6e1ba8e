//! `/apis/data-designer/v2/workspaces/{workspace}/*`, `/apis/models/v2/...`: the NeMo Platform
//! API that NVIDIA's second-generation client (`nemo-platform`, `NeMoPlatform(...)
//! .data_designer`) speaks, so a user of that client points its `base_url` at synthgate and
//! changes nothing else.
//!
//! A third door onto the same job service, as [`super::data_designer`] is the second: the same
//! config parser and validation, keys (`default_headers={"Authorization": "Bearer <key>"}`),
//! ownership, limits, traces and metrics. The facts (paths, bodies, frames, statuses, what the
//! client validates) are in `docs/reference/nemo-platform-client-0.6.0.md`.
//!
//! Jobs are addressed by name inside a workspace. A workspace is a name inside a key: the
//! key's jobs are split by it (kept as the job's Data Designer namespace, so the first door
//! lists them too), and another key's workspace of the same name is another one. The server
//! names a job when the client does not, as NVIDIA's does.
//!
//! * [`preview`]: NDJSON frames tagged by `kind`, after every check a job gets;
//! * [`jobs`], [`list`], [`logs`]: create, get, status, cancel, delete, the list, the logs;
//! * [`results`]: `artifacts` (the tar the client unpacks) and `analysis`;
//! * [`providers`]: the server's model providers, never their endpoints or keys;
//! * [`files`]: filesets of the Files service, kept as the seed datastore's repositories, and
//!   the `nmp` seeds that name their files;
//! * [`errors`]: the `detail` the client shows, added to every error of this door.

pub(super) mod errors;
mod files;
mod jobs;
pub(crate) mod list;
mod logs;
mod preview;
mod providers;
mod results;
mod views;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// The prefix of a workspace's Data Designer routes.
const DATA_DESIGNER: &str = "/apis/data-designer/v2/workspaces/";

/// Whether a request is answered with a stream (a preview): a long request, bounded by
/// `server.max_long_requests` rather than cut by the request timeout.
pub(super) fn is_streaming(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::POST
        && path
            .strip_prefix(DATA_DESIGNER)
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(workspace, tail)| !workspace.is_empty() && tail == "preview")
}

/// Whether a path is one of this door's, whose errors carry the client's `detail`.
pub(super) fn is_platform(path: &str) -> bool {
    path.starts_with("/apis/")
}

/// The config as this client sends it, made what it means: the first door's repairs
/// ([`crate::api::data_designer::client_config`]), a seed naming a fileset's file
/// ([`files::nmp_seed`]), and model providers named as the platform
/// names them, `<workspace>/<provider>`, made the server's provider names. The server's providers
/// belong to every workspace and are listed under `default` ([`providers`]), so `default/p` and
/// `<this workspace>/p` both name provider `p`; another workspace's prefix is left as it is, and
/// the config's check then refuses it as an unknown provider.
pub(super) fn platform_config(config: serde_json::Value, workspace: &str) -> serde_json::Value {
    let mut config = crate::api::data_designer::client_config(config);
    if let Some(seed) = config.get_mut("seed_config") {
        files::nmp_seed(seed, workspace);
    }
    if let Some(models) = config
        .get_mut("model_configs")
        .and_then(serde_json::Value::as_array_mut)
    {
        for model in models {
            let Some(provider) = model.get_mut("provider") else {
                continue;
            };
            let bare = provider.as_str().and_then(|p| {
                p.strip_prefix(workspace)
                    .or_else(|| p.strip_prefix(providers::WORKSPACE))
                    .and_then(|rest| rest.strip_prefix('/'))
                    .map(str::to_owned)
            });
            if let Some(bare) = bare {
                *provider = bare.into();
            }
        }
    }
    config
}

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(preview::preview))
        .routes(routes!(jobs::create_job, list::list_jobs))
        .routes(routes!(jobs::get_job, jobs::delete_job))
        .routes(routes!(jobs::job_status))
        .routes(routes!(jobs::cancel_job))
        .routes(routes!(logs::job_logs))
        .routes(routes!(results::list_results))
        .routes(routes!(results::get_result))
        .routes(routes!(results::download_result))
        .routes(routes!(providers::list_providers))
        .routes(routes!(providers::get_provider))
        .routes(routes!(providers::auth_discovery))
        .routes(routes!(files::create_fileset))
        .routes(routes!(files::get_fileset))
        .routes(routes!(files::list_files))
        .routes(routes!(files::upload_file, files::download_file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn providers_named_by_workspace_are_the_servers() {
        let config = serde_json::json!({"model_configs": [
            {"alias": "a", "provider": "default/openai"},
            {"alias": "b", "provider": "team/openai"},
            {"alias": "c", "provider": "other/openai"},
            {"alias": "d", "provider": "openai"},
            {"alias": "e"},
        ]});
        let out = platform_config(config, "team");
        let providers: Vec<_> = out["model_configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.get("provider").cloned())
            .collect();
        assert_eq!(
            providers,
            [
                Some("openai".into()),
                Some("openai".into()),
                Some("other/openai".into()),
                Some("openai".into()),
                None
            ]
        );
    }

    #[test]
    fn only_a_workspace_preview_streams() {
        let p = "/apis/data-designer/v2/workspaces/default/preview";
        assert!(is_streaming(&Method::POST, p));
        assert!(!is_streaming(&Method::GET, p));
        assert!(!is_streaming(
            &Method::POST,
            "/apis/data-designer/v2/workspaces//preview"
        ));
        assert!(!is_streaming(
            &Method::POST,
            "/apis/data-designer/v2/workspaces/default/jobs/create"
        ));
    }
}
