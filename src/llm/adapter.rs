//! What differs per wire protocol, behind one set of functions: the URL, the auth headers,
//! building a body, parsing a 2xx body, and reading the message out of an error body.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::params::Sampled;
use super::types::{ChatMessage, ChatRequest, Usage};
use super::{anthropic, openai};
use crate::config::ProviderType;

/// The fields of a 2xx response, common to both protocols.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub message: ChatMessage,
    pub finish_reason: Option<String>,
    pub usage: Usage,
}

/// The URL requests go to.
///
/// Anthropic follows DataDesigner: `{endpoint}/messages` when the endpoint already ends in
/// `/v1`, else `{endpoint}/v1/messages`, so both `https://api.anthropic.com` and
/// `https://api.anthropic.com/v1` work.
pub(crate) fn url(kind: ProviderType, endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    match kind {
        ProviderType::Openai => format!("{base}/chat/completions"),
        ProviderType::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
        ProviderType::Anthropic => format!("{base}/v1/messages"),
    }
}

/// Auth and protocol headers. Key-bearing values are marked sensitive so that `Debug` of the
/// map (and reqwest's own logging) never prints them.
pub(crate) fn protocol_headers(
    kind: ProviderType,
    api_key: Option<&str>,
) -> Result<HeaderMap, &'static str> {
    let mut h = HeaderMap::new();
    let secret = |v: String| {
        let mut v = HeaderValue::try_from(v).map_err(|_| "api_key")?;
        v.set_sensitive(true);
        Ok::<_, &'static str>(v)
    };
    let key = api_key.filter(|k| !k.is_empty());
    match kind {
        ProviderType::Openai => {
            if let Some(k) = key {
                h.insert(
                    reqwest::header::AUTHORIZATION,
                    secret(format!("Bearer {k}"))?,
                );
            }
        }
        ProviderType::Anthropic => {
            if let Some(k) = key {
                h.insert(HeaderName::from_static("x-api-key"), secret(k.to_owned())?);
            }
            h.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static("2023-06-01"),
            );
        }
    }
    Ok(h)
}

/// The request body for `kind`, serialized. An `Err` is a conversation this protocol cannot
/// express. `response_format` (the provider's `structured_output`) goes to OpenAI-compatible
/// servers; Anthropic's Messages API has no such field.
pub(crate) fn build_body(
    kind: ProviderType,
    model_id: &str,
    req: &ChatRequest,
    sampled: &Sampled,
    extra_body: &Map<String, Value>,
    response_format: Option<Value>,
) -> Result<Vec<u8>, String> {
    match kind {
        ProviderType::Openai => {
            openai::build_body(model_id, req, sampled, extra_body, response_format)
        }
        ProviderType::Anthropic => anthropic::build_body(model_id, req, sampled, extra_body)
            .and_then(|v| serde_json::to_vec(&v).map_err(|e| e.to_string())),
    }
}

/// Parses a 2xx body. An `Err` says which field was missing or malformed.
pub(crate) fn parse_response(kind: ProviderType, body: &Value) -> Result<Parsed, String> {
    match kind {
        ProviderType::Openai => openai::parse_response(body),
        ProviderType::Anthropic => anthropic::parse_response(body),
    }
}

/// The human part of an error body: `error.message` (OpenAI and Anthropic), `message`,
/// `detail` (FastAPI servers such as vLLM), or else the raw text.
pub(crate) fn error_message(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let found = [
            "/error/message",
            "/message",
            "/detail",
            "/error",
            "/detail/0/msg",
        ]
        .iter()
        .find_map(|p| v.pointer(p).and_then(Value::as_str));
        if let Some(m) = found {
            return m.to_owned();
        }
    }
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() {
        "(empty body)".to_owned()
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_datadesigner() {
        assert_eq!(
            url(ProviderType::Openai, "http://h/v1/"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            url(ProviderType::Anthropic, "https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            url(ProviderType::Anthropic, "http://h/v1"),
            "http://h/v1/messages"
        );
    }

    #[test]
    fn headers_hide_the_key() {
        let h = protocol_headers(ProviderType::Openai, Some("sk-secret-1")).unwrap();
        assert!(h["authorization"].is_sensitive());
        assert!(!format!("{h:?}").contains("sk-secret-1"));
        let h = protocol_headers(ProviderType::Anthropic, Some("sk-ant")).unwrap();
        assert!(h["x-api-key"].is_sensitive());
        assert_eq!(h["anthropic-version"], "2023-06-01");
        assert!(
            protocol_headers(ProviderType::Openai, None)
                .unwrap()
                .is_empty()
        );
        assert!(protocol_headers(ProviderType::Openai, Some("bad\nkey")).is_err());
    }

    #[test]
    fn error_messages_from_common_shapes() {
        let m = |s: &str| error_message(s.as_bytes());
        assert_eq!(
            m(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            m(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            "Overloaded"
        );
        assert_eq!(m(r#"{"detail":"nope"}"#), "nope");
        assert_eq!(m(r#"{"error":"plain"}"#), "plain");
        assert_eq!(m("<html>502</html>"), "<html>502</html>");
        assert_eq!(m(""), "(empty body)");
    }
}
