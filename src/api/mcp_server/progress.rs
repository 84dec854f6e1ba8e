//! MCP progress notifications for the long tools, sent only when the request carries a
//! progress token (`_meta.progressToken`), as the protocol asks.

use std::future::Future;
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::domain::JobId;
use crate::domain::job::JobSummary;
use crate::error::ApiError;
use crate::jobs::JobService;

/// How often `wait_job` reads the job (as the REST event stream does).
const POLL: Duration = Duration::from_millis(500);

/// Where one request's progress goes.
pub(super) struct Reporter {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl Reporter {
    /// `None` when the client did not ask for progress.
    pub(super) fn for_request(ctx: &RequestContext<RoleServer>) -> Option<Self> {
        Some(Self {
            peer: ctx.peer.clone(),
            token: ctx.meta.get_progress_token()?,
        })
    }

    /// Sends one notification. A client that went away is not an error of the work: the
    /// failure is logged and the work goes on (its own cancellation stops it).
    async fn report(&self, progress: u64, total: u64, message: String) {
        let param = ProgressNotificationParam::new(self.token.clone(), progress as f64)
            .with_total(total as f64)
            .with_message(message);
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
    }
}

/// Runs `work` (a preview), reporting `(done, total)` from `rx` as records finish. The last
/// count is always reported, even when every record finished in the poll that ended the work.
pub(super) async fn records<T>(
    reporter: Option<&Reporter>,
    work: impl Future<Output = T>,
    mut rx: watch::Receiver<(u32, u32)>,
) -> T {
    let Some(reporter) = reporter else {
        return work.await;
    };
    let send = async |(done, total): (u32, u32)| {
        let message = format!("{done} of {total} records generated");
        reporter.report(done.into(), total.into(), message).await;
    };
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            out = &mut work => {
                if rx.has_changed().unwrap_or(false) {
                    let last = *rx.borrow_and_update();
                    send(last).await;
                }
                return out;
            }
            changed = rx.changed() => {
                if changed.is_err() {
                    return work.await;
                }
                // Copied out first: the borrow must not live across the send.
                let now = *rx.borrow_and_update();
                send(now).await;
            }
        }
    }
}

/// Reads job `id` until it is finished or `wait` has passed (or the server shuts down), and
/// returns it as it is then. With a reporter, each change of the finished count is reported.
pub(super) async fn wait_job(
    jobs: &JobService,
    id: JobId,
    owner: Option<&str>,
    wait: Duration,
    shutdown: &CancellationToken,
    reporter: Option<&Reporter>,
) -> Result<JobSummary, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut last = None;
    loop {
        let job = jobs.summary(id, owner).await?;
        let c = job.counts;
        let finished = c.completed + c.failed + c.cancelled;
        if let Some(r) = reporter
            && last != Some(finished)
        {
            last = Some(finished);
            let message = format!(
                "{}: {finished} of {} records finished ({} failed)",
                job.job.status.as_str(),
                c.total(),
                c.failed
            );
            r.report(finished, c.total(), message).await;
        }
        if job.job.status.is_terminal() {
            return Ok(job);
        }
        tokio::select! {
            () = tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + POLL)) => {}
            () = shutdown.cancelled() => return Ok(job),
        }
        if tokio::time::Instant::now() >= deadline {
            return jobs.summary(id, owner).await;
        }
    }
}
