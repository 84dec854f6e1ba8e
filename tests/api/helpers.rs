//! `spawn_app`: the only way tests start the gateway. Each app gets a fresh database (a temp
//! SQLite file or a new Postgres database) and a random port.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate::app::Running;
use synthgate::config::Config;

use crate::db::{Backend, TestDb};

/// A running gateway plus a client for it.
pub struct TestApp {
    pub addr: std::net::SocketAddr,
    pub client: reqwest::Client,
    pub db: TestDb,
    running: Option<Running>,
}

/// Test config: fast polling and short leases so recovery paths run in seconds.
pub fn test_config(db: &TestDb) -> Config {
    let mut config = Config::default();
    config.server.port = 0;
    config.server.shutdown_timeout_sec = 5;
    config.database.url = Some(db.url.clone().into());
    config.workers.poll_interval_ms = 50;
    config.workers.lease_ttl_sec = 3;
    config.workers.write_interval_ms = 20;
    // Tests never fetch ruff: scripts/test puts one on PATH, and a test without it sees the
    // Python validator unavailable, as it should. Nor do they find one that the README's start
    // command fetched into `./data/tools` (the default `tools_dir`) on this machine.
    config.validators.ruff_download = false;
    config.validators.tools_dir = "/nonexistent/synthgate-test-tools".into();
    config.datasets.decoder_program = Some(decoder_program());
    config
}

/// The dataset decoder the service starts: the `synthgate` binary, since this test binary is
/// the executable the in-process service runs in.
pub fn decoder_program() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_synthgate").into()
}

/// The importer's default limits, with the test's decoder program.
pub fn test_dataset_limits() -> synthgate::config::DatasetLimits {
    let mut limits = synthgate::config::DatasetLimits::default();
    limits.decoder.program = Some(decoder_program());
    limits
}

/// The gateway with one slow worker slot (one record a claim, a claim a second), which keeps
/// most records of a large job pending for a while: for cancelling or deleting one in flight.
pub async fn spawn_slow_worker_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |c| {
        c.workers.count = 1;
        c.workers.claim_batch_size = 1;
        c.workers.poll_interval_ms = 1000;
    })
    .await
}

/// Starts the gateway on `backend` with the default test config.
pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |_| {}).await
}

/// Starts the gateway after `tweak` adjusted the test config.
pub async fn spawn_app_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> TestApp {
    synthgate::telemetry::init_for_tests();
    synthgate::install_crypto_provider();
    spawn_app_on(TestDb::new(backend).await, tweak).await
}

/// Starts the gateway on `db`, which a test prepared, after `tweak` adjusted the test config.
pub async fn spawn_app_on(db: TestDb, tweak: impl FnOnce(&mut Config)) -> TestApp {
    synthgate::telemetry::init_for_tests();
    synthgate::install_crypto_provider();
    let mut config = test_config(&db);
    tweak(&mut config);
    let running = synthgate::app::start(config).await.expect("app starts");
    TestApp {
        addr: running.addr,
        client: reqwest::Client::new(),
        db,
        running: Some(running),
    }
}

