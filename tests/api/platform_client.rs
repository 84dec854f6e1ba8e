//! NVIDIA's second Data Designer client (`nemo-platform` 0.6.0, `NeMoPlatform(...)
//! .data_designer`) against `/apis/...` (issue 53), through tests/nemo/platform_check.py, on
//! both databases: the model providers, a preview whose DataFrame holds the generated records
//! and whose analysis the client validated, a bad model refused before any stream, an unknown
//! key, a job created by name and waited on whose `download_artifacts().load_dataset()` equals
//! our JSONL export, its analysis and logs, a job-defined MCP tool config that runs its tools, a
//! fileset seed, another key that cannot see any of it, and the list, cancel and delete
//! routes. A second test runs the client in front of a real model.
//!
//! The client needs Python 3.12 or later; scripts/test installs it in a Debian 13 root
//! (scripts/ensure-nemo-platform) and sets `$SYNTHGATE_TEST_NMP_PYTHON` to the interpreter that
//! runs there. The script is copied under the system's temp directory, which that interpreter
//! sees as the host does.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio};

const KEY_A: &str = "platform-key-a-0123456789abcdef";
const KEY_B: &str = "platform-key-b-0123456789abcdef";
const UNKNOWN_KEY: &str = "platform-key-unknown-012345678";

/// The interpreter with the client installed (see [`crate::require`]).
fn platform_python() -> Option<String> {
    crate::require::require(std::env::var("SYNTHGATE_TEST_NMP_PYTHON").ok(), || {
        "SYNTHGATE_TEST_NMP_PYTHON is unset (scripts/test runs scripts/ensure-nemo-platform, \
         which installs nemo-platform 0.6.0 in a Debian 13 root, and sets it)"
            .into()
    })
}

async fn platform_client_flow(backend: Backend) {
    let Some(python) = platform_python() else {
        return;
    };
    let events = Events::new();
    let (app, mock) = app_with_tools(
        backend,
        json!({"rules": [
            {"when": {"user_contains": "Slowly"}, "reply": {"text": "late", "hold": true}},
            {"when": {"tool_result_contains": "echoed"}, "reply": {"text": "the tool said echoed"}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "echoed"}}]}},
            {"reply": {"text": "roses are red"}},
        ]}),
        vec![mock_mcp_stdio("mock-mcp", &events.path)],
        Vec::new(),
        |c| {
            c.auth = serde_json::from_value(json!({"api_keys": [
                {"name": "alice", "key": KEY_A}, {"name": "bob", "key": KEY_B}]}))
            .unwrap();
        },
    )
    .await;
    let (got, stdout) = run_client(
        &python,
        "platform_check.py",
        &app.url(""),
        &[
            ("CHECK_KEY_A", KEY_A),
            ("CHECK_KEY_B", KEY_B),
            ("CHECK_KEY_UNKNOWN", UNKNOWN_KEY),
        ],
        Duration::from_secs(240),
    )
    .await;
    mock.release();

    // The providers, as the client names them: workspace and name, never an endpoint.
    assert_eq!(got["providers"], json!(["default/mock"]), "{got}");
    assert!(!stdout.contains(&mock.endpoint()), "{stdout}");

    // The preview's DataFrame: every column, three records.
    assert_eq!(
        got["preview_columns"],
        json!(["color", "shout", "poem"]),
        "{got}"
    );
    let rows = got["preview_rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{got}");
    for row in rows {
        let color = row["color"].as_str().unwrap();
        assert!(["red", "blue"].contains(&color), "{row}");
        assert_eq!(row["shout"], format!("{}!", color.to_uppercase()), "{row}");
        assert_eq!(row["poem"], "roses are red", "{row}");
    }
    let analysis = &got["preview_analysis"];
    assert_eq!(analysis["num_records"], 3, "{analysis}");
    assert_eq!(
        analysis["column_statistics"][0]["distribution_type"],
        "categorical"
    );

    // A bad model: the client's validation error, before any stream, with our code.
    assert_eq!(
        got["bad_model"]["type"], "DataDesignerConfigValidationError",
        "{got}"
    );
    assert_eq!(got["bad_model"]["status"], 422, "{got}");
    let text = got["bad_model"]["text"].as_str().unwrap();
    assert!(text.contains("invalid_model_config"), "{text}");
    assert!(text.contains("no-such-provider"), "{text}");
    assert_eq!(got["unknown_key"]["status"], 401, "{got}");
    assert!(
        got["unknown_key"]["text"]
            .as_str()
            .unwrap()
            .contains("unauthorized"),
        "{got}"
    );

    // The job, by the name the server gave it, waited on to the end.
    let name = got["job_name"].as_str().unwrap();
    assert!(
        name.starts_with("data-designer-") && name.len() == 22,
        "{name}"
    );
    assert_eq!(got["job_status"], "completed", "{got}");
    assert_eq!(got["job"]["workspace"], "default", "{got}");
    let job_id = got["job"]["id"].as_str().unwrap();
    assert_eq!(
        got["artifacts"],
        json!(["artifacts/dataset/parquet-files/batch_00000.parquet"]),
        "{got}"
    );
    assert_eq!(
        got["job_columns"],
        json!(["color", "shout", "poem"]),
        "{got}"
    );
    let resp = app
        .client
        .get(app.url(&format!("/v1/jobs/{job_id}/records?format=jsonl")))
        .bearer_auth(KEY_A)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let exported: Vec<Value> = resp
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported.len(), 4);
    assert_eq!(got["job_rows"], Value::Array(exported), "{got}");
    assert_eq!(got["job_analysis"]["num_records"], 4, "{got}");
    let logs = got["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l.as_str().unwrap().contains("Job completed")),
        "{got}"
    );

    // MCP tools, run for the preview and the job: every record got the tool's answer.
    for rows in [&got["tool_preview"], &got["tool_job"]] {
        let rows = rows.as_array().unwrap();
        assert!(!rows.is_empty(), "{got}");
        for row in rows {
            assert_eq!(row["answer"], "the tool said echoed", "{row}");
        }
    }
    assert_eq!(got["tool_job"].as_array().unwrap().len(), 3, "{got}");
    assert_eq!(events.calls("echo"), 2 + 3, "one call a record");
    let tool_job = got["tool_job_id"].as_str().unwrap();
    let records = get_as_a(&app, &format!("/v1/jobs/{tool_job}/records")).await;
    let record = records["records"][0]["id"].as_str().unwrap();
    let trace = get_as_a(&app, &format!("/v1/records/{record}/trace?column=answer")).await;
    let roles: Vec<&str> = trace["traces"][0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{trace}");

    // The fileset seed: uploaded, then read in order by a preview and a job.
    assert_eq!(
        got["fileset"],
        json!({"name": "cities", "workspace": "default"}),
        "{got}"
    );
    let expected = json!([
        {"city": "Lyon", "country": "FR", "where": "Lyon, FR"},
        {"city": "Porto", "country": "PT", "where": "Porto, PT"},
        {"city": "Kyoto", "country": "JP", "where": "Kyoto, JP"},
    ]);
    assert_eq!(got["seeded_preview"], expected, "{got}");
    assert_eq!(got["seeded_job"], expected, "{got}");
    assert_eq!(got["missing_seed"]["status"], 422, "{got}");
    assert!(
        got["missing_seed"]["text"]
            .as_str()
            .unwrap()
            .contains("nope.csv"),
        "{got}"
    );
    assert_eq!(got["other_key_fileset"], "cities", "{got}");
    assert_eq!(got["other_key_seed"]["status"], 422, "{got}");
    assert!(
        got["other_key_seed"]["text"]
            .as_str()
            .unwrap()
            .contains("cities.csv"),
        "{got}"
    );

    // Another key: no such job, and none listed.
    assert_eq!(got["other_key_job"]["status"], 404, "{got}");
    assert_eq!(got["other_key_list"], json!([]), "{got}");
    let routes = got["other_key_routes"].as_object().unwrap();
    assert_eq!(routes.len(), 8, "{got}");
    for (route, status) in routes {
        assert_eq!(status, 404, "key B, {route} of key A's job: {got}");
    }
    assert_eq!(got["other_key_file"], 404, "{got}");

    // The generic job routes: the list filters, the running job cancelled, the first deleted.
    assert_eq!(got["cancel"]["status"], 200, "{got}");
    let cancelled = got["cancel"]["job_status"].as_str().unwrap();
    assert!(["cancelling", "cancelled"].contains(&cancelled), "{got}");
    let tools = got["tool_job_name"].as_str().unwrap();
    let seeded = got["seeded_job_name"].as_str().unwrap();
    assert_eq!(
        got["listed_completed"],
        json!([seeded, tools, name]),
        "{got}"
    );
    let long = got["long_job_name"].as_str().unwrap();
    assert_eq!(
        got["listed_all"],
        json!([long, seeded, tools, name]),
        "{got}"
    );
    assert_eq!(got["delete_running"], 409, "{got}");
    assert_eq!(got["delete"], 204, "{got}");
    assert_eq!(got["after_delete"], 404, "{got}");
}

