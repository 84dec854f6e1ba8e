//! An origin's connections, in lanes: each lane is an HTTP client of its own, so its own
//! connection pool, and a request goes to the lane with the fewest requests in flight, a new
//! lane opening when every lane has [`STREAMS_PER_LANE`]. Model providers, MCP providers over
//! HTTP and inline tools each have their lanes.
//!
//! Why: over TLS, hosted services (OpenAI, Anthropic, Gemini; MCP servers behind a CDN or a
//! gateway) speak HTTP/2, and an HTTP client multiplexes every request to one origin over one
//! connection, whose server caps the streams it carries at once
//! (`SETTINGS_MAX_CONCURRENT_STREAMS`: 100 to 256 is usual). Requests past the cap wait inside
//! the client, so a model with `max_parallel_requests` 2,048 behind one connection had at most
//! that cap in flight, and its waits ran out the request timeout; tool calls to one MCP server
//! queued the same way, however many sessions the pool opened. Lanes keep each connection under
//! the cap. Over HTTP/1.1 (vLLM, Ollama, most servers without TLS) a connection carries one
//! request at a time whatever the lane, and lanes would only split the idle connections into
//! pools that cannot lend to each other (more connections made, 10 % more CPU per request at
//! 2,048 in flight): so a plain `http://` origin has one lane, and an `https://` one stops
//! opening lanes once a caller reports an answer over HTTP/1.1 ([`Lanes::answered_over`]).
//!
//! Lanes share one TLS configuration, so one certificate verifier: reqwest builds a verifier
//! per client, and each reads and parses the system's CA roots (about 150 certificates) again.
//! Every origin without a CA file of its own shares the process's one ([`tls_config`]).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Requests one lane carries at once before another opens: under the 100 streams RFC 9113
/// asks servers to allow at least, with room for a server that allows exactly that.
pub(crate) const STREAMS_PER_LANE: usize = 64;

/// Most lanes of one origin: 64 × 64 = 4,096 requests in flight before lanes share further.
const MAX_LANES: usize = 64;

/// What an origin is, for the log and the [`crate::metrics::HTTP_LANES`] gauge.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// `model_provider`, `mcp_provider` or `inline_tool`.
    pub(crate) kind: &'static str,
    /// Its configured name.
    pub(crate) name: String,
}

impl Origin {
    /// Sets the lanes gauge to `lanes`.
    fn count(&self, lanes: usize) {
        metrics::gauge!(crate::metrics::HTTP_LANES, "kind" => self.kind, "name" => self.name.clone())
            .set(lanes as f64);
    }
}

/// An origin's lanes.
pub(crate) struct Lanes {
    /// What the lanes reach.
    origin: Origin,
    /// TLS for every lane: the system's roots and the origin's CA file, HTTP/2 and HTTP/1.1
    /// offered by ALPN.
    tls: rustls::ClientConfig,
    lanes: Mutex<Vec<Lane>>,
    /// The origin answers over HTTP/1.1 (a plain `http://` endpoint, or an answer seen):
    /// every request goes to the first lane.
    http1: AtomicBool,
}

#[derive(Clone)]
struct Lane {
    http: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

/// A request's place in its lane, given back when dropped: hold it until the answer (its body,
/// or the event stream it opened) is read in full.
pub(crate) struct Ticket(Lane);

impl Ticket {
    fn take(lane: Lane) -> Self {
        lane.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(lane)
    }

