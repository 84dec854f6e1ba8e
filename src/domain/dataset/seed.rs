//! `seed_config` (`data_designer.config.seed`): where seed rows come from and how records
//! pick them.
//!
//! DataDesigner reads seeds from files (`local`), the Hugging Face Hub (`hf`), folders
//! (`directory`, `file_contents`) or DataFrames; synthgate also takes the rows inline
//! (`source: {seed_type: inline, rows: [...]}`). The file-backed sources are parsed here with
//! DataDesigner's fields and defaults and resolved to stored datasets at submit (see
//! `crate::datasets`). `agent_rollout` reads the caller's upload of the trajectories' folder.
//! `df` parses as [`SeedSource::Other`], so the message can say what to do instead, and is
//! refused as `unsupported_seed_source`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ConfigIssue;
use super::issues::{codes, deserialize_at, join_path};
use super::sampler_params::json_kind;

/// DataDesigner's `SeedConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedConfig {
    /// The rows, or the unsupported source that was named.
    pub source: SeedSource,
    /// `ordered` (default) or `shuffle`.
    pub sampling_strategy: SamplingStrategy,
    /// Which rows to use: all, an index range, or a partition.
    pub selection_strategy: Option<SelectionStrategy>,
}

/// The seed source.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedSource {
    /// Rows given in the job. Checked at compile: non-empty objects with the same keys.
    Inline {
        /// The rows as given.
        rows: Vec<Value>,
    },
    /// `local`: a CSV, JSONL or Parquet file, or a glob of them (`data/*.parquet`). Resolved
    /// against the caller's uploaded datasets by file name, then against the server's
    /// allow-listed seed directories.
    Local {
        /// The path as the config gives it.
        path: String,
    },
    /// `hf`: files of a Hugging Face Hub dataset repository
    /// (`datasets/{owner}/{repo}/{file or glob}`).
    Hf {
        /// The path as the config gives it.
        path: String,
        /// A token given in the job, for a private or gated repository: used for this
        /// submit's fetch only, never stored (the stored config holds [`REDACTED_TOKEN`]),
        /// logged or echoed.
        token: Option<SeedToken>,
        /// The endpoint the config names (DataDesigner's default `https://huggingface.co`).
        endpoint: String,
    },
    /// `directory`: one row per matching file (path metadata only).
    Directory(FileSystemSource),
    /// `file_contents`: one row per matching file, with its text in `content`.
    FileContents {
        /// Where the files are and which match.
        files: FileSystemSource,
        /// The files' text encoding (DataDesigner's default `utf-8`).
        encoding: String,
    },
    /// The Data Designer service's seed shape, `seed_config.dataset: "namespace/repo/file"`:
    /// a file (or glob) of one of the caller's seed datastore repositories (`/v1/hf`).
    Datastore {
        /// The string as the config gives it.
        dataset: String,
    },
    /// `agent_rollout`: the rows DataDesigner derives from a folder of agent trajectories,
    /// read from the caller's upload of that folder (`synthgate submit` makes it).
    AgentRollout {
        /// One of [`ROLLOUT_FORMATS`].
        format: String,
        /// The folder as the config writes it; `None`: the format's default folder.
        path: Option<String>,
        /// A pattern over file names; `None`: the format's default.
        file_pattern: Option<String>,
        /// Whether subfolders are read (default true).
        recursive: bool,
    },
    /// Any other `seed_type` (`df`, ...).
    Other {
        /// The `seed_type` given.
        seed_type: String,
    },
}

/// DataDesigner's `AgentRolloutFormat` values.
pub const ROLLOUT_FORMATS: [&str; 5] = [
    "atif",
    "claude_code",
    "codex",
    "hermes_agent",
    "pi_coding_agent",
];

/// DataDesigner's `FileSystemSeedSource` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSystemSource {
    /// The directory, as the config gives it.
    pub path: String,
    /// A case-sensitive pattern over file names (not paths); default `*`.
    pub file_pattern: String,
    /// Whether subdirectories are searched; default true.
    pub recursive: bool,
}

fn star() -> String {
    "*".into()
}

fn yes() -> bool {
    true
}

/// How records walk the selected rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SamplingStrategy {
    /// Record `i` takes row `i mod n`.
    #[default]
    Ordered,
    /// Each pass over the rows uses its own seed-determined permutation.
    Shuffle,
}

/// A token a config gives for its seed source. Its `Debug` shows no secret; equality (for
/// comparing parsed configs) compares the values.
#[derive(Clone)]
pub struct SeedToken(pub secrecy::SecretString);

impl std::fmt::Debug for SeedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeedToken([REDACTED])")
    }
}

impl PartialEq for SeedToken {
    fn eq(&self, other: &Self) -> bool {
        use secrecy::ExposeSecret as _;
        self.0.expose_secret() == other.0.expose_secret()
    }
}

