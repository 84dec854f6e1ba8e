//! The LLM client over real HTTP against the in-process mock LLM (a scripted test double):
//! wire shapes of both protocols, concurrency limits, the mock's own features. Failure paths
//! are in `failures`.

mod failures;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate::config::ModelProviderConfig;
use synthgate::domain::models::ModelConfig;
use synthgate::llm::{
    AdmissionPolicy, ChatMessage, ChatRequest, ContentBlock, LlmClient, LlmError, RetryPolicy,
    ToolCall, ToolSpec,
};
use synthgate_testkit::mock_llm::{MockLlm, Script, TlsOptions};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-test-SECRET-0123456789";
const IMAGE: &str = "data:image/png;base64,iVBORw0KGgo=";

async fn mock(script: Value) -> MockLlm {
    synthgate::telemetry::init_for_tests();
    let script: Script = serde_json::from_value(script).expect("valid script");
    MockLlm::start(script).await.expect("mock starts")
}

fn provider(mock: &MockLlm, name: &str, kind: &str) -> ModelProviderConfig {
    serde_json::from_value(json!({
        "name": name, "endpoint": mock.endpoint(), "provider_type": kind, "api_key": KEY,
        "extra_body": {"provider_flag": true, "shared": "provider"},
        "extra_headers": {"X-Tenant": "t1"}
    }))
    .unwrap()
}

fn model(alias: &str, provider: &str, params: Value) -> ModelConfig {
    serde_json::from_value(json!({
        "alias": alias, "model": format!("{alias}-model"), "provider": provider,
        "inference_parameters": params
    }))
    .unwrap()
}

/// Fast backoff so retry tests take milliseconds; Retry-After still wins when sent.
fn fast() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(3),
    }
}

fn client(mock: &MockLlm) -> LlmClient {
    let providers = [
        provider(mock, "oa", "openai"),
        provider(mock, "an", "anthropic"),
    ];
    LlmClient::new(&providers, fast())
        .expect("client builds")
        .with_admission(patient())
}

/// An admission that never opens a circuit here (the failure tests count every attempt), and
/// gives a throttled call 2 s.
fn patient() -> AdmissionPolicy {
    AdmissionPolicy {
        max_in_flight: 256,
        failures_to_open: 1_000,
        probe_interval: Duration::from_secs(1),
        patience: Duration::from_secs(2),
    }
}

/// system, user, assistant (reasoning + two tool calls), two tool results (one with an image).
fn tool_conversation() -> ChatRequest {
    let mut a = ChatMessage::assistant("");
    a.reasoning_content = Some("I should call tools.".into());
    a.tool_calls = vec![
        ToolCall::new("call_a", "get_fact", r#"{"topic": "math"}"#),
        ToolCall::new("call_b", "render", "{}"),
    ];
    ChatRequest::new(vec![
        ChatMessage::system("Use tools."),
        ChatMessage::user("Tell me about math"),
        a,
        ChatMessage::tool_text("call_a", "Fact: 42"),
        ChatMessage::tool(
            "call_b",
            vec![
                ContentBlock::text("Rendered:"),
                ContentBlock::image_url(IMAGE),
            ],
        ),
    ])
    .with_tools(vec![ToolSpec::new(
        "get_fact".into(),
        "Look up a fact".into(),
        json!({"type": "object", "properties": {"topic": {"type": "string"}}}),
    )])
}

async fn chat(
    c: &LlmClient,
    m: &ModelConfig,
    req: &ChatRequest,
) -> Result<synthgate::llm::ChatResponse, LlmError> {
    c.chat(m, req, &CancellationToken::new()).await
}

#[tokio::test]
async fn llm_openai_request_and_response_shapes() {
    let mock = mock(json!({"rules": [
        {"when": {"last_is_tool_result": true, "has_tools": true},
         "reply": {"text": "Math is fun.", "reasoning": "done thinking"}},
        {"when": {"user_contains": "weather"},
         "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}}
    ]}))
    .await;
    let c = client(&mock);
    let m = model(
        "gpt",
        "oa",
        json!({"temperature": 0.3, "max_tokens": 99,
        "extra_body": {"model_flag": 1, "shared": "model"}}),
    );

    let r = chat(&c, &m, &tool_conversation()).await.unwrap();
    assert_eq!(r.message.text(), "Math is fun.");
    assert_eq!(
        r.message.reasoning_content.as_deref(),
        Some("done thinking")
    );
    assert_eq!((r.attempts, r.finish_reason.as_deref()), (1, Some("stop")));
    assert!(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);

    let sent = &mock.requests()[0];
    assert_eq!(sent.headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(sent.headers["x-tenant"], "t1");
    let b = &sent.body;
    assert_eq!(b["model"], "gpt-model");
    assert_eq!(
        (b["temperature"].clone(), b["max_tokens"].clone()),
        (json!(0.3), json!(99))
    );
    assert_eq!(
        (b["model_flag"].clone(), b["provider_flag"].clone()),
        (json!(1), json!(true))
    );
    assert_eq!(b["shared"], "provider", "provider extra_body wins");
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "Use tools."})
    );
    assert_eq!(
        b["messages"][2]["reasoning_content"],
        "I should call tools."
    );
    assert_eq!(
        b["messages"][2]["tool_calls"][1]["function"]["arguments"],
        "{}"
    );
    assert_eq!(
        b["messages"][4],
        json!({"role": "tool", "tool_call_id": "call_b", "content": [
            {"type": "text", "text": "Rendered:"}, {"type": "image_url", "image_url": {"url": IMAGE}}]})
    );
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["function"]["name"], "get_fact");

    // A tool-calling answer, and a request without tools sends no `tools` key.
    let r = chat(
        &c,
        &m,
        &ChatRequest::new(vec![ChatMessage::user("weather in Paris?")]),
    )
    .await
    .unwrap();
    assert_eq!(
        r.message.tool_calls,
        vec![ToolCall::new(
            "call_1",
            "get_weather",
            r#"{"city":"Paris"}"#
        )]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.message.content, vec![ContentBlock::text("")]);
    assert!(mock.requests()[1].body.get("tools").is_none());
}

