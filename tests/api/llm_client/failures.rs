//! Failure paths: retries, Retry-After, error codes, timeouts, resets, cancellation, and the
//! API key staying out of errors and logs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use synthgate::llm::{ChatMessage, ChatRequest};
use tokio_util::sync::CancellationToken;

use super::{KEY, chat, client, mock, model};

#[tokio::test]
async fn llm_retries_500_and_503_then_succeeds() {
    let mock = mock(json!({"rules": [
        {"reply": {"status": 500}, "times": 1},
        {"reply": {"status": 503}, "times": 1}
    ]}))
    .await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({}));
    let r = chat(
        &c,
        &m,
        &ChatRequest::new(vec![ChatMessage::user("hello there")]),
    )
    .await
    .unwrap();
    assert_eq!(r.attempts, 3);
    assert_eq!(r.message.text(), "mock reply: hello there");
    let statuses: Vec<_> = mock.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![Some(500), Some(503), Some(200)]);
    let usage = &c.usage_snapshot()["gpt"];
    assert_eq!((usage.calls, usage.attempts, usage.retries), (1, 3, 2));
}

#[tokio::test]
async fn llm_honours_retry_after_on_429() {
    let mock =
        mock(json!({"rules": [{"reply": {"status": 429, "retry_after": 1}, "times": 1}]})).await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({}));
    let r = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("hi")]))
        .await
        .unwrap();
    assert_eq!(r.attempts, 2);
    let reqs = mock.requests();
    let waited = reqs[1].received_ms - reqs[0].responded_ms.unwrap();
    // The policy's own backoff is at most 10 ms here, so only Retry-After explains >= 1 s.
    assert!((1000.0..2500.0).contains(&waited), "waited {waited} ms");
}

#[tokio::test]
async fn llm_exhausted_retries_report_the_last_failure() {
    let mock = mock(json!({"rules": [
        {"when": {"model": "a-model"}, "reply": {"status": 503, "body": {"error": {"message": "busy"}}}},
        {"when": {"model": "b-model"}, "reply": {"status": 429, "retry_after": "0"}}
    ]}))
    .await;
    let c = client(&mock);
    let req = ChatRequest::new(vec![ChatMessage::user("x")]);
    let e = chat(&c, &model("a", "oa", json!({})), &req)
        .await
        .unwrap_err();
    assert_eq!((e.code().as_str(), e.attempts()), ("llm_server_error", 4));
    assert!(e.to_string().contains("busy"), "{e}");
    // A 429 spends no attempt: it is retried (with the backoff: `Retry-After: 0` asks for no
    // wait) until the call's patience of 2 s is spent.
    let started = Instant::now();
    let e = chat(&c, &model("b", "an", json!({})), &req)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "llm_rate_limited");
    assert!(e.attempts() > 4, "{} attempts", e.attempts());
    assert!(e.attempts() < 40, "backed off: {} attempts", e.attempts());
    assert!(started.elapsed() <= Duration::from_millis(2500));
    assert!(e.is_transient());
}

#[tokio::test]
async fn llm_auth_failure_is_immediate_and_never_shows_the_key() {
    let echo = format!("Incorrect API key provided: {KEY}. Check your key.");
    let mock = mock(json!({"rules": [
        {"reply": {"status": 401, "body": {"error": {"message": echo}}}}
    ]}))
    .await;
    let c = client(&mock);
    let req = ChatRequest::new(vec![ChatMessage::user("x")]);
    for alias in ["gpt", "claude"] {
        let provider = if alias == "gpt" { "oa" } else { "an" };
        let e = chat(&c, &model(alias, provider, json!({})), &req)
            .await
            .unwrap_err();
        assert_eq!((e.code().as_str(), e.attempts()), ("llm_auth_failed", 1));
        let shown = format!("{e} {e:?} {c:?}");
        assert!(!shown.contains(KEY), "{shown}");
        assert!(
            e.to_string()
                .contains("Incorrect API key provided: [REDACTED]"),
            "{e}"
        );
    }
    assert_eq!(mock.stats().total_requests, 2, "401 is not retried");
}