    /// The lane's client.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.0.http
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Lanes {
    /// One lane to start with, on `tls` (see [`tls_config`]), for `url`: an `http://` one is
    /// only ever spoken HTTP/1.1 to. `origin` names it in the log and the lanes gauge.
    pub(crate) fn new(
        origin: Origin,
        tls: rustls::ClientConfig,
        url: &str,
    ) -> Result<Self, reqwest::Error> {
        let first = Lane {
            http: client(&tls)?,
            in_flight: Arc::default(),
        };
        let plain = crate::config::http_url(url).is_some_and(|u| u.scheme() == "http");
        origin.count(1);
        Ok(Self {
            origin,
            tls,
            lanes: Mutex::new(vec![first]),
            http1: AtomicBool::new(plain),
        })
    }

    /// Notes the HTTP version an answer came in: from an HTTP/1.1 answer on, one lane.
    pub(crate) fn answered_over(&self, version: reqwest::Version) {
        if version < reqwest::Version::HTTP_2 && !self.http1.load(Ordering::Relaxed) {
            self.http1.store(true, Ordering::Relaxed);
        }
    }

    /// The lane for the next request: the least busy, or a new one when every lane carries
    /// [`STREAMS_PER_LANE`] (while fewer than [`MAX_LANES`] are open).
    pub(crate) fn pick(&self) -> Ticket {
        let http1 = self.http1.load(Ordering::Relaxed);
        let least = {
            let lanes = self.lock();
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

    /// The first lane's client, for a caller that holds one client for good (the legacy SSE
    /// transport, whose answers all come down one stream).
    pub(crate) fn first(&self) -> reqwest::Client {
        self.lock()[0].http.clone()
    }

    /// Lanes open now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Lane>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
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
        let mut lanes = self.lock();
        if lanes.len() >= MAX_LANES {
            return Some(least_busy(&lanes));
        }
        lanes.push(lane.clone());
        self.origin.count(lanes.len());
        tracing::debug!(
            lanes = lanes.len(),
            origin.kind = self.origin.kind,
            origin.name = %self.origin.name,
            "opened another connection lane"
        );
        Some(lane)
    }
}

fn least_busy(lanes: &[Lane]) -> Lane {
    lanes
        .iter()
        .min_by_key(|l| l.in_flight.load(Ordering::Relaxed))
        .expect("an origin has at least one lane")
        .clone()
}

/// Why an origin's TLS configuration or client could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    /// The CA file cannot be read or holds no PEM certificate.
    #[error("tls_ca_file '{path}': {reason}")]
    CaFile {
        /// The file as configured.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls, the platform verifier or the HTTP client refused the configuration.
    #[error("{0}")]
    Config(String),
}

/// The lanes of an origin at `url` that trusts `ca_file` besides the system's roots: see
/// [`tls_config`] and [`Lanes::new`].
pub(crate) fn lanes_for(
    origin: Origin,
    ca_file: Option<&Path>,
    url: &str,
) -> Result<Lanes, TlsError> {
    let tls = tls_config(ca_file)?;
    Lanes::new(origin, tls, url).map_err(|e| TlsError::Config(e.to_string()))
}

/// The TLS configuration of an origin's lanes: what reqwest builds for a client of its own
/// (the platform verifier on ring, TLS 1.2 and 1.3, `h2` and `http/1.1` by ALPN), trusting the
/// certificates of `ca_file` besides the system's roots. Without a CA file, the process's one
/// configuration, built on first use: building one reads and parses the system's roots.
pub(crate) fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, TlsError> {
    static SYSTEM: Mutex<Option<rustls::ClientConfig>> = Mutex::new(None);
    let Some(path) = ca_file else {
        let mut system = SYSTEM.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tls) = &*system {
            return Ok(tls.clone());
        }
        return Ok(system.insert(build(Vec::new())?).clone());
    };
    build(ca_certificates(path)?)
}

fn build(ca: Vec<CertificateDer<'static>>) -> Result<rustls::ClientConfig, TlsError> {
    let bad = |e: rustls::Error| TlsError::Config(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(ca, Arc::clone(&provider))
            .map_err(bad)?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(bad)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

/// The certificates of a CA file.
fn ca_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// One lane's HTTP client. No client-wide timeout (an MCP session's event stream lives long;
/// each request has its own); no redirects (one would turn a POST into a GET and drop the
/// body, and reqwest keeps custom headers, which may hold keys, on a redirect to another
/// origin).
fn client(tls: &rustls::ClientConfig) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
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

    fn lanes(url: &str) -> Lanes {
        crate::install_crypto_provider();
        let origin = Origin {
            kind: "model_provider",
            name: "test".into(),
        };
        Lanes::new(origin, tls_config(None).unwrap(), url).unwrap()
    }

    #[test]
    fn a_lane_opens_when_every_lane_is_full_and_requests_go_to_the_least_busy() {
        let lanes = lanes("https://api.example.com/v1");
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
        let lanes = lanes("https://api.example.com/v1");
        let held: Vec<Ticket> = (0..STREAMS_PER_LANE * MAX_LANES + 10)
            .map(|_| lanes.pick())
            .collect();
        assert_eq!(lanes.len(), MAX_LANES);
        drop(held);
    }

    #[test]
    fn an_http1_origin_keeps_one_lane() {
        for url in ["http://vllm:8000/v1", "HTTP://vllm:8000/v1"] {
            let plain = lanes(url);
            let held: Vec<Ticket> = (0..STREAMS_PER_LANE * 3).map(|_| plain.pick()).collect();
            assert_eq!(plain.len(), 1, "plain http:// is HTTP/1.1: one pool");
            drop(held);
        }

        let tls = lanes("https://api.example.com/v1");
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

    #[test]
    fn origins_without_a_ca_file_share_one_configuration() {
        crate::install_crypto_provider();
        let a = tls_config(None).unwrap();
        let b = tls_config(None).unwrap();
        assert!(
            Arc::ptr_eq(&a.crypto_provider().clone(), &b.crypto_provider().clone()),
            "the cached configuration, not a second build"
        );
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = tls_config(Some(&empty)).unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let err = tls_config(Some(&dir.path().join("missing.pem"))).unwrap_err();
        assert!(matches!(err, TlsError::CaFile { .. }), "{err}");
        assert!(err.to_string().contains("missing.pem"), "{err}");
    }
}
