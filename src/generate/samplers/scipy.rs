//! The scipy.stats distributions the `scipy` and `bernoulli_mixture` samplers serve: checking
//! `dist_name` and `dist_params` (scipy's keyword names and ranges) and drawing from them.
//!
//! Every distribution keeps scipy's meaning: a continuous one draws its standard form `x` and
//! returns `loc + scale * x`; a discrete one draws a whole number and adds `loc` (discrete
//! distributions have no `scale`). Draws come from `rand_distr`, except where it has no such
//! distribution (laplace, logistic, truncnorm, negative binomial), which are a few lines here.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::{
    Beta, Binomial, Cauchy, ChiSquared, Distribution, Exp1, Gamma, Geometric, Poisson,
    StandardNormal, StudentT, Triangular, Weibull,
};
use serde_json::{Map, Value};

/// The served distributions, as listed in messages: `(name, shape parameters)`.
pub(crate) const SERVED: &[(&str, &[&str])] = &[
    ("norm", &[]),
    ("uniform", &[]),
    ("expon", &[]),
    ("gamma", &["a"]),
    ("beta", &["a", "b"]),
    ("lognorm", &["s"]),
    ("truncnorm", &["a", "b"]),
    ("t", &["df"]),
    ("chi2", &["df"]),
    ("triang", &["c"]),
    ("weibull_min", &["c"]),
    ("laplace", &[]),
    ("logistic", &[]),
    ("cauchy", &[]),
    ("pareto", &["b"]),
    ("poisson", &["mu"]),
    ("binom", &["n", "p"]),
    ("geom", &["p"]),
    ("nbinom", &["n", "p"]),
    ("randint", &["low", "high"]),
];

/// Discrete distributions (no `scale`; whole-number draws).
const DISCRETE: &[&str] = &["poisson", "binom", "geom", "nbinom", "randint"];

/// A compiled distribution.
#[derive(Debug, Clone)]
pub(crate) enum ScipyDist {
    Continuous {
        kind: Continuous,
        loc: f64,
        scale: f64,
    },
    Discrete {
        kind: Discrete,
        loc: i64,
    },
}

#[derive(Debug, Clone)]
pub(crate) enum Continuous {
    Norm,
    Uniform,
    Expon,
    Gamma(Gamma<f64>),
    Beta(Beta<f64>),
    Lognorm(f64),
    Truncnorm(f64, f64),
    T(StudentT<f64>),
    Chi2(ChiSquared<f64>),
    Triang(Triangular<f64>),
    Weibull(Weibull<f64>),
    Laplace,
    Logistic,
    Cauchy(Cauchy<f64>),
    Pareto(f64),
}

#[derive(Debug, Clone)]
pub(crate) enum Discrete {
    /// `None` when `mu == 0` (always 0).
    Poisson(Option<Poisson<f64>>),
    Binom(Binomial),
    Geom(Geometric),
    Nbinom {
        n: f64,
        p: f64,
    },
    Randint {
        low: i64,
        high: i64,
    },
}

/// A parameter problem: `(parameter path inside dist_params, message)`.
pub(crate) type ParamError = (String, String);

