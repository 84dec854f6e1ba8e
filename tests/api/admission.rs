//! The admission controller of a model provider under a minute of each fault issue 51 names:
//! sustained 429s, and a provider that is down. Each samples `/metrics` while it runs and
//! prints what it saw (`--no-capture` shows it).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::faults::{app_with_llm, job};
use crate::helpers::TestApp;

/// How long each fault lasts: the minute the acceptance names.
const FAULT: Duration = Duration::from_secs(60);

/// The gauge `name{provider="mock"}` on `/metrics`, `None` when absent.
async fn gauge(app: &TestApp, name: &str) -> Option<f64> {
    let (status, text) = app.get_text("/metrics").await;
    assert_eq!(status, 200, "{text}");
    let prefix = format!("{name}{{provider=\"mock\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().expect("a number"))
}

/// `(seconds since start, limit, in flight, circuit)` every 250 ms until `until`.
async fn sample(app: &TestApp, start: Instant, until: Instant) -> Vec<(f64, f64, f64, f64)> {
    let mut out = Vec::new();
    while Instant::now() < until {
        let limit = gauge(app, "synthgate_llm_provider_concurrency_limit").await;
        let in_flight = gauge(app, "synthgate_llm_provider_in_flight").await;
        let circuit = gauge(app, "synthgate_llm_provider_circuit").await;
        out.push((
            start.elapsed().as_secs_f64(),
            limit.unwrap_or(f64::NAN),
            in_flight.unwrap_or(0.0),
            circuit.unwrap_or(0.0),
        ));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    out
}

fn max_of(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(0.0, f64::max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_of_429s_to_60_percent_of_requests_fails_no_record() {
    // 8 requests in flight at most (the model's max_parallel_requests); the mock answers
    // 100 ms later, and 429 (no Retry-After) to 60 % of requests for a minute. The job is
    // larger than the minute can finish, so it runs through the whole fault.
    let (app, mock) = app_with_llm(
        json!({"faults": {"latency_ms": 100, "error_probability": 0.6, "error_status": 429,
            "seed": 51}, "history_limit": 10}),
        json!({"max_parallel_requests": 8}),
        |c| {
            c.llm.retry_base_delay_ms = 100;
            c.llm.retry_max_delay_ms = 2_000;
        },
    )
    .await;
    let (status, created) = app.create_job(&job("Throttled", 1_500)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();
    let start = Instant::now();
    let during = sample(&app, start, start + FAULT).await;
    let (_, view) = app.get(&format!("/v1/jobs/{id}")).await;
    let throttled_by_then = mock.stats().total_requests;
    mock.set_script(
        serde_json::from_value(json!({"faults": {"latency_ms": 100}, "history_limit": 10}))
            .unwrap(),
    );
    let calm = Instant::now();
    let after = sample(&app, start, calm + Duration::from_secs(15)).await;
    let done = app.wait_for_job(id, Duration::from_secs(300)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 1_500, "{done}");
    assert_eq!(done["counts"]["failed"], 0, "no record failed: {done}");

    // In flight dropped while it throttled and came back once it stopped.
    let late = &during[during.len() / 2..];
    let limit_late = max_of(late.iter().map(|s| s.1));
    let in_flight_late = max_of(late.iter().map(|s| s.2));
    let in_flight_after = max_of(after[after.len() / 2..].iter().map(|s| s.2));
    assert!(
        limit_late < 8.0,
        "the limit fell under the model's 8: {late:?}"
    );
    // A lowered limit takes effect as requests come back, so in flight may pass it briefly.
    assert!(in_flight_late < 8.0, "in flight fell under 8: {late:?}");
    assert_eq!(in_flight_after, 8.0, "back to 8 in flight: {after:?}");
    let providers = &view["providers"]["mock"];
    assert!(providers["throttled"].as_u64().unwrap() > 100, "{view}");
    assert_eq!(providers["circuit"], "closed", "429s never open it: {view}");
    eprintln!(
        "admission 429s: {throttled_by_then} requests in the minute at 60 % 429, \
         {} throttled; limit late in the minute at most {limit_late}, in flight at most \
         {in_flight_late}; 15 s after: in flight {in_flight_after}; 1500 of 1500 records \
         completed {:.1} s after the fault ended",
        providers["throttled"],
        calm.elapsed().as_secs_f64()
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_down_for_a_minute_costs_one_request_per_probe_interval() {
    // The provider answers 502 to everything for a minute. The defaults: five failures in a
    // row open the circuit, then one probe per 5 s; records wait (patience 600 s) without
    // spending their attempts.
    let (app, mock) = app_with_llm(
        json!({"rules": [{"reply": {"status": 502}}], "history_limit": 10000}),
        json!({}),
        |_| {},
    )
    .await;
    let (status, created) = app.create_job(&job("Outage", 20)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();
    let start = Instant::now();
    let during = sample(&app, start, start + FAULT).await;
    let (_, view) = app.get(&format!("/v1/jobs/{id}")).await;
    // NVIDIA's client reads the same in the job's status details.
    let (_, status) = app
        .get(&format!("/v1/data-designer/jobs/{id}/status"))
        .await;
    mock.set_script(serde_json::from_value(json!({"history_limit": 10000})).unwrap());
    let outage = start.elapsed();
    let done = app.wait_for_job(id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 20, "{done}");
    assert_eq!(done["counts"]["failed"], 0, "{done}");

    let failed: Vec<f64> = mock
        .requests()
        .iter()
        .filter(|r| r.status == Some(502))
        .map(|r| r.received_ms)
        .collect();
    // The fifth failure opened the circuit; after it (and the requests already on their way
    // then), one request per interval.
    let fifth = failed[4];
    let probes: Vec<f64> = failed
        .iter()
        .copied()
        .filter(|t| *t > fifth + 1_000.0)
        .collect();
    for pair in probes.windows(2) {
        assert!(
            pair[1] - pair[0] >= 4_900.0,
            "two requests {:.0} ms apart while the circuit was open: {failed:?}",
            pair[1] - pair[0]
        );
    }
    let allowed = (outage.as_secs_f64() / 5.0).ceil() as usize + 1;
    assert!(
        probes.len() <= allowed,
        "{} probes: {failed:?}",
        probes.len()
    );
    assert!(failed.len() <= 5 + 4 + allowed, "{failed:?}");
    assert!(
        during.iter().any(|s| s.3 == 1.0),
        "the circuit gauge showed it open: {during:?}"
    );
    assert_eq!(
        view["providers"]["mock"]["circuit"]
            .as_str()
            .map(|c| c != "closed"),
        Some(true),
        "{view}"
    );
    let details = &status["status_details"]["providers"]["mock"];
    assert!(
        details["circuit"].as_str().is_some_and(|c| c != "closed"),
        "{status}"
    );
    let circuit_now = gauge(&app, "synthgate_llm_provider_circuit").await;
    assert_eq!(circuit_now, Some(0.0), "closed once it answered");
    eprintln!(
        "admission outage: {} requests in a {:.0} s outage of 20 records ({} probes after the \
         circuit opened, at least 5 s apart); every record completed, none failed",
        failed.len(),
        outage.as_secs_f64(),
        probes.len()
    );
    app.stop().await;
}

/// The job view names a provider's state only while the job is active.
#[tokio::test]
async fn a_finished_job_shows_no_provider_state() {
    let (app, _mock) = app_with_llm(json!({}), json!({}), |_| {}).await;
    let (status, created) = app.create_job(&job("Quick", 2)).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let (_, view): (u16, Value) = app.get(&format!("/v1/jobs/{id}")).await;
    assert!(view.get("providers").is_none(), "{view}");
    app.stop().await;
}
