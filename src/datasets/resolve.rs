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
//! pub async fn resolve(ctx: &ResolveCtx<'_>, path: &str, endpoint: &str, token: Option<&SeedToken>)
//!     -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>>;
//! ```
//!
//! [`ResolveCtx`] (defined here) carries the store, the caller's owner (`None` when auth is
//! off) and the [`SeedSources`]. `resolve_local` returning `Ok(vec![])` means nothing matched:
//! [`resolve`] then reports [`not_found`]. Every returned dataset is `ready` and owned by the caller;
//! several are read concatenated in the order returned and must have the same columns (this
//! module checks that and reports `invalid_seed_config`). Issues use `seed_config.source.*`
//! field paths: `seed_dataset_not_found` when nothing matches, `unsupported_seed_source` for
//! a source the server does not serve.

use std::path::Path;

use crate::datasets::rollout::{self, RolloutFormat};
use crate::datasets::sources::{self, SeedSources};
use crate::datasets::upload_path;
use crate::datasets::{
    ColumnType as DatasetColumnType, DatasetId, DatasetMeta, DatasetQuery, DatasetSourceKind,
};
use crate::domain::dataset::{ConfigIssue, SeedSource, codes};
use crate::generate::{ColumnType, StoredSeed};
use crate::store::{DatasetStore, StoreError};

/// What resolving a seed source needs: the store, the caller, and the server's sources.
pub struct ResolveCtx<'a> {
    /// Where datasets are stored and imported.
    pub store: &'a dyn DatasetStore,
    /// The caller's API key owner; `None` when auth is off (everything is visible).
    pub owner: Option<&'a str>,
    /// The server-side sources (allow-listed directories, the Hub).
    pub sources: &'a SeedSources,
}

/// A seed source resolved to stored datasets: what the job is bound to and compiled with.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSeed {
    /// The datasets, in reading order (stored as `jobs.seed_datasets`).
    pub ids: Vec<DatasetId>,
    /// Their fields and sizes, for compiling the plan.
    pub stored: StoredSeed,
}

/// Why a seed could not be resolved.
#[derive(Debug)]
pub enum ResolveError {
    /// The config's fault: `seed_dataset_not_found`, `unsupported_seed_source`,
    /// `invalid_seed_config` (datasets of a glob with different columns).
    Issues(Vec<ConfigIssue>),
    /// The database failed.
    Store(StoreError),
}

impl From<StoreError> for ResolveError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// Resolves `source` (not inline: inline rows need no dataset) to the caller's datasets.
///
/// `local`: the caller's ready uploaded datasets (by the path they were read from, else by
/// file name; see [`uploaded`]); then the server's directories. `hf`, `directory`, `file_contents`:
/// the server-side sources. `agent_rollout`: the caller's upload of the trajectories' folder.
/// `df`: `unsupported_seed_source`.
pub async fn resolve(
    ctx: &ResolveCtx<'_>,
    source: &SeedSource,
) -> Result<ResolvedSeed, ResolveError> {
    let datasets = match source {
        SeedSource::Local { path } => match uploaded(ctx, path).await? {
            found if !found.is_empty() => found,
            _ => sources::server::resolve_local(ctx, path)
                .await
                .map_err(ResolveError::Issues)?,
        },
        SeedSource::Hf {
            path,
            token,
            endpoint,
        } => sources::hf::resolve(ctx, path, endpoint, token.as_ref())
            .await
            .map_err(ResolveError::Issues)?,
        SeedSource::Directory(files) => sources::server::resolve_directory(ctx, files, None)
            .await
            .map_err(ResolveError::Issues)?,
        SeedSource::FileContents { files, encoding } => {
            sources::server::resolve_directory(ctx, files, Some(encoding))
                .await
                .map_err(ResolveError::Issues)?
        }
        SeedSource::Datastore { dataset } => datastore(ctx, dataset).await?,
        SeedSource::AgentRollout {
            format,
            path,
            file_pattern,
            recursive,
        } => vec![
            agent_rollout(
                ctx,
                format,
                path.as_deref(),
                file_pattern.as_deref(),
                *recursive,
            )
            .await?,
        ],
        SeedSource::Other { seed_type } => {
            return Err(ResolveError::Issues(vec![unsupported(seed_type)]));
        }
        SeedSource::Inline { .. } => {
            return Err(ResolveError::Issues(vec![ConfigIssue::at_field(
                codes::INVALID_SEED_CONFIG,
                "seed_config.source",
                "inline rows are not a stored dataset",
            )]));
        }
    };
    if datasets.is_empty()
        && let SeedSource::Local { path } = source
    {
        return Err(ResolveError::Issues(vec![not_found(path)]));
    }
    bind(&datasets).map_err(|i| ResolveError::Issues(vec![i]))
}

