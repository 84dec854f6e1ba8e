//! The seed datastore: files of Hugging Face Hub-style dataset repositories (`namespace/name`),
//! kept as the caller's datasets, which NVIDIA's Data Designer client uploads seeds to
//! (`upload_seed_dataset`) and reads back (`with_seed_dataset`) through `/v1/hf`, and which a
//! config names as `seed_config.dataset: "namespace/name/file"`.
//!
//! A repository is not stored on its own: it is the set of the key's datasets whose
//! `source_ref` is `datastore:{namespace}/{name}`, and a file is the newest such dataset of
//! its name. A commit imports the file like any upload (same parser, limits and column
//! types), so a datastore file is also one of the key's uploads.
//!
//! The stored form is rows, not the file's bytes: a read of the file gets it written again
//! from the rows, in its format ([`DatasetService::datastore_render`]). The same rows give the
//! same bytes, on every replica, so sizes and range reads agree; the last few renderings are
//! kept on disk, since a reader (`HfFileSystem`) reads one file in several ranges.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::error::DatasetError;
use super::formats::parquet_writer::ParquetSink;
use super::import::{FileDigest, import_file_digested};
use super::service::check_file_name;
use super::{
    BLOCK_ROWS, DatasetFormat, DatasetMeta, DatasetQuery, DatasetService, DatasetSourceKind,
};
use crate::domain::DatasetId;
use crate::rendered::{RenderWriter, Rendered};
use crate::store::{DatasetStore, StoreError};

/// Datasets read per page of a repository's listing.
const PAGE: u32 = 500;
/// Longest namespace or repository name (the Hub's limit).
const MAX_REPO_PART: usize = 96;

/// A repository id, `namespace/name`: each part 1 to 96 of `A-Z a-z 0-9 . _ -`, not `.` or
/// `..` (the Hub's rules, which also keep it one path segment each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoId(String);

impl RepoId {
    /// Checks `namespace` and `name`.
    pub fn new(namespace: &str, name: &str) -> Result<Self, DatasetError> {
        for (what, part) in [("namespace", namespace), ("name", name)] {
            let ok = !part.is_empty()
                && part.len() <= MAX_REPO_PART
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !ok {
                return Err(DatasetError::InvalidRequest(format!(
                    "repository {what} '{part}': 1 to {MAX_REPO_PART} of A-Z, a-z, 0-9, '.', \
                     '_' and '-'"
                )));
            }
        }
        Ok(Self(format!("{namespace}/{name}")))
    }

    /// Splits `seed_config.dataset` (`namespace/name/file`) into the repository and the file
    /// (or glob); `None` if it does not have that shape.
    pub fn split_dataset(dataset: &str) -> Option<(Self, &str)> {
        let (repo, file) = dataset.rsplit_once('/')?;
        let (namespace, name) = repo.split_once('/')?;
        let repo = Self::new(namespace, name).ok()?;
        (!file.is_empty()).then_some((repo, file))
    }

    /// `namespace/name`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `source_ref` of its files.
    fn source_ref(&self) -> String {
        format!("datastore:{}", self.0)
    }
}

/// The newest dataset of each name in `repo`, by name; `file`, if given, keeps only the
/// names it matches (a glob when it holds `*`, `?` or `[`).
pub async fn repo_files(
    store: &dyn DatasetStore,
    owner: Option<&str>,
    repo: &RepoId,
    file: Option<&str>,
) -> Result<Vec<DatasetMeta>, StoreError> {
    let pattern = file.and_then(|f| glob::Pattern::new(f).ok());
    let matches = |name: &str| match (file, &pattern) {
        (None, _) => true,
        (Some(f), _) if !f.contains(['*', '?', '[']) => name == f,
        (Some(_), Some(p)) => p.matches(name),
        (Some(_), None) => false,
    };
    let mut newest: BTreeMap<String, DatasetMeta> = BTreeMap::new();
    let mut before = None;
    loop {
        let q = DatasetQuery {
            source_ref: Some(repo.source_ref()),
            before,
            limit: PAGE,
            ..Default::default()
        };
        let page = store.find_datasets(owner, &q).await?;
        let full = page.len() == PAGE as usize;
        before = page.last().map(|d| d.id);
        for d in page {
            if matches(&d.name) {
                // Newest first: the first of a name is the file.
                newest.entry(d.name.clone()).or_insert(d);
            }
        }
        if !full {
            return Ok(newest.into_values().collect());
        }
    }
}

/// The most files one commit may hold: each is a dataset import, and the commit is undone as a
/// whole when one fails.
pub const MAX_COMMIT_FILES: usize = 1_000;

