//! What the pool does when a record brings its worker down: a panic in its task fails the
//! record with `internal_error`; a record the store abandoned (its worker died too often, see
//! `queue::chunks`) is reported and its job finalized.

use super::Inner;
use crate::domain::record::{RecordError, RecordErrorCode};
use crate::domain::{JobId, RecordId};
use crate::generate::Generated;

/// The outcome of a record whose generation panicked: failed, no values, no traces. The
/// message says what happened without the panic's text (which may quote internals); that goes
/// to the log.
pub(super) fn panicked() -> Generated {
    Generated::failed(RecordError::new(
        RecordErrorCode::InternalError,
        None,
        "generating this record failed on an internal error (a bug in the service, \
         logged on the server); the record is not retried",
    ))
}

/// The text of a panic payload, for the log.
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(not a string)"
    }
}

/// Finalizes the jobs of records a claim failed as abandoned, and reports them.
pub(super) async fn settle_abandoned(inner: &Inner, abandoned: &[(RecordId, JobId)]) {
    use crate::metrics as m;
    for (record, job) in abandoned {
        tracing::error!(record.id = %record, job.id = %job,
            max_lease_expiries = inner.cfg.max_lease_expiries,
            "record abandoned: its worker died generating it too many times; failed with record_abandoned");
        metrics::counter!(m::RECORDS_FINISHED, "status" => "failed").increment(1);
        metrics::counter!(m::RECORD_ERRORS, "code" => RecordErrorCode::RecordAbandoned.to_string())
            .increment(1);
    }
    let mut jobs: Vec<JobId> = abandoned.iter().map(|(_, j)| *j).collect();
    jobs.sort_unstable();
    jobs.dedup();
    inner.jobs.finalize(&jobs).await;
}
