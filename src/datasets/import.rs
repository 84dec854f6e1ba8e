//! The importer: the only code that writes datasets.
//!
//! A file is parsed in a child process ([`super::decoder`], running [`super::formats`]) read by a blocking task that encodes rows into blocks
//! of [`BLOCK_ROWS`] and sends them, in batches of at most [`BATCH_BYTES`], over a channel
//! of [`BATCHES_IN_FLIGHT`] to this async side, which writes each batch in one transaction. So
//! memory holds a few batches whatever the file's size, and the database never holds a
//! transaction open for the whole file.
//!
//! The dataset row is inserted `importing` first and flipped to `ready` last; a failed import
//! deletes what it wrote. An import cut short by a crash leaves an `importing` row that the
//! next import (or start-up) deletes once idle for `import_idle_timeout`.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::decoder;
use super::formats::{Kind, KindSet, RowSink};
use super::{BLOCK_ROWS, DatasetColumn, DatasetFormat, DatasetId, DatasetMeta, DatasetSourceKind};
use crate::config::DatasetLimits;
use crate::store::{DatasetStore, StoreError};

/// A batch of encoded blocks is sent to the writer once it reaches this many bytes.
pub const BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Batches parsed ahead of the writer.
const BATCHES_IN_FLIGHT: usize = 2;
/// At most this many blocks per batch (bounds the binds of one insert statement).
const BATCH_BLOCKS: usize = 256;

/// Why an import failed: a stable code and a message for the client naming the row and
/// column. Code `internal` is a server-side failure: its message is for the log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// `invalid_dataset`, `unsupported_dataset_format` or `internal`.
    pub code: &'static str,
    pub message: String,
}

impl ImportError {
    /// A malformed file (`invalid_dataset`).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: "invalid_dataset",
            message: message.into(),
        }
    }

    /// The owner's datasets would pass a per-key quota (`quota_exceeded`).
    pub fn quota(message: impl Into<String>) -> Self {
        Self {
            code: "quota_exceeded",
            message: message.into(),
        }
    }

    /// A server-side failure (`internal`); the message is logged, never shown.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: "internal",
            message: message.into(),
        }
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ImportError {}

impl From<StoreError> for ImportError {
    fn from(e: StoreError) -> Self {
        Self::internal(format!("storing the dataset: {e}"))
    }
}

/// The size and hex sha256 of a file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    pub size_bytes: u64,
    pub sha256: String,
}

impl FileDigest {
    /// Reads the file once to hash it (blocking).
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        let mut file = std::fs::File::open(path)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut size = 0u64;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            size += n as u64;
        }
        Ok(Self {
            size_bytes: size,
            sha256: hex::encode(hasher.finalize()),
        })
    }
}

/// Parses the file at `path` (streamed, in a blocking task) and stores it as a `ready`
/// dataset named `name`. The file is hashed here; see [`import_file_digested`] when the
/// caller hashed it already.
#[expect(
    clippy::too_many_arguments,
    reason = "the contract's signature, one value each"
)]
pub async fn import_file(
    store: &dyn DatasetStore,
    owner: Option<&str>,
    name: &str,
    format: DatasetFormat,
    path: &Path,
    source: DatasetSourceKind,
    source_ref: Option<String>,
    limits: &DatasetLimits,
) -> Result<DatasetMeta, ImportError> {
    let owned = path.to_path_buf();
    let digest = tokio::task::spawn_blocking(move || FileDigest::of_file(&owned))
        .await
        .map_err(|e| ImportError::internal(format!("hashing task: {e}")))?
        .map_err(|e| ImportError::internal(format!("hashing {}: {e}", path.display())))?;
    import_file_digested(
        store, owner, name, format, path, digest, source, source_ref, limits,
    )
    .await
}

/// [`import_file`] for a file whose size and sha256 are known (an upload hashed while it was
/// received).
#[expect(
    clippy::too_many_arguments,
    reason = "import_file's arguments plus the digest"
)]
pub async fn import_file_digested(
    store: &dyn DatasetStore,
    owner: Option<&str>,
    name: &str,
    format: DatasetFormat,
    path: &Path,
    digest: FileDigest,
    source: DatasetSourceKind,
    source_ref: Option<String>,
    limits: &DatasetLimits,
) -> Result<DatasetMeta, ImportError> {
    let meta = new_meta(owner, name, format, digest, source, source_ref);
    let path: PathBuf = path.to_path_buf();
    let limits_owned = limits.clone();
    run_import(store, meta, limits, true, move |sink| {
        decoder::decode(format, &path, &limits_owned, sink)
    })
    .await
}

