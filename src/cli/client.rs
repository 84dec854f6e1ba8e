//! HTTP plumbing shared by the client subcommands: the server address and API key, URL
//! building, the `{"error": {...}}` envelope, and how a failed request is reported.

use std::process::ExitCode;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, Url, header};
use serde::Deserialize;

use super::terminal::note;

/// Where the server listens when neither `--url` nor `SYNTHGATE_URL` says otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// Exit code for a request that failed (HTTP error, unreachable server, bad input).
pub(crate) const EXIT_REQUEST_FAILED: u8 = 2;

/// Time allowed to open a TCP (and TLS) connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest silence tolerated while reading a response body. The event stream sends keep-alive
/// comments far more often, so a longer silence means the connection is dead.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Whole-request limit for plain (non-streaming) requests.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach the server; shared by the subcommands that call the API.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Base URL of the synthgate server.
    #[arg(long, env = "SYNTHGATE_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "SYNTHGATE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

/// An error response decoded from the server's `{"error": {"code", "message", "details"?}}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub details: Vec<serde_json::Value>,
}

/// Why a request, or following a response, failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The server answered with a 4xx or 5xx status.
    #[error("{} (HTTP {}): {}", .0.code, .0.status, .0.message)]
    Server(ServerError),
    /// The request could not be sent, or its response not read.
    #[error("request failed")]
    Transport(#[from] reqwest::Error),
    /// The event stream broke or carried bytes that are not Server-Sent Events.
    #[error("event stream failed")]
    Stream(#[from] sse_stream::Error),
    /// A problem on this side: bad URL, unreadable or unsupported file, failed write.
    #[error("{0}")]
    Local(String),
}

impl RequestError {
    /// Whether trying again later may help: transport trouble, 5xx, 408 and 429.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            Self::Server(e) => e.status >= 500 || e.status == 408 || e.status == 429,
            Self::Transport(_) | Self::Stream(_) => true,
            Self::Local(_) => false,
        }
    }

    /// The error with its causes, on one line.
    pub(crate) fn chain(&self) -> String {
        error_chain(self)
    }
}

/// An error and its causes, joined with `: `.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Prints `error: ...` (and any server-side details) on stderr; returns exit code 2.
pub(crate) fn report(err: &RequestError) -> ExitCode {
    note!("error: {}", err.chain());
    if let RequestError::Server(e) = err {
        for detail in &e.details {
            note!("  - {detail}");
        }
    }
    ExitCode::from(EXIT_REQUEST_FAILED)
}

/// Decodes an error body; anything that is not the envelope becomes `http_<status>`.
pub(crate) fn parse_error_body(status: u16, body: &[u8]) -> ServerError {
    #[derive(Deserialize)]
    struct Envelope {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        code: String,
        message: String,
        #[serde(default)]
        details: Vec<serde_json::Value>,
    }
    match serde_json::from_slice::<Envelope>(body) {
        Ok(Envelope { error }) => ServerError {
            status,
            code: error.code,
            message: error.message,
            details: error.details,
        },
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            let message = if text.is_empty() {
                "the server sent no error body".to_owned()
            } else {
                text.chars().take(300).collect()
            };
            ServerError {
                status,
                code: format!("http_{status}"),
                message,
                details: Vec::new(),
            }
        }
    }
}

/// Appends path segments to a base URL, keeping any path prefix it has and percent-encoding
/// each segment (a job id cannot smuggle in `/` or `?`).
pub(crate) fn endpoint(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

pub(crate) use crate::install_crypto_provider;

/// A configured client for one server.
pub(crate) struct Api {
    http: reqwest::Client,
    /// The same without a read timeout, for uploads: the server answers only once a file is
    /// imported, which for a large one takes longer than [`READ_TIMEOUT`].
    upload_http: reqwest::Client,
    base: Url,
    api_key: Option<String>,
}

impl Api {
    /// Checks the URL and builds the HTTP client.
    pub(crate) fn new(args: &ServerArgs) -> Result<Self, RequestError> {
        let base = Url::parse(&args.url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| RequestError::Local(format!("invalid server URL {:?}", args.url)))?;
        install_crypto_provider();
        let builder = || {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(concat!("synthgate-cli/", env!("CARGO_PKG_VERSION")))
        };
        let http = builder().read_timeout(READ_TIMEOUT).build()?;
        let upload_http = builder().build()?;
        Ok(Self {
            http,
            upload_http,
            base,
            api_key: args.api_key.clone().filter(|k| !k.is_empty()),
        })
    }

    /// A request to `base/segments...`, carrying the API key when one is set.
    pub(crate) fn request(&self, method: Method, segments: &[&str]) -> RequestBuilder {
        self.authorized(self.http.request(method, endpoint(&self.base, segments)))
    }

    /// [`Api::request`] on the client without a read timeout, for sending files.
    pub(crate) fn upload_request(&self, method: Method, segments: &[&str]) -> RequestBuilder {
        self.authorized(
            self.upload_http
                .request(method, endpoint(&self.base, segments)),
        )
    }

    fn authorized(&self, builder: RequestBuilder) -> RequestBuilder {
        match &self.api_key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    /// Sends the request; a 4xx/5xx answer becomes [`RequestError::Server`].
    pub(crate) async fn send(&self, request: RequestBuilder) -> Result<Response, RequestError> {
        let response = request.send().await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.bytes().await.unwrap_or_default();
        Err(RequestError::Server(parse_error_body(
            status.as_u16(),
            &body,
        )))
    }

    /// `GET` a JSON resource.
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        segments: &[&str],
    ) -> Result<T, RequestError> {
        let request = self
            .request(Method::GET, segments)
            .header(header::ACCEPT, "application/json")
            .timeout(REQUEST_TIMEOUT);
        Ok(self.send(request).await?.json().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_envelope_is_decoded() {
        let body = br#"{"error":{"code":"invalid_config","message":"column x: unknown model_alias","details":[{"column":"x"}]}}"#;
        let e = parse_error_body(422, body);
        assert_eq!(e.code, "invalid_config");
        assert_eq!(e.message, "column x: unknown model_alias");
        assert_eq!(e.details.len(), 1);
        assert!(!RequestError::Server(e).is_retryable());
    }

    #[test]
    fn other_error_bodies_get_a_status_code() {
        let e = parse_error_body(502, b"<html>Bad Gateway</html>\n");
        assert_eq!(e.code, "http_502");
        assert_eq!(e.message, "<html>Bad Gateway</html>");
        assert!(RequestError::Server(e).is_retryable());
        assert_eq!(
            parse_error_body(404, b"").message,
            "the server sent no error body"
        );
    }

    #[test]
    fn endpoints_keep_the_base_path_and_encode_segments() {
        let base = Url::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            endpoint(&base, &["v1", "jobs"]).as_str(),
            "http://127.0.0.1:8080/v1/jobs"
        );
        let prefixed = Url::parse("https://example.test/synthgate/?x=1").unwrap();
        assert_eq!(
            endpoint(&prefixed, &["v1", "jobs", "a/b?c", "events"]).as_str(),
            "https://example.test/synthgate/v1/jobs/a%2Fb%3Fc/events"
        );
    }

    #[test]
    fn bad_urls_are_refused_before_any_request() {
        for url in ["127.0.0.1:8080", "ftp://host/", "not a url"] {
            let args = ServerArgs {
                url: url.into(),
                api_key: None,
            };
            assert!(
                matches!(Api::new(&args), Err(RequestError::Local(_))),
                "{url}"
            );
        }
    }
}