/// What a stored config holds in place of an `hf` seed's token.
pub const REDACTED_TOKEN: &str = "[redacted by synthgate]";

/// Replaces the token of an `hf` seed source in `config` (the job body's config, wrapped in
/// `data_designer` or not) with [`REDACTED_TOKEN`]: run after the seed is resolved, before
/// the config is stored or hashed.
pub fn redact_seed_token(config: &mut Value) {
    let inner = if config.get("data_designer").is_some_and(Value::is_object) {
        &mut config["data_designer"]
    } else {
        config
    };
    if let Some(source) = inner
        .get_mut("seed_config")
        .and_then(|s| s.get_mut("source"))
        .and_then(Value::as_object_mut)
        && source.get("seed_type").and_then(Value::as_str) == Some("hf")
        && source.get("token").is_some_and(Value::is_string)
    {
        source.insert("token".into(), Value::String(REDACTED_TOKEN.into()));
    }
}

/// DataDesigner's `IndexRange | PartitionBlock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectionStrategy {
    /// Rows `start..=end`.
    IndexRange {
        /// First row, inclusive.
        start: u64,
        /// Last row, inclusive.
        end: u64,
    },
    /// Partition `index` of `num_partitions` near-equal blocks (the last takes the rest).
    PartitionBlock {
        /// Zero-based partition index (default 0).
        index: u64,
        /// Number of partitions (default 1).
        num_partitions: u64,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedConfigDe {
    #[serde(default)]
    source: Option<Value>,
    /// The Data Designer service's older shape: a datastore file instead of `source`.
    #[serde(default)]
    dataset: Option<String>,
    #[serde(default)]
    sampling_strategy: SamplingStrategy,
    #[serde(default)]
    selection_strategy: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InlineDe {
    #[expect(
        dead_code,
        reason = "checked before deserializing; kept so the key is allowed"
    )]
    seed_type: String,
    rows: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexRangeDe {
    start: u64,
    end: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionBlockDe {
    #[serde(default)]
    index: u64,
    #[serde(default = "one")]
    num_partitions: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LocalDe {
    #[expect(
        dead_code,
        reason = "checked before deserializing; kept so the key is allowed"
    )]
    seed_type: String,
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HfDe {
    #[expect(
        dead_code,
        reason = "checked before deserializing; kept so the key is allowed"
    )]
    seed_type: String,
    path: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default = "hub_endpoint")]
    endpoint: String,
}

fn hub_endpoint() -> String {
    "https://huggingface.co".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectoryDe {
    #[expect(
        dead_code,
        reason = "checked before deserializing; kept so the key is allowed"
    )]
    seed_type: String,
    path: String,
    #[serde(default = "star")]
    file_pattern: String,
    #[serde(default = "yes")]
    recursive: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentRolloutDe {
    #[expect(
        dead_code,
        reason = "checked before deserializing; kept so the key is allowed"
    )]
    seed_type: String,
    format: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    file_pattern: Option<String>,
    #[serde(default = "yes")]
    recursive: bool,
}

