//! `/v1/hf`: the part of the Hugging Face Hub's HTTP API that NVIDIA's Data Designer client
//! uses for seeds, served on the caller's datasets ([`crate::datasets::datastore`]), so the
//! client's datastore endpoint is `<synthgate>/v1/hf` and its token is the API key.
//!
//! * `upload_seed_dataset(df, "namespace/repo", datastore_settings={"endpoint": ..., "token":
//!   key})` is `huggingface_hub`'s `create_repo` (`POST api/repos/create`), `preupload` and
//!   `commit` (the file inline, base64, in `application/x-ndjson` lines).
//! * `with_seed_dataset(ref)` reads the file's columns through `HfFileSystem`: the repository's
//!   info, its tree, and range reads of the file (`resolve`).
//!
//! The rules of repositories, revisions and commits are the datasets service's
//! ([`crate::datasets::hub_repo`]); these handlers extract, call it, and shape the Hub's answers.
//! A repository exists while it has a file: creating one stores nothing (and always succeeds,
//! as `exist_ok` asks), and one with no file is not found. Revisions are not kept: `main` and
//! the repository's current revision name the same files, any other is not found. Files are
//! committed inline, so one commit is at most `server.max_body_bytes` (as base64); the LFS
//! upload path is not served. Errors carry `X-Error-Code` as the Hub sets it
//! (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`), which `huggingface_hub` turns into
//! its own exceptions.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{self, ApiPath, BodyFormat};
use crate::auth::Caller;
use crate::datasets::DatasetError;
use crate::datasets::DatasetMeta;
use crate::datasets::datastore::RepoId;
use crate::datasets::hub_repo::RepoReadError;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_repo))
        .routes(routes!(preupload))
        .routes(routes!(commit))
        .routes(routes!(repo_info))
        .routes(routes!(bare_repo_info))
        .routes(routes!(repo_info_at))
        .routes(routes!(tree))
        .routes(routes!(resolve))
}

/// An error of the Hub API: our envelope, with the `X-Error-Code` header `huggingface_hub`
/// reads where the Hub sets one.
pub struct HubApiError {
    code: Option<&'static str>,
    err: ApiError,
}

impl HubApiError {
    fn coded(code: &'static str, err: ApiError) -> Self {
        Self {
            code: Some(code),
            err,
        }
    }
}

impl From<ApiError> for HubApiError {
    fn from(err: ApiError) -> Self {
        Self { code: None, err }
    }
}

impl From<DatasetError> for HubApiError {
    fn from(err: DatasetError) -> Self {
        ApiError::from(err).into()
    }
}

impl From<RepoReadError> for HubApiError {
    fn from(err: RepoReadError) -> Self {
        match err.hub_code() {
            Some(code) => Self::coded(code, ApiError::NotFound(err.to_string())),
            None => match err {
                RepoReadError::Dataset(e) => e.into(),
                other => ApiError::NotFound(other.to_string()).into(),
            },
        }
    }
}

impl IntoResponse for HubApiError {
    fn into_response(self) -> Response {
        let mut resp = self.err.into_response();
        if let Some(code) = self.code {
            resp.headers_mut()
                .insert("x-error-code", HeaderValue::from_static(code));
        }
        resp
    }
}

/// `huggingface_hub`'s `create_repo` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct CreateRepo {
    /// The repository's name.
    pub name: String,
    /// Its namespace.
    pub organization: Option<String>,
    /// Only `dataset` is served.
    #[serde(rename = "type")]
    pub repo_type: Option<String>,
}

