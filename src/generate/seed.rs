//! Seed rows: checking them against `seed_config`, selecting them, and saying which row each
//! record takes. The rows are given inline in the job, or stored as datasets (one, or several
//! read one after the other) that the record runner reads block by block; the plan holds only
//! their columns and sizes, never their rows, so a seed of any size costs O(1) memory here.
//!
//! * `ordered`: record `i` takes selected row `i mod n`.
//! * `shuffle`: records walk the selected rows in a seed-determined order; record `i` is
//!   position `i mod n` of pass `i / n`, and **each pass has its own permutation** (as
//!   DataDesigner reshuffles when its reader runs out). Every row is used once per pass.
//!
//! The permutation is a keyed Feistel network over the next even power of two, cycle-walked
//! into `[0, n)`, so a record's row is computed in O(1) without materialising the shuffle.
//! Shuffling is within the selection, as DataDesigner's `ORDER BY RANDOM()` over the selected
//! range is.

use rand::RngExt;
use serde_json::{Map, Value};

use super::dtypes::{ColumnType, values_type};
use super::rng::{column_rng, mix64, name_hash};
use crate::domain::dataset::{
    ConfigIssue, SamplingStrategy, SeedConfig, SeedSource, SelectionStrategy, codes,
};

/// Stream name of the shuffle keys, so they never coincide with a column's stream.
const SHUFFLE_STREAM: &str = "\u{0}synthgate.seed.shuffle";

/// A seed stored as datasets, as a plan needs it: the fields and the sizes, not the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSeed {
    /// The fields, in the datasets' column order, with the type of their values.
    pub columns: Vec<(String, ColumnType)>,
    /// Each dataset's row count, in reading order (their rows are concatenated).
    pub num_rows: Vec<u64>,
}

/// Where the seed row of a record is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SeedRow<'a> {
    /// A row given inline in the job.
    Inline(&'a Map<String, Value>),
    /// Row `row` (0-based) of the `part`-th dataset of the [`StoredSeed`].
    Stored {
        /// Index into [`StoredSeed::num_rows`] (and the job's bound dataset ids).
        part: usize,
        /// The row within that dataset.
        row: u64,
    },
}

/// The seed of a plan: its rows or where they are, and which of them records walk.
#[derive(Debug)]
pub(crate) struct SeedRows {
    data: SeedData,
    /// First selected row.
    start: u64,
    /// Number of selected rows (at least 1).
    len: u64,
    shuffle: bool,
    seed: u64,
    stream: u128,
}

#[derive(Debug)]
enum SeedData {
    Inline(Vec<Map<String, Value>>),
    Stored {
        columns: Vec<(String, ColumnType)>,
        /// Cumulative row counts: dataset `p` holds global rows `ends[p-1]..ends[p]`.
        ends: Vec<u64>,
    },
}

