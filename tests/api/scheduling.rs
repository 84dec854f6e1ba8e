//! The worker pool under load: records waiting for a slow LLM do not hold worker slots,
//! claims are fair across jobs, records are claimed ahead, and CPU work is claimed by the
//! lease. (Records whose worker keeps dying: `poison_pills`.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::{MockLlm, Script};

use crate::backends;
use crate::db::{Backend, TestDb};
use crate::helpers::{TestApp, sampler_config, spawn_app_on};

/// An app on a mock LLM that answers after `latency_ms`, with `count` worker slots and
/// `max_in_flight` leases.
async fn slow_llm_app(
    backend: Backend,
    latency_ms: u64,
    count: u32,
    max_in_flight: Option<u32>,
) -> (TestApp, MockLlm) {
    slow_llm_app_with(backend, latency_ms, count, max_in_flight, |_| {}).await
}

/// [`slow_llm_app`], with `tweak` applied to the config last.
async fn slow_llm_app_with(
    backend: Backend,
    latency_ms: u64,
    count: u32,
    max_in_flight: Option<u32>,
    tweak: impl FnOnce(&mut synthgate::config::Config) + Send + 'static,
) -> (TestApp, MockLlm) {
    slow_llm_app_on(
        TestDb::new(backend).await,
        latency_ms,
        count,
        max_in_flight,
        tweak,
    )
    .await
}

/// [`slow_llm_app_with`] on `db`, which the test prepared.
async fn slow_llm_app_on(
    db: TestDb,
    latency_ms: u64,
    count: u32,
    max_in_flight: Option<u32>,
    tweak: impl FnOnce(&mut synthgate::config::Config) + Send + 'static,
) -> (TestApp, MockLlm) {
    let script: Script =
        serde_json::from_value(json!({"faults": {"latency_ms": latency_ms}})).unwrap();
    let mock = MockLlm::start(script).await.unwrap();
    let endpoint = mock.endpoint();
    let app = spawn_app_on(db, move |c| {
        slow_llm_config(c, &endpoint, count, max_in_flight);
        tweak(c);
    })
    .await;
    (app, mock)
}

/// The config of [`slow_llm_app_on`] before its tweak: the workers, and the `writer` model
/// served by the mock at `endpoint`.
pub fn slow_llm_config(
    c: &mut synthgate::config::Config,
    endpoint: &str,
    count: u32,
    max_in_flight: Option<u32>,
) {
    c.workers.count = count;
    c.workers.max_in_flight = max_in_flight;
    c.model_providers = vec![
        serde_json::from_value(json!({"name": "mock", "endpoint": endpoint, "api_key": "k"}))
            .unwrap(),
    ];
    c.model_configs = vec![
        serde_json::from_value(
            json!({"alias": "writer", "model": "slow", "provider": "mock",
            "inference_parameters": {"max_parallel_requests": 16}}),
        )
        .unwrap(),
    ];
}

fn llm_job(n: u32) -> Value {
    json!({"config": {"columns": [
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer", "prompt": "Hi."}
    ]}, "num_records": n})
}

