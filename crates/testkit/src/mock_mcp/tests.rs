//! The mock through rmcp's own client over real HTTP, as the gateway will use it.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{MockMcpHttp, Options, PNG_1X1};

/// How long a test waits for something asynchronous before failing.
const DEADLINE: Duration = Duration::from_secs(2);

/// Every tool listed while `bonus` is off.
const TOOLS: [&str; 12] = [
    "add",
    "broken_image",
    "crash",
    "echo",
    "fail",
    "image",
    "mixed",
    "resource",
    "slow",
    "structured_only",
    "toggle_tools",
    "whoami",
];

/// A client handler that counts `tools/list_changed` notifications.
#[derive(Clone, Default)]
struct Watcher {
    changed: Arc<Notify>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A stored permit if nobody waits yet, so the notification cannot be missed.
        self.changed.notify_one();
    }
}

async fn connect<H: ClientHandler>(
    server: &MockMcpHttp,
    handler: H,
) -> RunningService<RoleClient, H> {
    // reqwest is built without a default crypto provider (as in the product); ring it is.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(server.url());
    tokio::time::timeout(DEADLINE, handler.serve(transport))
        .await
        .expect("connect timed out")
        .expect("connect")
}

async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    name: &'static str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(name).with_arguments(args);
    tokio::time::timeout(DEADLINE, client.call_tool(params))
        .await
        .expect("call timed out")
}

fn texts(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

fn error_code(result: Result<CallToolResult, ServiceError>) -> ErrorCode {
    match result {
        Err(ServiceError::McpError(e)) => e.code,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// The events file's lines, once `pred` holds for them (polled; fails after [`DEADLINE`]).
async fn wait_for_events(path: &Path, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    loop {
        let lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if pred(&lines) {
            return lines;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "events never matched: {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn list_all_tools_follows_cursors_across_pages() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let server = MockMcpHttp::start(Options {
        events: Some(events.clone()),
        page_size: NonZeroUsize::new(2),
        ..Options::default()
    })
    .await
    .unwrap();
    let client = connect(&server, ()).await;

    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 2);
    assert_eq!(first.next_cursor.as_deref(), Some("2"));

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS);
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert!(
        add.output_schema.is_some(),
        "add declares its structured output"
    );

    // One `init`, then one `list` for the single page and six for the walk (11 tools / 2).
    let pid = std::process::id();
    let lines = wait_for_events(&events, |l| l.len() >= 8).await;
    assert_eq!(lines[0], format!("init {pid}"));
    assert!(
        lines[1..].iter().all(|l| *l == format!("list {pid}")),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 8, "{lines:?}");

    let bad = client
        .list_tools(Some(
            rmcp::model::PaginatedRequestParams::default().with_cursor(Some("x".into())),
        ))
        .await;
    assert!(matches!(bad, Err(ServiceError::McpError(e)) if e.code == ErrorCode::INVALID_PARAMS));
    server.shutdown().await;
}

#[tokio::test]
async fn tools_return_their_documented_shapes() {
    let server = MockMcpHttp::start(Options::default()).await.unwrap();
    let client = connect(&server, ()).await;

    let echo = call(&client, "echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(texts(&echo), ["hi"]);
    assert_eq!(echo.is_error, Some(false));

    let add = call(&client, "add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(texts(&add), ["5"]);
    assert_eq!(add.structured_content, Some(json!({"sum": 5})));
    let half = call(&client, "add", json!({"a": 1, "b": 0.5}))
        .await
        .unwrap();
    assert_eq!(texts(&half), ["1.5"]);
    assert_eq!(half.structured_content, Some(json!({"sum": 1.5})));

    let image = call(&client, "image", json!({})).await.unwrap();
    let [ContentBlock::Image(img)] = image.content.as_slice() else {
        panic!("one image block: {image:?}")
    };
    assert_eq!(
        (img.data.as_str(), img.mime_type.as_str()),
        (PNG_1X1, "image/png")
    );

    let mixed = call(&client, "mixed", json!({})).await.unwrap();
    let kinds: Vec<&str> = mixed
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.as_str(),
            ContentBlock::Image(_) => "<image>",
            _ => "<other>",
        })
        .collect();
    assert_eq!(kinds, ["before", "<image>", "after"]);

    let structured = call(&client, "structured_only", json!({})).await.unwrap();
    assert!(structured.content.is_empty());
    assert_eq!(structured.structured_content, Some(json!({"k": "v"})));

    let resource = call(&client, "resource", json!({})).await.unwrap();
    let [ContentBlock::Resource(res)] = resource.content.as_slice() else {
        panic!("one embedded resource: {resource:?}")
    };
    assert_eq!(res.get_text(), "resource text");
    assert!(matches!(
        &res.resource,
        rmcp::model::ResourceContents::TextResourceContents { uri, .. } if uri == "mock://note"
    ));

    let fail = call(&client, "fail", json!({})).await.unwrap();
    assert_eq!(fail.is_error, Some(true));
    assert_eq!(texts(&fail), ["tool failed: boom"]);
    let fail = call(&client, "fail", json!({"message": "nope"}))
        .await
        .unwrap();
    assert_eq!(texts(&fail), ["tool failed: nope"]);

    let slow = call(&client, "slow", json!({"ms": 5})).await.unwrap();
    assert_eq!(texts(&slow), ["slept 5ms"]);

    // Bad arguments are a tool error; an unknown tool is a protocol error, as in rmcp servers.
    let bad_args = call(&client, "echo", json!({})).await.unwrap();
    assert_eq!(bad_args.is_error, Some(true));
    let unknown = call(&client, "nope", json!({})).await;
    assert_eq!(error_code(unknown), ErrorCode::INVALID_PARAMS);
    server.shutdown().await;
}

#[tokio::test]
async fn toggle_tools_adds_bonus_and_notifies_every_session() {
    let server = MockMcpHttp::start(Options::default()).await.unwrap();
    let watcher = Watcher::default();
    let client = connect(&server, watcher.clone()).await;
    let other = Watcher::default();
    let other_client = connect(&server, other.clone()).await;
    assert_eq!(
        error_code(call(&client, "bonus", json!({})).await),
        ErrorCode::INVALID_PARAMS
    );
    // list_changed rides each client's standalone GET stream, and rmcp drops it if sent before
    // that stream is open. Not seen in 120 probes; a round trip first leaves ample time anyway.
    client.list_all_tools().await.unwrap();
    other_client.list_all_tools().await.unwrap();

    let toggled = call(&client, "toggle_tools", json!({})).await.unwrap();
    assert_eq!(texts(&toggled), ["tools changed"]);
    tokio::time::timeout(DEADLINE, watcher.changed.notified())
        .await
        .expect("the caller gets list_changed");
    tokio::time::timeout(DEADLINE, other.changed.notified())
        .await
        .expect("other sessions get list_changed");
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "bonus"), "{names:?}");
    let bonus = call(&other_client, "bonus", json!({})).await.unwrap();
    assert_eq!(texts(&bonus), ["bonus!"]);

    call(&client, "toggle_tools", json!({})).await.unwrap();
    tokio::time::timeout(DEADLINE, watcher.changed.notified())
        .await
        .expect("list_changed on removal too");
    assert_eq!(client.list_all_tools().await.unwrap().len(), TOOLS.len());
    assert_eq!(
        error_code(call(&client, "bonus", json!({})).await),
        ErrorCode::INVALID_PARAMS
    );
    server.shutdown().await;
}

