//! MCP tool use end to end: jobs whose LLM column calls tools on the real `mock-mcp` binary
//! over stdio (a test double started by the gateway like any stdio server), with the scripted
//! mock LLM over real HTTP. What the mock servers saw comes from the events file and the mock
//! LLM's recorded requests; what the gateway did comes from its API and `/metrics`.
//!
//! This file covers the session pool (sharing, reconnect, scopes, shutdown, the tool-list
//! cache); `tool_errors` covers the `Error:` tool messages and `tool_loop` the turn budget,
//! parallel calls and image results.

mod tool_errors;
mod tool_events;
mod tool_loop;
mod tool_outcomes;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::TestApp;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio, run_job, tool_job};

/// Deadline for anything the tests wait on (jobs, events, processes). Generous on purpose:
/// these are deadlines, not timing assertions.
const WAIT: Duration = Duration::from_secs(60);

/// A job with one `llm-text` column `answer` on `model` with `tool_alias`, whose prompt
/// starts with `prompt` (so mock rules can pick the job with `user_contains`), trace kept.
fn job(model: &str, tool_alias: &str, prompt: &str, num_records: u32) -> Value {
    json!({"num_records": num_records, "config": {"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 0, "high": 100}},
        {"name": "answer", "column_type": "llm-text", "model_alias": model,
         "prompt": format!("{prompt} ({{{{ n }}}})"), "tool_alias": tool_alias,
         "with_trace": "all_messages"}
    ]}})
}

/// A tool config over one provider.
fn tools(alias: &str, provider: &str) -> Value {
    json!({"tool_alias": alias, "providers": [provider]})
}

/// The value of the counter `name{provider="<provider>"}` on `/metrics`, 0 when absent.
async fn metric(app: &TestApp, name: &str, provider: &str) -> f64 {
    let (status, text) = app.get_text("/metrics").await;
    assert_eq!(status, 200, "{text}");
    let prefix = format!("{name}{{provider=\"{provider}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0.0, |v| v.trim().parse().expect("a number"))
}

/// Pids of the `call <pid> <tool>` lines, in file order.
fn call_pids(events: &Events, tool: &str) -> Vec<u32> {
    events
        .lines()
        .iter()
        .filter_map(|l| {
            let mut words = l.split(' ');
            let (kind, pid, name) = (words.next()?, words.next()?, words.next()?);
            (kind == "call" && name == tool).then(|| pid.parse().ok())?
        })
        .collect()
}

/// Pids of the `list <pid>` lines, in file order.
fn list_pids(events: &Events) -> Vec<u32> {
    events
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("list ")?.parse().ok())
        .collect()
}