/// Create a datastore repository
///
/// Stores nothing: a repository exists once a file is committed to it. Answers the
/// repository's URL, relative to the datastore (`datasets/{namespace}/{name}`).
#[utoipa::path(post, path = "/v1/hf/api/repos/create", tag = "hf-datastore",
    request_body = CreateRepo,
    responses(
        (status = 200, description = "`{\"url\": \"datasets/{namespace}/{name}\"}`", body = Object),
        (status = 400, description = "Malformed JSON (`invalid_json`, `duplicate_key`)", body = ErrorBody),
        (status = 422, description = "Not a dataset repository, or a bad name (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn create_repo(_caller: Caller, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: CreateRepo = extract::from_value(extract::decode_body(BodyFormat::Json, &body)?)?;
    if req.repo_type.as_deref() != Some("dataset") {
        return Err(ApiError::InvalidRequest(
            "field 'type': only dataset repositories are served (`repo_type=\"dataset\"`)".into(),
        ));
    }
    let namespace = req.organization.as_deref().unwrap_or("default");
    let repo = RepoId::new(namespace, &req.name)?;
    Ok(Json(json!({"url": format!("datasets/{}", repo.as_str())})))
}

/// Plan an upload
///
/// Every file is uploaded inline in the commit (`regular`).
#[utoipa::path(post, path = "/v1/hf/api/datasets/{namespace}/{name}/preupload/{rev}", tag = "hf-datastore",
    request_body(content = Object, description = "`{\"files\": [{path, sample, size}]}`"),
    params(("namespace" = String, Path), ("name" = String, Path), ("rev" = String, Path)),
    responses(
        (status = 200, description = "`{\"files\": [{path, uploadMode: \"regular\", shouldIgnore: false}]}`", body = Object),
        (status = 400, description = "Malformed JSON (`invalid_json`, `duplicate_key`)", body = ErrorBody),
        (status = 422, description = "A malformed body or name (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn preupload(
    _caller: Caller,
    ApiPath((namespace, name, _rev)): ApiPath<(String, String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    RepoId::new(&namespace, &name)?;
    #[derive(Deserialize)]
    struct File {
        path: String,
    }
    #[derive(Deserialize)]
    struct Files {
        files: Vec<File>,
    }
    let req: Files = extract::from_value(extract::decode_body(BodyFormat::Json, &body)?)?;
    let files: Vec<Value> = req
        .files
        .into_iter()
        .map(|f| json!({"path": f.path, "uploadMode": "regular", "shouldIgnore": false}))
        .collect();
    Ok(Json(json!({"files": files})))
}

/// Commit files
///
/// Imports each inline file (`{"key": "file", "value": {path, content, encoding: "base64"}}`)
/// as a dataset of the repository, as `POST /v1/datasets` would (same formats and limits).
/// A commit is all or nothing: when a file is refused, or the request is cut, the files it
/// had stored are deleted again. At most 1,000 files per commit.
/// Deleting files and LFS files are not served.
#[utoipa::path(post, path = "/v1/hf/api/datasets/{namespace}/{name}/commit/{rev}", tag = "hf-datastore",
    request_body(content = String, content_type = "application/x-ndjson",
        description = "A `header` line, then one `file` line per file"),
    params(("namespace" = String, Path), ("name" = String, Path), ("rev" = String, Path)),
    responses(
        (status = 200, description = "`{commitUrl, commitOid, pullRequestUrl: null}`", body = Object),
        (status = 403, description = "The key's datasets would pass `datasets.max_rows_per_key` or `datasets.max_bytes_per_key` (`quota_exceeded`)", body = ErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "A malformed line, an operation not served, or a file that is not a dataset (`invalid_request`, `invalid_dataset`, `unsupported_dataset_format`)", body = ErrorBody),
    ))]
pub async fn commit(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((namespace, name, rev)): ApiPath<(String, String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let (repo, sha) = state
        .datasets
        .hub_commit(caller.owner(), &namespace, &name, &rev, &body)
        .await?;
    Ok(Json(json!({
        // Relative: huggingface_hub parses it against the public Hub's URL, and a relative
        // `datasets/{repo}/commit/{sha}` is what parses whatever the datastore's address.
        "commitUrl": format!("datasets/{}/commit/{sha}", repo.as_str()),
        "commitOid": sha,
        "pullRequestUrl": null,
    })))
}

/// The info of repository `namespace/name` at `rev`: `{id, sha, private, siblings}`.
async fn info_at(
    state: &AppState,
    caller: &Caller,
    namespace: &str,
    name: &str,
    rev: &str,
) -> Result<Json<Value>, HubApiError> {
    let at = state
        .datasets
        .hub_repo(caller.owner(), namespace, name, rev)
        .await?;
    Ok(Json(info(&at.repo, &at.files, &at.sha)))
}

/// A repository's info: `{id, sha, private, siblings}`.
fn info(repo: &RepoId, files: &[DatasetMeta], sha: &str) -> Value {
    let siblings: Vec<Value> = files.iter().map(|f| json!({"rfilename": f.name})).collect();
    json!({
        "id": repo.as_str(),
        "sha": sha,
        "private": true,
        "disabled": false,
        "gated": false,
        "siblings": siblings,
        // huggingface_hub parses exactly `%Y-%m-%dT%H:%M:%S.%fZ`.
        "lastModified": files.iter().map(|f| f.created_at).max()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
    })
}

/// A datastore repository
#[utoipa::path(get, path = "/v1/hf/api/datasets/{namespace}/{name}", tag = "hf-datastore",
    params(("namespace" = String, Path), ("name" = String, Path)),
    responses(
        (status = 200, description = "`{id, sha, private, siblings: [{rfilename}]}`", body = Object),
        (status = 404, description = "No file of the caller's in it (`not_found`, `X-Error-Code: RepoNotFound`)", body = ErrorBody),
    ))]
