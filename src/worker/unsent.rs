//! How many records this replica has started and not yet handed to the writer, plus one while
//! the claim loop keeps finding records, so the writer can write a batch as soon as nothing
//! more is coming, instead of waiting out `write_interval_ms` for records that do not exist.
//! That wait was the last step of every job (its last batch), and the whole of a one-record
//! job's time after its model answered. While claims find records, the count stays above zero
//! and batches fill as before: CPU-only chunks finish between claims, and cutting their
//! batches there would write many small ones.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The count, and a wake-up for the writer when it drops to zero.
#[derive(Debug, Default)]
pub(super) struct Unsent {
    count: AtomicUsize,
    drained: Notify,
}

impl Unsent {
    /// Counts `n` records started; they count until the returned guard says they were sent
    /// (or is dropped, however the task ends).
    pub(super) fn hold(self: &Arc<Self>, n: usize) -> Sending {
        self.count.fetch_add(n, Ordering::AcqRel);
        Sending {
            unsent: self.clone(),
            n,
        }
    }

    /// Whether no record started here is still on its way to the writer.
    pub(super) fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Resolves after the count last dropped to zero. A drop that came before the call is
    /// remembered (one stored wake-up), so the writer never misses one; it may wake once for
    /// nothing, and looks again.
    pub(super) async fn drained(&self) {
        self.drained.notified().await;
    }

    fn release(&self, n: usize) {
        if n > 0 && self.count.fetch_sub(n, Ordering::AcqRel) == n {
            self.drained.notify_one();
        }
    }
}

/// Records of one task counted in [`Unsent`].
#[derive(Debug)]
pub(super) struct Sending {
    unsent: Arc<Unsent>,
    n: usize,
}

impl Sending {
    /// One of the records is about to be queued for the writer (or will never be).
    pub(super) fn one_sent(&mut self) {
        if self.n > 0 {
            self.n -= 1;
            self.unsent.release(1);
        }
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.unsent.release(self.n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_until_sent_or_dropped_and_wakes_at_zero() {
        let unsent = Arc::new(Unsent::default());
        assert!(unsent.is_empty());
        let mut chunk = unsent.hold(2);
        let single = unsent.hold(1);
        assert!(!unsent.is_empty());
        chunk.one_sent();
        drop(single);
        assert!(!unsent.is_empty());
        chunk.one_sent();
        assert!(unsent.is_empty());
        // The drop to zero came before anyone waited: remembered.
        tokio::time::timeout(std::time::Duration::from_secs(5), unsent.drained())
            .await
            .expect("the drop to zero wakes the writer");
        // A guard whose records were all sent releases nothing more.
        drop(chunk);
        assert!(unsent.is_empty());
        let early = unsent.hold(3);
        drop(early);
        assert!(unsent.is_empty());
    }
}
