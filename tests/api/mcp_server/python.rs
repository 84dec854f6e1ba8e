//! The official MCP Python SDK's client against `/mcp`.

use std::time::Duration;

use serde_json::Value;

use super::{KEY_A, KEY_B, TOOLS, script, with_keys};
use crate::db::Backend;
use crate::helpers::app_with_mock_llm;
use crate::mcp_support::python_with;

/// The acceptance test of issue 14 with the official Python SDK's streamable-HTTP client
/// (tests/mcp/client_check.py): it lists the tools, previews a config, submits a job, reads a
/// record's trace, and is refused another key's job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client() {
    let Some(python) = python_with("mcp.client.streamable_http") else {
        return;
    };
    let (app, _mock) = app_with_mock_llm(Backend::Sqlite, script(), with_keys).await;
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/mcp/client_check.py"
            ))
            .arg(app.url("/mcp"))
            .env("CHECK_KEY_A", KEY_A)
            .env("CHECK_KEY_B", KEY_B)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finishes in time")
    .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let got: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let mut names: Vec<&str> = got["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    assert_eq!(got["preview_records"], 2, "{got}");
    assert_eq!(got["preview_poem"], "a haiku", "{got}");
    assert_eq!(got["progress_last"], 2.0, "{got}");
    assert_eq!(got["job_status"], "completed", "{got}");
    assert_eq!(got["trace_last_message"], "a haiku", "{got}");
    assert_eq!(got["other_key_is_error"], true, "{got}");
    assert_eq!(got["other_key_code"], "job_not_found", "{got}");
    assert_eq!(got["bad_config_code"], "unknown_column_type", "{got}");
    app.stop().await;
}
