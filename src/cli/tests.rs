//! The client subcommands end to end against an in-process mock of the job API: request
//! shapes, the event stream with a dropped connection, exit codes, and streamed downloads.
//!
//! The mock runs in the test's own task (`select!`), so nothing is spawned and nothing
//! outlives a test.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use super::*;

/// What one `POST /v1/jobs` carried.
#[derive(Debug, Clone)]
struct Posted {
    content_type: String,
    query: Option<String>,
    body: Bytes,
    auth: Option<String>,
}

struct MockState {
    posts: Mutex<Vec<Posted>>,
    event_connections: AtomicUsize,
    final_status: &'static str,
}

type Shared = Arc<MockState>;

fn job_json(status: &str, completed: u64, failed: u64) -> serde_json::Value {
    json!({
        "id": "job-1", "status": status, "num_records": 3, "seed": 9, "metadata": null,
        "counts": {"total": 3, "pending": 3 - completed - failed, "in_progress": 0,
                   "completed": completed, "failed": failed, "cancelled": 0},
        "error": null, "first_errors": [], "columns": ["a"],
    })
}

fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"error": {"code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

async fn create_job(
    State(state): State<Shared>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    state.posts.lock().unwrap().push(Posted {
        content_type: header(header::CONTENT_TYPE).unwrap_or_default(),
        query,
        body: body.clone(),
        auth: header(header::AUTHORIZATION),
    });
    if body.windows(3).any(|w| w == b"bad") {
        return error_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_config",
            "column bad: unknown model_alias",
        );
    }
    (StatusCode::ACCEPTED, axum::Json(job_json("queued", 0, 0))).into_response()
}

async fn get_job(Path(_id): Path<String>) -> Response {
    axum::Json(job_json("running", 1, 0)).into_response()
}

fn sse(event: &str, data: serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// The first connection sends some progress and then breaks; the second finishes the job.
async fn job_events(State(state): State<Shared>, Path(_id): Path<String>) -> Response {
    let progress = |completed, failed| {
        let counts = job_json("running", completed, failed)["counts"].clone();
        sse(
            "progress",
            json!({"job_id": "job-1", "status": "running", "counts": counts}),
        )
    };
    let chunks: Vec<Result<Bytes, std::io::Error>> = if state
        .event_connections
        .fetch_add(1, Ordering::SeqCst)
        == 0
    {
        vec![
            Ok(progress(0, 0)),
            Ok(sse(
                "record",
                json!({"record_id": "r0", "index": 0, "status": "completed", "error_code": null}),
            )),
            Err(std::io::Error::other("connection lost")),
        ]
    } else {
        let (completed, failed) = if state.final_status == "completed" {
            (2, 1)
        } else {
            (0, 3)
        };
        vec![
            Ok(Bytes::from_static(b": keep-alive\n\n")),
            Ok(progress(1, 0)),
            Ok(sse(
                "record",
                json!({"record_id": "r1", "index": 1, "status": "failed", "error_code": "llm_timeout"}),
            )),
            Ok(progress(completed, failed)),
            Ok(sse("done", job_json(state.final_status, completed, failed))),
        ]
    };
    // A pause before each chunk lets the client see the events before the connection breaks.
    let paced = futures::stream::iter(chunks).then(|chunk| async {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        chunk
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(paced))
        .unwrap()
}

async fn job_records(Path(id): Path<String>, RawQuery(query): RawQuery) -> Response {
    if id != "job-1" {
        return error_response(StatusCode::NOT_FOUND, "job_not_found", "no such job");
    }
    let chunks: Vec<Result<Bytes, std::io::Error>> = if query.as_deref() == Some("format=csv") {
        vec![
            Ok(Bytes::from_static(b"a\n1\n")),
            Ok(Bytes::from_static(b"2\n")),
        ]
    } else {
        vec![
            Ok(Bytes::from_static(b"{\"a\":1}\n")),
            Ok(Bytes::from_static(b"{\"a\":2}\n")),
        ]
    };
    Body::from_stream(futures::stream::iter(chunks)).into_response()
}

/// Runs `client` against a fresh mock; returns its result and what the mock saw.
async fn with_mock<F, Fut>(final_status: &'static str, client: F) -> (ExitCode, Shared)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    let state = Arc::new(MockState {
        posts: Mutex::new(Vec::new()),
        event_connections: AtomicUsize::new(0),
        final_status,
    });
    let app = Router::new()
        .route("/v1/jobs", post(create_job))
        .route("/v1/jobs/{id}", get(get_job))
        .route("/v1/jobs/{id}/events", get(job_events))
        .route("/v1/jobs/{id}/records", get(job_records))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/unhealthy",
            get(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let code = tokio::select! {
        served = axum::serve(listener, app) => panic!("mock server stopped: {served:?}"),
        code = client(url) => code.unwrap(),
    };
    (code, state)
}

fn server(url: String) -> ServerArgs {
    ServerArgs {
        url,
        api_key: Some("secret-key".into()),
    }
}

fn submit_args(config: std::path::PathBuf, wait: bool, url: String) -> SubmitArgs {
    SubmitArgs {
        config,
        num_records: Some(3),
        seed: Some(9),
        name: None,
        cache: None,
        wait,
        no_upload: false,
        server: server(url),
    }
}

#[tokio::test]
async fn submit_wait_follows_the_job_across_a_dropped_stream() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "data_designer:\n  columns: []\n").unwrap();

    let (code, state) = with_mock("completed", |url| submit(submit_args(config, true, url))).await;

    assert_eq!(code, ExitCode::SUCCESS);
    let posts = state.posts.lock().unwrap();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].content_type, "application/yaml");
    assert_eq!(posts[0].query.as_deref(), Some("num_records=3&seed=9"));
    assert_eq!(&posts[0].body[..], b"data_designer:\n  columns: []\n");
    assert_eq!(posts[0].auth.as_deref(), Some("Bearer secret-key"));
    assert_eq!(state.event_connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn submit_wait_exits_1_when_the_job_does_not_complete() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(&config, "columns: []\n").unwrap();

    let (code, _) = with_mock("failed", |url| submit(submit_args(config, true, url))).await;

    assert_eq!(code, ExitCode::from(1));
}

