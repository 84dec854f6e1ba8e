//! The `datasets:` section: uploads and imports of stored datasets (seed files), and the
//! server-side sources a seed may be read from. A job never names a server path outside
//! `seed_dirs`, a Hub endpoint other than `hf.endpoint`, or a token: those come from here.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

/// The seed block cache's size when the server config does not set one: blocks of seed rows
/// kept in memory per process, shared by every job.
pub const DEFAULT_SEED_CACHE_BYTES: u64 = 8 << 20;

/// Decoded rows up to this many bytes are never refused for their ratio to the file's size
/// (`datasets.max_decoded_ratio`): small files of short values legitimately decode to many
/// times their size as JSON.
pub const DECODED_RATIO_FLOOR: u64 = 64 << 20;

/// Bounds on what a dataset file may hold, from the server config (`datasets:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetLimits {
    /// Longest row (CSV record, JSONL line) in bytes. Bounds the importer's memory: a block
    /// holds `BLOCK_ROWS` rows (`domain::stored_dataset`).
    pub max_row_bytes: usize,
    /// Most columns a dataset may have.
    pub max_columns: usize,
    /// Most rows a dataset may have.
    pub max_rows: u64,
    /// Most bytes a dataset's rows may take as JSON, as stored. A small file can decode to
    /// far more (a dictionary-encoded Parquet column repeats one value: 10 KB became 4 GB),
    /// so the decoded size is bounded, not only the file's.
    pub max_dataset_bytes: u64,
    /// Most times its own size a file's rows may take as stored, once they take more than
    /// [`DECODED_RATIO_FLOOR`]: a 1.4 KB Parquet file wrote 2 GB of rows before
    /// `max_dataset_bytes` stopped it.
    pub max_decoded_ratio: u64,
    /// Most rows all of one key's datasets may hold together.
    pub max_rows_per_key: u64,
    /// Most bytes all of one key's datasets may take together, as stored: one key cannot fill
    /// the disk.
    pub max_bytes_per_key: u64,
    /// An `importing` dataset with no block written for this long belongs to an import that
    /// died; the next import deletes it.
    pub import_idle_timeout: Duration,
    /// The child process that decodes files (`datasets::decoder`).
    pub decoder: DecoderLimits,
}

/// What the dataset decoder process may use (`datasets::decoder`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderLimits {
    /// The program run as the decoder; `None`: this executable.
    pub program: Option<PathBuf>,
    /// Its memory (heap, anonymous mappings, stacks), in bytes: an allocation past it ends the
    /// decoder, not the service.
    pub memory_bytes: u64,
    /// Its CPU time, in seconds.
    pub cpu_sec: u64,
}

impl Default for DecoderLimits {
    fn default() -> Self {
        Self {
            program: None,
            memory_bytes: 1 << 30,
            cpu_sec: 600,
        }
    }
}

impl Default for DatasetLimits {
    fn default() -> Self {
        Self {
            max_row_bytes: 1024 * 1024,
            max_columns: 1_000,
            max_rows: 10_000_000,
            max_dataset_bytes: 2 << 30,
            max_decoded_ratio: 100,
            max_rows_per_key: 100_000_000,
            max_bytes_per_key: 20 << 30,
            import_idle_timeout: Duration::from_secs(300),
            decoder: DecoderLimits::default(),
        }
    }
}

