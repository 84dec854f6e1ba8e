//! Placeholder until the legacy SSE transport lands (replaced by the real file on merge).

/// Not built yet.
pub struct SseClientTransport;

impl SseClientTransport {
    /// Not built yet.
    pub async fn connect(
        _http: reqwest::Client,
        _url: &str,
        _headers: reqwest::header::HeaderMap,
    ) -> Result<
        rmcp::transport::async_rw::AsyncRwTransport<
            rmcp::RoleClient,
            tokio::io::Empty,
            tokio::io::Sink,
        >,
        String,
    > {
        Err("the legacy SSE transport is not built yet".to_owned())
    }
}
