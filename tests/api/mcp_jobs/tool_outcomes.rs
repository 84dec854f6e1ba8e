//! The four kinds of tool error (extraction, validation, execution, formatting) each reach the
//! model with a message saying what was wrong, and the job's `tool_usage` counts every call by
//! tool and outcome and every turn by column; `coerce_arguments` converts arguments losslessly;
//! a record that fails in the middle of its tool loop keeps its trace and its usage.

use serde_json::{Value, json};

use super::{WAIT, job};
use crate::db::Backend;
use crate::mcp_support::{Events, answer_trace, app_with_tools, mock_mcp_stdio, run_job};

/// The text of each `tool` message of a trace, keyed by the name of the call it answers.
fn answers_by_tool(trace: &[Value]) -> Vec<(String, String)> {
    let calls = trace
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .collect::<Vec<_>>();
    trace
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let call = calls
                .iter()
                .find(|c| c["id"] == m["tool_call_id"])
                .expect("every tool message answers a call");
            let text = m["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            (
                call["function"]["name"].as_str().unwrap_or("").to_owned(),
                text,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_tool_error_reaches_the_model_and_is_counted() {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "recovered"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [
                // extraction: no `function` object; no tool name; arguments not JSON
                {"name": "echo", "broken": true},
                {"name": ""},
                {"name": "echo", "arguments": "{not json"},
                // validation: unknown tool; arguments against the schema
                {"name": "nope"},
                {"name": "echo", "arguments": {"text": 5}},
                // execution: the server says isError
                {"name": "fail"},
                // formatting: an image that is not one
                {"name": "broken_image"},
                // ok
                {"name": "echo", "arguments": {"text": "fine"}}
            ]}, "times": 1}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |_| {},
    )
    .await;
    let done = run_job(&app, &job("writer", "t", "kinds", 1), WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    assert_eq!(records[0]["values"]["answer"], "recovered");
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    let answers = answers_by_tool(&trace);
    assert_eq!(answers.len(), 8, "{trace:?}");
    let expect = [
        (
            "echo",
            "Error: Your tool call could not be read: the tool call has no `function` object",
        ),
        (
            "",
            "Error: Your tool call names no tool. Call one of the available tools by name: ",
        ),
        (
            "echo",
            "Error: Invalid arguments for tool 'echo': not valid JSON",
        ),
        (
            "nope",
            "Error: Tool 'nope' not found on any configured provider. Available tools: ",
        ),
        ("echo", "Error: Invalid arguments for tool 'echo': "),
        ("fail", "Error: tool failed: boom"),
        (
            "broken_image",
            "Error: Tool 'broken_image' ran, but its result cannot be shown to you: content block 2 is an image (image/png) whose data is not valid base64.",
        ),
        ("echo", "fine"),
    ];
    for ((tool, text), (want_tool, want_start)) in answers.iter().zip(expect) {
        assert_eq!(tool, want_tool, "{answers:?}");
        assert!(text.starts_with(want_start), "{tool}: {text}");
    }
    assert!(
        answers[4].1.contains("/text"),
        "names the field: {}",
        answers[4].1
    );
    // The server saw only the calls that passed every check.
    assert_eq!(events.calls("echo"), 1, "{:?}", events.lines());
    assert_eq!(events.calls("nope"), 0);

    let usage = &done["tool_usage"]["answer"];
    assert_eq!(
        *usage,
        json!({"tool_turns": 1, "tool_calls": {
            "": {"extraction_error": 1},
            "broken_image": {"formatting_error": 1},
            "echo": {"extraction_error": 2, "validation_error": 1, "ok": 1},
            "fail": {"execution_error": 1},
            "nope": {"validation_error": 1}
        }}),
        "{done}"
    );
    assert_eq!(done["usage"]["writer"]["requests"], 2, "{done}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coerce_arguments_converts_what_is_lossless_and_only_when_asked() {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [
                {"name": "add", "arguments": {"a": "2", "b": " 3.5 "}},
                {"name": "add", "arguments": {"a": "two", "b": 1}}
            ]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![
            json!({"tool_alias": "strict", "providers": ["mock"]}),
            json!({"tool_alias": "lenient", "providers": ["mock"], "coerce_arguments": true}),
        ],
        |_| {},
    )
    .await;
    for (alias, first) in [
        ("strict", "Error: Invalid arguments for tool 'add': "),
        ("lenient", "5.5"),
    ] {
        let done = run_job(&app, &job("writer", alias, alias, 1), WAIT).await;
        assert_eq!(done["status"], "completed", "{done}");
        let records = app.all_records(done["id"].as_str().unwrap()).await;
        let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
        let answers = answers_by_tool(&trace);
        assert!(answers[0].1.starts_with(first), "{alias}: {answers:?}");
        // "two" is not a number either way.
        assert!(
            answers[1]
                .1
                .starts_with("Error: Invalid arguments for tool 'add': "),
            "{alias}: {answers:?}"
        );
        // The trace keeps the call as the model wrote it.
        let call_args: Value = serde_json::from_str(
            trace[1]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(call_args, json!({"a": "2", "b": " 3.5 "}));
    }
    assert_eq!(events.calls("add"), 1, "only the coerced call ran");
    app.stop().await;
}

