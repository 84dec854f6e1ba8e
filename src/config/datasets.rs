//! The `datasets:` section: uploads and imports of stored datasets (seed files).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::datasets::DatasetLimits;

/// Limits and places for stored datasets.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatasetsConfig {
    /// Largest dataset file `POST /v1/datasets` accepts, in bytes (413 `dataset_too_large`).
    /// Uploads are exempt from `server.max_body_bytes`: they stream to disk.
    pub max_upload_bytes: u64,
    /// Longest row (CSV record, JSONL line, a Parquet row as JSON) in bytes. The importer
    /// holds a block of 256 rows, so this bounds its memory.
    pub max_row_bytes: usize,
    /// Most columns a dataset may have.
    pub max_columns: usize,
    /// Where uploads are spooled while they arrive and are parsed (deleted after); the
    /// system's temporary directory when absent. Needs room for `max_upload_bytes` per
    /// concurrent upload.
    pub upload_dir: Option<PathBuf>,
    /// An upload is exempt from `server.request_timeout_sec` (a large file on a slow link
    /// takes as long as it takes); instead it fails with 408 when no byte arrives for this
    /// long.
    pub upload_idle_timeout_sec: u64,
    /// An import that wrote nothing for this long died with its process; its rows are
    /// deleted at start-up and by later imports.
    pub import_idle_timeout_sec: u64,
    /// Bytes of seed rows kept in memory per process: blocks of stored datasets, shared by
    /// every job (a record reads its row from a cached block, or the block from the
    /// database). 0 keeps none (every record reads its block).
    pub seed_cache_bytes: u64,
}

impl Default for DatasetsConfig {
    fn default() -> Self {
        let limits = DatasetLimits::default();
        Self {
            max_upload_bytes: 1024 * 1024 * 1024,
            max_row_bytes: limits.max_row_bytes,
            max_columns: limits.max_columns,
            upload_dir: None,
            upload_idle_timeout_sec: 60,
            import_idle_timeout_sec: limits.import_idle_timeout.as_secs(),
            seed_cache_bytes: crate::jobs::DEFAULT_SEED_CACHE_BYTES,
        }
    }
}

impl DatasetsConfig {
    /// The importer's limits.
    pub fn limits(&self) -> DatasetLimits {
        DatasetLimits {
            max_row_bytes: self.max_row_bytes,
            max_columns: self.max_columns,
            import_idle_timeout: Duration::from_secs(self.import_idle_timeout_sec),
        }
    }

    /// Where uploads are spooled.
    pub fn upload_dir(&self) -> PathBuf {
        self.upload_dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.max_upload_bytes == 0 {
            out.push("config key `datasets.max_upload_bytes`: must be at least 1".into());
        }
        if self.max_row_bytes < 1024 {
            out.push("config key `datasets.max_row_bytes`: must be at least 1024".into());
        }
        if self.max_columns == 0 {
            out.push("config key `datasets.max_columns`: must be at least 1".into());
        }
        if self.upload_idle_timeout_sec == 0 {
            out.push("config key `datasets.upload_idle_timeout_sec`: must be at least 1".into());
        }
        if self.import_idle_timeout_sec < 10 {
            // Shorter than the gap between two block writes of a busy import.
            out.push("config key `datasets.import_idle_timeout_sec`: must be at least 10".into());
        }
    }
}
