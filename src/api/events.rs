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
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};
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

/// The OpenAPI schema of one event of the stream. Tools that check event streams (Schemathesis,
/// OpenAPI 3.2's `itemSchema`) validate each event as `{event, data, id?, retry?}`, so the
/// schema says that: `event` names it and `data` is JSON text whose schema is `contentSchema`.
/// (`type: string`, the obvious annotation, fails every event.)
pub struct StreamEvent;

impl PartialSchema for StreamEvent {
    fn schema() -> RefOr<Schema> {
        let event = |name: &str, payload: &str, about: &str| {
            ObjectBuilder::new()
                .description(Some(about))
                .property(
                    "event",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([name])),
                )
                .required("event")
                .property(
                    "data",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .description(Some(format!("The `{payload}`, as JSON text.")))
                        .content_media_type("application/json")
                        .content_schema(Some(Ref::from_schema_name(payload))),
                )
                .required("data")
        };
        OneOfBuilder::new()
            .description(Some(
                "One Server-Sent Event: `event` names it, `data` is its JSON payload.",
            ))
            .item(event(
                "progress",
                "ProgressEvent",
                "Record counts: first, then whenever they change.",
            ))
            .item(event(
                "record",
                "RecordEvent",
                "A record reached a final state while the stream was open.",
            ))
            .item(event(
                "done",
                "JobResponse",
                "The job finished; the stream ends after this event.",
            ))
            .item(event(
                "error",
                "ErrorBody",
                "Reading the job failed; the stream ends after this event.",
            ))
            .into()
    }
}

impl ToSchema for StreamEvent {
    fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
        for (name, schema) in [
            (ProgressEvent::name(), ProgressEvent::schema()),
            (RecordEvent::name(), RecordEvent::schema()),
        ] {
            out.push((name.into_owned(), schema));
        }
        ProgressEvent::schemas(out);
        RecordEvent::schemas(out);
    }
}

/// Follow a job's progress
///
/// Server-Sent Events: `progress` (`ProgressEvent`) first and whenever the counts change,
/// `record` (`RecordEvent`) for every record finishing while connected, then `done` with the
/// final `JobResponse`, after which the server closes the stream. Reconnecting is safe.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/events", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "An event stream (`progress`, `record`, `done`; `error` if reading the job fails)", content_type = "text/event-stream", body = StreamEvent),
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
        // Queued after this poll's `progress`, so the stream always opens with `progress` as
        // documented, even when records finished just before the client connected.
        let mut records = Vec::new();
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
            records.push(json_event("record", &ev));
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
        self.queue.extend(records);
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
