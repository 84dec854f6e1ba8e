//! The platform's Files service as far as the client's seed flows use it
//! (`/apis/files/v2/workspaces/{workspace}/filesets...`): create a fileset, upload a file to it
//! (a raw `PUT`), read the fileset, list and download its files. A seed then names a file as
//! `seed_type: nmp`, `path: "<workspace>/<fileset>#<file>"` ([`nmp_seed`]).
//!
//! A fileset is a repository of the caller's seed datastore, the one the first client reaches
//! through the Hub API (`/v1/hf`): fileset `seeds` of workspace `default` is repository
//! `default/seeds`, so a file uploaded through either door is seen by both. A file is stored as
//! a dataset (the importer, limits and ownership of `POST /v1/datasets`) and read back written
//! out from its rows. As in the datastore, a fileset exists while it has a file of the caller's
//! (creating one is answered, and remembered once a file is uploaded to it), and files sit at
//! its top level (a path with folders is refused). One upload is at most
//! `server.max_body_bytes`.

use axum::Json;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};

use super::errors::PlatformErrorBody;
use super::views::check_name;
use crate::api::extract::{self, ApiPath, ApiQuery, BodyFormat};
use crate::auth::Caller;
use crate::datasets::datastore::RepoId;
use crate::datasets::hub_repo::RepoReadError;
use crate::error::ApiError;
use crate::state::AppState;

/// A fileset (the platform's `FilesetOutput`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Fileset {
    /// `<workspace>/<name>`.
    pub id: String,
    pub name: String,
    pub workspace: String,
    /// Always empty.
    pub description: String,
    /// Always `dataset`.
    pub purpose: &'static str,
    /// Always `{"type": "local", "path": "synthgate"}`: the files are this server's.
    #[schema(value_type = Object)]
    pub storage: Value,
    /// Always empty.
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// Always empty.
    #[schema(value_type = Object)]
    pub custom_fields: Value,
    /// Always empty.
    pub project: String,
    /// RFC 3339: its first file's upload (now, for a fileset with none yet).
    #[schema(format = DateTime)]
    pub created_at: String,
    /// RFC 3339: its last file's upload.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// A file of a fileset (the platform's `FilesetFileOutput`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FilesetFile {
    /// `<workspace>/<fileset>#<path>`: what a seed's `path` names.
    pub file_ref: String,
    /// Its download, relative to the server.
    pub file_url: String,
    pub path: String,
    /// Bytes of the file as a download gets it (written out from its rows).
    pub size: u64,
    /// Always null.
    #[schema(value_type = Option<String>)]
    pub cache_status: Option<String>,
}

/// The files of a fileset (`ListFilesetFilesResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FilesetFiles {
    pub data: Vec<FilesetFile>,
}

/// The platform's `CreateFilesetRequest`: only `name` is used.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateFileset {
    pub name: String,
    /// Other fields (`description`, `purpose`, `storage`, ...) are accepted and not kept.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub _rest: Map<String, Value>,
}

/// Query of a fileset's file list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct FilesQuery {
    /// Only files whose path starts with this.
    pub path: Option<String>,
    /// Accepted; every file's `cache_status` is null.
    #[serde(rename = "include_cache_status")]
    pub _include_cache_status: Option<bool>,
}

/// The datastore repository of fileset `name` in `workspace`.
fn repo(workspace: &str, name: &str) -> Result<RepoId, ApiError> {
    check_name("workspace", workspace)?;
    Ok(RepoId::new(workspace, name)?)
}

fn fileset_view(
    workspace: &str,
    name: &str,
    files: &[crate::domain::stored_dataset::DatasetMeta],
) -> Fileset {
    let now = chrono::Utc::now();
    let first = files.iter().map(|f| f.created_at).min().unwrap_or(now);
    let last = files.iter().map(|f| f.created_at).max().unwrap_or(now);
    Fileset {
        id: format!("{workspace}/{name}"),
        name: name.to_owned(),
        workspace: workspace.to_owned(),
        description: String::new(),
        purpose: "dataset",
        storage: json!({"type": "local", "path": "synthgate"}),
        metadata: json!({}),
        custom_fields: json!({}),
        project: String::new(),
        created_at: first.to_rfc3339(),
        updated_at: last.to_rfc3339(),
    }
}

