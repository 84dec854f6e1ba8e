//! The web UI at `/ui`: its headers and routes over HTTP, then the page itself in a real
//! headless Chromium (Debian's `chromium`, driven over the DevTools protocol by Playwright in
//! `tests/ui/browser.py`) against a real synthgate with the mock LLM and the `mock-mcp` server.
//!
//! The browser tests skip, saying why, only where no Chromium or Playwright can be had; under
//! `CI=true` they fail instead, so CI never passes without having run them (`scripts/test`
//! installs both). Screenshots land in `target/ui-screenshots/`; `docs/screenshots/` holds the
//! committed copies docs/operations.md shows.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;

use crate::db::Backend;
use crate::helpers::{TestApp, sampler_config, spawn_app, spawn_app_with, status_json};
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio};

const KEY: &str = "ui-key-0123456789abcdef";
const XSS: &str = "<img src=x onerror=alert(1)>";
/// The XSS job's name: markup too, shown as text.
const XSS_NAME: &str = "labels <b>and</b> failures";
const WAIT: Duration = Duration::from_secs(60);

fn with_key(c: &mut Config) {
    c.auth = serde_json::from_value(json!({"api_keys": [{"name": "ui", "key": KEY}]})).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_assets_are_public_with_a_strict_csp() {
    let app = spawn_app_with(Backend::Sqlite, with_key).await;
    for (path, mime) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
        ("/ui/js/main.js", "text/javascript; charset=utf-8"),
    ] {
        // No key: the page is code, not data.
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let h = resp.headers();
        assert_eq!(h["content-type"], mime, "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(
            h["content-security-policy"],
            synthgate::api::ui::CSP,
            "{path}"
        );
        assert!(h.get("set-cookie").is_none(), "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{csp}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
    }
    let (status, html) = app.get_text("/ui").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"<script type="module" src="/ui/js/main.js"></script>"#));
    // /v1 stays behind the key, whatever the path looks like.
    for path in ["/v1/jobs", "/ui/../v1/jobs", "/v1/jobs?ui=1"] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 401, "{path}: {body}");
    }
    // Anything that is not an embedded file is a 404 with the usual envelope.
    for path in [
        "/ui/nope.js",
        "/ui/js/",
        "/ui/%2e%2e/Cargo.toml",
        "/ui/js/..%2fapp.css",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "not_found", "{path}: {body}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_ui_false_serves_no_page() {
    let app = spawn_app_with(Backend::Sqlite, |c| c.server.ui = false).await;
    for path in ["/", "/ui", "/ui/js/main.js"] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    app.stop().await;
}

