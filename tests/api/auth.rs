//! Authentication, ownership and limits: bearer keys on `/v1`, jobs visible only to the key
//! that made them, per-key alias allow lists and jobs-in-flight caps, prompt and tool-result
//! size caps.

mod bounds;
mod effective;
mod models;

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, sampler_config, spawn_app_with, status_json};
use crate::mcp_support::{Events, answer_trace, app_with_tools, mock_mcp_stdio, run_job, tool_job};

const KEY_A: &str = "key-a-0123456789abcdef";
const KEY_B: &str = "key-b-0123456789abcdef";
const KEY_C: &str = "key-c-0123456789abcdef";

fn with_keys(c: &mut Config) {
    c.auth = serde_json::from_value(json!({"api_keys": [
        {"name": "alice", "key": KEY_A},
        {"name": "bob", "key": KEY_B},
        {"name": "carol", "key": KEY_C, "allow_models": ["cheap"], "allow_tools": []},
    ]}))
    .unwrap();
    c.model_providers = vec![
        serde_json::from_value(json!({"name": "p", "endpoint": "http://127.0.0.1:9/v1"})).unwrap(),
    ];
    c.model_configs = vec![
        serde_json::from_value(json!({"alias": "writer", "model": "m", "provider": "p"})).unwrap(),
        serde_json::from_value(json!({"alias": "cheap", "model": "m", "provider": "p"})).unwrap(),
    ];
}

async fn call(
    app: &TestApp,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut req = app.client.request(method.parse().unwrap(), app.url(path));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    status_json(req.send().await.unwrap()).await
}

async fn keys_guard_v1_and_jobs_belong_to_their_key(backend: Backend) {
    let app = spawn_app_with(backend, with_keys).await;
    let job = json!({"config": sampler_config(), "num_records": 5});

    // No key, a wrong key: 401 with the challenge header; nothing stored.
    let resp = app
        .client
        .post(app.url("/v1/jobs"))
        .json(&job)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let (_, body) = status_json(resp).await;
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, body) = call(
        &app,
        "POST",
        "/v1/jobs",
        Some("not-a-key-at-all-xxxx"),
        Some(&job),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let (status, _) = call(&app, "GET", "/v1/jobs", None, None).await;
    assert_eq!(status, 401);

    // Health, readiness and metrics stay open.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(app.get(path).await.0, 200, "{path}");
    }
    assert_eq!(app.get_text("/metrics").await.0, 200);

    // Alice's job is hers.
    let (status, created) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&job)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let done = loop {
        let (s, j) = call(&app, "GET", &format!("/v1/jobs/{id}"), Some(KEY_A), None).await;
        assert_eq!(s, 200, "{j}");
        if j["status"] == "completed" {
            break j;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done["counts"]["completed"], 5);
    let (_, page) = call(
        &app,
        "GET",
        &format!("/v1/jobs/{id}/records"),
        Some(KEY_A),
        None,
    )
    .await;
    let record = page["records"][0]["id"].as_str().unwrap().to_owned();

    // Bob sees nothing of it: every path answers as if it did not exist.
    for (method, path, code) in [
        ("GET", format!("/v1/jobs/{id}"), "job_not_found"),
        ("POST", format!("/v1/jobs/{id}/cancel"), "job_not_found"),
        ("GET", format!("/v1/jobs/{id}/records"), "job_not_found"),
        (
            "GET",
            format!("/v1/jobs/{id}/records?format=jsonl"),
            "job_not_found",
        ),
        ("GET", format!("/v1/jobs/{id}/events"), "job_not_found"),
        ("GET", format!("/v1/records/{record}"), "record_not_found"),
        (
            "GET",
            format!("/v1/records/{record}/trace"),
            "record_not_found",
        ),
    ] {
        let (status, body) = call(&app, method, &path, Some(KEY_B), None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some(code)),
            "{method} {path}: {body}"
        );
    }
    let (_, list) = call(&app, "GET", "/v1/jobs", Some(KEY_B), None).await;
    assert_eq!(list["jobs"], json!([]));
    let (_, list) = call(&app, "GET", "/v1/jobs", Some(KEY_A), None).await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
    let (status, _) = call(
        &app,
        "GET",
        &format!("/v1/records/{record}/trace"),
        Some(KEY_A),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // Carol may use only the `cheap` model and no tools.
    let llm_job = |alias: &str| {
        json!({"num_records": 1, "config": {"columns": [
            {"name": "a", "column_type": "llm-text", "model_alias": alias, "prompt": "hi"}]}})
    };
    let (status, body) = call(
        &app,
        "POST",
        "/v1/jobs",
        Some(KEY_C),
        Some(&llm_job("writer")),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("alias_not_allowed")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'writer'"),
        "{body}"
    );
    let (status, body) = call(
        &app,
        "POST",
        "/v1/preview",
        Some(KEY_C),
        Some(&llm_job("writer")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = call(
        &app,
        "POST",
        "/v1/jobs",
        Some(KEY_C),
        Some(&llm_job("cheap")),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    app.stop().await;
}
backends!(
    keys_and_ownership,
    keys_guard_v1_and_jobs_belong_to_their_key
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_in_flight_are_capped_per_key() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        with_keys(c);
        c.limits.max_jobs_in_flight_per_key = Some(1);
        c.workers.count = 1;
    })
    .await;
    // Keep the first job in flight: its provider refuses connections, so its records spend
    // seconds in retries on the single worker slot.
    let slow = json!({"num_records": 3, "config": {"columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "hi"}]}});
    let (status, first) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&slow)).await;
    assert_eq!(status, 202, "{first}");
    let (status, body) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&slow)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("too_many_jobs")),
        "{body}"
    );
    // The cap is per key.
    let (status, body) = call(&app, "POST", "/v1/jobs", Some(KEY_B), Some(&slow)).await;
    assert_eq!(status, 202, "{body}");
    // Cancelling frees the slot.
    let id = first["id"].as_str().unwrap();
    let (status, _) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{id}/cancel"),
        Some(KEY_A),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&slow)).await;
        if status == 202 {
            break;
        }
        assert_eq!(status, 429);
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled job never freed its slot"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}

