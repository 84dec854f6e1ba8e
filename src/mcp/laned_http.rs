//! The streamable HTTP client of an MCP provider: each request goes out over one of the
//! provider's connection lanes (`crate::lanes`), so that the calls of all its sessions are not
//! held to one HTTP/2 connection's stream cap. A request keeps its place in its lane while its
//! answer is read: the event stream a POST or GET opened holds it until the stream ends.
//!
//! Streamable HTTP names a session by its `Mcp-Session-Id` header, never by its connection, so
//! a session's requests may take different connections. rmcp reads the answers itself, so the
//! HTTP version is not seen here: an `https://` server that only speaks HTTP/1.1 gets a lane
//! per 64 calls in flight, which splits its idle connections into a few pools and costs
//! nothing else.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream_rmcp::Sse;

use super::oauth::SSE_EVENT_LIMIT;
use crate::lanes::{Lanes, Ticket};

/// An MCP provider's lanes as rmcp's HTTP client.
#[derive(Clone)]
pub(crate) struct Laned(pub(crate) Arc<Lanes>);

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;
type Events = BoxStream<'static, std::result::Result<Sse, SseError>>;

/// `events`, holding `ticket` until it is dropped.
fn holding(events: Events, ticket: Ticket) -> Events {
    Box::pin(events.map(move |event| {
        let _held = &ticket;
        event
    }))
}

impl StreamableHttpClient for Laned {
    type Error = reqwest::Error;

    // rmcp's transport calls only the `_with_max_sse_event_size` variants; the plain ones
    // delegate to them with the bound `ProviderHttp` uses.
    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            SSE_EVENT_LIMIT,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse> {
        let ticket = self.0.pick();
        let answer = ticket
            .http()
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(match answer {
            StreamableHttpPostResponse::Sse(events, id) => {
                StreamableHttpPostResponse::Sse(holding(events, ticket), id)
            }
            other => other,
        })
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let ticket = self.0.pick();
        ticket
            .http()
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            SSE_EVENT_LIMIT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events> {
        let ticket = self.0.pick();
        let events = ticket
            .http()
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(holding(events, ticket))
    }
}