/// Limits and places for stored datasets, and the server-side seed sources.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatasetsConfig {
    /// Largest dataset file accepted, in bytes: `POST /v1/datasets` (413 `dataset_too_large`),
    /// a server seed file or a Hub download (422 `seed_source_too_large`). Uploads are exempt
    /// from `server.max_body_bytes`: they stream to disk.
    pub max_upload_bytes: u64,
    /// Longest row (CSV record, JSONL line, a Parquet row as JSON) in bytes. The importer
    /// holds a block of 256 rows, so this bounds its memory.
    pub max_row_bytes: usize,
    /// Most columns a dataset may have.
    pub max_columns: usize,
    /// Most rows a dataset may have.
    pub max_rows: u64,
    /// Most bytes a dataset's rows may take once decoded (as stored, JSON): a compressed or
    /// dictionary-encoded file can be far smaller than its rows.
    pub max_dataset_bytes: u64,
    /// Most times its own size a file's rows may take once decoded (as stored), past 64 MiB
    /// of rows: a decompression bomb is refused after 64 MiB, not at `max_dataset_bytes`.
    pub max_decoded_ratio: u64,
    /// Most rows all of one key's datasets may hold together (`403 quota_exceeded` past it).
    pub max_rows_per_key: u64,
    /// Most bytes all of one key's datasets may take together, as stored JSON (`403
    /// quota_exceeded` past it): one key cannot fill the database's disk.
    pub max_bytes_per_key: u64,
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
    /// Memory of the process that decodes a dataset file (heap and stacks), in MiB. Files are decoded
    /// in a child process of their own (the same executable), so a file that makes its
    /// decoder allocate past this, overflow its stack or spin fails its import, nothing else.
    pub decoder_memory_mib: u64,
    /// CPU time the decoder process may use for one file, in seconds.
    pub decoder_cpu_sec: u64,
    /// The program started to decode files: this executable when absent. Set it only where
    /// the service runs inside another program (tests, an embedding).
    pub decoder_program: Option<PathBuf>,
    /// Bytes of seed rows kept in memory per process: blocks of stored datasets, shared by
    /// every job (a record reads its row from a cached block, or the block from the database).
    /// 0 keeps none (every record reads its block).
    pub seed_cache_bytes: u64,
    /// Directories whose files `local`, `directory` and `file_contents` seeds may read. A
    /// relative seed path is looked up in each, in order; an absolute one must lie inside one;
    /// nothing outside them is read, whatever `..` or symlinks say. Empty (the default): no
    /// server file is read.
    pub seed_dirs: Vec<PathBuf>,
    /// Most files one seed may match: a `directory`/`file_contents` listing, or a `local` or
    /// `hf` glob.
    pub max_seed_files: usize,
    /// Most bytes a `file_contents` seed may read, over all its files.
    pub max_seed_bytes: u64,
    /// The Hugging Face Hub, for `hf` seeds.
    pub hf: HfConfig,
}

impl Default for DatasetsConfig {
    fn default() -> Self {
        let limits = DatasetLimits::default();
        Self {
            max_upload_bytes: 1024 * 1024 * 1024,
            max_row_bytes: limits.max_row_bytes,
            max_columns: limits.max_columns,
            max_rows: limits.max_rows,
            max_dataset_bytes: limits.max_dataset_bytes,
            max_decoded_ratio: limits.max_decoded_ratio,
            max_rows_per_key: limits.max_rows_per_key,
            max_bytes_per_key: limits.max_bytes_per_key,
            upload_dir: None,
            upload_idle_timeout_sec: 60,
            import_idle_timeout_sec: limits.import_idle_timeout.as_secs(),
            decoder_memory_mib: limits.decoder.memory_bytes >> 20,
            decoder_cpu_sec: limits.decoder.cpu_sec,
            decoder_program: None,
            seed_cache_bytes: DEFAULT_SEED_CACHE_BYTES,
            seed_dirs: Vec::new(),
            max_seed_files: 10_000,
            max_seed_bytes: 64 * 1024 * 1024,
            hf: HfConfig::default(),
        }
    }
}

/// Where `hf` seeds come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HfConfig {
    /// Whether `hf` seeds are served at all (off for a server without Internet access).
    pub enabled: bool,
    /// The Hub's base URL. A job's `endpoint` must be this one (DataDesigner's default is
    /// `https://huggingface.co`).
    pub endpoint: String,
    /// Name of the environment variable holding the Hub token (for private and gated
    /// repositories). Checked at start-up: a named variable that is not set stops it.
    pub token_env: Option<String>,
    /// The token itself, for configs that substitute it (`token: ${HF_TOKEN}`); `token_env`
    /// wins when both are set.
    pub token: Option<SecretString>,
    /// Longest one Hub request may take, download included, in seconds.
    pub timeout_sec: u64,
    /// Hosts (and their subdomains) the Hub may redirect a request to, over https: its
    /// storage; or whole origins (`https://storage.example:8443`). Redirects to the endpoint's
    /// own origin are always followed, to anywhere else never (an internal address, say).
    pub redirect_hosts: Vec<String>,
}

impl Default for HfConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            endpoint: "https://huggingface.co".into(),
            token_env: None,
            token: None,
            timeout_sec: 300,
            redirect_hosts: vec!["hf.co".into(), "huggingface.co".into()],
        }
    }
}