/// Issue 49 Q7: the records a key's live jobs hold are bounded too, so one key cannot queue
/// millions of records behind everyone's work. Per key, on both backends.
async fn records_in_flight_are_capped_per_key(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        with_keys(c);
        c.limits.max_records_in_flight_per_key = Some(10);
        c.workers.count = 1;
    })
    .await;
    let job = |n: u32| {
        json!({"num_records": n, "config": {"columns": [
            {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "hi"}]}})
    };
    let (status, first) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&job(6))).await;
    assert_eq!(status, 202, "{first}");
    // 6 + 5 > 10: refused, naming the key; 6 + 4 fits.
    let (status, body) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&job(5))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("too_many_jobs")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.max_records_in_flight_per_key"),
        "{message}"
    );
    let (status, body) = call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&job(4))).await;
    assert_eq!(status, 202, "{body}");
    // Another key has its own.
    let (status, body) = call(&app, "POST", "/v1/jobs", Some(KEY_B), Some(&job(10))).await;
    assert_eq!(status, 202, "{body}");
    app.stop().await;
}
backends!(records_cap, records_in_flight_are_capped_per_key);

/// Twelve submits at once against a cap of 3: the count and the insert share one transaction
/// (serialized per owner), so exactly 3 get in, whatever the interleaving.
async fn concurrent_submits_cannot_slip_under_the_cap(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        with_keys(c);
        c.limits.max_jobs_in_flight_per_key = Some(3);
    })
    .await;
    // LLM jobs whose provider refuses connections stay live for seconds of retries.
    let job = json!({"num_records": 50, "config": {"columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "hi"}]}});
    let submits = (0..12).map(|_| call(&app, "POST", "/v1/jobs", Some(KEY_A), Some(&job)));
    let results = futures::future::join_all(submits).await;
    let accepted = results.iter().filter(|(s, _)| *s == 202).count();
    let refused = results
        .iter()
        .filter(|(s, b)| *s == 429 && b["error"]["code"] == "too_many_jobs")
        .count();
    assert_eq!((accepted, refused), (3, 9), "{results:?}");
    let (_, list) = call(&app, "GET", "/v1/jobs", Some(KEY_A), None).await;
    assert_eq!(
        list["jobs"].as_array().unwrap().len(),
        3,
        "refused jobs left nothing behind"
    );
    app.stop().await;
}
backends!(submit_cap, concurrent_submits_cannot_slip_under_the_cap);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_prompts_fail_the_record_and_long_tool_results_are_cut() {
    let events = Events::new();
    let long = "x".repeat(5000);
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": long}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |c| {
            c.limits.max_tool_result_chars = 1000;
            c.limits.max_prompt_chars = 2000;
        },
    )
    .await;
    let done = run_job(&app, &tool_job("t", 1), Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    let tool = &trace[2]["content"];
    assert_eq!(tool[0]["text"].as_str().unwrap().len(), 1000, "{tool}");
    assert_eq!(
        tool[1]["text"],
        "[tool result truncated: 4000 of 5000 characters omitted (limits.max_tool_result_chars = 1000)]"
    );
    // The model was sent the cut result, not the whole one (its text blocks as one string).
    let last = mock.requests().pop().unwrap().body;
    let sent = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    let cut = format!(
        "{}\n{}",
        tool[0]["text"].as_str().unwrap(),
        tool[1]["text"].as_str().unwrap()
    );
    assert_eq!(sent["content"], cut);

    let big = json!({"num_records": 2, "config": {"columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": "writer",
         "prompt": format!("{{{{ '{}' }}}}", "y".repeat(3000))}]},
        "run_config": {"disable_early_shutdown": true}});
    let done = run_job(&app, &big, Duration::from_secs(60)).await;
    assert_eq!(done["counts"]["failed"], 2, "{done}");
    assert_eq!(
        done["first_errors"][0]["error"]["code"], "prompt_too_large",
        "{done}"
    );
    app.stop().await;
}
