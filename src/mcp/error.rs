//! What can go wrong talking to an MCP provider. Cloneable, because one failed connect or
//! `tools/list` is shared by every caller that was waiting on it.

/// An MCP failure, worded for the model (tool results) and for operators (logs, `/v1/tools`).
/// Messages never hold secrets: URLs are the configured endpoints, headers are never shown.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// No provider of that name is configured.
    #[error("no MCP provider named '{0}' is configured")]
    UnknownProvider(String),
    /// The provider's HTTP client could not be built (its `tls_ca_file`, or TLS): at start.
    #[error("MCP provider '{provider}': {message}")]
    Client {
        /// Provider name.
        provider: String,
        /// Why.
        message: String,
    },
    /// Starting the transport or the `initialize` handshake failed.
    #[error("MCP provider '{provider}' could not be reached: {message}")]
    Connect {
        /// Provider name.
        provider: String,
        /// Why.
        message: String,
    },
    /// A recent connect failed; the provider is left alone until `retry_in_ms` passes.
    #[error("MCP provider '{provider}' is unavailable (retrying in {retry_in_ms} ms): {message}")]
    Unavailable {
        /// Provider name.
        provider: String,
        /// The last connect error.
        message: String,
        /// Time left in the backoff window.
        retry_in_ms: u64,
    },
    /// The session broke (child exited, stream closed) and the retry on a new one failed too.
    #[error("the connection to MCP provider '{provider}' was lost: {message}")]
    Transport {
        /// Provider name.
        provider: String,
        /// Why.
        message: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("{message} (JSON-RPC error {code})")]
    Protocol {
        /// JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// No answer within the deadline; the request was cancelled.
    #[error("timed out after {seconds}s")]
    Timeout {
        /// The deadline.
        seconds: f64,
    },
    /// The server asked for something synthgate does not do (MRTR input, tasks).
    #[error("{0}")]
    Unsupported(String),
    /// The service is shutting down.
    #[error("the service is shutting down")]
    ShuttingDown,
}

impl McpError {
    /// A stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownProvider(_) => "unknown_provider",
            Self::Client { .. } => "client_config",
            Self::Connect { .. } => "connect_failed",
            Self::Unavailable { .. } => "unavailable",
            Self::Transport { .. } => "transport",
            Self::Protocol { .. } => "protocol",
            Self::Timeout { .. } => "timeout",
            Self::Unsupported(_) => "unsupported",
            Self::ShuttingDown => "shutting_down",
        }
    }
}
