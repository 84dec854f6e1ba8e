//! `DatasetService`: the one door the API uses for datasets: spooling an upload to disk while
//! hashing it, the idempotent re-upload check, importing, listing, previews and deletes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::error::DatasetError;
use super::import::{FileDigest, import_file_digested};
use super::rollout::upload::{
    RolloutOptions, default_path, import_rollout, source_ref as rollout_ref,
};
use super::upload_path;
use super::{
    DatasetFormat, DatasetId, DatasetMeta, DatasetQuery, DatasetSourceKind, DeleteDataset,
};
use crate::config::DatasetsConfig;
use crate::store::DatasetStore;

/// Rows a dataset's `preview` shows.
pub const PREVIEW_ROWS: usize = 10;

/// Longest dataset name accepted, in bytes (a file name on common file systems).
const MAX_NAME_BYTES: usize = 255;

/// Datasets for the API.
#[derive(Clone)]
pub struct DatasetService {
    pub(super) store: Arc<dyn DatasetStore>,
    pub(super) config: Arc<DatasetsConfig>,
    /// The datastore's last renderings (see [`super::datastore`]).
    pub(super) renders: Arc<crate::rendered::RenderCache<super::DatasetId>>,
}

/// A page of datasets, newest first; `more` when another page follows.
#[derive(Debug)]
pub struct DatasetPage {
    pub items: Vec<DatasetMeta>,
    pub more: bool,
}

impl DatasetService {
    pub fn new(store: Arc<dyn DatasetStore>, config: DatasetsConfig) -> Self {
        Self {
            store,
            config: Arc::new(config),
            renders: Arc::default(),
        }
    }

    /// Deletes imports left `importing` by a process that died (idle for longer than
    /// `datasets.import_idle_timeout_sec`). Run at start-up.
    pub async fn delete_stale_imports(&self) -> Result<u64, DatasetError> {
        let idle = Duration::from_secs(self.config.import_idle_timeout_sec);
        Ok(self.store.delete_stale_imports(idle).await?)
    }

    /// Stores an uploaded file: spools `body` to a temporary file (hashing it, at most
    /// `datasets.max_upload_bytes`, failing when no byte arrives for
    /// `datasets.upload_idle_timeout_sec`), then returns the caller's ready dataset of the same
    /// name and sha256 (`false`: nothing new stored) or imports the file (`true`).
    #[expect(
        clippy::too_many_arguments,
        reason = "the upload's query parameters, one value each, and its body"
    )]
    pub async fn upload<S, E>(
        &self,
        owner: Option<&str>,
        name: &str,
        path: Option<&str>,
        format: Option<&str>,
        rollout: Option<RolloutOptions>,
        content_length: Option<u64>,
        body: S,
    ) -> Result<(DatasetMeta, bool), DatasetError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let name = check_file_name(name, "query parameter 'name'")?;
        let source_ref = match (&rollout, path) {
            // An agent-rollout archive: `path` is the folder as the config writes it.
            (Some(options), path) => Some(rollout_source_ref(options, path)?),
            (None, Some(raw)) => Some(upload_path::source_ref(
                &upload_path::check(raw, &name).map_err(|why| {
                    DatasetError::InvalidRequest(format!("query parameter 'path': {why}"))
                })?,
            )),
            (None, None) => None,
        };
        let format = match &rollout {
            Some(_) => DatasetFormat::Listing,
            None => dataset_format(format, &name)?,
        };
        let max = self.config.max_upload_bytes;
        if content_length.is_some_and(|n| n > max) {
            return Err(DatasetError::TooLarge(max));
        }
        let dir = self.config.upload_dir();
        let spool = tempfile::Builder::new()
            .prefix("synthgate-upload-")
            .tempfile_in(&dir)
            .map_err(|e| {
                DatasetError::Internal(format!("creating an upload file in {}: {e}", dir.display()))
            })?;
        let idle = Duration::from_secs(self.config.upload_idle_timeout_sec);
        let digest = spool_body(spool.path(), body, max, idle).await?;
        if digest.size_bytes == 0 {
            return Err(DatasetError::Invalid(
                "the file is empty: the request body holds the file's bytes".into(),
            ));
        }
        // The same file from the same path (when one is given): an upload from another path
        // is stored again, so each path finds its own.
        let same = DatasetQuery {
            name: Some(name.clone()),
            sha256: Some(digest.sha256.clone()),
            source_ref: source_ref.clone(),
            limit: 1,
            ..Default::default()
        };
        if let Some(existing) = self.store.find_datasets(owner, &same).await?.pop() {
            return Ok((existing, false));
        }
        let meta = match (rollout, source_ref) {
            (Some(options), Some(source_ref)) => {
                import_rollout(
                    &*self.store,
                    owner,
                    &name,
                    spool.path(),
                    digest,
                    options,
                    source_ref,
                    &self.config.limits(),
                )
                .await
            }
            (_, source_ref) => {
                import_file_digested(
                    &*self.store,
                    owner,
                    &name,
                    format,
                    spool.path(),
                    digest,
                    DatasetSourceKind::Upload,
                    source_ref,
                    &self.config.limits(),
                )
                .await
            }
        }
        .map_err(DatasetError::from)?;
        tracing::info!(
            dataset.id = %meta.id,
            dataset.rows = meta.num_rows,
            dataset.size_bytes = meta.size_bytes,
            "dataset imported"
        );
        // `spool` is deleted here, on drop.
        Ok((meta, true))
    }

    /// A page of the caller's datasets, newest first, optionally by name or sha256.
    pub async fn list(
        &self,
        owner: Option<&str>,
        mut q: DatasetQuery,
    ) -> Result<DatasetPage, DatasetError> {
        let limit = q.limit;
        q.limit = limit.saturating_add(1);
        let mut items = self.store.find_datasets(owner, &q).await?;
        let more = items.len() > limit as usize;
        items.truncate(limit as usize);
        Ok(DatasetPage { items, more })
    }

    /// A dataset and its first [`PREVIEW_ROWS`] rows.
    pub async fn get(
        &self,
        owner: Option<&str>,
        id: DatasetId,
    ) -> Result<(DatasetMeta, Vec<Map<String, Value>>), DatasetError> {
        let meta = self
            .store
            .get_dataset(id, owner)
            .await?
            .ok_or_else(|| DatasetError::NotFound(id.to_string()))?;
        let mut rows = self.store.read_dataset_block(id, 0).await?;
        rows.truncate(PREVIEW_ROWS);
        Ok((meta, rows))
    }

    /// Deletes a dataset unless a queued or running job reads it.
    pub async fn delete(&self, owner: Option<&str>, id: DatasetId) -> Result<(), DatasetError> {
        match self.store.delete_dataset(id, owner).await? {
            DeleteDataset::Deleted => {
                tracing::info!(dataset.id = %id, "dataset deleted");
                Ok(())
            }
            DeleteDataset::Missing => Err(DatasetError::NotFound(id.to_string())),
            DeleteDataset::InUse(jobs) => {
                let shown: Vec<String> = jobs.iter().take(10).map(ToString::to_string).collect();
                let more = jobs.len().saturating_sub(shown.len());
                let tail = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                Err(DatasetError::InUse(format!(
                    "dataset {id} is read by jobs that are queued or running: {}{tail}; \
                     cancel them or wait for them to finish",
                    shown.join(", ")
                )))
            }
        }
    }
}

