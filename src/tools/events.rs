//! Live tool-call events: each answered call of a running record is announced on a bus of the
//! process, and a job's event stream (`GET /v1/jobs/{id}/events?tool_calls=true`) passes on
//! those of its job. Events are not stored: a stream sees the calls made while it is open, by
//! the workers of the replica that serves it.

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::broadcast;
use utoipa::ToSchema;

use crate::domain::JobId;
use crate::domain::usage::ToolOutcome;

/// Events a slow stream may fall behind by before it is told it missed some.
const CAPACITY: usize = 4096;

/// One answered tool call.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ToolEvent {
    /// The LLM column that made the call.
    pub column: String,
    /// The tool-calling turn of that column (1-based).
    pub turn: u32,
    /// The tool the model named (`""` when it named none).
    pub tool: String,
    /// The MCP provider that served it, `inline` for an inline tool; absent when the call
    /// reached none (unknown tool, unreadable call, refused).
    pub provider: Option<String>,
    /// From the call's start to its answer, in milliseconds.
    pub duration_ms: f64,
    /// How it ended.
    pub outcome: ToolOutcome,
}

/// A tool event with the job and record it belongs to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordToolEvent {
    /// The record's index in its job.
    pub record_index: u64,
    /// The id the record gets if this attempt's result is the one stored.
    pub record_id: uuid::Uuid,
    /// The call.
    #[serde(flatten)]
    pub call: ToolEvent,
    #[serde(skip)]
    pub(crate) job: JobId,
}

/// The process's bus of tool events.
#[derive(Clone)]
pub struct ToolEventBus {
    tx: broadcast::Sender<Arc<RecordToolEvent>>,
}

impl Default for ToolEventBus {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl ToolEventBus {
    /// Every event published from now on (a stream filters its job's).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<RecordToolEvent>> {
        self.tx.subscribe()
    }

    /// The sink of one record's calls.
    pub fn for_record(&self, job: JobId, record_id: uuid::Uuid, record_index: u64) -> ToolEvents {
        ToolEvents {
            bus: self.clone(),
            job,
            record_id,
            record_index,
        }
    }
}

/// Where one record announces its tool calls.
pub struct ToolEvents {
    bus: ToolEventBus,
    job: JobId,
    record_id: uuid::Uuid,
    record_index: u64,
}

impl ToolEvents {
    /// Announces `call`. Free when no stream listens: nothing is built or sent.
    pub fn send(&self, call: ToolEvent) {
        if self.bus.tx.receiver_count() == 0 {
            return;
        }
        // An error means every receiver went away meanwhile: nobody to tell.
        let _ = self.bus.tx.send(Arc::new(RecordToolEvent {
            record_index: self.record_index,
            record_id: self.record_id,
            call,
            job: self.job,
        }));
    }

    /// Whether any stream listens (so a caller can skip building an event).
    pub fn listened(&self) -> bool {
        self.bus.tx.receiver_count() > 0
    }
}
