//! The value type of each dataset column as far as the config fixes it, for typed exports
//! (Parquet). Owns the mapping from a compiled step to a [`ColumnType`]; the writers that use
//! it live in `jobs::parquet`.

use serde_json::Value;

use super::Plan;
use super::columns::StepKind;
use super::convert::NumConvert;
use super::samplers::{Convert, Dist};
use crate::domain::dataset::ExprDtype;

/// The type of a dataset column's values. Every column may also hold `null` (a skipped
/// column, a seed field that is absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// Whole numbers: `binomial`, `poisson`, `bernoulli`, `convert_to: int`, expression
    /// `dtype: int`, categories and seed fields whose values are all integers.
    Int,
    /// Numbers: `uniform`, `gaussian`, `scipy`, `bernoulli_mixture`, `convert_to: float`,
    /// expression `dtype: float`, categories of numbers.
    Float,
    /// Booleans: expression `dtype: bool`, categories of booleans.
    Bool,
    /// Text: strings as they are, anything else (objects, lists, numbers of a column whose
    /// type the config does not fix) as its JSON text. LLM columns (structured, judge, code,
    /// text), embeddings, validation results, images, person samplers, uuid/datetime/timedelta
    /// samplers, seed fields of strings or of mixed types, and `{name}__reasoning_content`.
    Text,
}

impl Plan {
    /// The type of each of [`Plan::output_columns`], in the same order.
    pub fn output_column_types(&self) -> Vec<ColumnType> {
        self.output_columns
            .iter()
            .map(|name| {
                self.steps
                    .iter()
                    .find(|s| &s.name == name)
                    .map_or(ColumnType::Text, |s| {
                        let ty = self.step_type(&s.kind);
                        // A skipped cell holds the column's `skip.value` (null by default).
                        match s.skip.as_ref().map(|k| &k.value) {
                            None | Some(Value::Null) => ty,
                            Some(v) => unify(ty, value_type(v)),
                        }
                    })
            })
            .collect()
    }

    /// The type of one step's values; seed fields by the stored dataset's column types, or
    /// by the values of the inline rows.
    fn step_type(&self, kind: &StepKind) -> ColumnType {
        match kind {
            StepKind::Expression { dtype, .. } => match dtype {
                ExprDtype::Int => ColumnType::Int,
                ExprDtype::Float => ColumnType::Float,
                ExprDtype::Bool => ColumnType::Bool,
                ExprDtype::Str => ColumnType::Text,
            },
            StepKind::Sampler {
                base,
                conditional,
                convert,
                ..
            } => match convert {
                Convert::Number(NumConvert::Int) => ColumnType::Int,
                Convert::Number(NumConvert::Float) => ColumnType::Float,
                Convert::Number(NumConvert::Str) | Convert::Date(_) => ColumnType::Text,
                // Conditional distributions of other types widen the column (to text, if
                // nothing narrower holds both).
                Convert::Plain => conditional
                    .iter()
                    .fold(dist_type(base), |acc, (_, d)| unify(acc, dist_type(d))),
            },
            StepKind::Seed { field } => self
                .seed_rows
                .as_ref()
                .map_or(ColumnType::Text, |rows| rows.field_type(field)),
            StepKind::Llm(_)
            | StepKind::Validation(_)
            | StepKind::Embedding(_)
            | StepKind::Image(_) => ColumnType::Text,
        }
    }
}

fn dist_type(d: &Dist) -> ColumnType {
    match d {
        Dist::Category { values, .. } => values_type(values.iter()),
        Dist::Subcategory { values, .. } => values_type(values.values().flatten()),
        Dist::Bernoulli { .. } | Dist::Binomial { .. } | Dist::Poisson { .. } => ColumnType::Int,
        Dist::Uniform { .. }
        | Dist::Gaussian { .. }
        | Dist::Scipy { .. }
        | Dist::BernoulliMixture { .. } => ColumnType::Float,
        Dist::Uuid { .. }
        | Dist::Datetime { .. }
        | Dist::Timedelta { .. }
        | Dist::FakerPerson(_)
        | Dist::Person(_) => ColumnType::Text,
    }
}

/// The type of a category's values: one type when they all share it (integers among floats
/// make floats), else text.
pub(super) fn values_type<'a>(mut values: impl Iterator<Item = &'a Value>) -> ColumnType {
    let Some(first) = values.next() else {
        return ColumnType::Text;
    };
    values.fold(value_type(first), |acc, v| unify(acc, value_type(v)))
}

