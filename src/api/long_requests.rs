//! The bound on long requests: dataset uploads, event streams, exports and `/mcp`'s
//! server-sent stream, which `server.request_timeout_sec` does not cut, and request bodies that
//! arrive slowly (`api::body_pace`).
//!
//! Each such request holds one of `server.max_long_requests` permits until its response body
//! ends (an upload: until it is read and answered). Without the bound, clients dripping uploads
//! a byte at a time (each chunk inside `datasets.upload_idle_timeout_sec`) or opening event
//! streams filled `server.max_connections` with busy connections, which the connection limit
//! cannot evict, and `/healthz` waited in the listen backlog. The default leaves a quarter of
//! the connections to short requests; past the bound a long request gets `503 server_busy` at
//! once, with `Retry-After`.

use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::error::ApiError;

/// The permits of `server.max_long_requests`.
#[derive(Clone)]
pub(crate) struct LongRequests {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl LongRequests {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// A permit, if one is free: held by a request body that arrives slowly
    /// (`api::body_pace`) while it arrives.
    pub(crate) fn try_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.permits).try_acquire_owned().ok()
    }

    /// Runs `run` holding a permit until its response body ends, or answers `server_busy`.
    pub(crate) async fn run<F>(&self, run: F) -> Response
    where
        F: Future<Output = Response>,
    {
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            return ApiError::ServerBusy(self.limit).into_response();
        };
        run.await
            .map(|body| Body::new(crate::serve::GuardedBody::new(body, permit)))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[tokio::test]
    async fn a_permit_is_held_until_the_body_ends() {
        let long = LongRequests::new(1);
        let first = long
            .run(async { Response::new(Body::from("stream")) })
            .await;
        let refused = long.run(async { Response::new(Body::empty()) }).await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "1");
        // Read to its end and dropped: the permit is free again.
        let bytes = axum::body::to_bytes(first.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(bytes, "stream");
        let again = long.run(async { Response::new(Body::empty()) }).await;
        assert_eq!(again.status(), StatusCode::OK);
    }
}
