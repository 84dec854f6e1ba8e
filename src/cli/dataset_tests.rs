//! `submit`'s seed uploads and `synthgate datasets` end to end against an in-process mock of
//! the datasets API (the contract's shapes, kept in memory): what is hashed, asked, streamed
//! and submitted, and the exit codes. The real server is exercised in
//! tests/api/seed_conformance.rs.

use std::future::Future;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;

/// A dataset the mock holds.
#[derive(Debug, Clone)]
struct Stored {
    id: String,
    name: String,
    bytes: Bytes,
}

#[derive(Default)]
struct Mock {
    datasets: Mutex<Vec<Stored>>,
    /// Each `POST /v1/datasets`: its query string, content type and length header.
    uploads: Mutex<Vec<(String, String, Option<String>)>>,
    /// Each `GET /v1/datasets` query string.
    lookups: Mutex<Vec<String>>,
    /// Each `POST /v1/jobs` body.
    jobs: Mutex<Vec<Bytes>>,
}

type Shared = Arc<Mock>;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn dataset_json(d: &Stored) -> Value {
    json!({
        "id": d.id, "name": d.name, "format": "csv",
        "columns": [{"name": "a", "type": "integer"}],
        "num_rows": d.bytes.iter().filter(|b| **b == b'\n').count().saturating_sub(1),
        "size_bytes": d.bytes.len(), "sha256": sha(&d.bytes), "source": "upload",
        "created_at": "2026-01-02T03:04:05Z",
    })
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct ListQuery {
    name: Option<String>,
    sha256: Option<String>,
    cursor: Option<String>,
}

/// Pages of one dataset each, so `datasets list` has to follow the cursor.
async fn list_datasets(
    State(mock): State<Shared>,
    Query(q): Query<ListQuery>,
    raw: axum::extract::RawQuery,
) -> Response {
    mock.lookups.lock().unwrap().push(raw.0.unwrap_or_default());
    let all = mock.datasets.lock().unwrap().clone();
    let matching: Vec<&Stored> = all
        .iter()
        .rev()
        .filter(|d| q.name.as_ref().is_none_or(|n| *n == d.name))
        .filter(|d| q.sha256.as_ref().is_none_or(|s| *s == sha(&d.bytes)))
        .collect();
    let start: usize = q.cursor.as_deref().map_or(0, |c| c.parse().unwrap());
    let page: Vec<Value> = matching
        .iter()
        .skip(start)
        .take(1)
        .map(|d| dataset_json(d))
        .collect();
    let next = (start + 1 < matching.len()).then(|| (start + 1).to_string());
    axum::Json(json!({"datasets": page, "next_cursor": next})).into_response()
}

async fn create_dataset(
    State(mock): State<Shared>,
    raw: axum::extract::RawQuery,
    Query(q): Query<ListQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    mock.uploads.lock().unwrap().push((
        raw.0.unwrap_or_default(),
        header(header::CONTENT_TYPE).unwrap_or_default(),
        header(header::CONTENT_LENGTH),
    ));
    if body.starts_with(b"bad") {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_dataset",
            "row 1, column a: not a number",
        );
    }
    let name = q.name.unwrap();
    let mut datasets = mock.datasets.lock().unwrap();
    if let Some(same) = datasets.iter().find(|d| d.name == name && d.bytes == body) {
        return (StatusCode::OK, axum::Json(dataset_json(same))).into_response();
    }
    let stored = Stored {
        id: format!("ds-{}", datasets.len() + 1),
        name,
        bytes: body,
    };
    datasets.push(stored.clone());
    (StatusCode::CREATED, axum::Json(dataset_json(&stored))).into_response()
}

async fn get_dataset(State(mock): State<Shared>, Path(id): Path<String>) -> Response {
    match mock.datasets.lock().unwrap().iter().find(|d| d.id == id) {
        Some(d) => {
            let mut body = dataset_json(d);
            body["preview"] = json!([{"a": 1}]);
            axum::Json(body).into_response()
        }
        None => error(
            StatusCode::NOT_FOUND,
            "dataset_not_found",
            "no such dataset",
        ),
    }
}

