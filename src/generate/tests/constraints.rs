//! Sampler `constraints`: values that always meet them, determinism, the column order a
//! column inequality imposes, records that cannot meet them, and config issues.

use serde_json::json;

use super::*;

fn config(columns: Value, constraints: Value) -> Value {
    json!({"columns": columns, "constraints": constraints})
}

#[test]
fn scalar_and_column_inequalities_always_hold() {
    let plan = plan(config(
        json!([
            // Listed before its rhs column: the constraint orders it after.
            sampler("high", "uniform", json!({"low": 0, "high": 100})),
            sampler("low", "gaussian", json!({"mean": 50, "stddev": 20})),
        ]),
        json!([
            {"target_column": "low", "operator": "ge", "rhs": 10, "constraint_type": "scalar_inequality"},
            {"target_column": "low", "operator": "le", "rhs": 90},
            // DataDesigner's legacy shape: no constraint_type, a column name as rhs.
            {"target_column": "high", "operator": "gt", "rhs": "low"},
        ]),
    ));
    for i in 0..500 {
        let r = row(&plan, i);
        let (low, high) = (r["low"].as_f64().unwrap(), r["high"].as_f64().unwrap());
        assert!((10.0..=90.0).contains(&low), "{r:?}");
        assert!(high > low, "{r:?}");
        assert_eq!(row(&plan, i), r, "deterministic");
    }
    assert_eq!(plan.output_columns(), ["high", "low"]);
}

#[test]
fn unconstrained_first_draw_is_kept() {
    // A constraint that always holds changes nothing: the first draw is the value.
    let columns = json!([sampler("x", "uniform", json!({"low": 0, "high": 1}))]);
    let free = plan(config(columns.clone(), json!([])));
    let held = plan(config(
        columns,
        json!([{"target_column": "x", "operator": "lt", "rhs": "5"}]),
    ));
    for i in 0..20 {
        assert_eq!(row(&free, i), row(&held, i));
    }
}

#[test]
fn constraint_on_converted_value() {
    // convert_to int rounds before the check, as DataDesigner's preproc does.
    let mut col = sampler("n", "uniform", json!({"low": 0, "high": 3}));
    col["convert_to"] = json!("int");
    let plan = plan(config(
        json!([col]),
        json!([{"target_column": "n", "operator": "ge", "rhs": 2.5}]),
    ));
    for i in 0..100 {
        assert_eq!(row(&plan, i)["n"], json!(3));
    }
}

#[test]
fn impossible_constraint_fails_the_record() {
    let plan = plan(config(
        json!([
            sampler("a", "category", json!({"values": ["x"]})),
            sampler("p", "uniform", json!({"low": 0, "high": 1})),
        ]),
        json!([{"target_column": "p", "operator": "gt", "rhs": 2}]),
    ));
    let (err, values) = failure(&plan, 0);
    assert_eq!(err.code, RecordErrorCode::ConstraintUnsatisfied);
    assert_eq!(err.code.stage(), Some(RecordStage::Sample));
    assert_eq!(err.column.as_deref(), Some("p"));
    assert!(
        err.message
            .contains("no value met the constraints (> 2.0) in 10000 draws"),
        "{}",
        err.message
    );
    assert_eq!(values.get("a"), Some(&json!("x")));
}