#[tokio::test]
async fn submit_without_wait_posts_json_and_returns() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"columns": []}"#).unwrap();

    let (code, state) = with_mock("completed", |url| submit(submit_args(config, false, url))).await;

    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(state.event_connections.load(Ordering::SeqCst), 0);
    let posted = state.posts.lock().unwrap()[0].clone();
    assert_eq!(posted.content_type, "application/json");
    assert_eq!(posted.query, None);
    let body: serde_json::Value = serde_json::from_slice(&posted.body).unwrap();
    assert_eq!(
        body,
        json!({"config": {"columns": []}, "num_records": 3, "seed": 9})
    );
}

#[tokio::test]
async fn submit_exits_2_on_an_http_error_or_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"columns": ["bad"]}"#).unwrap();
    let (code, _) = with_mock("completed", |url| submit(submit_args(config, true, url))).await;
    assert_eq!(code, ExitCode::from(2));

    let missing = dir.path().join("missing.yaml");
    let (code, state) =
        with_mock("completed", |url| submit(submit_args(missing, false, url))).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(state.posts.lock().unwrap().is_empty());
}

#[tokio::test]
async fn records_stream_into_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data.csv");
    let args = |url, job_id: &str| RecordsArgs {
        job_id: job_id.into(),
        format: RecordsFormat::Csv,
        output: Some(out.clone()),
        include_traces: false,
        status: RecordsStatus::Completed,
        server: server(url),
    };

    let (code, _) = with_mock("completed", |url| records(args(url, "job-1"))).await;
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\n1\n2\n");
    assert!(!dir.path().join("data.csv.part").exists());

    std::fs::remove_file(&out).unwrap();
    let (code, _) = with_mock("completed", |url| records(args(url, "nope"))).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(!out.exists());
}

#[tokio::test]
async fn healthcheck_passes_only_on_2xx() {
    let probe = |path: &'static str| {
        move |url: String| {
            healthcheck(HealthcheckArgs {
                url: format!("{url}{path}"),
            })
        }
    };
    let (code, _) = with_mock("completed", probe("/healthz")).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let (code, _) = with_mock("completed", probe("/unhealthy")).await;
    assert_eq!(code, ExitCode::FAILURE);

    // Nothing listens on a port that was just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let code = healthcheck(HealthcheckArgs {
        url: format!("http://127.0.0.1:{port}/healthz"),
    })
    .await
    .unwrap();
    assert_eq!(code, ExitCode::FAILURE);
}

/// The argument structs as `main.rs` will mount them.
#[derive(Debug, clap::Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    Submit(SubmitArgs),
    Records(RecordsArgs),
    Healthcheck(HealthcheckArgs),
}

#[test]
fn arguments_parse_as_documented() {
    use clap::{CommandFactory, Parser};
    Cli::command().debug_assert();

    let cli = Cli::parse_from([
        "synthgate",
        "submit",
        "cfg.yaml",
        "-n",
        "10",
        "--seed",
        "3",
        "--wait",
        "--url",
        "http://h:1",
        "--api-key",
        "k",
    ]);
    let Command::Submit(args) = cli.command else {
        panic!("not submit")
    };
    assert_eq!(args.config, std::path::PathBuf::from("cfg.yaml"));
    assert_eq!(
        (args.num_records, args.seed, args.wait),
        (Some(10), Some(3), true)
    );
    assert_eq!(args.server.url, "http://h:1");
    assert_eq!(args.server.api_key.as_deref(), Some("k"));

    let cli = Cli::parse_from([
        "synthgate",
        "records",
        "job-1",
        "--format",
        "csv",
        "-o",
        "x.csv",
    ]);
    let Command::Records(args) = cli.command else {
        panic!("not records")
    };
    assert_eq!(args.format, RecordsFormat::Csv);
    assert_eq!(args.output, Some(std::path::PathBuf::from("x.csv")));

    let cli = Cli::parse_from(["synthgate", "records", "job-1", "--format", "parquet"]);
    let Command::Records(args) = cli.command else {
        panic!("not records")
    };
    assert_eq!(args.format, RecordsFormat::Parquet);

    let cli = Cli::parse_from(["synthgate", "healthcheck"]);
    let Command::Healthcheck(args) = cli.command else {
        panic!("not healthcheck")
    };
    assert_eq!(args.url, "http://127.0.0.1:8080/healthz");
}