#[tokio::test]
async fn events_record_init_list_call_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let server = MockMcpHttp::start(Options {
        events: Some(events.clone()),
        ..Options::default()
    })
    .await
    .unwrap();
    let client = connect(&server, ()).await;
    client.list_tools(None).await.unwrap();
    call(&client, "echo", json!({"text": "x"})).await.unwrap();
    call(&client, "nope", json!({})).await.unwrap_err();

    // Dropping the call future makes rmcp send notifications/cancelled for it.
    let slow = CallToolRequestParams::new("slow")
        .with_arguments(json!({"ms": 60_000}).as_object().cloned().unwrap());
    let gave_up = tokio::time::timeout(Duration::from_millis(200), client.call_tool(slow)).await;
    assert!(gave_up.is_err(), "slow must still be sleeping");

    let pid = std::process::id();
    let lines = wait_for_events(&events, |l| l.len() >= 6).await;
    assert_eq!(
        lines,
        [
            format!("init {pid}"),
            format!("list {pid}"),
            format!("call {pid} echo"),
            format!("call {pid} nope"),
            format!("call {pid} slow"),
            format!("cancel {pid} slow"),
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn whoami_tells_sessions_apart() {
    let server = MockMcpHttp::start(Options::default()).await.unwrap();
    let first = connect(&server, ()).await;
    let second = connect(&server, ()).await;
    let pid = std::process::id();
    let a = call(&first, "whoami", json!({})).await.unwrap();
    let b = call(&second, "whoami", json!({})).await.unwrap();
    assert_eq!(texts(&a), [format!("pid={pid} session=1")]);
    assert_eq!(texts(&b), [format!("pid={pid} session=2")]);
    server.shutdown().await;
}

#[tokio::test]
async fn crash_in_process_stops_the_server() {
    let server = MockMcpHttp::start(Options::default()).await.unwrap();
    let stop = server.stop_token();
    let url = server.url();
    let client = connect(&server, ()).await;
    // No answer arrives (rmcp's HTTP client keeps retrying the dead stream, so the call hangs,
    // as with a real crash); the server going away is what counts.
    let _ = tokio::time::timeout(
        Duration::from_millis(200),
        client.call_tool(CallToolRequestParams::new("crash")),
    )
    .await;
    assert!(stop.is_cancelled());
    tokio::time::timeout(DEADLINE, server.shutdown())
        .await
        .expect("server task ends after crash");
    let refused = reqwest::Client::new().post(&url).send().await;
    assert!(refused.is_err(), "nothing listens any more: {refused:?}");
}
