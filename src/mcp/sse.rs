//! The legacy MCP HTTP+SSE client transport (protocol revision 2024-11-05).
//!
//! In that transport the client opens one long-lived `GET` with `Accept: text/event-stream`. The
//! server's first event is `endpoint`, whose data is the URL (usually relative, carrying a
//! session id) where the client must `POST` each JSON-RPC message. Every server-to-client
//! message, responses included, then arrives on the SSE stream as a `message` event; the POSTs
//! are only acknowledged (202).
//!
//! rmcp removed its SSE transport in 0.11 (superseded by streamable HTTP), and its last release
//! with it (0.10) cannot be mixed with 3.x types, so this module implements it by hand on rmcp's
//! [`Transport`] trait: `rmcp::ServiceExt::serve(handler, transport)` works as with the built-in
//! transports.
//!
//! Security rule: the endpoint URL comes from the server, and every POST to it carries the
//! caller's headers (typically `Authorization: Bearer …`). An endpoint on another origin
//! (scheme, host, port) than the SSE URL is rejected, so a hostile or misconfigured server cannot
//! redirect the credentials elsewhere. For the same reason, header values and full URLs (which
//! may hold a token in the query or the session id) never appear in errors or logs: errors name
//! origins only, and reqwest errors are stripped of their URL.

use std::fmt;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseByteStream};

/// Most a POST's response body is read to let its connection be reused; the 2024-11-05 servers
/// answer `202 Accepted` with a word or two, so anything larger is not worth waiting for.
const MAX_DRAINED_BODY_BYTES: usize = 64 * 1024;

/// What can go wrong connecting to or talking over a legacy SSE MCP server.
///
/// Messages name origins, never full URLs or header values (see the module doc).
#[derive(Debug, thiserror::Error)]
pub enum SseTransportError {
    /// The SSE URL given by the caller does not parse.
    #[error("invalid SSE URL: {0}")]
    InvalidUrl(String),
    /// The `GET` for the SSE stream could not be sent or got no response.
    #[error("connecting to the SSE stream at {origin} failed: {source}")]
    Connect {
        origin: String,
        #[source]
        source: reqwest::Error,
    },
    /// The SSE stream answered with a non-2xx status (401 when the token is missing or wrong).
    #[error("the SSE stream at {origin} answered HTTP {status}")]
    Status { origin: String, status: StatusCode },
    /// The SSE stream failed before it sent an `endpoint` event.
    #[error("reading the SSE stream at {origin} failed before its endpoint event: {source}")]
    Stream {
        origin: String,
        #[source]
        source: sse_stream::Error,
    },
    /// The SSE stream ended without an `endpoint` event, so there is nowhere to send messages.
    #[error("the SSE stream at {origin} ended before sending an endpoint event")]
    NoEndpoint { origin: String },
    /// The `endpoint` event's data is not a URL, even relative to the SSE URL.
    #[error("the SSE stream at {origin} sent an endpoint event that is not a URL: {reason}")]
    InvalidEndpoint { origin: String, reason: String },
    /// The `endpoint` event points to another origin; following it would leak the credentials.
    #[error(
        "the SSE stream at {origin} sent an endpoint on another origin ({endpoint_origin}); \
         refusing to send requests and credentials there"
    )]
    CrossOriginEndpoint {
        origin: String,
        endpoint_origin: String,
    },
    /// A message `POST` could not be sent or got no response.
    #[error("posting a message to {origin} failed: {source}")]
    Post {
        origin: String,
        #[source]
        source: reqwest::Error,
    },
    /// A message `POST` answered with a non-2xx status (404 once the server forgot the session).
    #[error("posting a message to {origin} answered HTTP {status}")]
    PostStatus { origin: String, status: StatusCode },
}

/// A client session on a legacy HTTP+SSE MCP server; hand it to `rmcp::ServiceExt::serve`.
///
/// The SSE stream lives in the struct and is polled by [`Transport::receive`], so the transport
/// needs no background task: closing or dropping it drops the stream, which closes the `GET`.
pub struct SseClientTransport {
    /// The caller's shared client (its connection pool, TLS setup and timeouts).
    http: reqwest::Client,
    /// Sent with every POST, as with the `GET`; may hold credentials, so never logged.
    headers: HeaderMap,
    /// Where messages are POSTed: the resolved `endpoint` event, same origin as the SSE URL.
    endpoint: Url,
    /// `scheme://host:port` of the server, the only part of its URLs that logs and errors show.
    origin: String,
    /// The server's events after `endpoint`; `None` once closed or ended.
    events: Option<BoxStream<'static, Result<Sse, sse_stream::Error>>>,
}