/// The narrowest type that holds `v`.
fn value_type(v: &Value) -> ColumnType {
    match v {
        Value::Bool(_) => ColumnType::Bool,
        Value::Number(n) if n.is_i64() => ColumnType::Int,
        Value::Number(_) => ColumnType::Float,
        Value::Null | Value::String(_) | Value::Array(_) | Value::Object(_) => ColumnType::Text,
    }
}

/// The type that holds values of both: the same type, a float for an integer and a float,
/// else text.
fn unify(a: ColumnType, b: ColumnType) -> ColumnType {
    match (a, b) {
        (a, b) if a == b => a,
        (ColumnType::Int, ColumnType::Float) | (ColumnType::Float, ColumnType::Int) => {
            ColumnType::Float
        }
        _ => ColumnType::Text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plan_types_its_columns_from_the_config() {
        use crate::generate::tests::{expr, plan_columns, sampler};
        let mut as_int = sampler("rounded", "uniform", json!({"low": 0, "high": 9}));
        as_int["convert_to"] = json!("int");
        let mut typed_expr = expr("doubled", "{{ count * 2 }}");
        typed_expr["dtype"] = json!("float");
        let mut flag = expr("flag", "{{ count > 2 }}");
        flag["dtype"] = json!("bool");
        let mut skipped_int = expr("maybe", "{{ count }}");
        skipped_int["dtype"] = json!("int");
        skipped_int["skip"] = json!({"when": "{{ count > 2 }}", "value": "n/a"});
        let mut skipped_null = expr("maybe_null", "{{ count }}");
        skipped_null["dtype"] = json!("int");
        skipped_null["skip"] = json!({"when": "{{ count > 2 }}"});
        let plan = plan_columns(json!([
            sampler("count", "poisson", json!({"mean": 3})),
            skipped_int,
            skipped_null,
            sampler("score", "uniform", json!({"low": 0, "high": 1})),
            as_int,
            sampler("size", "category", json!({"values": ["s", "m"]})),
            sampler("level", "category", json!({"values": [1, 2, 3]})),
            sampler("ratio", "category", json!({"values": [1, 2.5]})),
            sampler("id", "uuid", json!({})),
            typed_expr,
            flag,
            expr("label", "{{ size }}"),
            {"name": "answer", "column_type": "llm-structured", "prompt": "{{ size }}",
                "model_alias": "server-model", "output_format": {"type": "object"}},
        ]));
        let types: Vec<(&str, ColumnType)> = plan
            .output_columns()
            .iter()
            .map(String::as_str)
            .zip(plan.output_column_types())
            .collect();
        use ColumnType::{Bool, Float, Int, Text};
        assert_eq!(
            types,
            [
                ("count", Int),
                ("maybe", Text),
                ("maybe_null", Int),
                ("score", Float),
                ("rounded", Int),
                ("size", Text),
                ("level", Int),
                ("ratio", Float),
                ("id", Text),
                ("doubled", Float),
                ("flag", Bool),
                ("label", Text),
                ("answer", Text),
            ]
        );
    }

    #[test]
    fn seed_fields_are_typed_by_their_rows() {
        use crate::generate::tests::{expr, plan};
        let rows = json!([
            {"id": 1, "price": 2.5, "ok": true, "name": "a", "mixed": 1, "sparse": null},
            {"id": 2, "price": 3, "ok": false, "name": "b", "mixed": "x", "sparse": 4},
        ]);
        let plan = plan(json!({
            "columns": [expr("label", "{{ name }}")],
            "seed_config": {"source": {"seed_type": "inline", "rows": rows}},
        }));
        use ColumnType::{Bool, Float, Int, Text};
        assert_eq!(
            plan.output_column_types(),
            [Int, Float, Bool, Text, Text, Int, Text],
            "{:?}",
            plan.output_columns()
        );
    }

    #[test]
    fn category_values_decide_the_type() {
        let t = |v: Value| values_type(v.as_array().unwrap().iter());
        assert_eq!(t(json!([1, 2, 3])), ColumnType::Int);
        assert_eq!(t(json!([1, 2.5])), ColumnType::Float);
        assert_eq!(t(json!([true, false])), ColumnType::Bool);
        assert_eq!(t(json!(["a", "b"])), ColumnType::Text);
        assert_eq!(t(json!([1, "b"])), ColumnType::Text);
        assert_eq!(t(json!([true, 1])), ColumnType::Text);
        assert_eq!(t(json!([])), ColumnType::Text);
    }
}
