//! The database goes away mid-job: a private Postgres cluster (its own data directory and
//! port, so the test may stop it) is shut down under a running `synthgate serve` and started
//! again. The service must stay alive, report itself not ready while the database is away,
//! reconnect, and finish the job with every record completed exactly once.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;
use synthgate_testkit::mock_llm::{MockLlm, Script};
use uuid::Uuid;

use crate::process::{
    assert_exactly_once, free_port, llm_job, log_tail, sigterm, start_serve, submit, wait_for_job,
    wait_ready, write_llm_config,
};

/// A throwaway Postgres cluster in a temporary directory, listening on loopback only. Stopped
/// (immediately) and removed on drop.
struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    /// Run the server binaries as `postgres`: initdb refuses root.
    as_postgres: bool,
    dir: tempfile::TempDir,
}

impl PgCluster {
    /// Creates and starts a cluster, or `None` when the PostgreSQL server binaries are not
    /// installed (the caller skips).
    fn start() -> Option<PgCluster> {
        let out = std::process::Command::new("pg_config")
            .arg("--bindir")
            .output()
            .ok()?;
        let bin = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        if !bin.join("initdb").is_file() || !bin.join("pg_ctl").is_file() {
            return None;
        }
        let as_postgres = running_as_root();
        let dir = tempfile::tempdir().unwrap();
        if as_postgres {
            run("chown", &["postgres", dir.path().to_str().unwrap()]);
        }
        let cluster = PgCluster {
            data: dir.path().join("data"),
            bin,
            port: free_port(),
            as_postgres,
            dir,
        };
        cluster.pg(
            "initdb",
            &[
                "-D",
                cluster.data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
        );
        cluster.up();
        Some(cluster)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server and waits until it accepts connections.
    fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("postgres.log");
        self.pg(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    /// A fast shutdown: sessions are terminated, transactions in progress roll back.
    fn down(&self) {
        self.pg(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// Runs a server binary (as `postgres` when we are root); panics on failure.
    fn pg(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            std::process::Command::new(&program)
        };
        // pg_ctl's server outlives the command: it must not hold the test's output pipes.
        let status = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
        assert!(
            status.success(),
            "{} {args:?}: {status}\n{}",
            program.display(),
            std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
        );
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Best effort, and never a panic while unwinding: the server may already be down.
        let program = self.bin.join("pg_ctl");
        let args = ["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"];
        let mut cmd = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            std::process::Command::new(&program)
        };
        let _ = cmd
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn run(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
}

/// `/readyz` status and body.
async fn readyz(client: &reqwest::Client, base: &str) -> (u16, Value) {
    let resp = client
        .get(format!("{base}/readyz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("readyz answers while the database is away");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn completed(pool: &PgPool, job: Uuid) -> Option<i64> {
    sqlx::query_scalar("select count(*) from records where job_id = $1 and status = 'completed'")
        .bind(job)
        .fetch_one(pool)
        .await
        .ok()
}

const N: i64 = 2_000;

/// Postgres is stopped for about 3 s while a 2,000-record job runs, then started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_job_loses_and_doubles_nothing() {
    synthgate::install_crypto_provider();
    let Some(cluster) = crate::require::require(PgCluster::start(), || {
        "PostgreSQL's server binaries (pg_config --bindir) are not found: install \
         postgresql (.ci/run does)"
            .into()
    }) else {
        return;
    };
    let url = cluster.url();
    let script: Script = serde_json::from_value(json!({"faults": {"latency_ms": 50}})).unwrap();
    let mock = MockLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_llm_config(dir.path(), "synthgate.yaml", &mock.endpoint(), 20);
    let client = reqwest::Client::new();
    let env = [
        ("SYNTHGATE__DATABASE__URL", url.as_str()),
        ("SYNTHGATE__WORKERS__LEASE_TTL_SEC", "2"),
        // Scaled down with the lease: a failed write is known within a second, so the outage
        // outlasts the writer's retries (one lease time) as a long one would in production.
        ("SYNTHGATE__DATABASE__ACQUIRE_TIMEOUT_SEC", "1"),
    ];
    let mut service = start_serve(
        free_port(),
        Some(&config),
        &env,
        &dir.path().join("synthgate.log"),
    );
    wait_ready(&client, &service.base).await;
    let base = service.base.clone();
    let id = submit(&client, &base, &llm_job(N as u64)).await;
    let job = Uuid::parse_str(&id).unwrap();

    // Our own pool, with short acquire waits, for the checks.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(2))
        .connect(&url)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while completed(&pool, job).await.unwrap() < N / 10 {
        assert!(Instant::now() < deadline, "no progress before the outage");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    cluster.down();
    let stopped = Instant::now();
    // The outage itself is the scenario: long enough for writes to fail past the lease time
    // (2 s), for leases to expire and for the pool's connections to be dead.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        service.child.try_wait().unwrap().is_none(),
        "synthgate exited while the database was away\n{}",
        log_tail(&service.log)
    );
    let healthz = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(
        healthz.status(),
        200,
        "liveness does not depend on the database"
    );
    let (status, body) = readyz(&client, &base).await;
    assert_eq!(status, 503, "{body}");
    assert_ne!(body["checks"]["database"], "ok", "{body}");

    cluster.up();
    let restarted = Instant::now();
    let outage = restarted - stopped;
    // Progress again: more completed records than the first count after the restart.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut first = None;
    let resumed = loop {
        if let Some(c) = completed(&pool, job).await {
            match first {
                None => first = Some(c),
                Some(f) if c > f || c == N => break restarted.elapsed(),
                Some(_) => {}
            }
        }
        assert!(
            Instant::now() < deadline,
            "no progress after the database came back\n{}",
            log_tail(&service.log)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let done = wait_for_job(&client, &service, &id, Duration::from_secs(120)).await;
    let finished = restarted.elapsed();
    assert_eq!(
        done["status"],
        "completed",
        "{done}\n{}",
        log_tail(&service.log)
    );
    let once = assert_exactly_once(&pool, &id, N).await;
    // Usage is written with each record: batches the writer gave up on counted nothing, and
    // their re-runs count once.
    assert_eq!(done["usage"]["writer"]["requests"], N, "{done}");
    let (status, body) = readyz(&client, &base).await;
    assert_eq!(status, 200, "ready again: {body}");
    // Reported, not asserted: whether the writer gave up on a batch depends on timing.
    let log = std::fs::read_to_string(&service.log).unwrap_or_default();
    let given_up = log.matches("past the lease time").count();
    eprintln!(
        "db_faults: Postgres down for {:.2}s; progress resumed {:.2}s after it was back; job \
         finished {:.2}s after it was back; {} records re-run; {given_up} batches given up by \
         the writer; {} LLM requests for {N} records",
        outage.as_secs_f64(),
        resumed.as_secs_f64(),
        finished.as_secs_f64(),
        once.reruns,
        mock.stats().total_requests,
    );

    pool.close().await;
    sigterm(&service.child);
    let _ = tokio::time::timeout(Duration::from_secs(30), service.child.wait()).await;
    drop(cluster);
}
