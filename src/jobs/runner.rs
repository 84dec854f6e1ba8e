//! Generating one record of a compiled job: the one code path behind the worker pool and
//! previews, so a preview shows what a job would store.

use crate::tools::events::ToolEventBus;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cpu::CpuGate;
use crate::datasets::seed_cache::{BlockRow, SeedBlocks, SeedReadError};
use crate::generate::{Generated, LlmRuntime, SeedRow, Waits};
use crate::llm::ChatModel;
use crate::mcp::CallScope;
use crate::tools::ToolHub;

use super::CompiledJob;

/// Runs records: the shared LLM client, tools (one MCP session pool per process) and CPU gate.
#[derive(Clone)]
pub struct RecordRunner {
    llm: Arc<dyn ChatModel>,
    tools: ToolHub,
    cpu: CpuGate,
    /// `limits.max_prompt_chars`.
    max_prompt_chars: usize,
    /// `limits.max_image_bytes`.
    max_image_bytes: usize,
    /// Stored seed rows, read by block and cached for every job of the process.
    seeds: SeedBlocks,
    /// Where records announce their tool calls (job event streams listen).
    tool_events: ToolEventBus,
}

/// A record's seed row, held while it generates.
pub(super) enum HeldRow<'a> {
    /// No seed config.
    None,
    /// An inline row of the plan.
    Inline(&'a serde_json::Map<String, serde_json::Value>),
    /// A row of a cached block.
    Stored(BlockRow),
}

impl HeldRow<'_> {
    pub(super) fn get(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        match self {
            Self::None => None,
            Self::Inline(row) => Some(row),
            Self::Stored(row) => Some(row.get()),
        }
    }
}

impl RecordRunner {
    pub(super) fn new(
        llm: Arc<dyn ChatModel>,
        tools: ToolHub,
        cpu: CpuGate,
        max_prompt_chars: usize,
        max_image_bytes: usize,
        seeds: SeedBlocks,
    ) -> Self {
        Self {
            llm,
            tools,
            cpu,
            max_prompt_chars,
            max_image_bytes,
            seeds,
            tool_events: ToolEventBus::default(),
        }
    }

    /// The bus the records of this process announce their tool calls on.
    pub fn tool_events(&self) -> &ToolEventBus {
        &self.tool_events
    }

    pub(super) fn set_seeds(&mut self, seeds: SeedBlocks) {
        self.seeds = seeds;
    }

    /// The seed row of record `index` of `job`: inline, or read from its dataset's block.
    pub(super) async fn seed_row<'j>(
        &self,
        job: &'j CompiledJob,
        index: u64,
    ) -> Result<HeldRow<'j>, SeedReadError> {
        Ok(match job.plan.seed_row(index) {
            None => HeldRow::None,
            Some(SeedRow::Inline(row)) => HeldRow::Inline(row),
            Some(SeedRow::Stored { part, row }) => {
                // A plan with stored rows is compiled with its dataset ids (one per part).
                let Some(&dataset) = job.seed_datasets.get(part) else {
                    return Err(SeedReadError::Unbound { part });
                };
                HeldRow::Stored(self.seeds.row(dataset, row).await?)
            }
        })
    }

    /// The LLM client records call.
    pub fn llm(&self) -> &dyn ChatModel {
        self.llm.as_ref()
    }

    /// Generates record `index` of `job`, calling models through `chat` (the shared client,
    /// or a wrapper of it), waiting on tools and validators through `waits`, and calling tools
    /// in `scope` (its `per_record` MCP sessions are closed when
    /// the run ends, however it ends: finished, cancelled by dropping the future, or
    /// panicked). `cancel` ends LLM calls in flight.
    ///
    /// The record's seed row is read first (stored seeds: from the block cache, or the
    /// database); a failed read is the error, and nothing is generated.
    pub async fn run(
        &self,
        job: &CompiledJob,
        index: u32,
        scope: CallScope,
        chat: &dyn ChatModel,
        waits: &dyn Waits,
        cancel: &CancellationToken,
    ) -> Result<Generated, SeedReadError> {
        let _sessions = Sessions::Record(&self.tools, scope.record);
        let row = self.seed_row(job, u64::from(index)).await?;
        let events = self.tool_events.for_record(
            crate::domain::JobId(scope.job),
            scope.record,
            u64::from(index),
        );
        let rc = &job.run_config;
        let rt = LlmRuntime {
            chat,
            waits,
            models: &job.models,
            cancel,
            save_all_traces: rc.debug_override_save_all_column_traces,
            max_restarts: rc.max_conversation_restarts,
            max_corrections: rc.max_conversation_correction_steps,
            tools: &self.tools,
            max_prompt_chars: self.max_prompt_chars,
            max_image_bytes: self.max_image_bytes,
            tool_configs: &job.tools,
            cpu: &self.cpu,
            tool_events: Some(&events),
            scope: Some(scope),
        };
        Ok(job
            .plan
            .generate_with(u64::from(index), row.get(), &rt)
            .await)
    }
}

