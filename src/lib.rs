//! synthgate: an HTTP gateway that runs NeMo DataDesigner-compatible data generation jobs.
//!
//! The flow of a job:
//!
//! ```text
//! POST /v1/jobs ─► api::jobs ─► jobs::JobService::submit
//!                               (parse + validate the DataDesigner config into a generate::Plan,
//!                                insert the job and its pending records in one transaction)
//!                                        │ notify
//!                                        ▼
//!                  worker::WorkerPool ─ claim a batch of records under a lease (store)
//!                                        │ per record
//!                                        ▼
//!                  generate::Plan::generate_with ─ samplers, expressions, seed rows (on cpu::CpuGate),
//!                                             LLM columns and their MCP tools
//!                                        │ result + traces
//!                                        ▼
//!                  worker writer ─ batch completion, fenced by lease owner ─► store
//!                                        ▼
//!                  GET /v1/jobs/{id}, /records, /events, /v1/records/{id}
//! ```

pub mod api;
pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod domain;
pub mod error;
pub mod generate;
pub mod jobs;
pub mod llm;
pub mod mcp;
pub mod metrics;
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
