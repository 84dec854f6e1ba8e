//! Resolving a job's `seed_config.source` to the stored datasets it reads, at submit and
//! preview; the job is then bound to their ids (`jobs.seed_datasets`).
//!
//! # The hook for `seed-sources` (signatures are the contract; keep them)
//!
//! ```ignore
//! // src/datasets/sources/mod.rs: built once at start-up (app.rs) and held by JobService.
//! pub struct SeedSources { /* seed-sources' fields: allow-listed dirs, Hub endpoint/token, HTTP client */ }
//! impl SeedSources {
//!     /// From the server config (the sections seed-sources adds). Infallible: validate
//!     /// the config keys in `config::validators` at load.
//!     pub fn from_config(config: &crate::config::Config) -> Self;
//!     /// No server-side sources (tests, and a server without any configured).
//!     pub fn none() -> Self;
//! }
//! // src/datasets/sources/server.rs
//! /// `local` after no uploaded dataset matched: the allow-listed directories.
//! pub async fn resolve_local(ctx: &ResolveCtx<'_>, path: &str)
//!     -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>>;
//! /// `directory` (`contents: None`) and `file_contents` (`contents: Some(encoding)`).
//! pub async fn resolve_directory(ctx: &ResolveCtx<'_>, files: &FileSystemSource,
//!     contents: Option<&str>) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>>;
//! // src/datasets/sources/hf.rs
//! pub async fn resolve(ctx: &ResolveCtx<'_>, path: &str, endpoint: &str, token_given: bool)
//!     -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>>;
//! ```
//!
//! [`ResolveCtx`] (defined here) carries the store, the caller's owner (`None` when auth is
//! off) and the [`SeedSources`]. Every returned dataset is `ready` and owned by the caller;
//! several are read concatenated in the order returned and must have the same columns (this
//! module checks that and reports `invalid_seed_config`). Issues use `seed_config.source.*`
//! field paths: `seed_dataset_not_found` when nothing matches, `unsupported_seed_source` for
//! a source the server does not serve.

use crate::datasets::DatasetMeta;
use crate::datasets::sources::SeedSources;
use crate::domain::dataset::ConfigIssue;
use crate::store::Store;

/// What resolving a seed source needs: the store, the caller, and the server's sources.
pub struct ResolveCtx<'a> {
    /// Where datasets are stored and imported.
    pub store: &'a dyn Store,
    /// The caller's API key owner; `None` when auth is off (everything is visible).
    pub owner: Option<&'a str>,
    /// The server-side sources (allow-listed directories, the Hub).
    pub sources: &'a SeedSources,
}

#[expect(dead_code, reason = "signature committed before the body, for seed-sources")]
type Resolved = Result<Vec<DatasetMeta>, Vec<ConfigIssue>>;
