//! The queue's gauges: how many records wait for a claim (all replicas, read from the
//! database), and how many this replica is generating.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Inner;
use crate::metrics as m;

/// How often the queue's depth is read.
const EVERY: Duration = Duration::from_secs(5);

/// Sets `synthgate_queue_records` every [`EVERY`] until `stop`. One small aggregate over the
/// live jobs; a failed read leaves the last figure.
pub(super) async fn report_queue(inner: Arc<Inner>, stop: CancellationToken) {
    loop {
        match inner.queue.unclaimed_records().await {
            Ok(n) => metrics::gauge!(m::QUEUE_RECORDS).set(n as f64),
            Err(e) => tracing::debug!(error = %e, "reading the queue's depth failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Counts a record in `synthgate_records_in_flight` for as long as it is held, however its
/// task ends.
pub(super) struct CountedRecord;

impl CountedRecord {
    pub(super) fn start() -> Self {
        metrics::gauge!(m::RECORDS_IN_FLIGHT).increment(1.0);
        Self
    }
}

impl Drop for CountedRecord {
    fn drop(&mut self) {
        metrics::gauge!(m::RECORDS_IN_FLIGHT).decrement(1.0);
    }
}
