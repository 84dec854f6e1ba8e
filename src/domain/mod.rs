//! Plain data with no I/O: id newtypes, jobs and records (as generated and as stored), job and
//! record status, LLM usage, stored datasets' metadata, the DataDesigner config model.
//!
//! Everything here is cheap to construct in tests and carries no handle to a database, a
//! client or a runtime.

pub mod dataset;
pub mod ids;
pub mod job;
pub mod media;
pub mod models;
pub mod record;
pub mod selection;
pub mod status;
pub mod stored_dataset;
pub mod usage;

pub use ids::{DatasetId, JobId, RecordId};
pub use status::{JobStatus, RecordStatus};
