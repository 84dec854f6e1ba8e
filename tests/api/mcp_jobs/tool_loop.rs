//! The tool loop: the turn budget and its refusal, parallel calls answered in call order, and
//! image results reaching the model as image blocks (OpenAI and Anthropic wire formats).

use serde_json::{Value, json};
use synthgate::tools::REFUSAL_MESSAGE;
use synthgate_testkit::mock_mcp::PNG_1X1;

use super::{WAIT, job, tools};
use crate::db::Backend;
use crate::mcp_support::{Events, answer_trace, app_with_tools, mock_mcp_stdio, run_job};

/// The joined text blocks of a trace message.
fn text(msg: &Value) -> String {
    msg["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_turn_budget_calls_are_refused_and_tools_forbidden() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"tool_result_contains": "Tool call refused"}, "reply": {"text": "final"}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "more"}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"], "max_tool_call_turns": 2})],
        |_| {},
    )
    .await;
    let done = run_job(&app, &job("writer", "t", "go", 1), WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    assert_eq!(records[0]["values"]["answer"], "final");

    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    let roles: Vec<&str> = trace.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ],
        "{trace:?}"
    );
    for (call, result) in [(1, 2), (3, 4)] {
        assert_eq!(
            trace[result]["tool_call_id"],
            trace[call]["tool_calls"][0]["id"]
        );
        assert_eq!(text(&trace[result]), "more", "turn {call} ran: {trace:?}");
    }
    assert_eq!(trace[6]["tool_call_id"], trace[5]["tool_calls"][0]["id"]);
    assert_eq!(text(&trace[6]), REFUSAL_MESSAGE);
    assert_eq!(text(&trace[7]), "final");
    assert_eq!(events.calls("echo"), 2, "the third turn ran nothing");

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let choices: Vec<&Value> = requests.iter().map(|r| &r.body["tool_choice"]).collect();
    assert_eq!(
        choices,
        [&Value::Null, &Value::Null, &Value::Null, &json!("none")]
    );
    assert!(
        requests[3].body["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "tools stay defined while the conversation holds tool calls"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_ignores_the_refusal_fails_the_record() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"tools_forbidden": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "still"}}]}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "more"}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"], "max_tool_call_turns": 2})],
        |_| {},
    )
    .await;
    let done = run_job(&app, &job("writer", "t", "go", 1), WAIT).await;
    assert_eq!(done["counts"]["failed"], 1, "{done}");
    let first = &done["first_errors"][0];
    assert_eq!(first["error"]["code"], "tool_turns_exceeded", "{first}");
    assert_eq!(first["error"]["column"], "answer", "{first}");
    let (status, record) = app
        .get(&format!(
            "/v1/records/{}",
            first["record_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["status"], "failed");
    assert_eq!(record["error"]["code"], "tool_turns_exceeded");
    // Three turns with tools allowed, then exactly one request that forbade them.
    assert_eq!(mock.stats().rule_hits, [1, 3]);
    assert_eq!(events.calls("echo"), 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_one_turn_are_answered_in_call_order() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [
                {"name": "slow", "arguments": {"ms": 300}},
                {"name": "echo", "arguments": {"text": "a"}},
                {"name": "slow", "arguments": {"ms": 50}}
            ]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![tools("t", "mock")],
        |_| {},
    )
    .await;
    let done = run_job(&app, &job("writer", "t", "go", 1), WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    assert_eq!(
        trace.len(),
        6,
        "one turn, three results, the answer: {trace:?}"
    );
    let calls = trace[1]["tool_calls"].as_array().unwrap();
    let ids: Vec<&str> = calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
    let answered: Vec<&str> = trace[2..5]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ids);
    let results: Vec<String> = trace[2..5].iter().map(text).collect();
    assert_eq!(results, ["slept 300ms", "a", "slept 50ms"]);
    // The model got them in the same order.
    let sent = &mock.requests()[1].body["messages"];
    let sent_ids: Vec<&str> = (2..5)
        .map(|i| sent[i]["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(sent_ids, ids);
    app.stop().await;
}

/// The `image` and `mixed` results as canonical blocks.
fn image_blocks() -> (Value, Value) {
    let image = json!({"type": "image_url",
        "image_url": {"url": format!("data:image/png;base64,{PNG_1X1}")}});
    let mixed =
        json!([{"type": "text", "text": "before"}, image, {"type": "text", "text": "after"}]);
    (json!([image]), mixed)
}

/// Model: `image` and `mixed` in one turn, then `done`.
fn image_script() -> Value {
    json!({"rules": [
        {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
        {"when": {"has_tools": true},
         "reply": {"tool_calls": [{"name": "image"}, {"name": "mixed"}]}}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_results_reach_an_openai_model_as_image_url_blocks() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        image_script(),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![tools("t", "mock")],
        |_| {},
    )
    .await;
    let done = run_job(&app, &job("writer", "t", "look", 1), WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let (image, mixed) = image_blocks();

    let requests = mock.requests();
    let sent = &requests[1].body["messages"];
    assert_eq!(sent[2]["role"], "tool", "{sent}");
    assert_eq!(sent[2]["content"], image, "{sent}");
    assert_eq!(sent[3]["role"], "tool", "{sent}");
    assert_eq!(sent[3]["content"], mixed, "order kept: {sent}");

    let records = app.all_records(done["id"].as_str().unwrap()).await;
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    assert_eq!(trace[2]["content"], image, "{trace:?}");
    assert_eq!(trace[3]["content"], mixed, "{trace:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_results_reach_an_anthropic_model_as_image_blocks() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        image_script(),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![tools("t", "mock")],
        |c| {
            // The same mock serves `/v1/messages`.
            let endpoint = c.model_providers[0].endpoint.clone();
            c.model_providers.push(
                serde_json::from_value(json!({"name": "anth", "endpoint": endpoint,
                    "provider_type": "anthropic"}))
                .unwrap(),
            );
            c.model_configs.push(
                serde_json::from_value(
                    json!({"alias": "claude", "model": "mock-claude", "provider": "anth"}),
                )
                .unwrap(),
            );
        },
    )
    .await;
    let done = run_job(&app, &job("claude", "t", "look", 1), WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");

    let requests = mock.requests();
    assert!(requests.iter().all(|r| r.model == "mock-claude"));
    let sent = &requests[1].body["messages"];
    let results = &sent[2];
    assert_eq!(results["role"], "user", "{sent}");
    let blocks = results["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "both results in one user message: {sent}");
    let ids: Vec<&Value> = sent[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| &b["id"])
        .collect();
    let png = json!({"type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1}});
    assert_eq!(
        blocks[0],
        json!({"type": "tool_result", "tool_use_id": ids[0], "content": [png]})
    );
    assert_eq!(
        blocks[1],
        json!({"type": "tool_result", "tool_use_id": ids[1], "content": [
            {"type": "text", "text": "before"}, png, {"type": "text", "text": "after"}]})
    );

    // The trace keeps the canonical blocks whatever the wire format.
    let (image, mixed) = image_blocks();
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    assert_eq!(trace[2]["content"], image, "{trace:?}");
    assert_eq!(trace[3]["content"], mixed, "{trace:?}");
    app.stop().await;
}
