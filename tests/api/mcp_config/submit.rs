//! Tool-config errors are found when a job (or preview) is submitted, against the live
//! providers, and answered with a stable code and a message naming the problem; nothing is
//! stored and no tool is called.

use serde_json::{Value, json};

use super::{JOB_TIMEOUT, assert_no_jobs, job, post};
use crate::db::Backend;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio, run_job, tool_job};

const SECRET: &str = "s3cr3t-value-xyz";

/// One bad submission and what the gateway must answer.
struct Case {
    what: &'static str,
    body: Value,
    status: u16,
    code: &'static str,
    /// Substrings of `error.message`.
    names: &'static [&'static str],
    /// Substrings that must not be in the whole body.
    hides: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "the same tools on two providers of one tool config",
            body: tool_job("dup", 1),
            status: 422,
            code: "duplicate_tool_name",
            names: &[
                "'dup'",
                "'echo' (in: mock1, mock2)",
                "'add' (in: mock1, mock2)",
            ],
            hides: &[],
        },
        Case {
            what: "an allowed tool no provider has",
            body: tool_job("allow", 1),
            status: 422,
            code: "unknown_tool",
            names: &["'allow'", "'missing'", "mock1"],
            hides: &["'echo'"],
        },
        Case {
            what: "a job tool config naming a provider the server lacks",
            body: job(
                1,
                &[("answer", "writer", "mine", "Go.")],
                json!([]),
                json!([{"tool_alias": "mine", "providers": ["mock1", "nowhere"]}]),
            ),
            status: 422,
            code: "invalid_tool_config",
            names: &["'mine'", "'nowhere'"],
            hides: &[],
        },
        Case {
            what: "a job model config barred from every provider",
            body: job(
                1,
                &[("answer", "restricted", "ok", "Go.")],
                json!([{"alias": "restricted", "model": "mock-writer", "provider": "mock",
                    "mcp_servers": []}]),
                json!([]),
            ),
            status: 422,
            code: "invalid_tool_config",
            names: &["'restricted'", "'ok'"],
            hides: &[],
        },
        Case {
            what: "a provider that cannot start",
            body: tool_job("broken", 1),
            status: 503,
            code: "mcp_unavailable",
            names: &["'broken'", "/nonexistent"],
            hides: &[SECRET],
        },
        Case {
            what: "an unknown tool alias",
            body: tool_job("nope", 1),
            status: 422,
            code: "unknown_tool_alias",
            names: &["'nope'"],
            hides: &[],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_config_errors_are_refused_at_submit_and_store_nothing() {
    let (one, two) = (Events::new(), Events::new());
    let (app, llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
        ]}),
        vec![
            mock_mcp_stdio("mock1", &one.path),
            mock_mcp_stdio("mock2", &two.path),
            json!({"name": "broken", "command": "/nonexistent", "args": ["--token", "x"],
                "env": {"SECRET_TOKEN": SECRET}}),
        ],
        vec![
            json!({"tool_alias": "dup", "providers": ["mock1", "mock2"]}),
            json!({"tool_alias": "allow", "providers": ["mock1"], "allow_tools": ["echo", "missing"]}),
            json!({"tool_alias": "ok", "providers": ["mock1"]}),
            json!({"tool_alias": "broken", "providers": ["broken"]}),
        ],
        |_| {},
    )
    .await;

    for path in ["/v1/jobs", "/v1/preview"] {
        for case in cases() {
            let (status, body) = post(&app, path, &case.body).await;
            let what = format!("{path}: {}", case.what);
            assert_eq!(status, case.status, "{what}: {body}");
            assert_eq!(body["error"]["code"], case.code, "{what}: {body}");
            let message = body["error"]["message"].as_str().unwrap();
            for name in case.names {
                assert!(message.contains(name), "{what}: {name} not in {message}");
            }
            let text = body.to_string();
            for hidden in case.hides {
                assert!(!text.contains(hidden), "{what}: {hidden} in {text}");
            }
            assert_no_jobs(&app, &what).await;
        }
    }
    // Checking listed tools; it called none and asked the model nothing.
    assert!(one.count("list") >= 1, "{:?}", one.lines());
    assert_eq!(one.count("call") + two.count("call"), 0);
    assert!(llm.requests().is_empty());

    // The same server takes a good job.
    let done = run_job(&app, &tool_job("ok", 1), JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(one.calls("echo"), 1);
    app.stop().await;
}
