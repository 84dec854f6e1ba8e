//! An MCP provider behind OAuth (the MCP authorization spec's client-credentials grant): the
//! in-process mock MCP server in its OAuth mode, with its own authorization server. The first
//! request's `401` leads synthgate through discovery to a token; the token is replaced before
//! it expires; a token revoked mid-job costs one `401` and a new token, not a record; a
//! `403 insufficient_scope` steps the scopes up.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate_testkit::mock_mcp::{MockMcpHttp, OAuthOptions, Options};

use super::JOB_TIMEOUT;
use crate::db::Backend;
use crate::mcp_support::{app_with_tools, run_job, tool_job};

const CLIENT_ID: &str = "synthgate-batch";
const SECRET: &str = "oauth-client-secret-0123456789";

/// Calls `echo` once, then answers `done`.
fn echo_script() -> Value {
    json!({"rules": [
        {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
        {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
    ]})
}

async fn oauth_mock(ttl: Duration) -> MockMcpHttp {
    MockMcpHttp::start(Options {
        oauth: Some(OAuthOptions {
            client_id: CLIENT_ID.into(),
            client_secret: SECRET.into(),
            token_ttl: ttl,
            scoped_tools: vec![("whoami".into(), "admin".into())],
            echo_refused: false,
        }),
        ..Options::default()
    })
    .await
    .unwrap()
}

fn provider(url: &str, secret: &str) -> Value {
    json!({"name": "secure", "provider_type": "streamable_http", "endpoint": url,
        "oauth": {"client_id": CLIENT_ID, "client_secret": secret}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_discovered_and_renewed_before_expiry() {
    let mock = oauth_mock(Duration::from_secs(5)).await;
    let stats = mock.oauth().unwrap();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        echo_script(),
        vec![provider(&mock.url(), SECRET)],
        vec![json!({"tool_alias": "t", "providers": ["secure"]})],
        |_| {},
    )
    .await;

    // Discovery: the first request goes out without a token, its 401 leads to the token.
    let done = run_job(&app, &tool_job("t", 3), JOB_TIMEOUT).await;
    assert_eq!(done["counts"]["completed"], 3, "{done}");
    assert_eq!(stats.issued(), 1);
    assert_eq!(stats.rejected_missing(), 1, "only the discovery request");

    // Jobs over more than two token lifetimes (5 s; replaced a fifth early, so a token is
    // sent at most 4 s after it was issued: a second of margin for a busy machine): the
    // server never sees an expired one.
    let until = Instant::now() + Duration::from_secs(11);
    let mut jobs = 0;
    while Instant::now() < until {
        let done = run_job(&app, &tool_job("t", 2), JOB_TIMEOUT).await;
        assert_eq!(done["counts"]["completed"], 2, "{done}");
        jobs += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(jobs >= 5, "{jobs} jobs");
    assert!(stats.issued() >= 3, "renewed: {} tokens", stats.issued());
    assert_eq!(
        stats.rejected_expired(),
        0,
        "no expired token was ever sent"
    );
    assert_eq!(stats.rejected_revoked(), 0);

    assert_eq!(stats.rejected_clients(), 0);

    let (_, metrics) = app.get_text("/metrics").await;
    let line = format!(
        "synthgate_mcp_oauth_tokens_total{{provider=\"secure\"}} {}",
        stats.issued()
    );
    assert!(metrics.contains(&line), "{line} not in /metrics");
    let (_, tools) = app.get_text("/v1/tools").await;
    assert!(
        !tools.contains(SECRET) && !tools.contains("tok-"),
        "{tools}"
    );
    app.stop().await;
}

/// A token revoked while a job runs (long-lived, so no renewal interferes): the next call gets
/// a `401`, one new token serves every call after it, and no record is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_mid_job_costs_a_retry_not_a_record() {
    let mock = oauth_mock(Duration::from_secs(600)).await;
    let stats = mock.oauth().unwrap();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"delay_ms": 100, "tool_calls": [
                {"name": "echo", "arguments": {"text": "hi"}}]}}
        ]}),
        vec![provider(&mock.url(), SECRET)],
        vec![json!({"tool_alias": "t", "providers": ["secure"]})],
        |c| c.workers.count = 2,
    )
    .await;
    let (status, job) = app.create_job(&tool_job("t", 12)).await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let deadline = Instant::now() + JOB_TIMEOUT;
    loop {
        let (_, j) = app.get(&format!("/v1/jobs/{id}")).await;
        if j["counts"]["completed"].as_u64().unwrap_or(0) >= 2 {
            assert!(j["counts"]["completed"].as_u64().unwrap() < 12, "{j}");
            break;
        }
        assert!(Instant::now() < deadline, "no record completed: {j}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats.issued(), 1);
    stats.revoke_all();
    let done = app.wait_for_job(id, JOB_TIMEOUT).await;
    assert_eq!(done["counts"]["completed"], 12, "{done}");
    assert_eq!(done["counts"]["failed"], 0, "{done}");
    assert!(
        stats.rejected_revoked() >= 1,
        "the revoked token was refused"
    );
    assert_eq!(
        stats.issued(),
        2,
        "one new token, shared by the calls after it"
    );
    assert_eq!(stats.rejected_expired(), 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_is_a_clear_error_without_the_secret() {
    let mock = oauth_mock(Duration::from_secs(60)).await;
    let wrong = "not-the-secret-0123456789";
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        echo_script(),
        vec![provider(&mock.url(), wrong)],
        vec![json!({"tool_alias": "t", "providers": ["secure"]})],
        |_| {},
    )
    .await;
    let (status, body) = app.create_job(&tool_job("t", 1)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "mcp_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("OAuth for MCP provider 'secure': token request"),
        "{message}"
    );
    assert!(!message.contains(wrong), "{message}");
    assert!(mock.oauth().unwrap().rejected_clients() >= 1);
    let (_, tools) = app.get_text("/v1/tools").await;
    assert!(!tools.contains(wrong), "{tools}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_scope_steps_up_once_and_the_call_goes_through() {
    let mock = oauth_mock(Duration::from_secs(60)).await;
    let stats = mock.oauth().unwrap();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "whoami"}]}}
        ]}),
        vec![provider(&mock.url(), SECRET)],
        vec![json!({"tool_alias": "t", "providers": ["secure"]})],
        |_| {},
    )
    .await;
    let done = run_job(&app, &tool_job("t", 4), JOB_TIMEOUT).await;
    assert_eq!(done["counts"]["completed"], 4, "{done}");
    for r in app.all_records(done["id"].as_str().unwrap()).await {
        let trace = crate::mcp_support::answer_trace(&app, r["id"].as_str().unwrap()).await;
        let result = trace[2]["content"][0]["text"].as_str().unwrap();
        assert!(
            result.starts_with("pid="),
            "the call went through: {trace:?}"
        );
    }
    // Records may call before any stepped up; one step-up serves them all.
    assert!(
        (1..=4).contains(&stats.rejected_scope()),
        "{} refusals",
        stats.rejected_scope()
    );
    assert_eq!(
        stats.issued(),
        2,
        "one token for the discovery, one for the step-up"
    );
    assert_eq!(stats.last_scopes(), ["mcp", "admin"]);
    app.stop().await;
}