fn file_view(workspace: &str, fileset: &str, path: &str, size: u64) -> FilesetFile {
    FilesetFile {
        file_ref: format!("{workspace}/{fileset}#{path}"),
        file_url: format!("/apis/files/v2/workspaces/{workspace}/filesets/{fileset}/-/{path}"),
        path: path.to_owned(),
        size,
        cache_status: None,
    }
}

fn not_found(e: RepoReadError) -> ApiError {
    match e {
        RepoReadError::Dataset(e) => e.into(),
        other => {
            ApiError::DatasetNotFound(format!("{other} (filesets hold the key's uploaded files)"))
        }
    }
}

/// Create a fileset
///
/// Answers the fileset, with the files it already has: creating one is idempotent here.
#[utoipa::path(post, path = "/apis/files/v2/workspaces/{workspace}/filesets",
    operation_id = "platform_create_fileset", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace")),
    request_body = CreateFileset,
    responses(
        (status = 200, description = "The fileset", body = Fileset),
        (status = 400, description = "Malformed JSON (`invalid_json`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace or name (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn create_fileset(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(workspace): ApiPath<String>,
    body: Bytes,
) -> Result<Json<Fileset>, ApiError> {
    let req: CreateFileset = extract::from_value(extract::decode_body(BodyFormat::Json, &body)?)?;
    let repo = repo(&workspace, &req.name)?;
    let files = state
        .datasets
        .datastore_files(caller.owner(), &repo)
        .await?;
    Ok(Json(fileset_view(&workspace, &req.name, &files)))
}

/// Get a fileset
#[utoipa::path(get, path = "/apis/files/v2/workspaces/{workspace}/filesets/{name}",
    operation_id = "platform_get_fileset", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Fileset")),
    responses(
        (status = 200, description = "The fileset", body = Fileset),
        (status = 404, description = "No file of the key's in it (`dataset_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace or name (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn get_fileset(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<Json<Fileset>, ApiError> {
    check_name("workspace", &workspace)?;
    let at = state
        .datasets
        .hub_repo(caller.owner(), &workspace, &name, "main")
        .await
        .map_err(not_found)?;
    Ok(Json(fileset_view(&workspace, &name, &at.files)))
}

/// List a fileset's files
#[utoipa::path(get, path = "/apis/files/v2/workspaces/{workspace}/filesets/{name}/files",
    operation_id = "platform_list_fileset_files", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Fileset"), FilesQuery),
    responses(
        (status = 200, description = "Its files", body = FilesetFiles),
        (status = 404, description = "No file of the key's in it (`dataset_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace, name or query (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn list_files(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<FilesQuery>,
) -> Result<Json<FilesetFiles>, ApiError> {
    check_name("workspace", &workspace)?;
    let tree = state
        .datasets
        .hub_tree(caller.owner(), &workspace, &name, "main")
        .await
        .map_err(not_found)?;
    let prefix = q.path.unwrap_or_default();
    let data = tree
        .iter()
        .filter(|f| f.path.starts_with(prefix.trim_start_matches('/')))
        .map(|f| file_view(&workspace, &name, &f.path, f.size))
        .collect();
    Ok(Json(FilesetFiles { data }))
}

/// Upload a file to a fileset
///
/// The body is the file (`.csv`, `.jsonl`, `.ndjson` or `.parquet` by its path), stored as a
/// dataset as `POST /v1/datasets` stores one, under its path in the fileset; a file of the same
/// path is replaced.
#[utoipa::path(put, path = "/apis/files/v2/workspaces/{workspace}/filesets/{name}/-/{path}",
    operation_id = "platform_upload_file", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Fileset"),
        ("path" = String, Path, description = "The file's name (no folders)")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 200, description = "The file", body = FilesetFile),
        (status = 413, description = "Body too large (`payload_too_large`)", body = PlatformErrorBody),
        (status = 415, description = "Not a CSV, JSONL or Parquet file name (`unsupported_dataset_format`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace, name or file (`invalid_request`, `invalid_dataset`)", body = PlatformErrorBody),
    ))]
