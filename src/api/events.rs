//! `GET /v1/jobs/{id}/events`: live progress as Server-Sent Events.
//!
//! Progress comes from the database, so a stream served by any replica shows the work of all
//! replicas: `progress` whenever the counts change, `record` for each record that reaches a
//! final state while the stream is open, and `done` with the final job, after which the stream
//! ends. With `tool_calls=true`, `tool_call` events announce each tool call as it is answered;
//! those are live, not stored, so they come from the workers of the replica serving the stream
//! (all of them on a single replica). `record_index=N` narrows `record` and `tool_call` events
//! to one record, to follow it while it runs.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio_util::sync::CancellationToken;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{JobResponse, ProgressEvent, RecordEvent};
use super::extract::{self, ApiPath, ApiQuery};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{Follower, Progress};
use crate::state::AppState;
use crate::tools::events::{RecordToolEvent, ToolEvent};

/// How often the stream looks at the database.
const POLL: Duration = Duration::from_millis(500);

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
                "tool_call",
                "RecordToolEvent",
                "With `tool_calls=true`: a tool call of a running record was answered.",
            ))
            .item(event(
                "tool_calls_missed",
                "ToolCallsMissed",
                "With `tool_calls=true`: the stream fell behind and this many tool events were dropped.",
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
            (RecordToolEvent::name(), RecordToolEvent::schema()),
            (ToolCallsMissed::name(), ToolCallsMissed::schema()),
        ] {
            out.push((name.into_owned(), schema));
        }
        ProgressEvent::schemas(out);
        RecordEvent::schemas(out);
        RecordToolEvent::schemas(out);
        <ToolEvent as ToSchema>::schemas(out);
    }
}

/// Query of `GET /v1/jobs/{id}/events`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Also send a `tool_call` event for each tool call answered while the stream is open
    /// (live, from the replica serving the stream; default false).
    pub tool_calls: Option<bool>,
    /// Only this record's `record` and `tool_call` events (`progress` and `done` still come).
    pub record_index: Option<u32>,
}

/// `event: tool_calls_missed`: the stream fell behind the tool calls and dropped some.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct ToolCallsMissed {
    /// How many tool events (of any job on this replica) were dropped.
    pub missed: u64,
}

/// Follow a job's progress
///
/// Server-Sent Events: `progress` (`ProgressEvent`) first and whenever the counts change,
/// `record` (`RecordEvent`) for every record finishing while connected, then `done` with the
/// final `JobResponse`, after which the server closes the stream. Reconnecting is safe.
/// `tool_calls=true` adds a `tool_call` event (`RecordToolEvent`: record, column, turn, tool,
/// provider, duration, outcome) per tool call answered while connected, from the workers of the
/// replica serving the stream; `record_index` follows one record.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/events", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id"), EventsQuery),
    responses(
        (status = 200, description = "An event stream (`progress`, `record`, `tool_call`, `done`; `error` if reading the job fails)", content_type = "text/event-stream", body = StreamEvent),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn job_events(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let id = extract::job_id(&id)?;
    // Subscribed before the first read, so no call answered after it is missed.
    let tools = (q.tool_calls == Some(true)).then(|| state.jobs.runner().tool_events().subscribe());
    let follower = state.jobs.follow(id, caller.owner()).await?;
    if let Some(i) = q.record_index
        && u64::from(i) >= follower.num_records()
    {
        return Err(ApiError::InvalidRequest(format!(
            "record_index: the job has {} records (indexes 0 to {})",
            follower.num_records(),
            follower.num_records().saturating_sub(1)
        )));
    }
    let st = Follow {
        follower,
        shutdown: state.shutdown.clone(),
        queue: VecDeque::new(),
        first: true,
        finished: false,
        tools,
        record_index: q.record_index,
        next_poll: tokio::time::Instant::now(),
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
                // Tool events arrive between polls; the poll keeps its own cadence.
                let tool = async {
                    match st.tools.as_mut() {
                        Some(rx) => Some(rx.recv().await),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep_until(st.next_poll) => {}
                    // The client reconnects to another replica (or this one after restart).
                    () = st.shutdown.cancelled() => return None,
                    Some(got) = tool => {
                        st.tool_event(got);
                        continue;
                    }
                }
            }
            st.first = false;
            st.poll().await;
            st.next_poll = tokio::time::Instant::now() + POLL;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A stream's state: the job service's follower, and the events it has yet to send.
struct Follow {
    follower: Follower,
    shutdown: CancellationToken,
    queue: VecDeque<Event>,
    first: bool,
    finished: bool,
    /// The process's tool events, when the stream asked for them.
    tools: Option<tokio::sync::broadcast::Receiver<std::sync::Arc<RecordToolEvent>>>,
    /// Only this record's `record` and `tool_call` events.
    record_index: Option<u32>,
    /// When to look at the database next. Kept across events: a stream busy with tool events
    /// still polls every [`POLL`], not once per event.
    next_poll: tokio::time::Instant,
}

impl Follow {
    /// Queues a tool event of this job (and record, if one is followed).
    fn tool_event(
        &mut self,
        got: Result<std::sync::Arc<RecordToolEvent>, tokio::sync::broadcast::error::RecvError>,
    ) {
        use tokio::sync::broadcast::error::RecvError;
        match got {
            Ok(ev) => {
                if ev.job == self.follower.job()
                    && self
                        .record_index
                        .is_none_or(|i| u64::from(i) == ev.record_index)
                {
                    self.queue.push_back(json_event("tool_call", &*ev));
                }
            }
            Err(RecvError::Lagged(missed)) => {
                self.queue
                    .push_back(json_event("tool_calls_missed", &ToolCallsMissed { missed }));
            }
            // The bus lives as long as the process; without it there is nothing more to say.
            Err(RecvError::Closed) => self.tools = None,
        }
    }

    /// One look at the database; queues the events it warrants. Errors end the stream with an
    /// `error` event rather than hanging the client.
    async fn poll(&mut self) {
        let steps = match self.follower.poll().await {
            Ok(steps) => steps,
            Err(e) => {
                tracing::warn!(job.id = %self.follower.job(), error = %e, "event stream stopped");
                let body =
                    serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}});
                self.queue
                    .push_back(Event::default().event("error").data(body.to_string()));
                self.finished = true;
                return;
            }
        };
        let job_id = self.follower.job();
        for step in steps {
            let ev = match step {
                Progress::Counts { status, counts } => {
                    let ev = ProgressEvent {
                        job_id,
                        status,
                        counts: counts.into(),
                    };
                    json_event("progress", &ev)
                }
                Progress::Record(r) if self.record_index.is_some_and(|i| i != r.index) => {
                    continue;
                }
                Progress::Record(r) => {
                    let ev = RecordEvent {
                        record_id: r.id,
                        index: r.index,
                        status: r.status,
                        error_code: r.error_code,
                    };
                    json_event("record", &ev)
                }
                Progress::Done(summary) => {
                    self.finished = true;
                    json_event("done", &JobResponse::from(*summary))
                }
            };
            self.queue.push_back(ev);
        }
    }
}

fn json_event(name: &str, body: &impl serde::Serialize) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(body).unwrap_or_else(|_| "{}".into()))
}
