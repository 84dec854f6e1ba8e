//! Support for tests that run the real `synthgate` binary as child processes (restart,
//! replicas, database faults): ports, start-up, readiness, polling jobs over HTTP, signals, a
//! config file that points the service at the mock LLM, and exactly-once checks straight
//! against Postgres.
//!
//! Children are started with `kill_on_drop`, so a failing test never leaves one behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::process::{Child, Command};
use uuid::Uuid;

/// A port that was free a moment ago on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One `synthgate serve` child and where to reach it.
pub struct Service {
    /// The process; killed when dropped.
    pub child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Its stderr (the service log).
    pub log: PathBuf,
}

/// Starts `synthgate serve` on `port`, with `config` (if any) and `env` overrides, logging to
/// `log`. Returns at once; call [`wait_ready`] before using it.
pub fn start_serve(port: u16, config: Option<&Path>, env: &[(&str, &str)], log: &Path) -> Service {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synthgate"));
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.arg("serve")
        .env("SYNTHGATE__SERVER__PORT", port.to_string())
        .env("NO_COLOR", "1")
        .env("SYNTHGATE__VALIDATORS__RUFF_DOWNLOAD", "false");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
        .kill_on_drop(true)
        .spawn()
        .expect("start synthgate");
    Service {
        child,
        base: format!("http://127.0.0.1:{port}"),
        log: log.to_path_buf(),
    }
}

/// Waits until `/readyz` answers 200 (the database is reachable and migrated).
pub async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "synthgate at {base} did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The body of `GET {base}{path}` as text, whatever the status (`/metrics`, `/v1/tools`).
pub async fn get_text(client: &reqwest::Client, base: &str, path: &str) -> String {
    client
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// POSTs a job; asserts 202 and returns its id.
pub async fn submit(client: &reqwest::Client, base: &str, body: &Value) -> String {
    let resp = client
        .post(format!("{base}/v1/jobs"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let job: Value = resp.json().await.unwrap();
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_owned()
}

/// The job object over HTTP.
pub async fn job(client: &reqwest::Client, base: &str, id: &str) -> Value {
    client
        .get(format!("{base}/v1/jobs/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `service` until the job is terminal; fails loudly, with the end of the service log,
/// after `timeout`. Errors while polling (the database away) are retried until the deadline.
pub async fn wait_for_job(
    client: &reqwest::Client,
    service: &Service,
    id: &str,
    timeout: Duration,
) -> Value {
    let base = &service.base;
    let deadline = Instant::now() + timeout;
    let mut last = Value::Null;
    loop {
        if let Ok(r) = client.get(format!("{base}/v1/jobs/{id}")).send().await
            && r.status().is_success()
        {
            last = r.json().await.unwrap();
            let status = last["status"].as_str().unwrap_or_default();
            if ["completed", "failed", "cancelled"].contains(&status) {
                return last;
            }
        }
        assert!(
            Instant::now() < deadline,
            "job {id} not finished in {timeout:?}: {last}\n{}",
            log_tail(&service.log)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends SIGTERM (a graceful stop) to a child.
pub fn sigterm(child: &Child) {
    let pid = child.id().expect("the child is still running");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid} failed");
}

/// The last lines of a service log, for failure messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Writes a service config whose model alias `writer` (model `mock-writer`) is served by the
/// mock LLM at `endpoint`, with `workers` records (and as many LLM requests) in flight per
/// process. Port, database and replica id come from the environment of each process.
pub fn write_llm_config(dir: &Path, name: &str, endpoint: &str, workers: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            r#"workers: {{count: {workers}, claim_batch_size: {workers}, poll_interval_ms: 50, write_interval_ms: 20}}
llm: {{retry_base_delay_ms: 10}}
logging: {{level: info}}
model_providers:
  - {{name: mock, endpoint: "{endpoint}", api_key: "sk-test-not-a-secret"}}
model_configs:
  - alias: writer
    model: mock-writer
    provider: mock
    inference_parameters: {{max_parallel_requests: {workers}}}
"#
        ),
    )
    .unwrap();
    path
}

/// A job of `n` records with one traced `llm-text` column, `answer`.
pub fn llm_job(n: u64) -> Value {
    json!({
        "num_records": n,
        "seed": 7,
        "config": {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["rivers", "bridges", "comets"]}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "One line about {{ topic }}.", "with_trace": "all_messages"}
        ]}
    })
}

/// What [`assert_exactly_once`] found.
pub struct Once {
    /// Records claimed more than once (re-run after a lost lease or a requeue).
    pub reruns: i64,
}

/// Asserts, in SQL, that job `id` has exactly `n` records with distinct indices `0..n`, each
/// `completed`, no chunk left leased; and that every record has exactly one trace of `answer`,
/// the one of the run whose values were stored.
pub async fn assert_exactly_once(pool: &PgPool, id: &str, n: i64) -> Once {
    let job = Uuid::parse_str(id).unwrap();
    let (rows, distinct, completed, leased, min_idx, max_idx, reruns): (
        i64,
        i64,
        i64,
        i64,
        Option<i64>,
        Option<i64>,
        i64,
    ) = sqlx::query_as(
        "select count(*), count(distinct idx), count(*) filter (where status = 'completed'), \
                (select count(*) from chunks where job_id = $1), min(idx), max(idx), \
                count(*) filter (where attempts > 1) \
         from records where job_id = $1",
    )
    .bind(job)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(rows, n, "record rows");
    assert_eq!(distinct, n, "a record index appears twice");
    assert_eq!((min_idx, max_idx), (Some(0), Some(n - 1)), "index range");
    assert_eq!(completed, n, "records not completed");
    assert_eq!(leased, 0, "chunks left after the job finished");

    let traces: Vec<(String, i64, i64)> = sqlx::query_as(
        "select t.column_name, count(*), count(distinct t.record_id) \
         from traces t join records r on r.id = t.record_id \
         where r.job_id = $1 group by t.column_name",
    )
    .bind(job)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(
        traces,
        vec![("answer".to_owned(), n, n)],
        "one trace of `answer` per record"
    );
    // The trace is the one of the run that wrote the values: its final assistant message is the
    // stored answer.
    let mismatched: i64 = sqlx::query_scalar(
        "select count(*) from traces t join records r on r.id = t.record_id \
         where r.job_id = $1 and t.column_name = 'answer' \
           and (t.messages -> -1 -> 'content' -> 0 ->> 'text') \
               is distinct from (r.\"values\" ->> 'answer')",
    )
    .bind(job)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        mismatched, 0,
        "traces that do not match their record's values"
    );
    Once { reruns }
}