/// Runs tests/nemo/`name` with the client's interpreter against `base_url`, with `envs` set and
/// a home of its own (copied under the temp directory, which that interpreter sees); the JSON
/// object its last line of stdout prints, and all of its stdout.
async fn run_client(
    python: &str,
    name: &str,
    base_url: &str,
    envs: &[(&str, &str)],
    limit: Duration,
) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join(name);
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/nemo")
        .join(name);
    std::fs::copy(source, &script).unwrap();
    let out = tokio::time::timeout(
        limit,
        tokio::process::Command::new(python)
            .arg(&script)
            .arg(base_url)
            .envs(envs.iter().copied())
            .env("HOME", dir.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes in time")
    .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let last = stdout.trim().lines().last().unwrap_or_default();
    let got = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (got, stdout)
}

/// `GET path` with key A; the body of its `200`.
async fn get_as_a(app: &crate::helpers::TestApp, path: &str) -> Value {
    let resp = app
        .client
        .get(app.url(path))
        .bearer_auth(KEY_A)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    resp.json().await.unwrap()
}

backends!(platform_client, platform_client_flow);

/// The client in front of a real model (llama.cpp's server with SmolLM2, the real-model tier):
/// a preview and a job whose LLM column holds what the model wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_client_previews_and_runs_on_a_real_model() {
    let Some((llama_python, model)) = crate::real_model::llama() else {
        return;
    };
    let Some(python) = platform_python() else {
        return;
    };
    let server = crate::real_model::LlamaServer::start(&llama_python, &model, "smol", &[]).await;
    let app = crate::real_model::app_on(&server, |_| {}).await;
    let (got, _) = run_client(
        &python,
        "platform_real_model.py",
        &app.url(""),
        &[],
        Duration::from_secs(600),
    )
    .await;
    assert_eq!(got["job_status"], "completed", "{got}");
    for (rows, n) in [(&got["preview"], 2), (&got["job"], 3)] {
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), n, "{got}");
        for row in rows {
            assert!(
                ["apple", "pear"].contains(&row["fruit"].as_str().unwrap()),
                "{row}"
            );
            let line = row["line"].as_str().unwrap_or_default();
            assert!(!line.trim().is_empty(), "the model wrote nothing: {row}");
        }
    }
}
