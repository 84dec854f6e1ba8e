//! A job's dataset analysis (DataDesigner's `DatasetProfilerResults`, as far as a service can
//! make it): per-column statistics over the completed records, and for each judge-score
//! profiler the score distributions of the `llm-judge` columns. Computed on request, one
//! chunk of records per database round trip, so it always describes the stored rows.
//!
//! Not produced: the judge-score profiler's LLM-written summaries (they need one model call
//! per score after the job, which a read endpoint must not make), and DataDesigner's token
//! statistics per LLM column (synthgate counts tokens per model, not per cell).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::domain::dataset::{ColumnKind, DatasetConfig};
use crate::domain::{JobId, RecordStatus};
use crate::error::ApiError;

use super::JobService;

/// Records read per database round trip.
const CHUNK: u32 = 500;
/// Distinct values tracked per column; past it `num_unique` is `null` (memory stays bounded).
const MAX_DISTINCT: usize = 100_000;
/// Categories listed in a categorical histogram, most common first.
const MAX_CATEGORIES: usize = 50;

/// `GET /v1/jobs/{id}/analysis`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetAnalysis {
    /// The job.
    #[schema(value_type = uuid::Uuid)]
    pub job_id: JobId,
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
    /// `numerical` (numbers), `categorical` (anything else with a value), or `unknown`.
    pub distribution_type: String,
    /// `{min, max, mean, stddev, median}` or `{most_common_value, least_common_value,
    /// histogram: {categories, counts}}`; `null` when there is no value.
    #[schema(value_type = Option<Object>)]
    pub distribution: Value,
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
        let columns = compiled.plan.output_columns().to_vec();
        let mut acc: Vec<Acc> = columns.iter().map(|_| Acc::default()).collect();
        let judges: Vec<&str> = config
            .columns
            .iter()
            .filter(|c| matches!(&c.kind, ColumnKind::Llm(l) if l.column_type() == "llm-judge"))
            .filter(|c| columns.contains(&c.name))
            .map(|c| c.name.as_str())
            .collect();
        let mut scores: HashMap<(&str, String), Acc> = HashMap::new();
        let mut after = None;
        let mut rows_seen = 0u64;
        loop {
            let rows = self
                .store
                .list_records(id, after, Some(RecordStatus::Completed), CHUNK)
                .await?;
            after = rows.last().map(|r| r.index).or(after);
            let done = rows.len() < CHUNK as usize;
            for row in &rows {
                rows_seen += 1;
                let values = row.values.as_ref();
                for (a, name) in acc.iter_mut().zip(&columns) {
                    a.add(values.and_then(|v| v.get(name)));
                }
                for &judge in &judges {
                    let Some(Value::Object(by_score)) = values.and_then(|v| v.get(judge)) else {
                        continue;
                    };
                    for (score, answer) in by_score {
                        let given = answer.get("score").unwrap_or(answer);
                        scores
                            .entry((judge, score.clone()))
                            .or_default()
                            .add(Some(given));
                    }
                }
            }
            if done {
                break;
            }
        }
        let by_name: HashMap<&str, &ColumnKind> = config
            .columns
            .iter()
            .map(|c| (c.name.as_str(), &c.kind))
            .collect();
        let column_statistics = columns
            .iter()
            .zip(acc)
            .map(|(name, a)| {
                let (column_type, sampler_type) = match by_name.get(name.as_str()) {
                    Some(kind) => kind_names(kind),
                    None => ("general".to_owned(), None),
                };
                a.finish(name.clone(), column_type, sampler_type)
            })
            .collect();
        let mut column_profiles = Vec::new();
        for p in &config.profilers {
            for &judge in &judges {
                let mut score_distributions = BTreeMap::new();
                for ((j, score), a) in &scores {
                    if *j == judge {
                        let (kind, dist) = a.distribution();
                        score_distributions.insert(
                            score.clone(),
                            json!({"distribution_type": kind, "distribution": dist}),
                        );
                    }
                }
                column_profiles.push(JudgeScoreProfile {
                    column_name: judge.to_owned(),
                    model_alias: p.model_alias.clone(),
                    score_distributions,
                    summaries: None,
                });
            }
        }
        Ok(DatasetAnalysis {
            job_id: id,
            target_num_records: u64::from(job.num_records),
            num_records: rows_seen,
            column_statistics,
            column_profiles,
        })
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
    distinct: HashSet<String>,
    overflow: bool,
    numbers: Vec<f64>,
    counts: HashMap<String, u64>,
    dtypes: HashSet<&'static str>,
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
        let key = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
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
        if let Some(n) = v.as_f64().filter(|_| !v.is_boolean()) {
            self.numbers.push(n);
        } else if self.counts.len() < MAX_DISTINCT || self.counts.contains_key(&key) {
            *self.counts.entry(key.clone()).or_default() += 1;
        }
        if !self.overflow {
            self.distinct.insert(key);
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

    /// `(distribution_type, distribution)`: numerical when every value is a number.
    fn distribution(&self) -> (&'static str, Value) {
        if !self.numbers.is_empty() && self.counts.is_empty() {
            let mut xs = self.numbers.clone();
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
            let dist = json!({
                "min": xs[0], "max": xs[xs.len() - 1], "mean": mean,
                "stddev": var.sqrt(), "median": median,
            });
            return ("numerical", dist);
        }
        let mut counts: Vec<(String, u64)> =
            self.counts.iter().map(|(k, c)| (k.clone(), *c)).collect();
        counts.extend(self.numbers.iter().map(|n| (n.to_string(), 1)));
        if counts.is_empty() {
            return ("unknown", Value::Null);
        }
        // Most common first; ties by value, so the answer is stable.
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let most = counts[0].0.clone();
        let least = counts[counts.len() - 1].0.clone();
        counts.truncate(MAX_CATEGORIES);
        let (categories, counts): (Vec<String>, Vec<u64>) = counts.into_iter().unzip();
        let dist = json!({
            "most_common_value": most, "least_common_value": least,
            "histogram": {"categories": categories, "counts": counts},
        });
        ("categorical", dist)
    }

    fn finish(
        self,
        name: String,
        column_type: String,
        sampler_type: Option<String>,
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
        let s = a.finish("n".into(), "sampler".into(), Some("uniform".into()));
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
        let s = a.finish("c".into(), "expression".into(), None);
        assert_eq!(s.distribution_type, "categorical");
        assert_eq!(s.distribution["most_common_value"], "x");
        assert_eq!(s.distribution["least_common_value"], "y");
        assert_eq!(s.distribution["histogram"]["counts"], json!([2, 1]));
        assert_eq!((s.num_null, s.num_unique), (1, Some(2)));
    }
}