pub async fn repo_info(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((namespace, name)): ApiPath<(String, String)>,
) -> Result<Json<Value>, HubApiError> {
    info_at(&state, &caller, &namespace, &name, "main").await
}

/// A repository without a namespace
///
/// None exists here (the Hub's unnamespaced canonical datasets): `RepoNotFound`, which
/// `HfFileSystem` asks for while it splits a path into repository and file.
#[utoipa::path(get, path = "/v1/hf/api/datasets/{name}", tag = "hf-datastore",
    params(("name" = String, Path)),
    responses(
        (status = 404, description = "Always (`not_found`, `X-Error-Code: RepoNotFound`)", body = ErrorBody),
    ))]
pub async fn bare_repo_info(_caller: Caller, ApiPath(name): ApiPath<String>) -> HubApiError {
    HubApiError::coded(
        "RepoNotFound",
        ApiError::NotFound(format!(
            "dataset repository '{name}' (repositories are `namespace/name`)"
        )),
    )
}

/// A datastore repository at a revision
#[utoipa::path(get, path = "/v1/hf/api/datasets/{namespace}/{name}/revision/{rev}", tag = "hf-datastore",
    params(("namespace" = String, Path), ("name" = String, Path), ("rev" = String, Path)),
    responses(
        (status = 200, description = "`{id, sha, private, siblings: [{rfilename}]}`", body = Object),
        (status = 404, description = "No such repository or revision (`X-Error-Code`)", body = ErrorBody),
    ))]
pub async fn repo_info_at(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((namespace, name, rev)): ApiPath<(String, String, String)>,
) -> Result<Json<Value>, HubApiError> {
    info_at(&state, &caller, &namespace, &name, &rev).await
}

/// A datastore repository's files
///
/// The top level of the repository (it has no folders): each file's path, size and `oid` as
/// the file reads (written out from its rows).
#[utoipa::path(get, path = "/v1/hf/api/datasets/{namespace}/{name}/tree/{rev}", tag = "hf-datastore",
    params(("namespace" = String, Path), ("name" = String, Path), ("rev" = String, Path)),
    responses(
        (status = 200, description = "`[{type: \"file\", path, size, oid}]`", body = Object),
        (status = 404, description = "No such repository or revision (`X-Error-Code`)", body = ErrorBody),
    ))]
pub async fn tree(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((namespace, name, rev)): ApiPath<(String, String, String)>,
) -> Result<Json<Value>, HubApiError> {
    let tree = state
        .datasets
        .hub_tree(caller.owner(), &namespace, &name, &rev)
        .await?;
    let entries: Vec<Value> = tree
        .into_iter()
        .map(|f| json!({"type": "file", "path": f.path, "size": f.size, "oid": f.oid}))
        .collect();
    Ok(Json(Value::Array(entries)))
}

/// Download a datastore file
///
/// The file written out from its rows, in its format; `Range` requests are served (one
/// range), as `HfFileSystem` reads a Parquet file's footer. `HEAD` answers the headers only.
#[utoipa::path(get, path = "/v1/hf/datasets/{namespace}/{name}/resolve/{rev}/{file}", tag = "hf-datastore",
    params(("namespace" = String, Path), ("name" = String, Path), ("rev" = String, Path),
        ("file" = String, Path)),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 206, description = "The range asked for", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "No such repository, revision or file (`X-Error-Code`)", body = ErrorBody),
    ))]
pub async fn resolve(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((namespace, name, rev, file)): ApiPath<(String, String, String, String)>,
    req: Request,
) -> Result<Response, HubApiError> {
    let (rendered, sha) = state
        .datasets
        .hub_file(caller.owner(), &namespace, &name, &rev, &file)
        .await?;
    let etag = format!("\"{}\"", &rendered.sha256[..40]);
    // The rendering has no extension, so its type is `application/octet-stream`.
    let mut res = super::downloads::serve_file(rendered, req).await?;
    for (name, value) in [("etag", etag.as_str()), ("x-repo-commit", sha.as_str())] {
        if let Ok(v) = HeaderValue::from_str(value) {
            res.headers_mut().insert(name, v);
        }
    }
    Ok(res)
}
