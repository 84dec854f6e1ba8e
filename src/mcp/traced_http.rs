//! The streamable HTTP client of every HTTP provider, wrapped so that a `tools/call` POST
//! carries the call's W3C `traceparent` as a header too (it is always in the request's
//! `_meta`, SEP-414): HTTP servers, proxies and gateways in front of an MCP server continue the
//! trace from the header without reading the JSON-RPC body. Everything else is delegated.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream_rmcp::Sse;

/// `C`, adding `traceparent` to the POST of a request whose `_meta` has one.
#[derive(Clone)]
pub(crate) struct Traced<C>(pub(crate) C);

/// `headers` plus the `traceparent` `message` carries in its `_meta`, if any.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let tp = match message {
        JsonRpcMessage::Request(r) => match &r.request {
            ClientRequest::CallToolRequest(call) => call
                .params
                .meta
                .as_ref()
                .and_then(|m| m.get_traceparent())
                .and_then(|tp| HeaderValue::from_str(tp).ok()),
            _ => None,
        },
        _ => None,
    };
    if let Some(tp) = tp {
        headers.insert(HeaderName::from_static("traceparent"), tp);
    }
    headers
}

type Result<T, E> = std::result::Result<T, StreamableHttpError<E>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Traced<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, C::Error> {
        let custom_headers = with_traceparent(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, custom_headers)
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
    ) -> Result<StreamableHttpPostResponse, C::Error> {
        let custom_headers = with_traceparent(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), C::Error> {
        self.0
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
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>, C::Error> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
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
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>, C::Error> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
