//! Sampler columns at compile time: checking parameters (`invalid_sampler_params`) and
//! turning them into the distributions [`sampling`] draws from.
//!
//! Distributions follow DataDesigner's engine (numpy/scipy): uniform on `[low, high)`,
//! datetimes as whole seconds in `[start, end)` truncated to the unit, time deltas as whole
//! units in `[dt_min, dt_max)`, UUID4 hex strings, integer outputs for bernoulli, binomial and
//! poisson.

pub(super) mod constraints;
mod faker_locales;
mod faker_person;
pub(super) mod person;
mod person_compile;
mod person_fields;
mod phone;
mod sampling;
mod scipy;

use std::collections::HashMap;

use chrono::NaiveDateTime;
use rand_distr::{Binomial, Normal, Poisson};
use serde_json::Value;

use super::convert::{NumConvert, python_str};
use super::datetime::{DateFormat, Unit, parse_datetime};
use crate::domain::dataset::{
    ColumnConfig, ColumnKind, ConfigIssue, SamplerParams, SamplerType, codes,
};
use person_compile::{compile_faker, compile_person};
use scipy::ScipyDist;

/// One sampler's compiled distribution.
#[derive(Debug)]
pub(crate) enum Dist {
    Category {
        values: Vec<Value>,
        cumulative: Option<Vec<f64>>,
    },
    Subcategory {
        parent: usize,
        values: HashMap<String, Vec<Value>>,
    },
    Uniform {
        low: f64,
        high: f64,
        places: Option<i32>,
    },
    Gaussian {
        normal: Normal<f64>,
        places: Option<i32>,
    },
    Bernoulli {
        p: f64,
    },
    Binomial {
        dist: Binomial,
    },
    Poisson {
        dist: Option<Poisson<f64>>,
    },
    Uuid {
        prefix: String,
        short: bool,
        upper: bool,
    },
    Datetime {
        start: i64,
        end: i64,
        unit: Unit,
    },
    Timedelta {
        min: i64,
        max: i64,
        unit: Unit,
        reference: usize,
    },
    Scipy {
        dist: ScipyDist,
        places: Option<i32>,
    },
    BernoulliMixture {
        p: f64,
        dist: ScipyDist,
    },
    FakerPerson(Box<faker_person::FakerPerson>),
    Person(Box<person::PersonDraw>),
}

/// What a sampler drew, before `convert_to`.
#[derive(Debug, Clone)]
pub(crate) enum Sampled {
    Json(Value),
    DateTime(NaiveDateTime),
}

/// A sampler's output conversion.
#[derive(Debug)]
pub(crate) enum Convert {
    Plain,
    Number(NumConvert),
    Date(DateFormat),
}

/// Where compile-time problems of one sampler column go, and what compiling it may read.
pub(crate) struct SamplerIssues<'a> {
    pub(crate) column: &'a str,
    pub(crate) out: &'a mut Vec<ConfigIssue>,
    /// The managed person datasets (`person` samplers).
    pub(crate) people: &'a person::PeopleSource,
}

impl SamplerIssues<'_> {
    pub(crate) fn bad(&mut self, field: &str, detail: impl std::fmt::Display) {
        self.out.push(ConfigIssue::in_column(
            codes::INVALID_SAMPLER_PARAMS,
            self.column,
            Some(field),
            detail,
        ));
    }
}

/// Column names a sampler's parameters read (subcategory parent, timedelta reference).
pub(crate) fn param_references(params: &SamplerParams) -> Option<(&'static str, &str)> {
    match params {
        SamplerParams::Subcategory(p) => Some(("category", p.category.as_str())),
        SamplerParams::Timedelta(p) => {
            Some(("reference_column_name", p.reference_column_name.as_str()))
        }
        _ => None,
    }
}

