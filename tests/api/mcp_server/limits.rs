//! `/mcp`'s bounds: the keys (and the switch), the body limit, a tool's deadline, shutdown.

use std::time::Duration;

use serde_json::json;

use super::{KEY_A, connect, llm_config, with_keys};
use crate::db::Backend;
use crate::helpers::{app_with_mock_llm, spawn_app_with, status_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_guard_mcp_and_it_can_be_turned_off() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        with_keys(c);
        c.server.max_body_bytes = 16 * 1024;
    })
    .await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "0"}}});
    let post = |key: Option<&str>| {
        let mut req = app
            .client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send()
    };
    for key in [None, Some("not-a-key-0123456789abcdef")] {
        let resp = post(key).await.unwrap();
        assert_eq!(
            resp.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
        let (status, body) = status_json(resp).await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    let resp = post(Some(KEY_A)).await.unwrap();
    assert_eq!(resp.status(), 200);
    // `server.max_body_bytes` holds for MCP messages too.
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "submit_job", "arguments": {"config": {"x": "y".repeat(20_000)}, "num_records": 1}}});
    let resp = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(KEY_A)
        .header("accept", "application/json, text/event-stream")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    assert!(
        resp.headers().get("mcp-session-id").is_none(),
        "stateless: no session to stick to"
    );
    app.stop().await;

    let app = spawn_app_with(Backend::Sqlite, |c| c.server.mcp = false).await;
    let (status, body) = status_json(
        app.client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    app.stop().await;
}

/// A JSON POST that is not a JSON-RPC message gets JSON-RPC's parse (`-32700`) or invalid
/// request (`-32600`) error with `400`, and a good message still goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_not_json_rpc_gets_its_json_rpc_error() {
    let app = spawn_app_with(Backend::Sqlite, |_| {}).await;
    let post = |body: &'static str| {
        app.client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for (body, code) in [
        ("{not json", -32700),
        (r#"{"hello": "world"}"#, -32600),
        ("[1, 2]", -32600),
    ] {
        let (status, answer) = status_json(post(body).await.unwrap()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        assert!(answer["id"].is_null(), "{answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
    }
    let ping = post(r#"{"jsonrpc": "2.0", "id": 7, "method": "ping"}"#)
        .await
        .unwrap();
    let (status, answer) = status_json(ping).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["id"], 7, "{answer}");
    app.stop().await;
}

/// A tool past `server.request_timeout_sec` ends with a `request_timeout` tool error (not a
/// bare HTTP error the client cannot attribute), and the server goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_is_a_request_timeout_tool_error() {
    let slow = json!({"rules": [{"reply": {"text": "late", "delay_ms": 4000}}]});
    let (app, _mock) = app_with_mock_llm(Backend::Sqlite, slow, |c| {
        c.server.request_timeout_sec = 1;
    })
    .await;
    let c = connect(&app, None).await;
    let started = std::time::Instant::now();
    let err = c
        .err(
            "preview_dataset",
            json!({"config": llm_config(), "num_records": 1}),
        )
        .await;
    assert_eq!(err["code"], "request_timeout", "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let models = c.ok("list_models", json!({})).await;
    assert_eq!(models["models"][0]["alias"], "writer");
    c.service.cancel().await.unwrap();
    app.stop().await;
}

/// A tool still waiting when the server shuts down does not hold the drain open: `wait_job`
/// answers with the job as it is, and the response streams end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_waiting_tool() {
    let slow = json!({"rules": [{"reply": {"text": "late", "delay_ms": 1500}}]});
    let (app, _mock) = app_with_mock_llm(Backend::Sqlite, slow, |_| {}).await;
    let c = connect(&app, None).await;
    let job = c
        .ok(
            "submit_job",
            json!({"config": llm_config(), "num_records": 1}),
        )
        .await;
    let wait = c.try_call("wait_job", json!({"job_id": job["id"], "timeout_sec": 600}));
    let stop = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        app.stop().await;
        started.elapsed()
    };
    let (waited, took) = tokio::join!(wait, stop);
    // The answer races the end of its stream; either way the call is over, long before 600 s.
    if let Ok(result) = waited {
        let job = c.structured("wait_job", result);
        assert_ne!(job["status"], "completed", "{job}");
    }
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
}