/// `agent_rollout`: the caller's newest upload of the trajectories' folder made for this
/// format, folder, file pattern and `recursive` (see [`rollout::upload`]).
async fn agent_rollout(
    ctx: &ResolveCtx<'_>,
    format: &str,
    path: Option<&str>,
    file_pattern: Option<&str>,
    recursive: bool,
) -> Result<DatasetMeta, ResolveError> {
    let issue = |field: &str, why: String| {
        ResolveError::Issues(vec![ConfigIssue::at_field(
            codes::SEED_DATASET_NOT_FOUND,
            field,
            why,
        )])
    };
    let Some(rollout_format) = RolloutFormat::from_name(format) else {
        return Err(issue(
            "seed_config.source.format",
            format!("'{format}' is not an agent rollout format"),
        ));
    };
    let Some(folder) = path.or(rollout::upload::default_path(rollout_format)) else {
        return Err(issue(
            "seed_config.source.path",
            format!("format '{format}' needs a path"),
        ));
    };
    let q = DatasetQuery {
        source_ref: Some(rollout::upload::source_ref(
            rollout_format,
            folder,
            file_pattern,
            recursive,
        )),
        limit: 1,
        ..Default::default()
    };
    match ctx.store.find_datasets(ctx.owner, &q).await?.pop() {
        Some(d) if d.source == DatasetSourceKind::Upload => Ok(d),
        _ => Err(issue(
            "seed_config.source.path",
            format!(
                "no upload of the {format} trajectories in '{folder}' (file_pattern {}, \
                 recursive {recursive}): the service cannot read your disk, so upload the \
                 folder first: `synthgate submit CONFIG` does it, or POST /v1/datasets with \
                 format=agent_rollout, rollout_format={format}, path={folder} and a tar archive \
                 of the folder as the body",
                file_pattern.unwrap_or(rollout_format.default_file_pattern())
            ),
        )),
    }
}

/// `seed_config.dataset` (`namespace/repo/file`, the file possibly a glob): the newest file
/// of each matching name in the caller's datastore repository.
async fn datastore(ctx: &ResolveCtx<'_>, dataset: &str) -> Result<Vec<DatasetMeta>, ResolveError> {
    let not_found = |why: String| {
        ResolveError::Issues(vec![ConfigIssue::at_field(
            codes::SEED_DATASET_NOT_FOUND,
            "seed_config.dataset",
            why,
        )])
    };
    let Some((repo, file)) = super::datastore::RepoId::split_dataset(dataset) else {
        return Err(not_found(format!(
            "'{dataset}' is not `namespace/repository/file`: name a file of your seed \
             datastore (`upload_seed_dataset` to <synthgate>/v1/hf)"
        )));
    };
    let files = super::datastore::repo_files(ctx.store, ctx.owner, &repo, Some(file)).await?;
    if files.is_empty() {
        return Err(not_found(format!(
            "no file of the seed datastore matches '{dataset}': repository '{}' has no file \
             '{file}' of yours (upload it with `upload_seed_dataset`, datastore endpoint \
             <synthgate>/v1/hf)",
            repo.as_str()
        )));
    }
    Ok(files)
}

/// `seed_dataset_not_found` for a `local` path nothing matched.
pub fn not_found(path: &str) -> ConfigIssue {
    ConfigIssue::at_field(
        codes::SEED_DATASET_NOT_FOUND,
        "seed_config.source.path",
        format!(
            "no dataset matches '{path}': upload the file first (POST \
             /v1/datasets?name=FILE&path=PATH, or `synthgate submit`, which uploads the seed \
             files a config names); the path is matched against the paths your uploads came \
             from, else the file name against their names"
        ),
    )
}