/// The datasets a commit in progress has created; deleted again unless the commit finishes
/// (emptied). Dropped part way (the request was cut), it deletes them from a task of its own.
struct Uncommitted {
    store: Arc<dyn DatasetStore>,
    owner: Option<String>,
    ids: Vec<DatasetId>,
}

impl Uncommitted {
    async fn roll_back(&mut self) {
        delete_all(
            &*self.store,
            self.owner.as_deref(),
            std::mem::take(&mut self.ids),
        )
        .await;
    }
}

impl Drop for Uncommitted {
    fn drop(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let (store, owner, ids) = (
            Arc::clone(&self.store),
            self.owner.take(),
            std::mem::take(&mut self.ids),
        );
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            // Not on the app's tracker (not reachable from here): a shutdown in the next
            // moments may leave these datasets, as a crash mid-commit would.
            tokio_util::task::TaskTracker::new().spawn_on(
                async move { delete_all(&*store, owner.as_deref(), ids).await },
                &handle,
            );
        }
    }
}

async fn delete_all(store: &dyn DatasetStore, owner: Option<&str>, ids: Vec<DatasetId>) {
    for id in ids {
        if let Err(e) = store.delete_dataset(id, owner).await {
            tracing::warn!(dataset.id = %id, error = %e, "could not undo a failed commit's file");
        }
    }
}

/// A file of a commit: its path in the repository and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedFile {
    pub path: String,
    pub content: Vec<u8>,
}

/// Reads a commit's `application/x-ndjson` body, as `huggingface_hub`'s `create_commit` sends
/// it: a `header` line, then one `{"key": "file", "value": {path, content, encoding:
/// "base64"}}` line per file. Each line goes through the strict decoder (`crate::decode`:
/// depth, size and duplicate keys bounded); other operations (`deletedFile`, `lfsFile`, ...)
/// are refused. The body itself is bounded by `server.max_body_bytes` before it gets here.
/// `Err` says which line and why.
pub fn parse_commit(body: &[u8]) -> Result<Vec<CommittedFile>, String> {
    use base64::Engine as _;

    #[derive(serde::Deserialize)]
    struct Line {
        key: String,
        value: Value,
    }
    #[derive(serde::Deserialize)]
    struct File {
        path: String,
        content: String,
        encoding: String,
    }
    let mut files = Vec::new();
    for (n, line) in body.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let at = |msg: String| format!("commit line {}: {msg}", n + 1);
        let value = crate::decode::json(line).map_err(|e| {
            at(match e {
                crate::decode::DecodeError::Syntax(m)
                | crate::decode::DecodeError::DuplicateKey(m) => m,
            })
        })?;
        let line: Line = serde_json::from_value(value).map_err(|e| at(e.to_string()))?;
        match line.key.as_str() {
            "header" => {}
            "file" => {
                let f: File = serde_json::from_value(line.value).map_err(|e| at(e.to_string()))?;
                if f.encoding != "base64" {
                    return Err(at(format!(
                        "encoding '{}': only base64 is served",
                        f.encoding
                    )));
                }
                let content = base64::engine::general_purpose::STANDARD
                    .decode(f.content.as_bytes())
                    .map_err(|e| at(format!("content is not base64: {e}")))?;
                files.push(CommittedFile {
                    path: f.path,
                    content,
                });
            }
            other => {
                return Err(at(format!(
                    "'{other}' operations are not served (only inline `file` uploads)"
                )));
            }
        }
    }
    if files.is_empty() {
        return Err("the commit holds no file".into());
    }
    Ok(files)
}

/// A repository's revision: a digest of its files (which dataset each name is), so it
/// changes with every commit that changes a file. 40 hex digits, as a Hub commit id.
pub fn revision(files: &[DatasetMeta]) -> String {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.name.as_bytes());
        h.update([0]);
        h.update(f.id.to_string().as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())[..40].to_owned()
}

