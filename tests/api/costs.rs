//! Cost (issue 51 item 2): with prices on the server's model config, the job, each model alias
//! and each column show what their calls cost, equal to tokens × prices; `/metrics` carries it;
//! a job's own model config cannot set prices; a budget stops a job within the records in
//! flight and keeps what was generated; without prices nothing changes.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;

use crate::backends;
use crate::db::Backend;
use crate::helpers::app_with_mock_llm;

backends!(cost_is_tokens_times_prices_per_job_alias_and_column, costs);
backends!(a_budget_stops_a_job_within_the_records_in_flight, budget);

const IN: f64 = 2.0; // per million input tokens
const OUT: f64 = 8.0; // per million output tokens

fn priced(c: &mut Config) {
    c.model_configs = vec![
        serde_json::from_value(
            json!({"alias": "writer", "model": "mock-writer", "provider": "mock",
            "prices": {"input_per_million": IN, "output_per_million": OUT}}),
        )
        .unwrap(),
        serde_json::from_value(json!({"alias": "free", "model": "mock-free", "provider": "mock"}))
            .unwrap(),
    ];
}

fn config() -> Value {
    json!({"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["rivers", "bridges"]}},
        {"name": "a", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "One line about {{ topic }}."},
        {"name": "b", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Another line about {{ topic }}: {{ a }}"},
        {"name": "c", "column_type": "llm-text", "model_alias": "free",
         "prompt": "Free words on {{ topic }}."}
    ]})
}

fn cost(prompt: u64, completion: u64) -> f64 {
    (prompt as f64 * IN + completion as f64 * OUT) / 1e6
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

async fn costs(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "a calm answer of some words"}}]}),
        priced,
    )
    .await;
    let (status, job) = app
        .create_job(&json!({"config": config(), "num_records": 5, "seed": 1}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let job = app.wait_for_job(id, Duration::from_secs(30)).await;
    assert_eq!(job["status"], "completed", "{job}");
    let w = &job["usage"]["writer"];
    let expected = cost(
        w["prompt_tokens"].as_u64().unwrap(),
        w["completion_tokens"].as_u64().unwrap(),
    );
    assert!(expected > 0.0);
    assert!(
        close(w["cost"].as_f64().unwrap(), expected),
        "{w} vs {expected}"
    );
    // The unpriced alias has no cost at all, not a zero.
    assert!(job["usage"]["free"].get("cost").is_none(), "{job}");
    assert!(close(job["cost"].as_f64().unwrap(), expected), "{job}");
    // Per column: a and b on the priced model, c on the free one.
    let cols = &job["column_usage"];
    let col_cost = |c: &str| {
        let u = &cols[c];
        cost(
            u["prompt_tokens"].as_u64().unwrap(),
            u["completion_tokens"].as_u64().unwrap(),
        )
    };
    assert!(
        close(cols["a"]["cost"].as_f64().unwrap(), col_cost("a")),
        "{cols}"
    );
    assert!(
        close(cols["b"]["cost"].as_f64().unwrap(), col_cost("b")),
        "{cols}"
    );
    assert!(cols["c"].get("cost").is_none(), "{cols}");
    assert!(close(col_cost("a") + col_cost("b"), expected), "{cols}");
    assert_eq!(cols["a"]["requests"], 5);
    // /metrics carries it (in billionths of the unit).
    let (_, metrics) = app.get_text("/metrics").await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("synthgate_llm_cost_nanos_total{") && l.contains("writer"))
        .unwrap_or_else(|| panic!("no cost metric:\n{metrics}"));
    let nanos: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((nanos - expected * 1e9).abs() < 5.0, "{line} vs {expected}");

    // A job's model config may not set prices; one of the same model gets the server's.
    let mut own = config();
    own["model_configs"] = json!([{"alias": "mine", "model": "mock-writer", "provider": "mock",
        "prices": {"input_per_million": 0, "output_per_million": 0}}]);
    let (status, body) = app
        .create_job(&json!({"config": own, "num_records": 1}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"][0]["field"], "model_configs[0].prices",
        "{body}"
    );
    let mut own = json!({"columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": "mine", "prompt": "Hi."}]});
    own["model_configs"] = json!([{"alias": "mine", "model": "mock-writer", "provider": "mock"}]);
    let (_, job) = app
        .create_job(&json!({"config": own, "num_records": 2}))
        .await;
    let job = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert!(
        job["usage"]["mine"]["cost"].as_f64().unwrap() > 0.0,
        "{job}"
    );
}

async fn budget(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "a calm answer of some words", "delay_ms": 20}}]}),
        |c| {
            priced(c);
            c.workers.count = 4;
            c.workers.claim_batch_size = 4;
        },
    )
    .await;
    // What one record costs, from a small job.
    let (_, one) = app
        .create_job(&json!({"config": config(), "num_records": 1, "seed": 1}))
        .await;
    let one = app
        .wait_for_job(one["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    let per_record = one["cost"].as_f64().unwrap();
    // A budget of about ten records' worth, for a job of 200.
    let max_cost = per_record * 10.5;
    let (status, job) = app
        .create_job(&json!({"config": config(), "num_records": 200, "seed": 1,
                            "max_cost": max_cost}))
        .await;
    assert_eq!(status, 202, "{job}");
    assert!(close(job["max_cost"].as_f64().unwrap(), max_cost), "{job}");
    let job = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "cost_budget_exceeded", "{job}");
    let done = job["counts"]["completed"].as_u64().unwrap();
    // Stopped past the budget, within the records in flight (4 workers claiming 4 at a
    // time; results written in batches), and everything generated is kept.
    eprintln!("budget: {done} records done for a budget of ~10.5");
    assert!(
        (11..=11 + 16).contains(&done),
        "{done} records for a budget of ~10.5: {job}"
    );
    assert!(job["cost"].as_f64().unwrap() > max_cost, "{job}");
    assert_eq!(job["counts"]["failed"], 0, "{job}");

    // A bad budget, and a budget over unpriced models, are refused.
    for (max, says) in [(json!(0), "above 0"), (json!(-1.5), "above 0")] {
        let (status, body) = app
            .create_job(&json!({"config": config(), "num_records": 1, "max_cost": max}))
            .await;
        assert_eq!(status, 422, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{body}"
        );
    }
    let free = json!({"columns": [
        {"name": "c", "column_type": "llm-text", "model_alias": "free", "prompt": "Hi."}]});
    let (status, body) = app
        .create_job(&json!({"config": free, "num_records": 1, "max_cost": 1.0}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("prices"),
        "{body}"
    );
}