/// Compiles `dist_name` with `dist_params`. Errors name `dist_name` or `dist_params.<key>`.
pub(crate) fn compile(name: &str, params: &Map<String, Value>) -> Result<ScipyDist, ParamError> {
    let Some((_, shapes)) = SERVED.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = SERVED.iter().map(|(n, _)| *n).collect();
        return Err((
            "dist_name".into(),
            format!(
                "distribution '{name}' is not served by synthgate; served: {}",
                names.join(", ")
            ),
        ));
    };
    let discrete = DISCRETE.contains(&name);
    for key in params.keys() {
        let known = shapes.contains(&key.as_str()) || key == "loc" || (!discrete && key == "scale");
        if !known {
            let mut allowed: Vec<&str> = shapes.to_vec();
            allowed.push("loc");
            if !discrete {
                allowed.push("scale");
            }
            return Err((
                at(key),
                format!(
                    "'{name}' takes no parameter '{key}'; its parameters: {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
    let num = |key: &str| -> Result<Option<f64>, ParamError> {
        match params.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err((at(key), format!("{key} must be a finite number"))),
            },
            Some(other) => Err((at(key), format!("{key} must be a number, got {other}"))),
        }
    };
    let mut shape = Vec::with_capacity(shapes.len());
    for s in *shapes {
        match num(s)? {
            Some(x) => shape.push(x),
            None => return Err((at(s), format!("'{name}' needs the shape parameter '{s}'"))),
        }
    }
    let loc = num("loc")?.unwrap_or(0.0);
    let bad = |key: &str, why: &str| -> ParamError { (at(key), format!("{key} {why}")) };
    if discrete {
        let loc = whole(loc)
            .ok_or_else(|| bad("loc", "must be a whole number for a discrete distribution"))?;
        let kind = match (name, shape.as_slice()) {
            ("poisson", &[mu]) => {
                if !(0.0..=Poisson::<f64>::MAX_LAMBDA).contains(&mu) {
                    return Err(bad("mu", "must be non-negative"));
                }
                Discrete::Poisson(Poisson::new(mu).ok())
            }
            ("binom", &[n, p]) => {
                let n = whole(n)
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad("n", "must be a whole number >= 0"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(bad("p", "must be between 0 and 1"));
                }
                Discrete::Binom(
                    Binomial::new(n.unsigned_abs(), p).map_err(|e| bad("p", &e.to_string()))?,
                )
            }
            ("geom", &[p]) => {
                if !(p > 0.0 && p <= 1.0) {
                    return Err(bad("p", "must be in (0, 1]"));
                }
                Discrete::Geom(Geometric::new(p).map_err(|e| bad("p", &e.to_string()))?)
            }
            ("nbinom", &[n, p]) => {
                if n <= 0.0 {
                    return Err(bad("n", "must be positive"));
                }
                if !(p > 0.0 && p <= 1.0) {
                    return Err(bad("p", "must be in (0, 1]"));
                }
                Discrete::Nbinom { n, p }
            }
            ("randint", &[low, high]) => {
                let low = whole(low).ok_or_else(|| bad("low", "must be a whole number"))?;
                let high = whole(high).ok_or_else(|| bad("high", "must be a whole number"))?;
                if low >= high {
                    return Err(bad("high", &format!("must be greater than low ({low})")));
                }
                Discrete::Randint { low, high }
            }
            _ => {
                return Err((
                    "dist_name".into(),
                    format!("'{name}' is not a discrete distribution"),
                ));
            }
        };
        return Ok(ScipyDist::Discrete { kind, loc });
    }
    let scale = num("scale")?.unwrap_or(1.0);
    if scale <= 0.0 {
        return Err(bad("scale", "must be positive"));
    }
    let positive = |key: &str, x: f64| {
        if x > 0.0 {
            Ok(x)
        } else {
            Err(bad(key, "must be positive"))
        }
    };
    let kind = match (name, shape.as_slice()) {
        ("norm", []) => Continuous::Norm,
        ("uniform", []) => Continuous::Uniform,
        ("expon", []) => Continuous::Expon,
        ("laplace", []) => Continuous::Laplace,
        ("logistic", []) => Continuous::Logistic,
        ("cauchy", []) => {
            Continuous::Cauchy(Cauchy::new(0.0, 1.0).map_err(|e| bad("scale", &e.to_string()))?)
        }
        ("gamma", &[a]) => Continuous::Gamma(
            Gamma::new(positive("a", a)?, 1.0).map_err(|e| bad("a", &e.to_string()))?,
        ),
        ("beta", &[a, b]) => {
            let (a, b) = (positive("a", a)?, positive("b", b)?);
            Continuous::Beta(Beta::new(a, b).map_err(|e| bad("a", &e.to_string()))?)
        }
        ("lognorm", &[s]) => Continuous::Lognorm(positive("s", s)?),
        ("truncnorm", &[a, b]) => {
            if a >= b {
                return Err(bad("b", &format!("must be greater than a ({a})")));
            }
            Continuous::Truncnorm(a, b)
        }
        ("t", &[df]) => Continuous::T(
            StudentT::new(positive("df", df)?).map_err(|e| bad("df", &e.to_string()))?,
        ),
        ("chi2", &[df]) => Continuous::Chi2(
            ChiSquared::new(positive("df", df)?).map_err(|e| bad("df", &e.to_string()))?,
        ),
        ("triang", &[c]) => {
            if !(0.0..=1.0).contains(&c) {
                return Err(bad("c", "must be between 0 and 1"));
            }
            Continuous::Triang(Triangular::new(0.0, 1.0, c).map_err(|e| bad("c", &e.to_string()))?)
        }
        ("weibull_min", &[c]) => Continuous::Weibull(
            Weibull::new(1.0, positive("c", c)?).map_err(|e| bad("c", &e.to_string()))?,
        ),
        ("pareto", &[b]) => Continuous::Pareto(positive("b", b)?),
        _ => {
            return Err((
                "dist_name".into(),
                format!("'{name}' is not a continuous distribution"),
            ));
        }
    };
    Ok(ScipyDist::Continuous { kind, loc, scale })
}

fn at(key: &str) -> String {
    format!("dist_params.{key}")
}

/// `x` as an integer when it is a whole number in `i64` range.
fn whole(x: f64) -> Option<i64> {
    (x.fract() == 0.0 && x.abs() < 9.0e15).then_some(x as i64)
}

/// One draw: a float for continuous distributions, an integer for discrete ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Draw {
    Float(f64),
    Int(i64),
}

impl ScipyDist {
    /// Draws one value.
    pub(crate) fn sample(&self, rng: &mut ChaCha8Rng) -> Draw {
        match self {
            Self::Continuous { kind, loc, scale } => Draw::Float(loc + scale * kind.standard(rng)),
            Self::Discrete { kind, loc } => Draw::Int(kind.draw(rng).saturating_add(*loc)),
        }
    }
}

impl Continuous {
    fn standard(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Self::Norm => StandardNormal.sample(rng),
            Self::Uniform => rng.random::<f64>(),
            Self::Expon => Exp1.sample(rng),
            Self::Gamma(d) => d.sample(rng),
            Self::Beta(d) => d.sample(rng),
            Self::Lognorm(s) => {
                let z: f64 = StandardNormal.sample(rng);
                (s * z).exp()
            }
            Self::Truncnorm(a, b) => truncnorm(*a, *b, rng),
            Self::T(d) => d.sample(rng),
            Self::Chi2(d) => d.sample(rng),
            Self::Triang(d) => d.sample(rng),
            Self::Weibull(d) => d.sample(rng),
            Self::Laplace => {
                // Inverse CDF on u in (-1/2, 1/2).
                let u = open01(rng) - 0.5;
                -u.signum() * (1.0 - 2.0 * u.abs()).ln()
            }
            Self::Logistic => {
                let u = open01(rng);
                (u / (1.0 - u)).ln()
            }
            Self::Cauchy(d) => d.sample(rng),
            // scipy's standard pareto has support x >= 1: U^(-1/b).
            Self::Pareto(b) => open01(rng).powf(-1.0 / b),
        }
    }
}

