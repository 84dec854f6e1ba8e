//! `record_selection` at the acceptance's scale: 1,000 accepted records from a budget of
//! 10,000 candidates, about 30 % of which pass; on SQLite across a restart mid-job, and on
//! Postgres with three real replicas, one of them SIGKILLed mid-job. Exactly 1,000 accepted
//! either way (the first that passed, by index), the five counts adding up to the candidates,
//! and the candidates generated past the target bounded by the records in flight.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use synthgate_testkit::mock_llm::{MockLlm, Script};
use uuid::Uuid;

use crate::db::{Backend, TestDb};
use crate::helpers::app_with_mock_llm;
use crate::process::{free_port, start_serve, submit, wait_for_job, wait_ready, write_llm_config};
use crate::record_selection::check_selection;

const N: u64 = 1_000;
const BUDGET: u64 = 10_000;
const WORKERS: u32 = 16;

/// A candidate passes when its uniform draw is under 0.3; each also has an LLM column, so
/// candidates are really in flight (the mock answers after its latency).
fn job() -> Value {
    json!({
        "num_records": N,
        "seed": 5,
        "config": {
            "columns": [
                {"name": "x", "column_type": "sampler", "sampler_type": "uniform",
                 "params": {"low": 0.0, "high": 1.0}},
                {"name": "keep", "column_type": "expression", "dtype": "bool",
                 "expr": "{{ x < 0.3 }}"},
                {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
                 "prompt": "One line about {{ x }}."}
            ],
            "record_selection": {"predicate_column": "keep", "max_candidate_records": BUDGET,
                                 "on_exhausted": "raise"}
        }
    })
}

