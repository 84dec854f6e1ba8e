//! Sampler values over many records: ranges, distributions, formats, conditions, convert_to.

use serde_json::json;

use super::*;

const N: u64 = 4000;

/// Values of column `name` over records `0..N`.
fn draws(plan: &Plan, name: &str) -> Vec<Value> {
    (0..N).map(|i| row(plan, i)[name].clone()).collect()
}

fn floats(values: &[Value]) -> Vec<f64> {
    values.iter().map(|v| v.as_f64().unwrap()).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn share(values: &[Value], of: &Value) -> f64 {
    values.iter().filter(|v| *v == of).count() as f64 / values.len() as f64
}

#[test]
fn category_respects_values_and_weights() {
    let plan = plan_columns(json!([
        sampler("plain", "category", json!({"values": ["a", 2, true]})),
        sampler(
            "weighted",
            "category",
            json!({"values": ["x", "y"], "weights": [3, 1]})
        ),
    ]));
    let plain = draws(&plan, "plain");
    for v in [json!("a"), json!(2), json!(true)] {
        assert!((share(&plain, &v) - 1.0 / 3.0).abs() < 0.04, "{v}");
    }
    let weighted = draws(&plan, "weighted");
    assert!((share(&weighted, &json!("x")) - 0.75).abs() < 0.03);
}

#[test]
fn subcategory_follows_its_parent() {
    let plan = plan_columns(json!([
        sampler(
            "sub",
            "subcategory",
            json!({"category": "kind",
            "values": {"fruit": ["apple", "pear"], "veg": ["leek"], "True": ["yes"]}})
        ),
        sampler(
            "kind",
            "category",
            json!({"values": ["fruit", "veg", true]})
        ),
    ]));
    for i in 0..200 {
        let r = row(&plan, i);
        let ok = match r["kind"].clone() {
            Value::String(k) if k == "fruit" => {
                ["apple", "pear"].contains(&r["sub"].as_str().unwrap())
            }
            Value::String(_) => r["sub"] == json!("leek"),
            _ => r["sub"] == json!("yes"),
        };
        assert!(ok, "{r:?}");
    }
}

#[test]
fn uniform_gaussian_and_rounding() {
    let plan = plan_columns(json!([
        sampler("u", "uniform", json!({"low": 10, "high": 20})),
        sampler(
            "r",
            "uniform",
            json!({"low": 0, "high": 1, "decimal_places": 2})
        ),
        sampler("g", "gaussian", json!({"mean": 5, "stddev": 2})),
    ]));
    let u = floats(&draws(&plan, "u"));
    assert!(u.iter().all(|x| (10.0..20.0).contains(x)));
    assert!((mean(&u) - 15.0).abs() < 0.3);
    let r = floats(&draws(&plan, "r"));
    assert!(
        r.iter()
            .all(|x| ((x * 100.0).round() - x * 100.0).abs() < 1e-9)
    );
    let g = floats(&draws(&plan, "g"));
    let m = mean(&g);
    let sd = (g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64).sqrt();
    assert!(
        (m - 5.0).abs() < 0.15 && (sd - 2.0).abs() < 0.15,
        "mean {m} sd {sd}"
    );
}

#[test]
fn discrete_distributions_give_integers() {
    let plan = plan_columns(json!([
        sampler("b", "bernoulli", json!({"p": 0.3})),
        sampler("n", "binomial", json!({"n": 10, "p": 0.5})),
        sampler("p", "poisson", json!({"mean": 4})),
        sampler("z", "poisson", json!({"mean": 0})),
    ]));
    let b = draws(&plan, "b");
    assert!(b.iter().all(|v| *v == json!(0) || *v == json!(1)));
    assert!((share(&b, &json!(1)) - 0.3).abs() < 0.03);
    let n: Vec<u64> = draws(&plan, "n")
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(n.iter().all(|x| *x <= 10));
    let p: Vec<f64> = draws(&plan, "p")
        .iter()
        .map(|v| v.as_u64().unwrap() as f64)
        .collect();
    assert!((mean(&p) - 4.0).abs() < 0.15);
    assert!(draws(&plan, "z").iter().all(|v| *v == json!(0)));
}

#[test]
fn uuid_formats() {
    let plan = plan_columns(json!([
        sampler("full", "uuid", json!({})),
        sampler(
            "short",
            "uuid",
            json!({"prefix": "user-", "short_form": true, "uppercase": true})
        ),
    ]));
    let r = row(&plan, 0);
    let full = r["full"].as_str().unwrap();
    assert_eq!(full.len(), 32);
    assert!(
        full.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(&full[12..13], "4");
    let short = r["short"].as_str().unwrap();
    assert!(short.starts_with("user-") && short.len() == 13);
    assert!(
        short[5..]
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    );
    let ids: std::collections::HashSet<Value> = draws(&plan, "full").into_iter().collect();
    assert_eq!(ids.len() as u64, N);
}

#[test]
fn datetime_and_timedelta() {
    let mut formatted = sampler(
        "day",
        "datetime",
        json!({"start": "2024-01-01", "end": "2024-03-01"}),
    );
    formatted["convert_to"] = json!("%d/%m/%Y");
    let plan = plan_columns(json!([
        sampler(
            "at",
            "datetime",
            json!({"start": "2024-01-01T00:00:00", "end": "2024-01-02", "unit": "h"})
        ),
        sampler(
            "month",
            "datetime",
            json!({"start": "2020-01-01", "end": "2025-01-01", "unit": "M"})
        ),
        formatted,
        sampler(
            "due",
            "timedelta",
            json!({"dt_min": 1, "dt_max": 3, "reference_column_name": "day"})
        ),
    ]));
    for i in 0..300 {
        let r = row(&plan, i);
        let at = r["at"].as_str().unwrap();
        assert!(
            at.starts_with("2024-01-01T") && at.ends_with(":00:00"),
            "{at}"
        );
        assert!(r["month"].as_str().unwrap().ends_with("-01T00:00:00"));
        // `day` is formatted, but the timedelta still adds to the sampled datetime.
        let day =
            chrono::NaiveDate::parse_from_str(r["day"].as_str().unwrap(), "%d/%m/%Y").unwrap();
        let due =
            chrono::NaiveDateTime::parse_from_str(r["due"].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S")
                .unwrap();
        let days = (due.date() - day).num_days();
        assert!((1..3).contains(&days), "{days}");
    }
}

#[test]
fn timedelta_can_reference_a_datetime_string_column() {
    let plan = plan(json!({
        "columns": [sampler("later", "timedelta", json!({"dt_min": 2, "dt_max": 3, "reference_column_name": "when", "unit": "h"}))],
        "seed_config": {"source": {"seed_type": "inline", "rows": [{"when": "2024-05-01 10:00:00"}, {"when": "bad"}]}},
    }));
    assert_eq!(row(&plan, 0)["later"], json!("2024-05-01T12:00:00"));
    let (err, values) = failure(&plan, 1);
    assert_eq!(
        (&err.code, &err.stage),
        (&RecordErrorCode::SamplerError, &Some(RecordStage::Sample))
    );
    assert_eq!(values["when"], json!("bad"));
}

#[test]
fn conditional_params_pick_the_first_true_condition() {
    let mut score = sampler("score", "uniform", json!({"low": 0, "high": 1}));
    score["conditional_params"] = json!({
        "level == 'hard'": {"low": 100, "high": 101},
        "level != 'easy'": {"low": 50, "high": 51, "sampler_type": "uniform"},
    });
    let plan = plan_columns(json!([
        score,
        sampler(
            "level",
            "category",
            json!({"values": ["easy", "medium", "hard"]})
        ),
    ]));
    for i in 0..100 {
        let r = row(&plan, i);
        let s = r["score"].as_f64().unwrap();
        let expected = match r["level"].as_str().unwrap() {
            "hard" => 100.0..101.0,
            "medium" => 50.0..51.0,
            _ => 0.0..1.0,
        };
        assert!(expected.contains(&s), "{r:?}");
    }
}

#[test]
fn convert_to_numbers() {
    let with = |mut col: Value, to: &str| {
        col["convert_to"] = json!(to);
        col
    };
    let plan = plan_columns(json!([
        with(
            sampler("i", "uniform", json!({"low": 0, "high": 10})),
            "int"
        ),
        with(sampler("s", "binomial", json!({"n": 5, "p": 0.5})), "str"),
        with(sampler("f", "bernoulli", json!({"p": 1})), "float"),
        with(sampler("bad", "category", json!({"values": ["x"]})), "int"),
    ]));
    let (err, values) = failure(&plan, 0);
    assert!(values["i"].is_i64());
    assert!(values["s"].as_str().unwrap().parse::<u64>().is_ok());
    assert_eq!(values["f"], json!(1.0));
    assert_eq!(
        (err.code.as_str(), err.column.as_deref()),
        ("type_conversion", Some("bad"))
    );
}