impl Discrete {
    fn draw(&self, rng: &mut ChaCha8Rng) -> i64 {
        match self {
            Self::Poisson(d) => d.as_ref().map_or(0, |d| d.sample(rng) as i64),
            Self::Binom(d) => i64::try_from(d.sample(rng)).unwrap_or(i64::MAX),
            // rand_distr counts failures before the first success; scipy counts trials.
            Self::Geom(d) => i64::try_from(d.sample(rng)).unwrap_or(i64::MAX - 1) + 1,
            Self::Nbinom { n, p } => {
                if *p >= 1.0 {
                    return 0;
                }
                // A gamma-Poisson mixture: failures before the n-th success.
                let lambda = Gamma::new(*n, (1.0 - p) / p).map_or(0.0, |g| g.sample(rng));
                match Poisson::new(lambda.min(Poisson::<f64>::MAX_LAMBDA)) {
                    Ok(d) => d.sample(rng) as i64,
                    Err(_) => 0,
                }
            }
            Self::Randint { low, high } => rng.random_range(*low..*high),
        }
    }
}

/// A uniform draw in (0, 1).
fn open01(rng: &mut ChaCha8Rng) -> f64 {
    loop {
        let u = rng.random::<f64>();
        if u > 0.0 {
            return u;
        }
    }
}

/// A standard normal draw restricted to `[a, b]` (Robert, 1995: uniform or translated
/// exponential proposals, each accepting at least about a third of the time).
fn truncnorm(a: f64, b: f64, rng: &mut ChaCha8Rng) -> f64 {
    if a >= 0.0 {
        return upper_tail(a, b, rng);
    }
    if b <= 0.0 {
        return -upper_tail(-b, -a, rng);
    }
    // The interval holds the mode.
    if b - a < 2.5 {
        loop {
            let z = a + (b - a) * rng.random::<f64>();
            if rng.random::<f64>() <= (-z * z / 2.0).exp() {
                return z;
            }
        }
    }
    loop {
        let z: f64 = StandardNormal.sample(rng);
        if (a..=b).contains(&z) {
            return z;
        }
    }
}

/// `[a, b]` with `0 <= a < b` (b may be infinite).
fn upper_tail(a: f64, b: f64, rng: &mut ChaCha8Rng) -> f64 {
    if (b - a) * (a + b) <= 2.0 {
        loop {
            let z = a + (b - a) * rng.random::<f64>();
            if rng.random::<f64>() <= ((a * a - z * z) / 2.0).exp() {
                return z;
            }
        }
    }
    let alpha = (a + (a * a + 4.0).sqrt()) / 2.0;
    loop {
        let e: f64 = Exp1.sample(rng);
        let z = a + e / alpha;
        if z <= b && rng.random::<f64>() <= (-(z - alpha) * (z - alpha) / 2.0).exp() {
            return z;
        }
    }
}

#[cfg(test)]
mod tests;