impl SseClientTransport {
    /// GETs `url` with `Accept: text/event-stream` and `headers` (e.g. `Authorization: Bearer`),
    /// waits for the first `endpoint` event, resolves it against `url`, and returns the transport.
    ///
    /// There is no timeout here: the SSE response never ends, so only the caller knows how long
    /// to wait for the endpoint; wrap the call in `tokio::time::timeout`. A stream that ends or
    /// fails before the `endpoint` event is an error.
    ///
    /// `http` must not have a total `timeout`: reqwest applies it to the response body too, so
    /// it would cut the stream, and with it the session, after that long. Bound each call
    /// instead (rmcp's per-request timeout, or `tokio::time::timeout`). Redirects follow the
    /// client's policy; reqwest drops `Authorization` when one crosses origins, but not custom
    /// headers, so pass a client with `redirect::Policy::none()` when those carry secrets.
    pub async fn connect(
        http: reqwest::Client,
        url: &str,
        headers: HeaderMap,
    ) -> Result<Self, SseTransportError> {
        let sse_url = Url::parse(url).map_err(|e| SseTransportError::InvalidUrl(e.to_string()))?;
        let origin = sse_url.origin().ascii_serialization();

        let mut get_headers = headers.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let response = http
            .get(sse_url.clone())
            .headers(get_headers)
            .send()
            .await
            .map_err(|e| SseTransportError::Connect {
                origin: origin.clone(),
                source: e.without_url(),
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(SseTransportError::Status { origin, status });
        }

        // A relative endpoint is relative to where the stream really is (after any redirect),
        // but it must stay on the origin the caller configured and gave credentials for.
        let stream_url = response.url().clone();
        let mut events = SseByteStream::new(response.bytes_stream()).boxed();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    let data = event.data.unwrap_or_default();
                    break resolve_endpoint(&sse_url, &stream_url, data.trim())?;
                }
                // The 2024-11-05 spec puts `endpoint` first; anything earlier has no session
                // to belong to.
                Some(Ok(_)) => continue,
                Some(Err(source)) => return Err(SseTransportError::Stream { origin, source }),
                None => return Err(SseTransportError::NoEndpoint { origin }),
            }
        };
        tracing::debug!(server.origin = %origin, "connected to legacy SSE MCP server");
        Ok(Self {
            http,
            headers,
            endpoint,
            origin,
            events: Some(events),
        })
    }
}

/// Resolves an `endpoint` event's data against the stream's final URL and enforces the
/// same-origin rule against the configured SSE URL.
fn resolve_endpoint(sse_url: &Url, stream_url: &Url, data: &str) -> Result<Url, SseTransportError> {
    let origin = sse_url.origin();
    let endpoint = stream_url
        .join(data)
        .map_err(|e| SseTransportError::InvalidEndpoint {
            origin: origin.ascii_serialization(),
            reason: e.to_string(),
        })?;
    // `Origin` compares scheme, host and port (default ports included), and never equates
    // opaque origins, so `data:` or `file:` endpoints fail here too.
    if endpoint.origin() != origin {
        return Err(SseTransportError::CrossOriginEndpoint {
            origin: origin.ascii_serialization(),
            endpoint_origin: endpoint.origin().ascii_serialization(),
        });
    }
    Ok(endpoint)
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseTransportError;

    fn name() -> std::borrow::Cow<'static, str> {
        "legacy-sse".into()
    }

    /// POSTs one message to the endpoint. The reply comes later on the SSE stream, not in the
    /// POST's response, whose body is only drained so the connection can be reused.
    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Built now so the future owns everything it needs (rmcp runs it detached).
        let request = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        let origin = self.origin.clone();
        async move {
            let mut response = request.send().await.map_err(|e| SseTransportError::Post {
                origin: origin.clone(),
                source: e.without_url(),
            })?;
            let status = response.status();
            if !status.is_success() {
                return Err(SseTransportError::PostStatus { origin, status });
            }
            let mut drained = 0;
            while let Ok(Some(chunk)) = response.chunk().await {
                drained += chunk.len();
                if drained > MAX_DRAINED_BODY_BYTES {
                    break;
                }
            }
            Ok(())
        }
    }

    /// The next server message from the SSE stream; `None` once the stream ended, failed or was
    /// closed, which rmcp treats as the transport closing.
    ///
    /// Cancel-safe (rmcp polls it inside `select!`): the only await is the stream's `next()`,
    /// and an event is either returned or deliberately skipped before the next await.
    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            match self.events.as_mut()?.next().await {
                Some(Ok(event)) => {
                    // No `event:` field means the SSE default type, which is `message`.
                    if event.event.as_deref().is_some_and(|e| e != "message") {
                        continue;
                    }
                    let Some(data) = event.data else { continue };
                    match serde_json::from_str(&data) {
                        Ok(message) => return Some(message),
                        // The data may be tool output, so only its size is logged.
                        Err(error) => tracing::warn!(
                            server.origin = %self.origin,
                            %error,
                            data_bytes = data.len(),
                            "skipping an SSE message that is not a JSON-RPC message"
                        ),
                    }
                }
                Some(Err(error)) => {
                    tracing::warn!(server.origin = %self.origin, %error, "SSE stream failed");
                    self.events = None;
                }
                None => {
                    tracing::debug!(server.origin = %self.origin, "SSE stream ended");
                    self.events = None;
                }
            }
        }
    }

    /// Drops the SSE stream, which closes the `GET`; the server then ends the session.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.events = None;
        Ok(())
    }
}