/// The app with the mock LLM answering `script` as model provider `mock`, and one server
/// model alias `writer` (model `mock-writer`) on it, then `tweak`. LLM retries wait 10 ms.
pub async fn app_with_mock_llm(
    backend: Backend,
    script: Value,
    tweak: impl FnOnce(&mut Config),
) -> (TestApp, synthgate_testkit::mock_llm::MockLlm) {
    use synthgate_testkit::mock_llm::{MockLlm, Script};
    let script: Script = serde_json::from_value(script).unwrap();
    let mock = MockLlm::start(script).await.unwrap();
    let endpoint = mock.endpoint();
    let app = spawn_app_with(backend, move |c| {
        c.llm.retry_base_delay_ms = 10;
        c.model_providers =
            vec![serde_json::from_value(json!({"name": "mock", "endpoint": endpoint})).unwrap()];
        c.model_configs = vec![
            serde_json::from_value(
                json!({"alias": "writer", "model": "mock-writer", "provider": "mock"}),
            )
            .unwrap(),
        ];
        tweak(c);
    })
    .await;
    (app, mock)
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// POSTs a JSON job; returns status and body.
    pub async fn create_job(&self, body: &Value) -> (u16, Value) {
        let resp = self
            .client
            .post(self.url("/v1/jobs"))
            .json(body)
            .send()
            .await
            .expect("request");
        status_json(resp).await
    }

    /// POSTs `body` as it is, with `content_type`; returns status and body.
    pub async fn post_raw(&self, path: &str, content_type: &str, body: String) -> (u16, Value) {
        let resp = self
            .client
            .post(self.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("request");
        status_json(resp).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("request");
        status_json(resp).await
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let resp = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("request");
        (resp.status().as_u16(), resp.text().await.expect("body"))
    }

    /// Polls the job until it is terminal; fails loudly after `timeout`.
    pub async fn wait_for_job(&self, id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, job) = self.get(&format!("/v1/jobs/{id}")).await;
            assert_eq!(status, 200, "{job}");
            let s = job["status"].as_str().unwrap_or_default();
            if ["completed", "failed", "cancelled"].contains(&s) {
                return job;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} not finished in {timeout:?}: {job}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The events of job `id`'s stream with `query` (e.g. `tool_calls=true`), read until the
    /// server ends it after `done`: `(event name, data)` pairs.
    pub async fn job_events(&self, id: &str, query: &str) -> Vec<(String, Value)> {
        sse_events(self.open_job_events(id, query).await).await
    }

    /// `GET /v1/jobs/{id}/events?{query}`, answered: the handler subscribes before it answers,
    /// so from here on nothing the stream would carry is missed. Read it with [`sse_events`].
    pub async fn open_job_events(&self, id: &str, query: &str) -> reqwest::Response {
        let resp = self
            .client
            .get(self.url(&format!("/v1/jobs/{id}/events?{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        resp
    }

    /// All records of a job through the paged JSON API.
    pub async fn all_records(&self, id: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/jobs/{id}/records?limit=1000&cursor={c}"),
                None => format!("/v1/jobs/{id}/records?limit=1000"),
            };
            let (status, page) = self.get(&path).await;
            assert_eq!(status, 200, "{page}");
            out.extend(page["records"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return out,
            }
        }
    }

    /// Graceful shutdown (as on SIGTERM), then a new app on the same database.
    pub async fn restart(mut self, tweak: impl FnOnce(&mut Config)) -> TestApp {
        if let Some(r) = self.running.take() {
            r.shutdown.cancel();
            r.wait().await;
        }
        let stuck = self.count_in_progress().await;
        assert_eq!(stuck, 0, "a graceful shutdown left records in_progress");
        let mut config = test_config(&self.db);
        tweak(&mut config);
        let running = synthgate::app::start(config).await.expect("app restarts");
        TestApp {
            addr: running.addr,
            client: reqwest::Client::new(),
            db: self.db,
            running: Some(running),
        }
    }

    /// Records of all jobs that are `in_progress` right now.
    pub async fn count_in_progress(&self) -> u64 {
        let store = self.db.open_another().await;
        let all = synthgate::store::JobSelect::Page {
            owner: None,
            before: None,
            limit: 1000,
            filter: &Default::default(),
        };
        let jobs = store.job_summaries(all, 0).await.expect("list jobs");
        jobs.iter().map(|s| s.counts.in_progress).sum()
    }

    /// Shuts the app down, then checks that no record was left `in_progress`.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown.cancel();
            r.wait().await;
        }
        let stuck = self.count_in_progress().await;
        assert_eq!(stuck, 0, "records left in_progress after shutdown");
    }
}

pub async fn status_json(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or_else(|_| json!({"raw": text}));
    (status, body)
}

/// A config with samplers and expressions only (no LLM), DataDesigner's serialized shape.
pub fn sampler_config() -> Value {
    json!({
        "data_designer": {
            "columns": [
                {"name": "topic", "column_type": "sampler", "sampler_type": "category",
                 "params": {"values": ["math", "history", "art"], "weights": [3, 1, 1]}},
                {"name": "difficulty", "column_type": "sampler", "sampler_type": "uniform",
                 "params": {"low": 1, "high": 10, "decimal_places": 1}},
                {"name": "id", "column_type": "sampler", "sampler_type": "uuid", "params": {}},
                {"name": "secret", "column_type": "sampler", "sampler_type": "bernoulli",
                 "params": {"p": 0.5}, "drop": true},
                {"name": "title", "column_type": "expression",
                 "expr": "{{ topic | upper }} level {{ difficulty }}"},
                {"name": "hard", "column_type": "expression", "expr": "{{ difficulty > 5 }}", "dtype": "bool"}
            ],
            "model_configs": [],
            "tool_configs": [],
            "seed_config": null,
            "constraints": null, "processors": null, "profilers": null
        },
        "library_version": "0.9.7"
    })
}

/// Runs an async test body once per backend: `backends!(name, body_fn);` makes
/// `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! backends {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$body($crate::db::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$body($crate::db::Backend::Postgres).await
            }
        }
    };
}

/// The events of an event stream until the server closes it (after `done`), as (name, data).
pub async fn sse_events(resp: reqwest::Response) -> Vec<(String, Value)> {
    let body = tokio::time::timeout(Duration::from_secs(60), resp.text())
        .await
        .expect("the stream ends after done")
        .unwrap();
    body.split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_owned(), serde_json::from_str(data).ok()?))
        })
        .collect()
}
