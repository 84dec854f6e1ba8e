//! A dataset's analysis (DataDesigner's `DatasetProfilerResults`, as far as a service can
//! make it): per-column statistics over the completed records, and for each judge-score
//! profiler the score distributions of the `llm-judge` columns. A [`Profiler`] takes the
//! records one at a time: a job's are read one chunk per database round trip, so the answer
//! always describes the stored rows; a preview's are in memory.
//!
//! Memory is bounded whatever the dataset's size: distinct values are counted by 64-bit hash
//! (up to [`MAX_DISTINCT`]), categories for histograms up to [`MAX_COUNTED`] and only values
//! short enough to be a category; only numbers are kept whole (8 bytes a row).
//!
//! Not produced: the judge-score profiler's LLM-written summaries (they need one model call
//! per score after the job, which a read endpoint must not make), and DataDesigner's token
//! statistics per LLM column (DataDesigner counts them with a tokenizer over rendered prompts
//! and values; synthgate counts the tokens its providers report, per model).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::domain::JobId;
use crate::domain::dataset::{ColumnKind, DatasetConfig};
use crate::error::ApiError;
use crate::generate::{ColumnType, Plan};
use crate::store::RecordSelect;

use super::JobService;

/// Records read per database round trip.
const CHUNK: u32 = 500;
/// Distinct values tracked per column; past it `num_unique` is `null` (memory stays bounded).
pub const MAX_DISTINCT: usize = 100_000;
/// Distinct values counted for a histogram; past it, later new values are not counted.
const MAX_COUNTED: usize = 10_000;
/// Longest value (in bytes of its text) counted as a category: longer text is prose, not a
/// category, and is not held.
const MAX_CATEGORY_BYTES: usize = 256;
/// Categories listed in a categorical histogram, most common first.
const MAX_CATEGORIES: usize = 50;

/// `GET /v1/jobs/{id}/analysis`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetAnalysis {
    /// The job.
    #[schema(value_type = uuid::Uuid)]
    pub job_id: JobId,
    /// The statistics.
    #[serde(flatten)]
    pub profile: DatasetProfile,
}

/// What a dataset's records add up to.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetProfile {
    /// Records the job was asked for.
    pub target_num_records: u64,
    /// Completed records analysed (the dataset's rows).
    pub num_records: u64,
    /// One entry per column of the dataset, in order.
    pub column_statistics: Vec<ColumnStatistics>,
    /// One entry per (judge-score profiler, `llm-judge` column).
    pub column_profiles: Vec<JudgeScoreProfile>,
}

/// Statistics of one column (DataDesigner's `*ColumnStatistics`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ColumnStatistics {
    /// The column.
    pub column_name: String,
    /// Its `column_type` (`general` for side columns such as reasoning content).
    pub column_type: String,
    /// The sampler, for sampler columns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampler_type: Option<String>,
    /// Rows with the column.
    pub num_records: u64,
    /// Rows where it is null or missing.
    pub num_null: u64,
    /// Distinct non-null values (`null` past 100,000 distinct values).
    pub num_unique: Option<u64>,
    /// `int`, `float`, `bool`, `str`, `dict`, `list`, or `mixed`.
    pub simple_dtype: String,
    /// `numerical` (every value a number), `categorical` (the values of up to 256 bytes of
    /// text, the first 10,000 distinct ones counted), or `unknown` (no such value: long text).
    pub distribution_type: String,
    /// `{min, max, mean, stddev, median}` or `{most_common_value, least_common_value,
    /// histogram: {categories, counts}}`; `null` when there is no value.
    #[schema(value_type = Option<Object>)]
    pub distribution: Value,
    /// The column's type in the dataset's exports (Parquet), which DataFrames read.
    #[serde(skip)]
    pub export_type: ColumnType,
    /// The categorical distribution even of numbers (`null` when there is no value), for a
    /// caller that decides by the column's kind (DataDesigner's category samplers of
    /// numbers).
    #[serde(skip)]
    pub categories: Value,
    /// Values that are a validation result judged valid (`{"is_valid": true, ...}`).
    #[serde(skip)]
    pub num_valid: u64,
}