#[tokio::test]
async fn llm_bad_request_and_context_window_carry_the_provider_message() {
    let mock = mock(json!({"rules": [
        {"when": {"user_contains": "long"}, "reply": {"status": 400, "body":
            {"error": {"message": "This model's maximum context length is 8192 tokens"}}}},
        {"reply": {"status": 422, "body": "Unknown parameter: foo"}}
    ]}))
    .await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({}));
    let e = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("long")]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "llm_context_window_exceeded");
    let e = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("x")]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "llm_bad_request");
    assert!(e.to_string().contains("HTTP 422") && e.to_string().contains("Unknown parameter: foo"));
}

#[tokio::test]
async fn llm_timeout_then_success() {
    let mock =
        mock(json!({"rules": [{"reply": {"delay_ms": 1500, "text": "late"}, "times": 1}]})).await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({"timeout": 1}));
    let started = Instant::now();
    let r = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("ping")]))
        .await
        .unwrap();
    assert_eq!(
        (r.attempts, r.message.text().as_str()),
        (2, "mock reply: ping")
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn llm_connection_reset_mid_body_is_retried() {
    let mock = mock(json!({"rules": [{"reply": {"reset": true}, "times": 2}]})).await;
    let c = client(&mock);
    let r = chat(
        &c,
        &model("claude", "an", json!({})),
        &ChatRequest::new(vec![ChatMessage::user("x")]),
    )
    .await
    .unwrap();
    assert_eq!(r.attempts, 3);
    let statuses: Vec<_> = mock.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![None, None, Some(200)]);
}

#[tokio::test]
async fn llm_malformed_json_is_an_invalid_response() {
    let mock = mock(json!({"rules": [{"reply": {"malformed": true}}]})).await;
    let c = client(&mock);
    let e = chat(
        &c,
        &model("gpt", "oa", json!({})),
        &ChatRequest::new(vec![ChatMessage::user("x")]),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.attempts()),
        ("llm_invalid_response", 1)
    );
}

/// A provider whose answer does not end is cut at the client's bound, at once: not read into
/// memory until the call's timeout (then retried), which is what an unbounded read did.
#[tokio::test]
async fn llm_an_answer_past_the_bound_is_not_read() {
    let mock = mock(json!({"rules": [{"reply": {"endless": true}}]})).await;
    let c = client(&mock).with_max_answer_bytes(1024 * 1024);
    let started = Instant::now();
    let e = chat(
        &c,
        &model("gpt", "oa", json!({"timeout": 2})),
        &ChatRequest::new(vec![ChatMessage::user("x")]),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.attempts()),
        ("llm_invalid_response", 1)
    );
    assert!(e.to_string().contains("larger than 1048576 bytes"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn llm_cancellation_aborts_a_request_in_flight() {
    let mock = mock(json!({"rules": [{"reply": {"delay_ms": 30000}}]})).await;
    let c = client(&mock);
    let m = model("gpt", "oa", json!({}));
    let cancel = CancellationToken::new();
    let req = ChatRequest::new(vec![ChatMessage::user("x")]);
    let call = c.chat(&m, &req, &cancel);
    let trigger = async {
        let deadline = Instant::now() + Duration::from_secs(5);
        while mock.stats().total_requests == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cancel.cancel();
    };
    let started = Instant::now();
    let (result, ()) = tokio::join!(call, trigger);
    assert_eq!(result.unwrap_err().code(), "llm_cancelled");
    assert!(started.elapsed() < Duration::from_secs(5));
    let e = chat(&c, &model("gpt", "nowhere", json!({})), &req)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "unknown_model_provider");
}

/// Collects formatted log lines in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn llm_logs_never_show_the_key() {
    let echo = format!("upstream rejected key {KEY}");
    let mock = mock(json!({"rules": [
        {"reply": {"status": 503, "body": {"error": {"message": echo}}}, "times": 2},
        {"when": {"user_contains": "auth"}, "reply": {"status": 401, "body": echo}}
    ]}))
    .await;
    let logs = Captured::default();
    // Thread-local, and `#[tokio::test]` runs client and mock on this one thread.
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(logs.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let c = client(&mock);
    let m = model("gpt", "oa", json!({}));
    chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("x")]))
        .await
        .unwrap();
    let e = chat(&c, &m, &ChatRequest::new(vec![ChatMessage::user("auth")]))
        .await
        .unwrap_err();
    tracing::error!(error = %e, debug = ?e, "as the worker would log it");
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("LLM request failed; retrying"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
    assert!(!text.contains(KEY), "{text}");
}
