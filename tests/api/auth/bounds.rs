//! Input bounds and shared limits: a job's own `max_parallel_requests` caps that job only;
//! numbers that become durations are range-checked at submit, and a provider's `Retry-After`
//! is capped, so no input panics; job metadata is bounded.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;
use synthgate_testkit::mock_llm::MockLlm;

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm, spawn_app_with};
use crate::mcp_support::{app_with_tools, mock_mcp_stdio};

/// The mock LLM with `script`, and server model `writer` (`mock-writer`, at most 4 requests
/// at once), then `tweak`.
async fn app_with_mock(
    backend: Backend,
    script: Value,
    tweak: impl FnOnce(&mut Config),
) -> (TestApp, MockLlm) {
    app_with_mock_llm(backend, script, |c| {
        c.model_configs[0]
            .inference_parameters
            .max_parallel_requests = 4;
        tweak(c);
    })
    .await
}

fn llm_job(alias: &str, n: u32, model_configs: Value) -> Value {
    json!({"num_records": n, "config": {"model_configs": model_configs, "columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": alias, "prompt": "Say hi."}]}})
}

async fn run(app: &TestApp, body: &Value) -> Value {
    let (status, job) = app.create_job(body).await;
    assert_eq!(status, 202, "{job}");
    app.wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(60))
        .await
}

/// A job that brings an alias of the server's provider and model with
/// `max_parallel_requests: 1` is held to 1, and leaves the server's limit of 4 for the jobs
/// that come after it.
async fn a_jobs_own_limit_caps_that_job_only(backend: Backend) {
    let (app, mock) = app_with_mock(backend, json!({"faults": {"latency_ms": 150}}), |_| {}).await;
    let solo = llm_job(
        "solo",
        4,
        json!([{"alias": "solo", "model": "mock-writer", "provider": "mock",
                "inference_parameters": {"max_parallel_requests": 1}}]),
    );
    let done = run(&app, &solo).await;
    assert_eq!(done["status"], "completed", "{done}");
    let stats = mock.stats();
    assert_eq!(stats.models["mock-writer"].requests, 4);
    assert_eq!(
        stats.models["mock-writer"].max_in_flight, 1,
        "the job's own cap holds"
    );

    mock.reset();
    let done = run(&app, &llm_job("writer", 16, json!([]))).await;
    assert_eq!(done["status"], "completed", "{done}");
    let stats = mock.stats();
    assert_eq!(stats.models["mock-writer"].requests, 16);
    assert_eq!(
        stats.models["mock-writer"].max_in_flight, 4,
        "the server's limit is the server's, not the last job's"
    );
    app.stop().await;
}
backends!(own_limits, a_jobs_own_limit_caps_that_job_only);

/// `Retry-After: 1e20` (past any `Duration`) is capped at the retry settings' longest
/// backoff: the record retries and completes, nothing panics, no lease is left behind.
async fn a_huge_retry_after_is_capped(backend: Backend) {
    let (app, mock) = app_with_mock(
        backend,
        json!({"rules": [
            {"when": {}, "reply": {"status": 429, "retry_after": "1e20"}, "times": 2},
            {"when": {}, "reply": {"status": 503, "retry_after": "18446744073709551616"}, "times": 1}
        ]}),
        |c| c.llm.retry_max_delay_ms = 100,
    )
    .await;
    let done = run(&app, &llm_job("writer", 2, json!([]))).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 2);
    assert_eq!(mock.stats().total_requests, 5);
    app.stop().await;
}
backends!(retry_after_capped, a_huge_retry_after_is_capped);

/// Every number of a job that becomes a duration is checked at submit (and preview): `422`
/// naming the field, never a `500` from a panicking conversion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_in_job_input_are_range_checked() {
    let events = crate::mcp_support::Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": []}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![],
        |_| {},
    )
    .await;
    let column = |tool: Option<&str>| {
        let mut c = json!({"name": "a", "column_type": "llm-text", "model_alias": "writer",
            "prompt": "hi"});
        if let Some(t) = tool {
            c["tool_alias"] = json!(t);
        }
        c
    };
    let cases = [
        (
            json!({"num_records": 1, "config": {
                "tool_configs": [{"tool_alias": "t", "providers": ["mock"], "timeout_sec": 1e300}],
                "columns": [column(Some("t"))]}}),
            "invalid_tool_config",
            "tool_configs[0].timeout_sec",
        ),
        (
            json!({"num_records": 1, "config": {
                "tool_configs": [{"tool_alias": "t", "providers": ["mock"], "timeout_sec": 90000}],
                "columns": [column(Some("t"))]}}),
            "invalid_tool_config",
            "tool_configs[0].timeout_sec",
        ),
        (
            json!({"num_records": 1, "config": {
                "model_configs": [{"alias": "m", "model": "x", "provider": "mock",
                    "inference_parameters": {"timeout": u64::MAX}}],
                "columns": [column(None)]}}),
            "invalid_model_config",
            "model_configs[0].inference_parameters.timeout",
        ),
        (
            json!({"num_records": 1, "config": {"columns": [column(None)]},
                "run_config": {"progress_interval": 1e300}}),
            "invalid_run_config",
            "run_config.progress_interval",
        ),
    ];
    for (body, code, field) in cases {
        for path in ["/v1/jobs", "/v1/preview"] {
            let resp = app
                .client
                .post(app.url(path))
                .json(&body)
                .send()
                .await
                .unwrap();
            let (status, b) = crate::helpers::status_json(resp).await;
            assert_eq!(
                (
                    status,
                    b["error"]["code"].as_str(),
                    b["error"]["details"][0]["field"].as_str()
                ),
                (422, Some(code), Some(field)),
                "{path}: {b}"
            );
        }
    }
    app.stop().await;
}

/// Metadata over `limits.max_metadata_bytes` is refused with its own code; metadata within it
/// is stored and echoed, in list pages too.
async fn metadata_is_bounded(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.limits.max_metadata_bytes = 1024).await;
    let config = crate::helpers::sampler_config();
    let big = json!({"config": config, "num_records": 1,
        "metadata": {"blob": "x".repeat(1100)}});
    let (status, body) = app.create_job(&big).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("metadata_too_large")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limits.max_metadata_bytes"),
        "{body}"
    );
    // Counted as compact JSON: escapes count, nesting counts.
    let nested = json!({"config": config, "num_records": 1,
        "metadata": [[[["\u{0}".repeat(200)]]]]});
    assert_eq!(app.create_job(&nested).await.0, 422);
    let small = json!({"config": config, "num_records": 1, "metadata": {"purpose": "ok"}});
    let done = run(&app, &small).await;
    assert_eq!(done["metadata"], json!({"purpose": "ok"}));
    let (_, list) = app.get("/v1/jobs").await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["jobs"][0]["metadata"], json!({"purpose": "ok"}));
    app.stop().await;
}
backends!(metadata_bound, metadata_is_bounded);