#[test]
fn bad_constraints_are_named() {
    let i = issues(config(
        json!([
            sampler("num", "uniform", json!({"low": 0, "high": 1})),
            sampler("cat", "category", json!({"values": ["a"]})),
            expr("e", "1"),
        ]),
        json!([
            {"target_column": "missing", "operator": "lt", "rhs": 1},
            {"target_column": "cat", "operator": "lt", "rhs": 1},
            {"target_column": "num", "operator": "ne", "rhs": 1},
            {"target_column": "num", "operator": "lt", "rhs": "e"},
            {"target_column": "num", "operator": "lt", "rhs": "x", "constraint_type": "scalar_inequality"},
            {"target_column": "num", "operator": "lt"},
            {"target_column": "num", "operator": "lt", "rhs": "num"},
        ]),
    ));
    let got: Vec<(&str, &str)> = i
        .iter()
        .map(|i| (i.code, i.field.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("invalid_constraint", "constraints[0].target_column"),
            ("invalid_constraint", "constraints[1].target_column"),
            ("invalid_constraint", "constraints[2].operator"),
            ("invalid_constraint", "constraints[3].rhs"),
            ("invalid_constraint", "constraints[4].rhs"),
            ("invalid_constraint", "constraints[5].rhs"),
            ("invalid_constraint", "constraints[6].rhs"),
        ]
    );
    assert!(
        i[1].message.contains("'cat' is a category sampler"),
        "{}",
        i[1].message
    );
    assert!(
        i[3].message.contains("'e' is not a sampler column"),
        "{}",
        i[3].message
    );
}

#[test]
fn constraint_cycles_are_dependency_cycles() {
    let i = issues(config(
        json!([
            sampler("a", "uniform", json!({"low": 0, "high": 1})),
            sampler("b", "uniform", json!({"low": 0, "high": 1})),
        ]),
        json!([
            {"target_column": "a", "operator": "lt", "rhs": "b"},
            {"target_column": "b", "operator": "lt", "rhs": "a"},
        ]),
    ));
    assert_eq!(i[0].code, "dependency_cycle");
}

/// A config as data-designer 0.9.6's builder writes it (`to_json()`, model configs emptied):
/// person_from_faker, scipy, bernoulli_mixture and both constraint types run unchanged.
#[test]
fn datadesigner_builder_output_runs() {
    let config: Value = serde_json::from_str(
        r#"{"data_designer": {"columns": [{"name": "customer", "drop": false, "column_type": "sampler", "skip": null, "propagate_skip": true, "sampler_type": "person_from_faker", "params": {"locale": "en_US", "sex": null, "city": null, "age_range": [25, 60], "sampler_type": "person_from_faker"}, "conditional_params": {}, "convert_to": null}, {"name": "rating", "drop": false, "column_type": "sampler", "skip": null, "propagate_skip": true, "sampler_type": "scipy", "params": {"dist_name": "beta", "dist_params": {"a": 2, "b": 5}, "decimal_places": 2, "sampler_type": "scipy"}, "conditional_params": {}, "convert_to": null}, {"name": "spend", "drop": false, "column_type": "sampler", "skip": null, "propagate_skip": true, "sampler_type": "bernoulli_mixture", "params": {"p": 0.4, "dist_name": "gamma", "dist_params": {"a": 2, "scale": 30}, "sampler_type": "bernoulli_mixture"}, "conditional_params": {}, "convert_to": null}, {"name": "low", "drop": false, "column_type": "sampler", "skip": null, "propagate_skip": true, "sampler_type": "uniform", "params": {"low": 0.0, "high": 10.0, "decimal_places": null, "sampler_type": "uniform"}, "conditional_params": {}, "convert_to": null}, {"name": "high", "drop": false, "column_type": "sampler", "skip": null, "propagate_skip": true, "sampler_type": "uniform", "params": {"low": 0.0, "high": 20.0, "decimal_places": null, "sampler_type": "uniform"}, "conditional_params": {}, "convert_to": null}, {"name": "name", "drop": false, "column_type": "expression", "skip": null, "propagate_skip": true, "expr": "{{ customer.first_name }} {{ customer.last_name }}", "dtype": "str"}], "model_configs": [], "tool_configs": [], "seed_config": null, "constraints": [{"target_column": "rating", "constraint_type": "scalar_inequality", "rhs": 0.1, "operator": "gt"}, {"target_column": "high", "constraint_type": "column_inequality", "rhs": "low", "operator": "gt"}], "profilers": null, "processors": null}, "library_version": "0.9.6"}"#,
    )
    .unwrap();
    let plan = plan(config);
    for i in 0..50 {
        let r = row(&plan, i);
        assert!(r["rating"].as_f64().unwrap() > 0.1);
        assert!(r["high"].as_f64().unwrap() > r["low"].as_f64().unwrap());
        let age = r["customer"]["age"].as_i64().unwrap();
        assert!((25..=60).contains(&age));
        let name = format!(
            "{} {}",
            r["customer"]["first_name"].as_str().unwrap(),
            r["customer"]["last_name"].as_str().unwrap()
        );
        assert_eq!(r["name"], name);
    }
}

