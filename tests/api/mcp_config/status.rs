//! What operators see: `GET /v1/tools` and `/readyz` per provider state, and that provider
//! secrets (stdio env, API keys, headers) appear in no response, no stored row and no file.

use serde_json::{Value, json};
use sqlx::Connection;
use synthgate_testkit::mock_mcp::MockMcpHttp;

use super::{AuthProxy, JOB_TIMEOUT, job, post};
use crate::backends;
use crate::db::Backend;
use crate::helpers::TestApp;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_bin, mock_mcp_stdio, run_job, tool_job};

fn echo_script() -> Value {
    json!({"rules": [
        {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
        {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
    ]})
}

fn by_name<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| v[key] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_and_readyz_report_each_providers_state() {
    let events = Events::new();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        echo_script(),
        vec![
            mock_mcp_stdio("mock", &events.path),
            json!({"name": "broken", "command": "/nonexistent"}),
            // In no server tool config, so only a job's own tool config reaches it.
            json!({"name": "gone", "command": "/nonexistent"}),
        ],
        vec![
            json!({"tool_alias": "t", "providers": ["mock"]}),
            json!({"tool_alias": "only_echo", "providers": ["mock"], "allow_tools": ["echo"],
                "max_tool_call_turns": 2, "timeout_sec": 7.5}),
            json!({"tool_alias": "b", "providers": ["broken"]}),
        ],
        |_| {},
    )
    .await;

    // Nothing connects before first use; readiness does not connect either.
    let (status, ready) = app.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["checks"]["database"], "ok", "{ready}");
    assert_eq!(
        ready["checks"]["mcp"],
        json!({"broken": "idle", "gone": "idle", "mock": "idle"}),
        "{ready}"
    );
    assert!(events.lines().is_empty(), "{:?}", events.lines());

    // Listing connects and lists.
    let (status, tools) = app.get("/v1/tools").await;
    assert_eq!(status, 200, "{tools}");
    let names: Vec<&str> = tools["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["broken", "gone", "mock"], "name order");
    let mock = by_name(&tools["providers"], "name", "mock");
    assert_eq!(mock["state"], "connected", "{mock}");
    assert_eq!(mock["transport"], "stdio", "{mock}");
    assert_eq!(mock["session_scope"], "shared", "{mock}");
    assert_eq!(mock["sessions"], 1, "{mock}");
    let listed: Vec<&str> = mock["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for tool in ["echo", "add", "image", "whoami"] {
        assert!(listed.contains(&tool), "{tool} not in {listed:?}");
    }
    assert!(!listed.contains(&"bonus"), "{listed:?}");
    let broken = by_name(&tools["providers"], "name", "broken");
    assert_eq!(broken["state"], "unavailable", "{broken}");
    // A code, not the server's text (any key may list the tools; the text is in the log).
    assert_eq!(broken["last_error_code"], "connect_failed", "{broken}");
    assert!(broken.get("last_error").is_none(), "{broken}");

    let t = by_name(&tools["tool_configs"], "tool_alias", "t");
    assert_eq!(t["providers"], json!(["mock"]));
    assert_eq!(t["max_tool_call_turns"], 5, "the default");
    let echo = by_name(&t["tools"], "name", "echo");
    assert_eq!(echo["provider"], "mock", "{echo}");
    assert!(!echo["description"].as_str().unwrap().is_empty(), "{echo}");
    assert_eq!(
        echo["input_schema"]["properties"]["text"]["type"], "string",
        "{echo}"
    );
    assert_eq!(t["tools"].as_array().unwrap().len(), listed.len());
    let only = by_name(&tools["tool_configs"], "tool_alias", "only_echo");
    assert_eq!(only["allow_tools"], json!(["echo"]));
    assert_eq!(only["max_tool_call_turns"], 2);
    assert_eq!(only["timeout_sec"], 7.5);
    let only_names: Vec<&str> = only["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(only_names, ["echo"]);
    let b = by_name(&tools["tool_configs"], "tool_alias", "b");
    assert!(b.get("tools").is_none(), "{b}");
    assert_eq!(b["error"]["code"], "mcp_unavailable", "{b}");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("'broken'"),
        "{b}"
    );
    // One session and one tools/list served all three tool configs.
    assert_eq!(events.count("init"), 1, "{:?}", events.lines());
    assert_eq!(events.count("list"), 1, "{:?}", events.lines());

    // A provider that is down is reported but does not make the service unready.
    let (status, ready) = app.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(
        ready["checks"]["mcp"],
        json!({"broken": "unavailable", "gone": "idle", "mock": "connected"}),
        "{ready}"
    );

    // A failed provider stays `unavailable` after its cooldown ends: its last connect failed,
    // it has not come back.
    let spec = job(
        1,
        &[("answer", "writer", "mine", "Go.")],
        json!([]),
        json!([{"tool_alias": "mine", "providers": ["gone"]}]),
    );
    let (status, body) = app.create_job(&spec).await;
    assert_eq!(status, 503, "{body}");
    let deadline = std::time::Instant::now() + JOB_TIMEOUT;
    let gone = loop {
        // Lists only the server's tool configs, so it does not retry `gone`.
        let (_, tools) = app.get("/v1/tools").await;
        let gone = by_name(&tools["providers"], "name", "gone").clone();
        if gone.get("retry_in_ms").is_none() {
            break gone;
        }
        assert!(std::time::Instant::now() < deadline, "{gone}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(gone["state"], "unavailable", "{gone}");
    // A code, not the server's text (any key may list the tools; the text is in the log).
    assert_eq!(gone["last_error_code"], "connect_failed", "{gone}");
    assert!(gone.get("last_error").is_none(), "{gone}");
    let (status, ready) = app.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["checks"]["mcp"]["gone"], "unavailable", "{ready}");
    app.stop().await;
}

const ENV_SECRET: &str = "s3cr3t-value-xyz";
const KEY_SECRET: &str = "http-key-s3cr3t-abc";
const HEADER_SECRET: &str = "header-s3cr3t-987";

/// Every piece of data the database holds, as text: the SQLite files (WAL included), or a
/// Postgres XML dump of every table.
async fn database_text(app: &TestApp) -> String {
    match app.db.backend {
        Backend::Sqlite => {
            let file = app.db.url.strip_prefix("sqlite://").unwrap();
            let dir = std::path::Path::new(file).parent().unwrap();
            let mut all = Vec::new();
            for entry in std::fs::read_dir(dir).unwrap() {
                all.extend(std::fs::read(entry.unwrap().path()).unwrap());
            }
            assert!(all.len() > 4096, "the database files are there");
            String::from_utf8_lossy(&all).into_owned()
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&app.db.url).await.unwrap();
            let dump: String = sqlx::query_scalar("select database_to_xml(true, false, '')::text")
                .fetch_one(&mut conn)
                .await
                .unwrap();
            let _ = conn.close().await;
            dump
        }
    }
}

fn assert_secret_free(what: &str, text: &str) {
    for secret in [ENV_SECRET, KEY_SECRET, HEADER_SECRET] {
        assert!(!text.contains(secret), "{secret} in {what}: {text}");
    }
}

async fn secrets_appear_nowhere(backend: Backend) {
    let events = Events::new();
    let env_seen = events.path.with_file_name("env-seen");
    let http = MockMcpHttp::start(Default::default()).await.unwrap();
    let proxy = AuthProxy::start(http.addr(), KEY_SECRET).await;
    // A stdio server that writes down the secret it was given, so the test knows it got it.
    let script = format!(
        "printf %s \"$SECRET_TOKEN\" > '{}' && exec '{}' stdio",
        env_seen.display(),
        mock_mcp_bin()
    );
    let (app, _llm) = app_with_tools(
        backend,
        echo_script(),
        vec![
            json!({"name": "stdio", "command": "/bin/sh", "args": ["-c", script],
                "env": {"SECRET_TOKEN": ENV_SECRET,
                    "MOCK_MCP_EVENTS": events.path.to_str().unwrap()}}),
            json!({"name": "http", "provider_type": "streamable_http", "endpoint": proxy.url(),
                "api_key": KEY_SECRET, "headers": {"X-Extra": HEADER_SECRET}}),
            json!({"name": "stdio-broken", "command": "/nonexistent",
                "args": ["--flag"], "env": {"SECRET_TOKEN": ENV_SECRET}}),
            // Port 9 (discard) on loopback: nothing listens, so the connect is refused.
            json!({"name": "http-broken", "provider_type": "streamable_http",
                "endpoint": "http://127.0.0.1:9/mcp", "api_key": KEY_SECRET,
                "headers": {"X-Extra": HEADER_SECRET}}),
        ],
        vec![
            json!({"tool_alias": "s", "providers": ["stdio"]}),
            json!({"tool_alias": "h", "providers": ["http"]}),
            json!({"tool_alias": "sb", "providers": ["stdio-broken"]}),
            json!({"tool_alias": "hb", "providers": ["http-broken"]}),
        ],
        |_| {},
    )
    .await;

    let spec = job(
        2,
        &[
            ("a", "writer", "s", "Go {{ n }}."),
            ("b", "writer", "h", "Go {{ n }}."),
        ],
        json!([]),
        json!([]),
    );
    let done = run_job(&app, &spec, JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 2, "{done}");
    // The secrets were in use: the child got its env, the server got the key.
    assert_eq!(std::fs::read_to_string(&env_seen).unwrap(), ENV_SECRET);
    assert_eq!(events.calls("echo"), 2);
    let bearer = format!("Bearer {KEY_SECRET}");
    assert!(
        proxy
            .seen()
            .iter()
            .any(|(_, a)| a.as_deref() == Some(&bearer))
    );

    let id = done["id"].as_str().unwrap();
    let mut bodies: Vec<(String, String)> = Vec::new();
    for path in [
        format!("/v1/jobs/{id}"),
        "/v1/jobs".to_owned(),
        format!("/v1/jobs/{id}/records"),
    ] {
        let (status, body) = app.get_text(&path).await;
        assert_eq!(status, 200, "{path}: {body}");
        bodies.push((path, body));
    }
    for r in app.all_records(id).await {
        let path = format!("/v1/records/{}/trace", r["id"].as_str().unwrap());
        let (status, body) = app.get_text(&path).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains("hi"), "{path}: {body}");
        bodies.push((path, body));
    }
    for alias in ["sb", "hb"] {
        for path in ["/v1/jobs", "/v1/preview"] {
            let (status, body) = post(&app, path, &tool_job(alias, 1)).await;
            assert_eq!(status, 503, "{alias} {path}: {body}");
            assert_eq!(body["error"]["code"], "mcp_unavailable", "{body}");
            bodies.push((format!("POST {path} with {alias}"), body.to_string()));
        }
    }
    // Listed after the failures, so the providers' last errors are in it.
    for path in ["/v1/tools", "/readyz", "/metrics"] {
        let (status, body) = app.get_text(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        bodies.push((path.to_owned(), body));
    }
    let tools = &bodies.iter().find(|(p, _)| p == "/v1/tools").unwrap().1;
    assert!(
        tools.contains("http-broken") && tools.contains("last_error"),
        "{tools}"
    );
    for (what, body) in &bodies {
        assert_secret_free(what, body);
    }
    assert_secret_free("the database", &database_text(&app).await);
    app.stop().await;
}

backends!(secrets, secrets_appear_nowhere);

/// `mcp.connect_on_start`: every provider is connected and listed before the service answers;
/// one that cannot connect is `unavailable` and the service starts and is ready all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_on_start_lists_tools_before_serving_and_survives_a_broken_provider() {
    let events = Events::new();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        echo_script(),
        vec![
            mock_mcp_stdio("mock", &events.path),
            json!({"name": "broken", "command": "/nonexistent"}),
        ],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |c| c.mcp.connect_on_start = true,
    )
    .await;

    // No request has used a tool yet: the start connected and listed.
    assert_eq!(events.count("init"), 1, "{:?}", events.lines());
    let (status, ready) = app.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready["checks"]["mcp"],
        json!({"broken": "unavailable", "mock": "connected"}),
        "{ready}"
    );
    // And the connected session is the one jobs use: no second handshake.
    let job = run_job(&app, &tool_job("t", 1), JOB_TIMEOUT).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(events.count("init"), 1, "{:?}", events.lines());
    app.stop().await;
}
