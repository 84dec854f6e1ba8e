//! `ApiDoc`: the OpenAPI document assembled from the handlers' annotations, and its YAML form
//! (committed as `openapi.yaml`; a test fails when the two drift).

use utoipa::OpenApi;

use crate::error::{ErrorBody, ErrorDetail, ErrorObject};

/// Top-level OpenAPI metadata; paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "synthgate",
        description = "Runs NeMo DataDesigner-compatible synthetic data generation jobs.\n\n\
Every error is `{\"error\": {\"code\", \"message\", \"details\"?}}` with a stable `code`.",
        license(name = "Apache-2.0")
    ),
    tags(
        (name = "jobs", description = "Submit, follow and cancel generation jobs"),
        (name = "records", description = "Generated records and datasets"),
        (name = "tools", description = "MCP providers and tool configs"),
        (name = "health", description = "Liveness and readiness"),
    ),
    components(schemas(ErrorBody, ErrorObject, ErrorDetail))
)]
pub struct ApiDoc;

/// The full spec, as served at `/openapi.json`.
pub fn spec() -> utoipa::openapi::OpenApi {
    super::openapi_router().split_for_parts().1
}

/// The spec as YAML, exactly as committed in `openapi.yaml`.
pub fn yaml() -> String {
    spec()
        .to_yaml()
        .unwrap_or_else(|e| format!("# failed to render: {e}\n"))
}
