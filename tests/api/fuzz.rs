//! Adversarial input for the config parser and the Jinja layer: deep nesting, huge strings,
//! runaway templates, and a few hundred random mutations of a valid config. Every answer must
//! be a clear 4xx (or a 2xx for what is valid) within a bounded time; never a 5xx, never a
//! crash of the service.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app};

/// Far above any real answer time; a request that takes this long is a bug.
const BOUND: Duration = Duration::from_secs(10);

async fn post(app: &TestApp, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let started = Instant::now();
    let send = |client: &reqwest::Client, body: Vec<u8>| {
        client
            .post(app.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let resp = match send(&app.client, body.clone()).await {
        Ok(resp) => resp,
        // Known, not yet explained (seen on loaded machines, before this test's subject
        // changed too): a large body on a fresh connection now and then meets a closed
        // socket while it is written (EPIPE) instead of its 4xx. The service must still be
        // up, and the same request on a new connection must get its answer.
        Err(e) => {
            eprintln!("{path}: sending failed ({e}); checking the service and retrying once");
            let fresh = reqwest::Client::new();
            let health = fresh.get(app.url("/healthz")).send().await;
            assert!(
                health.is_ok_and(|r| r.status() == 200),
                "the service is down after: {e}"
            );
            send(&fresh, body).await.expect("the service answers")
        }
    };
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert!(
        started.elapsed() < BOUND,
        "{path} took {:?}",
        started.elapsed()
    );
    (status, body)
}

fn expr_job(template: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"num_records": 1, "config": {"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform", "params": {"low": 0, "high": 1}},
        {"name": "e", "column_type": "expression", "expr": template}]}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_configs_get_clear_4xx_in_bounded_time() {
    let app = spawn_app(Backend::Sqlite).await;

    // Deep nesting: JSON and YAML bodies nested 100,000 levels.
    let deep_json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (s, b) = post(&app, "/v1/jobs", "application/json", deep_json.into_bytes()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_json")),
        "{b}"
    );
    let deep_yaml = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let (s, b) = post(
        &app,
        "/v1/jobs?num_records=1",
        "application/yaml",
        deep_yaml.into_bytes(),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_yaml")),
        "{b}"
    );
    let deep_yaml_map = "a:\n".to_owned()
        + &(1..5000)
            .map(|i| format!("{}b:\n", " ".repeat(i)))
            .collect::<String>();
    let (s, b) = post(
        &app,
        "/v1/jobs?num_records=1",
        "application/yaml",
        deep_yaml_map.into_bytes(),
    )
    .await;
    assert!((400..500).contains(&s), "{s} {b}");

    // Templates that can only exhaust their budget: 422 invalid_template at submit.
    for template in [
        "{{ range(10**9) | list | length }}",
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        "{% for i in range(10000) %}{{ 'y' * 1000 }}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    ] {
        let (s, b) = post(&app, "/v1/jobs", "application/json", expr_job(template)).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (422, Some("invalid_template")),
            "{template}: {b}"
        );
        assert_eq!(b["error"]["details"][0]["column"], "e", "{b}");
    }
    // Templates nested past the parser's limit, or just unparseable.
    for template in [
        format!("{{{{ {}1{} }}}}", "(".repeat(10_000), ")".repeat(10_000)),
        format!(
            "{}x{}",
            "{% if true %}".repeat(5_000),
            "{% endif %}".repeat(5_000)
        ),
        "{{ ".repeat(1_000),
    ] {
        let (s, b) = post(&app, "/v1/jobs", "application/json", expr_job(&template)).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (422, Some("invalid_template")),
            "{b}"
        );
    }
    // A huge string just under the body limit: rejected by the output cap, not by memory.
    let huge = "z".repeat(9 * 1024 * 1024);
    let (s, b) = post(&app, "/v1/jobs", "application/json", expr_job(&huge)).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (422, Some("invalid_template")),
        "{b}"
    );
    // Over the body limit: 413.
    let (s, b) = post(
        &app,
        "/v1/jobs",
        "application/json",
        expr_job(&"z".repeat(11 * 1024 * 1024)),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (413, Some("payload_too_large")),
        "{b}"
    );
    // A huge number of columns.
    let columns: Vec<Value> = (0..20_000)
        .map(|i| json!({"name": format!("c{i}"), "column_type": "expression", "expr": "{{ n }}"}))
        .collect();
    let body =
        serde_json::to_vec(&json!({"num_records": 1, "config": {"columns": columns}})).unwrap();
    let (s, b) = post(&app, "/v1/jobs", "application/json", body).await;
    assert!((200..500).contains(&s), "{s} {b}");

    // Nothing above was stored.
    let (_, list) = app.get("/v1/jobs").await;
    assert!(list["jobs"].as_array().unwrap().len() <= 1, "{list}");
    assert_eq!(app.get("/healthz").await.0, 200, "the service is still up");
    app.stop().await;
}

