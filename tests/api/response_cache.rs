//! The response cache (issue 51 item 3): a job re-run with the same seed against an unchanged
//! config and a warm cache makes no model request and returns the same records; another API
//! key's identical job makes its own requests; `refresh` asks again and replaces the answers;
//! `off` never reads or writes; a hit is counted and marked on its trace. Every record's prompt
//! is its own (a uuid in it), so the counts are exact.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;
use synthgate_testkit::mock_llm::Script;

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm, status_json};

backends!(a_warm_cache_answers_a_rerun_without_a_request, warm_cache);

const ALICE: &str = "alice-0123456789abcdef";
const BOB: &str = "bob-0123456789abcdef01";

fn with_keys(c: &mut Config) {
    c.auth = serde_json::from_value(json!({"api_keys": [
        {"name": "alice", "key": ALICE},
        {"name": "bob", "key": BOB},
    ]}))
    .unwrap();
}

fn answering(text: &str) -> Script {
    serde_json::from_value(json!({"rules": [{"reply": {"text": text}}]})).unwrap()
}

fn job(cache: Value) -> Value {
    json!({
        "num_records": 6,
        "seed": 42,
        "cache": cache,
        "config": {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["rivers", "bridges", "comets"]}},
            {"name": "id", "column_type": "sampler", "sampler_type": "uuid", "params": {}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "One line about {{ topic }} ({{ id }}).", "with_trace": "all_messages"}
        ]}
    })
}

/// Submits `body` as `key` and waits for the job; returns it and its records' values.
async fn run(app: &TestApp, key: &str, body: &Value) -> (Value, Vec<Value>) {
    let resp = app
        .client
        .post(app.url("/v1/jobs"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    let (status, created) = status_json(resp).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let job = loop {
        let resp = app
            .client
            .get(app.url(&format!("/v1/jobs/{id}")))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let (_, job) = status_json(resp).await;
        if job["status"] == "completed" || job["status"] == "failed" {
            break job;
        }
        assert!(std::time::Instant::now() < deadline, "{job}");
        tokio::time::sleep(Duration::from_millis(30)).await;
    };
    assert_eq!(job["status"], "completed", "{job}");
    let resp = app
        .client
        .get(app.url(&format!(
            "/v1/jobs/{id}/records?limit=100&include_traces=true"
        )))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let (_, page) = status_json(resp).await;
    let values = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["values"].clone())
        .collect();
    (job, values)
}

fn answers(values: &[Value]) -> Vec<&str> {
    values
        .iter()
        .map(|v| v["answer"].as_str().unwrap())
        .collect()
}

fn last_message(v: &Value) -> &Value {
    v["answer__trace"].as_array().unwrap().last().unwrap()
}

async fn warm_cache(backend: Backend) {
    let (app, mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "first answer"}}]}),
        with_keys,
    )
    .await;
    // Off (the default): nothing is written.
    let (_, off) = run(&app, ALICE, &job(Value::Null)).await;
    assert_eq!(mock.stats().total_requests, 6);
    let (cold, first) = run(&app, ALICE, &job(json!("read_write"))).await;
    assert_eq!(mock.stats().total_requests, 12, "off wrote nothing to read");
    assert_eq!(answers(&first), ["first answer"; 6]);
    assert_eq!(cold["usage"]["writer"]["requests"], 6, "{cold}");
    assert_eq!(cold["usage"]["writer"]["cached_requests"], 0, "{cold}");
    assert!(
        last_message(&first[0]).get("cached").is_none(),
        "{}",
        first[0]
    );
    assert_eq!(off.len(), 6);

    // The model would now answer otherwise: a warm cache answers instead, every call.
    mock.set_script(answering("second answer"));
    let (warm, again) = run(&app, ALICE, &job(json!("read_write"))).await;
    assert_eq!(
        mock.stats().total_requests,
        12,
        "a warm cache makes no request"
    );
    let strip = |vs: &[Value]| -> Vec<Value> {
        vs.iter()
            .map(|v| {
                let mut v = v.clone();
                v.as_object_mut().unwrap().remove("answer__trace");
                v
            })
            .collect()
    };
    assert_eq!(strip(&again), strip(&first), "the same records");
    assert_eq!(warm["usage"]["writer"]["requests"], 0, "{warm}");
    assert_eq!(warm["usage"]["writer"]["cached_requests"], 6, "{warm}");
    assert_eq!(
        warm["usage"]["writer"]["prompt_tokens"], 0,
        "a hit costs nothing: {warm}"
    );
    assert_eq!(last_message(&again[0])["cached"], true, "{}", again[0]);

    // Another key's identical job reads nothing of alice's.
    let (_, bobs) = run(&app, BOB, &job(json!("read_write"))).await;
    assert_eq!(mock.stats().total_requests, 18);
    assert_eq!(answers(&bobs), ["second answer"; 6]);

    // Refresh asks the model and replaces alice's answers; read_write then reads the new ones.
    let (_, refreshed) = run(&app, ALICE, &job(json!("refresh"))).await;
    assert_eq!(mock.stats().total_requests, 24);
    assert_eq!(answers(&refreshed), ["second answer"; 6]);
    mock.set_script(answering("third answer"));
    let (_, after) = run(&app, ALICE, &job(json!("read_write"))).await;
    assert_eq!(mock.stats().total_requests, 24);
    assert_eq!(answers(&after), ["second answer"; 6]);

    // Another seed samples other prompts: every call goes to the model.
    let mut other = job(json!("read_write"));
    other["seed"] = json!(7);
    run(&app, ALICE, &other).await;
    assert_eq!(mock.stats().total_requests, 30);

    // A bad mode is refused, naming the field.
    let resp = app
        .client
        .post(app.url("/v1/jobs"))
        .bearer_auth(ALICE)
        .json(&job(json!("sometimes")))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("cache"),
        "{body}"
    );
}
