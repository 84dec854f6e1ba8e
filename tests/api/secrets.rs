//! Secrets never leave the process: API keys of a model provider, of an MCP provider (bearer
//! and a custom header), a stdio MCP server's environment and the service's own API key are
//! set, a tool-using job runs (with failures), and then the database file, the service's log
//! (at debug level) and every response body are searched for the values. None may appear.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::{MockLlm, Script};
use synthgate_testkit::mock_mcp::{MockMcpHttp, Options};
use tokio::process::Command;

use crate::mcp_support::mock_mcp_bin;

const LLM_KEY: &str = "sk-live-SECRETLLM-5b1c9a";
const MCP_KEY: &str = "mcp-SECRETMCP-77a0e2";
const MCP_HEADER: &str = "hdr-SECRETHDR-31f4d8";
const STDIO_ENV: &str = "env-SECRETENV-c9d2e0";
const AUTH_KEY: &str = "auth-SECRETAUTH-0f6e1b2a";
const SECRETS: [&str; 5] = [LLM_KEY, MCP_KEY, MCP_HEADER, STDIO_ENV, AUTH_KEY];

fn assert_clean(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} contains the secret {s}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_database_logs_traces_or_responses() {
    synthgate::install_crypto_provider();
    let script: Script = serde_json::from_value(json!({"rules": [
        // Some records hit a provider error whose body is echoed into the record error.
        {"when": {"user_contains": "n=1"}, "reply": {"status": 400, "body": "bad request, key was checked"}},
        {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
        {"when": {"has_tools": true}, "reply": {"tool_calls": [
            {"name": "echo", "arguments": {"text": "over http"}},
            {"name": "whoami", "arguments": {}},
            {"name": "fail", "arguments": {}}]}}
    ]}))
    .unwrap();
    let llm = MockLlm::start(script).await.unwrap();
    let mcp = MockMcpHttp::start(Options::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("secrets.db");
    let config = dir.path().join("synthgate.yaml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mock_mcp = mock_mcp_bin();
    std::fs::write(
        &config,
        format!(
            r#"server: {{port: {port}}}
database: {{sqlite_path: "{db}"}}
workers: {{poll_interval_ms: 50}}
auth:
  api_keys: [{{name: team, key: "{AUTH_KEY}"}}]
model_providers:
  - {{name: mock, endpoint: "{llm}", api_key: "{LLM_KEY}"}}
model_configs:
  - {{alias: writer, model: mock-writer, provider: mock}}
mcp_providers:
  - name: remote
    provider_type: streamable_http
    endpoint: "{mcp}"
    api_key: "{MCP_KEY}"
    headers: {{X-Team-Secret: "{MCP_HEADER}"}}
  - name: local
    command: "{mock_mcp}"
    args: [stdio]
    env: {{TOKEN: "{STDIO_ENV}"}}
tool_configs:
  - {{tool_alias: remote, providers: [remote], allow_tools: [echo, fail]}}
  - {{tool_alias: local, providers: [local], allow_tools: [whoami]}}
"#,
            db = db.display(),
            llm = llm.endpoint(),
            mcp = mcp.url(),
        ),
    )
    .unwrap();
    let log_path = dir.path().join("synthgate.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_synthgate"))
        .args(["--config", config.to_str().unwrap(), "serve"])
        .env("RUST_LOG", "debug")
        .env("NO_COLOR", "1")
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
    let mut fetch =
        async |method: reqwest::Method, path: &str, body: Option<Value>, key: Option<&str>| {
            let mut req = client.request(method, format!("{base}{path}"));
            if let Some(k) = key {
                req = req.bearer_auth(k);
            }
            if let Some(b) = body {
                req = req.json(&b);
            }
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            bodies.push_str(&text);
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        };
    // Error bodies: a wrong key, and a job naming an unknown alias.
    let (s, _) = fetch(
        reqwest::Method::GET,
        "/v1/jobs",
        None,
        Some("wrong-key-0123456789"),
    )
    .await;
    assert_eq!(s, 401);
    let columns = |alias: &str| {
        json!([
        {"name": "n", "column_type": "sampler", "sampler_type": "category", "params": {"values": ["n=0", "n=1", "n=2"]}},
        {"name": "a", "column_type": "llm-text", "model_alias": "writer", "tool_alias": alias,
         "prompt": "{{ n }}: use the tools", "with_trace": "all_messages"}])
    };
    let (s, _) = fetch(
        reqwest::Method::POST,
        "/v1/jobs",
        Some(json!({"num_records": 1, "config": {"columns": columns("nope")}})),
        Some(AUTH_KEY),
    )
    .await;
    assert_eq!(s, 422);

    let mut ids = Vec::new();
    for alias in ["remote", "local"] {
        let (s, job) = fetch(
            reqwest::Method::POST,
            "/v1/jobs",
            Some(
                json!({"num_records": 12, "config": {"columns": columns(alias)},
                        "run_config": {"disable_early_shutdown": true}}),
            ),
            Some(AUTH_KEY),
        )
        .await;
        assert_eq!(s, 202, "{job}");
        ids.push(job["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, job) = fetch(
                reqwest::Method::GET,
                &format!("/v1/jobs/{id}"),
                None,
                Some(AUTH_KEY),
            )
            .await;
            if ["completed", "failed"].contains(&job["status"].as_str().unwrap_or_default()) {
                assert!(job["counts"]["completed"].as_u64().unwrap() > 0, "{job}");
                assert!(
                    job["counts"]["failed"].as_u64().unwrap() > 0,
                    "some records fail: {job}"
                );
                break;
            }
            assert!(Instant::now() < deadline, "{job}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (_, page) = fetch(
            reqwest::Method::GET,
            &format!("/v1/jobs/{id}/records?include_traces=true"),
            None,
            Some(AUTH_KEY),
        )
        .await;
        for r in page["records"].as_array().unwrap() {
            let rid = r["id"].as_str().unwrap();
            fetch(
                reqwest::Method::GET,
                &format!("/v1/records/{rid}/trace"),
                None,
                Some(AUTH_KEY),
            )
            .await;
        }
        fetch(
            reqwest::Method::GET,
            &format!("/v1/jobs/{id}/records?format=jsonl&include_traces=true"),
            None,
            Some(AUTH_KEY),
        )
        .await;
    }
    for path in ["/v1/tools", "/readyz", "/metrics", "/openapi.json"] {
        fetch(reqwest::Method::GET, path, None, Some(AUTH_KEY)).await;
    }
    // The tool results really went through both providers (so the secrets were in use).
    assert!(bodies.contains("over http"), "the HTTP provider answered");
    assert!(bodies.contains("pid="), "the stdio provider answered");
    assert!(
        bodies.contains("Error: tool failed: boom"),
        "a tool error reached the trace"
    );

    // Stop the service, so the log and the database are complete.
    nix_term(&child);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;

    assert_clean("the response bodies", &bodies);
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.contains("MCP session open"),
        "the log is at debug level and covers MCP: {log}"
    );
    assert_clean("the service log", &log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("secrets.db") {
            let bytes = std::fs::read(&path).unwrap();
            assert_clean(&name, &String::from_utf8_lossy(&bytes));
        }
    }
    // The secrets were really sent where they belong (so the search above could have hit).
    let sent = llm.requests();
    assert!(sent.iter().any(|r| {
        r.headers
            .get("authorization")
            .is_some_and(|h| h.contains(LLM_KEY))
    }));
    mcp.shutdown().await;
}

/// SIGTERM, for a graceful stop that flushes the log and closes the database.
fn nix_term(child: &tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
}

/// An MCP provider's OAuth client secret stays out of the log even when the authorization
/// server's refusal repeats the token request (the probe saw it in three ERROR lines of the MCP
/// transport). The service runs as a process at debug level, the provider's token request is
/// refused with the credentials echoed back, and the log is searched: the refusal is there, the
/// secret is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_secret_echoed_by_the_authorization_server_stays_out_of_the_log() {
    use synthgate_testkit::mock_mcp::OAuthOptions;
    const OAUTH_SECRET: &str = "oauth-SECRETOAUTH-8e21c4";
    synthgate::install_crypto_provider();
    let mcp = MockMcpHttp::start(Options {
        oauth: Some(OAuthOptions {
            client_id: "batch".into(),
            client_secret: "the-right-one-0123456789".into(),
            token_ttl: Duration::from_secs(60),
            scoped_tools: Vec::new(),
            echo_refused: true,
        }),
        ..Options::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("synthgate.yaml");
    let port = crate::process::free_port();
    std::fs::write(
        &config,
        format!(
            r#"server: {{port: {port}}}
database: {{sqlite_path: "{db}"}}
logging: {{level: "debug"}}
mcp_providers:
  - name: secure
    provider_type: streamable_http
    endpoint: "{mcp}"
    oauth: {{client_id: batch, client_secret: "{OAUTH_SECRET}"}}
tool_configs:
  - {{tool_alias: t, providers: [secure]}}
"#,
            db = dir.path().join("oauth.db").display(),
            mcp = mcp.url(),
        ),
    )
    .unwrap();
    let log = dir.path().join("synthgate.log");
    let mut service = crate::process::start_serve(port, Some(&config), &[], &log);
    let client = reqwest::Client::new();
    crate::process::wait_ready(&client, &service.base).await;
    // Listing the tools connects the provider: discovery, then the refused token request.
    let tools = crate::process::get_text(&client, &service.base, "/v1/tools").await;
    assert!(!tools.contains(OAUTH_SECRET), "{tools}");
    assert!(mcp.oauth().unwrap().rejected_clients() >= 1);
    crate::process::sigterm(&service.child);
    let _ = tokio::time::timeout(Duration::from_secs(20), service.child.wait()).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("invalid_client"),
        "the refusal was logged: {}",
        crate::process::log_tail(&log)
    );
    // The echo reached the log, redacted: without the redaction this test would see it.
    assert!(
        text.contains("client_secret=[redacted]"),
        "{}",
        crate::process::log_tail(&log)
    );
    assert!(!text.contains(OAUTH_SECRET), "the log holds the secret");
}