async fn mock_with_latency(latency_ms: u64) -> MockLlm {
    let script: Script = serde_json::from_value(json!({"faults": {"latency_ms": latency_ms}}))
        .expect("a valid mock script");
    MockLlm::start(script).await.expect("start the mock LLM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_1000_accepted_on_sqlite_across_a_restart() {
    let (app, mock) =
        app_with_mock_llm(Backend::Sqlite, json!({"faults": {"latency_ms": 5}}), |c| {
            c.workers.count = 32
        })
        .await;
    let (status, created) = app.create_job(&job()).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    // Restart (drain, then a new process on the same file) once a fifth is accepted.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, j) = app.get(&format!("/v1/jobs/{id}")).await;
        if j["counts"]["selection"]["accepted"].as_u64().unwrap_or(0) >= N / 5 {
            assert_ne!(j["status"], "completed", "finished before the restart");
            break;
        }
        assert!(Instant::now() < deadline, "no progress: {j}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let endpoint = mock.endpoint();
    let app = app
        .restart(|c| {
            c.workers.count = 32;
            c.model_providers = vec![
                serde_json::from_value(json!({"name": "mock", "endpoint": endpoint})).unwrap(),
            ];
            c.model_configs = vec![
                serde_json::from_value(
                    json!({"alias": "writer", "model": "mock-writer", "provider": "mock"}),
                )
                .unwrap(),
            ];
        })
        .await;
    let job = check_selection(&app, &id, N as usize).await;
    assert_eq!(job["status"], "completed", "{job}");
    let sel = &job["counts"]["selection"];
    assert_eq!(sel["accepted"], N, "{sel}");
    let candidates = sel["accepted"].as_u64().unwrap()
        + sel["rejected"].as_u64().unwrap()
        + sel["trimmed"].as_u64().unwrap();
    // One model request per candidate generated (a drained record is re-run, once).
    let requests = mock.stats().total_requests;
    assert!(
        requests >= candidates,
        "{requests} requests for {candidates} candidates"
    );
    eprintln!("sqlite: {candidates} candidates for {N} accepted ({sel}); {requests} requests");
}

/// Three replicas share the job; one is SIGKILLed once a fifth is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_1000_accepted_with_three_replicas_one_sigkilled() {
    synthgate::install_crypto_provider();
    let db = TestDb::new(Backend::Postgres).await;
    let pool = PgPool::connect(&db.url).await.unwrap();
    let mock = mock_with_latency(30).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_llm_config(dir.path(), "synthgate.yaml", &mock.endpoint(), WORKERS);
    let client = reqwest::Client::new();
    let mut replicas = Vec::new();
    for name in ["replica-a", "replica-b", "replica-c"] {
        let env = [
            ("SYNTHGATE__DATABASE__URL", db.url.as_str()),
            ("SYNTHGATE__WORKERS__REPLICA_ID", name),
            ("SYNTHGATE__WORKERS__LEASE_TTL_SEC", "2"),
        ];
        let log = dir.path().join(format!("{name}.log"));
        replicas.push(start_serve(free_port(), Some(&config), &env, &log));
    }
    for r in &replicas {
        wait_ready(&client, &r.base).await;
    }
    let id = submit(&client, &replicas[0].base, &job()).await;
    let job_id = Uuid::parse_str(&id).unwrap();
    let passed = |pool: PgPool| async move {
        sqlx::query_scalar::<_, i64>(
            "select coalesce((select passed from job_record_counts where job_id = $1), 0)",
        )
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held: i64 = sqlx::query_scalar(
            "select count(*) from chunks where job_id = $1 and lease_owner = 'replica-c'",
        )
        .bind(job_id)
        .fetch_one(&pool)
        .await
        .unwrap();
        if passed(pool.clone()).await >= (N / 5) as i64 && held > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut victim = replicas.pop().unwrap();
    victim.child.start_kill().unwrap(); // SIGKILL: no drain, no release, no last write
    victim.child.wait().await.unwrap();
    assert!(
        passed(pool.clone()).await < N as i64,
        "finished before the kill"
    );

    let done = wait_for_job(&client, &replicas[0], &id, Duration::from_secs(180)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let sel = &done["counts"]["selection"];
    assert_eq!(sel["accepted"], N, "{sel}");

    // In SQL: every candidate index 0..K once, no chunk left; the accepted ones are exactly the
    // first N that passed, by index; the five counts are the rows'.
    let (rows, distinct, max_idx, chunks): (i64, i64, Option<i64>, i64) = sqlx::query_as(
        "select count(*), count(distinct idx), max(idx), \
                (select count(*) from chunks where job_id = $1) \
         from records where job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (rows, distinct, max_idx, chunks),
        (rows, rows, Some(rows - 1), 0)
    );
    let first_passing: Vec<i64> = sqlx::query_scalar(
        "select idx from records where job_id = $1 and (\"values\" ->> 'keep')::boolean \
         order by idx limit $2",
    )
    .bind(job_id)
    .bind(N as i64)
    .fetch_all(&pool)
    .await
    .unwrap();
    let accepted: Vec<i64> = sqlx::query_scalar(
        "select idx from records where job_id = $1 and selection = 'accepted' order by idx",
    )
    .bind(job_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(accepted, first_passing);
    let by: Vec<(Option<String>, String, i64)> = sqlx::query_as(
        "select selection, status, count(*) from records where job_id = $1 \
         group by selection, status order by 1, 2",
    )
    .bind(job_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let count = |s: &str| {
        by.iter()
            .filter(|(sel, _, _)| sel.as_deref() == Some(s))
            .map(|(_, _, n)| *n)
            .sum::<i64>()
    };
    for verdict in ["accepted", "rejected", "null_predicate", "trimmed"] {
        assert_eq!(sel[verdict], count(verdict), "{verdict}: {sel} {by:?}");
    }
    let five: i64 = [
        "accepted",
        "rejected",
        "null_predicate",
        "failed_generation",
        "trimmed",
    ]
    .iter()
    .map(|k| sel[k].as_i64().unwrap())
    .sum();
    assert_eq!(five, rows, "{sel}");
    // Past the N-th accepted (by index), only records in flight then were generated: at most
    // one chunk per worker slot of the three replicas.
    let past = rows - 1 - accepted.last().copied().unwrap();
    assert!(
        past <= i64::from(WORKERS) * 3 * 2,
        "{past} candidates past the last accepted"
    );
    eprintln!(
        "replicas: {rows} candidates for {N} accepted ({sel}); {past} past the last accepted; \
         {} model requests",
        mock.stats().total_requests
    );
    pool.close().await;
    drop(replicas);
}