impl DatasetsConfig {
    /// The importer's limits.
    pub fn limits(&self) -> DatasetLimits {
        DatasetLimits {
            max_row_bytes: self.max_row_bytes,
            max_columns: self.max_columns,
            max_rows: self.max_rows,
            max_dataset_bytes: self.max_dataset_bytes,
            max_decoded_ratio: self.max_decoded_ratio,
            max_rows_per_key: self.max_rows_per_key,
            max_bytes_per_key: self.max_bytes_per_key,
            import_idle_timeout: Duration::from_secs(self.import_idle_timeout_sec),
            decoder: DecoderLimits {
                program: self.decoder_program.clone(),
                memory_bytes: self.decoder_memory_mib.saturating_mul(1 << 20),
                cpu_sec: self.decoder_cpu_sec,
            },
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
        if self.max_rows == 0 {
            out.push("config key `datasets.max_rows`: must be at least 1".into());
        }
        if self.max_dataset_bytes < 1024 {
            out.push("config key `datasets.max_dataset_bytes`: must be at least 1024".into());
        }
        if self.max_rows_per_key == 0 {
            out.push("config key `datasets.max_rows_per_key`: must be at least 1".into());
        }
        if self.max_bytes_per_key < 1024 {
            out.push("config key `datasets.max_bytes_per_key`: must be at least 1024".into());
        }
        if !(1..=1_000_000).contains(&self.max_decoded_ratio) {
            out.push("config key `datasets.max_decoded_ratio`: must be from 1 to 1000000".into());
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
        if self.decoder_memory_mib < 64 {
            // The decoding thread's stack, its buffers and the allocator's first arenas.
            out.push("config key `datasets.decoder_memory_mib`: must be at least 64".into());
        }
        if self.decoder_cpu_sec == 0 {
            out.push("config key `datasets.decoder_cpu_sec`: must be at least 1".into());
        }
        if let Some(p) = &self.decoder_program
            && !p.is_file()
        {
            out.push(format!(
                "config key `datasets.decoder_program`: '{}' is not a file",
                p.display()
            ));
        }
        if self.max_seed_files == 0 {
            out.push("config key `datasets.max_seed_files`: must be at least 1".into());
        }
        for (i, d) in self.seed_dirs.iter().enumerate() {
            if d.as_os_str().is_empty() {
                out.push(format!(
                    "config key `datasets.seed_dirs[{i}]`: must not be empty"
                ));
            } else if !d.is_dir() {
                out.push(format!(
                    "config key `datasets.seed_dirs[{i}]`: '{}' is not a directory",
                    d.display()
                ));
            }
        }
        if super::http_url(&self.hf.endpoint).is_none() {
            out.push(format!(
                "config key `datasets.hf.endpoint`: '{}' is not an http(s) URL",
                self.hf.endpoint
            ));
        }
        let max = crate::domain::models::MAX_TIMEOUT_SEC;
        if self.hf.timeout_sec == 0 || self.hf.timeout_sec > max {
            out.push(format!(
                "config key `datasets.hf.timeout_sec`: must be between 1 and {max}"
            ));
        }
    }

    /// The environment problems: a `hf.token_env` naming a variable that is unset or empty.
    pub(super) fn env_problems(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
        out: &mut Vec<String>,
    ) {
        if let Some(var) = &self.hf.token_env
            && lookup(var).is_none_or(|v| v.is_empty())
        {
            out.push(format!(
                "config key `datasets.hf.token_env`: environment variable `{var}` is not set"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_source_problems_name_the_key() {
        let mut out = Vec::new();
        DatasetsConfig::default().problems(&mut out);
        assert!(out.is_empty(), "{out:?}");
        let bad = DatasetsConfig {
            seed_dirs: vec![PathBuf::from("/no/such/dir/anywhere")],
            max_seed_files: 0,
            hf: HfConfig {
                endpoint: "ftp://x".into(),
                timeout_sec: 0,
                token_env: Some("SYNTHGATE_TEST_NO_SUCH_VAR".into()),
                ..HfConfig::default()
            },
            ..DatasetsConfig::default()
        };
        bad.problems(&mut out);
        bad.env_problems(&|_| None, &mut out);
        let keys = [
            "datasets.max_seed_files",
            "datasets.seed_dirs[0]",
            "datasets.hf.endpoint",
            "datasets.hf.timeout_sec",
            "datasets.hf.token_env",
        ];
        assert_eq!(out.len(), keys.len(), "{out:?}");
        for (line, key) in out.iter().zip(keys) {
            assert!(line.contains(&format!("`{key}`")), "{line}");
        }
        let mut none = Vec::new();
        bad.env_problems(&|_| Some("hf_x".into()), &mut none);
        assert!(none.is_empty());
    }
}