async fn submit(app: &TestApp, body: &Value) -> String {
    let (status, job) = app.create_job(body).await;
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

/// Waits until the job has at least `n` records in progress.
async fn wait_in_progress(app: &TestApp, id: &str, n: u64) {
    wait_counts(app, id, |c| c["in_progress"].as_u64().unwrap_or(0) >= n).await;
}

/// Waits (up to 20 s) until the job's `counts` satisfy `ready`.
pub async fn wait_counts(app: &TestApp, id: &str, ready: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, job) = app.get(&format!("/v1/jobs/{id}")).await;
        if ready(&job["counts"]) {
            return;
        }
        assert!(Instant::now() < deadline, "never ready: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Submits a one-record job with no LLM column and returns how long it took to complete.
async fn quick_job_time(app: &TestApp) -> Duration {
    let started = Instant::now();
    let id = submit(app, &json!({"config": sampler_config(), "num_records": 1})).await;
    let done = app.wait_for_job(&id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    started.elapsed()
}

/// Two worker slots (8 leases), a job of 6 records each waiting 3 s for the LLM. They used to
/// hold both slots, so a one-record job submitted next waited for all of them (9 s); now they
/// give their slots back while they wait, and the small job runs at once. (With more records
/// than leases the small job would wait for the first lease to free: `fair_claims`.)
async fn waiting_records_do_not_hold_worker_slots(backend: Backend) {
    let (app, _mock) = slow_llm_app(backend, 3_000, 2, None).await;
    let slow = submit(&app, &llm_job(6)).await;
    // More in flight than there are slots: the waiting records hold leases, not slots.
    wait_in_progress(&app, &slow, 3).await;
    let took = quick_job_time(&app).await;
    assert!(
        took < Duration::from_millis(1_500),
        "the small job waited {took:?} behind the slow one"
    );
    let done = app.wait_for_job(&slow, Duration::from_secs(60)).await;
    assert_eq!(done["counts"]["completed"], 6, "{done}");
    app.stop().await;
}

backends!(slots, waiting_records_do_not_hold_worker_slots);

/// Two leases, held by a job of 8 records that wait 1.5 s each for the LLM. A job submitted
/// next used to be claimed only after all of the first job's records (6 s); fair claims give
/// it the first lease that frees.
async fn a_new_job_is_not_queued_behind_an_old_one(backend: Backend) {
    let (app, _mock) = slow_llm_app(backend, 1_500, 2, Some(2)).await;
    let slow = submit(&app, &llm_job(8)).await;
    wait_in_progress(&app, &slow, 2).await;
    let took = quick_job_time(&app).await;
    assert!(
        took < Duration::from_millis(3_500),
        "the small job waited {took:?} behind the slow one"
    );
    let done = app.wait_for_job(&slow, Duration::from_secs(60)).await;
    assert_eq!(done["counts"]["completed"], 8, "{done}");
    app.stop().await;
}

backends!(fair_claims, a_new_job_is_not_queued_behind_an_old_one);

/// Sixteen records started and waiting on a slow model (`max_in_flight` 16, the model allowing
/// 64): the replica claims one more ahead (a sixteenth of the limit), to start the moment one
/// of them ends instead of after the next claim's round trip. It never starts a 17th at once,
/// and a shutdown gives the record claimed ahead back unstarted while the 16 finish: after a
/// restart every record is written once.
async fn a_record_is_claimed_ahead_of_a_free_place(backend: Backend) {
    let wide = |c: &mut synthgate::config::Config| {
        c.model_configs[0]
            .inference_parameters
            .max_parallel_requests = 64;
    };
    let (app, mock) = slow_llm_app_with(backend, 3_000, 16, Some(16), wide).await;
    let id = submit(&app, &llm_job(24)).await;
    // The first 16 all wait on the model; read well inside their 3 s, away from the moment
    // they end (when written records and new claims overlap).
    wait_counts(&app, &id, |c| c["waiting_for_model"] == 16).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, job) = app.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(job["counts"]["waiting_for_model"], 16, "{job}");
    assert_eq!(job["counts"]["in_progress"], 17, "one claimed ahead: {job}");

    // The drain lets the 16 finish; the one claimed ahead goes back (`restart` checks that
    // nothing is left in progress) without reaching the model.
    let endpoint = mock.endpoint();
    let mut during_drain = 0;
    let app = app
        .restart(|c| {
            during_drain = mock.stats().models["slow"].requests;
            slow_llm_config(c, &endpoint, 16, Some(16));
            wide(c);
        })
        .await;
    assert_eq!(
        during_drain, 16,
        "the record claimed ahead started during the drain"
    );
    let done = app.wait_for_job(&id, Duration::from_secs(60)).await;
    assert_eq!(done["counts"]["completed"], 24, "{done}");
    let stats = mock.stats().models["slow"];
    assert_eq!(stats.max_in_flight, 16, "{stats:?}");
    assert_eq!(stats.requests, 24, "{stats:?}");
    app.stop().await;
}

backends!(claim_ahead, a_record_is_claimed_ahead_of_a_free_place);

/// A counter's value in the `/metrics` text (0 when absent).
async fn counter(app: &TestApp, name: &str) -> u64 {
    let (status, text) = app.get_text("/metrics").await;
    assert_eq!(status, 200);
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// After a claim of CPU-only chunks, the next claim takes every free lease with one slot: a
/// CPU-only job of 2,000 records, with `claim_batch_size` 4 and 64 leases, needs a few dozen
/// claims instead of 500. When such a claim meets an LLM job's records instead, those past the
/// claim's one slot wait for a slot, and both jobs complete.
async fn cpu_work_is_claimed_by_the_lease(backend: Backend) {
    let (app, _mock) = slow_llm_app_with(backend, 100, 2, Some(64), |c| {
        c.workers.claim_batch_size = 4;
    })
    .await;
    let cpu = submit(
        &app,
        &json!({"config": sampler_config(), "num_records": 2000}),
    )
    .await;
    let done = app.wait_for_job(&cpu, Duration::from_secs(120)).await;
    assert_eq!(done["counts"]["completed"], 2000, "{done}");
    let claims = counter(&app, "synthgate_claims_total").await;
    let claimed = counter(&app, "synthgate_records_claimed_total").await;
    assert_eq!(claimed, 2000);
    assert!(
        claims * 16 <= claimed,
        "{claims} claims for {claimed} records: CPU claims stayed near claim_batch_size"
    );

    // Now CPU work and LLM work together: a CPU-sized claim may hand out LLM records.
    let cpu = submit(
        &app,
        &json!({"config": sampler_config(), "num_records": 500}),
    )
    .await;
    let llm = submit(&app, &llm_job(12)).await;
    for id in [cpu, llm] {
        let done = app.wait_for_job(&id, Duration::from_secs(120)).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["counts"]["failed"], 0, "{done}");
    }
    app.stop().await;
}

backends!(cpu_claims, cpu_work_is_claimed_by_the_lease);

/// A claim sized for CPU-only chunks asks for several records per lease (64 in flight, 68
/// leases: 16 per lease), so when an LLM job turns up while a large CPU-only job runs, the
/// claim can hand out more LLM records than it holds leases for. Those get a lease each while
/// the claim's last, the rest go back to the queue unstarted, and every record of both jobs is
/// generated exactly once: the model sees exactly one request per LLM record.
async fn a_cpu_sized_claim_gives_back_the_llm_records_past_its_leases(backend: Backend) {
    let (app, mock) = slow_llm_app(backend, 20, 2, Some(64)).await;
    const CPU: u64 = 10_000;
    const LLM: u64 = 400;
    let cpu = submit(
        &app,
        &json!({"config": sampler_config(), "num_records": CPU}),
    )
    .await;
    // Once the CPU job's claims are CPU-sized.
    wait_counts(&app, &cpu, |c| c["completed"].as_u64().unwrap_or(0) > 0).await;
    let llm = submit(&app, &llm_job(LLM as u32)).await;
    for (id, n) in [(&cpu, CPU), (&llm, LLM)] {
        let done = app.wait_for_job(id, Duration::from_secs(120)).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["counts"]["completed"], n, "{done}");
    }
    assert_eq!(
        mock.stats().total_requests,
        LLM,
        "one model request per LLM record"
    );
    let claimed = counter(&app, "synthgate_records_claimed_total").await;
    assert!(
        claimed > CPU + LLM,
        "{claimed} records claimed for {} records: no claim met the LLM job past its leases",
        CPU + LLM
    );
    app.stop().await;
}

backends!(
    cpu_claims_past_leases,
    a_cpu_sized_claim_gives_back_the_llm_records_past_its_leases
);
