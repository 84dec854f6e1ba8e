//! Every tool-side failure goes back to the model as a `tool` message starting with `Error:`
//! that names the cause; the model answers after it and the record completes. DataDesigner
//! drops the record instead for most of these.

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::MockLlm;

use super::{WAIT, call_pids, eventually, job};
use crate::db::Backend;
use crate::helpers::TestApp;
use crate::mcp_support::{Events, answer_trace, app_with_tools, mock_mcp_stdio, run_job};

/// One record whose model makes `call` once and answers `recovered` when it gets an `Error:`.
struct Failed {
    app: TestApp,
    mock: MockLlm,
    events: Events,
    /// The `answer` trace.
    trace: Vec<Value>,
}

impl Failed {
    /// The text of the tool message the model got.
    fn error(&self) -> String {
        let tool = &self.trace[2];
        assert_eq!(tool["role"], "tool", "{:?}", self.trace);
        assert_eq!(
            tool["tool_call_id"], self.trace[1]["tool_calls"][0]["id"],
            "{:?}",
            self.trace
        );
        let text = tool["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.starts_with("Error: "), "{text}");
        text
    }
}

/// `call` (a scripted tool call) against a tool config `t` with `extra` merged in.
async fn failing_call(extra: Value, call: Value) -> Failed {
    let events = Events::new();
    let mut cfg = json!({"tool_alias": "t", "providers": ["mock"]});
    cfg.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"tool_result_contains": "Error:"}, "reply": {"text": "recovered"}},
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [call]}, "times": 1},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![cfg],
        |_| {},
    )
    .await;
    let done = run_job(&app, &job("writer", "t", "fail", 1), WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["counts"]["completed"], 1,
        "the record survives: {done}"
    );
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    assert_eq!(records[0]["values"]["answer"], "recovered", "{records:?}");
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    assert_eq!(trace.len(), 4, "{trace:?}");
    assert_eq!(trace[3]["content"][0]["text"], "recovered");
    Failed {
        app,
        mock,
        events,
        trace,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_is_reported_and_the_call_is_cancelled() {
    let f = failing_call(
        json!({"timeout_sec": 0.3}),
        json!({"name": "slow", "arguments": {"ms": 3000}}),
    )
    .await;
    let e = f.error();
    assert!(e.contains("'slow' timed out after 0.3s"), "{e}");
    assert!(e.contains("cancelled"), "{e}");
    // The server really stopped working on it (notifications/cancelled), long before 3 s.
    eventually("the mock to see the cancel", || {
        f.events.count("cancel") == 1
    })
    .await;
    let pid = f.events.pids()[0];
    assert!(f.events.lines().contains(&format!("cancel {pid} slow")));
    f.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_allow_tools_is_neither_offered_nor_called() {
    let f = failing_call(json!({"allow_tools": ["echo"]}), json!({"name": "fail"})).await;
    let e = f.error();
    assert!(
        e.contains("'fail' is not permitted by tool config 't'"),
        "{e}"
    );
    assert!(e.contains("Available tools: echo."), "{e}");
    let requests = f.mock.requests();
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["echo"]);
    assert_eq!(f.events.calls("fail"), 0, "{:?}", f.events.lines());
    f.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_reported() {
    let f = failing_call(json!({}), json!({"name": "nope"})).await;
    let e = f.error();
    assert!(
        e.contains("'nope' not found on any configured provider"),
        "{e}"
    );
    assert!(e.contains("echo"), "the message lists what exists: {e}");
    assert_eq!(f.events.calls("nope"), 0, "{:?}", f.events.lines());
    f.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_are_not_json_are_reported() {
    let f = failing_call(json!({}), json!({"name": "echo", "arguments": "{not json"})).await;
    assert_eq!(
        f.trace[1]["tool_calls"][0]["function"]["arguments"],
        "{not json"
    );
    let e = f.error();
    assert!(
        e.contains("Invalid arguments for tool 'echo': not valid JSON"),
        "{e}"
    );
    assert_eq!(f.events.calls("echo"), 0, "{:?}", f.events.lines());
    f.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_against_the_input_schema_are_reported() {
    let f = failing_call(json!({}), json!({"name": "echo", "arguments": {"text": 5}})).await;
    let e = f.error();
    assert!(e.contains("Invalid arguments for tool 'echo'"), "{e}");
    assert!(e.contains("/text"), "names the bad field: {e}");
    assert_eq!(f.events.calls("echo"), 0, "checked before sending");
    f.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_error_result_is_reported() {
    let f = failing_call(json!({}), json!({"name": "fail"})).await;
    assert_eq!(f.error(), "Error: tool failed: boom");
    assert_eq!(f.events.calls("fail"), 1);
    f.app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_reported_and_the_next_record_gets_a_fresh_session() {
    let f = failing_call(json!({}), json!({"name": "crash"})).await;
    let e = f.error();
    assert!(e.contains("'crash' failed"), "{e}");
    assert!(
        e.contains("the connection to MCP provider 'mock' was lost"),
        "{e}"
    );
    // The call was retried once, on a new server, which crashed too.
    let crashed = call_pids(&f.events, "crash");
    assert_eq!(crashed.len(), 2, "{:?}", f.events.lines());
    assert_ne!(crashed[0], crashed[1]);

    // The next record's model calls `echo` (the crash rule is used up).
    let next = run_job(&f.app, &job("writer", "t", "next", 1), WAIT).await;
    assert_eq!(next["status"], "completed", "{next}");
    let records = f.app.all_records(next["id"].as_str().unwrap()).await;
    assert_eq!(records[0]["values"]["answer"], "done", "{records:?}");
    let echoed = call_pids(&f.events, "echo");
    assert_eq!(echoed.len(), 1, "{:?}", f.events.lines());
    assert!(!crashed.contains(&echoed[0]), "a fresh server answered");
    assert_eq!(f.events.pids().len(), 3, "{:?}", f.events.lines());
    f.app.stop().await;
}
