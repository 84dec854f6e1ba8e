//! `hf` seeds in a running server (the real binary, configured by file, the Hub token from
//! the environment variable `datasets.hf.token_env` names): a job seeded from a private
//! repository runs with the server's token; a second job downloads nothing; a job that
//! carries its own token (as DataDesigner's configs do) fetches with that token, and its stored
//! config holds the redaction marker instead. Then neither token may appear in any response
//! body, in the service's log (at debug level) or in the database file, and no token reached
//! the Hub's storage.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate_testkit::mock_hub::MockHub;
use tokio::process::Command;

const SERVER_TOKEN: &str = "hf_SERVERsecret_4c1e77";
const JOB_TOKEN: &str = "hf_JOBsecret_a92b10";

fn job(path: &str, token: Option<&str>) -> Value {
    let mut source = json!({"seed_type": "hf", "path": path});
    if let Some(t) = token {
        source["token"] = json!(t);
    }
    json!({
        "config": {
            "columns": [{"name": "label", "column_type": "expression", "expr": "{{ id }}: {{ text }}"}],
            "seed_config": {"source": source},
        },
        "num_records": 4,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_tokens_stay_on_the_server() {
    synthgate::install_crypto_provider();
    let hub = MockHub::start().await.unwrap();
    hub.set_token(Some(SERVER_TOKEN));
    hub.add_token(JOB_TOKEN);
    let mut csv = String::from("id,text\n");
    for i in 0..2000 {
        csv.push_str(&format!("{i},private row {i}\n"));
    }
    hub.add_dataset("acme/private", &[("data.csv", csv.as_bytes())], true);
    hub.add_dataset("acme/mine", &[("data.csv", b"id,text\n7,mine\n")], true);

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hub.db");
    let config = dir.path().join("synthgate.yaml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &config,
        format!(
            r#"server: {{port: {port}}}
database: {{sqlite_path: "{db}"}}
workers: {{poll_interval_ms: 50}}
datasets:
  hf: {{endpoint: "{hub}", token_env: SG_TEST_HUB_TOKEN, redirect_hosts: ["{storage}"]}}
"#,
            db = db.display(),
            hub = hub.endpoint(),
            storage = hub.storage(),
        ),
    )
    .unwrap();
    let log_path = dir.path().join("synthgate.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_synthgate"))
        .args(["--config", config.to_str().unwrap(), "serve"])
        .env("RUST_LOG", "debug")
        .env("NO_COLOR", "1")
        .env("SG_TEST_HUB_TOKEN", SERVER_TOKEN)
        .stdout(Stdio::from(
            std::fs::File::create(dir.path().join("stdout.log")).unwrap(),
        ))
        .stderr(Stdio::from(std::fs::File::create(&log_path).unwrap()))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.get(format!("{base}/readyz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "synthgate did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut bodies = String::new();
    let mut post = async |body: Value| {
        let resp = client
            .post(format!("{base}/v1/jobs"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        bodies.push_str(&text);
        (status, serde_json::from_str::<Value>(&text).unwrap())
    };

    // A job's own token fetches its private repository, and only that fetch.
    let (status, body) = post(job("datasets/acme/mine/data.csv", Some(JOB_TOKEN))).await;
    assert_eq!(status, 202, "{body}");
    let mine = body["id"].as_str().unwrap().to_owned();
    let resp = client
        .get(format!("{base}/v1/jobs/{mine}/config"))
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    let stored: Value = serde_json::from_str(&text).unwrap();
    let config_body = text;
    assert_eq!(
        stored["config"]["seed_config"]["source"]["token"],
        synthgate::domain::dataset::REDACTED_TOKEN,
        "{stored}"
    );
    let job_fetches: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|r| r.server == "hub")
        .collect();
    assert!(!job_fetches.is_empty());
    for r in &job_fetches {
        assert!(r.path.contains("acme/mine"), "{r:?}");
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {JOB_TOKEN}").as_str())
        );
    }
    // Resubmitting the stored config: the marker is not a token.
    let (status, body) = post(json!({"config": stored["config"], "num_records": 1})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_seed_config", "{body}");

    // The server's token opens the private repository; a second job downloads nothing.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, body) = post(job("datasets/acme/private/data.csv", None)).await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(hub.downloads("acme/private", "data.csv"), 1);
    for id in &ids {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let resp = client
                .get(format!("{base}/v1/jobs/{id}"))
                .send()
                .await
                .unwrap();
            let text = resp.text().await.unwrap();
            bodies.push_str(&text);
            let j: Value = serde_json::from_str(&text).unwrap();
            if j["status"] == "completed" {
                break;
            }
            assert!(
                !["failed", "cancelled"].contains(&j["status"].as_str().unwrap_or_default()),
                "{j}"
            );
            assert!(Instant::now() < deadline, "job {id} did not finish: {j}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let resp = client
            .get(format!("{base}/v1/jobs/{id}/records?format=jsonl"))
            .send()
            .await
            .unwrap();
        let text = resp.text().await.unwrap();
        bodies.push_str(&text);
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["label"], "0: private row 0", "{first}");
    }

    bodies.push_str(&config_body);
    child.kill().await.unwrap();
    let _ = child.wait().await;
    let log = std::fs::read_to_string(&log_path).unwrap();
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("hub.db")
        {
            stored.extend(std::fs::read(&p).unwrap());
        }
    }
    let stored = String::from_utf8_lossy(&stored);
    for secret in [SERVER_TOKEN, JOB_TOKEN] {
        assert!(!bodies.contains(secret), "a response contains {secret}");
        assert!(!log.contains(secret), "the log contains {secret}");
        assert!(!stored.contains(secret), "the database contains {secret}");
    }
    assert!(
        stored.contains("private row 1999"),
        "the seed rows are in the database"
    );
    for r in hub.requests() {
        if r.server == "cdn" {
            assert_eq!(r.authorization, None, "the token reached the CDN");
        } else {
            let token = if r.path.contains("acme/mine") {
                JOB_TOKEN
            } else {
                SERVER_TOKEN
            };
            assert_eq!(
                r.authorization.as_deref(),
                Some(format!("Bearer {token}").as_str()),
                "{r:?}"
            );
        }
    }
}
