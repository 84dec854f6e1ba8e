//! Seed rows given inline: checking them against `seed_config`, and choosing the row of each
//! record.
//!
//! * `ordered`: record `i` takes selected row `i mod n`.
//! * `shuffle`: records walk the selected rows in a seed-determined order; record `i` is
//!   position `i mod n` of pass `i / n`, and **each pass has its own permutation** (as
//!   DataDesigner reshuffles when its reader runs out). Every row is used once per pass.
//!
//! The permutation is a keyed Feistel network over the next even power of two, cycle-walked
//! into `[0, n)`, so a record's row is computed in O(1) without materialising the shuffle.

use rand::RngExt;
use serde_json::{Map, Value};

use super::rng::{column_rng, mix64, name_hash};
use crate::domain::dataset::{
    ConfigIssue, SamplingStrategy, SeedConfig, SeedSource, SelectionStrategy, codes,
};

/// Stream name of the shuffle keys, so they never coincide with a column's stream.
const SHUFFLE_STREAM: &str = "\u{0}synthgate.seed.shuffle";

/// The selected seed rows of a plan.
#[derive(Debug)]
pub(crate) struct SeedRows {
    rows: Vec<Map<String, Value>>,
    shuffle: bool,
    seed: u64,
    stream: u128,
}

impl SeedRows {
    /// The row record `index` takes.
    pub(crate) fn row(&self, index: u64) -> &Map<String, Value> {
        let n = self.rows.len() as u64;
        let pos = index % n.max(1);
        let pos = if self.shuffle {
            let mut rng = column_rng(self.seed, index / n.max(1), self.stream);
            let keys: [u64; 4] = rng.random();
            permute(pos, n, &keys)
        } else {
            pos
        };
        // `pos < n` always holds; the fallback only avoids a panic path.
        &self.rows[usize::try_from(pos).unwrap_or(0).min(self.rows.len() - 1)]
    }

    /// The non-null values of `field` across the rows (a missing field is null).
    pub(crate) fn field_values<'a>(&'a self, field: &'a str) -> impl Iterator<Item = &'a Value> {
        self.rows
            .iter()
            .filter_map(move |r| r.get(field))
            .filter(|v| !v.is_null())
    }

    /// The field names of the rows, in the first row's order.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.rows
            .first()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Checks `config` and selects its rows. Issues use `seed_config.*` field paths.
pub(crate) fn compile(
    config: &SeedConfig,
    seed: u64,
    out: &mut Vec<ConfigIssue>,
) -> Option<SeedRows> {
    let rows = match &config.source {
        SeedSource::Inline { rows } => rows,
        other => {
            let seed_type = match other {
                SeedSource::Local { .. } => "local",
                SeedSource::Hf { .. } => "hf",
                SeedSource::Directory(_) => "directory",
                SeedSource::FileContents { .. } => "file_contents",
                SeedSource::Other { seed_type } => seed_type,
                SeedSource::Inline { .. } => "inline",
            };
            let msg = format!(
                "seed_type '{seed_type}' is not supported; synthgate takes seed rows inline: \
                 seed_config.source = {{seed_type: inline, rows: [...]}}"
            );
            out.push(ConfigIssue::at_field(
                codes::UNSUPPORTED_SEED_SOURCE,
                "seed_config.source.seed_type",
                msg,
            ));
            return None;
        }
    };
    let mut bad = |field: String, msg: String| {
        out.push(ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            &field,
            msg,
        ));
    };
    if rows.is_empty() {
        bad(
            "seed_config.source.rows".into(),
            "must contain at least one row".into(),
        );
        return None;
    }
    let mut objects = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let field = format!("seed_config.source.rows[{i}]");
        let Value::Object(obj) = row else {
            bad(field, "each row must be an object of column values".into());
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
            bad(field, msg);
            continue;
        }
        objects.push(obj.clone());
    }
    if objects.len() != rows.len() {
        return None;
    }
    let n = objects.len() as u64;
    let range = match config.selection_strategy {
        None => 0..=n - 1,
        Some(SelectionStrategy::IndexRange { start, end }) => {
            let field = "seed_config.selection_strategy".to_owned();
            if start > end {
                bad(
                    field,
                    format!("'start' ({start}) must be less than or equal to 'end' ({end})"),
                );
                return None;
            }
            if end >= n {
                bad(
                    field,
                    format!("'end' index {end} is out of bounds for {n} seed rows"),
                );
                return None;
            }
            start..=end
        }
        Some(SelectionStrategy::PartitionBlock {
            index,
            num_partitions,
        }) => {
            let field = "seed_config.selection_strategy".to_owned();
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
                    format!("'num_partitions' {num_partitions} is more than the {n} seed rows"),
                );
                return None;
            }
            // DataDesigner's PartitionBlock.to_index_range: the last block takes the remainder.
            let size = n / num_partitions;
            let start = index * size;
            let end = if index == num_partitions - 1 {
                n - 1
            } else {
                (index + 1) * size - 1
            };
            start..=end
        }
    };
    let (start, end) = (*range.start() as usize, *range.end() as usize);
    Some(SeedRows {
        rows: objects.drain(start..=end).collect(),
        shuffle: config.sampling_strategy == SamplingStrategy::Shuffle,
        seed,
        stream: name_hash(SHUFFLE_STREAM),
    })
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

    #[test]
    fn permutation_depends_on_keys() {
        let a: Vec<u64> = (0..50).map(|i| permute(i, 50, &[1, 2, 3, 4])).collect();
        let b: Vec<u64> = (0..50).map(|i| permute(i, 50, &[5, 6, 7, 8])).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
    }
}