async fn delete_dataset(State(mock): State<Shared>, Path(id): Path<String>) -> Response {
    if id == "busy" {
        return error(
            StatusCode::CONFLICT,
            "dataset_in_use",
            "dataset busy is used by job j1",
        );
    }
    let mut datasets = mock.datasets.lock().unwrap();
    let before = datasets.len();
    datasets.retain(|d| d.id != id);
    if datasets.len() == before {
        return error(
            StatusCode::NOT_FOUND,
            "dataset_not_found",
            "no such dataset",
        );
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn create_job(State(mock): State<Shared>, body: Bytes) -> Response {
    mock.jobs.lock().unwrap().push(body);
    let job = json!({"id": "job-1", "status": "queued", "num_records": 2,
        "counts": {"total": 2, "pending": 2}});
    (StatusCode::ACCEPTED, axum::Json(job)).into_response()
}

/// Runs `client` against `mock`; returns its exit code.
async fn run<F, Fut>(mock: &Shared, client: F) -> ExitCode
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    let app = Router::new()
        .route("/v1/datasets", get(list_datasets).post(create_dataset))
        .route("/v1/datasets/{id}", get(get_dataset).delete(delete_dataset))
        .route("/v1/jobs", post(create_job))
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::select! {
        served = axum::serve(listener, app) => panic!("mock server stopped: {served:?}"),
        code = client(url) => code.unwrap(),
    }
}

fn server(url: String) -> ServerArgs {
    ServerArgs { url, api_key: None }
}

fn submit_args(config: std::path::PathBuf, no_upload: bool, url: String) -> SubmitArgs {
    SubmitArgs {
        config,
        num_records: Some(2),
        seed: None,
        name: None,
        cache: None,
        wait: false,
        no_upload,
        server: server(url),
    }
}

/// A config whose seed is `path` (absolute, so the test does not depend on the process's
/// current directory; relative paths are covered in seed_files).
fn seeded_config(dir: &std::path::Path, path: &str) -> std::path::PathBuf {
    let config = dir.join("config.yaml");
    let text = format!(
        "data_designer:\n  columns:\n  - name: b\n    column_type: expression\n    expr: '{{{{ a }}}}'\n  \
         seed_config:\n    source:\n      seed_type: local\n      path: {path}\n"
    );
    std::fs::write(&config, text).unwrap();
    config
}

#[tokio::test]
async fn submit_uploads_each_missing_seed_file_once_and_sends_the_config_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/one.csv"), "a\n1\n2\n").unwrap();
    std::fs::write(dir.path().join("data/two.csv"), "a\n3\n").unwrap();
    let pattern = format!("{}/data/*.csv", dir.path().display());
    let config = seeded_config(dir.path(), &pattern);
    let mock = Shared::default();

    let code = run(&mock, |url| submit(submit_args(config.clone(), false, url))).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let uploads = mock.uploads.lock().unwrap().clone();
    // Each file records the path the config names it by (the glob's folder and its name).
    let path_of = |name: &str| {
        form_urlencoded::byte_serialize(format!("{}/data/{name}", dir.path().display()).as_bytes())
            .collect::<String>()
    };
    assert_eq!(
        uploads,
        [
            (
                format!("name=one.csv&path={}&format=csv", path_of("one.csv")),
                "application/octet-stream".to_owned(),
                Some("6".to_owned())
            ),
            (
                format!("name=two.csv&path={}&format=csv", path_of("two.csv")),
                "application/octet-stream".to_owned(),
                Some("4".to_owned())
            ),
        ]
    );
    let stored: Vec<(String, Bytes)> = mock
        .datasets
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.name.clone(), d.bytes.clone()))
        .collect();
    assert_eq!(
        stored,
        [
            ("one.csv".into(), Bytes::from("a\n1\n2\n")),
            ("two.csv".into(), Bytes::from("a\n3\n"))
        ]
    );
    // Each lookup asked by name, content hash and path.
    assert_eq!(
        mock.lookups.lock().unwrap()[0],
        format!(
            "name=one.csv&sha256={}&limit=1&path={}",
            sha(b"a\n1\n2\n"),
            path_of("one.csv")
        )
    );
    // The config went as it was written, paths and all.
    assert_eq!(
        mock.jobs.lock().unwrap()[0],
        std::fs::read(&config).unwrap()
    );

    // A second submit finds both by hash and sends no file.
    let code = run(&mock, |url| submit(submit_args(config.clone(), false, url))).await;
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(mock.uploads.lock().unwrap().len(), 2);
    assert_eq!(mock.lookups.lock().unwrap().len(), 4);
    assert_eq!(mock.jobs.lock().unwrap().len(), 2);

    // A changed file is sent again under the same name.
    std::fs::write(dir.path().join("data/two.csv"), "a\n4\n").unwrap();
    let code = run(&mock, |url| submit(submit_args(config.clone(), false, url))).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let uploads = mock.uploads.lock().unwrap();
    assert_eq!(uploads.len(), 3);
    assert_eq!(
        uploads[2].0,
        format!("name=two.csv&path={}&format=csv", path_of("two.csv"))
    );
}