/// Polls `ready` until it holds; fails after [`WAIT`], naming `what`.
async fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The state letter of process `pid` (`R`, `S`, `Z` for a zombie, ...); `None` once it no
/// longer exists, that is once it exited and its parent reaped it.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Waits until `pid` is gone: exited and reaped. A zombie never passes.
async fn wait_reaped(pid: u32) {
    let deadline = Instant::now() + WAIT;
    while let Some(state) = process_state(pid) {
        assert!(
            Instant::now() < deadline,
            "mock-mcp pid {pid} still exists (state {state}); it was not killed or not reaped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Model: `echo` once, then `done` if the echo came back (an `Error:` result gets `lost`).
fn echo_once(delay_ms: u64) -> Value {
    json!({"history_limit": 0, "rules": [
        {"when": {"tool_result_contains": "echoed"}, "reply": {"text": "done"}},
        {"when": {"last_is_tool_result": true}, "reply": {"text": "lost"}},
        {"when": {"has_tools": true}, "reply": {"delay_ms": delay_ms,
            "tool_calls": [{"name": "echo", "arguments": {"text": "echoed"}}]}}
    ]})
}

/// Asserts that the finished job `done` completed with all `n` records, each of which got its
/// tool result (a failed call would still complete the record, with the model told
/// `Error: ...`).
async fn assert_all_done(app: &TestApp, done: &Value, n: usize) {
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], n, "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    assert_eq!(records.len(), n);
    for r in &records {
        assert_eq!(r["values"]["answer"], "done", "{r}");
    }
}

async fn two_hundred_records_share_one_session_and_one_tools_list(backend: Backend) {
    let events = Events::new();
    // Metrics are per process; a name per backend keeps the counts apart under `cargo test`.
    let provider = format!("shared_{backend:?}");
    let (app, mock) = app_with_tools(
        backend,
        // The delayed first answer keeps ~all 200 records in flight together, so their tool
        // lookups and `echo` calls overlap. (The submit-time tool check connects and lists
        // first; the records must reuse that session and that list, not open their own.)
        echo_once(200),
        vec![mock_mcp_stdio(&provider, &events.path)],
        vec![tools("t", &provider)],
        |c| c.workers.count = 200,
    )
    .await;
    let done = run_job(&app, &tool_job("t", 200), WAIT).await;
    assert_all_done(&app, &done, 200).await;
    assert!(
        mock.stats().models["mock-writer"].max_in_flight > 1,
        "records did not overlap: {:?}",
        mock.stats()
    );
    assert_eq!(events.count("init"), 1, "{:?}", events.lines());
    assert_eq!(events.count("list"), 1, "{:?}", events.lines());
    assert_eq!(events.calls("echo"), 200);
    assert_eq!(
        metric(&app, "synthgate_mcp_sessions_opened_total", &provider).await,
        1.0
    );
    assert_eq!(
        metric(&app, "synthgate_mcp_tools_list_total", &provider).await,
        1.0
    );
    app.stop().await;
}
backends!(
    one_session,
    two_hundred_records_share_one_session_and_one_tools_list
);

/// A shared provider with `max_sessions: 3` under load (60 records at a time, each holding a
/// 200 ms call): it opens more sessions, never more than 3, keeps one tool list, and every
/// record gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_provider_opens_more_sessions_up_to_max_sessions() {
    let events = Events::new();
    let mut provider = mock_mcp_stdio("spread", &events.path);
    provider["max_sessions"] = json!(3);
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"history_limit": 0, "rules": [
            {"when": {"tool_result_contains": "slept 200ms"}, "reply": {"text": "done"}},
            {"when": {"last_is_tool_result": true}, "reply": {"text": "lost"}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "slow", "arguments": {"ms": 200}}]}}
        ]}),
        vec![provider],
        vec![tools("t", "spread")],
        |c| c.workers.count = 60,
    )
    .await;
    let done = run_job(&app, &tool_job("t", 180), WAIT).await;
    assert_all_done(&app, &done, 180).await;

    let servers = events.pids();
    assert!(
        (2..=3).contains(&servers.len()),
        "sessions opened: {servers:?}"
    );
    let callers: BTreeSet<u32> = call_pids(&events, "slow").into_iter().collect();
    assert!(callers.len() >= 2, "calls all went to {callers:?}");
    assert_eq!(
        events.count("list"),
        1,
        "one tool list: {:?}",
        events.lines()
    );
    let open = metric(&app, "synthgate_mcp_sessions", "spread").await;
    assert_eq!(open, servers.len() as f64);
    let (status, tools) = app.get("/v1/tools").await;
    assert_eq!(status, 200, "{tools}");
    let spread = tools["providers"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "spread"))
        .unwrap_or_else(|| panic!("{tools}"));
    assert_eq!(spread["sessions"], servers.len(), "{spread}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_stdio_server_is_replaced_and_no_record_is_lost() {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"tool_result_contains": "slept 300ms"}, "reply": {"text": "done"}},
            {"when": {"last_is_tool_result": true}, "reply": {"text": "lost"}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "slow", "arguments": {"ms": 300}}]}}
        ]}),
        vec![mock_mcp_stdio("killed", &events.path)],
        vec![tools("t", "killed")],
        |c| c.workers.count = 20,
    )
    .await;
    let (status, job) = app.create_job(&tool_job("t", 60)).await;
    assert_eq!(status, 202, "{job}");
    eventually("the first slow calls", || events.calls("slow") > 0).await;
    let first = events.pids()[0];
    let killed = std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    let done = app.wait_for_job(job["id"].as_str().unwrap(), WAIT).await;
    assert_eq!(done["counts"]["failed"], 0, "{done}");
    // Calls cut by the kill were retried on the new server, not answered with `Error:`.
    assert_all_done(&app, &done, 60).await;
    let pids = events.pids();
    assert_eq!(pids.len(), 2, "{:?}", events.lines());
    assert_ne!(pids[0], pids[1]);
    assert!(
        call_pids(&events, "slow").contains(&pids[1]),
        "the new server got calls"
    );
    assert!(metric(&app, "synthgate_mcp_reconnects_total", "killed").await >= 1.0);
    wait_reaped(first).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_refreshes_the_cached_tool_list() {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"user_contains": "second"}, "reply": {"text": "ok"}},
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "toggle_tools"}]}}
        ]}),
        vec![mock_mcp_stdio("changing", &events.path)],
        vec![tools("t", "changing")],
        |_| {},
    )
    .await;
    let offered = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };

    let first = run_job(&app, &job("writer", "t", "first", 1), WAIT).await;
    assert_eq!(first["status"], "completed", "{first}");
    let before = mock.requests();
    assert!(!offered(&before[0].body).contains(&"bonus".to_owned()));

    let second = run_job(&app, &job("writer", "t", "second", 1), WAIT).await;
    assert_eq!(second["status"], "completed", "{second}");
    let requests = mock.requests();
    let last = &requests.last().unwrap().body;
    assert!(
        offered(last).contains(&"bonus".to_owned()),
        "{:?}",
        offered(last)
    );
    assert_eq!(events.count("list"), 2, "{:?}", events.lines());
    assert_eq!(events.count("init"), 1, "{:?}", events.lines());
    assert!(metric(&app, "synthgate_mcp_tools_list_changed_total", "changing").await >= 1.0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_record_sessions_get_a_process_each_and_it_is_reaped() {
    let events = Events::new();
    let mut provider = mock_mcp_stdio("per_record", &events.path);
    provider["session_scope"] = json!("per_record");
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        echo_once(0),
        vec![provider],
        vec![tools("t", "per_record")],
        |_| {},
    )
    .await;
    let done = run_job(&app, &tool_job("t", 5), WAIT).await;
    assert_all_done(&app, &done, 5).await;

    let callers = call_pids(&events, "echo");
    let distinct: BTreeSet<u32> = callers.iter().copied().collect();
    assert_eq!(callers.len(), 5);
    assert_eq!(
        distinct.len(),
        5,
        "one server per record: {:?}",
        events.lines()
    );
    // Plus the session the submit-time tool check listed the tools on (no record yet).
    let inits = events.pids();
    assert_eq!(inits.len(), 6, "{:?}", events.lines());
    let listed_on = list_pids(&events);
    assert_eq!(listed_on.len(), 1, "{:?}", events.lines());
    assert!(!distinct.contains(&listed_on[0]));
    // Every one of them is closed and reaped after the record (or the check) that used it.
    for pid in inits {
        wait_reaped(pid).await;
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_job_sessions_are_shared_by_the_job_and_closed_after_it() {
    let events = Events::new();
    let mut provider = mock_mcp_stdio("per_job", &events.path);
    provider["session_scope"] = json!("per_job");
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        echo_once(0),
        vec![provider],
        vec![tools("t", "per_job")],
        |_| {},
    )
    .await;
    let mut per_job = Vec::new();
    for _ in 0..2 {
        let seen = call_pids(&events, "echo").len();
        let done = run_job(&app, &tool_job("t", 3), WAIT).await;
        assert_all_done(&app, &done, 3).await;
        let callers: BTreeSet<u32> = call_pids(&events, "echo")[seen..].iter().copied().collect();
        assert_eq!(callers.len(), 1, "one server per job: {:?}", events.lines());
        let pid = *callers.first().unwrap();
        wait_reaped(pid).await;
        per_job.push(pid);
    }
    assert_ne!(per_job[0], per_job[1]);
    // Plus the session the first submit-time tool check listed the tools on; the second
    // check used the cached list.
    let inits = events.pids();
    assert_eq!(inits.len(), 3, "{:?}", events.lines());
    assert_eq!(list_pids(&events), [inits[0]], "{:?}", events.lines());
    wait_reaped(inits[0]).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_reaps_the_stdio_server() {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        echo_once(0),
        vec![mock_mcp_stdio("stopping", &events.path)],
        vec![tools("t", "stopping")],
        |_| {},
    )
    .await;
    let done = run_job(&app, &tool_job("t", 2), WAIT).await;
    assert_all_done(&app, &done, 2).await;
    let pids = events.pids();
    assert_eq!(pids.len(), 1, "{:?}", events.lines());
    assert!(process_state(pids[0]).is_some_and(|s| s != 'Z'));
    app.stop().await;
    // Checked right away: `stop` returns after the pool closed its sessions.
    assert_eq!(
        process_state(pids[0]),
        None,
        "mock-mcp pid {} outlived the gateway's shutdown",
        pids[0]
    );
}

/// One worker slot, held by a record whose tool call takes 5 s. The call used to keep the slot,
/// so another job's one-record sampler job queued behind it for the whole call; now a tool
/// call gives the slot back while it waits, and the small job runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_call_holds_no_worker_slot() {
    let events = Events::new();
    let (app, _mock) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true},
             "reply": {"tool_calls": [{"name": "slow", "arguments": {"ms": 5000}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![tools("t", "mock")],
        |c| c.workers.count = 1,
    )
    .await;
    let (status, slow) = app.create_job(&tool_job("t", 1)).await;
    assert_eq!(status, 202, "{slow}");
    eventually("the slow call", || events.calls("slow") > 0).await;

    let started = Instant::now();
    let quick = run_job(
        &app,
        &json!({"config": crate::helpers::sampler_config(), "num_records": 1}),
        WAIT,
    )
    .await;
    assert_eq!(quick["status"], "completed", "{quick}");
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2_500),
        "the small job waited {took:?} behind the tool call"
    );
    let done = app.wait_for_job(slow["id"].as_str().unwrap(), WAIT).await;
    assert_eq!(done["counts"]["completed"], 1, "{done}");
    app.stop().await;
}