impl SeedRows {
    /// Where the row of record `index` is.
    pub(crate) fn row(&self, index: u64) -> SeedRow<'_> {
        let n = self.len;
        let pos = index % n;
        let pos = if self.shuffle {
            let mut rng = column_rng(self.seed, index / n, self.stream);
            let keys: [u64; 4] = rng.random();
            permute(pos, n, &keys)
        } else {
            pos
        };
        let global = self.start + pos;
        match &self.data {
            // `global < rows.len()` always holds; the clamp only avoids a panic path.
            SeedData::Inline(rows) => {
                SeedRow::Inline(&rows[usize::try_from(global).unwrap_or(0).min(rows.len() - 1)])
            }
            SeedData::Stored { ends, .. } => {
                let part = ends.partition_point(|&end| end <= global);
                let before = part.checked_sub(1).map_or(0, |p| ends[p]);
                SeedRow::Stored {
                    part,
                    row: global - before,
                }
            }
        }
    }

    /// The type of `field`'s values: the stored column's, or inferred from the inline rows.
    pub(crate) fn field_type(&self, field: &str) -> ColumnType {
        match &self.data {
            SeedData::Inline(rows) => values_type(
                rows.iter()
                    .filter_map(|r| r.get(field))
                    .filter(|v| !v.is_null()),
            ),
            SeedData::Stored { columns, .. } => columns
                .iter()
                .find(|(name, _)| name == field)
                .map_or(ColumnType::Text, |(_, ty)| *ty),
        }
    }

    /// The field names, in the first row's (or the stored columns') order.
    pub(crate) fn keys(&self) -> Vec<String> {
        match &self.data {
            SeedData::Inline(rows) => rows
                .first()
                .map(|r| r.keys().cloned().collect())
                .unwrap_or_default(),
            SeedData::Stored { columns, .. } => columns.iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    /// Whether the rows come from stored datasets.
    pub(crate) fn is_stored(&self) -> bool {
        matches!(self.data, SeedData::Stored { .. })
    }
}

/// Checks `config` and selects its rows: the inline ones, or `stored` for any other source
/// (resolved by the caller). Issues use `seed_config.*` field paths.
pub(crate) fn compile(
    config: &SeedConfig,
    seed: u64,
    stored: Option<&StoredSeed>,
    out: &mut Vec<ConfigIssue>,
) -> Option<SeedRows> {
    let mut bad = |field: &str, msg: String| {
        out.push(ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            field,
            msg,
        ));
    };
    let data = match (&config.source, stored) {
        (SeedSource::Inline { rows }, _) => SeedData::Inline(inline_rows(rows, &mut bad)?),
        (SeedSource::Other { seed_type }, _) => {
            bad_source(seed_type, out);
            return None;
        }
        (_, Some(stored)) => {
            let mut ends = Vec::with_capacity(stored.num_rows.len());
            let mut total = 0u64;
            for n in &stored.num_rows {
                total = total.saturating_add(*n);
                ends.push(total);
            }
            if total == 0 {
                bad("seed_config.source", "the seed dataset has no rows".into());
                return None;
            }
            SeedData::Stored {
                columns: stored.columns.clone(),
                ends,
            }
        }
        (other, None) => {
            bad_source(seed_type(other), out);
            return None;
        }
    };
    let n = match &data {
        SeedData::Inline(rows) => rows.len() as u64,
        SeedData::Stored { ends, .. } => ends.last().copied().unwrap_or(0),
    };
    let (start, end) = select(config.selection_strategy, n, &mut bad)?;
    Some(SeedRows {
        data,
        start,
        len: end - start + 1,
        shuffle: config.sampling_strategy == SamplingStrategy::Shuffle,
        seed,
        stream: name_hash(SHUFFLE_STREAM),
    })
}

/// The `seed_type` of a source, as the config names it.
pub(crate) fn seed_type(source: &SeedSource) -> &str {
    match source {
        SeedSource::Inline { .. } => "inline",
        SeedSource::Local { .. } => "local",
        SeedSource::Hf { .. } => "hf",
        SeedSource::Directory(_) => "directory",
        SeedSource::FileContents { .. } => "file_contents",
        SeedSource::Datastore { .. } => "datastore",
        SeedSource::AgentRollout { .. } => "agent_rollout",
        SeedSource::Other { seed_type } => seed_type,
    }
}

/// A source nothing resolved: `df`, or a file source compiled without its
/// datasets (which submit never does: it resolves them first).
fn bad_source(seed_type: &str, out: &mut Vec<ConfigIssue>) {
    let msg = format!(
        "seed_type '{seed_type}' is not supported here; give the rows inline \
         (seed_config.source = {{seed_type: inline, rows: [...]}}) or upload them as a dataset \
         and name its file with seed_type 'local'"
    );
    out.push(ConfigIssue::at_field(
        codes::UNSUPPORTED_SEED_SOURCE,
        "seed_config.source.seed_type",
        msg,
    ));
}

