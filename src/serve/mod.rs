//! The HTTP listener: serves the router over hyper-util's HTTP/1 + HTTP/2 connection builder
//! with a header-read timeout, an idle (keep-alive) timeout and a connection limit that degrades
//! gracefully, and drains on shutdown as `axum::serve(..).with_graceful_shutdown(..)` did.
//!
//! Why not `axum::serve`: it gives hyper no timer, so no header-read timeout applies, and it has
//! neither an idle timeout nor a connection limit. Slowloris connections and idle sockets stayed
//! open for ever, and at the file-descriptor limit `accept` failed for every client, `/healthz`
//! included. hyper's own `header_read_timeout` is not used either: it starts as soon as the
//! previous response is written, so it would also be the keep-alive idle timeout, and it does
//! not cover HTTP/2 or the protocol detection that precedes both.
//!
//! What each connection gets (measured here, per connection, by a watchdog in its task):
//!
//! * *header read*: the first request head must be complete `header_read_timeout` after the
//!   connection opens; a later one, `header_read_timeout` after its first byte arrives;
//! * *idle*: between requests, a keep-alive connection may wait `idle_timeout` for the next;
//! * a connection with a request in progress (its response not fully sent) is never timed out
//!   here: requests have `server.request_timeout_sec`, and streams are long by design.
//!
//! How the limit degrades: every connection holds one of `max_connections` permits. When a new
//! connection finds none free, the connection that has been idle the longest (no request in
//! progress: a slowloris still sending its head, or a keep-alive socket between requests) is
//! closed to make room. That loses no request: a slowloris is owed nothing, and HTTP clients
//! retry a request on a keep-alive connection that closes. Only when every connection is busy
//! do new connections wait, in the kernel's listen backlog, until one finishes. The same
//! eviction answers `EMFILE`/`ENFILE` from `accept` (file descriptors ran out before the
//! limit): an idle connection is closed and `accept` retried soon after, so `/healthz` keeps
//! answering instead of every client failing.
//!
//! With HTTP/2 (prior knowledge), any frame received between requests (a `PING`, say) starts
//! the header-read clock, so such a connection is closed `header_read_timeout` after it, unless
//! a request follows.
//!
//! `wrap.rs` holds the socket and body wrappers that report a connection's progress here.

mod wrap;

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::config::ServerConfig;
pub(crate) use wrap::GuardedBody;
use wrap::{Tracked, is_connection_error};

/// The per-connection settings (`server.header_read_timeout_sec`, `server.idle_timeout_sec`,
/// `server.max_connections`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a request head may take (see the module docs for when the clock starts).
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

impl From<&ServerConfig> for ConnectionLimits {
    fn from(cfg: &ServerConfig) -> Self {
        Self {
            header_read_timeout: Duration::from_secs(cfg.header_read_timeout_sec),
            idle_timeout: Duration::from_secs(cfg.idle_timeout_sec),
            max_connections: cfg.max_connections,
        }
    }
}

/// After `accept` fails for lack of file descriptors: the longest pause before trying again
/// (sooner once a connection has closed), short when an idle connection was just evicted to
/// free one.
const ACCEPT_RETRY_AFTER_EVICTION: Duration = Duration::from_millis(20);
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// The limit or descriptor warnings are logged at most this often (an attack repeats them).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown` is cancelled, then stops accepting, lets open
/// requests finish (idle connections close at once) and returns once every connection has
/// closed. Dropping the future (the shutdown deadline passed) closes the connections left.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let registry = Arc::new(Registry::new(limits));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    let connections = TaskTracker::new();
    let abort = CancellationToken::new();
    let _abort_on_drop = abort.clone().drop_guard();
    let mut warned: Option<Instant> = None;
    let mut warn = |message: &str, error: Option<&io::Error>| {
        if warned.is_none_or(|w| w.elapsed() >= WARN_EVERY) {
            warned = Some(Instant::now());
            match error {
                Some(e) => {
                    tracing::warn!(error = %e, max_connections = limits.max_connections, "{message}")
                }
                None => tracing::warn!(max_connections = limits.max_connections, "{message}"),
            }
        }
    };

    'accept: loop {
        let stream = loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((stream, _)) => break stream,
                    Err(e) if is_connection_error(&e) => continue,
                    Err(e) => {
                        // Most likely EMFILE/ENFILE: free a descriptor rather than fail everyone.
                        warn("accepting a connection failed; closing an idle connection", Some(&e));
                        let closed = registry.closed.notified();
                        tokio::pin!(closed);
                        closed.as_mut().enable();
                        // Retry as soon as the evicted connection has let go of its socket.
                        let retry = if registry.evict_idlest() {
                            ACCEPT_RETRY_AFTER_EVICTION
                        } else {
                            ACCEPT_RETRY
                        };
                        tokio::select! {
                            () = &mut closed => continue,
                            () = tokio::time::sleep(retry) => continue,
                            () = shutdown.cancelled() => break 'accept,
                        }
                    }
                },
                () = shutdown.cancelled() => break 'accept,
            }
        };
        // Accepted first, so room is made only for a connection that is really there. While
        // it waits for room, the next ones wait in the listen backlog.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                warn(
                    "connection limit reached: closing idle connections to make room",
                    None,
                );
                match make_room(&registry, &permits, &shutdown).await {
                    Some(p) => p,
                    None => break 'accept,
                }
            }
        };
        let conn = registry.register();
        let task = serve_connection(
            stream,
            conn,
            registry.clone(),
            router.clone(),
            builder.clone(),
            shutdown.clone(),
            abort.clone(),
        );
        connections.spawn(async move {
            task.await;
            drop(permit);
        });
    }
    // Stop accepting: new connections are refused from here on.
    drop(listener);
    connections.close();
    tracing::debug!(
        connections = connections.len(),
        "waiting for open connections to finish"
    );
    connections.wait().await;
}