#[tokio::test]
async fn submit_leaves_missing_files_to_the_server_and_skips_uploads_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("{}/nowhere/seed.csv", dir.path().display());
    let config = seeded_config(dir.path(), &missing);
    let mock = Shared::default();
    let code = run(&mock, |url| submit(submit_args(config.clone(), false, url))).await;
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(mock.uploads.lock().unwrap().is_empty());
    assert!(mock.lookups.lock().unwrap().is_empty());
    assert_eq!(mock.jobs.lock().unwrap().len(), 1);

    std::fs::write(dir.path().join("seed.csv"), "a\n1\n").unwrap();
    let present = format!("{}/seed.csv", dir.path().display());
    let config = seeded_config(dir.path(), &present);
    let code = run(&mock, |url| submit(submit_args(config.clone(), true, url))).await;
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(
        mock.lookups.lock().unwrap().is_empty(),
        "--no-upload asks nothing"
    );
    assert!(mock.uploads.lock().unwrap().is_empty());
    assert_eq!(mock.jobs.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_refused_seed_file_stops_the_submit_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seed.csv"), "bad\n").unwrap();
    let config = seeded_config(dir.path(), &format!("{}/seed.csv", dir.path().display()));
    let mock = Shared::default();
    let code = run(&mock, |url| submit(submit_args(config, false, url))).await;
    assert_eq!(code, ExitCode::from(2));
    assert_eq!(mock.uploads.lock().unwrap().len(), 1);
    assert!(
        mock.jobs.lock().unwrap().is_empty(),
        "no job without its seed"
    );
}

fn datasets_cmd(command: DatasetsCommand) -> impl Future<Output = anyhow::Result<ExitCode>> {
    datasets(DatasetsArgs { command })
}