/// Inline rows, checked: at least one, each an object, all with the same keys.
fn inline_rows(
    rows: &[Value],
    bad: &mut impl FnMut(&str, String),
) -> Option<Vec<Map<String, Value>>> {
    if rows.is_empty() {
        bad(
            "seed_config.source.rows",
            "must contain at least one row".into(),
        );
        return None;
    }
    let mut objects = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let field = format!("seed_config.source.rows[{i}]");
        let Value::Object(obj) = row else {
            bad(&field, "each row must be an object of column values".into());
            continue;
        };
        if let Some(first) = objects
            .first()
            .map(|f: &Map<String, Value>| f.keys().collect::<Vec<_>>())
            && (first.len() != obj.len() || first.iter().any(|k| !obj.contains_key(*k)))
        {
            let keys = |ks: Vec<&String>| {
                ks.into_iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let msg = format!(
                "row {i} has keys [{}] but row 0 has [{}]; all rows need the same keys",
                keys(obj.keys().collect()),
                keys(first)
            );
            bad(&field, msg);
            continue;
        }
        objects.push(obj.clone());
    }
    (objects.len() == rows.len()).then_some(objects)
}

/// The selected rows `start..=end` of `n` (`n >= 1`), with DataDesigner's checks and its
/// `PartitionBlock.to_index_range` arithmetic (the last partition takes the remainder).
fn select(
    strategy: Option<SelectionStrategy>,
    n: u64,
    bad: &mut impl FnMut(&str, String),
) -> Option<(u64, u64)> {
    let field = "seed_config.selection_strategy";
    match strategy {
        None => Some((0, n - 1)),
        Some(SelectionStrategy::IndexRange { start, end }) => {
            if start > end {
                bad(
                    field,
                    format!(
                        "'start' index ({start}) must be less than or equal to 'end' index ({end})"
                    ),
                );
                return None;
            }
            if end >= n {
                bad(
                    field,
                    format!(
                        "Selection strategy 'end' index {end} is out of bounds for dataset size {n}"
                    ),
                );
                return None;
            }
            Some((start, end))
        }
        Some(SelectionStrategy::PartitionBlock {
            index,
            num_partitions,
        }) => {
            if num_partitions == 0 || index >= num_partitions {
                bad(
                    field,
                    format!(
                        "'index' ({index}) must be less than 'num_partitions' ({num_partitions})"
                    ),
                );
                return None;
            }
            if num_partitions > n {
                bad(
                    field,
                    format!(
                        "Selection strategy 'num_partitions' {num_partitions} is out of bounds for dataset size {n}"
                    ),
                );
                return None;
            }
            let size = n / num_partitions;
            let start = index * size;
            let end = if index == num_partitions - 1 {
                n - 1
            } else {
                (index + 1) * size - 1
            };
            Some((start, end))
        }
    }
}

