//! `Host` and `Origin` checks on every route: a web page must not be able to drive the API.
//!
//! * **DNS rebinding.** A page on `evil.example` whose name is made to resolve to 127.0.0.1
//!   talks to a local synthgate as if it were its own origin: the browser sends no `Origin` on
//!   a same-origin GET, but it sends `Host: evil.example`. So the `Host` must be one this
//!   server answers to: `server.allowed_hosts`, or, when that is empty and the server listens
//!   on a loopback address (the default install, which has no keys), the loopback names. A
//!   server listening on another address with no list answers to any host (it is reached by
//!   names it cannot know: service names, load balancers), and relies on its keys.
//! * **Cross-origin requests.** A request that carries an `Origin` (browsers send one on
//!   cross-origin requests and on same-origin POSTs) must come from the server's own origin
//!   (the origin's host and port are the request's `Host`) or from one of
//!   `server.allowed_origins`. The MCP specification requires this of streamable HTTP
//!   servers; here it holds for `/v1`, `/ui` and `/mcp` alike. Clients that are not browsers
//!   (curl, the CLI, SDKs) send no `Origin` and are not affected.
//!
//! `/healthz` and `/readyz` are exempt: orchestrators probe them by the pod's address, and they
//! reveal nothing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::{HostEntry, ServerConfig};
use crate::error::ApiError;

/// The names (and ports) a server answers to, and the foreign origins it accepts.
#[derive(Debug, Clone)]
pub struct HostGuard {
    /// `None`: any host (a non-loopback listener without `server.allowed_hosts`).
    hosts: Option<Vec<HostEntry>>,
    /// Lower-cased `scheme://host[:port]` of each of `server.allowed_origins`.
    origins: Vec<String>,
}

/// Names of the loopback interface, allowed by default on a loopback listener.
const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

impl HostGuard {
    /// The guard for `server`; entries were checked by `ServerConfig::problems`.
    pub fn new(server: &ServerConfig) -> Arc<Self> {
        let hosts = if !server.allowed_hosts.is_empty() {
            Some(
                server
                    .allowed_hosts
                    .iter()
                    .filter_map(|h| HostEntry::parse(h))
                    .collect(),
            )
        } else if is_loopback(&server.host) {
            Some(
                LOOPBACK_NAMES
                    .iter()
                    .map(|h| HostEntry {
                        host: (*h).to_owned(),
                        port: None,
                    })
                    .collect(),
            )
        } else {
            None
        };
        let origins = server
            .allowed_origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Arc::new(Self { hosts, origins })
    }

    /// Why the request must be refused, if it must.
    fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), ApiError> {
        let host_allowed = match (&self.hosts, host.and_then(HostEntry::parse)) {
            (None, _) => true,
            (Some(allowed), Some(h)) => allowed
                .iter()
                .any(|a| a.host == h.host && (a.port.is_none() || a.port == h.port)),
            (Some(_), None) => false,
        };
        if !host_allowed {
            return Err(ApiError::HostNotAllowed(format!(
                "this server does not answer to the host `{}` (server.allowed_hosts)",
                host.unwrap_or_default()
            )));
        }
        let Some(origin) = origin else {
            return Ok(());
        };
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        let same_origin = host.is_some_and(|h| {
            origin
                .split_once("://")
                .is_some_and(|(_, authority)| authority == h.to_ascii_lowercase())
        });
        if same_origin || self.origins.contains(&origin) {
            return Ok(());
        }
        Err(ApiError::OriginNotAllowed(format!(
            "requests from pages of the origin `{origin}` are not accepted (server.allowed_origins)"
        )))
    }
}

/// Middleware: refuses a request whose `Host` or `Origin` the guard does not accept.
pub async fn check_host_and_origin(
    State(guard): State<Arc<HostGuard>>,
    req: Request,
    next: Next,
) -> Response {
    if matches!(req.uri().path(), "/healthz" | "/readyz") {
        return next.run(req).await;
    }
    // HTTP/2 carries the host as the `:authority` pseudo-header, which hyper puts in the URI.
    let host = req
        .headers()
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let origin = req.headers().get(ORIGIN).map(|v| v.to_str().unwrap_or("?"));
    match guard.check(host, origin) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// Whether `addr` (the listener's `server.host`) is a loopback address or name.
fn is_loopback(addr: &str) -> bool {
    addr.eq_ignore_ascii_case("localhost")
        || addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(host: &str, allowed_hosts: &[&str], allowed_origins: &[&str]) -> Arc<HostGuard> {
        HostGuard::new(&ServerConfig {
            host: host.into(),
            allowed_hosts: allowed_hosts.iter().map(|s| (*s).to_owned()).collect(),
            allowed_origins: allowed_origins.iter().map(|s| (*s).to_owned()).collect(),
            ..ServerConfig::default()
        })
    }

    fn code(r: Result<(), ApiError>) -> &'static str {
        r.err().map_or("ok", |e| e.code())
    }

    #[test]
    fn a_loopback_listener_answers_to_loopback_names_only() {
        let g = guard("127.0.0.1", &[], &[]);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
        ] {
            assert_eq!(code(g.check(Some(host), None)), "ok", "{host}");
        }
        for host in [
            "evil.example:8080",
            "evil.example",
            "127.0.0.1.evil.example",
        ] {
            assert_eq!(
                code(g.check(Some(host), None)),
                "host_not_allowed",
                "{host}"
            );
        }
        assert_eq!(code(g.check(None, None)), "host_not_allowed");
    }

    #[test]
    fn other_listeners_answer_to_any_host_unless_a_list_is_given() {
        let g = guard("0.0.0.0", &[], &[]);
        assert_eq!(code(g.check(Some("synthgate:8080"), None)), "ok");
        let g = guard("0.0.0.0", &["synthgate", "api.example.com:443"], &[]);
        assert_eq!(code(g.check(Some("synthgate:8080"), None)), "ok");
        assert_eq!(code(g.check(Some("api.example.com:443"), None)), "ok");
        assert_eq!(
            code(g.check(Some("api.example.com:8443"), None)),
            "host_not_allowed"
        );
        assert_eq!(code(g.check(Some("localhost"), None)), "host_not_allowed");
    }

    #[test]
    fn origins_must_be_the_servers_own_or_listed() {
        let g = guard("127.0.0.1", &[], &["https://app.example.com"]);
        let host = Some("127.0.0.1:8080");
        assert_eq!(code(g.check(host, Some("http://127.0.0.1:8080"))), "ok");
        assert_eq!(code(g.check(host, Some("https://app.example.com/"))), "ok");
        for origin in ["http://evil.example", "null", "http://127.0.0.1:9999", "?"] {
            assert_eq!(
                code(g.check(host, Some(origin))),
                "origin_not_allowed",
                "{origin}"
            );
        }
    }

    #[test]
    fn host_entries_parse() {
        for ok in [
            "synthgate",
            "a.example.com:443",
            "[::1]",
            "[::1]:8080",
            "10.0.0.1",
        ] {
            assert!(HostEntry::parse(ok).is_some(), "{ok}");
        }
        for bad in ["", "a b", "host:port", "[::1", "a/b"] {
            assert!(HostEntry::parse(bad).is_none(), "{bad}");
        }
    }
}