/// The seed of `datasets`, which must be at least one and share their column names.
pub fn bind(datasets: &[DatasetMeta]) -> Result<ResolvedSeed, ConfigIssue> {
    let Some(first) = datasets.first() else {
        return Err(ConfigIssue::at_field(
            codes::SEED_DATASET_NOT_FOUND,
            "seed_config.source",
            "the seed source resolved to no dataset",
        ));
    };
    let names = |d: &DatasetMeta| d.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    let mut columns: Vec<(String, ColumnType)> = first
        .columns
        .iter()
        .map(|c| (c.name.clone(), column_type(c.r#type)))
        .collect();
    for d in &datasets[1..] {
        if names(d) != names(first) {
            return Err(ConfigIssue::at_field(
                codes::INVALID_SEED_CONFIG,
                "seed_config.source.path",
                format!(
                    "the matching datasets have different columns: '{}' has [{}] but '{}' has [{}]; \
                     every file of a glob needs the same columns",
                    first.name,
                    names(first).join(", "),
                    d.name,
                    names(d).join(", ")
                ),
            ));
        }
        for ((_, ty), c) in columns.iter_mut().zip(&d.columns) {
            *ty = unify(*ty, column_type(c.r#type));
        }
    }
    Ok(ResolvedSeed {
        ids: datasets.iter().map(|d| d.id).collect(),
        stored: StoredSeed {
            columns,
            num_rows: datasets.iter().map(|d| d.num_rows).collect(),
        },
    })
}

/// The type a dataset column's values take in an export: integers, floats and booleans as
/// such, everything else (strings, timestamps, objects, arrays, all-null) as text.
pub(super) fn column_type(t: DatasetColumnType) -> ColumnType {
    match t {
        DatasetColumnType::Integer => ColumnType::Int,
        DatasetColumnType::Float => ColumnType::Float,
        DatasetColumnType::Boolean => ColumnType::Bool,
        DatasetColumnType::String
        | DatasetColumnType::Timestamp
        | DatasetColumnType::Object
        | DatasetColumnType::Array
        | DatasetColumnType::Null => ColumnType::Text,
    }
}

/// The type holding both: the same, float for int and float, else text.
fn unify(a: ColumnType, b: ColumnType) -> ColumnType {
    match (a, b) {
        (a, b) if a == b => a,
        (ColumnType::Int, ColumnType::Float) | (ColumnType::Float, ColumnType::Int) => {
            ColumnType::Float
        }
        _ => ColumnType::Text,
    }
}

/// How many datasets one page of a glob's listing asks for.
const PAGE: u32 = 500;

/// The caller's ready uploaded datasets that `path` names, in reading order. Empty: none.
///
/// Uploads that record the path they were read from (see [`upload_path`]) are matched by it:
/// the newest upload of each matching path, in path order. When none matches, uploads made by
/// name only are matched by the file name of `path`, as before paths were recorded: the
/// newest of that name, or for a glob the newest of each matching name, in name order. A
/// plain file name with no folder (`seed.csv`) finally accepts the newest upload of that name
/// from any path, so a config that names no folder still finds a file `synthgate submit`
/// uploaded from one; a glob or a path with a folder never reads another folder's files.
async fn uploaded(ctx: &ResolveCtx<'_>, path: &str) -> Result<Vec<DatasetMeta>, ResolveError> {
    let Some(name) = file_name(path) else {
        return Ok(Vec::new());
    };
    let seed_path = upload_path::SeedPath::parse(path).map_err(|e| {
        ResolveError::Issues(vec![ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            "seed_config.source.path",
            e.0,
        )])
    })?;
    if let upload_path::SeedPath::Exact(exact) = &seed_path {
        let by_path = DatasetQuery {
            source_ref: Some(upload_path::source_ref(exact)),
            limit: 1,
            ..Default::default()
        };
        if let Some(d) = ctx.store.find_datasets(ctx.owner, &by_path).await?.pop()
            && is_upload(&d)
        {
            return Ok(vec![d]);
        }
        // Only uploads count here: a server file or Hub file imported under the same name is
        // the seed sources' cache, checked for changes by them (mtime, revision), not a
        // dataset the caller sent.
        let named = DatasetQuery {
            name: Some(name.clone()),
            ..Default::default()
        };
        let mut any_path = None;
        let mut found = None;
        for_each_page(ctx, named, |d| {
            if !is_upload(&d) {
                return true;
            }
            if upload_path::of(&d).is_none() {
                found = Some(d);
                return false;
            }
            any_path.get_or_insert(d);
            true
        })
        .await?;
        let fallback = any_path.filter(|_| !seed_path.names_folder());
        return Ok(found.or(fallback).into_iter().collect());
    }
    let name_pattern = glob::Pattern::new(&name).map_err(|_| {
        ResolveError::Issues(vec![ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            "seed_config.source.path",
            format!("'{name}' is not a valid glob pattern"),
        )])
    })?;
    // Newest first, so the first of each path (or name) seen is the one that wins.
    let mut by_path = std::collections::BTreeMap::new();
    let mut by_name = std::collections::BTreeMap::new();
    for_each_page(ctx, DatasetQuery::default(), |d| {
        if is_upload(&d) {
            match upload_path::of(&d) {
                Some(recorded) if seed_path.matches(recorded) => {
                    by_path.entry(recorded.to_owned()).or_insert(d);
                }
                Some(_) => {}
                None if name_pattern.matches(&d.name) => {
                    by_name.entry(d.name.clone()).or_insert(d);
                }
                None => {}
            }
        }
        true
    })
    .await?;
    let chosen = if by_path.is_empty() { by_name } else { by_path };
    Ok(chosen.into_values().collect())
}

/// Calls `visit` on each of the caller's ready datasets matching `q`, newest first, a page at
/// a time, until it returns `false` or none is left.
async fn for_each_page(
    ctx: &ResolveCtx<'_>,
    mut q: DatasetQuery,
    mut visit: impl FnMut(DatasetMeta) -> bool,
) -> Result<(), ResolveError> {
    q.limit = PAGE;
    loop {
        let page = ctx.store.find_datasets(ctx.owner, &q).await?;
        let full = page.len() == PAGE as usize;
        let last = page.last().map(|d| d.id);
        for d in page {
            if !visit(d) {
                return Ok(());
            }
        }
        match last {
            Some(id) if full => q.before = Some(id),
            _ => return Ok(()),
        }
    }
}

/// Whether a dataset was uploaded by the caller as a file (not imported by a seed source, nor
/// derived from agent trajectories, which only `agent_rollout` seeds read).
fn is_upload(d: &DatasetMeta) -> bool {
    d.source == DatasetSourceKind::Upload
        && !rollout::upload::is_rollout_ref(d.source_ref.as_deref())
}

/// The file name of a config's path, with `\` read as `/` (a path written on Windows).
fn file_name(path: &str) -> Option<String> {
    let path = path.replace('\\', "/");
    Path::new(&path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// The issue of a `seed_type` no server serves, saying what to use instead.
fn unsupported(seed_type: &str) -> ConfigIssue {
    let instead = match seed_type {
        "df" => {
            "a DataFrame lives in the client's Python process; write it to a file \
             (df.to_parquet('seed.parquet')), upload that (POST /v1/datasets or `synthgate \
             submit`) and use seed_type 'local' with path 'seed.parquet'"
        }
        _ => {
            "use seed_type 'local' with the file name of an uploaded dataset (POST \
             /v1/datasets), 'hf', 'directory', 'file_contents', or 'inline' rows"
        }
    };
    ConfigIssue::at_field(
        codes::UNSUPPORTED_SEED_SOURCE,
        "seed_config.source.seed_type",
        format!("seed_type '{seed_type}' is not supported by the service: {instead}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_ignore_directories_of_either_kind() {
        assert_eq!(file_name("data/seed.csv").as_deref(), Some("seed.csv"));
        assert_eq!(file_name(r"C:\data\seed.csv").as_deref(), Some("seed.csv"));
        assert_eq!(file_name("/abs/*.parquet").as_deref(), Some("*.parquet"));
        assert_eq!(file_name("seed.jsonl").as_deref(), Some("seed.jsonl"));
        assert_eq!(file_name("data/.."), None);
    }
}