/// Score distributions of one `llm-judge` column for one judge-score profiler.
#[derive(Debug, Serialize, ToSchema)]
pub struct JudgeScoreProfile {
    /// The judge column.
    pub column_name: String,
    /// The profiler's `model_alias`.
    pub model_alias: String,
    /// Score name → `{distribution_type, distribution}` of the scores given.
    #[schema(value_type = Object)]
    pub score_distributions: BTreeMap<String, Value>,
    /// LLM-written summaries: not produced by synthgate (always `null`).
    #[schema(value_type = Option<Object>)]
    pub summaries: Option<Value>,
}

impl JobService {
    /// The analysis of a job's dataset as stored now (see the module docs).
    pub async fn analysis(
        &self,
        id: JobId,
        owner: Option<&str>,
    ) -> Result<DatasetAnalysis, ApiError> {
        let job = self.get(id, owner).await?;
        let compiled = self.compiled(&job).await?;
        let config = DatasetConfig::parse(&job.config).map_err(ApiError::InvalidConfig)?;
        let mut profiler = Profiler::new(&config, &compiled.plan);
        let mut after = None;
        loop {
            let rows = self
                .store
                .list_records(id, after, RecordSelect::dataset(&job), CHUNK)
                .await?;
            after = rows.last().map(|r| r.index).or(after);
            let done = rows.len() < CHUNK as usize;
            for row in &rows {
                profiler.add(row.values.as_ref());
            }
            if done {
                break;
            }
        }
        Ok(DatasetAnalysis {
            job_id: id,
            profile: profiler.finish(u64::from(job.num_records)),
        })
    }
}

/// Adds up completed records' values, one record at a time, into a [`DatasetProfile`].
pub struct Profiler {
    /// Output columns: name, `column_type`, `sampler_type`, export type.
    columns: Vec<(String, String, Option<String>, ColumnType)>,
    acc: Vec<Acc>,
    /// Profilers' model aliases.
    profilers: Vec<String>,
    /// The `llm-judge` output columns.
    judges: Vec<String>,
    /// (judge, score name) → the scores given.
    scores: HashMap<(usize, String), Acc>,
    rows: u64,
}

impl Profiler {
    /// A profiler of the output columns of `plan`, compiled from `config`.
    pub fn new(config: &DatasetConfig, plan: &Plan) -> Self {
        let by_name: HashMap<&str, &ColumnKind> = config
            .columns
            .iter()
            .map(|c| (c.name.as_str(), &c.kind))
            .collect();
        let columns: Vec<_> = plan
            .output_columns()
            .iter()
            .zip(plan.output_column_types())
            .map(|(name, ty)| {
                let (column_type, sampler_type) = match by_name.get(name.as_str()) {
                    Some(kind) => kind_names(kind),
                    None => ("general".to_owned(), None),
                };
                (name.clone(), column_type, sampler_type, ty)
            })
            .collect();
        let judges = columns
            .iter()
            .filter(|c| c.1 == "llm-judge")
            .map(|c| c.0.clone())
            .collect();
        Self {
            acc: columns.iter().map(|_| Acc::default()).collect(),
            columns,
            profilers: config
                .profilers
                .iter()
                .map(|p| p.model_alias.clone())
                .collect(),
            judges,
            scores: HashMap::new(),
            rows: 0,
        }
    }

    /// One completed record's values (an object by column name).
    pub fn add(&mut self, values: Option<&Value>) {
        self.rows += 1;
        for (a, c) in self.acc.iter_mut().zip(&self.columns) {
            a.add(values.and_then(|v| v.get(&c.0)));
        }
        for (j, judge) in self.judges.iter().enumerate() {
            let Some(Value::Object(by_score)) = values.and_then(|v| v.get(judge)) else {
                continue;
            };
            for (score, answer) in by_score {
                let given = answer.get("score").unwrap_or(answer);
                self.scores
                    .entry((j, score.clone()))
                    .or_default()
                    .add(Some(given));
            }
        }
    }

    /// The profile of the records added, of a dataset asked for `target` records.
    pub fn finish(self, target: u64) -> DatasetProfile {
        let column_statistics = self
            .columns
            .into_iter()
            .zip(self.acc)
            .map(|((name, column_type, sampler_type, ty), a)| {
                a.finish(name, column_type, sampler_type, ty)
            })
            .collect();
        let mut column_profiles = Vec::new();
        for alias in &self.profilers {
            for (j, judge) in self.judges.iter().enumerate() {
                let score_distributions = self
                    .scores
                    .iter()
                    .filter(|((i, _), _)| *i == j)
                    .map(|((_, score), a)| {
                        let (kind, dist) = a.distribution();
                        (
                            score.clone(),
                            json!({"distribution_type": kind, "distribution": dist}),
                        )
                    })
                    .collect();
                column_profiles.push(JudgeScoreProfile {
                    column_name: judge.clone(),
                    model_alias: alias.clone(),
                    score_distributions,
                    summaries: None,
                });
            }
        }
        DatasetProfile {
            target_num_records: target,
            num_records: self.rows,
            column_statistics,
            column_profiles,
        }
    }
}

