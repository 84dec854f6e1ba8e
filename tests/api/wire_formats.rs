//! Snapshots of the wire formats other programs parse: the error envelope, a job's and a
//! record's JSON, a job's analysis, and NVIDIA's preview stream (JSON Lines of
//! `PreviewMessage`s). A change to any of them shows as a reviewed diff of
//! `tests/api/snapshots/` (`cargo insta review`, or `INSTA_UPDATE=always` and `git diff`),
//! instead of slipping past hand-written checks of a few fields. Under `CI=true` a mismatch
//! fails and writes nothing.
//!
//! What changes from run to run (ids, times, durations) is replaced by a placeholder before
//! the snapshot is taken; the records are those of a fixed seed, so their values are not.

use std::time::Duration;

use serde_json::{Value, json};

use crate::db::Backend;
use crate::helpers::{TestApp, sampler_config, spawn_app};

/// Keys whose values are times or durations of this run.
const TIMES: &[&str] = &[
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "timestamp",
    "elapsed_ms",
    "duration_ms",
    "duration_sec",
    "generation_time_sec",
    "records_per_second",
    "eta_seconds",
];

/// `value` with this run's ids and times replaced by placeholders: a UUID anywhere in a string
/// becomes `[uuid]`, a key of [`TIMES`] holds `[time]`.
fn normalized(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if TIMES.contains(&k.as_str()) && !v.is_null() {
                        json!("[time]")
                    } else {
                        normalized(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::String(s) => json!(without_uuids(s)),
        other => other.clone(),
    }
}

/// `s` with every UUID (8-4-4-4-12 hex digits) replaced by `[uuid]`.
fn without_uuids(s: &str) -> String {
    let is_hex = |c: u8| c.is_ascii_hexdigit();
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let uuid = rest.len() >= 36
            && rest[..36].iter().enumerate().all(|(j, &c)| match j {
                8 | 13 | 18 | 23 => c == b'-',
                _ => is_hex(c),
            });
        if uuid {
            out.push_str("[uuid]");
            i += 36;
        } else {
            let c = s[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// A finished sampler job of three records with a fixed seed.
async fn finished_job(app: &TestApp) -> String {
    let (status, job) = app
        .create_job(
            &json!({"config": sampler_config(), "num_records": 3, "seed": 42,
            "name": "snapshot", "metadata": {"team": "wire"}}),
        )
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    app.wait_for_job(&id, Duration::from_secs(30)).await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_envelope() {
    let app = spawn_app(Backend::Sqlite).await;
    let (status, err) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 0}))
        .await;
    assert_eq!(status, 422);
    insta::assert_json_snapshot!("error_envelope", normalized(&err));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_its_records_and_its_analysis() {
    let app = spawn_app(Backend::Sqlite).await;
    let id = finished_job(&app).await;
    let (status, job) = app.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(status, 200, "{job}");
    insta::assert_json_snapshot!("job", normalized(&job));

    let (status, page) = app.get(&format!("/v1/jobs/{id}/records")).await;
    assert_eq!(status, 200, "{page}");
    insta::assert_json_snapshot!("records_page", normalized(&page));
    let record = page["records"][0]["id"].as_str().unwrap();
    let (status, record) = app.get(&format!("/v1/records/{record}")).await;
    assert_eq!(status, 200, "{record}");
    insta::assert_json_snapshot!("record", normalized(&record));

    let (status, analysis) = app.get(&format!("/v1/jobs/{id}/analysis")).await;
    assert_eq!(status, 200, "{analysis}");
    insta::assert_json_snapshot!("analysis", normalized(&analysis));

    let (status, dd) = app.get(&format!("/v1/data-designer/jobs/{id}")).await;
    assert_eq!(status, 200, "{dd}");
    insta::assert_json_snapshot!("data_designer_job", normalized(&dd));
    app.stop().await;
}

/// NVIDIA's preview stream, heartbeats and progress lines left out (how many come depends on
/// the machine's speed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nvidia_preview_stream() {
    let app = spawn_app(Backend::Sqlite).await;
    // Values that do not depend on the preview's seed.
    let config = json!({"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["math"]}},
        {"name": "title", "column_type": "expression", "expr": "{{ topic | upper }} basics"}
    ], "model_configs": null, "seed_config": null, "constraints": null, "profilers": null,
       "processors": null});
    let resp = app
        .client
        .post(app.url("/v1/data-designer/preview"))
        .json(&json!({"config": config, "num_records": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    let frames: Vec<Value> = body
        .split_terminator('\n')
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|m| m["message_type"] != "heartbeat")
        .map(|m| normalized(&m))
        .collect();
    // Progress lines come as records finish, which may be together: checked here, left out
    // of the snapshot.
    let progress = |m: &Value| {
        m["message"]
            .as_str()
            .is_some_and(|t| t.ends_with(" of 2 records done"))
    };
    let done: Vec<&str> = frames
        .iter()
        .filter(|m| progress(m))
        .map(|m| m["message"].as_str().unwrap())
        .collect();
    assert_eq!(done.last(), Some(&"✅ 2 of 2 records done"), "{body}");
    let frames: Vec<Value> = frames.into_iter().filter(|m| !progress(m)).collect();
    insta::assert_json_snapshot!("nvidia_preview_stream", frames);
    app.stop().await;
}
