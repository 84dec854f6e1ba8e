//! Crash safety of the real binary: SIGKILL in the middle of a job, start again on the same
//! database, and every record completes exactly once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::process::Child;

use crate::backends;
use crate::db::{Backend, TestDb};
use crate::helpers::sampler_config;
use crate::process::{free_port, job, start_serve, wait_ready};

const N: u64 = 30_000;

fn start(db: &TestDb, port: u16, log: &std::path::Path) -> Child {
    let env = [
        ("SYNTHGATE__DATABASE__URL", db.url.as_str()),
        ("SYNTHGATE__WORKERS__LEASE_TTL_SEC", "2"),
        ("SYNTHGATE__WORKERS__POLL_INTERVAL_MS", "50"),
        ("SYNTHGATE__WORKERS__COUNT", "8"),
        ("SYNTHGATE__LOGGING__LEVEL", "info"),
    ];
    start_serve(port, None, &env, log).child
}

async fn sigkill_mid_job_loses_nothing(backend: Backend) {
    synthgate::install_crypto_provider();
    let db = TestDb::new(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut first = start(&db, port, &dir.path().join("first.log"));
    wait_ready(&client, &base).await;

    let resp = client
        .post(format!("{base}/v1/jobs"))
        .json(&json!({"config": sampler_config(), "num_records": N, "seed": 11}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Kill as soon as real progress is visible, well before the end.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let j = job(&client, &base, &id).await;
        if j["counts"]["completed"].as_u64().unwrap() >= 1000 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress: {j}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.start_kill().unwrap(); // SIGKILL: no drain, no lease release
    first.wait().await.unwrap();

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut second = start(&db, port, &dir.path().join("second.log"));
    wait_ready(&client, &base).await;
    let before = job(&client, &base, &id).await;
    assert!(
        before["counts"]["completed"].as_u64().unwrap() < N,
        "the job finished before the kill, so the test proved nothing: {before}"
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let done = loop {
        let j = job(&client, &base, &id).await;
        if j["status"] == "completed" {
            break j;
        }
        assert!(
            Instant::now() < deadline,
            "job did not finish after restart: {j}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["counts"]["completed"], N, "{done}");
    assert_eq!(done["counts"]["failed"], 0);

    // Exactly once: N rows, N distinct indices, each completed.
    let mut seen = HashSet::new();
    let mut rerun = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/v1/jobs/{id}/records?limit=1000");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        for r in page["records"].as_array().unwrap() {
            assert_eq!(r["status"], "completed");
            assert!(
                seen.insert(r["index"].as_u64().unwrap()),
                "index twice: {r}"
            );
            if r["attempts"].as_u64().unwrap() > 1 {
                rerun += 1;
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len() as u64, N);
    eprintln!("records re-run after the kill: {rerun}");
    second.start_kill().unwrap();
    second.wait().await.unwrap();
    drop(db);
}
backends!(sigkill, sigkill_mid_job_loses_nothing);

/// SIGTERM-style shutdown mid-job: records in flight finish or go back to the queue (none is
/// left `in_progress`), and the next start completes the job.
async fn graceful_shutdown_requeues_and_resumes(backend: Backend) {
    let app = crate::helpers::spawn_app(backend).await;
    let (status, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 20_000, "seed": 5}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, j) = app.get(&format!("/v1/jobs/{id}")).await;
        if j["counts"]["completed"].as_u64().unwrap() >= 500 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress: {j}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let app = app.restart(|_| {}).await;
    let (_, mid) = app.get(&format!("/v1/jobs/{id}")).await;
    assert!(
        mid["counts"]["completed"].as_u64().unwrap() < 20_000,
        "finished too early: {mid}"
    );
    let done = app.wait_for_job(&id, Duration::from_secs(180)).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["counts"]["completed"], 20_000);
    app.stop().await;
}
backends!(graceful_shutdown, graceful_shutdown_requeues_and_resumes);