#[test]
fn datetime_columns_are_ordered_by_their_instants_whatever_their_format() {
    // DataDesigner's engine test and notebooks: an end date after a start date, both
    // formatted `%m/%d/%Y` (which would not order as text across years).
    let mut start = sampler(
        "start",
        "datetime",
        json!({"start": "2019-01-01", "end": "2024-12-31", "unit": "D"}),
    );
    start["convert_to"] = json!("%m/%d/%Y");
    let mut end = sampler(
        "end",
        "datetime",
        json!({"start": "2019-01-01", "end": "2024-12-31", "unit": "D"}),
    );
    end["convert_to"] = json!("%m/%d/%Y");
    let follow = sampler(
        "follow_up",
        "timedelta",
        json!({"dt_min": 0, "dt_max": 30, "reference_column_name": "end", "unit": "D"}),
    );
    let plan = plan(config(
        json!([end, start, follow]),
        json!([
            {"target_column": "end", "operator": "gt", "rhs": "start"},
            {"target_column": "follow_up", "operator": "gt", "rhs": "end",
             "constraint_type": "column_inequality"},
        ]),
    ));
    let day = |v: &Value| {
        chrono::NaiveDate::parse_from_str(v.as_str().unwrap(), "%m/%d/%Y")
            .or_else(|_| {
                chrono::NaiveDateTime::parse_from_str(v.as_str().unwrap(), "%Y-%m-%dT%H:%M:%S")
                    .map(|t| t.date())
            })
            .unwrap()
    };
    let mut across_years = 0;
    for i in 0..300 {
        let r = row(&plan, i);
        let (s, e, f) = (day(&r["start"]), day(&r["end"]), day(&r["follow_up"]));
        assert!(e > s, "{r:?}");
        // Redrawn past a delta of 0: strictly later.
        assert!(f > e, "{r:?}");
        if r["end"].as_str() < r["start"].as_str() {
            across_years += 1;
        }
        assert_eq!(row(&plan, i), r, "deterministic");
    }
    assert!(
        across_years > 0,
        "some end dates sort before their start as text"
    );
    // The column inequality orders start before end.
    assert_eq!(plan.output_columns(), ["end", "start", "follow_up"]);
}

#[test]
fn dates_and_numbers_are_not_compared() {
    let i = issues(config(
        json!([
            sampler(
                "when",
                "datetime",
                json!({"start": "2020-01-01", "end": "2021-01-01"})
            ),
            sampler("n", "uniform", json!({"low": 0, "high": 1})),
        ]),
        json!([
            {"target_column": "when", "operator": "lt", "rhs": 5},
            {"target_column": "when", "operator": "lt", "rhs": "n"},
            {"target_column": "n", "operator": "lt", "rhs": "when"},
        ]),
    ));
    let got: Vec<&str> = i.iter().map(|i| i.field.as_deref().unwrap()).collect();
    assert_eq!(
        got,
        [
            "constraints[0].rhs",
            "constraints[1].rhs",
            "constraints[2].rhs"
        ]
    );
    assert!(
        i[0].message.contains("'when' is a date"),
        "{}",
        i[0].message
    );
    assert!(i[1].message.contains("one is a date"), "{}", i[1].message);
}