/// Waits for a free permit, closing the longest-idle connection to get one. `None` on shutdown.
async fn make_room(
    registry: &Registry,
    permits: &Arc<Semaphore>,
    shutdown: &CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    loop {
        // Registered before looking, so a connection going idle meanwhile is not missed.
        let went_idle = registry.went_idle.notified();
        tokio::pin!(went_idle);
        went_idle.as_mut().enable();
        if registry.evict_idlest() {
            // Its permit comes back when its task ends, a moment from now.
            return tokio::select! {
                p = permits.clone().acquire_owned() => p.ok(),
                () = shutdown.cancelled() => None,
            };
        }
        // Every connection is busy: wait for one to finish or to go idle.
        tokio::select! {
            p = permits.clone().acquire_owned() => return p.ok(),
            () = &mut went_idle => {}
            () = shutdown.cancelled() => return None,
        }
    }
}

/// One connection's life: serve it until it ends, shut it down gracefully on `shutdown`, drop
/// it when its watchdog says it has been idle (or waiting for a head) too long, or when it is
/// evicted, or on `abort`.
async fn serve_connection(
    stream: TcpStream,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
    router: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    shutdown: CancellationToken,
    abort: CancellationToken,
) {
    // TCP_NODELAY, as Go's net/http and most servers set it: a streamed answer (job events,
    // the MCP endpoint's SSE, an export) goes out in small writes, and with Nagle on each one
    // after the first waits for the client's delayed ACK, up to 40 ms. A failure only loses
    // that.
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(Tracked::new(stream, conn.clone(), registry.clone()));
    let service = {
        let conn = conn.clone();
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let guard = RequestGuard::begin(conn.clone());
            let response = router.clone().oneshot(req);
            async move {
                let response = response.await?;
                Ok::<_, Infallible>(response.map(|inner| GuardedBody::new(inner, guard)))
            }
        })
    };
    // In a block so the socket is closed before the registry says so.
    {
        let connection = builder.serve_connection(io, service);
        tokio::pin!(connection);
        let watchdog = registry.watchdog(&conn);
        tokio::pin!(watchdog);
        let mut draining = false;
        loop {
            tokio::select! {
                r = connection.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                () = shutdown.cancelled(), if !draining => {
                    // Idle: nothing to finish (a slowloris would otherwise hold the drain until
                    // its header timeout). Busy: finish the request in progress, then close.
                    if conn.busy.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    draining = true;
                    connection.as_mut().graceful_shutdown();
                }
                why = &mut watchdog => {
                    // The watchdog returns only while no request is in progress (checked in this
                    // same poll, so none can have started since): dropping the connection loses
                    // nothing.
                    tracing::debug!(reason = why.as_str(), "closing connection");
                    break;
                }
                () = abort.cancelled() => break,
            }
        }
    }
    registry.remove(conn.id);
    registry.closed.notify_waiters();
}

/// Why the watchdog closes a connection.
#[derive(Debug, Clone, Copy)]
enum Close {
    HeaderTimeout,
    IdleTimeout,
    Evicted,
}

impl Close {
    fn as_str(self) -> &'static str {
        match self {
            Self::HeaderTimeout => "header read timeout",
            Self::IdleTimeout => "idle timeout",
            Self::Evicted => "evicted to make room for a new connection",
        }
    }
}

/// The open connections, for eviction.
struct Registry {
    limits: ConnectionLimits,
    /// Times are kept as milliseconds since this instant, so they fit in atomics.
    epoch: Instant,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Notified whenever a connection's last request finishes, for [`make_room`].
    went_idle: Notify,
    /// Notified whenever a connection has closed (its socket is released).
    closed: Notify,
}

