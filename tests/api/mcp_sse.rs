//! The legacy HTTP+SSE MCP client transport against a real third-party server: the official MCP
//! Python SDK serving tests/mcp/sse_server.py.
//!
//! The interpreter comes from `$SYNTHGATE_TEST_PYTHON` (scripts/test sets it to a venv built
//! from scripts/requirements-test.txt). Without it, a `python3` that can import `mcp` is used;
//! failing that the tests print why and pass without running, so a bare `cargo test` on a
//! machine without Python still works.

use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use synthgate::mcp::sse::{SseClientTransport, SseTransportError};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// Generous: the Python server spends about a second importing the SDK, more on a busy machine.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Every MCP await is bounded, so a transport bug fails the test instead of hanging it.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A running tests/mcp/sse_server.py, killed when dropped.
struct SseServer {
    child: Child,
    /// The SSE URL the server printed on its first stdout line.
    url: String,
    /// Kept open so a later print cannot fail with a broken pipe.
    _stdout: Lines<BufReader<ChildStdout>>,
}

/// The interpreter to run the server with, or `None` (after saying why) to skip the test.
fn python() -> Option<String> {
    if let Ok(python) = std::env::var("SYNTHGATE_TEST_PYTHON") {
        return Some(python);
    }
    let importable = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if importable {
        return Some("python3".into());
    }
    eprintln!(
        "skipping: SYNTHGATE_TEST_PYTHON is unset and python3 cannot import mcp 2.x \
         (run scripts/test, or pip install -r scripts/requirements-test.txt)"
    );
    None
}

/// Starts the server on a free port, requiring `token` as a bearer token when given.
async fn spawn_server(token: Option<&str>) -> Option<SseServer> {
    let python = python()?;
    let mut command = Command::new(python);
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/mcp/sse_server.py"
        ))
        .arg("0")
        .env_remove("SSE_SERVER_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(token) = token {
        command.env("SSE_SERVER_TOKEN", token);
    }
    let mut child = command.spawn().expect("start the Python SSE server");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let url = tokio::time::timeout(STARTUP_TIMEOUT, stdout.next_line())
        .await
        .expect("the server prints its URL in time")
        .expect("read the server's stdout")
        .expect("the server printed its URL before exiting");
    Some(SseServer {
        child,
        url,
        _stdout: stdout,
    })
}

/// The test's HTTP client, built apart from `connect` so connect latency excludes building it.
fn http_client() -> reqwest::Client {
    synthgate::telemetry::init_for_tests();
    synthgate::install_crypto_provider();
    reqwest::Client::new()
}

async fn connect(
    server: &SseServer,
    http: reqwest::Client,
    headers: HeaderMap,
) -> Result<SseClientTransport, SseTransportError> {
    tokio::time::timeout(
        CALL_TIMEOUT,
        SseClientTransport::connect(http, &server.url, headers),
    )
    .await
    .expect("connect finishes in time")
}

async fn call(
    client: &RunningService<RoleClient, impl rmcp::ClientHandler>,
    tool: &'static str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool} returns in time"))
}

fn text_of(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

#[tokio::test]
async fn tools_work_over_the_legacy_sse_transport() {
    let Some(server) = spawn_server(None).await else {
        return;
    };
    let http = http_client();
    let started = Instant::now();
    let transport = connect(&server, http, HeaderMap::new())
        .await
        .expect("connects");
    let connected = started.elapsed();
    let client = tokio::time::timeout(CALL_TIMEOUT, ().serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize succeeds");
    let initialized = started.elapsed();

    let tools = tokio::time::timeout(CALL_TIMEOUT, client.list_all_tools())
        .await
        .expect("list in time")
        .expect("list succeeds");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in ["echo", "add", "image", "boom", "whoami"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }

    let echoed = call(&client, "echo", json!({"text": "héllo"}))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "héllo");
    assert_ne!(echoed.is_error, Some(true));

    let sum = call(&client, "add", json!({"a": 2, "b": 3.5}))
        .await
        .unwrap();
    assert_eq!(text_of(&sum).parse::<f64>().unwrap(), 5.5);

    let image = call(&client, "image", json!({})).await.unwrap();
    let block = image.content[0].as_image().expect("an image block");
    assert_eq!(block.mime_type, "image/png");
    assert!(!block.data.is_empty());

    // The Python SDK reports a raising tool as a result with isError, not a JSON-RPC error.
    let boom = call(&client, "boom", json!({})).await.unwrap();
    assert_eq!(boom.is_error, Some(true));
    assert!(text_of(&boom).contains("boom"), "{boom:?}");

    let pid = call(&client, "whoami", json!({})).await.unwrap();
    assert_eq!(
        text_of(&pid).parse::<u32>().unwrap(),
        server.child.id().unwrap()
    );

    // One session multiplexes: concurrent calls each get their own answer off the one stream.
    let texts: Vec<String> = (0..16).map(|i| format!("call {i}")).collect();
    let answers = futures::future::join_all(
        texts
            .iter()
            .map(|t| call(&client, "echo", json!({ "text": t }))),
    )
    .await;
    for (text, answer) in texts.iter().zip(answers) {
        assert_eq!(text_of(&answer.unwrap()), text);
    }

    let mut latencies = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        call(&client, "echo", json!({"text": "x"})).await.unwrap();
        latencies.push(t.elapsed());
    }
    latencies.sort();
    eprintln!(
        "legacy SSE: connect {connected:?}, connect+initialize {initialized:?}, \
         echo median {:?}",
        latencies[latencies.len() / 2]
    );

    tokio::time::timeout(CALL_TIMEOUT, client.cancel())
        .await
        .expect("close in time")
        .expect("close succeeds");
}

#[tokio::test]
async fn the_bearer_token_goes_on_the_stream_and_every_post() {
    let Some(server) = spawn_server(Some("t0ken")).await else {
        return;
    };

    let http = http_client();
    let err = connect(&server, http.clone(), HeaderMap::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, SseTransportError::Status { status, .. } if status == 401),
        "{err}"
    );

    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer t0ken"));
    let transport = connect(&server, http, headers)
        .await
        .expect("connects with the token");
    // initialize and the call are POSTs: they succeed only if the header goes with them too.
    let client = tokio::time::timeout(CALL_TIMEOUT, ClientConfig::default().serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize succeeds");
    let echoed = call(&client, "echo", json!({"text": "authorized"}))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "authorized");
}

#[tokio::test]
async fn a_dead_server_fails_calls_instead_of_hanging_them() {
    let Some(mut server) = spawn_server(None).await else {
        return;
    };
    let transport = connect(&server, http_client(), HeaderMap::new())
        .await
        .expect("connects");
    let client = tokio::time::timeout(CALL_TIMEOUT, ().serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize succeeds");
    call(&client, "whoami", json!({})).await.unwrap();

    let in_flight = async {
        let result = call(&client, "sleep", json!({"seconds": 60})).await;
        (result, Instant::now())
    };
    let kill = async {
        // Let the request reach the server before it dies.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let killing_at = Instant::now();
        server.child.kill().await.expect("kill the server");
        killing_at
    };
    let ((result, failed_at), killing_at) = tokio::join!(in_flight, kill);
    eprintln!(
        "in-flight call failed {:?} after the kill started: {result:?}",
        failed_at - killing_at
    );
    assert!(
        matches!(result, Err(ServiceError::TransportClosed)),
        "{result:?}"
    );

    let next = call(&client, "whoami", json!({})).await;
    assert!(next.is_err(), "{next:?}");
    assert!(client.peer().is_transport_closed());
}