/// Compiles one params object found at `field` (`params` or `conditional_params.<cond>`).
/// `slots` maps column names to record slots; `columns` gives the other columns' configs.
pub(crate) fn compile_dist(
    field: &str,
    params: &SamplerParams,
    slots: &HashMap<String, usize>,
    columns: &HashMap<&str, &ColumnConfig>,
    issues: &mut SamplerIssues<'_>,
) -> Option<Dist> {
    let before = issues.out.len();
    let f = |name: &str| format!("{field}.{name}");
    let check_p = |p: f64, issues: &mut SamplerIssues<'_>| {
        if !(0.0..=1.0).contains(&p) {
            issues.bad(&f("p"), format!("p must be between 0 and 1, got {p}"));
        }
    };
    let dist = match params {
        SamplerParams::Category(c) => {
            if c.values.is_empty() {
                issues.bad(&f("values"), "must contain at least one value");
            }
            let cumulative = match &c.weights {
                None => None,
                Some(w) => compile_weights(w, c.values.len(), &f("weights"), issues),
            };
            let values = c.values.iter().map(|s| s.0.clone()).collect();
            Dist::Category { values, cumulative }
        }
        SamplerParams::Subcategory(s) => {
            let parent = *slots.get(&s.category)?;
            check_parent(&s.category, &s.values, columns, &f("category"), issues);
            let mut values = HashMap::with_capacity(s.values.len());
            for (key, list) in &s.values {
                match list.as_array() {
                    Some(items) if !items.is_empty() && items.iter().all(is_scalar) => {
                        values.insert(key.clone(), items.clone());
                    }
                    _ => issues.bad(
                        &f(&format!("values.{key}")),
                        "must be a non-empty list of bools, strings or numbers",
                    ),
                }
            }
            Dist::Subcategory { parent, values }
        }
        SamplerParams::Uniform(u) => {
            if !(u.low.is_finite() && u.high.is_finite() && u.low < u.high) {
                issues.bad(
                    &f("low"),
                    format!("low ({}) must be less than high ({})", u.low, u.high),
                );
            }
            Dist::Uniform {
                low: u.low,
                high: u.high,
                places: u.decimal_places,
            }
        }
        SamplerParams::Gaussian(g) => match Normal::new(g.mean, g.stddev) {
            Ok(normal) if g.mean.is_finite() && g.stddev.is_finite() && g.stddev > 0.0 => {
                Dist::Gaussian {
                    normal,
                    places: g.decimal_places,
                }
            }
            _ => {
                let msg = format!(
                    "stddev must be positive and mean finite, got mean {} and stddev {}",
                    g.mean, g.stddev
                );
                issues.bad(&f("stddev"), msg);
                return None;
            }
        },
        SamplerParams::Bernoulli(b) => {
            check_p(b.p, issues);
            Dist::Bernoulli { p: b.p }
        }
        SamplerParams::Binomial(b) => {
            check_p(b.p, issues);
            if b.n < 0 {
                issues.bad(&f("n"), format!("n must be at least 0, got {}", b.n));
            }
            let dist = Binomial::new(b.n.max(0).unsigned_abs(), b.p.clamp(0.0, 1.0)).ok()?;
            Dist::Binomial { dist }
        }
        SamplerParams::Poisson(p) => {
            let ok = p.mean.is_finite() && p.mean >= 0.0 && p.mean <= Poisson::<f64>::MAX_LAMBDA;
            if !ok {
                issues.bad(
                    &f("mean"),
                    format!("mean must be a non-negative number, got {}", p.mean),
                );
                return None;
            }
            // rand_distr needs λ > 0; scipy's poisson(0) always draws 0.
            Dist::Poisson {
                dist: Poisson::new(p.mean).ok(),
            }
        }
        SamplerParams::Uuid(u) => Dist::Uuid {
            prefix: u.prefix.clone().unwrap_or_default(),
            short: u.short_form,
            upper: u.uppercase,
        },
        SamplerParams::Datetime(d) => {
            let unit = parse_unit(&d.unit, false, &f("unit"), issues);
            let start = parse_bound(&d.start, &f("start"), issues);
            let end = parse_bound(&d.end, &f("end"), issues);
            let (start, end, unit) = (start?, end?, unit?);
            // numpy draws whole seconds in [start, end), floored to the second.
            let (start, end) = (start.and_utc().timestamp(), end.and_utc().timestamp());
            if start >= end {
                issues.bad(
                    &f("end"),
                    format!("end ({}) must be after start ({})", d.end, d.start),
                );
            }
            Dist::Datetime { start, end, unit }
        }
        SamplerParams::Timedelta(t) => {
            let unit = parse_unit(&t.unit, true, &f("unit"), issues);
            if t.dt_min < 0 {
                issues.bad(
                    &f("dt_min"),
                    format!("dt_min must be at least 0, got {}", t.dt_min),
                );
            }
            if t.dt_min >= t.dt_max {
                let msg = format!(
                    "dt_min ({}) must be less than dt_max ({})",
                    t.dt_min, t.dt_max
                );
                issues.bad(&f("dt_min"), msg);
            }
            let reference = *slots.get(&t.reference_column_name)?;
            Dist::Timedelta {
                min: t.dt_min,
                max: t.dt_max,
                unit: unit?,
                reference,
            }
        }
        SamplerParams::Scipy(sp) => match scipy::compile(&sp.dist_name, &sp.dist_params) {
            Ok(dist) => Dist::Scipy {
                dist,
                places: sp.decimal_places,
            },
            Err((key, msg)) => {
                issues.bad(&f(&key), msg);
                return None;
            }
        },
        SamplerParams::BernoulliMixture(b) => {
            check_p(b.p, issues);
            match scipy::compile(&b.dist_name, &b.dist_params) {
                Ok(dist) => Dist::BernoulliMixture { p: b.p, dist },
                Err((key, msg)) => {
                    issues.bad(&f(&key), msg);
                    return None;
                }
            }
        }
        SamplerParams::PersonFromFaker(pf) => {
            Dist::FakerPerson(Box::new(compile_faker(field, pf, issues)?))
        }
        SamplerParams::Person(pp) => Dist::Person(Box::new(compile_person(field, pp, issues)?)),
    };
    (issues.out.len() == before).then_some(dist)
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::Bool(_) | Value::String(_) | Value::Number(_))
}

