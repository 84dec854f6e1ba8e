//! synthgate: an HTTP gateway that runs NeMo DataDesigner-compatible data generation jobs.
//!
//! The flow of a job:
//!
//! ```text
//! POST /v1/jobs ─► api::jobs ─► jobs::JobService::submit
//!                               (parse + validate the DataDesigner config into a generate::Plan,
//!                                resolve its seed to stored datasets (datasets::resolve),
//!                                insert the job, bound to them: one row, whatever its size)
//!                                        │ notify
//!                                        ▼
//!                  worker::WorkerPool ─ claim chunks of record indexes under a lease (queue)
//!                                        │ per record
//!                                        ▼
//!                  jobs::RecordRunner ─ the record's seed row (datasets::seed_cache), then
//!                                       generate::Plan: samplers, expressions (on
//!                                       cpu::CpuGate), LLM columns (llm) and their tools
//!                                       (tools, mcp), embedding, image and validation
//!                                       columns; the same runner serves previews
//!                                        │ result + traces + images + usage
//!                                        ▼
//!                  worker writer ─ batch insert of results, fenced by chunk lease ─► queue
//!                                        │ reports the batch
//!                                        ▼
//!                  jobs::JobService ─ early shutdown on the error rate, finalizing
//!
//!                  GET /v1/jobs/{id}, /records, /outputs, /analysis, /events,
//!                      /v1/records/{id}, /media ─► api ─► jobs
//! ```
//!
//! The layers, each depending only on those below it (`tests/api/layers.rs` holds the code to
//! this map, file by file):
//!
//! * The drivers: [`api`], HTTP only (routes, extractors, bodies, OpenAPI), the web UI's static
//!   page (`api::ui`, embedded from `ui/`), the same operations as MCP tools at `/mcp`
//!   (`api::mcp_server`; [`mcp`] is the other direction, the client pool), NVIDIA's Data
//!   Designer service API at `/v1/data-designer` (`api::data_designer`, for its Python client)
//!   and its seed datastore, a Hub-compatible API at `/v1/hf` (`api::hub`), its successor's
//!   NeMo Platform API at `/apis/...` (`api::platform`, for `nemo-platform`), with [`state`], the
//!   handles the handlers share; and [`worker`], the queue of one replica: claims, leases, the
//!   batch writer. Every job, record, trace, export and progress question goes to [`jobs`],
//!   every dataset question to [`datasets`]; neither driver touches the store for them.
//! * [`jobs`]: the one door to jobs, and the only code that changes a job's status; [`auth`]:
//!   the caller it is given.
//! * [`datasets`]: seed datasets: uploads and imports (CSV, JSONL, Parquet, and folders of agent
//!   trajectories turned into DataDesigner's `agent_rollout` rows, decoded in a child
//!   process with capped memory, stack and CPU time) stored in blocks, a config's seed resolved to the datasets a job is bound to, the block cache records read
//!   seed rows through, and the server-side sources (allow-listed directories, the Hub). It
//!   fails with its own [`datasets::DatasetError`]; [`error`] maps it, like the store's errors,
//!   to HTTP.
//! * [`generate`]: compiled plans and record generation; [`tools`], [`mcp`], [`llm`]: tool
//!   calls (their error kinds and live `tool_call` events), the MCP session pool, tool-list
//!   cache and providers' OAuth, LLM providers.
//! * [`queue`]: the work queue, exactly once per record: chunk claims under leases, the fenced
//!   writes of results, finalizing; on the store's backends and pools. The worker pool holds
//!   it and nothing of the store.
//! * [`store`]: persistence of [`domain`] types on SQLite or Postgres.
//! * [`domain`]: plain data (configs, jobs, records, traces, usage, stored datasets' metadata);
//!   [`config`]: the server config, its defaults and limits; and the leaf helpers [`decode`]
//!   (untrusted JSON and YAML, strictly: request bodies, `/mcp` messages, JSONL rows),
//!   [`metrics`], [`cpu`], [`telemetry`] (logs, and OpenTelemetry export and trace context),
//!   [`shutdown`], [`serve`] (the listener), [`rendered`]
//!   (files written from stored rows, kept for ranged reads), `lanes` (the connection
//!   lanes of every outbound HTTP origin: model providers, HTTP MCP providers, inline tools),
//!   `bounded_body` (an outbound answer's body read up to a bound), and `pytext` (Python's
//!   `str`, `repr` and `json.dumps` forms, which DataDesigner's prompts and rows carry).
//! * Above them all: [`app`] (composition root) and [`cli`] (the client). `fuzzing` (hidden)
//!   holds the entry points of the `cargo fuzz` targets in `fuzz/`.

pub mod api;
pub mod app;
pub mod auth;
pub(crate) mod bounded_body;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod datasets;
pub mod decode;
pub mod domain;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod jobs;
pub(crate) mod lanes;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub(crate) mod pytext;
pub mod queue;
pub mod rendered;
pub mod serve;
pub mod shutdown;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod worker;

/// Makes rustls use ring (the build enables no other provider, to keep aws-lc out of the build).
/// Call before building any HTTP client; a second call is harmless.
pub fn install_crypto_provider() {
    // Err only means a provider is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
