//! `seed_config` (`data_designer.config.seed`): where seed rows come from and how records
//! pick them.
//!
//! DataDesigner reads seeds from files, Hugging Face or DataFrames; synthgate takes the rows
//! inline (`source: {seed_type: inline, rows: [...]}`). Other sources parse, so the message
//! can say what to do instead, and are rejected at compile as `unsupported_seed_source`.

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
    /// Any other `seed_type` (`local`, `hf`, `df`, `directory`, ...).
    Other {
        /// The `seed_type` given.
        seed_type: String,
    },
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
    source: Value,
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
    let seed_type = match de.source.get("seed_type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            fail(
                "source.seed_type",
                format!("invalid type: {}, expected a string", json_kind(other)),
            );
            return None;
        }
        None if de.source.is_object() => {
            fail("source.seed_type", "missing field `seed_type`".into());
            return None;
        }
        None => {
            let msg = format!(
                "invalid type: {}, expected an object",
                json_kind(&de.source)
            );
            fail("source", msg);
            return None;
        }
    };
    let source = if seed_type == "inline" {
        match deserialize_at::<InlineDe>(&de.source) {
            Ok(inline) => SeedSource::Inline { rows: inline.rows },
            Err((path, msg)) => {
                fail(&join_path("source", &path), msg);
                return None;
            }
        }
    } else {
        SeedSource::Other { seed_type }
    };
    let selection_strategy = match de.selection_strategy {
        None | Some(Value::Null) => None,
        Some(sel) => Some(
            parse_selection(&sel)
                .map_err(|(p, m)| {
                    fail(&join_path("selection_strategy", &p), m);
                })
                .ok()?,
        ),
    };
    Some(SeedConfig {
        source,
        sampling_strategy: de.sampling_strategy,
        selection_strategy,
    })
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
