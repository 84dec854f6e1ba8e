//! Stored datasets: seed files (CSV, JSONL, Parquet, directory listings) imported into the
//! database, so every worker of every replica reads the same rows whatever happens to the
//! files later.
//!
//! A dataset is its metadata ([`DatasetMeta`]: name, owner, typed columns, row count, size,
//! sha256 of the source bytes) plus its rows, stored as JSON arrays of [`BLOCK_ROWS`] row
//! objects. Row `i` is in block `i / BLOCK_ROWS` at position `i % BLOCK_ROWS`, so a reader
//! fetches one block for any row and memory stays bounded whatever the dataset's size.
//!
//! * [`import`]: the only writer. Parses a file (streamed, in a blocking task) or takes rows
//!   already in memory, writes blocks in bounded transactions, flips the dataset to `ready`.
//! * [`formats`]: one reader per file format, and column type inference; [`decoder`] runs
//!   them on untrusted files in a child process with capped memory, stack and CPU time.
//! * [`service`]: what the API calls, failing with a [`DatasetError`] the API maps to HTTP: uploads (spooled to disk while hashed), lists, previews,
//!   deletes.
//! * [`datastore`]: files of Hub-style repositories (`/v1/hf`, NVIDIA's client's seed
//!   datastore), kept as datasets and written out again from their rows when read.
//! * [`resolve`]: a job's `seed_config.source` to the datasets it is bound to; [`seed_cache`]:
//!   their blocks read while records run.
//! * [`rollout`]: DataDesigner's `agent_rollout` seed rows, derived from an uploaded folder of
//!   agent trajectories (in the decoder's child process).
//! * [`upload_path`]: the path an upload came from, which `local` seed paths match.
//! * [`sources`]: server-side seeds (allow-listed directories, the Hugging Face Hub), imported
//!   as datasets.
//!
//! The `Store` methods that read and delete datasets are in [`crate::store`].

pub mod datastore;
pub mod decoder;
mod error;
pub mod formats;
pub mod hub_repo;
pub mod import;
pub mod resolve;
pub mod rollout;
pub mod seed_cache;
pub mod service;
pub mod sources;
pub mod upload_path;

pub use crate::domain::DatasetId;
pub use crate::domain::stored_dataset::{
    BLOCK_ROWS, ColumnType, DatasetColumn, DatasetFormat, DatasetMeta, DatasetQuery,
    DatasetSourceKind, DeleteDataset,
};
pub use error::DatasetError;
pub use import::{FileDigest, ImportError, import_file, import_file_digested, import_rows};
pub use service::DatasetService;