impl DatasetService {
    /// Imports `content` as file `path` of `repo`, unless the newest file of that name holds
    /// the same bytes already. `path` is a plain file name with a `.csv`, `.jsonl`/`.ndjson`
    /// or `.parquet` extension (directories in a repository are not served).
    pub async fn datastore_commit(
        &self,
        owner: Option<&str>,
        repo: &RepoId,
        path: &str,
        content: &[u8],
    ) -> Result<(DatasetMeta, bool), DatasetError> {
        if path.contains(['/', '\\']) {
            return Err(DatasetError::Invalid(format!(
                "'{path}': files in folders of a repository are not served; commit it at the \
                 repository's top level"
            )));
        }
        let name = check_file_name(path, "the committed file's path")?;
        let format = DatasetFormat::from_file_name(&name).ok_or_else(|| {
            DatasetError::UnsupportedFormat(format!(
                "'{name}': the file name's extension must be .csv, .jsonl, .ndjson or .parquet"
            ))
        })?;
        if content.is_empty() {
            return Err(DatasetError::Invalid(format!("'{name}' is empty")));
        }
        let max = self.config.max_upload_bytes;
        if content.len() as u64 > max {
            return Err(DatasetError::TooLarge(max));
        }
        let digest = FileDigest {
            size_bytes: content.len() as u64,
            sha256: hex::encode(Sha256::digest(content)),
        };
        let current = repo_files(&*self.store, owner, repo, Some(&name)).await?;
        if let Some(same) = current.into_iter().find(|d| d.sha256 == digest.sha256) {
            return Ok((same, false));
        }
        let dir = self.config.upload_dir();
        let io = |e: std::io::Error| {
            DatasetError::Internal(format!("spooling a commit in {}: {e}", dir.display()))
        };
        let mut spool = tempfile::Builder::new()
            .prefix("synthgate-commit-")
            .tempfile_in(&dir)
            .map_err(io)?;
        spool.write_all(content).map_err(io)?;
        spool.flush().map_err(io)?;
        let meta = import_file_digested(
            &*self.store,
            owner,
            &name,
            format,
            spool.path(),
            digest,
            DatasetSourceKind::Upload,
            Some(repo.source_ref()),
            &self.config.limits(),
        )
        .await
        .map_err(DatasetError::from)?;
        tracing::info!(dataset.id = %meta.id, repo = repo.as_str(), "datastore file committed");
        Ok((meta, true))
    }

    /// Commits `files` to `repo` as one: every file is imported (or found unchanged), or, when
    /// one fails or the request is dropped part way (its timeout), the datasets this commit
    /// created are deleted again, so no commit leaves part of itself behind (a client that
    /// retries a commit cut by its timeout would otherwise find most of it already there, and
    /// the repo a mix of two attempts). At most [`MAX_COMMIT_FILES`] files.
    pub async fn datastore_commit_all(
        &self,
        owner: Option<&str>,
        repo: &RepoId,
        files: &[CommittedFile],
    ) -> Result<(), DatasetError> {
        if files.len() > MAX_COMMIT_FILES {
            return Err(DatasetError::InvalidRequest(format!(
                "the commit has {} files; at most {MAX_COMMIT_FILES} are committed at once",
                files.len()
            )));
        }
        let mut created = Uncommitted {
            store: Arc::clone(&self.store),
            owner: owner.map(str::to_owned),
            ids: Vec::new(),
        };
        for f in files {
            match self
                .datastore_commit(owner, repo, &f.path, &f.content)
                .await
            {
                Ok((meta, true)) => created.ids.push(meta.id),
                Ok((_, false)) => {}
                Err(e) => {
                    created.roll_back().await;
                    return Err(e);
                }
            }
        }
        created.ids.clear();
        Ok(())
    }

    /// The files of `repo` (the newest dataset of each name), by name.
    pub async fn datastore_files(
        &self,
        owner: Option<&str>,
        repo: &RepoId,
    ) -> Result<Vec<DatasetMeta>, DatasetError> {
        Ok(repo_files(&*self.store, owner, repo, None).await?)
    }

    /// `meta`'s rows written out as a file of its format (see the module docs).
    pub async fn datastore_render(
        &self,
        meta: &DatasetMeta,
    ) -> Result<Arc<Rendered>, DatasetError> {
        if let Some(r) = self.renders.get(&meta.id) {
            return Ok(r);
        }
        let dir = self.config.upload_dir();
        let io = |e: std::io::Error| {
            DatasetError::Internal(format!(
                "writing a datastore file in {}: {e}",
                dir.display()
            ))
        };
        let mut out = RenderWriter::new(&dir).map_err(io)?;
        let mut writer = FileWriter::new(meta)?;
        out.write(&writer.start()?).map_err(io)?;
        for block in 0..meta.num_rows.div_ceil(BLOCK_ROWS) {
            let rows = self.store.read_dataset_block(meta.id, block).await?;
            out.write(&writer.rows(rows)?).map_err(io)?;
        }
        out.write(&writer.finish()?).map_err(io)?;
        let rendered = Arc::new(out.finish().map_err(io)?);
        self.renders.put(meta.id, rendered.clone());
        Ok(rendered)
    }
}

/// Writes rows in one of the formats: CSV with a header row, JSON Lines, or Parquet with the
/// dataset's column types.
enum FileWriter {
    Csv(Vec<String>),
    Jsonl,
    Parquet(Box<ParquetSink>, Vec<String>),
}