/// `column_type`, and `sampler_type` for samplers.
fn kind_names(kind: &ColumnKind) -> (String, Option<String>) {
    match kind {
        ColumnKind::Sampler(s) => (
            "sampler".to_owned(),
            Some(s.sampler_type.as_str().to_owned()),
        ),
        ColumnKind::Expression(_) => ("expression".to_owned(), None),
        ColumnKind::SeedDataset => ("seed-dataset".to_owned(), None),
        ColumnKind::Llm(l) => (l.column_type().to_owned(), None),
        ColumnKind::Validation(_) => ("validation".to_owned(), None),
        ColumnKind::Embedding(_) => ("embedding".to_owned(), None),
        ColumnKind::Image(_) => ("image".to_owned(), None),
        ColumnKind::Unsupported { column_type } => (column_type.clone(), None),
    }
}

/// What one column's values add up to so far.
#[derive(Default)]
struct Acc {
    num_records: u64,
    num_null: u64,
    /// Hashes of the distinct values' text, until [`MAX_DISTINCT`].
    distinct: HashSet<u64>,
    overflow: bool,
    numbers: Vec<f64>,
    /// Counts of short values' text (numbers too), up to [`MAX_COUNTED`] values.
    counts: HashMap<String, u64>,
    dtypes: HashSet<&'static str>,
    /// Validation results judged valid.
    valid: u64,
}

impl Acc {
    fn add(&mut self, v: Option<&Value>) {
        self.num_records += 1;
        let v = match v {
            None | Some(Value::Null) => {
                self.num_null += 1;
                return;
            }
            Some(v) => v,
        };
        if v.get("is_valid") == Some(&Value::Bool(true)) {
            self.valid += 1;
        }
        let text = match v {
            Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
            other => std::borrow::Cow::Owned(other.to_string()),
        };
        self.dtypes.insert(match v {
            Value::Bool(_) => "bool",
            Value::Number(n) if n.is_i64() || n.is_u64() => "int",
            Value::Number(_) => "float",
            Value::String(_) => "str",
            Value::Array(_) => "list",
            Value::Object(_) => "dict",
            Value::Null => "null",
        });
        let number = v.as_f64().filter(|_| !v.is_boolean());
        if let Some(n) = number {
            self.numbers.push(n);
        }
        if let Some(c) = self.counts.get_mut(text.as_ref()) {
            *c += 1;
        } else if text.len() <= MAX_CATEGORY_BYTES && self.counts.len() < MAX_COUNTED {
            self.counts.insert(text.clone().into_owned(), 1);
        }
        if !self.overflow {
            let mut h = DefaultHasher::new();
            text.hash(&mut h);
            self.distinct.insert(h.finish());
            if self.distinct.len() > MAX_DISTINCT {
                self.overflow = true;
                self.distinct = HashSet::new();
            }
        }
    }

    fn dtype(&self) -> String {
        let mut d: Vec<&str> = self.dtypes.iter().copied().collect();
        d.sort_unstable();
        match d.as_slice() {
            [] => "unknown".to_owned(),
            [one] => (*one).to_owned(),
            ["float", "int"] => "float".to_owned(),
            _ => "mixed".to_owned(),
        }
    }

    /// Whether every value is a number.
    fn all_numbers(&self) -> bool {
        !self.numbers.is_empty() && self.numbers.len() as u64 == self.num_records - self.num_null
    }

    /// `(distribution_type, distribution)`: numerical when every value is a number.
    fn distribution(&self) -> (&'static str, Value) {
        if self.all_numbers() {
            return ("numerical", self.numerical());
        }
        match self.categorical() {
            Value::Null => ("unknown", Value::Null),
            dist => ("categorical", dist),
        }
    }

