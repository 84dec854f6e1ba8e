//! `/metrics` (issue 9, finding 13): it can require a token, and its label values are bounded
//! to server-defined names, so a job's own model aliases cannot grow the series count.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{app_with_mock_llm, spawn_app, spawn_app_with};

const TOKEN: &str = "metrics-token-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_token_is_required_when_configured() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.server.metrics_token = Some(TOKEN.to_owned().into());
    })
    .await;
    let get = |auth: Option<String>| {
        let mut req = app.client.get(app.url("/metrics"));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        req.send()
    };
    for auth in [
        None,
        Some(format!("Bearer {TOKEN}x")),
        Some("Bearer ".into()),
        Some(format!("Basic {TOKEN}")),
        Some(TOKEN.to_owned()),
    ] {
        let resp = get(auth.clone()).await.unwrap();
        assert_eq!(resp.status(), 401, "{auth:?}");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer", "{auth:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{auth:?}: {body}");
        assert!(
            !body.to_string().contains(TOKEN),
            "the token leaked: {body}"
        );
    }
    for auth in [
        format!("Bearer {TOKEN}"),
        format!("bearer {TOKEN}"),
        format!("BEARER  {TOKEN}"),
    ] {
        let resp = get(Some(auth.clone())).await.unwrap();
        assert_eq!(resp.status(), 200, "{auth:?}");
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain"),
            "{auth:?}"
        );
    }
    // The probes stay open.
    assert_eq!(app.get_text("/healthz").await.0, 200);
    assert_eq!(app.get_text("/readyz").await.0, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_stay_open_without_a_token() {
    let app = spawn_app(Backend::Sqlite).await;
    assert_eq!(app.get_text("/metrics").await.0, 200);
    app.stop().await;
}

#[test]
fn a_short_metrics_token_is_refused() {
    let err =
        synthgate::config::Config::from_value(json!({"server": {"metrics_token": "short"}}), &[])
            .unwrap_err()
            .to_string();
    assert!(err.contains("server.metrics_token"), "{err}");
}

/// One job with many model aliases of its own (all on the server's provider): none becomes a
/// label value; their requests count under `job_defined`, the server alias under its name.
async fn job_aliases_are_not_labels(backend: Backend) {
    const ALIASES: usize = 40;
    let (app, _mock) = app_with_mock_llm(backend, json!({"rules": []}), |c| {
        c.model_configs[0].alias = "server-writer".into();
    })
    .await;
    // Unique per run: the recorder is process-wide.
    let prefix = format!(
        "jobalias{}",
        &uuid::Uuid::now_v7().simple().to_string()[20..]
    );
    let mut columns = vec![json!({"name": "by_server", "column_type": "llm-text",
        "model_alias": "server-writer", "prompt": "Say hi."})];
    let mut model_configs = Vec::new();
    for i in 0..ALIASES {
        let alias = format!("{prefix}-{i}");
        model_configs.push(json!({"alias": alias, "model": format!("m-{i}"), "provider": "mock"}));
        columns.push(json!({"name": format!("c{i}"), "column_type": "llm-text",
            "model_alias": alias, "prompt": "Say hi."}));
    }
    let (status, job) = app
        .create_job(
            &json!({"config": {"columns": columns, "model_configs": model_configs},
            "num_records": 2}),
        )
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    // The job's own usage keeps the per-alias detail.
    assert_eq!(
        done["usage"][format!("{prefix}-0")]["requests"],
        2,
        "{done}"
    );

    let (status, text) = app.get_text("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        !text.contains(&prefix),
        "job-defined aliases became label values:\n{}",
        text.lines()
            .filter(|l| l.contains(&prefix))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        text.contains("synthgate_llm_requests_total{model_alias=\"job_defined\"}"),
        "{text}"
    );
    assert!(
        text.contains("synthgate_llm_requests_total{model_alias=\"server-writer\"}"),
        "{text}"
    );
    let series = text
        .lines()
        .filter(|l| {
            (l.starts_with("synthgate_llm_requests_total")
                || l.starts_with("synthgate_llm_tokens_total"))
                && l.contains("model_alias=")
        })
        .count();
    assert!(
        series <= 2 * 3,
        "{series} LLM series for two labels:\n{text}"
    );
    // The latency histogram labels a job's own aliases the same way.
    assert!(
        text.lines()
            .any(|l| l.starts_with("synthgate_llm_request_seconds_count{")
                && l.contains("model_alias=\"job_defined\"")),
        "{text}"
    );
    // Claims, a millisecond or so each, have buckets of their own below the latency ones.
    assert!(
        text.contains("synthgate_claim_seconds_bucket{le=\"0.0005\"}"),
        "{text}"
    );
    app.stop().await;
}
backends!(job_alias_labels, job_aliases_are_not_labels);

/// `synthgate_llm_request_seconds` measures the provider, not the queue for a
/// `max_parallel_requests` slot in front of it: six records through one slot, 300 ms a reply,
/// take 1.8 s of provider time, where counting the waits would make 6.3 s (0.3 + 0.6 + ... +
/// 1.8). Issue 48: against a real server the histogram showed the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_latency_leaves_out_the_wait_for_a_slot() {
    let script = json!({"faults": {"latency_ms": 300}, "rules": []});
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, script, |c| {
        c.model_configs[0].alias = "one-slot".into();
        c.model_configs[0]
            .inference_parameters
            .max_parallel_requests = 1;
    })
    .await;
    let (status, job) = app
        .create_job(&json!({"num_records": 6, "config": {"columns": [
            {"name": "line", "column_type": "llm-text", "model_alias": "one-slot",
             "prompt": "Say hi."}]}}))
        .await;
    assert_eq!(status, 202, "{job}");
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        mock.stats().models["mock-writer"].max_in_flight,
        1,
        "one slot"
    );
    let (_, text) = app.get_text("/metrics").await;
    let value = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("model_alias=\"one-slot\""))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name}:\n{text}"))
    };
    let (count, sum) = (
        value("synthgate_llm_request_seconds_count{"),
        value("synthgate_llm_request_seconds_sum{"),
    );
    assert_eq!(count, 6.0, "{text}");
    assert!(
        (1.7..3.6).contains(&sum),
        "six 300 ms replies: {sum} s in all (6.3 s would count the queue)"
    );
    app.stop().await;
}

