//! Each transport with a real server: mock-mcp over streamable HTTP (behind a proxy that checks
//! the bearer key, restarted mid-job, and over HTTPS with HTTP/2), the official Python SDK over
//! legacy SSE, and `mcp-server-time` from PyPI over stdio.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate::config::McpProviderConfig;
use synthgate::mcp::{McpError, McpPool};
use synthgate_testkit::mock_mcp::{MockMcpHttp, Options};
use synthgate_testkit::tls::TlsOptions;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{AuthProxy, JOB_TIMEOUT, job, offered, post, tool_texts, trace};
use crate::db::Backend;
use crate::mcp_support::{
    Events, answer_trace, app_with_tools, python_with, run_job, spawn_sse_server, tool_job,
};

/// Not the name of an environment variable, so it is used as the literal key.
const HTTP_KEY: &str = "mcp-http-key-0123456789";
const SSE_TOKEN: &str = "sse-token-0123456789";

/// Calls `echo` once, then answers `done`.
fn echo_script() -> Value {
    json!({"rules": [
        {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
        {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
    ]})
}

fn events_opts(events: &Events) -> Options {
    Options {
        events: Some(events.path.clone()),
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_provider_sends_its_bearer_key_on_every_request() {
    let events = Events::new();
    let mock = MockMcpHttp::start(events_opts(&events)).await.unwrap();
    let proxy = AuthProxy::start(mock.addr(), HTTP_KEY).await;
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        echo_script(),
        vec![
            json!({"name": "mock", "provider_type": "streamable_http", "endpoint": proxy.url(),
                "api_key": HTTP_KEY}),
            json!({"name": "keyless", "provider_type": "streamable_http", "endpoint": proxy.url()}),
        ],
        vec![
            json!({"tool_alias": "t", "providers": ["mock"]}),
            json!({"tool_alias": "keyless", "providers": ["keyless"]}),
        ],
        |_| {},
    )
    .await;

    let done = run_job(&app, &tool_job("t", 3), JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 3, "{done}");
    for r in app.all_records(done["id"].as_str().unwrap()).await {
        assert_eq!(r["values"]["answer"], "done", "{r}");
        let t = answer_trace(&app, r["id"].as_str().unwrap()).await;
        assert_eq!(t[1]["tool_calls"][0]["function"]["name"], "echo", "{t:?}");
        assert_eq!(tool_texts(&t), ["hi"], "{t:?}");
    }
    // One shared session served every record.
    assert_eq!(events.count("init"), 1, "{:?}", events.lines());
    assert_eq!(events.calls("echo"), 3, "{:?}", events.lines());

    // Every request of the session carried the key: initialize, the initialized notification,
    // tools/list and the calls (POST), and the standalone stream (GET) if rmcp opened one.
    let seen = proxy.seen();
    let posts = seen.iter().filter(|(m, _)| m == "POST").count();
    assert!(posts >= 5, "{seen:?}");
    let expected = format!("Bearer {HTTP_KEY}");
    assert!(
        seen.iter().all(|(_, a)| a.as_deref() == Some(&expected)),
        "{seen:?}"
    );

    // The proxy really checks: the same server without the key cannot be used.
    let (status, body) = app.create_job(&tool_job("keyless", 1)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "mcp_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keyless"),
        "{body}"
    );
    assert!(proxy.seen().iter().any(|(_, a)| a.is_none()));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_restarted_mid_job_loses_no_record() {
    const RECORDS: usize = 30;
    let before = Events::new();
    let after = Events::new();
    let mock = MockMcpHttp::start(events_opts(&before)).await.unwrap();
    let addr = mock.addr();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        // The first turn is slowed down so most records run after the restart. A model told
        // `Error:` tries again a little later (as a real one may), so a record caught by the
        // outage ends with the result too, whenever the pool gets the server back.
        json!({"rules": [
            {"when": {"tool_result_contains": "Error:"}, "reply": {"delay_ms": 200,
                "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}},
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"delay_ms": 100,
                "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
        ]}),
        vec![json!({"name": "mock", "provider_type": "streamable_http", "endpoint": mock.url()})],
        vec![json!({"tool_alias": "t", "providers": ["mock"], "max_tool_call_turns": 100})],
        |c| c.workers.count = 2,
    )
    .await;
    let (status, created) = app.create_job(&tool_job("t", RECORDS as u32)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();

    let deadline = Instant::now() + JOB_TIMEOUT;
    while before.calls("echo") < 2 {
        assert!(
            Instant::now() < deadline,
            "no tool calls: {:?}",
            before.lines()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    mock.shutdown().await;
    let calls_before = before.calls("echo");
    // The same port: tokio binds with SO_REUSEADDR, so the old socket does not block it.
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let stop = CancellationToken::new();
    let server = TaskTracker::new();
    let opts = events_opts(&after);
    let token = stop.clone();
    server
        .spawn(async move { synthgate_testkit::mock_mcp::serve_http(listener, opts, token).await });
    server.close();

    let done = app.wait_for_job(id, JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], RECORDS, "{done}");
    let records = app.all_records(id).await;
    assert_eq!(records.len(), RECORDS);
    let mut errors = 0;
    for r in &records {
        assert_eq!(r["values"]["answer"], "done", "{r}");
        let t = answer_trace(&app, r["id"].as_str().unwrap()).await;
        let texts = tool_texts(&t);
        // Failures (a call in flight at the stop, or made while the server was away) are
        // `Error:` messages to the model, never a failed record; the last call got through.
        let (last, failed) = texts.split_last().unwrap();
        assert_eq!(last, "hi", "{t:?}");
        assert!(failed.iter().all(|f| f.starts_with("Error:")), "{t:?}");
        errors += failed.len();
    }
    eprintln!(
        "restart: {calls_before} calls before the stop, {} after; {errors} error results",
        after.calls("echo")
    );
    // Later records reached the restarted server, over a new session.
    assert!(after.count("init") >= 1, "{:?}", after.lines());
    assert!(after.calls("echo") >= 1, "{:?}", after.lines());
    app.stop().await;
    stop.cancel();
    server.wait().await;
}

/// An MCP server over HTTPS speaks HTTP/2, and its connections carry 100 streams at once (the
/// least RFC 9113 asks of a server). An HTTP client sends every request to one origin over one
/// connection, so 200 tool calls in flight on the provider's session had 100 at the server and
/// the rest queued in the client, however many sessions the pool opened; the provider's
/// connection lanes keep all 200 at the server. The pool trusts the mock's certificate through
/// the provider's `tls_ca_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_past_one_http2_connection_streams_stay_in_flight() {
    const CALLS: u64 = 200;
    synthgate::metrics::install();
    let mock = MockMcpHttp::start_tls(Options::default(), TlsOptions::fixture(100))
        .await
        .unwrap();
    assert!(mock.url().starts_with("https://"));
    let cfg: McpProviderConfig = serde_json::from_value(json!({
        "name": "hosted", "provider_type": "streamable_http", "endpoint": mock.url(),
        "tls_ca_file": TlsOptions::fixture_ca(),
    }))
    .unwrap();
    let pool = McpPool::new(&[cfg]).expect("the pool builds");
    let slow = |ms: u64| {
        let args = json!({"ms": ms}).as_object().unwrap().clone();
        let pool = &pool;
        async move {
            pool.call("hosted", None, "slow", args, Some(Duration::from_secs(60)))
                .await
        }
    };
    // The session first, so every call below goes out on it at once.
    slow(0).await.expect("a first call connects");
    let results = futures::future::join_all((0..CALLS).map(|_| slow(1_000))).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{:?}", failed.first());
    let stats = mock.call_stats();
    assert_eq!(stats.calls, CALLS + 1);
    assert_eq!(
        stats.max_in_flight, CALLS,
        "every call at the server, not one connection's 100 streams"
    );
    // 200 calls and the session's event stream, 64 to a lane: at least 4 lanes (two calls
    // that find every lane full at once may both open one).
    let metrics = synthgate::metrics::render();
    let lanes: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("synthgate_http_lanes{kind=\"mcp_provider\",name=\"hosted\"} ")
        })
        .unwrap_or_else(|| panic!("no lanes gauge for the provider: {metrics}"))
        .parse()
        .unwrap();
    assert!((4.0..=8.0).contains(&lanes), "{lanes} lanes");
    pool.shutdown(Duration::from_secs(5)).await;
}

/// An HTTP provider whose `tls_ca_file` holds no certificate is refused when the pool is built
/// (at start), naming the provider and the file.
#[test]
fn an_mcp_provider_with_a_bad_tls_ca_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let cfg: McpProviderConfig = serde_json::from_value(json!({
        "name": "private", "provider_type": "streamable_http",
        "endpoint": "https://mcp.internal/mcp", "tls_ca_file": empty,
    }))
    .unwrap();
    let Err(err) = McpPool::new(&[cfg]) else {
        panic!("a CA file without a certificate is refused")
    };
    assert!(matches!(err, McpError::Client { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("'private'") && msg.contains("tls_ca_file") && msg.contains("empty.pem"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_provider_against_the_python_sdk() {
    let Some(server) = spawn_sse_server(Some(SSE_TOKEN)).await else {
        return;
    };
    let (app, llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [
                {"name": "echo", "arguments": {"text": "hi"}},
                {"name": "image", "arguments": {}}
            ]}}
        ]}),
        vec![
            json!({"name": "py", "provider_type": "sse", "endpoint": server.url,
                "api_key": SSE_TOKEN}),
            // DataDesigner's default: an endpoint and no provider_type is SSE.
            json!({"name": "py-default", "endpoint": server.url, "api_key": SSE_TOKEN}),
            json!({"name": "py-keyless", "provider_type": "sse", "endpoint": server.url}),
        ],
        vec![
            json!({"tool_alias": "sse", "providers": ["py"]}),
            json!({"tool_alias": "default", "providers": ["py-default"]}),
            json!({"tool_alias": "keyless", "providers": ["py-keyless"]}),
        ],
        |_| {},
    )
    .await;

    let spec = job(
        2,
        &[
            ("a", "writer", "sse", "Use the tools for {{ n }}."),
            ("b", "writer", "default", "Use the tools again for {{ n }}."),
        ],
        json!([]),
        json!([]),
    );
    let done = run_job(&app, &spec, JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 2, "{done}");
    for r in app.all_records(done["id"].as_str().unwrap()).await {
        let id = r["id"].as_str().unwrap();
        for column in ["a", "b"] {
            assert_eq!(r["values"][column], "done", "{r}");
            let t = trace(&app, id, column).await;
            let calls = &t[1]["tool_calls"];
            assert_eq!(calls[0]["function"]["name"], "echo", "{t:?}");
            assert_eq!(calls[1]["function"]["name"], "image", "{t:?}");
            // Results in call order, each answering its call.
            assert_eq!(t[2]["role"], "tool");
            assert_eq!(t[2]["tool_call_id"], calls[0]["id"], "{t:?}");
            assert_eq!(t[2]["content"], json!([{"type": "text", "text": "hi"}]));
            assert_eq!(t[3]["tool_call_id"], calls[1]["id"], "{t:?}");
            let image = &t[3]["content"][0];
            assert_eq!(image["type"], "image_url", "{t:?}");
            let url = image["image_url"]["url"].as_str().unwrap();
            assert!(url.starts_with("data:image/png;base64,iVBOR"), "{url}");
        }
    }
    // The model was offered the Python server's tools, with their SDK-made schemas.
    let first = &llm.requests()[0].body;
    let names = offered(first);
    for tool in ["echo", "add", "image", "boom", "sleep", "whoami"] {
        assert!(names.iter().any(|n| n == tool), "{tool} not in {names:?}");
    }

    let (status, tools) = app.get("/v1/tools").await;
    assert_eq!(status, 200, "{tools}");
    let providers = tools["providers"].as_array().unwrap();
    for name in ["py", "py-default"] {
        let p = providers.iter().find(|p| p["name"] == name).unwrap();
        assert_eq!(p["transport"], "sse", "{p}");
        assert_eq!(p["state"], "connected", "{p}");
    }

    // The token is what let the gateway in: without it the server answers 401.
    let (status, body) = post(&app, "/v1/jobs", &tool_job("keyless", 1)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "mcp_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("py-keyless") && message.contains("401"),
        "{message}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_from_pypi_over_stdio() {
    let Some(python) = python_with("mcp_server_time") else {
        return;
    };
    let (app, llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [
                {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
            ]}}
        ]}),
        // `--local-timezone`: the server would otherwise read the host's zone, which a
        // container may not have.
        vec![json!({"name": "time", "command": python,
            "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]})],
        vec![json!({"tool_alias": "clock", "providers": ["time"]})],
        |_| {},
    )
    .await;

    let done = run_job(&app, &tool_job("clock", 2), JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    for r in app.all_records(done["id"].as_str().unwrap()).await {
        assert_eq!(r["values"]["answer"], "done", "{r}");
        let t = answer_trace(&app, r["id"].as_str().unwrap()).await;
        let texts = tool_texts(&t);
        assert_eq!(texts.len(), 1, "{t:?}");
        let result: Value = serde_json::from_str(&texts[0])
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", texts[0]));
        assert_eq!(result["timezone"], "UTC", "{result}");
        let datetime = result["datetime"].as_str().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(datetime)
                .is_ok_and(|d| d.offset().local_minus_utc() == 0),
            "{datetime}"
        );
        assert!(result["day_of_week"].is_string(), "{result}");
    }
    assert_eq!(
        offered(&llm.requests()[0].body),
        ["get_current_time", "convert_time"]
    );

    let (status, tools) = app.get("/v1/tools").await;
    assert_eq!(status, 200, "{tools}");
    let p = &tools["providers"][0];
    assert_eq!(p["name"], "time");
    assert_eq!(p["transport"], "stdio");
    assert_eq!(p["state"], "connected", "{p}");
    assert_eq!(
        p["tools"],
        json!(["get_current_time", "convert_time"]),
        "{p}"
    );
    let offered_tools = tools["tool_configs"][0]["tools"].as_array().unwrap();
    let names: Vec<&str> = offered_tools
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_current_time", "convert_time"]);
    assert!(offered_tools.iter().all(|t| t["provider"] == "time"));
    assert_eq!(
        offered_tools[0]["input_schema"]["properties"]["timezone"]["type"],
        "string"
    );
    app.stop().await;
}