/// How long one CPU section of a chunk runs before it gives its permit back. Long enough that
/// records of samplers and expressions (microseconds each) share a section by the hundred;
/// short enough that a chunk of heavy templates does not hold the gate from a request that
/// needs it (a body to parse, a preview) for longer than one record, as per-record sections did.
const CHUNK_SLICE: std::time::Duration = std::time::Duration::from_millis(2);

impl RecordRunner {
    /// Generates records `indexes` of `job`, whose plan is CPU work only (see
    /// [`crate::generate::Plan::is_cpu_only`]), together: their seed rows are read first, then
    /// the records are generated in as few sections of the CPU gate as [`CHUNK_SLICE`] allows,
    /// rather than a task, a gate admission and a thread hand-off per record (which cost more
    /// than generating a record of samplers and expressions). Results come in the order of
    /// `indexes`. A record whose generation panics gets `panicked(index, payload)` instead,
    /// and the others are kept.
    pub async fn run_cpu_chunk(
        &self,
        job: &CompiledJob,
        indexes: &[u32],
        panicked: impl Fn(u32, &(dyn std::any::Any + Send)) -> Generated,
    ) -> Vec<Result<Generated, SeedReadError>> {
        let mut rows = Vec::with_capacity(indexes.len());
        for &index in indexes {
            rows.push(self.seed_row(job, u64::from(index)).await);
        }
        let mut out = Vec::with_capacity(indexes.len());
        let mut todo = rows.into_iter().zip(indexes).peekable();
        while todo.peek().is_some() {
            self.cpu
                .run(|| {
                    let started = std::time::Instant::now();
                    for (row, &index) in todo.by_ref() {
                        out.push(row.map(|row| {
                            // `AssertUnwindSafe`: a panic leaves nothing half-changed that is
                            // used after it (each record builds its own state).
                            let generate = std::panic::AssertUnwindSafe(|| {
                                job.plan.generate_record(u64::from(index), row.get())
                            });
                            std::panic::catch_unwind(generate)
                                .unwrap_or_else(|payload| panicked(index, payload.as_ref()))
                        }));
                        if started.elapsed() >= CHUNK_SLICE {
                            break;
                        }
                    }
                })
                .await;
        }
        out
    }
}

/// Closes MCP sessions when dropped: a record's `per_record` ones, or a job's (a preview's)
/// `per_job` ones.
pub(super) enum Sessions<'a> {
    Record(&'a ToolHub, uuid::Uuid),
    Job(&'a ToolHub, uuid::Uuid),
}

impl Drop for Sessions<'_> {
    fn drop(&mut self) {
        match self {
            Self::Record(tools, id) => tools.pool().release_record(*id),
            Self::Job(tools, id) => tools.pool().release_job(*id),
        }
    }
}
