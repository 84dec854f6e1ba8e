//! Several real `synthgate serve` processes on one Postgres database: one replica is SIGKILLed
//! mid-job and the others finish its records exactly once; and a SIGTERMed replica drains
//! within `server.shutdown_timeout_sec` and hands its records back to the queue.
//!
//! The LLM is the in-process mock (a test double) with added latency, so records are really in
//! flight when the signal arrives.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::PgPool;
use synthgate_testkit::mock_llm::{MockLlm, Script};
use uuid::Uuid;

use crate::db::{Backend, TestDb};
use crate::process::{
    assert_exactly_once, free_port, llm_job, log_tail, sigterm, start_serve, submit, wait_for_job,
    wait_ready, write_llm_config,
};

/// A mock LLM that answers every request after `latency_ms`.
async fn mock_with_latency(latency_ms: u64) -> MockLlm {
    let script: Script = serde_json::from_value(json!({"faults": {"latency_ms": latency_ms}}))
        .expect("a valid mock script");
    MockLlm::start(script).await.expect("start the mock LLM")
}

/// `url` with `application_name=name`, so each replica's connections are visible by name in
/// `pg_stat_activity`.
fn named(url: &str, name: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={name}")
}

/// Indexes of the job's records that `owner` holds in progress right now: those of its
/// leased chunks that have no result yet.
async fn held_by(pool: &PgPool, job: Uuid, owner: &str) -> Vec<i64> {
    sqlx::query_scalar(
        "select i from chunks c, generate_series(c.start_idx, c.end_idx - 1) as i \
         where c.job_id = $1 and c.lease_owner = $2 \
           and not exists (select 1 from records r where r.job_id = c.job_id and r.idx = i) \
         order by i",
    )
    .bind(job)
    .bind(owner)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn completed(pool: &PgPool, job: Uuid) -> i64 {
    sqlx::query_scalar("select count(*) from records where job_id = $1 and status = 'completed'")
        .bind(job)
        .fetch_one(pool)
        .await
        .unwrap()
}

const N: i64 = 3_000;
const WORKERS: u32 = 16;
const VICTIM: &str = "replica-c";

/// Three replicas share a 3,000-record LLM job; one is SIGKILLed with records in flight. The
/// survivors take its records over once their leases expire, and every record ends completed
/// exactly once, with exactly one trace, and no more LLM requests than the killed replica's
/// records in flight account for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_one_of_three_replicas_loses_and_doubles_nothing() {
    synthgate::install_crypto_provider();
    let db = TestDb::new(Backend::Postgres).await;
    let pool = PgPool::connect(&db.url).await.unwrap();
    let mock = mock_with_latency(50).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_llm_config(dir.path(), "synthgate.yaml", &mock.endpoint(), WORKERS);
    let client = reqwest::Client::new();

    let mut replicas = Vec::new();
    for name in ["replica-a", "replica-b", VICTIM] {
        let url = named(&db.url, name);
        let env = [
            ("SYNTHGATE__DATABASE__URL", url.as_str()),
            ("SYNTHGATE__WORKERS__REPLICA_ID", name),
            ("SYNTHGATE__WORKERS__LEASE_TTL_SEC", "2"),
        ];
        let log = dir.path().join(format!("{name}.log"));
        replicas.push(start_serve(free_port(), Some(&config), &env, &log));
    }
    for r in &replicas {
        wait_ready(&client, &r.base).await;
    }

    let started = Instant::now();
    let id = submit(&client, &replicas[0].base, &llm_job(N as u64)).await;
    let job = Uuid::parse_str(&id).unwrap();

    // Kill once a fifth is done and the victim has records in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut first_done = None;
    let before = loop {
        let done = completed(&pool, job).await;
        if done > 0 && first_done.is_none() {
            first_done = Some((Instant::now(), done));
        }
        if done >= N / 5 {
            let held = held_by(&pool, job, VICTIM).await;
            if !held.is_empty() {
                break held;
            }
        }
        assert!(Instant::now() < deadline, "no progress: {done} completed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut victim = replicas.pop().unwrap();
    victim.child.start_kill().unwrap(); // SIGKILL: no drain, no release, no last write
    victim.child.wait().await.unwrap();
    let killed = Instant::now();
    let done_at_kill = completed(&pool, job).await;
    assert!(done_at_kill < N, "the job finished before the kill");

    // A transaction the victim had already sent may still commit until its server backends
    // notice the closed sockets; after that its rows can only change through another replica.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let backends: i64 =
            sqlx::query_scalar("select count(*) from pg_stat_activity where application_name = $1")
                .bind(VICTIM)
                .fetch_one(&pool)
                .await
                .unwrap();
        if backends == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the victim's connections linger");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let orphaned = held_by(&pool, job, VICTIM).await;
    assert!(
        !orphaned.is_empty(),
        "the victim held no records when it died, so the test proved nothing"
    );

    // Its leases expire (2 s) and the survivors re-claim them.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !held_by(&pool, job, VICTIM).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the victim's records were never taken over"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let taken_over = killed.elapsed();

    let done = wait_for_job(&client, &replicas[0], &id, Duration::from_secs(180)).await;
    let finished = Instant::now();
    assert_eq!(
        done["status"],
        "completed",
        "{done}\n{}",
        log_tail(&replicas[0].log)
    );
    assert_eq!(done["counts"]["completed"], N, "{done}");
    // Usage is written with each record, so the kill loses none and double-counts none: one
    // request per stored record, the re-run ones' final attempts included.
    assert_eq!(done["usage"]["writer"]["requests"], N, "{done}");

    let once = assert_exactly_once(&pool, &id, N).await;
    // Every record the victim held was finished by a survivor, after a new claim.
    let rerun: i64 = sqlx::query_scalar(
        "select count(*) from records \
         where job_id = $1 and idx = any($2) and status = 'completed' and attempts >= 2",
    )
    .bind(job)
    .bind(&orphaned)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rerun, orphaned.len() as i64, "orphaned records re-run");
    assert!(once.reruns >= rerun);

    // One LLM request per record, plus at most one for each record the victim had in flight
    // (sent but never written). Without the takeover fencing, a survivor and a slow writer
    // would both run records, and this would grow.
    let in_flight: HashSet<i64> = before.iter().chain(&orphaned).copied().collect();
    let requests = mock.stats().total_requests;
    assert!(
        (N as u64..=N as u64 + in_flight.len() as u64).contains(&requests),
        "{requests} LLM requests for {N} records with {} in flight on the victim",
        in_flight.len()
    );

    // Recovery: compare with the job at the steady pace of three replicas before the kill
    // (from the first completed record, so start-up is counted once).
    let before_kill = killed - started;
    let (first_at, first_count) = first_done.unwrap();
    let pace = (done_at_kill - first_count) as f64 / (killed - first_at).as_secs_f64();
    let expected = (first_at - started) + Duration::from_secs_f64(N as f64 / pace);
    eprintln!(
        "replicas: killed {VICTIM} after {:.2}s at {done_at_kill}/{N} completed, holding {} \
         records (re-run {rerun}, {} re-runs in all); its leases were taken over {:.2}s after \
         the kill; job finished {:.2}s after the kill, {:.2}s in all against {:.2}s expected \
         without the kill at the pace of 3 replicas ({:.0} records/s); {requests} LLM requests",
        before_kill.as_secs_f64(),
        orphaned.len(),
        once.reruns,
        taken_over.as_secs_f64(),
        (finished - killed).as_secs_f64(),
        (finished - started).as_secs_f64(),
        expected.as_secs_f64(),
        pace,
    );
    pool.close().await;
    drop(replicas);
}

/// SIGTERM while every worker waits on a 10 s LLM call: the process gives the records
/// `shutdown_timeout_sec` (3 s), cuts them, returns them to the queue and exits with success
/// well before the calls would have ended. A new process then completes the job, each record
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_within_the_shutdown_timeout() {
    const RECORDS: i64 = 40;
    const SLOTS: u32 = 8;
    synthgate::install_crypto_provider();
    let db = TestDb::new(Backend::Postgres).await;
    let pool = PgPool::connect(&db.url).await.unwrap();
    let slow = mock_with_latency(10_000).await;
    let dir = tempfile::tempdir().unwrap();
    let slow_config = write_llm_config(dir.path(), "slow.yaml", &slow.endpoint(), SLOTS);
    let client = reqwest::Client::new();
    // Leases bounded by the slots, so the records in flight are exactly the ones waiting on the
    // mock (records waiting for an LLM hold a lease, not a slot).
    let slots = SLOTS.to_string();
    let env = [
        ("SYNTHGATE__DATABASE__URL", db.url.as_str()),
        ("SYNTHGATE__SERVER__SHUTDOWN_TIMEOUT_SEC", "3"),
        ("SYNTHGATE__WORKERS__MAX_IN_FLIGHT", slots.as_str()),
    ];
    let mut first = start_serve(
        free_port(),
        Some(&slow_config),
        &env,
        &dir.path().join("first.log"),
    );
    wait_ready(&client, &first.base).await;
    let id = submit(&client, &first.base, &llm_job(RECORDS as u64)).await;
    let job = Uuid::parse_str(&id).unwrap();

    // Every slot waits on the mock.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = slow.stats();
        if stats
            .models
            .get("mock-writer")
            .is_some_and(|m| m.in_flight == u64::from(SLOTS))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "records never in flight: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let signalled = Instant::now();
    sigterm(&first.child);
    let status = tokio::time::timeout(Duration::from_secs(30), first.child.wait())
        .await
        .expect("synthgate did not exit within 30 s of SIGTERM")
        .unwrap();
    let exited = signalled.elapsed();
    eprintln!(
        "sigterm: exited {:.2}s after SIGTERM with shutdown_timeout_sec=3 and {SLOTS} records \
         in flight on 10 s LLM calls ({status})",
        exited.as_secs_f64()
    );
    assert!(status.success(), "{status}\n{}", log_tail(&first.log));
    assert!(
        exited >= Duration::from_millis(2_900),
        "records in flight did not get their drain time: exited after {exited:?}"
    );
    assert!(
        exited < Duration::from_secs(8),
        "shutdown took {exited:?}, past the 3 s drain plus margin\n{}",
        log_tail(&first.log)
    );
    // Nothing finished, and nothing is left claimed: the cut records went back to the queue
    // (their chunks given back, no lease), and none has a row.
    let leased: Vec<(i64, i64, Option<String>)> = sqlx::query_as(
        "select start_idx, end_idx, lease_owner from chunks \
         where job_id = $1 and lease_owner is not null order by start_idx",
    )
    .bind(job)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        leased.is_empty(),
        "chunks still leased after the drain: {leased:?}"
    );
    let odd: Vec<(i64, String, Option<String>)> = sqlx::query_as(
        "select idx, status, error_code from records where job_id = $1 order by idx",
    )
    .bind(job)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        odd.is_empty(),
        "records written though cut at the drain: {odd:?}"
    );
    let given_back: i64 = sqlx::query_scalar(
        "select coalesce(sum(end_idx - start_idx), 0)::bigint from chunks where job_id = $1",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .unwrap();
    let claimed: i64 = sqlx::query_scalar("select claimed_upto from job_cursors where job_id = $1")
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        RECORDS - claimed + given_back,
        RECORDS,
        "every record is back in the queue: unclaimed, or in a chunk given back"
    );

    // A new process, with a fast LLM, finishes the job.
    let fast = mock_with_latency(0).await;
    let fast_config = write_llm_config(dir.path(), "fast.yaml", &fast.endpoint(), SLOTS);
    let second = start_serve(
        free_port(),
        Some(&fast_config),
        &env,
        &dir.path().join("second.log"),
    );
    wait_ready(&client, &second.base).await;
    let done = wait_for_job(&client, &second, &id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let once = assert_exactly_once(&pool, &id, RECORDS).await;
    assert_eq!(
        once.reruns,
        i64::from(SLOTS),
        "exactly the records cut at shutdown ran twice"
    );
    assert_eq!(fast.stats().total_requests, RECORDS as u64);
    pool.close().await;
    drop(second);
}
