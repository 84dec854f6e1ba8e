//! A record's waits other than model calls: MCP tool listing and tool calls, remote validators
//! and their backoff.
//!
//! A record holds a worker slot while it works. While it only waits on something outside the
//! process it must give that slot back, or one key's record in a 60 s validator backoff, or
//! calling a slow tool, holds a slot every other key's records need (the worker pool's
//! [`Waits`] does that; model calls go through its `ChatModel` wrapper for the same reason).
//! Generation code wraps each such wait in [`waiting`]; outside the pool (previews, tests)
//! [`Unpooled`] runs it as it is.

use std::future::Future;

use futures::future::BoxFuture;

/// Where a record's waits give back what it holds while it works.
pub trait Waits: Send + Sync {
    /// Runs `wait` holding nothing of the worker pool's, and takes it back after.
    fn wait<'a>(&'a self, wait: BoxFuture<'a, ()>) -> BoxFuture<'a, ()>;
}

/// Holds nothing to give back: previews, tests.
pub struct Unpooled;

impl Waits for Unpooled {
    fn wait<'a>(&'a self, wait: BoxFuture<'a, ()>) -> BoxFuture<'a, ()> {
        wait
    }
}

/// `fut`'s output, awaited through `waits`.
pub async fn waiting<T: Send>(waits: &dyn Waits, fut: impl Future<Output = T> + Send) -> T {
    let mut out = None;
    waits
        .wait(Box::pin(async {
            out = Some(fut.await);
        }))
        .await;
    // `wait` awaits the future it is handed to its end (or is dropped with it).
    out.expect("a wait runs its future to the end")
}