/// The dashboard and the observability docs name only metrics the service defines, so
/// neither drifts from `src/metrics.rs` unnoticed.
#[test]
fn the_dashboard_and_docs_name_real_metrics() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let defined = std::fs::read_to_string(root.join("src/metrics.rs")).unwrap();
    for file in [
        "config/observability/grafana/dashboards/synthgate.json",
        "docs/observability.md",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let mut named = 0;
        for (i, _) in text.match_indices("synthgate_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let base = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            assert!(
                defined.contains(&format!("\"{base}\"")),
                "{file} names {name}, which src/metrics.rs does not define"
            );
            named += 1;
        }
        assert!(named >= 10, "{file} names only {named} metrics");
    }
}

/// The binary's allocator reports itself at `/metrics`: the series come from jemalloc (the
/// test process links the library only, so this runs `synthgate serve`), with what the service
/// holds at most what the allocator has in RAM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reports_its_allocator() {
    use crate::process::{free_port, get_text, start_serve, wait_ready};
    synthgate::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let log = dir.path().join("serve.log");
    let mut service = start_serve(
        free_port(),
        None,
        &[("SYNTHGATE__DATABASE__SQLITE_PATH", db.to_str().unwrap())],
        &log,
    );
    let client = reqwest::Client::new();
    wait_ready(&client, &service.base).await;
    let text = get_text(&client, &service.base, "/metrics").await;
    service.child.kill().await.unwrap();
    let bytes = |state: &str| -> f64 {
        let prefix = format!("synthgate_allocator_bytes{{state=\"{state}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {state} series:\n{text}"))
            .parse()
            .unwrap()
    };
    let (allocated, active, resident) = (bytes("allocated"), bytes("active"), bytes("resident"));
    assert!(allocated > 0.0, "{text}");
    assert!(allocated <= active && active <= resident, "{text}");
    for state in ["metadata", "retained"] {
        bytes(state);
    }
}
