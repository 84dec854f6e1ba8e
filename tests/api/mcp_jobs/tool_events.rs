//! `GET /v1/jobs/{id}/events?tool_calls=true`: a `tool_call` event per answered call while
//! the stream is open (record, column, turn, tool, provider, duration, outcome), and
//! `record_index` to follow one record.

use std::time::Duration;

use serde_json::{Value, json};

use super::job;
use crate::db::Backend;
use crate::helpers::sse_events;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_are_streamed_as_they_are_answered() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            // The first answers wait until the streams are open (a call answered before its
            // stream opened is not in it).
            {"when": {"has_tools": true}, "reply": {"hold": true, "tool_calls": [
                {"name": "echo", "arguments": {"text": "hi"}}, {"name": "nope"}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |_| {},
    )
    .await;
    let (status, created) = app.create_job(&job("writer", "t", "stream", 3)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();

    let (all, one, quiet) = tokio::join!(
        app.open_job_events(id, "tool_calls=true"),
        app.open_job_events(id, "tool_calls=true&record_index=1"),
        app.open_job_events(id, ""),
    );
    mock.release();
    let (all, one, quiet) = tokio::join!(sse_events(all), sse_events(one), sse_events(quiet));

    let calls: Vec<&Value> = all
        .iter()
        .filter(|e| e.0 == "tool_call")
        .map(|e| &e.1)
        .collect();
    assert_eq!(calls.len(), 6, "two calls for each of 3 records: {all:?}");
    for c in &calls {
        assert_eq!(c["column"], "answer", "{c}");
        assert_eq!(c["turn"], 1, "{c}");
        assert!(c["duration_ms"].as_f64().unwrap() >= 0.0, "{c}");
        assert!(c["record_id"].is_string(), "{c}");
        match c["tool"].as_str().unwrap() {
            "echo" => {
                assert_eq!(c["outcome"], "ok", "{c}");
                assert_eq!(c["provider"], "mock", "{c}");
            }
            "nope" => {
                assert_eq!(c["outcome"], "validation_error", "{c}");
                assert!(c["provider"].is_null(), "no provider has it: {c}");
            }
            other => panic!("unexpected tool {other}"),
        }
    }
    let mut indexes: Vec<u64> = calls
        .iter()
        .map(|c| c["record_index"].as_u64().unwrap())
        .collect();
    indexes.sort_unstable();
    assert_eq!(indexes, [0, 0, 1, 1, 2, 2]);
    // Each record's calls come before its `record` event, whose id they name.
    for i in 0..3u64 {
        let last_call = all
            .iter()
            .rposition(|e| e.0 == "tool_call" && e.1["record_index"] == i)
            .unwrap();
        let record = all
            .iter()
            .position(|e| e.0 == "record" && e.1["index"] == i)
            .unwrap_or_else(|| panic!("record {i} finished while the stream was open"));
        assert!(last_call < record, "{all:?}");
        assert_eq!(all[last_call].1["record_id"], all[record].1["record_id"]);
    }
    assert_eq!(all.last().unwrap().0, "done");

    // Following record 1: its calls and its `record` event only; progress and done as usual.
    let names: Vec<&str> = one.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names.first(), Some(&"progress"), "{names:?}");
    assert_eq!(names.last(), Some(&"done"), "{names:?}");
    let followed: Vec<(&str, u64)> = one
        .iter()
        .filter(|e| e.0 == "tool_call" || e.0 == "record")
        .map(|e| {
            let index = e.1.get("record_index").or(e.1.get("index")).unwrap();
            (e.0.as_str(), index.as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        followed,
        [("tool_call", 1), ("tool_call", 1), ("record", 1)],
        "{one:?}"
    );

    // Without `tool_calls`, none.
    assert!(quiet.iter().all(|e| e.0 != "tool_call"), "{quiet:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_events_query_is_refused() {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": []}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |_| {},
    )
    .await;
    let (_, created) = app.create_job(&job("writer", "t", "q", 2)).await;
    let id = created["id"].as_str().unwrap();
    for (query, field) in [
        ("record_index=2", "record_index"),
        ("record_index=-1", "record_index"),
        ("tool_calls=maybe", "tool_calls"),
        ("tools=true", "tools"),
    ] {
        let resp = tokio::time::timeout(
            Duration::from_secs(30),
            app.client
                .get(app.url(&format!("/v1/jobs/{id}/events?{query}")))
                .send(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(resp.status(), 422, "{query}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_request", "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{query}: {message}");
    }
    app.stop().await;
}