#[tokio::test]
async fn datasets_upload_list_show_delete() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seed.data");
    std::fs::write(&file, "a\n1\n").unwrap();
    let mock = Shared::default();
    let upload = |name: Option<&str>, format| {
        let file = file.clone();
        let name = name.map(str::to_owned);
        move |url| {
            datasets_cmd(DatasetsCommand::Upload(UploadArgs {
                file,
                name,
                path: None,
                format,
                server: server(url),
            }))
        }
    };

    // The name defaults to the file's; an unknown extension sends no format.
    assert_eq!(run(&mock, upload(None, None)).await, ExitCode::SUCCESS);
    assert_eq!(
        mock.uploads.lock().unwrap()[0].0,
        "name=seed.data".to_owned()
    );
    assert_eq!(
        run(&mock, upload(Some("x.csv"), Some(DatasetFormat::Jsonl))).await,
        ExitCode::SUCCESS
    );
    assert_eq!(mock.uploads.lock().unwrap()[1].0, "name=x.csv&format=jsonl");
    // The same name and content again: found, not sent.
    assert_eq!(
        run(&mock, upload(Some("x.csv"), None)).await,
        ExitCode::SUCCESS
    );
    assert_eq!(mock.uploads.lock().unwrap().len(), 2);

    let list = |name: Option<&str>| {
        let name = name.map(str::to_owned);
        move |url| {
            datasets_cmd(DatasetsCommand::List(ListArgs {
                name,
                server: server(url),
            }))
        }
    };
    let before = mock.lookups.lock().unwrap().len();
    assert_eq!(run(&mock, list(None)).await, ExitCode::SUCCESS);
    // One page per dataset: the cursor was followed to the end.
    let lookups = mock.lookups.lock().unwrap()[before..].to_vec();
    assert_eq!(lookups, ["", "cursor=1"]);
    assert_eq!(run(&mock, list(Some("x.csv"))).await, ExitCode::SUCCESS);

    let id_cmd = |delete: bool, id: &str| {
        let args = IdArgs {
            id: id.to_owned(),
            server: server(String::new()),
        };
        move |url: String| {
            let args = IdArgs {
                server: server(url),
                ..args
            };
            datasets_cmd(if delete {
                DatasetsCommand::Delete(args)
            } else {
                DatasetsCommand::Show(args)
            })
        }
    };
    assert_eq!(run(&mock, id_cmd(false, "ds-1")).await, ExitCode::SUCCESS);
    assert_eq!(run(&mock, id_cmd(false, "nope")).await, ExitCode::from(2));
    assert_eq!(run(&mock, id_cmd(true, "busy")).await, ExitCode::from(2));
    assert_eq!(run(&mock, id_cmd(true, "ds-1")).await, ExitCode::SUCCESS);
    assert_eq!(mock.datasets.lock().unwrap().len(), 1);
    assert_eq!(run(&mock, id_cmd(true, "ds-1")).await, ExitCode::from(2));

    // A file that is not there is a local error, before any request.
    let uploads = mock.uploads.lock().unwrap().len();
    let gone = dir.path().join("gone.csv");
    let code = run(&mock, |url| {
        datasets_cmd(DatasetsCommand::Upload(UploadArgs {
            file: gone,
            name: None,
            path: None,
            format: None,
            server: server(url),
        }))
    })
    .await;
    assert_eq!(code, ExitCode::from(2));
    assert_eq!(mock.uploads.lock().unwrap().len(), uploads);
}

/// The argument structs as `main.rs` mounts them.
#[derive(Debug, clap::Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    Submit(SubmitArgs),
    Datasets(DatasetsArgs),
}

#[test]
fn dataset_arguments_parse_as_documented() {
    use clap::{CommandFactory, Parser};
    Cli::command().debug_assert();

    let parse = |args: &[&str]| match Cli::parse_from(args).command {
        Command::Datasets(d) => d.command,
        Command::Submit(_) => panic!("not datasets"),
    };
    let DatasetsCommand::Upload(u) = parse(&[
        "synthgate",
        "datasets",
        "upload",
        "s.csv",
        "--name",
        "n.csv",
        "--format",
        "parquet",
    ]) else {
        panic!("not upload")
    };
    assert_eq!(u.file, std::path::PathBuf::from("s.csv"));
    assert_eq!(u.name.as_deref(), Some("n.csv"));
    assert_eq!(u.format, Some(DatasetFormat::Parquet));
    assert!(matches!(
        parse(&["synthgate", "datasets", "list", "--name", "a.csv"]),
        DatasetsCommand::List(ListArgs { name: Some(_), .. })
    ));
    assert!(matches!(
        parse(&["synthgate", "datasets", "show", "ds-1"]),
        DatasetsCommand::Show(IdArgs { .. })
    ));
    assert!(matches!(
        parse(&[
            "synthgate",
            "datasets",
            "delete",
            "ds-1",
            "--url",
            "http://h:1"
        ]),
        DatasetsCommand::Delete(IdArgs { .. })
    ));

    let Command::Submit(s) =
        Cli::parse_from(["synthgate", "submit", "c.yaml", "--no-upload"]).command
    else {
        panic!("not submit")
    };
    assert!(s.no_upload);
}