/// Stores rows already in memory (a `directory` or `file_contents` listing) as a `ready`
/// dataset of format `listing`. Columns are the union of the rows' keys in first-seen order,
/// typed from the values; a row without a column gets null. The digest is that of the rows'
/// JSON Lines encoding.
pub async fn import_rows(
    store: &dyn DatasetStore,
    owner: Option<&str>,
    name: &str,
    rows: Vec<Map<String, Value>>,
    source: DatasetSourceKind,
    source_ref: Option<String>,
) -> Result<DatasetMeta, ImportError> {
    if rows.is_empty() {
        return Err(ImportError::invalid("no rows: the listing is empty"));
    }
    let mut names: Vec<String> = Vec::new();
    let mut kinds: Vec<KindSet> = Vec::new();
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    for row in &rows {
        let line = serde_json::to_vec(row).map_err(|e| ImportError::internal(e.to_string()))?;
        hasher.update(&line);
        hasher.update(b"\n");
        size += line.len() as u64 + 1;
        for (key, value) in row {
            let i = match names.iter().position(|n| n == key) {
                Some(i) => i,
                None => {
                    names.push(key.clone());
                    kinds.push(KindSet::default());
                    names.len() - 1
                }
            };
            if let Some(kind) = json_kind(value) {
                kinds[i].add(kind);
            }
        }
    }
    let columns: Vec<DatasetColumn> = names
        .into_iter()
        .zip(kinds)
        .map(|(name, set)| DatasetColumn {
            name,
            r#type: set.column_type(),
        })
        .collect();
    let digest = FileDigest {
        size_bytes: size,
        sha256: hex::encode(hasher.finalize()),
    };
    let meta = new_meta(
        owner,
        name,
        DatasetFormat::Listing,
        digest,
        source,
        source_ref,
    );
    let limits = DatasetLimits::default();
    let cols = columns.clone();
    // Rows already in memory: no row limit (a file's contents may be large).
    run_import(store, meta, &limits, false, move |sink| {
        for row in rows {
            let full: Map<String, Value> = cols
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        row.get(&c.name).cloned().unwrap_or(Value::Null),
                    )
                })
                .collect();
            sink.push(full)?;
        }
        Ok(cols)
    })
    .await
}

/// The kind of a JSON value; `None` for null.
pub(crate) fn json_kind(value: &Value) -> Option<Kind> {
    match value {
        Value::Null => None,
        Value::Bool(_) => Some(Kind::Boolean),
        Value::Number(n) if n.is_f64() => Some(Kind::Float),
        Value::Number(_) => Some(Kind::Integer),
        Value::String(_) => Some(Kind::String),
        Value::Array(_) => Some(Kind::Array),
        Value::Object(_) => Some(Kind::Object),
    }
}

pub(crate) fn new_meta(
    owner: Option<&str>,
    name: &str,
    format: DatasetFormat,
    digest: FileDigest,
    source: DatasetSourceKind,
    source_ref: Option<String>,
) -> DatasetMeta {
    DatasetMeta {
        id: DatasetId::new(),
        owner: owner.map(str::to_owned),
        name: name.to_owned(),
        format,
        columns: Vec::new(),
        num_rows: 0,
        size_bytes: digest.size_bytes,
        sha256: digest.sha256,
        source,
        source_ref,
        // Set by the store.
        created_at: chrono::Utc::now(),
    }
}

/// `datasets.max_decoded_ratio` applied to one file.
#[derive(Debug, Clone, Copy)]
struct DecodedBound {
    file_bytes: u64,
    ratio: u64,
    /// The rows' bytes allowed: `ratio` times the file's, at least the floor.
    bytes: u64,
}

/// Blocks encoded by the parser, `first..first + blocks.len()`.
struct Batch {
    first: u64,
    blocks: Vec<Vec<u8>>,
}

