//! `GET /v1/jobs/{id}/events`: live progress as Server-Sent Events.
//!
//! Everything comes from the database, so a stream served by any replica shows the work of
//! all replicas: `progress` whenever the counts change, `record` for each record that reaches a
//! final state while the stream is open, and `done` with the final job, after which the stream
//! ends.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::{DateTime, Utc};
use futures::Stream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{Counts, JobResponse, ProgressEvent, RecordEvent};
use super::extract::{self, ApiPath};
use super::jobs::render_job;
use crate::auth::Caller;
use crate::domain::JobId;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// How often the stream looks at the database.
const POLL: Duration = Duration::from_millis(500);

/// Records finishing inside a transaction that commits after our read carry a timestamp a
/// little in the past; re-reading this margin catches them (duplicates are filtered).
const MARGIN: chrono::Duration = chrono::Duration::seconds(3);

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(job_events))
}

/// Follow a job's progress
///
/// Server-Sent Events: `progress` (`ProgressEvent`) first and whenever the counts change,
/// `record` (`RecordEvent`) for every record finishing while connected, then `done` with the
/// final `JobResponse`, after which the server closes the stream. Reconnecting is safe.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/events", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "An event stream (`progress`, `record`, `done`)", content_type = "text/event-stream", body = String),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
    )
)]
pub async fn job_events(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let id = extract::job_id(&id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    let since = state.store.now().await? - MARGIN;
    let st = Follow {
        state,
        job: id,
        seen: vec![0u64; (job.num_records as usize).div_ceil(64)],
        since,
        last_counts: None,
        queue: VecDeque::new(),
        first: true,
        finished: false,
    };
    let stream = futures::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(ev) = st.queue.pop_front() {
                return Some((Ok(ev), st));
            }
            if st.finished {
                return None;
            }
            if !st.first {
                let shutdown = st.state.shutdown.clone();
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    // The client reconnects to another replica (or this one after restart).
                    () = shutdown.cancelled() => return None,
                }
            }
            st.first = false;
            st.poll().await;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

struct Follow {
    state: AppState,
    job: JobId,
    /// Bit per record index: its `record` event was sent.
    seen: Vec<u64>,
    since: DateTime<Utc>,
    last_counts: Option<Counts>,
    queue: VecDeque<Event>,
    first: bool,
    finished: bool,
}

impl Follow {
    /// One look at the database; queues the events it warrants. Errors end the stream with an
    /// `error` event rather than hanging the client.
    async fn poll(&mut self) {
        if let Err(e) = self.try_poll().await {
            tracing::warn!(job.id = %self.job, error = %e, "event stream stopped");
            let body = serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}});
            self.queue
                .push_back(Event::default().event("error").data(body.to_string()));
            self.finished = true;
        }
    }

    async fn try_poll(&mut self) -> Result<(), ApiError> {
        let store = self.state.store.clone();
        let now = store.now().await?;
        for r in store.finished_since(self.job, self.since).await? {
            let (word, bit) = ((r.index / 64) as usize, r.index % 64);
            let Some(w) = self.seen.get_mut(word) else {
                continue;
            };
            if *w & (1 << bit) != 0 {
                continue;
            }
            *w |= 1 << bit;
            let ev = RecordEvent {
                record_id: r.id,
                index: r.index,
                status: r.status,
                error_code: r.error_code,
            };
            self.queue.push_back(json_event("record", &ev));
        }
        self.since = now - MARGIN;
        let job = self.state.jobs.get(self.job, None).await?;
        let counts: Counts = store.job_counts(self.job).await?.into();
        if self.last_counts != Some(counts) {
            self.last_counts = Some(counts);
            let ev = ProgressEvent {
                job_id: self.job,
                status: job.status,
                counts,
            };
            self.queue.push_back(json_event("progress", &ev));
        }
        if job.status.is_terminal() {
            let full: JobResponse = render_job(&self.state, job).await?;
            self.queue.push_back(json_event("done", &full));
            self.finished = true;
        }
        Ok(())
    }
}

fn json_event(name: &str, body: &impl serde::Serialize) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(body).unwrap_or_else(|_| "{}".into()))
}
