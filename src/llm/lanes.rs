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
//! a connection carries one request at a time whatever the lane, and lanes would only split the
//! idle connections into pools that cannot lend to each other (more connections made, 10 % more
//! CPU per request at 2,048 in flight): so a plain `http://` provider has one lane, and an
//! `https://` one stops opening lanes once an answer came over HTTP/1.1.
//!
//! The lanes of a provider share one TLS configuration, so one certificate verifier (and the
//! providers without a `tls_ca_file` share theirs): reqwest builds a verifier per client, and
//! each reads and parses the system's CA roots (about 150 certificates) again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::CertificateDer;

/// Requests one lane carries at once before another opens: under the 100 streams RFC 9113
/// asks servers to allow at least, with room for a server that allows exactly that.
pub(super) const STREAMS_PER_LANE: usize = 64;

/// Most lanes of one provider: 64 × 64 = 4,096 requests in flight before lanes share further.
const MAX_LANES: usize = 64;

/// A provider's lanes.
pub(super) struct Lanes {
    /// TLS for every lane: the system's roots and the provider's `tls_ca_file`, HTTP/2 and
    /// HTTP/1.1 offered by ALPN.
    tls: rustls::ClientConfig,
    lanes: Mutex<Vec<Lane>>,
    /// The provider answers over HTTP/1.1 (a plain `http://` endpoint, or an answer seen):
    /// every request goes to the first lane.
    http1: AtomicBool,
}

#[derive(Clone)]
struct Lane {
    http: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

/// A request's place in its lane, given back when dropped.
pub(super) struct Ticket(Lane);

impl Ticket {
    fn take(lane: Lane) -> Self {
        lane.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(lane)
    }

    /// The lane's client.
    pub(super) fn http(&self) -> &reqwest::Client {
        &self.0.http
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Lanes {
    /// One lane to start with, on `tls` (see [`tls_config`]). `plain`: the endpoint is
    /// `http://`, which this client only speaks HTTP/1.1 to.
    pub(super) fn new(tls: rustls::ClientConfig, plain: bool) -> Result<Self, reqwest::Error> {
        let first = Lane {
            http: client(&tls)?,
            in_flight: Arc::default(),
        };
        Ok(Self {
            tls,
            lanes: Mutex::new(vec![first]),
            http1: AtomicBool::new(plain),
        })
    }

    /// Notes the HTTP version an answer came in: from an HTTP/1.1 answer on, one lane.
    pub(super) fn answered_over(&self, version: reqwest::Version) {
        if version < reqwest::Version::HTTP_2 && !self.http1.load(Ordering::Relaxed) {
            self.http1.store(true, Ordering::Relaxed);
        }
    }

    /// The lane for the next request: the least busy, or a new one when every lane carries
    /// [`STREAMS_PER_LANE`] (while fewer than [`MAX_LANES`] are open).
    pub(super) fn pick(&self) -> Ticket {
        let http1 = self.http1.load(Ordering::Relaxed);
        let least = {
            let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            if http1 {
                lanes[0].clone()
            } else {
                least_busy(&lanes)
            }
        };
        if http1 || least.in_flight.load(Ordering::Relaxed) < STREAMS_PER_LANE {
            return Ticket::take(least);
        }
        Ticket::take(self.open().unwrap_or(least))
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
            http: client(&self.tls).ok()?,
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

/// The TLS configuration a provider's lanes share: what reqwest builds for a client of its own
/// (the platform verifier on ring, TLS 1.2 and 1.3, `h2` and `http/1.1` by ALPN), trusting
/// `ca` besides the system's roots. Built once per `tls_ca_file` (once for all providers
/// without one): building it reads and parses the system's roots.
pub(super) fn tls_config(
    ca: Vec<CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(ca, Arc::clone(&provider))?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

/// One lane's HTTP client.
fn client(tls: &rustls::ClientConfig) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        // A redirect would turn the POST into a GET and drop the body; report it instead.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("synthgate/", env!("CARGO_PKG_VERSION")))
        .use_preconfigured_tls(tls.clone())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_opens_when_every_lane_is_full_and_requests_go_to_the_least_busy() {
        crate::install_crypto_provider();
        let lanes = Lanes::new(tls_config(Vec::new()).unwrap(), false).unwrap();
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
        let lanes = Lanes::new(tls_config(Vec::new()).unwrap(), false).unwrap();
        let held: Vec<Ticket> = (0..STREAMS_PER_LANE * MAX_LANES + 10)
            .map(|_| lanes.pick())
            .collect();
        assert_eq!(lanes.len(), MAX_LANES);
        drop(held);
    }

    #[test]
    fn an_http1_provider_keeps_one_lane() {
        crate::install_crypto_provider();
        let plain = Lanes::new(tls_config(Vec::new()).unwrap(), true).unwrap();
        let held: Vec<Ticket> = (0..STREAMS_PER_LANE * 3).map(|_| plain.pick()).collect();
        assert_eq!(plain.len(), 1, "plain http:// is HTTP/1.1: one pool");
        drop(held);

        let tls = Lanes::new(tls_config(Vec::new()).unwrap(), false).unwrap();
        let mut held: Vec<Ticket> = (0..=STREAMS_PER_LANE).map(|_| tls.pick()).collect();
        assert_eq!(tls.len(), 2, "HTTP/2 until told otherwise");
        tls.answered_over(reqwest::Version::HTTP_2);
        held.extend((0..STREAMS_PER_LANE).map(|_| tls.pick()));
        assert_eq!(tls.len(), 3);
        tls.answered_over(reqwest::Version::HTTP_11);
        held.extend((0..STREAMS_PER_LANE * 2).map(|_| tls.pick()));
        assert_eq!(tls.len(), 3, "an HTTP/1.1 answer stops new lanes");
        drop(held);
    }
}