#[tokio::test]
async fn llm_anthropic_request_and_response_shapes() {
    let mock = mock(json!({"rules": [
        {"when": {"api": "anthropic", "last_is_tool_result": true},
         "reply": {"text": "Answer.", "reasoning": "step one"}},
        {"when": {"api": "anthropic"},
         "reply": {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}}
    ]}))
    .await;
    let c = client(&mock);
    let m = model("claude", "an", json!({"top_p": 0.9}));

    let r = chat(&c, &m, &tool_conversation()).await.unwrap();
    assert_eq!(r.message.text(), "Answer.");
    assert_eq!(r.message.reasoning_content.as_deref(), Some("step one"));
    assert_eq!(r.finish_reason.as_deref(), Some("end_turn"));

    let sent = &mock.requests()[0];
    assert_eq!(sent.headers["x-api-key"], KEY);
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert!(!sent.headers.contains_key("authorization"));
    let b = &sent.body;
    assert_eq!(
        (
            b["system"].clone(),
            b["max_tokens"].clone(),
            b["top_p"].clone()
        ),
        (json!("Use tools."), json!(4096), json!(0.9))
    );
    assert_eq!(
        b["tools"],
        json!([{"name": "get_fact", "description": "Look up a fact",
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}}}])
    );
    let msgs = b["messages"].as_array().unwrap();
    assert_eq!(
        msgs.len(),
        3,
        "tool results merged into one user message: {msgs:#?}"
    );
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "tool_use", "id": "call_a", "name": "get_fact", "input": {"topic": "math"}})
    );
    assert_eq!(
        msgs[2],
        json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_a", "content": "Fact: 42"},
        {"type": "tool_result", "tool_use_id": "call_b", "content": [
            {"type": "text", "text": "Rendered:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]})
    );

    let r = chat(
        &c,
        &m,
        &ChatRequest::new(vec![ChatMessage::user("look it up")]),
    )
    .await
    .unwrap();
    assert_eq!(
        r.message.tool_calls,
        vec![ToolCall::new("call_1", "lookup", r#"{"q":"x"}"#)]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
}
#[tokio::test]
async fn llm_max_parallel_requests_holds_under_50_concurrent_calls() {
    let mock = mock(json!({"faults": {"latency_ms": 25}})).await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({"max_parallel_requests": 3}));
    let req = ChatRequest::new(vec![ChatMessage::user("x")]);
    let started = Instant::now();
    let results = futures::future::join_all((0..50).map(|_| chat(&c, &m, &req))).await;
    assert!(results.iter().all(Result::is_ok));
    let stats = &mock.stats().models["gpt-model"];
    assert_eq!(stats.requests, 50);
    assert_eq!(stats.max_in_flight, 3, "limit reached but never exceeded");
    // 50 calls, 3 at a time, 25 ms each: at least 17 rounds.
    assert!(started.elapsed() >= Duration::from_millis(17 * 25));
}

/// A provider over TLS that speaks HTTP/2 (as hosted providers do) and lets one connection carry
/// 100 streams at once, the least RFC 9113 asks of a server. An HTTP client sends every request
/// to one origin over one connection, so `max_parallel_requests` 200 had 100 in flight and the
/// rest queued in the client; the provider's connection lanes keep every request in flight. The
/// client trusts the mock's certificate through the provider's `tls_ca_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_requests_past_one_http2_connection_streams_stay_in_flight() {
    synthgate::telemetry::init_for_tests();
    let script: Script =
        serde_json::from_value(json!({"faults": {"latency_ms": 400}, "history_limit": 0})).unwrap();
    let mock = MockLlm::start_tls(script, TlsOptions::fixture(100))
        .await
        .expect("mock starts");
    assert!(mock.endpoint().starts_with("https://"));
    let p: ModelProviderConfig = serde_json::from_value(json!({
        "name": "hosted", "endpoint": mock.endpoint(), "api_key": KEY,
        "tls_ca_file": TlsOptions::fixture_ca(),
    }))
    .unwrap();
    let c = LlmClient::new(&[p], fast()).expect("client builds");
    let m = model(
        "gpt",
        "hosted",
        json!({"max_parallel_requests": 200, "timeout": 60}),
    );
    let req = ChatRequest::new(vec![ChatMessage::user("x")]);
    let results = futures::future::join_all((0..400).map(|_| chat(&c, &m, &req))).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{:?}", failed.first());
    let stats = &mock.stats().models["gpt-model"];
    assert_eq!(stats.requests, 400);
    assert_eq!(
        stats.max_in_flight, 200,
        "the model's limit, not one connection's 100 streams"
    );
}

/// A provider whose `tls_ca_file` is missing or holds no certificate is refused when the client
/// is built (at start), naming the provider and the file.
#[test]
fn llm_a_bad_tls_ca_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    for path in [dir.path().join("missing.pem"), empty] {
        let p: ModelProviderConfig = serde_json::from_value(json!({
            "name": "private", "endpoint": "https://llm.internal/v1", "tls_ca_file": path,
        }))
        .unwrap();
        let err = LlmClient::new(&[p], fast()).expect_err("a bad CA file is refused");
        let msg = err.to_string();
        assert!(
            msg.contains("'private'") && msg.contains("tls_ca_file") && msg.contains(".pem"),
            "{msg}"
        );
    }
}

#[tokio::test]
async fn llm_aliases_sharing_a_model_share_the_minimum_limit() {
    let mock = mock(json!({"faults": {"latency_ms": 20}})).await;
    let c = client(&mock);
    let wide = ModelConfig {
        alias: "wide".into(),
        ..model("x", "oa", json!({"max_parallel_requests": 8}))
    };
    let narrow = ModelConfig {
        alias: "narrow".into(),
        ..model("x", "oa", json!({"max_parallel_requests": 2}))
    };
    c.register_models(&[wide.clone(), narrow.clone()]);
    assert_eq!(c.concurrency_limit(&wide), 2);
    let req = ChatRequest::new(vec![ChatMessage::user("x")]);
    let calls = (0..30).map(|i| chat(&c, if i % 2 == 0 { &wide } else { &narrow }, &req));
    assert!(
        futures::future::join_all(calls)
            .await
            .iter()
            .all(Result::is_ok)
    );
    assert_eq!(mock.stats().models["x-model"].max_in_flight, 2);
}

#[tokio::test]
async fn llm_mock_default_json_faults_and_control_endpoints() {
    let mock = mock(json!({"faults": {"error_every": 2, "error_status": 502}})).await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({}));
    let prompt = "Summarize.\n<response_schema>{\"type\": \"object\", \"required\": [\"title\", \"score\"], \
        \"properties\": {\"title\": {\"type\": \"string\"}, \"score\": {\"type\": \"integer\", \"minimum\": 1}}}</response_schema>";
    let r = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user(prompt)]))
        .await
        .unwrap();
    assert_eq!(
        r.message.text(),
        "```json\n{\n  \"title\": \"mock\",\n  \"score\": 1\n}\n```"
    );
    // Request 2 is an injected 502, retried as request 3.
    let r = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("again")]))
        .await
        .unwrap();
    assert_eq!(r.attempts, 2);

    let http = reqwest::Client::new();
    let base = format!("http://{}", mock.addr());
    let stats: Value = http
        .get(format!("{base}/_mock/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["total_requests"], 3);
    let script = json!({"rules": [{"reply": {"text": "scripted"}}]});
    let resp = http
        .post(format!("{base}/_mock/script"))
        .json(&script)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(
        http.post(format!("{base}/_mock/reset"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let r = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("x")]))
        .await
        .unwrap();
    assert_eq!(r.message.text(), "scripted");
    let reqs: Value = http
        .get(format!("{base}/_mock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reqs.as_array().unwrap().len(), 1);
    assert_eq!(mock.stats().rule_hits, vec![1]);
    mock.shutdown().await;
}
