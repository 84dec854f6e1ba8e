//! Extractors whose rejections become `ApiError`s, request-body decoding (JSON or YAML), and
//! the opaque pagination cursor.

use axum::extract::FromRequestParts;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::decode::DecodeError;
use crate::domain::{JobId, RecordId};
use crate::error::ApiError;

/// `Query<T>` whose errors are `invalid_request` envelopes naming the parameter.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `Path<T>` whose errors are `invalid_id` envelopes.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::InvalidRequest(format!("invalid query parameters: {}", r.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::InvalidId(r.body_text())
    }
}

/// Parses a job id from the path.
pub fn job_id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::InvalidId(format!("'{raw}' is not a valid job id (expected a UUID)"))
    })
}

/// Parses a record id from the path.
pub fn record_id(raw: &str) -> Result<RecordId, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::InvalidId(format!(
            "'{raw}' is not a valid record id (expected a UUID)"
        ))
    })
}

/// The body formats `POST /v1/jobs` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// `application/json` (also the default when no Content-Type is sent).
    Json,
    /// `application/yaml`, `application/x-yaml`, `text/yaml`.
    Yaml,
}

/// Picks the body format from `Content-Type`.
pub fn body_format(headers: &HeaderMap) -> Result<BodyFormat, ApiError> {
    let Some(ct) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return Ok(BodyFormat::Json);
    };
    let ct = ct.to_str().unwrap_or_default();
    let essence = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" | "" => Ok(BodyFormat::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
            Ok(BodyFormat::Yaml)
        }
        other => Err(ApiError::UnsupportedMediaType(format!(
            "Content-Type '{other}' is not supported; send application/json or application/yaml"
        ))),
    }
}

/// Decodes a body to a JSON value.
pub fn decode_body(format: BodyFormat, body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(match format {
            BodyFormat::Json => ApiError::InvalidJson("request body is empty".into()),
            BodyFormat::Yaml => ApiError::InvalidYaml("request body is empty".into()),
        });
    }
    let decoded = match format {
        BodyFormat::Json => super::decode::json(body),
        BodyFormat::Yaml => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::InvalidYaml("request body is not UTF-8".into()))?;
            super::decode::yaml(text)
        }
    };
    decoded.map_err(|e| match (e, format) {
        (DecodeError::DuplicateKey(m), _) => {
            ApiError::DuplicateKey(format!("request body: {m}; each key may appear once"))
        }
        (DecodeError::Syntax(m), BodyFormat::Json) => {
            ApiError::InvalidJson(format!("request body is not valid JSON: {m}"))
        }
        (DecodeError::Syntax(m), BodyFormat::Yaml) => {
            ApiError::InvalidYaml(format!("request body is not valid YAML: {m}"))
        }
    })
}

/// Deserializes a decoded body into `T`, naming the offending field on error.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::InvalidRequest(format!("invalid request body: {}", e.inner()))
        } else {
            ApiError::InvalidRequest(format!("field '{path}': {}", e.inner()))
        }
    })
}

/// Encodes the position after which the next page starts.
pub fn encode_cursor(kind: &str, position: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}:{position}"))
}

/// Decodes a cursor of `kind` made by [`encode_cursor`].
pub fn decode_cursor(kind: &str, cursor: &str) -> Result<String, ApiError> {
    let bad = || ApiError::InvalidCursor(format!("'{cursor}' was not issued by this endpoint"));
    let raw = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (k, pos) = text.split_once(':').ok_or_else(bad)?;
    if k != kind {
        return Err(bad());
    }
    Ok(pos.to_owned())
}

/// A filter's time: RFC 3339, or without an offset (as the client's examples write it), UTC.
pub(crate) fn parse_time(
    param: &str,
    raw: &str,
) -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(raw, format) {
            return Ok(t.and_utc());
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
        return Ok(d.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    Err(ApiError::InvalidRequest(format!(
        "query parameter '{param}': '{raw}' is not a date or date and time \
         (e.g. 2025-01-01T00:00:00Z)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip_and_rejections() {
        let c = encode_cursor("rec", "41");
        assert_eq!(decode_cursor("rec", &c).unwrap(), "41");
        assert!(matches!(
            decode_cursor("job", &c),
            Err(ApiError::InvalidCursor(_))
        ));
        assert!(matches!(
            decode_cursor("rec", "!!!"),
            Err(ApiError::InvalidCursor(_))
        ));
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert_eq!(body_format(&h).unwrap(), BodyFormat::Json);
        h.insert(
            "content-type",
            "application/yaml; charset=utf-8".parse().unwrap(),
        );
        assert_eq!(body_format(&h).unwrap(), BodyFormat::Yaml);
        h.insert("content-type", "text/plain".parse().unwrap());
        assert!(matches!(
            body_format(&h),
            Err(ApiError::UnsupportedMediaType(_))
        ));
    }
}