/// Shows only the origin: the headers may hold credentials and the endpoint a session id.
impl fmt::Debug for SseClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseClientTransport")
            .field("origin", &self.origin)
            .field("open", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::get;

    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn relative_endpoint_resolves_against_the_sse_url() {
        let sse = url("http://127.0.0.1:8000/mcp/sse");
        let got = resolve_endpoint(&sse, &sse, "/messages/?session_id=abc").unwrap();
        assert_eq!(
            got.as_str(),
            "http://127.0.0.1:8000/messages/?session_id=abc"
        );
        let got = resolve_endpoint(&sse, &sse, "messages?session_id=abc").unwrap();
        assert_eq!(
            got.as_str(),
            "http://127.0.0.1:8000/mcp/messages?session_id=abc"
        );
    }

    #[test]
    fn absolute_endpoint_on_the_same_origin_is_accepted() {
        let sse = url("https://mcp.example/sse");
        let got = resolve_endpoint(&sse, &sse, "https://mcp.example:443/messages/?s=1").unwrap();
        assert_eq!(got.as_str(), "https://mcp.example/messages/?s=1");
    }

    #[test]
    fn endpoint_after_a_redirect_resolves_against_the_final_url_but_keeps_the_origin_rule() {
        let sse = url("http://127.0.0.1:8000/sse");
        let same_origin = url("http://127.0.0.1:8000/v2/sse");
        let got = resolve_endpoint(&sse, &same_origin, "messages?s=1").unwrap();
        assert_eq!(got.as_str(), "http://127.0.0.1:8000/v2/messages?s=1");
        let elsewhere = url("http://127.0.0.1:9000/sse");
        let err = resolve_endpoint(&sse, &elsewhere, "/messages?s=1").unwrap_err();
        assert!(
            matches!(err, SseTransportError::CrossOriginEndpoint { .. }),
            "{err}"
        );
    }

    #[test]
    fn endpoint_on_another_scheme_host_or_port_is_rejected() {
        let sse = url("https://mcp.example/sse");
        for data in [
            "http://mcp.example/messages/",
            "https://evil.example/messages/",
            "https://mcp.example:8443/messages/",
            "//evil.example/messages/",
            "data:text/plain,x",
        ] {
            let err = resolve_endpoint(&sse, &sse, data).unwrap_err();
            assert!(
                matches!(err, SseTransportError::CrossOriginEndpoint { .. }),
                "{data}: {err}"
            );
        }
    }

    /// Serves `body` as an SSE response on 127.0.0.1 while `connect` runs against it; the server
    /// runs in this task (no spawn), and stops when `connect` returns.
    async fn connect_to_canned_stream(
        body: &'static str,
        headers: HeaderMap,
    ) -> Result<SseClientTransport, SseTransportError> {
        crate::install_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/sse", listener.local_addr().unwrap());
        let app = Router::new().route(
            "/sse",
            get(move || async move { ([(CONTENT_TYPE, "text/event-stream")], body) }),
        );
        let connect = SseClientTransport::connect(reqwest::Client::new(), &url, headers);
        tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                served = axum::serve(listener, app) => panic!("server stopped: {served:?}"),
                connected = connect => connected,
            }
        })
        .await
        .expect("connect finishes")
    }

    #[tokio::test]
    async fn connect_rejects_a_cross_origin_endpoint_without_leaking_the_token() {
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret-token"),
        );
        let err = connect_to_canned_stream(
            "event: endpoint\ndata: http://evil.example/x?session_id=1\n\n",
            headers,
        )
        .await
        .unwrap_err();
        let SseTransportError::CrossOriginEndpoint {
            ref endpoint_origin,
            ..
        } = err
        else {
            panic!("expected CrossOriginEndpoint, got {err}");
        };
        assert_eq!(endpoint_origin, "http://evil.example");
        let message = format!("{err} {err:?}");
        assert!(!message.contains("s3cret"), "{message}");
        assert!(!message.contains("session_id"), "{message}");
    }

    #[tokio::test]
    async fn connect_fails_when_the_stream_ends_before_an_endpoint_event() {
        let err = connect_to_canned_stream(
            ": keep-alive\n\nevent: message\ndata: {}\n\n",
            HeaderMap::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, SseTransportError::NoEndpoint { .. }), "{err}");
    }

    #[tokio::test]
    async fn connect_error_names_the_origin_only() {
        crate::install_crypto_provider();
        // Nothing listens on a port we just released: a connect error, not a hang.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}/sse");
        let err = SseClientTransport::connect(reqwest::Client::new(), &url, HeaderMap::new())
            .await
            .unwrap_err();
        assert!(matches!(err, SseTransportError::Connect { .. }), "{err}");
        assert!(!err.to_string().contains("/sse"), "{err}");
    }
}