/// A browser at the server's root is sent to the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_leads_to_the_page() {
    let app = spawn_app(Backend::Sqlite).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = client.get(app.url("/")).send().await.unwrap();
    assert_eq!(resp.status(), 307);
    assert_eq!(resp.headers()["location"], "/ui");
    // Followed, it is the page.
    let (status, page) = app.get_text("/").await;
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "{page}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_config_is_served_to_its_owner_only() {
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.auth = serde_json::from_value(json!({"api_keys": [
            {"name": "ui", "key": KEY}, {"name": "other", "key": "other-0123456789abcdef"}]}))
        .unwrap();
    })
    .await;
    let resp = app
        .client
        .post(app.url("/v1/jobs"))
        .bearer_auth(KEY)
        .json(&json!({"config": sampler_config(), "num_records": 2,
            "run_config": {"disable_early_shutdown": true}}))
        .send()
        .await
        .unwrap();
    let (status, job) = status_json(resp).await;
    assert_eq!(status, 202, "{job}");
    let path = format!("/v1/jobs/{}/config", job["id"].as_str().unwrap());
    let get = |key: &'static str| app.client.get(app.url(&path)).bearer_auth(key).send();
    let (status, body) = status_json(get(KEY).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["job_id"], job["id"]);
    // The inner DataDesigner object, as submitted.
    assert_eq!(body["config"], sampler_config()["data_designer"], "{body}");
    assert_eq!(body["run_config"], json!({"disable_early_shutdown": true}));
    let (status, body) = status_json(get("other-0123456789abcdef").await.unwrap()).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "job_not_found");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_takes_a_yaml_config_file_as_submit_does() {
    let app = spawn_app_with(Backend::Sqlite, |_| {}).await;
    let yaml = "columns:\n  - name: topic\n    column_type: sampler\n    sampler_type: category\n    params: {values: [a, b]}\n";
    let (status, body) = app
        .post_raw(
            "/v1/preview?num_records=3&seed=4",
            "application/yaml",
            yaml.into(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"].as_array().unwrap().len(), 3, "{body}");
    assert_eq!(body["seed"], 4);
    let (status, body) = app
        .post_raw("/v1/preview", "application/yaml", yaml.into())
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("num_records"),
        "{body}"
    );
    let (status, body) = app
        .post_raw("/v1/preview?num_records=1", "text/plain", yaml.into())
        .await;
    assert_eq!(status, 415, "{body}");
    app.stop().await;
}

// --- In the browser ----------------------------------------------------------------------

/// The Python with Playwright and the Chromium binary (see [`crate::require`]: `None` skips,
/// or fails under `CI=true`, where skipping would hide that the UI went untested).
fn browser() -> Option<(String, String)> {
    let chromium =
        std::env::var("SYNTHGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !std::path::Path::new(&chromium).exists() {
        crate::require::skip(&format!(
            "the browser tests cannot run: no Chromium at {chromium} (scripts/test installs \
             Debian's chromium)"
        ));
        return None;
    }
    let python = crate::mcp_support::python_with("playwright")?;
    Some((python, chromium))
}

/// Where the screenshots go: `target/ui-screenshots/`.
fn screenshot_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `tests/ui/browser.py` with `ctx`; asserts it ran every check in `expected` and that
/// each passed.
async fn run_browser(python: &str, ctx: Value, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("context.json");
    std::fs::write(&file, serde_json::to_vec(&ctx).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ui/browser.py");
    let out = tokio::time::timeout(
        Duration::from_secs(240),
        tokio::process::Command::new(python)
            .arg(script)
            .arg(&file)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser script finishes in time")
    .expect("start the browser script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .map(|r| serde_json::from_str(r).expect("RESULT is JSON"))
        .unwrap_or_else(|| panic!("no RESULT line\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    assert_eq!(
        result["failed"],
        json!({}),
        "browser checks failed\nstderr:\n{stderr}"
    );
    let passed: Vec<&str> = result["passed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(passed, expected, "stderr:\n{stderr}");
    assert!(out.status.success(), "stderr:\n{stderr}");
}

/// The mock model: the XSS column answers with markup (or a 400 for records labelled `fail
/// me`); the tool column reasons, calls `echo` and `image` in one turn, then answers.
fn script() -> Value {
    json!({"rules": [
        {"when": {"user_contains": "fail me"}, "reply": {"status": 400,
            "body": {"error": {"message": "this record is meant to fail"}}}},
        {"when": {"user_contains": "XSS"}, "reply": {"text": XSS}},
        {"when": {"user_contains": "Slowly"}, "reply": {"text": "done", "delay_ms": 4000}},
        {"when": {"last_is_tool_result": true},
         "reply": {"text": "It is sunny in Lisbon (21 °C); the chart is attached."}},
        {"when": {"has_tools": true}, "reply": {
            "reasoning": "The user wants the weather: ask the echo tool, then fetch the chart.",
            "tool_calls": [{"name": "echo", "arguments": {"text": "sunny, 21 °C"}},
                           {"name": "image", "arguments": {}}]}}
    ]})
}

fn tool_job(n: u32) -> Value {
    json!({"num_records": n, "config": {"columns": [
        {"name": "city", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["Lisbon", "Porto"]}},
        {"name": "chart", "column_type": "image", "model_alias": "painter",
         "prompt": "A weather chart for {{ city }}."},
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
         "system_prompt": "You are a weather assistant. Use the tools.",
         "prompt": "What is the weather in {{ city }}?", "tool_alias": "weather",
         "with_trace": "all_messages", "extract_reasoning_content": true}
    ]}})
}

/// Two of four records fail (labelled `fail me`); the others carry the XSS value.
fn xss_job() -> Value {
    json!({"num_records": 4, "seed": 11, "name": XSS_NAME, "metadata": {"note": "</script><script>alert(2)</script>"},
    "run_config": {"disable_early_shutdown": true},
    "config": {"columns": [
        {"name": "label", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": [XSS, "fail me"]}},
        {"name": "says", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "XSS {{ label }}", "with_trace": "all_messages"}
    ]}})
}

async fn submit(app: &TestApp, job: &Value, key: Option<&str>) -> Value {
    let mut req = app.client.post(app.url("/v1/jobs")).json(job);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let (status, body) = status_json(req.send().await.unwrap()).await;
    assert_eq!(status, 202, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_in_chromium_shows_jobs_traces_and_preview_problems() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        script(),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "weather", "providers": ["mock"]})],
        |c| {
            c.model_configs.push(
                serde_json::from_value(json!({"alias": "painter", "model": "dall-e-mock",
                    "provider": "mock", "inference_parameters": {"generation_type": "image"}}))
                .unwrap(),
            );
        },
    )
    .await;
    let xss = submit(&app, &xss_job(), None).await;
    let tool = submit(&app, &tool_job(3), None).await;
    let (xss_id, tool_id) = (xss["id"].as_str().unwrap(), tool["id"].as_str().unwrap());
    let done = app.wait_for_job(tool_id, WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let done = app.wait_for_job(xss_id, WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");

    let tool_record = app.all_records(tool_id).await[0]["id"].clone();
    let xss_records = app.all_records(xss_id).await;
    let find = |status: &str| {
        xss_records
            .iter()
            .find(|r| r["status"] == status)
            .unwrap_or_else(|| panic!("seed 11 gives a {status} record: {xss_records:?}"))
    };
    let (xss_record, failed_record) = (find("completed"), find("failed"));
    assert_eq!(xss_record["values"]["label"], XSS, "{xss_record}");
    let failed = xss_records
        .iter()
        .filter(|r| r["status"] == "failed")
        .count();

    let ctx = json!({
        "mode": "main",
        // Submitted by the browser script right before it opens the job's page, so the job is
        // still running there (each answer takes 4 s) and the page must follow its stream.
        "slow_job_body": {"num_records": 4, "config": {"columns": [
            {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 0, "high": 9}},
            {"name": "said", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "Slowly count to {{ n }}."}]}},
        "slow_records": 4,
        "base": format!("http://{}", app.addr),
        "chromium": chromium,
        "screenshots": screenshot_dir(),
        "tool_job": tool_id, "tool_records": 3, "tool_record": tool_record,
        "xss_job": xss_id, "xss_records": xss_records.len(), "xss_failed": failed,
        "xss_name": XSS_NAME,
        "xss_record": xss_record["id"], "failed_record": failed_record["id"],
        "preview_ok_yaml": "columns:\n  - name: topic\n    column_type: sampler\n    sampler_type: category\n    params: {values: [math, art]}\n  - name: title\n    column_type: expression\n    expr: \"{{ topic | upper }} for beginners\"\n",
        "preview_bad_config": {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["math", "art"]}},
            {"name": "question", "column_type": "llm-text", "model_alias": "nope",
             "prompt": "Ask about {{ topic }}."},
            {"name": "title", "column_type": "expression", "expr": "{{ subject | upper }}"},
            {"name": "score", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 10, "high": 1}}
        ]},
        "preview_expect": [["question", "unknown_model_alias"], ["title", "unknown_reference"],
            ["score", "invalid_sampler_params"]],
        "preview_fine": ["topic"],
    });
    run_browser(
        &python,
        ctx,
        &[
            "a_running_job_follows_its_event_stream",
            "jobs_list_shows_a_finished_job",
            "job_view_shows_errors_records_config_downloads",
            "record_shows_tool_call_result_and_images",
            "job_view_shows_tool_use_by_column",
            "xss_value_is_text_and_nothing_runs",
            "failed_record_is_marked",
            "preview_lists_problems_next_to_columns",
            "narrow_screen_and_keyboard",
            "no_console_errors_or_dialogs",
        ],
    )
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_in_chromium_asks_for_the_key_and_works_with_it() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let app = spawn_app_with(Backend::Sqlite, with_key).await;
    let job = submit(
        &app,
        &json!({"config": sampler_config(), "num_records": 3}),
        Some(KEY),
    )
    .await;
    let id = job["id"].as_str().unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let resp = app
            .client
            .get(app.url(&format!("/v1/jobs/{id}")))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        let (_, job) = status_json(resp).await;
        if job["status"] == "completed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ctx = json!({
        "mode": "auth",
        "base": format!("http://{}", app.addr),
        "chromium": chromium,
        "screenshots": screenshot_dir(),
        "api_key": KEY,
        "auth_job": id,
    });
    run_browser(
        &python,
        ctx,
        &[
            "with_keys_the_page_asks_for_one_and_works_with_it",
            "no_dialogs",
        ],
    )
    .await;
    app.stop().await;
}
