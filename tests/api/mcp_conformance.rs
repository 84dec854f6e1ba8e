//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) against synthgate,
//! through tests/conformance-mcp/run (see there and tests/conformance-mcp/client.py): every
//! client scenario (synthgate as the client of the suite's servers) and every server scenario
//! (the suite as the client of synthgate's own `/mcp`), judged by the suite's own baseline check
//! against tests/conformance-mcp/expected-failures.yml. It fails when a scenario not listed
//! there fails, or a listed one passes. About 20 s.
//!
//! scripts/test installs the suite (and Node 22 when the machine's is older) and points
//! `$SYNTHGATE_TEST_MCP_CONFORMANCE` at tests/conformance-mcp; without it the test says so and
//! passes without running, so a bare `cargo test` never downloads anything. It runs alone
//! (`threads-required` in .config/nextest.toml): `sse-retry` times the client's reconnect
//! against the server's `retry` field with 200 ms of slack, so the run script also keeps it
//! apart from the other client scenarios, which run in parallel.

use std::process::Command;

#[test]
fn mcp_conformance_scenarios() {
    let Some(dir) =
        crate::require::require(std::env::var("SYNTHGATE_TEST_MCP_CONFORMANCE").ok(), || {
            "SYNTHGATE_TEST_MCP_CONFORMANCE is unset (scripts/test sets it; or run \
             tests/conformance-mcp/run)"
                .into()
        })
    else {
        return;
    };
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(format!("{dir}/run"))
        .env("SYNTHGATE_BIN", env!("CARGO_BIN_EXE_synthgate"))
        .env("MOCK_LLM_BIN", synthgate_testkit::bin_path("mock-llm"))
        .env("CONFORMANCE_RESULTS", results.path())
        .output()
        .expect("tests/conformance-mcp/run starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Each scenario's checks.json, the client output and synthgate's logs explain the verdict.
        let kept = results.keep();
        panic!(
            "the conformance suite's outcome differs from expected-failures.yml ({}); \
             per-scenario results in {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            out.status,
            kept.display()
        );
    }
    println!("{stdout}{stderr}");
}