/// Random edits of a valid config: replace, delete or retype values at random paths.
fn mutate(rng: &mut StdRng, v: &mut Value, depth: u32) {
    let junk = |rng: &mut StdRng| -> Value {
        match rng.random_range(0..9) {
            0 => Value::Null,
            1 => json!(rng.random::<bool>()),
            2 => json!(rng.random::<i64>()),
            3 => json!(rng.random::<f64>() * 1e300),
            4 => json!("{{ ".repeat(rng.random_range(1..4))),
            5 => json!([]),
            6 => json!({}),
            7 => json!("x".repeat(rng.random_range(0..2000))),
            _ => json!(["{{ n }}", {"k": -1}]),
        }
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = &keys[rng.random_range(0..keys.len())];
            match rng.random_range(0..4) {
                0 => {
                    m.remove(k);
                }
                1 => {
                    m.insert(k.clone(), junk(rng));
                }
                2 => {
                    m.insert(format!("extra_{}", rng.random::<u16>()), junk(rng));
                }
                _ if depth < 6 => mutate(rng, m.get_mut(k).unwrap(), depth + 1),
                _ => {}
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = rng.random_range(0..a.len());
            if rng.random_bool(0.3) {
                a[i] = junk(rng);
            } else if depth < 6 {
                mutate(rng, &mut a[i], depth + 1);
            }
        }
        other => *other = junk(rng),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_mutations_of_a_valid_config_never_get_a_5xx() {
    let app = spawn_app(Backend::Sqlite).await;
    let base = json!({"num_records": 2, "seed": 7, "config": {"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b"], "weights": [1, 2]}},
        {"name": "n", "column_type": "sampler", "sampler_type": "gaussian", "params": {"mean": 0, "stddev": 1},
         "convert_to": "int"},
        {"name": "when", "column_type": "sampler", "sampler_type": "datetime",
         "params": {"start": "2024-01-01", "end": "2024-12-31", "unit": "D"}},
        {"name": "e", "column_type": "expression", "expr": "{{ topic }}-{{ n }}", "dtype": "str"},
        {"name": "s", "column_type": "sampler", "sampler_type": "subcategory",
         "params": {"category": "topic", "values": {"a": ["x"], "b": ["y"]}}}
    ]}});
    let (s, b) = post(
        &app,
        "/v1/preview",
        "application/json",
        serde_json::to_vec(&base).unwrap(),
    )
    .await;
    assert_eq!(s, 200, "the base config is valid: {b}");
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..300 {
        let mut v = base.clone();
        for _ in 0..rng.random_range(1..4) {
            mutate(&mut rng, &mut v, 0);
        }
        let path = if i % 2 == 0 {
            "/v1/preview"
        } else {
            "/v1/jobs"
        };
        let (s, b) = post(
            &app,
            path,
            "application/json",
            serde_json::to_vec(&v).unwrap(),
        )
        .await;
        assert!(s < 500, "mutation {i} got {s}: {b}\ninput: {v}");
        if s >= 400 {
            let code = b["error"]["code"].as_str().unwrap_or_default();
            assert!(
                !code.is_empty(),
                "mutation {i}: an error without a code: {b}"
            );
            assert!(
                !b["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .is_empty(),
                "{b}"
            );
        }
        *statuses.entry(s).or_insert(0) += 1;
    }
    eprintln!("statuses: {statuses:?}");
    assert!(
        statuses.keys().any(|s| *s >= 400),
        "the mutations did produce bad input"
    );
    assert_eq!(app.get("/healthz").await.0, 200);
    app.stop().await;
}
