//! Shared set-up for the MCP tests: the `mock-mcp` test double as a stdio provider with an
//! events file, and a gateway wired to it and to the scripted mock LLM.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;
use synthgate_testkit::mock_llm::MockLlm;

use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

/// The `mock-mcp` binary of this test run's target dir (built with the workspace, or on first
/// use when the run built only this package).
pub fn mock_mcp_bin() -> String {
    let path = synthgate_testkit::bin_path("mock-mcp");
    path.to_str().expect("a UTF-8 target dir").to_owned()
}

/// The events file `mock-mcp` appends to (`init <pid>`, `list <pid>`, `call <pid> <tool>`,
/// `cancel <pid> slow`), in a temp dir that lives as long as this value.
pub struct Events {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Events {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.log");
        Self { _dir: dir, path }
    }

    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Lines whose first word is `kind` (`init`, `list`, `call`, `cancel`).
    pub fn count(&self, kind: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.split(' ').next() == Some(kind))
            .count()
    }

    /// Calls of `tool`.
    pub fn calls(&self, tool: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.starts_with("call ") && l.ends_with(&format!(" {tool}")))
            .count()
    }

    /// Pids of the server processes that answered `initialize`, oldest first.
    pub fn pids(&self) -> Vec<u32> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("init "))
            .filter_map(|p| p.trim().parse().ok())
            .collect()
    }
}

/// A stdio provider running `mock-mcp` with its events going to `events`.
pub fn mock_mcp_stdio(name: &str, events: &Path) -> Value {
    json!({
        "name": name,
        "provider_type": "stdio",
        "command": mock_mcp_bin(),
        "args": ["stdio"],
        "env": {"MOCK_MCP_EVENTS": events.to_str().unwrap()},
    })
}

/// A gateway with the mock LLM (model alias `writer`, OpenAI protocol), the given MCP
/// providers and tool configs, then `tweak`.
pub async fn app_with_tools(
    backend: Backend,
    script: Value,
    providers: Vec<Value>,
    tool_configs: Vec<Value>,
    tweak: impl FnOnce(&mut Config),
) -> (TestApp, MockLlm) {
    app_with_mock_llm(backend, script, move |c| {
        c.model_configs[0]
            .inference_parameters
            .max_parallel_requests = 256;
        c.mcp_providers = providers
            .into_iter()
            .map(|p| serde_json::from_value(p).unwrap())
            .collect();
        c.tool_configs = tool_configs
            .into_iter()
            .map(|t| serde_json::from_value(t).unwrap())
            .collect();
        tweak(c);
    })
    .await
}

/// A job config: one sampler and one `llm-text` column `answer` using `tool_alias`, with its
/// full trace kept.
pub fn tool_job(tool_alias: &str, num_records: u32) -> Value {
    json!({"num_records": num_records, "config": {"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 0, "high": 100}},
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Use the tools for {{ n }}.", "tool_alias": tool_alias,
         "with_trace": "all_messages"}
    ]}})
}

/// The `answer` trace of record `id`.
pub async fn answer_trace(app: &TestApp, record_id: &str) -> Vec<Value> {
    let (status, t) = app
        .get(&format!("/v1/records/{record_id}/trace?column=answer"))
        .await;
    assert_eq!(status, 200, "{t}");
    t["traces"][0]["messages"].as_array().unwrap().clone()
}

/// Submits and waits; returns the finished job.
pub async fn run_job(app: &TestApp, job: &Value, timeout: Duration) -> Value {
    let (status, body) = app.create_job(job).await;
    assert_eq!(status, 202, "{body}");
    app.wait_for_job(body["id"].as_str().unwrap(), timeout)
        .await
}

#[tokio::test]
async fn smoke_a_tool_call_reaches_mock_mcp_and_comes_back() {
    let events = Events::new();
    // Three tools per tools/list page: the gateway must follow the cursors.
    let mut provider = mock_mcp_stdio("mock", &events.path);
    provider["env"]["MOCK_MCP_PAGE_SIZE"] = json!("3");
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
        ]}),
        vec![provider],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |_| {},
    )
    .await;
    let done = run_job(&app, &tool_job("t", 3), Duration::from_secs(30)).await;
    let offered = mock.requests()[0].body["tools"].as_array().unwrap().len();
    assert!(
        offered >= 11,
        "every page was read: {offered} tools offered"
    );
    assert!(events.count("list") >= 4, "one tools/list request per page");
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    assert_eq!(records[0]["values"]["answer"], "done");
    let trace = answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    assert_eq!(
        trace[1]["tool_calls"][0]["function"]["name"], "echo",
        "{trace:?}"
    );
    assert_eq!(trace[2]["content"][0]["text"], "hi", "{trace:?}");
    assert_eq!(events.count("init"), 1);
    assert_eq!(events.pids().len(), 1);
    assert_eq!(events.calls("echo"), 3);
    app.stop().await;
}

// --- Python MCP servers: the interpreter and tests/mcp/sse_server.py ----------------------
//
// The interpreter comes from `$SYNTHGATE_TEST_PYTHON` (scripts/test sets it to a venv built
// from scripts/requirements-test.txt). Without it, a `python3` that can import what the test
// needs is used; failing that the tests print why and pass without running, so a bare
// `cargo test` on a machine without Python still works.

/// Generous: the Python server spends about a second importing the SDK, more on a busy machine.
const SSE_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The interpreter for the official MCP SDK, or `None` (after saying why) to skip the test.
pub fn python() -> Option<String> {
    python_with("mcp.server.mcpserver")
}

/// The interpreter for a test that imports `module` (a dotted name), or `None` (after saying
/// why) to skip the test.
pub fn python_with(module: &str) -> Option<String> {
    if let Ok(python) = std::env::var("SYNTHGATE_TEST_PYTHON") {
        return Some(python);
    }
    let importable = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if importable {
        return Some("python3".into());
    }
    crate::require::skip(&format!(
        "SYNTHGATE_TEST_PYTHON is unset and python3 cannot import {module} (run scripts/test, \
         or pip install -r scripts/requirements-test.txt)"
    ));
    None
}

/// A running tests/mcp/sse_server.py, killed when dropped.
pub struct SseServer {
    pub child: tokio::process::Child,
    /// The SSE URL the server printed on its first stdout line.
    pub url: String,
    /// Its stdout after the URL (the `sleep` tool says `sleeping` there when a call starts);
    /// kept open so a later print cannot fail with a broken pipe.
    pub stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

/// Starts tests/mcp/sse_server.py on a free port, requiring `token` as a bearer token when
/// given; `None` when no Python with the MCP SDK is available.
pub async fn spawn_sse_server(token: Option<&str>) -> Option<SseServer> {
    use tokio::io::AsyncBufReadExt;

    let python = python()?;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/mcp/sse_server.py"
        ))
        .arg("0")
        .env_remove("SSE_SERVER_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    if let Some(token) = token {
        command.env("SSE_SERVER_TOKEN", token);
    }
    let mut child = command.spawn().expect("start the Python SSE server");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stdout = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(SSE_STARTUP_TIMEOUT, stdout.next_line())
        .await
        .expect("the server prints its URL in time")
        .expect("read the server's stdout")
        .expect("the server printed its URL before exiting");
    Some(SseServer { child, url, stdout })
}
