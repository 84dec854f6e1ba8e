//! The person and scipy-backed samplers through a whole plan: values in Jinja and
//! `convert_to`, determinism, and the config issues they are refused with.

use serde_json::json;

use super::*;

#[test]
fn faker_person_fields_reach_jinja_and_are_deterministic() {
    let plan = plan_columns(json!([
        sampler(
            "person",
            "person_from_faker",
            json!({"locale": "fr_FR", "sex": "Female", "age_range": [30, 40], "city": ["Lyon"]})
        ),
        expr(
            "greeting",
            "{{ person.first_name }} {{ person.last_name }} of {{ person.city }}"
        ),
        expr("age", "{{ person.age }}"),
    ]));
    for i in 0..20 {
        let r = row(&plan, i);
        let p = &r["person"];
        assert_eq!(p["sex"], "Female");
        assert_eq!(p["locale"], "fr_FR");
        let greeting = format!(
            "{} {} of Lyon",
            p["first_name"].as_str().unwrap(),
            p["last_name"].as_str().unwrap()
        );
        assert_eq!(r["greeting"], greeting);
        let age = p["age"].as_i64().unwrap();
        assert!((30..=40).contains(&age));
        assert_eq!(r["age"], age.to_string());
        assert_eq!(row(&plan, i)["person"]["uuid"], p["uuid"]);
    }
    assert_ne!(
        row(&plan, 0)["person"]["uuid"],
        row(&plan, 1)["person"]["uuid"]
    );
}

#[test]
fn person_convert_to_passes_through_as_in_datadesigner() {
    let mut col = sampler("p", "person_from_faker", json!({}));
    col["convert_to"] = json!("int");
    let plan = plan_columns(json!([col]));
    assert!(row(&plan, 0)["p"].is_object());
}

#[test]
fn scipy_values_round_and_convert() {
    let mut as_int = sampler(
        "n",
        "scipy",
        json!({"dist_name": "norm", "dist_params": {"loc": 100, "scale": 5}}),
    );
    as_int["convert_to"] = json!("int");
    let plan = plan_columns(json!([
        sampler(
            "g",
            "scipy",
            json!({"dist_name": "gamma", "dist_params": {"a": 2, "scale": 3}, "decimal_places": 1})
        ),
        sampler(
            "k",
            "scipy",
            json!({"dist_name": "poisson", "dist_params": {"mu": 3}})
        ),
        as_int,
    ]));
    for i in 0..100 {
        let r = row(&plan, i);
        let g = r["g"].as_f64().unwrap();
        assert!(
            g > 0.0 && (g * 10.0 - (g * 10.0).round()).abs() < 1e-9,
            "{g}"
        );
        assert!(r["k"].is_u64(), "poisson draws are integers: {}", r["k"]);
        assert!(r["n"].is_i64(), "convert_to int: {}", r["n"]);
    }
}

#[test]
fn bernoulli_mixture_is_zero_with_probability_one_minus_p() {
    let plan = plan_columns(json!([sampler(
        "m",
        "bernoulli_mixture",
        json!({"p": 0.3, "dist_name": "expon", "dist_params": {"scale": 10}})
    )]));
    let n = 4000;
    let zeros = (0..n)
        .filter(|i| row(&plan, *i)["m"].as_f64().unwrap() == 0.0)
        .count();
    let share = zeros as f64 / n as f64;
    assert!((share - 0.7).abs() < 0.03, "{share}");
}

#[test]
fn bad_params_are_named() {
    let i = column_issues(json!([
        sampler("a", "person_from_faker", json!({"locale": "xx_XX"})),
        sampler(
            "b",
            "person_from_faker",
            json!({"sex": "other", "age_range": [50, 20]})
        ),
        sampler(
            "c",
            "scipy",
            json!({"dist_name": "zipf", "dist_params": {}})
        ),
        sampler(
            "d",
            "bernoulli_mixture",
            json!({"p": 2, "dist_name": "norm", "dist_params": {"sigma": 1}})
        ),
    ]));
    let got: Vec<(&str, &str, &str)> = i
        .iter()
        .map(|i| {
            (
                i.code,
                i.column.as_deref().unwrap(),
                i.field.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("invalid_sampler_params", "a", "params.locale"),
            ("invalid_sampler_params", "b", "params.sex"),
            ("invalid_sampler_params", "b", "params.age_range"),
            ("invalid_sampler_params", "c", "params.dist_name"),
            ("invalid_sampler_params", "d", "params.p"),
            ("invalid_sampler_params", "d", "params.dist_params.sigma"),
        ]
    );
    assert!(
        i[0].message.contains("Supported locales: ar_AA, ar_AE,"),
        "{}",
        i[0].message
    );
    assert!(
        i[2].message.contains("min age) must be less than"),
        "{}",
        i[2].message
    );
    assert!(
        i[3].message.contains("served: norm, uniform, expon"),
        "{}",
        i[3].message
    );
}

#[test]
fn person_without_datasets_says_how_to_install_them() {
    let i = column_issues(json!([sampler("p", "person", json!({"locale": "ja_JP"}))]));
    assert_eq!(i.len(), 1);
    assert_eq!(i[0].field.as_deref(), Some("params.locale"));
    assert!(
        i[0].message
            .contains("data-designer download personas --locale ja_JP"),
        "{}",
        i[0].message
    );
    let i = column_issues(json!([sampler("p", "person", json!({"locale": "it_IT"}))]));
    assert!(
        i[0].message
            .contains("only supported for the following locales")
    );
}
