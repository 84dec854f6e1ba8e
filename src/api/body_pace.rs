//! A minimum rate for the body of every ordinary request.
//!
//! `server.request_timeout_sec` (30 s by default) alone cuts a request that drips its body only
//! after holding its connection for all of that time: 45 `POST /v1/jobs` announcing a 1 MB body
//! and sending a byte every 2 s kept 40 connections busy, and `/healthz` waited in the listen
//! backlog until they timed out; a client that reconnected kept it so.
//!
//! Now a body must arrive within [`BODY_GRACE`] (any body of a sensible size on any working
//! link does), or it becomes a long request: it needs one of `server.max_long_requests`
//! permits, the pool uploads and event streams share (within its key's share), to go on
//! arriving, and must then keep to
//! [`MIN_BODY_RATE`]. Without a free permit, or below the rate, it is cut with `408
//! request_timeout` and its connection closed. So slow bodies can hold at most the long
//! requests' share of the connections, never all of them, and each only for a time bounded by
//! its size. The permit is held while the body arrives, not while the request is handled.

use std::pin::pin;
use std::time::Duration;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::long_requests::LongRequests;
use crate::error::ApiError;

/// How long a body may take to arrive without counting as a long request.
pub(crate) const BODY_GRACE: Duration = Duration::from_secs(2);

/// The slowest a body may arrive once it counts as a long request, in bytes a second: a 10 MB
/// config (the default `server.max_body_bytes`) in under six minutes.
pub(crate) const MIN_BODY_RATE: u64 = 32 * 1024;

/// Reads the request's body whole (up to `body_limit`) at the pace above, and returns the
/// request with its body in memory; or the response that refuses it. A request without a body
/// passes untouched.
pub(crate) async fn read(
    req: Request,
    long: &LongRequests,
    key: Option<&str>,
    body_limit: usize,
) -> Result<Request, Response> {
    if req.body().size_hint().exact() == Some(0) {
        return Ok(req);
    }
    let announced = req.body().size_hint().exact();
    let (parts, body) = req.into_parts();
    // Read as the handlers' extractors would: under the `DefaultBodyLimit` layer's bound.
    let mut reading = pin!(Bytes::from_request(
        Request::from_parts(parts.clone(), body),
        &()
    ));
    let read = match tokio::time::timeout(BODY_GRACE, &mut reading).await {
        Ok(read) => read,
        Err(_) => {
            // Past the key's share or the server's permits: cut (a slow body, not a busy
            // server, is the cause).
            let Ok(_permit) = long.try_permit(key) else {
                return Err(too_slow());
            };
            // Past the grace, the rest must come at the minimum rate; a body without a length
            // gets the time a full `body_limit` would.
            let size = announced.unwrap_or(body_limit as u64);
            let allowed = Duration::from_secs(size.div_ceil(MIN_BODY_RATE));
            match tokio::time::timeout(allowed, &mut reading).await {
                Ok(read) => read,
                Err(_) => return Err(too_slow()),
            }
        }
    };
    match read {
        Ok(bytes) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(ApiError::PayloadTooLarge(body_limit).into_response())
        }
        Err(r) => Err(ApiError::InvalidRequest(r.body_text()).into_response()),
    }
}

/// `408 request_timeout`, closing the connection: the rest of the body is never read.
fn too_slow() -> Response {
    let mut resp = ApiError::Timeout.into_response();
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}