impl FileWriter {
    fn new(meta: &DatasetMeta) -> Result<Self, DatasetError> {
        let names: Vec<String> = meta.columns.iter().map(|c| c.name.clone()).collect();
        Ok(match meta.format {
            DatasetFormat::Csv => Self::Csv(names),
            DatasetFormat::Jsonl | DatasetFormat::Listing => Self::Jsonl,
            DatasetFormat::Parquet => {
                let columns = meta
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), super::resolve::column_type(c.r#type)))
                    .collect();
                let sink = ParquetSink::new(columns).map_err(internal)?;
                Self::Parquet(Box::new(sink), names)
            }
        })
    }

    /// The bytes before the first row: the CSV header.
    fn start(&mut self) -> Result<Vec<u8>, DatasetError> {
        match self {
            Self::Csv(names) => csv_line(names.iter().map(String::as_str)),
            Self::Jsonl | Self::Parquet(..) => Ok(Vec::new()),
        }
    }

    fn rows(&mut self, rows: Vec<Map<String, Value>>) -> Result<Vec<u8>, DatasetError> {
        match self {
            Self::Csv(names) => {
                let mut out = Vec::new();
                for row in &rows {
                    let cells: Vec<String> = names
                        .iter()
                        .map(|n| match row.get(n) {
                            None | Some(Value::Null) => String::new(),
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                        })
                        .collect();
                    out.extend(csv_line(cells.iter().map(String::as_str))?);
                }
                Ok(out)
            }
            Self::Jsonl => {
                let mut out = Vec::new();
                for row in rows {
                    serde_json::to_writer(&mut out, &row).map_err(internal)?;
                    out.push(b'\n');
                }
                Ok(out)
            }
            Self::Parquet(sink, names) => {
                let rows: Vec<Value> = rows
                    .into_iter()
                    .map(|mut row| {
                        // In column order, as the sink writes them.
                        let ordered: Map<String, Value> = names
                            .iter()
                            .map(|n| (n.clone(), row.remove(n).unwrap_or(Value::Null)))
                            .collect();
                        Value::Object(ordered)
                    })
                    .collect();
                sink.write(&rows).map_err(internal)
            }
        }
    }

    /// The bytes after the last row: Parquet's footer.
    fn finish(self) -> Result<Vec<u8>, DatasetError> {
        match self {
            Self::Parquet(sink, _) => sink.finish().map_err(internal),
            Self::Csv(_) | Self::Jsonl => Ok(Vec::new()),
        }
    }
}

/// One CSV record.
fn csv_line<'a>(cells: impl Iterator<Item = &'a str>) -> Result<Vec<u8>, DatasetError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(cells).map_err(internal)?;
    w.into_inner().map_err(|e| internal(e.to_string()))
}

fn internal(e: impl std::fmt::Display) -> DatasetError {
    DatasetError::Internal(format!("writing a datastore file: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DatasetId;

    #[test]
    fn repository_ids_and_dataset_names() {
        assert!(RepoId::new("default", "my-seed").is_ok());
        for (ns, name) in [
            ("", "x"),
            ("a/b", "x"),
            ("..", "x"),
            ("a", "x y"),
            ("a", "é"),
        ] {
            assert!(RepoId::new(ns, name).is_err(), "{ns}/{name}");
        }
        assert!(RepoId::new("a", &"x".repeat(97)).is_err());
        let (repo, file) = RepoId::split_dataset("default/my-seed/seed.parquet").unwrap();
        assert_eq!((repo.as_str(), file), ("default/my-seed", "seed.parquet"));
        assert_eq!(repo.source_ref(), "datastore:default/my-seed");
        assert!(RepoId::split_dataset("my-seed/seed.parquet").is_none());
        assert!(RepoId::split_dataset("a/b/").is_none());
        assert!(RepoId::split_dataset("a/../x.csv").is_none());
    }

    #[test]
    fn a_revision_changes_with_the_files() {
        let meta = |name: &str| DatasetMeta {
            id: DatasetId::new(),
            owner: None,
            name: name.into(),
            format: DatasetFormat::Csv,
            columns: Vec::new(),
            num_rows: 0,
            size_bytes: 0,
            sha256: String::new(),
            source: DatasetSourceKind::Upload,
            source_ref: None,
            created_at: chrono::Utc::now(),
        };
        let a = meta("a.csv");
        let files = vec![a.clone()];
        let r = revision(&files);
        assert_eq!(r.len(), 40);
        assert_eq!(r, revision(&files));
        assert_ne!(r, revision(&[a, meta("a.csv")]));
    }
}
