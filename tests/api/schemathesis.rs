//! Schemathesis against the live service: requests generated from the committed `openapi.yaml`
//! (its examples, boundary values, random data and link-following sequences) are sent to a real
//! gateway, and every response is checked against the spec: no 5xx, only documented status
//! codes and content types, and bodies that match their schemas.
//!
//! The gateway runs in-process on SQLite with the mock LLM behind the model alias `writer` (so
//! the spec's LLM example validates and runs) and the `mock-mcp` test double as an MCP provider
//! (so `/v1/tools` and `/readyz` report a real provider). Schemathesis is a Python tool from
//! `scripts/requirements-test.txt`, found through `$SYNTHGATE_TEST_PYTHON`; it only talks to
//! the gateway on loopback.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::db::Backend;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio};

/// Checks on every response. `not_a_server_error`: no 5xx. `status_code_conformance`: the status
/// is documented. `content_type_conformance`: so is the Content-Type. `response_schema_conformance`:
/// the body matches the documented schema. `response_headers_conformance`: documented headers
/// are present and valid.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
response_schema_conformance,response_headers_conformance";
/// Test cases per operation and phase; with the seed, a run generates the same requests.
const MAX_EXAMPLES: &str = "30";
const SEED: &str = "20261122";
/// Far above the usual run (about 12 s on 2 cores); a hung run fails instead of stalling the
/// suite.
const RUN_TIMEOUT: Duration = Duration::from_secs(150);

/// The interpreter that has schemathesis (see [`crate::require`]: `None` skips, or fails under
/// `CI=true`).
fn python_with_schemathesis() -> Option<String> {
    let python = crate::require::require(std::env::var("SYNTHGATE_TEST_PYTHON").ok(), || {
        "SYNTHGATE_TEST_PYTHON is not set (scripts/test sets it)".into()
    })?;
    let probe = std::process::Command::new(&python)
        .args(["-c", "import schemathesis; print(schemathesis.__version__)"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout);
            eprintln!("schemathesis {}", version.trim());
            Some(python)
        }
        other => {
            crate::require::skip(&format!(
                "schemathesis is not importable with {python} (scripts/test installs \
                 scripts/requirements-test.txt): {other:?}"
            ));
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_spec_violations() {
    let Some(python) = python_with_schemathesis() else {
        return;
    };
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({}),
        vec![mock_mcp_stdio("calc", &events.path)],
        vec![json!({"tool_alias": "math", "providers": ["calc"], "allow_tools": ["add", "echo"]})],
        // A generated `num_records` near the default limit (1,000,000) would spend the time
        // budget inserting rows; the limit and its 422 are what is under test.
        |c| c.limits.max_num_records = 100,
    )
    .await;

    let work = tempfile::tempdir().unwrap();
    let report = work.path().join("report.json");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.yaml");
    let mut cmd = tokio::process::Command::new(&python);
    cmd.args(["-m", "schemathesis.cli", "run"])
        .arg(&spec)
        .args(["--url", &app.url("")])
        .args(["--checks", CHECKS])
        .args(["--max-examples", MAX_EXAMPLES, "--seed", SEED])
        // Nothing is kept between runs, so every run is the same run.
        .args(["--generation-database", "none"])
        // Hypothesis's "generating data is slow" health check measures the machine, not the
        // API or the spec; on a busy 2-core runner it would fail the run at random.
        .args(["--suppress-health-check", "too_slow"])
        .args(["--request-timeout", "30", "--no-color"])
        .args(["--report", "json", "--report-json-path"])
        .arg(&report)
        // Its working files (reports, caches) stay in the temp dir.
        .current_dir(work.path())
        // A serializer for the datastore's JSON-lines commits (tests/schemathesis/).
        .env("SCHEMATHESIS_HOOKS", "synthgate_hooks")
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis"),
        )
        // Loopback only: no proxy may capture the requests.
        .env("NO_PROXY", "*")
        .env("no_proxy", "*")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .kill_on_drop(true);
    let started = Instant::now();
    let out = tokio::time::timeout(RUN_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ran longer than {RUN_TIMEOUT:?}"))
        .expect("schemathesis starts");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = match std::fs::read_to_string(&report) {
        Ok(text) => serde_json::from_str(&text).expect("the JSON report parses"),
        Err(e) => panic!("no report ({e}); stdout:\n{stdout}\nstderr:\n{stderr}"),
    };

    let ops = &report["operations"];
    let cases = &report["test_cases"];
    eprintln!(
        "schemathesis {}: {} of {} operations tested, {} test cases, {} with failures \
         ({} unique), {} errors, in {:.1}s (exit {:?})",
        report["schemathesis_version"].as_str().unwrap_or("?"),
        ops["tested"],
        ops["total"],
        cases["generated"],
        cases["with_failures"],
        cases["unique_failures"],
        report["errors"].as_array().map_or(0, Vec::len),
        elapsed.as_secs_f64(),
        out.status.code(),
    );
    let failed = !out.status.success()
        || report["failures"] != json!([])
        || report["errors"] != json!([])
        // A `$ref` that points nowhere hides part of the spec from every client generator.
        || report["warnings"]["unresolvable_reference"] != json!([])
        || ops["tested"] != ops["total"];
    if failed {
        panic!(
            "schemathesis found problems:\n{stdout}\nstderr:\n{stderr}\nfailures: {}\nwarnings: {}",
            report["failures"], report["warnings"]
        );
    }
    app.stop().await;
}
