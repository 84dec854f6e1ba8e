//! An MCP provider behind OAuth (the MCP authorization spec's client-credentials grant): the
//! in-process mock MCP server in its OAuth mode, with its own authorization server. The first
//! request's `401` leads synthgate through discovery to a token; the token is replaced before
//! it expires; a token revoked mid-job costs one `401` and a new token, not a record.

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
async fn a_token_is_discovered_renewed_before_expiry_and_replaced_when_revoked() {
    let mock = oauth_mock(Duration::from_secs(3)).await;
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

    // Jobs over more than two token lifetimes: every token is replaced before it expires, so
    // the server never sees an expired one.
    let until = Instant::now() + Duration::from_secs(7);
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

    // Revoked mid-run: one 401, a new token, and every record completes.
    let before = stats.issued();
    stats.revoke_all();
    let done = run_job(&app, &tool_job("t", 3), JOB_TIMEOUT).await;
    assert_eq!(done["counts"]["completed"], 3, "{done}");
    assert_eq!(done["counts"]["failed"], 0, "{done}");
    assert!(stats.rejected_revoked() >= 1);
    assert_eq!(
        stats.issued(),
        before + 1,
        "one new token, shared by the calls"
    );
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
    let done = run_job(&app, &tool_job("t", 2), JOB_TIMEOUT).await;
    assert_eq!(done["counts"]["completed"], 2, "{done}");
    let records = app.all_records(done["id"].as_str().unwrap()).await;
    let trace = crate::mcp_support::answer_trace(&app, records[0]["id"].as_str().unwrap()).await;
    let result = trace[2]["content"][0]["text"].as_str().unwrap();
    assert!(
        result.starts_with("pid="),
        "the call went through: {trace:?}"
    );
    assert_eq!(
        stats.rejected_scope(),
        1,
        "one step-up, then the wider token is used"
    );
    assert_eq!(stats.issued(), 2);
    assert_eq!(stats.last_scopes(), ["mcp", "admin"]);
    app.stop().await;
}
