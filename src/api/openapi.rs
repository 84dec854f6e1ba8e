//! `ApiDoc`: the OpenAPI document assembled from the handlers' annotations, and its YAML form
//! (committed as `openapi.yaml`; a test fails when the two drift).

use utoipa::OpenApi;

use super::dto::RecordsFormat;
use crate::domain::RecordStatus;
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
        (name = "models", description = "The model aliases a key may use"),
        (name = "tools", description = "MCP providers and tool configs"),
        (name = "datasets", description = "Stored datasets: seed files for `seed_type: local`"),
        (name = "health", description = "Liveness and readiness"),
        (name = "data-designer", description = "NVIDIA's Data Designer service API, for its `NeMoDataDesignerClient`"),
        (name = "nemo-platform", description = "NVIDIA NeMo Platform's Data Designer API (`/apis/...`), for its `nemo-platform` client; errors also carry `detail`"),
        (name = "hf-datastore", description = "A Hugging Face Hub-compatible seed datastore (the Data Designer client's `upload_seed_dataset` and `with_seed_dataset`)"),
    ),
    // Schemas only query parameters refer to: `IntoParams` emits a `$ref` to them but does not
    // register them, which left `RecordsFormat` dangling.
    components(schemas(
        ErrorBody,
        ErrorObject,
        ErrorDetail,
        RecordsFormat,
        RecordStatus,
        super::outputs::OutputFormat
    ))
)]
pub struct ApiDoc;

/// The full spec, as served at `/openapi.json`.
pub fn spec() -> utoipa::openapi::OpenApi {
    with_auth(super::openapi_router().split_for_parts().1)
}

/// Adds what every `/v1` operation shares: the optional bearer key (`security: [{bearer: []},
/// {}]`, since authentication depends on the server config) and its `401 unauthorized`.
pub(crate) fn with_auth(mut spec: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    use utoipa::openapi::security::{
        HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
    };
    use utoipa::openapi::{RefOr, ResponseBuilder, content::ContentBuilder};

    let components = spec.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API key from the server config's `auth.api_keys`, when authentication is on",
                ))
                .build(),
        ),
    );
    // `/metrics` declares this one itself; it is a separate secret from the API keys.
    components.add_security_scheme(
        "metrics_token",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The server config's `server.metrics_token`, when it is set (else `/metrics` is open)",
                ))
                .build(),
        ),
    );
    let unauthorized = ResponseBuilder::new()
        .description("Authentication is on and the API key is missing or unknown (`unauthorized`)")
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                    "ErrorBody",
                ))))
                .build(),
        )
        .build();
    for (path, item) in spec.paths.paths.iter_mut() {
        if !path.starts_with("/v1/") {
            continue;
        }
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            op.security = Some(vec![
                SecurityRequirement::new("bearer", Vec::<String>::new()),
                SecurityRequirement::default(),
            ]);
            op.responses
                .responses
                .insert("401".into(), RefOr::T(unauthorized.clone()));
        }
    }
    spec
}

/// The spec as YAML, exactly as committed in `openapi.yaml`.
pub fn yaml() -> String {
    spec()
        .to_yaml()
        .unwrap_or_else(|e| format!("# failed to render: {e}\n"))
}