/// Runs `parse` in a blocking task, writing what it produces, then flips the dataset to
/// `ready`. On any failure, deletes what was written. `limit_rows`: whether
/// `limits.max_row_bytes` applies (the dataset's row count and size always do).
pub(crate) async fn run_import<F>(
    store: &dyn DatasetStore,
    meta: DatasetMeta,
    limits: &DatasetLimits,
    limit_rows: bool,
    parse: F,
) -> Result<DatasetMeta, ImportError>
where
    F: FnOnce(&mut dyn RowSink) -> Result<Vec<DatasetColumn>, ImportError> + Send + 'static,
{
    match store.delete_stale_imports(limits.import_idle_timeout).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(datasets = n, "deleted stale dataset imports"),
        // Only garbage is left behind; the import itself can go on.
        Err(e) => tracing::warn!(error = %e, "could not delete stale dataset imports"),
    }
    // Per-key quotas: what the owner's other datasets hold (imports in progress included) is
    // taken from what this one may hold. Imports of one key that run at once each see the
    // others as they were when it began, so together they may pass the quota by what they
    // import concurrently (at most `server.max_long_requests` uploads).
    let usage = store.dataset_usage(meta.owner.as_deref()).await?;
    let key_bytes_left = limits.max_bytes_per_key.saturating_sub(usage.bytes);
    let key_rows_left = limits.max_rows_per_key.saturating_sub(usage.rows);
    if key_bytes_left == 0 || key_rows_left == 0 {
        return Err(quota_error(limits, usage.rows, usage.bytes));
    }
    let id = meta.id;
    store.begin_dataset_import(&meta).await?;
    let sink_limits = SinkLimits {
        max_row_bytes: limit_rows.then_some(limits.max_row_bytes),
        max_rows: limits.max_rows,
        max_bytes: limits.max_dataset_bytes,
        key: KeyQuota {
            rows_left: key_rows_left,
            bytes_left: key_bytes_left,
            rows_used: usage.rows,
            bytes_used: usage.bytes,
            max_rows: limits.max_rows_per_key,
            max_bytes: limits.max_bytes_per_key,
        },
        // A file's rows, against the file's size; rows given in memory have no file.
        max_decoded: limit_rows.then(|| DecodedBound {
            file_bytes: meta.size_bytes,
            ratio: limits.max_decoded_ratio,
            bytes: meta
                .size_bytes
                .saturating_mul(limits.max_decoded_ratio)
                .max(crate::config::DECODED_RATIO_FLOOR),
        }),
    };
    let result = write_blocks(store, id, sink_limits, parse).await;
    let finished = match result {
        Ok((columns, num_rows)) => store
            .finish_dataset_import(id, &columns, num_rows)
            .await
            .map_err(ImportError::from)
            .and_then(|m| {
                m.ok_or_else(|| ImportError::internal("the import was removed as stale"))
            }),
        Err(e) => Err(e),
    };
    if finished.is_err()
        && let Err(e) = store.abort_dataset_import(id).await
    {
        // The row stays `importing` (invisible) until a later import removes it as stale.
        tracing::warn!(dataset.id = %id, error = %e, "could not delete a failed import");
    }
    finished
}

/// Receives the parser's batches and writes them; returns the columns and row count.
async fn write_blocks<F>(
    store: &dyn DatasetStore,
    id: DatasetId,
    limits: SinkLimits,
    parse: F,
) -> Result<(Vec<DatasetColumn>, u64), ImportError>
where
    F: FnOnce(&mut dyn RowSink) -> Result<Vec<DatasetColumn>, ImportError> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Batch>(BATCHES_IN_FLIGHT);
    let parser = tokio::task::spawn_blocking(move || {
        let mut sink = BlockSink::new(tx, limits);
        let columns = parse(&mut sink)?;
        let rows = sink.finish()?;
        Ok::<_, ImportError>((columns, rows))
    });
    let mut write_err = None;
    while let Some(batch) = rx.recv().await {
        match store
            .write_dataset_blocks(id, batch.first, &batch.blocks)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                write_err = Some(ImportError::internal("the import was removed as stale"));
                break;
            }
            Err(e) => {
                write_err = Some(e.into());
                break;
            }
        }
    }
    // Closing the channel stops a parser still running (its next send fails).
    drop(rx);
    let parsed = parser
        .await
        .map_err(|e| ImportError::internal(format!("parsing task: {e}")))?;
    if let Some(e) = write_err {
        return Err(e);
    }
    let (columns, rows) = parsed?;
    if rows == 0 {
        return Err(ImportError::invalid("no rows: the file holds no data rows"));
    }
    Ok((columns, rows))
}

/// What one import may write.
#[derive(Debug, Clone, Copy)]
struct SinkLimits {
    /// Largest row as JSON (`None`: no limit).
    max_row_bytes: Option<usize>,
    max_rows: u64,
    /// All rows as JSON.
    max_bytes: u64,
    /// The bound on the rows' size relative to the file's (`None`: no file).
    max_decoded: Option<DecodedBound>,
    /// What the owner's quotas leave for this dataset.
    key: KeyQuota,
}

/// `datasets.max_rows_per_key` and `datasets.max_bytes_per_key`, as they apply to one import.
#[derive(Debug, Clone, Copy)]
struct KeyQuota {
    rows_left: u64,
    bytes_left: u64,
    rows_used: u64,
    bytes_used: u64,
    max_rows: u64,
    max_bytes: u64,
}

