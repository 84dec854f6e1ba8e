//! Drawing sampler values for one record from the column's own random stream, and applying
//! `convert_to` to the draw.

use chrono::DateTime;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::Distribution;
use serde_json::Value;

use super::super::convert::{convert_number, float_value, python_str, round_places};
use super::super::datetime::{floor_to_unit, parse_datetime};
use super::scipy::Draw;
use super::{Convert, Dist, Sampled};

impl Dist {
    /// Draws one value. `raw(slot)` gives another sampler's draw, `value(slot)` any column's value.
    pub(crate) fn sample(
        &self,
        rng: &mut ChaCha8Rng,
        raw: impl Fn(usize) -> Option<Sampled>,
        value: impl Fn(usize) -> Value,
    ) -> Result<Sampled, String> {
        let json = match self {
            Self::Category { values, cumulative } => pick(values, cumulative.as_deref(), rng),
            Self::Subcategory { parent, values } => {
                let parent_value = match raw(*parent) {
                    Some(Sampled::Json(v)) => v,
                    _ => value(*parent),
                };
                let key = python_str(&parent_value);
                let list = values.get(&key).or_else(|| match parent_value {
                    Value::Bool(b) => values.get(if b { "true" } else { "false" }),
                    _ => None,
                });
                let list =
                    list.ok_or_else(|| format!("no subcategory values for parent value {key}"))?;
                pick(list, None, rng)
            }
            Self::Uniform { low, high, places } => {
                let x = low + (high - low) * rng.random::<f64>();
                float_value(places.map_or(x, |p| round_places(x, p)))?
            }
            Self::Gaussian { normal, places } => {
                let x = normal.sample(rng);
                float_value(places.map_or(x, |p| round_places(x, p)))?
            }
            Self::Bernoulli { p } => Value::from(u8::from(rng.random::<f64>() < *p)),
            Self::Binomial { dist } => Value::from(dist.sample(rng)),
            // A Poisson draw is a whole number well inside u64 (λ ≤ MAX_LAMBDA).
            Self::Poisson { dist } => Value::from(dist.map_or(0.0, |d| d.sample(rng)) as u64),
            Self::Uuid {
                prefix,
                short,
                upper,
            } => Value::String(uuid(rng, prefix, *short, *upper)),
            Self::Datetime { start, end, unit } => {
                let secs = rng.random_range(*start..*end);
                let dt = DateTime::from_timestamp(secs, 0).ok_or("datetime out of range")?;
                return Ok(Sampled::DateTime(floor_to_unit(dt.naive_utc(), *unit)));
            }
            Self::Timedelta {
                min,
                max,
                unit,
                reference,
            } => {
                let base = match raw(*reference) {
                    Some(Sampled::DateTime(dt)) => dt,
                    _ => match value(*reference) {
                        Value::String(s) => parse_datetime(&s)
                            .ok_or_else(|| format!("reference value {s:?} is not a datetime"))?,
                        other => return Err(format!("reference value {other} is not a datetime")),
                    },
                };
                let delta = unit
                    .duration(rng.random_range(*min..*max))
                    .ok_or("time delta out of range")?;
                let dt = base
                    .checked_add_signed(delta)
                    .ok_or("datetime out of range")?;
                return Ok(Sampled::DateTime(dt));
            }
            Self::Scipy { dist, places } => match dist.sample(rng) {
                Draw::Float(x) => float_value(places.map_or(x, |p| round_places(x, p)))?,
                Draw::Int(i) => Value::from(i),
            },
            // scipy's `bernoulli(p).rvs() * dist.rvs()`: both drawn every time.
            Self::BernoulliMixture { p, dist } => {
                let hit = rng.random::<f64>() < *p;
                match dist.sample(rng) {
                    Draw::Float(x) => float_value(if hit { x } else { 0.0 })?,
                    Draw::Int(i) => Value::from(if hit { i } else { 0 }),
                }
            }
            Self::FakerPerson(person) => person.sample(rng),
            Self::Person(person) => person.sample(rng)?,
        };
        Ok(Sampled::Json(json))
    }
}

fn pick(values: &[Value], cumulative: Option<&[f64]>, rng: &mut ChaCha8Rng) -> Value {
    let i = weighted_index(values.len(), cumulative, rng);
    values.get(i).cloned().unwrap_or(Value::Null)
}

/// An index into `len` items: by the running sums of their weights when given, else uniform.
/// Always below `len` (0 when `len` is 0).
pub(super) fn weighted_index(
    len: usize,
    cumulative: Option<&[f64]>,
    rng: &mut ChaCha8Rng,
) -> usize {
    match cumulative {
        Some(cum) => {
            let total = cum.last().copied().unwrap_or(0.0);
            let u = rng.random::<f64>() * total;
            cum.partition_point(|c| *c <= u).min(len.saturating_sub(1))
        }
        None => rng.random_range(0..len.max(1)),
    }
}

/// A UUID4 in its hyphenated form (Python's `str(uuid4())`).
pub(crate) fn uuid4(rng: &mut ChaCha8Rng) -> String {
    let mut bytes: [u8; 16] = rng.random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

/// A UUID4 as 32 hex digits (Python's `uuid4().hex`), optionally cut to 8 and upper-cased.
fn uuid(rng: &mut ChaCha8Rng, prefix: &str, short: bool, upper: bool) -> String {
    let mut bytes: [u8; 16] = rng.random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = uuid::Uuid::from_bytes(bytes).simple().to_string();
    let hex = if short { &hex[..8] } else { &hex[..] };
    let hex = if upper {
        hex.to_uppercase()
    } else {
        hex.to_owned()
    };
    format!("{prefix}{hex}")
}

impl Convert {
    /// Applies `convert_to` to a draw.
    pub(crate) fn apply(&self, sampled: &Sampled) -> Result<Value, String> {
        match (self, sampled) {
            (Self::Date(f), Sampled::DateTime(dt)) => f
                .format(*dt)
                .map(Value::String)
                .map_err(|_| "datetime could not be formatted".to_owned()),
            (Self::Number(c), Sampled::Json(v)) => convert_number(v, *c),
            (_, Sampled::Json(v)) => Ok(v.clone()),
            (_, Sampled::DateTime(dt)) => Ok(Value::String(dt.to_string())),
        }
    }
}