/// A keyed permutation of `[0, n)` (4-round Feistel network with cycle walking).
fn permute(pos: u64, n: u64, keys: &[u64; 4]) -> u64 {
    if n <= 1 {
        return 0;
    }
    let bits = 64 - (n - 1).leading_zeros();
    let half = bits.div_ceil(2);
    let mask = (1u64 << half) - 1;
    let mut x = pos;
    // The network permutes [0, 2^(2·half)) ⊇ [0, n), so walking from a point inside [0, n)
    // returns inside it; the domain is < 4n, so this takes a few rounds on average.
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        for k in keys {
            let f = mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 5, 17, 100, 1000] {
            let keys = [1, 2, 3, 4];
            let mut seen: Vec<u64> = (0..n).map(|i| permute(i, n, &keys)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    fn stored(sel: Option<SelectionStrategy>, shuffle: bool, parts: &[u64]) -> SeedRows {
        let config = SeedConfig {
            source: SeedSource::Local {
                path: "x.csv".into(),
            },
            sampling_strategy: if shuffle {
                SamplingStrategy::Shuffle
            } else {
                SamplingStrategy::Ordered
            },
            selection_strategy: sel,
        };
        let seed = StoredSeed {
            columns: vec![("a".into(), ColumnType::Int)],
            num_rows: parts.to_vec(),
        };
        let mut out = Vec::new();
        let rows = compile(&config, 7, Some(&seed), &mut out);
        assert!(out.is_empty(), "{out:?}");
        rows.unwrap()
    }

    /// The global row a record takes, from its (part, row) and the parts' sizes.
    fn global(rows: &SeedRows, index: u64, parts: &[u64]) -> u64 {
        match rows.row(index) {
            SeedRow::Stored { part, row } => {
                assert!(row < parts[part], "row {row} beyond part {part}");
                parts[..part].iter().sum::<u64>() + row
            }
            SeedRow::Inline(_) => panic!("inline"),
        }
    }

    #[test]
    fn stored_rows_map_across_concatenated_datasets() {
        let parts = [3, 1, 4];
        let rows = stored(None, false, &parts);
        let got: Vec<u64> = (0..10).map(|i| global(&rows, i, &parts)).collect();
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
        assert_eq!(rows.row(3), SeedRow::Stored { part: 1, row: 0 });
        assert_eq!(rows.row(4), SeedRow::Stored { part: 2, row: 0 });
    }

    #[test]
    fn selections_follow_datadesigner() {
        let parts = [1_000_000];
        let range = stored(
            Some(SelectionStrategy::IndexRange {
                start: 999_990,
                end: 999_999,
            }),
            false,
            &parts,
        );
        let got: Vec<u64> = (0..12).map(|i| global(&range, i, &parts)).collect();
        let want: Vec<u64> = (999_990..1_000_000).chain([999_990, 999_991]).collect();
        assert_eq!(got, want);
        // 10 rows in 3 partitions: sizes 3, 3 and the remainder 4.
        let parts = [10];
        for (index, want) in [
            (0, vec![0, 1, 2]),
            (1, vec![3, 4, 5]),
            (2, vec![6, 7, 8, 9]),
        ] {
            let p = stored(
                Some(SelectionStrategy::PartitionBlock {
                    index,
                    num_partitions: 3,
                }),
                false,
                &parts,
            );
            let got: Vec<u64> = (0..want.len() as u64)
                .map(|i| global(&p, i, &parts))
                .collect();
            assert_eq!(got, want, "partition {index}");
        }
        // Shuffled within the selection: each pass is a permutation of exactly those rows.
        let p = stored(
            Some(SelectionStrategy::PartitionBlock {
                index: 1,
                num_partitions: 2,
            }),
            true,
            &[3, 7],
        );
        for pass in 0..3u64 {
            let mut got: Vec<u64> = (pass * 5..pass * 5 + 5)
                .map(|i| global(&p, i, &[3, 7]))
                .collect();
            got.sort_unstable();
            assert_eq!(got, [5, 6, 7, 8, 9], "pass {pass}");
        }
    }

    #[test]
    fn selections_out_of_bounds_are_refused_as_datadesigner_words_them() {
        let config = |sel| SeedConfig {
            source: SeedSource::Local {
                path: "x.csv".into(),
            },
            sampling_strategy: SamplingStrategy::Ordered,
            selection_strategy: Some(sel),
        };
        let seed = StoredSeed {
            columns: vec![("a".into(), ColumnType::Int)],
            num_rows: vec![4, 1],
        };
        for (sel, want) in [
            (
                SelectionStrategy::IndexRange { start: 0, end: 5 },
                "Selection strategy 'end' index 5 is out of bounds for dataset size 5",
            ),
            (
                SelectionStrategy::PartitionBlock {
                    index: 0,
                    num_partitions: 6,
                },
                "Selection strategy 'num_partitions' 6 is out of bounds for dataset size 5",
            ),
        ] {
            let mut out = Vec::new();
            assert!(compile(&config(sel), 1, Some(&seed), &mut out).is_none());
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].code, codes::INVALID_SEED_CONFIG);
            assert!(out[0].message.ends_with(want), "{}", out[0].message);
        }
    }

    #[test]
    fn permutation_depends_on_keys() {
        let a: Vec<u64> = (0..50).map(|i| permute(i, 50, &[1, 2, 3, 4])).collect();
        let b: Vec<u64> = (0..50).map(|i| permute(i, 50, &[5, 6, 7, 8])).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
    }
}
