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
//!
//! One key may hold at most `server.max_long_requests_per_key` of them (half by default), so
//! a key that opens streams or drips uploads cannot take the permits every other key needs:
//! past its share it gets `429 too_many_long_requests`. Requests without a key (auth off) have
//! no share of their own: there is only one caller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// The permits of `server.max_long_requests`, and how many each key holds.
#[derive(Clone)]
pub(crate) struct LongRequests {
    permits: Arc<Semaphore>,
    limit: usize,
    per_key: usize,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// One long request's permit: the server's, and its key's share when it has a key. Counted in
/// `synthgate_http_long_requests` while it lives.
pub(crate) struct LongPermit {
    _server: OwnedSemaphorePermit,
    _key: Option<KeyShare>,
}

impl Drop for LongPermit {
    fn drop(&mut self) {
        metrics::gauge!(crate::metrics::HTTP_LONG_REQUESTS).decrement(1.0);
    }
}

/// One of a key's `max_long_requests_per_key`, given back when dropped.
struct KeyShare {
    key: String,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for KeyShare {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

impl LongRequests {
    pub(crate) fn new(limit: usize, per_key: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            per_key: per_key.clamp(1, limit.max(1)),
            held: Arc::default(),
        }
    }

    /// A permit for a long request of `key` (`None`: auth is off), or the refusal: `429
    /// too_many_long_requests` past the key's share, `503 server_busy` past the server's.
    pub(crate) fn try_permit(&self, key: Option<&str>) -> Result<LongPermit, ApiError> {
        let share = match key {
            None => None,
            Some(key) => {
                let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
                let n = held.entry(key.to_owned()).or_insert(0);
                if *n >= self.per_key {
                    return Err(ApiError::KeyBusy(self.per_key));
                }
                *n += 1;
                Some(KeyShare {
                    key: key.to_owned(),
                    held: Arc::clone(&self.held),
                })
            }
        };
        // Dropping `share` on refusal gives the key's count back.
        let server = Arc::clone(&self.permits)
            .try_acquire_owned()
            .map_err(|_| ApiError::ServerBusy(self.limit))?;
        metrics::gauge!(crate::metrics::HTTP_LONG_REQUESTS).increment(1.0);
        Ok(LongPermit {
            _server: server,
            _key: share,
        })
    }

    /// Runs `run` holding a permit of `key`'s until its response body ends, or answers with
    /// the refusal.
    pub(crate) async fn run<F>(&self, key: Option<&str>, run: F) -> Response
    where
        F: Future<Output = Response>,
    {
        let permit = match self.try_permit(key) {
            Ok(permit) => permit,
            Err(refused) => return refused.into_response(),
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
        let long = LongRequests::new(1, 1);
        let first = long
            .run(None, async { Response::new(Body::from("stream")) })
            .await;
        let refused = long.run(None, async { Response::new(Body::empty()) }).await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "1");
        // Read to its end and dropped: the permit is free again.
        let bytes = axum::body::to_bytes(first.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(bytes, "stream");
        let again = long.run(None, async { Response::new(Body::empty()) }).await;
        assert_eq!(again.status(), StatusCode::OK);
    }

    /// A key holds at most its share; the others still find permits, and a key's share comes
    /// back as its requests end (also when the server's permits were what refused it).
    #[test]
    fn each_key_holds_at_most_its_share() {
        let long = LongRequests::new(3, 2);
        let a1 = long.try_permit(Some("a")).unwrap();
        let _a2 = long.try_permit(Some("a")).unwrap();
        let refused = long.try_permit(Some("a")).err().unwrap();
        assert_eq!(refused.code(), "too_many_long_requests");
        let b1 = long.try_permit(Some("b")).unwrap();
        // The server's three are taken: b's second is refused by the server, not its share.
        let refused = long.try_permit(Some("b")).err().unwrap();
        assert_eq!(refused.code(), "server_busy");
        drop(b1);
        drop(a1);
        let _b = long.try_permit(Some("b")).unwrap();
        let _a = long.try_permit(Some("a")).unwrap();
        assert_eq!(long.held.lock().unwrap().get("a"), Some(&2));
        assert_eq!(long.held.lock().unwrap().get("b"), Some(&1));
    }
}
