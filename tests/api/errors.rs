//! Bad input: each case gets its own status, stable code and a message naming the field, and
//! nothing is stored.

use serde_json::{Value, json};

use crate::db::Backend;
use crate::helpers::{TestApp, sampler_config, spawn_app_with, status_json};

fn cols(columns: Value) -> Value {
    json!({"config": {"columns": columns}, "num_records": 5})
}

async fn post_raw(app: &TestApp, path: &str, ct: &str, body: &str) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(path))
        .header("content-type", ct)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    status_json(resp).await
}

fn assert_error(got: &(u16, Value), status: u16, code: &str, needles: &[&str]) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    for n in needles {
        assert!(msg.contains(n), "message {msg:?} should mention {n:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_input_has_its_own_code() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.max_body_bytes = 64 * 1024;
        c.limits.max_num_records = 100_000;
    })
    .await;

    let got = post_raw(&app, "/v1/jobs", "application/json", "{\"config\": ").await;
    assert_error(&got, 400, "invalid_json", &["JSON"]);

    let got = post_raw(
        &app,
        "/v1/jobs?num_records=3",
        "application/yaml",
        "columns: [a\n  b: :",
    )
    .await;
    assert_error(&got, 400, "invalid_yaml", &["YAML"]);

    let got = post_raw(&app, "/v1/jobs", "text/plain", "hello").await;
    assert_error(&got, 415, "unsupported_media_type", &["text/plain"]);

    let got = app
        .create_job(&cols(json!([{"name": "x", "column_type": "telepathy"}])))
        .await;
    assert_error(&got, 422, "unknown_column_type", &["x", "telepathy"]);

    let got = app
        .create_job(&cols(json!([
            {"name": "a", "column_type": "expression", "expr": "{{ b }}"},
            {"name": "b", "column_type": "expression", "expr": "{{ a }}"}
        ])))
        .await;
    assert_error(&got, 422, "dependency_cycle", &["a", "b"]);

    let got = app
        .create_job(&cols(json!([
            {"name": "a", "column_type": "expression", "expr": "{{ ghost }}"}
        ])))
        .await;
    assert_error(&got, 422, "unknown_reference", &["a", "ghost"]);

    let got = app
        .create_job(&cols(json!([
            {"name": "a", "column_type": "llm-text", "model_alias": "nope", "prompt": "hi"}
        ])))
        .await;
    assert_error(&got, 422, "unknown_model_alias", &["a", "nope"]);

    for n in [
        json!(-5),
        json!(0),
        json!(100_001),
        json!(1e30),
        json!(18446744073709551615u64),
    ] {
        let got = app
            .create_job(&json!({"config": sampler_config(), "num_records": n}))
            .await;
        assert_error(&got, 422, "num_records_out_of_range", &["num_records"]);
    }
    let got = post_raw(
        &app,
        "/v1/jobs?num_records=-3",
        "application/yaml",
        "columns: []",
    )
    .await;
    assert_error(&got, 422, "num_records_out_of_range", &["num_records"]);
    let got = post_raw(&app, "/v1/jobs", "application/yaml", "columns: []").await;
    assert_error(&got, 422, "invalid_request", &["num_records"]);

    let got = app
        .create_job(&json!({"config": sampler_config(), "num_records": 5, "colour": "red"}))
        .await;
    assert_error(&got, 422, "invalid_request", &["colour"]);

    let big = format!(
        "{{\"config\": {{}}, \"num_records\": 1, \"metadata\": \"{}\"}}",
        "x".repeat(70_000)
    );
    let got = post_raw(&app, "/v1/jobs", "application/json", &big).await;
    assert_error(&got, 413, "payload_too_large", &["limit"]);

    let got = app
        .get("/v1/jobs/0190b2a0-0000-7000-8000-000000000000")
        .await;
    assert_error(&got, 404, "job_not_found", &["0190b2a0"]);
    let got = app
        .get("/v1/records/0190b2a0-0000-7000-8000-000000000000")
        .await;
    assert_error(&got, 404, "record_not_found", &[]);
    let got = app.get("/v1/jobs/not-a-uuid").await;
    assert_error(&got, 400, "invalid_id", &["not-a-uuid"]);
    let got = app.get("/v1/nowhere").await;
    assert_error(&got, 404, "not_found", &["/v1/nowhere"]);
    let resp = app.client.delete(app.url("/v1/jobs")).send().await.unwrap();
    assert_error(&status_json(resp).await, 405, "method_not_allowed", &[]);

    // Nothing above stored a job.
    let (_, list) = app.get("/v1/jobs").await;
    assert_eq!(
        list["jobs"],
        json!([]),
        "a rejected request stored something"
    );

    // Cursor and query errors need a real job.
    let (_, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 3}))
        .await;
    let id = job["id"].as_str().unwrap();
    let got = app
        .get(&format!("/v1/jobs/{id}/records?cursor=bm9wZQ"))
        .await;
    assert_error(&got, 400, "invalid_cursor", &["bm9wZQ"]);
    let got = app.get("/v1/jobs?cursor=%%%").await;
    assert_error(&got, 400, "invalid_cursor", &[]);
    let got = app.get(&format!("/v1/jobs/{id}/records?format=xml")).await;
    assert_error(&got, 422, "invalid_request", &["format"]);
    let got = app.get(&format!("/v1/jobs/{id}/records?limit=0")).await;
    assert_error(&got, 422, "invalid_request", &["limit"]);
    app.stop().await;
}
