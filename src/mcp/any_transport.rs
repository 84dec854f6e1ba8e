//! One transport type for every MCP client session, whatever carries it.
//!
//! rmcp's service loop (`serve`) is generic over its transport, and it is large: each of the
//! four ways this service reaches a server (a child's stdio, streamable HTTP with or without
//! OAuth, legacy SSE) compiled a copy of it, and of everything it calls, into the binary. Boxing
//! the transport behind [`AnyTransport`] compiles the loop once; what it costs at run time is
//! one allocation per message sent and one per turn of rmcp's event loop (which asks for the
//! next message anew each turn): a few per tool call, beside its JSON encoding and its writes
//! to a pipe or socket. The tool rows of bench/README.md do not show them.

use futures::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// The error of the transport inside, boxed.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct TransportError(Box<dyn std::error::Error + Send + Sync>);

/// [`Transport`] with its futures boxed, so that it can be a trait object.
trait Erased: Send {
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> BoxFuture<'static, Result<(), TransportError>>;
    fn receive(&mut self) -> BoxFuture<'_, Option<RxJsonRpcMessage<RoleClient>>>;
    fn close(&mut self) -> BoxFuture<'_, Result<(), TransportError>>;
}

impl<T: Transport<RoleClient> + 'static> Erased for T {
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> BoxFuture<'static, Result<(), TransportError>> {
        let sent = Transport::send(self, item);
        Box::pin(async move { sent.await.map_err(|e| TransportError(Box::new(e))) })
    }

    fn receive(&mut self) -> BoxFuture<'_, Option<RxJsonRpcMessage<RoleClient>>> {
        Box::pin(Transport::receive(self))
    }

    fn close(&mut self) -> BoxFuture<'_, Result<(), TransportError>> {
        let closed = Transport::close(self);
        Box::pin(async move { closed.await.map_err(|e| TransportError(Box::new(e))) })
    }
}

/// A client transport of any kind. Dropping it drops the transport inside (a child process is
/// killed, a stream closed) as dropping that one would.
pub(crate) struct AnyTransport(Box<dyn Erased>);

impl AnyTransport {
    pub(crate) fn new(transport: impl Transport<RoleClient> + 'static) -> Self {
        Self(Box::new(transport))
    }
}

impl Transport<RoleClient> for AnyTransport {
    type Error = TransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}