pub async fn upload_file(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name, path)): ApiPath<(String, String, String)>,
    body: Bytes,
) -> Result<Json<FilesetFile>, ApiError> {
    let repo = repo(&workspace, &name)?;
    let (meta, _) = state
        .datasets
        .datastore_commit(caller.owner(), &repo, &path, &body)
        .await?;
    let rendered = state.datasets.datastore_render(&meta).await?;
    Ok(Json(file_view(
        &workspace,
        &name,
        &meta.name,
        rendered.size,
    )))
}

/// Download a file of a fileset
///
/// The file written out from its rows, in its format; one `Range` is served.
#[utoipa::path(get, path = "/apis/files/v2/workspaces/{workspace}/filesets/{name}/-/{path}",
    operation_id = "platform_download_file", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Fileset"),
        ("path" = String, Path, description = "The file's name")),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 206, description = "The range asked for", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "No such fileset or file (`dataset_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn download_file(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name, path)): ApiPath<(String, String, String)>,
    req: Request,
) -> Result<Response, ApiError> {
    check_name("workspace", &workspace)?;
    let (rendered, _) = state
        .datasets
        .hub_file(caller.owner(), &workspace, &name, "main", &path)
        .await
        .map_err(not_found)?;
    crate::api::downloads::serve_file(rendered, req).await
}

/// A seed config's `nmp` source made the datastore seed it names: `source: {seed_type: "nmp",
/// path: "[<workspace>/]<fileset>#<file>"}` (or `fileset://<workspace>/<fileset>#<file>`)
/// becomes `dataset: "<workspace>/<fileset>/<file>"`, the workspace the request's when the path
/// names none. Other seeds, and a path without `#`, are left to the config's checks.
pub(super) fn nmp_seed(seed_config: &mut Value, workspace: &str) {
    let Some(obj) = seed_config.as_object_mut() else {
        return;
    };
    let path = obj
        .get("source")
        .filter(|s| s.get("seed_type").and_then(Value::as_str) == Some("nmp"))
        .and_then(|s| s.get("path"))
        .and_then(Value::as_str);
    let Some((fileset, file)) =
        path.and_then(|p| p.trim_start_matches("fileset://").split_once('#'))
    else {
        return;
    };
    let dataset = match fileset.split_once('/') {
        Some((ws, fs)) => format!("{ws}/{fs}/{file}"),
        None => format!("{workspace}/{fileset}/{file}"),
    };
    obj.remove("source");
    obj.insert("dataset".into(), dataset.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nmp_seed_names_a_datastore_file() {
        for (path, dataset) in [
            ("default/seeds#cities.csv", "default/seeds/cities.csv"),
            ("seeds#cities.csv", "team/seeds/cities.csv"),
            ("fileset://other/seeds#a.parquet", "other/seeds/a.parquet"),
        ] {
            let mut seed = json!({"source": {"seed_type": "nmp", "path": path},
                "sampling_strategy": "ordered", "selection_strategy": null});
            nmp_seed(&mut seed, "team");
            assert_eq!(
                seed,
                json!({"dataset": dataset, "sampling_strategy": "ordered",
                    "selection_strategy": null}),
                "{path}"
            );
        }
        for mut other in [
            json!({"source": {"seed_type": "hf", "path": "datasets/a/b/c.csv"}}),
            json!({"source": {"seed_type": "nmp", "path": "no-fragment"}}),
            json!(null),
        ] {
            let before = other.clone();
            nmp_seed(&mut other, "team");
            assert_eq!(other, before);
        }
    }
}