/// An `agent_rollout` source as DataDesigner's `AgentRolloutSeedSource` validates it: a
/// known format, a `path` for ATIF (which has no default folder), a pattern over names.
fn agent_rollout(d: AgentRolloutDe) -> Result<SeedSource, (String, String)> {
    if !ROLLOUT_FORMATS.contains(&d.format.as_str()) {
        return Err((
            "format".into(),
            format!(
                "'{}' is not an agent rollout format; one of: {}",
                d.format,
                ROLLOUT_FORMATS.join(", ")
            ),
        ));
    }
    if d.format == "atif" && d.path.is_none() {
        return Err((
            "path".into(),
            "AgentRolloutSeedSource.path is required for format 'atif'".into(),
        ));
    }
    if let Some(pattern) = &d.file_pattern {
        if pattern.trim().is_empty() {
            return Err((
                "file_pattern".into(),
                "FileSystemSeedSource.file_pattern must be a non-empty string".into(),
            ));
        }
        if pattern.contains(['/', '\\']) {
            return Err((
                "file_pattern".into(),
                "FileSystemSeedSource.file_pattern must match file names, not relative paths"
                    .into(),
            ));
        }
    }
    Ok(SeedSource::AgentRollout {
        format: d.format,
        path: d.path,
        file_pattern: d.file_pattern,
        recursive: d.recursive,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileContentsDe {
    #[expect(
        dead_code,
        reason = "checked before deserializing; kept so the key is allowed"
    )]
    seed_type: String,
    path: String,
    #[serde(default = "star")]
    file_pattern: String,
    #[serde(default = "yes")]
    recursive: bool,
    #[serde(default = "utf8")]
    encoding: String,
}

fn utf8() -> String {
    "utf-8".into()
}

fn one() -> u64 {
    1
}

/// Parses `seed_config` (not null). Issues use field paths under `seed_config`.
pub(crate) fn parse_seed_config(value: &Value, out: &mut Vec<ConfigIssue>) -> Option<SeedConfig> {
    let mut fail = |path: &str, msg: String| {
        let field = join_path("seed_config", path);
        out.push(ConfigIssue::at_field(codes::INVALID_CONFIG, &field, msg));
    };
    let de: SeedConfigDe = match deserialize_at(value) {
        Ok(de) => de,
        Err((path, msg)) => {
            fail(&path, msg);
            return None;
        }
    };
    let source_value = match (de.source, de.dataset) {
        (Some(source), None) => source,
        (None, Some(dataset)) => {
            return Some(SeedConfig {
                source: SeedSource::Datastore { dataset },
                sampling_strategy: de.sampling_strategy,
                selection_strategy: selection(de.selection_strategy, &mut fail)?,
            });
        }
        (Some(_), Some(_)) => {
            fail(
                "dataset",
                "give `source` or `dataset` (a seed datastore file), not both".into(),
            );
            return None;
        }
        (None, None) => {
            fail("source", "missing field `source`".into());
            return None;
        }
    };
    let seed_type = match source_value.get("seed_type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            fail(
                "source.seed_type",
                format!("invalid type: {}, expected a string", json_kind(other)),
            );
            return None;
        }
        None if source_value.is_object() => {
            fail("source.seed_type", "missing field `seed_type`".into());
            return None;
        }
        None => {
            let msg = format!(
                "invalid type: {}, expected an object",
                json_kind(&source_value)
            );
            fail("source", msg);
            return None;
        }
    };
    let parsed = match seed_type.as_str() {
        "inline" => {
            deserialize_at::<InlineDe>(&source_value).map(|d| SeedSource::Inline { rows: d.rows })
        }
        "local" => {
            deserialize_at::<LocalDe>(&source_value).map(|d| SeedSource::Local { path: d.path })
        }
        "hf" => deserialize_at::<HfDe>(&source_value).map(|d| SeedSource::Hf {
            path: d.path,
            token: d.token.map(|t| SeedToken(secrecy::SecretString::from(t))),
            endpoint: d.endpoint,
        }),
        "directory" => deserialize_at::<DirectoryDe>(&source_value).map(|d| {
            SeedSource::Directory(FileSystemSource {
                path: d.path,
                file_pattern: d.file_pattern,
                recursive: d.recursive,
            })
        }),
        "file_contents" => {
            deserialize_at::<FileContentsDe>(&source_value).map(|d| SeedSource::FileContents {
                files: FileSystemSource {
                    path: d.path,
                    file_pattern: d.file_pattern,
                    recursive: d.recursive,
                },
                encoding: d.encoding,
            })
        }
        "agent_rollout" => deserialize_at::<AgentRolloutDe>(&source_value).and_then(agent_rollout),
        _ => Ok(SeedSource::Other { seed_type }),
    };
    let source = match parsed {
        Ok(source) => source,
        Err((path, msg)) => {
            fail(&join_path("source", &path), msg);
            return None;
        }
    };
    let selection_strategy = selection(de.selection_strategy, &mut fail)?;
    Some(SeedConfig {
        source,
        sampling_strategy: de.sampling_strategy,
        selection_strategy,
    })
}

/// `selection_strategy`: `Some(None)` when absent or null, `None` (after `fail`) when bad.
fn selection(
    value: Option<Value>,
    fail: &mut impl FnMut(&str, String),
) -> Option<Option<SelectionStrategy>> {
    match value {
        None | Some(Value::Null) => Some(None),
        Some(sel) => match parse_selection(&sel) {
            Ok(s) => Some(Some(s)),
            Err((p, m)) => {
                fail(&join_path("selection_strategy", &p), m);
                None
            }
        },
    }
}

/// Like pydantic's smart union: an object with `start`/`end` is an `IndexRange`, anything
/// else a `PartitionBlock` (whose fields all have defaults).
fn parse_selection(value: &Value) -> Result<SelectionStrategy, (String, String)> {
    let obj: Option<&Map<String, Value>> = value.as_object();
    let is_range = obj.is_some_and(|o| o.contains_key("start") || o.contains_key("end"));
    if is_range {
        let r: IndexRangeDe = deserialize_at(value)?;
        Ok(SelectionStrategy::IndexRange {
            start: r.start,
            end: r.end,
        })
    } else {
        let p: PartitionBlockDe = deserialize_at(value)?;
        Ok(SelectionStrategy::PartitionBlock {
            index: p.index,
            num_partitions: p.num_partitions,
        })
    }
}