fn compile_weights(
    w: &[f64],
    n: usize,
    field: &str,
    issues: &mut SamplerIssues<'_>,
) -> Option<Vec<f64>> {
    if w.len() != n {
        let msg = format!(
            "'values' and 'weights' must have the same length ({n} values, {} weights)",
            w.len()
        );
        issues.bad(field, msg);
        return None;
    }
    if w.iter().any(|x| !x.is_finite() || *x < 0.0) {
        issues.bad(field, "weights must be non-negative numbers");
        return None;
    }
    let mut total = 0.0;
    let cumulative: Vec<f64> = w
        .iter()
        .map(|x| {
            total += x;
            total
        })
        .collect();
    if total <= 0.0 || !total.is_finite() {
        issues.bad(field, "'weights' must sum to a finite, non-zero value");
        return None;
    }
    Some(cumulative)
}

/// Checks a subcategory's parent is a category sampler whose every value has a mapping.
fn check_parent(
    parent: &str,
    values: &serde_json::Map<String, Value>,
    columns: &HashMap<&str, &ColumnConfig>,
    field: &str,
    issues: &mut SamplerIssues<'_>,
) {
    let Some(ColumnConfig {
        kind: ColumnKind::Sampler(s),
        ..
    }) = columns.get(parent)
    else {
        issues.bad(
            field,
            format!("parent column '{parent}' must be a category sampler"),
        );
        return;
    };
    let all_params = std::iter::once(&s.params).chain(s.conditional_params.iter().map(|(_, p)| p));
    let mut missing = Vec::new();
    for params in all_params {
        let SamplerParams::Category(c) = params else {
            issues.bad(
                field,
                format!(
                    "parent column '{parent}' must be a category sampler, not {}",
                    s.sampler_type.as_str()
                ),
            );
            return;
        };
        for v in &c.values {
            let key = python_str(&v.0);
            if lookup(values, &v.0).is_none() && !missing.contains(&key) {
                missing.push(key);
            }
        }
    }
    if !missing.is_empty() {
        let msg = format!(
            "values has no entry for {parent} value(s): {}",
            missing.join(", ")
        );
        issues.bad(&field.replace(".category", ".values"), msg);
    }
}

/// Finds the subcategory list for a parent value (keys are strings; `True`/`true` both work).
fn lookup<'m>(map: &'m serde_json::Map<String, Value>, parent: &Value) -> Option<&'m Value> {
    map.get(&python_str(parent)).or_else(|| match parent {
        Value::Bool(b) => map.get(if *b { "true" } else { "false" }),
        _ => None,
    })
}

fn parse_unit(
    s: &str,
    fixed_only: bool,
    field: &str,
    issues: &mut SamplerIssues<'_>,
) -> Option<Unit> {
    match Unit::parse(s) {
        Some(Unit::Year | Unit::Month) if fixed_only => {
            issues.bad(field, format!("unit must be one of D, h, m, s, got '{s}'"));
            None
        }
        Some(u) => Some(u),
        None => {
            let allowed = if fixed_only {
                "D, h, m, s"
            } else {
                "Y, M, D, h, m, s"
            };
            issues.bad(field, format!("unit must be one of {allowed}, got '{s}'"));
            None
        }
    }
}

fn parse_bound(s: &str, field: &str, issues: &mut SamplerIssues<'_>) -> Option<NaiveDateTime> {
    let dt = parse_datetime(s);
    if dt.is_none() {
        issues.bad(field, format!("invalid datetime format: '{s}'"));
    }
    dt
}

/// Compiles `convert_to` for a sampler type (DataDesigner's pre/post-processing mixins).
pub(crate) fn compile_convert(
    sampler_type: SamplerType,
    convert_to: Option<&str>,
    issues: &mut SamplerIssues<'_>,
) -> Option<Convert> {
    match (sampler_type, convert_to) {
        (SamplerType::Datetime | SamplerType::Timedelta, None) => {
            Some(Convert::Date(DateFormat::default_format()))
        }
        (SamplerType::Datetime | SamplerType::Timedelta, Some(fmt)) => {
            match DateFormat::compile(fmt) {
                Ok(f) => Some(Convert::Date(f)),
                Err(msg) => {
                    issues.bad("convert_to", msg);
                    None
                }
            }
        }
        // UUIDs and people pass through unchanged, as in DataDesigner (`PassthroughMixin`).
        (SamplerType::Uuid | SamplerType::Person | SamplerType::PersonFromFaker, _) | (_, None) => {
            Some(Convert::Plain)
        }
        (_, Some(to)) => match NumConvert::parse(to) {
            Some(c) => Some(Convert::Number(c)),
            None => {
                issues.bad(
                    "convert_to",
                    format!("invalid convert_to '{to}'; must be one of float, int, str"),
                );
                None
            }
        },
    }
}