/// Writes `body` to `path`, hashing it; at most `max` bytes, each chunk within `idle`.
async fn spool_body<S, E>(
    path: &Path,
    mut body: S,
    max: u64,
    idle: Duration,
) -> Result<FileDigest, DatasetError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let io = |e: std::io::Error| DatasetError::Internal(format!("writing the upload to disk: {e}"));
    let mut file = tokio::io::BufWriter::with_capacity(
        256 * 1024,
        tokio::fs::File::create(path).await.map_err(io)?,
    );
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    loop {
        let chunk = match tokio::time::timeout(idle, body.next()).await {
            Err(_) => return Err(DatasetError::Stalled),
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(DatasetError::InvalidRequest(format!(
                    "the upload did not arrive whole: {e}"
                )));
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        size += chunk.len() as u64;
        if size > max {
            return Err(DatasetError::TooLarge(max));
        }
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(io)?;
    }
    file.flush().await.map_err(io)?;
    Ok(FileDigest {
        size_bytes: size,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// The dataset name from the `name` parameter: its last path component (`\` counts as `/`).
/// `field` names where the name came from, for the message.
pub(super) fn check_file_name(raw: &str, field: &str) -> Result<String, DatasetError> {
    let normalized = raw.replace('\\', "/");
    let name = normalized.rsplit('/').next().unwrap_or_default();
    let bad = |why: &str| DatasetError::InvalidRequest(format!("{field}: {why}"));
    if name.is_empty() || name == "." || name == ".." {
        return Err(bad("must be the file's name, e.g. `name=people.csv`"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(bad(&format!("longer than {MAX_NAME_BYTES} bytes")));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("must not contain control characters"));
    }
    // Bidirectional overrides, embeddings, isolates and marks reorder how a name is shown
    // (`report\u{202E}vsc.exe` reads as `reportexe.csv`): a name must read as it is.
    if name.chars().any(|c| {
        matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
    }) {
        return Err(bad(
            "must not contain bidirectional control characters (they change how the name reads)",
        ));
    }
    // `.csv` and `..csv` are an extension with no name (and a hidden file's name).
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    if stem.trim_matches('.').is_empty() {
        return Err(bad(
            "must have a name before its extension, e.g. `name=people.csv`",
        ));
    }
    // A job's `local` seed names datasets by glob (`path: "*.csv"`): a dataset named `*.csv`
    // could be matched only as every CSV at once, never as itself.
    if name.contains(['*', '?', '[', ']']) {
        return Err(bad(
            "must not contain the glob characters `*`, `?`, `[` or `]` (seeds name datasets by glob)",
        ));
    }
    Ok(name.to_owned())
}

/// The `source_ref` of an agent-rollout upload: its options and the folder `path` as the
/// config writes it (the format's default folder when not given; ATIF has none).
fn rollout_source_ref(
    options: &RolloutOptions,
    path: Option<&str>,
) -> Result<String, DatasetError> {
    let bad = |why: String| DatasetError::InvalidRequest(why);
    let path = match path.or(default_path(options.format)) {
        Some(path) => path,
        None => {
            return Err(bad(format!(
                "query parameter 'path' is required for rollout format '{}' (the folder the \
                 config's agent_rollout seed names)",
                options.format.name()
            )));
        }
    };
    for (field, value) in [("path", path), ("root", options.root.as_str())] {
        if value.len() > upload_path::MAX_PATH_BYTES || value.chars().any(char::is_control) {
            return Err(bad(format!(
                "query parameter '{field}': at most {} bytes, no control characters",
                upload_path::MAX_PATH_BYTES
            )));
        }
    }
    if let Some(pattern) = &options.file_pattern
        && (pattern.trim().is_empty() || pattern.contains(['/', '\\']))
    {
        return Err(bad(format!(
            "query parameter 'file_pattern': '{pattern}' must be a non-empty pattern over file \
             names, not paths (DataDesigner's rule)"
        )));
    }
    Ok(rollout_ref(
        options.format,
        path,
        options.file_pattern.as_deref(),
        options.recursive,
    ))
}

/// The format from the `format` parameter, else the name's extension.
fn dataset_format(param: Option<&str>, name: &str) -> Result<DatasetFormat, DatasetError> {
    match param {
        Some(raw) => match DatasetFormat::parse(&raw.to_ascii_lowercase()) {
            Some(DatasetFormat::Listing) | None => Err(DatasetError::UnsupportedFormat(format!(
                "query parameter 'format': '{raw}' is not one of csv, jsonl, parquet, agent_rollout (a tar archive of agent trajectories)"
            ))),
            Some(f) => Ok(f),
        },
        None => DatasetFormat::from_file_name(name).ok_or_else(|| {
            DatasetError::UnsupportedFormat(format!(
                "cannot tell the format of '{name}': name a .csv, .jsonl, .ndjson or .parquet \
                 file, or pass `format=csv|jsonl|parquet`"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_directories() {
        assert_eq!(
            check_file_name("data/people.csv", "query parameter 'name'").unwrap(),
            "people.csv"
        );
        assert_eq!(
            check_file_name(r"C:\seeds\a.jsonl", "query parameter 'name'").unwrap(),
            "a.jsonl"
        );
        assert!(check_file_name("dir/", "query parameter 'name'").is_err());
        assert!(check_file_name("..", "query parameter 'name'").is_err());
        assert!(check_file_name("a\nb.csv", "query parameter 'name'").is_err());
        // Round 3: an extension alone, and names that do not read as they are.
        for bad in [
            ".csv",
            "..csv",
            "...",
            "evil\u{202E}vsc.exe",
            "a\u{2066}b.csv",
            "\u{200F}x.csv",
        ] {
            assert!(
                check_file_name(bad, "query parameter 'name'").is_err(),
                "{bad:?}"
            );
        }
        assert_eq!(
            check_file_name(".hidden.csv", "query parameter 'name'").unwrap(),
            ".hidden.csv"
        );
        assert_eq!(
            check_file_name("data", "query parameter 'name'").unwrap(),
            "data"
        );
        for glob in ["*.csv", "a?.csv", "[ab].csv", "x]y.jsonl"] {
            assert!(
                check_file_name(glob, "query parameter 'name'").is_err(),
                "{glob}"
            );
        }
    }

    #[test]
    fn format_from_param_or_extension() {
        assert_eq!(dataset_format(None, "a.csv").unwrap(), DatasetFormat::Csv);
        assert_eq!(
            dataset_format(Some("PARQUET"), "a.bin").unwrap(),
            DatasetFormat::Parquet
        );
        let e = dataset_format(None, "a.txt").unwrap_err();
        assert!(matches!(e, DatasetError::UnsupportedFormat(_)), "{e:?}");
        let e = dataset_format(Some("listing"), "a.csv").unwrap_err();
        assert!(matches!(e, DatasetError::UnsupportedFormat(_)), "{e:?}");
    }
}
