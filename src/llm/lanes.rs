//! A provider's connections, in lanes: each lane is an HTTP client of its own, so its own
//! connection pool, and a request goes to the lane with the fewest requests in flight, a new
//! lane opening when every lane has [`STREAMS_PER_LANE`].
//!
//! Why: over TLS, hosted providers (OpenAI, Anthropic, Gemini) speak HTTP/2, and an HTTP client
//! multiplexes every request to one origin over one connection, whose server caps the streams
//! it carries at once (`SETTINGS_MAX_CONCURRENT_STREAMS`: 100 to 256 is usual). Requests past
//! the cap wait inside the client, so a model with `max_parallel_requests` 2,048 behind one
//! connection had at most that cap in flight, and its waits ran out the request timeout. Lanes
//! keep each connection under the cap. Over HTTP/1.1 (vLLM, Ollama, most gateways without TLS)
//! a connection carries one request at a time whatever the lane, so lanes change nothing there.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Requests one lane carries at once before another opens: under the 100 streams RFC 9113
/// asks servers to allow at least, with room for a server that allows exactly that.
pub(super) const STREAMS_PER_LANE: usize = 64;

/// Most lanes of one provider: 64 × 64 = 4,096 requests in flight before lanes share further.
const MAX_LANES: usize = 64;

/// A provider's lanes.
pub(super) struct Lanes {
    /// Extra CA certificates to trust (a provider's `tls_ca_file`).
    ca: Vec<reqwest::Certificate>,
    lanes: Mutex<Vec<Lane>>,
}

#[derive(Clone)]
struct Lane {
    http: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

/// A request's place in its lane, given back when dropped.
pub(super) struct Ticket {
    pub(super) http: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Lanes {
    /// One lane to start with, trusting `ca` besides the usual roots.
    pub(super) fn new(ca: Vec<reqwest::Certificate>) -> Result<Self, reqwest::Error> {
        let first = Lane {
            http: client(&ca)?,
            in_flight: Arc::default(),
        };
        Ok(Self {
            ca,
            lanes: Mutex::new(vec![first]),
        })
    }

    /// The lane for the next request: the least busy, or a new one when every lane carries
    /// [`STREAMS_PER_LANE`] (while fewer than [`MAX_LANES`] are open).
    pub(super) fn pick(&self) -> Ticket {
        let least = {
            let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            least_busy(&lanes)
        };
        let lane = if least.in_flight.load(Ordering::Relaxed) >= STREAMS_PER_LANE {
            self.open().unwrap_or(least)
        } else {
            least
        };
        lane.in_flight.fetch_add(1, Ordering::Relaxed);
        Ticket {
            http: lane.http,
            in_flight: lane.in_flight,
        }
    }

    /// Lanes open now.
    pub(super) fn len(&self) -> usize {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Opens a lane, unless [`MAX_LANES`] are open (then `None`). The client is built outside
    /// the lock; two callers racing may both open one, which only spreads requests further.
    fn open(&self) -> Option<Lane> {
        if self.len() >= MAX_LANES {
            return None;
        }
        let lane = Lane {
            http: client(&self.ca).ok()?,
            in_flight: Arc::default(),
        };
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if lanes.len() >= MAX_LANES {
            return Some(least_busy(&lanes));
        }
        lanes.push(lane.clone());
        tracing::debug!(
            lanes = lanes.len(),
            "opened another connection lane to a model provider"
        );
        Some(lane)
    }
}

fn least_busy(lanes: &[Lane]) -> Lane {
    lanes
        .iter()
        .min_by_key(|l| l.in_flight.load(Ordering::Relaxed))
        .expect("a provider has at least one lane")
        .clone()
}

/// One lane's HTTP client.
fn client(ca: &[reqwest::Certificate]) -> Result<reqwest::Client, reqwest::Error> {
    let mut b = reqwest::Client::builder()
        // A redirect would turn the POST into a GET and drop the body; report it instead.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("synthgate/", env!("CARGO_PKG_VERSION")));
    for c in ca {
        b = b.add_root_certificate(c.clone());
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_opens_when_every_lane_is_full_and_requests_go_to_the_least_busy() {
        crate::install_crypto_provider();
        let lanes = Lanes::new(Vec::new()).unwrap();
        let mut held: Vec<Ticket> = (0..STREAMS_PER_LANE).map(|_| lanes.pick()).collect();
        assert_eq!(lanes.len(), 1, "one lane carries {STREAMS_PER_LANE}");
        held.push(lanes.pick());
        assert_eq!(lanes.len(), 2, "the next request opens a second lane");
        // The second lane has one request, the first 64: the next goes to the second.
        held.push(lanes.pick());
        assert_eq!(lanes.len(), 2);
        held.drain(..STREAMS_PER_LANE);
        // The first lane is empty now: requests go there, no third lane.
        let more: Vec<Ticket> = (0..STREAMS_PER_LANE).map(|_| lanes.pick()).collect();
        assert_eq!(lanes.len(), 2);
        drop(more);
        drop(held);
    }

    #[test]
    fn lanes_stop_at_the_maximum() {
        crate::install_crypto_provider();
        let lanes = Lanes::new(Vec::new()).unwrap();
        let held: Vec<Ticket> = (0..STREAMS_PER_LANE * MAX_LANES + 10)
            .map(|_| lanes.pick())
            .collect();
        assert_eq!(lanes.len(), MAX_LANES);
        drop(held);
    }
}
