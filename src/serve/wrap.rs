//! The wrappers that tell the listener how a connection is doing: the socket notes when a
//! request head starts and when responses are flushed, and a response body holds its guard
//! until hyper drops it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::{Conn, Registry};

/// A response body that keeps `guard` until hyper drops it: here its request's
/// [`RequestGuard`], in `api::long_requests` a long request's permit.
pub(crate) struct GuardedBody<G> {
    inner: Body,
    _guard: G,
}

impl<G> GuardedBody<G> {
    pub(crate) fn new(inner: Body, guard: G) -> Self {
        Self {
            inner,
            _guard: guard,
        }
    }
}

impl<G: Unpin> hyper::body::Body for GuardedBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, noting when the first byte of a request head arrives on an idle connection and
/// when finished responses have been flushed.
pub(super) struct Tracked {
    inner: TcpStream,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl Tracked {
    pub(super) fn new(inner: TcpStream, conn: Arc<Conn>, registry: Arc<Registry>) -> Self {
        Self {
            inner,
            conn,
            registry,
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before
            && this.conn.busy.load(Ordering::Acquire) == 0
            && this
                .conn
                .head_started_ms
                .compare_exchange(
                    0,
                    this.registry.now_ms() + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            this.conn.wake.notify_one();
        }
        poll
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        // hyper calls this after writing out its buffer (HTTP/1 on every turn of its loop), so
        // a request finished before it has reached the kernel.
        if let Poll::Ready(Ok(())) = poll {
            this.conn.settle(&this.registry);
        }
        poll
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Errors of one connection that `accept` reports, which say nothing about the listener.
pub(super) fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