/// `403 quota_exceeded` before an import starts: the owner's datasets hold `rows` and `bytes`.
fn quota_error(limits: &DatasetLimits, rows: u64, bytes: u64) -> ImportError {
    ImportError::quota(format!(
        "this key's datasets hold {rows} rows and {bytes} bytes, and may hold at most {} rows \
         (datasets.max_rows_per_key) and {} bytes (datasets.max_bytes_per_key); \
         delete datasets to make room",
        limits.max_rows_per_key, limits.max_bytes_per_key
    ))
}

/// Encodes rows into blocks of `BLOCK_ROWS` (the UTF-8 bytes of a JSON array) and sends them
/// to the writer in batches.
struct BlockSink {
    tx: mpsc::Sender<Batch>,
    /// The block being filled.
    block: Vec<u8>,
    rows_in_block: u64,
    /// Full blocks not sent yet, the first being block `first`.
    batch: Vec<Vec<u8>>,
    batch_bytes: usize,
    first: u64,
    rows: u64,
    /// Bytes of rows encoded so far.
    bytes: u64,
    limits: SinkLimits,
}

impl BlockSink {
    fn new(tx: mpsc::Sender<Batch>, limits: SinkLimits) -> Self {
        Self {
            tx,
            limits,
            bytes: 0,
            block: Vec::new(),
            rows_in_block: 0,
            batch: Vec::new(),
            batch_bytes: 0,
            first: 0,
            rows: 0,
        }
    }

    fn close_block(&mut self) {
        self.block.push(b']');
        self.batch_bytes += self.block.len();
        self.batch.push(std::mem::take(&mut self.block));
        self.rows_in_block = 0;
    }

    fn send(&mut self) -> Result<(), ImportError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let blocks = std::mem::take(&mut self.batch);
        let n = blocks.len() as u64;
        self.tx
            .blocking_send(Batch {
                first: self.first,
                blocks,
            })
            // The writer stopped (and has its own error to report).
            .map_err(|_| ImportError::internal("the dataset writer stopped"))?;
        self.first += n;
        self.batch_bytes = 0;
        Ok(())
    }

    /// Sends what is left; returns the number of rows.
    fn finish(mut self) -> Result<u64, ImportError> {
        if self.rows_in_block > 0 {
            self.close_block();
        }
        self.send()?;
        Ok(self.rows)
    }
}

impl RowSink for BlockSink {
    fn push(&mut self, row: Map<String, Value>) -> Result<(), ImportError> {
        if self.rows >= self.limits.max_rows {
            return Err(ImportError::invalid(format!(
                "the dataset has more than {} rows (datasets.max_rows)",
                self.limits.max_rows
            )));
        }
        self.block
            .push(if self.rows_in_block == 0 { b'[' } else { b',' });
        let start = self.block.len();
        serde_json::to_writer(&mut self.block, &row)
            .map_err(|e| ImportError::internal(format!("encoding a row: {e}")))?;
        let row_bytes = self.block.len() - start;
        if let Some(max) = self.limits.max_row_bytes
            && row_bytes > max
        {
            return Err(ImportError::invalid(format!(
                "row {} is larger than {max} bytes as JSON (datasets.max_row_bytes)",
                self.rows + 1
            )));
        }
        self.bytes += row_bytes as u64;
        let key = self.limits.key;
        if self.rows >= key.rows_left || self.bytes > key.bytes_left {
            return Err(ImportError::quota(format!(
                "this key's datasets would hold more than {} rows (datasets.max_rows_per_key) or \
                 {} bytes (datasets.max_bytes_per_key) by row {}: they held {} rows and {} bytes \
                 before this import; delete datasets to make room",
                key.max_rows,
                key.max_bytes,
                self.rows + 1,
                key.rows_used,
                key.bytes_used
            )));
        }
        if self.bytes > self.limits.max_bytes {
            return Err(ImportError::invalid(format!(
                "the dataset's rows take more than {} bytes as JSON by row {} \
                 (datasets.max_dataset_bytes); a small file can decode to much more than its size",
                self.limits.max_bytes,
                self.rows + 1
            )));
        }
        if let Some(bound) = self.limits.max_decoded
            && self.bytes > bound.bytes
        {
            return Err(ImportError::invalid(format!(
                "the file's rows take more than {} times its {} bytes by row {} \
                 (datasets.max_decoded_ratio): a compressed or dictionary-encoded file that \
                 decodes to that much is refused",
                bound.ratio,
                bound.file_bytes,
                self.rows + 1
            )));
        }
        self.rows_in_block += 1;
        self.rows += 1;
        if self.rows_in_block == BLOCK_ROWS {
            self.close_block();
            if self.batch_bytes >= BATCH_BYTES || self.batch.len() >= BATCH_BLOCKS {
                self.send()?;
            }
        }
        Ok(())
    }
}
