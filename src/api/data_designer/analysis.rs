//! A dataset's profile as Data Designer's `DatasetProfilerResults`: what the client validates
//! (strictly, with pydantic) in the preview's `analysis` message and in
//! `GET /v1/data-designer/jobs/{id}/results/analysis/download` (`load_analysis()`), and what
//! `analysis.to_report()` shows.
//!
//! The numbers are ours ([`DatasetProfile`], also `GET /v1/jobs/{id}/analysis`); only the
//! shape is DataDesigner's, decided per column as DataDesigner 0.9.6's profiler decides it:
//! a category or subcategory sampler gets a categorical distribution, a numerical sampler
//! (bernoulli, bernoulli_mixture, binomial, gaussian, poisson, scipy, uniform) a numerical
//! one, any other sampler `other` with none. Where synthgate has no number the client would
//! accept, the column is reported as DataDesigner's `general` statistics rather than with a
//! made-up one: LLM columns (the client requires per-cell token statistics, which DataDesigner
//! counts with a tokenizer and synthgate does not), and columns DataDesigner has no statistics
//! class for (embeddings, images, side columns such as reasoning content). Judge-score
//! profiles are not sent (`column_profiles: null`): their LLM-written summaries, which the
//! client requires, are not produced.

use serde_json::{Map, Value, json};

use crate::generate::ColumnType;
use crate::jobs::{ColumnStatistics, DatasetProfile};

/// The samplers whose distribution DataDesigner profiles as numerical.
const NUMERICAL_SAMPLERS: &[&str] = &[
    "bernoulli",
    "bernoulli_mixture",
    "binomial",
    "gaussian",
    "poisson",
    "scipy",
    "uniform",
];

/// `profile` as a `DatasetProfilerResults` object.
pub(in crate::api) fn profiler_results(profile: &DatasetProfile) -> Value {
    let side_effects: Vec<&str> = profile
        .column_statistics
        .iter()
        .filter(|c| c.column_type == "general")
        .map(|c| c.column_name.as_str())
        .collect();
    json!({
        "num_records": profile.num_records,
        "target_num_records": profile.target_num_records,
        "column_statistics": profile.column_statistics.iter().map(column).collect::<Vec<_>>(),
        "side_effect_column_names": side_effects,
        "column_profiles": null,
    })
}

/// One column's `*ColumnStatistics`.
fn column(c: &ColumnStatistics) -> Value {
    let (pyarrow, simple) = match c.export_type {
        ColumnType::Int => ("int64", "int"),
        ColumnType::Float => ("double", "float"),
        ColumnType::Bool => ("bool", "bool"),
        ColumnType::Text => ("string", "string"),
    };
    let mut out = Map::new();
    out.insert("column_name".into(), c.column_name.clone().into());
    out.insert("num_records".into(), c.num_records.into());
    out.insert("num_null".into(), c.num_null.into());
    // The client requires a whole number: past the distinct values counted, the count is a
    // lower bound.
    let unique = c.num_unique.unwrap_or(crate::jobs::MAX_DISTINCT as u64);
    out.insert("num_unique".into(), unique.into());
    out.insert("pyarrow_dtype".into(), pyarrow.into());
    out.insert("simple_dtype".into(), simple.into());
    let column_type = match c.column_type.as_str() {
        "sampler" => {
            let sampler = c.sampler_type.as_deref().unwrap_or_default();
            let (kind, dist) = if matches!(sampler, "category" | "subcategory") {
                ("categorical", c.categories.clone())
            } else if NUMERICAL_SAMPLERS.contains(&sampler) {
                let numerical = c.distribution_type == "numerical";
                (
                    "numerical",
                    if numerical {
                        c.distribution.clone()
                    } else {
                        Value::Null
                    },
                )
            } else {
                ("other", Value::Null)
            };
            out.insert("sampler_type".into(), sampler.into());
            out.insert("distribution_type".into(), kind.into());
            out.insert("distribution".into(), dist);
            "sampler"
        }
        "validation" => {
            out.insert("num_valid_records".into(), c.num_valid.into());
            "validation"
        }
        "expression" => "expression",
        "seed-dataset" => "seed-dataset",
        _ => "general",
    };
    out.insert("column_type".into(), column_type.into());
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(name: &str, column_type: &str, sampler: Option<&str>) -> ColumnStatistics {
        ColumnStatistics {
            column_name: name.into(),
            column_type: column_type.into(),
            sampler_type: sampler.map(Into::into),
            num_records: 3,
            num_null: 1,
            num_unique: Some(2),
            simple_dtype: "str".into(),
            distribution_type: "categorical".into(),
            distribution: json!({"most_common_value": "a"}),
            export_type: ColumnType::Text,
            categories: json!({"most_common_value": "a"}),
            num_valid: 0,
        }
    }

    #[test]
    fn columns_take_the_statistics_class_the_client_validates() {
        let mut uniform = stats("u", "sampler", Some("uniform"));
        uniform.distribution_type = "numerical".into();
        uniform.distribution = json!({"min": 1.0});
        uniform.export_type = ColumnType::Float;
        let mut valid = stats("v", "validation", None);
        valid.num_valid = 2;
        let mut wide = stats("w", "expression", None);
        wide.num_unique = None;
        let profile = DatasetProfile {
            target_num_records: 4,
            num_records: 3,
            column_statistics: vec![
                stats("c", "sampler", Some("category")),
                uniform,
                stats("id", "sampler", Some("uuid")),
                stats("poem", "llm-text", None),
                valid,
                wide,
                stats("poem__reasoning_content", "general", None),
            ],
            column_profiles: Vec::new(),
        };
        let out = profiler_results(&profile);
        let cols = out["column_statistics"].as_array().unwrap();
        assert_eq!(cols[0]["distribution_type"], "categorical");
        assert_eq!(cols[0]["distribution"]["most_common_value"], "a");
        assert_eq!(
            (&cols[1]["distribution_type"], &cols[1]["pyarrow_dtype"]),
            (&json!("numerical"), &json!("double"))
        );
        assert_eq!(cols[1]["distribution"]["min"], 1.0);
        assert_eq!(cols[2]["distribution_type"], "other");
        assert!(cols[2]["distribution"].is_null());
        // LLM columns: general statistics, no invented token counts.
        assert_eq!(cols[3]["column_type"], "general");
        assert!(cols[3].get("completion_tokens_mean").is_none());
        assert_eq!(cols[4]["num_valid_records"], 2);
        assert_eq!(cols[5]["num_unique"], 100_000);
        assert_eq!(
            out["side_effect_column_names"],
            json!(["poem__reasoning_content"])
        );
        assert_eq!(
            (&out["num_records"], &out["target_num_records"]),
            (&json!(3), &json!(4))
        );
    }
}
