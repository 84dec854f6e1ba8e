//! The binary refuses a bad config with a non-zero exit and a message naming the key.

use std::process::Command;

fn synthgate(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_synthgate"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("SYNTHGATE_CONFIG")
        // A server started here never fetches ruff into the working tree.
        .env("SYNTHGATE__VALIDATORS__RUFF_DOWNLOAD", "false")
        .output()
        .expect("run synthgate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn config_check_accepts_the_shipped_file() {
    let (code, out) = synthgate(
        &["config", "check", "--config", "config/synthgate.yaml"],
        &[],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("config OK"), "{out}");
}

#[test]
fn config_check_names_every_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "workers:\n  count: 0\nmodel_configs:\n  - {alias: m, model: x, provider: nowhere}\n",
    )
    .unwrap();
    let (code, out) = synthgate(
        &["config", "check", "--config", path.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("workers.count"), "{out}");
    assert!(out.contains("model_configs[0].provider"), "{out}");
}

/// Issue 31's five problems in one run, as the binary prints them: a type error, an unknown
/// key, a bad enum value, a value out of range and a `key_env` naming an unset variable.
#[test]
fn config_check_shows_five_problems_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("five.yaml");
    std::fs::write(
        &path,
        "workers: {count: many, cuont: 3}
\
         model_providers: [{name: a, endpoint: 'http://a', provider_type: nope}]
\
         limits: {max_page_size: 0}
\
         auth: {api_keys: [{name: k, key_env: SYNTHGATE_TEST_UNSET_KEY}]}
",
    )
    .unwrap();
    let (code, out) = synthgate(
        &["config", "check", "--config", path.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    for key in [
        "`workers.count`",
        "`workers.cuont`",
        "`model_providers[0].provider_type`",
        "`limits.max_page_size`",
        "`auth.api_keys[0]`",
    ] {
        assert!(out.contains(key), "{key} missing from: {out}");
    }
}

#[test]
fn env_override_errors_name_the_key_and_serve_refuses_to_start() {
    let (code, out) = synthgate(
        &["serve", "--config", "config/synthgate.yaml"],
        &[("SYNTHGATE__SERVER__PORT", "not-a-port")],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("server.port"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub.yaml");
    std::fs::write(&path, "database:\n  url: ${env:SYNTHGATE_TEST_UNSET_VAR}\n").unwrap();
    let (code, out) = synthgate(
        &["config", "check", "--config", path.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("database.url") && out.contains("SYNTHGATE_TEST_UNSET_VAR"),
        "{out}"
    );
}

#[test]
fn a_models_mcp_servers_typo_stops_serve_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.yaml");
    std::fs::write(
        &path,
        "model_providers: [{name: p, endpoint: 'http://127.0.0.1:9/v1'}]\n\
         model_configs: [{alias: m, model: x, provider: p, mcp_servers: [serach]}]\n\
         mcp_providers: [{name: search, command: /bin/true}]\n",
    )
    .unwrap();
    let (code, out) = synthgate(&["serve", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("config key `model_configs[0].mcp_servers[0]`: unknown MCP provider 'serach' (defined: search)"),
        "{out}"
    );
}

/// Each MCP provider is logged once at start with its transport, and nothing it holds that
/// may be secret (endpoint, api key, headers, command, env) reaches the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_each_mcp_providers_transport_once_without_secrets() {
    use crate::process::{free_port, start_serve, wait_ready};
    synthgate::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.yaml");
    std::fs::write(
        &path,
        "logging: {level: info}\n\
         mcp_providers:\n\
         - {name: web, provider_type: streamable_http, endpoint: 'http://127.0.0.1:9/mcp-endpoint-secret',\n\
         \x20  api_key: mcp-key-secret, headers: {X-Auth: mcp-header-secret}}\n\
         - {name: files, command: /bin/command-secret, env: {TOKEN: env-secret}}\n",
    )
    .unwrap();
    let db = dir.path().join("db.sqlite");
    let log = dir.path().join("serve.log");
    let mut service = start_serve(
        free_port(),
        Some(&path),
        &[("SYNTHGATE__DATABASE__SQLITE_PATH", db.to_str().unwrap())],
        &log,
    );
    wait_ready(&reqwest::Client::new(), &service.base).await;
    service.child.kill().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("MCP provider configured"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("web") && lines[0].contains("streamable_http"),
        "{text}"
    );
    assert!(
        lines[1].contains("files") && lines[1].contains("stdio"),
        "{text}"
    );
    for secret in ["secret", "127.0.0.1:9"] {
        assert!(!text.contains(secret), "{secret} in the log:\n{text}");
    }
}
