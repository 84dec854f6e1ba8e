//! The client's error text. NVIDIA's client shows a failed request's `detail` when the body
//! is `{"detail": "<text>"}`, and the raw body otherwise; a `422` before a preview's stream or
//! at job creation becomes its `DataDesignerConfigValidationError` with that text. So every
//! error of this door keeps synthgate's envelope (`error.code`, `error.message`, `details`)
//! and gains `detail`: `"<code>: <message>"`, what a notebook user reads.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ErrorObject;

/// Error bodies are small; one larger than this is passed on as it is.
const MAX_ERROR_BODY: usize = 256 * 1024;

/// An error of this door: the envelope every endpoint returns, and `detail`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformErrorBody {
    /// `"<code>: <message>"`: what the client shows.
    pub detail: String,
    /// The error, as every synthgate endpoint gives it.
    pub error: ErrorObject,
}

/// Middleware: adds `detail` to the JSON error bodies of this door's paths.
pub(in crate::api) async fn with_detail(req: Request, next: Next) -> Response {
    if !super::is_platform(req.uri().path()) {
        return next.run(req).await;
    }
    let resp = next.run(req).await;
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if resp.status().is_success() || !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return (parts.status, "error body too large").into_response();
    };
    let Some(out) = add_detail(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(out))
}

/// The body with `detail` added, if it is synthgate's envelope.
fn add_detail(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let error = v.get("error")?;
    let code = error.get("code")?.as_str()?;
    let message = error.get("message")?.as_str()?;
    let detail = format!("{code}: {message}");
    v.as_object_mut()?.insert("detail".into(), detail.into());
    serde_json::to_vec(&v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_gains_a_detail() {
        let body = json!({"error": {"code": "unknown_model_alias", "message": "column 'a': no model 'm'"}});
        let out: Value =
            serde_json::from_slice(&add_detail(body.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(
            out["detail"],
            "unknown_model_alias: column 'a': no model 'm'"
        );
        assert_eq!(out["error"], body["error"]);
        assert!(add_detail(b"{\"detail\": \"x\"}").is_none());
        assert!(add_detail(b"not json").is_none());
    }
}