/// What the watchdog and the eviction need to know about one connection.
struct Conn {
    id: u64,
    /// Requests whose response has not been fully sent and flushed (HTTP/2 may have several).
    busy: AtomicUsize,
    /// Requests whose response body is done, waiting for the flush that settles them.
    finished: AtomicUsize,
    /// When the connection opened or its last request finished (ms since the epoch).
    idle_since_ms: AtomicU64,
    /// When the first byte of the next request head arrived, plus one (0: none yet).
    head_started_ms: AtomicU64,
    /// Whether a request was ever served (the first head's clock runs from the open).
    served: AtomicBool,
    /// Set by [`Registry::evict_idlest`].
    evict: AtomicBool,
    /// Wakes the watchdog on every change above.
    wake: Notify,
}

impl Registry {
    fn new(limits: ConnectionLimits) -> Self {
        Self {
            limits,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            went_idle: Notify::new(),
            closed: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// `ms` after the epoch plus `after`; saturates far in the future instead of overflowing.
    fn deadline(&self, ms: u64, after: Duration) -> Instant {
        let far = Duration::from_secs(100 * 365 * 86_400);
        self.epoch
            .checked_add(Duration::from_millis(ms).saturating_add(after))
            .unwrap_or_else(|| self.epoch + far)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn register(&self) -> Arc<Conn> {
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            busy: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            head_started_ms: AtomicU64::new(0),
            served: AtomicBool::new(false),
            evict: AtomicBool::new(false),
            wake: Notify::new(),
        });
        self.lock().insert(conn.id, conn.clone());
        conn
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Marks the connection idle the longest for closing. `false` when every connection is busy
    /// (or already marked).
    fn evict_idlest(&self) -> bool {
        let conns = self.lock();
        let idlest = conns
            .values()
            .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.evict.load(Ordering::Acquire))
            // Ties (same millisecond) go to the older connection: ids grow with registration,
            // and a map's order would otherwise pick at random, closing a newer connection
            // while an older one stays.
            .min_by_key(|c| (c.idle_since_ms.load(Ordering::Acquire), c.id));
        match idlest {
            Some(c) => {
                c.evict.store(true, Ordering::Release);
                c.wake.notify_one();
                true
            }
            None => false,
        }
    }

    /// Resolves when `conn` should be closed; only ever while no request is in progress on it.
    async fn watchdog(&self, conn: &Conn) -> Close {
        loop {
            // `notify_one` keeps a permit when nobody waits, so no change is missed between
            // these loads and the wait below.
            let changed = conn.wake.notified();
            if conn.busy.load(Ordering::Acquire) > 0 {
                changed.await;
                continue;
            }
            if conn.evict.load(Ordering::Acquire) {
                return Close::Evicted;
            }
            let head = conn.head_started_ms.load(Ordering::Acquire);
            let (deadline, why) = if !conn.served.load(Ordering::Acquire) {
                let opened = conn.idle_since_ms.load(Ordering::Acquire);
                (
                    self.deadline(opened, self.limits.header_read_timeout),
                    Close::HeaderTimeout,
                )
            } else if head > 0 {
                (
                    self.deadline(head - 1, self.limits.header_read_timeout),
                    Close::HeaderTimeout,
                )
            } else {
                let idle = conn.idle_since_ms.load(Ordering::Acquire);
                (
                    self.deadline(idle, self.limits.idle_timeout),
                    Close::IdleTimeout,
                )
            };
            if Instant::now() >= deadline {
                return why;
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// Held from the moment a request head is complete until its response body is dropped (fully
/// written, or the connection went away); the connection is busy until then and the flush
/// after it.
struct RequestGuard {
    conn: Arc<Conn>,
}

impl RequestGuard {
    fn begin(conn: Arc<Conn>) -> Self {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        conn.served.store(true, Ordering::Release);
        conn.wake.notify_one();
        Self { conn }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        // Not idle yet: hyper drops a body once its last bytes are in its write buffer, before
        // they are flushed. The next flush (see `Tracked`) makes the connection idle, so an
        // eviction can never cut the end of a response.
        self.conn.finished.fetch_add(1, Ordering::AcqRel);
    }
}

impl Conn {
    /// After a flush: counts the requests finished before it as done; the last one makes the
    /// connection idle.
    fn settle(&self, registry: &Registry) {
        let n = self.finished.swap(0, Ordering::AcqRel);
        if n == 0 {
            return;
        }
        // The idle clock is reset before the connection counts as idle, so a byte read in
        // between cannot be attributed to the request that just ended.
        self.idle_since_ms
            .store(registry.now_ms(), Ordering::Release);
        self.head_started_ms.store(0, Ordering::Release);
        if self.busy.fetch_sub(n, Ordering::AcqRel) == n {
            self.wake.notify_one();
            registry.went_idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_their_config_keys() {
        let cfg = ServerConfig {
            header_read_timeout_sec: 7,
            idle_timeout_sec: 11,
            max_connections: 13,
            ..ServerConfig::default()
        };
        let l = ConnectionLimits::from(&cfg);
        assert_eq!(l.header_read_timeout, Duration::from_secs(7));
        assert_eq!(l.idle_timeout, Duration::from_secs(11));
        assert_eq!(l.max_connections, 13);
    }
}