    /// `{min, max, mean, stddev, median}` of the numbers, as pandas computes them.
    fn numerical(&self) -> Value {
        let mut xs = self.numbers.clone();
        if xs.is_empty() {
            return Value::Null;
        }
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        // Sample standard deviation, as pandas' `std` computes it.
        let var = if xs.len() > 1 {
            xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let mid = xs.len() / 2;
        let median = if xs.len().is_multiple_of(2) {
            (xs[mid - 1] + xs[mid]) / 2.0
        } else {
            xs[mid]
        };
        json!({
            "min": xs[0], "max": xs[xs.len() - 1], "mean": mean,
            "stddev": var.sqrt(), "median": median,
        })
    }

    /// `{most_common_value, least_common_value, histogram}` of the counted values; `null`
    /// when none was counted.
    fn categorical(&self) -> Value {
        let mut counts: Vec<(&String, u64)> = self.counts.iter().map(|(k, c)| (k, *c)).collect();
        if counts.is_empty() {
            return Value::Null;
        }
        // Most common first; ties by value, so the answer is stable.
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let most = counts[0].0.clone();
        let least = counts[counts.len() - 1].0.clone();
        counts.truncate(MAX_CATEGORIES);
        let (categories, counts): (Vec<&String>, Vec<u64>) = counts.into_iter().unzip();
        json!({
            "most_common_value": most, "least_common_value": least,
            "histogram": {"categories": categories, "counts": counts},
        })
    }

    fn finish(
        self,
        name: String,
        column_type: String,
        sampler_type: Option<String>,
        export_type: ColumnType,
    ) -> ColumnStatistics {
        let (distribution_type, distribution) = self.distribution();
        ColumnStatistics {
            column_name: name,
            column_type,
            sampler_type,
            num_records: self.num_records,
            num_null: self.num_null,
            num_unique: (!self.overflow).then_some(self.distinct.len() as u64),
            simple_dtype: self.dtype(),
            distribution_type: distribution_type.to_owned(),
            distribution,
            export_type,
            categories: self.categorical(),
            num_valid: self.valid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerical_and_categorical_statistics() {
        let mut a = Acc::default();
        for v in [json!(1), json!(2), json!(3), json!(4), Value::Null] {
            a.add(Some(&v));
        }
        let s = a.finish(
            "n".into(),
            "sampler".into(),
            Some("uniform".into()),
            ColumnType::Int,
        );
        assert_eq!((s.num_records, s.num_null, s.num_unique), (5, 1, Some(4)));
        assert_eq!(s.simple_dtype, "int");
        assert_eq!(s.distribution_type, "numerical");
        assert_eq!(s.distribution["median"], json!(2.5));
        assert_eq!(s.distribution["max"], json!(4.0));
        let sd = s.distribution["stddev"].as_f64().unwrap();
        assert!((sd - 1.290_994).abs() < 1e-5, "{sd}");

        let mut a = Acc::default();
        for v in ["x", "y", "x"] {
            a.add(Some(&json!(v)));
        }
        a.add(None);
        let s = a.finish("c".into(), "expression".into(), None, ColumnType::Text);
        assert_eq!(s.distribution_type, "categorical");
        assert_eq!(s.distribution["most_common_value"], "x");
        assert_eq!(s.distribution["least_common_value"], "y");
        assert_eq!(s.distribution["histogram"]["counts"], json!([2, 1]));
        assert_eq!((s.num_null, s.num_unique), (1, Some(2)));
    }

    #[test]
    fn memory_is_bounded_for_long_text_and_numbers_keep_their_categories() {
        let mut a = Acc::default();
        let long = "x".repeat(MAX_CATEGORY_BYTES + 1);
        for i in 0..3 {
            a.add(Some(&json!(format!("{long}{i}"))));
        }
        assert!(a.counts.is_empty(), "long text is not held as a category");
        let s = a.finish("t".into(), "llm-text".into(), None, ColumnType::Text);
        assert_eq!(
            (s.num_unique, s.distribution_type.as_str()),
            (Some(3), "unknown")
        );

        // Category samplers of numbers: numerical for /v1, and their categories kept.
        let mut a = Acc::default();
        for v in [1, 2, 2] {
            a.add(Some(&json!(v)));
        }
        let s = a.finish("c".into(), "sampler".into(), None, ColumnType::Int);
        assert_eq!(s.distribution_type, "numerical");
        assert_eq!(s.categories["most_common_value"], "2");
        assert_eq!(s.categories["histogram"]["counts"], json!([2, 1]));
    }
}
