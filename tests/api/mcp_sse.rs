//! The legacy HTTP+SSE MCP client transport against a real third-party server: the official MCP
//! Python SDK serving tests/mcp/sse_server.py.
//!
//! The server and its interpreter come from [`crate::mcp_support::spawn_sse_server`]: without a
//! Python that has the MCP SDK the tests print why and pass without running.

use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use synthgate::mcp::sse::{SseClientTransport, SseTransportError};

use crate::mcp_support::{SseServer, spawn_sse_server};

/// Every MCP await is bounded, so a transport bug fails the test instead of hanging it.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

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
    let Some(server) = spawn_sse_server(None).await else {
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
    let Some(server) = spawn_sse_server(Some("t0ken")).await else {
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
    let Some(mut server) = spawn_sse_server(None).await else {
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
        // The call has reached the server: its tool says so before it sleeps.
        let started = tokio::time::timeout(CALL_TIMEOUT, server.stdout.next_line())
            .await
            .expect("the call reaches the server in time")
            .expect("read the server's stdout");
        assert_eq!(started.as_deref(), Some("sleeping"));
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