async fn a_record_that_fails_mid_loop_keeps_its_trace_and_usage(backend: Backend) {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        backend,
        json!({"rules": [
            // `stuck`: calls tools forever, even when asked for a final answer.
            {"when": {"user_contains": "stuck", "has_tools": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]}},
            // `broken`: one tool turn, then the provider fails the request.
            {"when": {"user_contains": "broken", "last_is_tool_result": true},
             "reply": {"status": 400, "body": "context window exceeded"}},
            {"when": {"user_contains": "broken", "has_tools": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "once"}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"], "max_tool_call_turns": 1})],
        |_| {},
    )
    .await;

    let stuck = run_job(&app, &job("writer", "t", "stuck", 1), WAIT).await;
    assert_eq!(stuck["counts"]["failed"], 1, "{stuck}");
    assert_eq!(
        stuck["first_errors"][0]["error"]["code"], "tool_turns_exceeded",
        "{stuck}"
    );
    let id = stuck["first_errors"][0]["record_id"].as_str().unwrap();
    let trace = answer_trace(&app, id).await;
    let roles: Vec<&str> = trace.iter().map(|m| m["role"].as_str().unwrap()).collect();
    // Turn 1 ran, turn 2 was refused, and the model called again: that last answer is where
    // it failed, and the conversation up to and with it is kept.
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ],
        "{trace:?}"
    );
    assert_eq!(trace[5]["tool_calls"][0]["function"]["name"], "echo");
    let answers = answers_by_tool(&trace);
    assert_eq!(answers[0].1, "again");
    assert!(
        answers[1]
            .1
            .starts_with("Tool call refused: You have reached the maximum"),
        "{answers:?}"
    );
    assert_eq!(stuck["usage"]["writer"]["requests"], 3, "{stuck}");
    assert_eq!(
        stuck["tool_usage"]["answer"],
        json!({"tool_turns": 2, "tool_calls": {"echo": {"ok": 1, "refused": 1}}}),
        "{stuck}"
    );

    let broken = run_job(&app, &job("writer", "t", "broken", 1), WAIT).await;
    assert_eq!(broken["counts"]["failed"], 1, "{broken}");
    let error = &broken["first_errors"][0]["error"];
    assert_eq!(error["column"], "answer", "{broken}");
    let id = broken["first_errors"][0]["record_id"].as_str().unwrap();
    let trace = answer_trace(&app, id).await;
    let roles: Vec<&str> = trace.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{trace:?}");
    assert_eq!(answers_by_tool(&trace)[0].1, "once");
    assert_eq!(
        broken["usage"]["writer"]["requests"], 1,
        "the failed request is not an answer"
    );
    assert_eq!(broken["tool_usage"]["answer"]["tool_turns"], 1, "{broken}");
    app.stop().await;
}
crate::backends!(
    failed_record_trace,
    a_record_that_fails_mid_loop_keeps_its_trace_and_usage
);
