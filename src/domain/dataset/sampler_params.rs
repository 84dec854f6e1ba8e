//! Sampler types and their parameters, with DataDesigner 0.9.7's field names and defaults
//! (`data_designer.config.sampler_params`).
//!
//! Only the shape is checked here; ranges (`low < high`, `p` in `[0, 1]`, ...) are checked
//! when the plan is compiled, so every problem comes back as `invalid_sampler_params`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::extra_sampler_params::{
    BernoulliMixtureParams, PersonFromFakerParams, PersonParams, ScipyParams,
};
use super::issues::deserialize_at;

/// DataDesigner's `SamplerType`, including the ones synthgate does not serve yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerType {
    /// 0 or 1 with probability `p`.
    Bernoulli,
    /// 0, or with probability `p` a draw from a scipy distribution.
    BernoulliMixture,
    /// Successes in `n` trials.
    Binomial,
    /// One of `values`, optionally weighted.
    Category,
    /// A datetime between `start` and `end`.
    Datetime,
    /// Normal distribution.
    Gaussian,
    /// A person from a managed Nemotron-Personas dataset file.
    Person,
    /// A person made up from fake-data locale tables.
    PersonFromFaker,
    /// Poisson counts.
    Poisson,
    /// A scipy.stats distribution by name.
    Scipy,
    /// A value conditioned on a parent category column.
    Subcategory,
    /// A datetime offset from a reference column.
    Timedelta,
    /// Uniform on `[low, high)`.
    Uniform,
    /// A random UUID4 hex string.
    Uuid,
}

impl SamplerType {
    /// Every sampler type, in DataDesigner's order.
    pub const ALL: [SamplerType; 14] = [
        Self::Bernoulli,
        Self::BernoulliMixture,
        Self::Binomial,
        Self::Category,
        Self::Datetime,
        Self::Gaussian,
        Self::Person,
        Self::PersonFromFaker,
        Self::Poisson,
        Self::Scipy,
        Self::Subcategory,
        Self::Timedelta,
        Self::Uniform,
        Self::Uuid,
    ];

    /// The serialized name, e.g. `person_from_faker`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bernoulli => "bernoulli",
            Self::BernoulliMixture => "bernoulli_mixture",
            Self::Binomial => "binomial",
            Self::Category => "category",
            Self::Datetime => "datetime",
            Self::Gaussian => "gaussian",
            Self::Person => "person",
            Self::PersonFromFaker => "person_from_faker",
            Self::Poisson => "poisson",
            Self::Scipy => "scipy",
            Self::Subcategory => "subcategory",
            Self::Timedelta => "timedelta",
            Self::Uniform => "uniform",
            Self::Uuid => "uuid",
        }
    }

    /// Parses the serialized name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// DataDesigner's `is_numerical_sampler_type`: the types `constraints` may target.
    pub fn is_numerical(self) -> bool {
        match self {
            Self::BernoulliMixture
            | Self::Bernoulli
            | Self::Binomial
            | Self::Gaussian
            | Self::Poisson
            | Self::Scipy
            | Self::Uniform => true,
            Self::Category
            | Self::Datetime
            | Self::Person
            | Self::PersonFromFaker
            | Self::Subcategory
            | Self::Timedelta
            | Self::Uuid => false,
        }
    }
}

/// Parameters of one sampler, by type.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplerParams {
    /// `category`.
    Category(CategoryParams),
    /// `subcategory`.
    Subcategory(SubcategoryParams),
    /// `uniform`.
    Uniform(UniformParams),
    /// `gaussian`.
    Gaussian(GaussianParams),
    /// `bernoulli`.
    Bernoulli(BernoulliParams),
    /// `binomial`.
    Binomial(BinomialParams),
    /// `poisson`.
    Poisson(PoissonParams),
    /// `uuid`.
    Uuid(UuidParams),
    /// `datetime`.
    Datetime(DatetimeParams),
    /// `timedelta`.
    Timedelta(TimedeltaParams),
    /// `person_from_faker`.
    PersonFromFaker(PersonFromFakerParams),
    /// `person`.
    Person(PersonParams),
    /// `scipy`.
    Scipy(ScipyParams),
    /// `bernoulli_mixture`.
    BernoulliMixture(BernoulliMixtureParams),
}

impl SamplerParams {
    /// The sampler type these params belong to.
    pub fn sampler_type(&self) -> SamplerType {
        match self {
            Self::Category(_) => SamplerType::Category,
            Self::Subcategory(_) => SamplerType::Subcategory,
            Self::Uniform(_) => SamplerType::Uniform,
            Self::Gaussian(_) => SamplerType::Gaussian,
            Self::Bernoulli(_) => SamplerType::Bernoulli,
            Self::Binomial(_) => SamplerType::Binomial,
            Self::Poisson(_) => SamplerType::Poisson,
            Self::Uuid(_) => SamplerType::Uuid,
            Self::Datetime(_) => SamplerType::Datetime,
            Self::Timedelta(_) => SamplerType::Timedelta,
            Self::PersonFromFaker(_) => SamplerType::PersonFromFaker,
            Self::Person(_) => SamplerType::Person,
            Self::Scipy(_) => SamplerType::Scipy,
            Self::BernoulliMixture(_) => SamplerType::BernoulliMixture,
        }
    }
}

/// `CategorySamplerParams`: one of `values` (bool, string or number), optionally weighted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoryParams {
    /// Candidate values; at least one.
    pub values: Vec<Scalar>,
    /// Unnormalized weights, same length as `values`.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
}

/// `SubcategorySamplerParams`: values conditioned on the parent category column's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubcategoryParams {
    /// Name of the parent category column.
    pub category: String,
    /// Parent value (as a string key) → candidate values.
    pub values: Map<String, Value>,
}

/// `UniformSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UniformParams {
    /// Inclusive lower bound.
    pub low: f64,
    /// Exclusive upper bound.
    pub high: f64,
    /// Round to this many decimal places.
    #[serde(default)]
    pub decimal_places: Option<i32>,
}

/// `GaussianSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianParams {
    /// Mean.
    pub mean: f64,
    /// Standard deviation, positive.
    pub stddev: f64,
    /// Round to this many decimal places.
    #[serde(default)]
    pub decimal_places: Option<i32>,
}

/// `BernoulliSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BernoulliParams {
    /// Probability of 1, in `[0, 1]`.
    pub p: f64,
}

/// `BinomialSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinomialParams {
    /// Number of trials, non-negative.
    pub n: i64,
    /// Probability of success per trial, in `[0, 1]`.
    pub p: f64,
}

/// `PoissonSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonParams {
    /// Mean number of events, non-negative.
    pub mean: f64,
}

/// `UUIDSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UuidParams {
    /// Prepended to each UUID.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Keep only the first 8 hex characters.
    #[serde(default)]
    pub short_form: bool,
    /// Upper-case the hex digits.
    #[serde(default)]
    pub uppercase: bool,
}

/// `DatetimeSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatetimeParams {
    /// Inclusive start, a datetime string.
    pub start: String,
    /// Exclusive end, a datetime string.
    pub end: String,
    /// Granularity: `Y`, `M`, `D` (default), `h`, `m` or `s`.
    #[serde(default = "default_unit")]
    pub unit: String,
}

/// `TimeDeltaSamplerParams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedeltaParams {
    /// Inclusive minimum delta, in `unit`s.
    pub dt_min: i64,
    /// Exclusive maximum delta, in `unit`s.
    pub dt_max: i64,
    /// The datetime column the delta is added to.
    pub reference_column_name: String,
    /// `D` (default), `h`, `m` or `s`.
    #[serde(default = "default_unit")]
    pub unit: String,
}

fn default_unit() -> String {
    "D".to_owned()
}

/// A JSON bool, string or number (DataDesigner's `bool | str | int | float`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Scalar(pub Value);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match v {
            Value::Bool(_) | Value::String(_) | Value::Number(_) => Ok(Scalar(v)),
            other => Err(serde::de::Error::custom(format!(
                "invalid type: {}, expected a bool, string or number",
                json_kind(&other)
            ))),
        }
    }
}

/// A short name for a JSON value's type, for messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Parses a `params` object for `sampler_type`, accepting (and checking) an injected
/// `sampler_type` key as DataDesigner does. Errors are `(path relative to params, message)`.
pub(crate) fn parse_params(
    sampler_type: SamplerType,
    value: &Value,
) -> Result<SamplerParams, (String, String)> {
    let Value::Object(obj) = value else {
        return Err((
            String::new(),
            format!("invalid type: {}, expected an object", json_kind(value)),
        ));
    };
    let mut obj = obj.clone();
    if let Some(inner) = obj.remove("sampler_type")
        && inner.as_str() != Some(sampler_type.as_str())
    {
        return Err((
            "sampler_type".into(),
            format!(
                "must match the column's sampler_type '{}', got {inner}",
                sampler_type.as_str()
            ),
        ));
    }
    let value = Value::Object(obj);
    let params = match sampler_type {
        SamplerType::Category => SamplerParams::Category(deserialize_at(&value)?),
        SamplerType::Subcategory => SamplerParams::Subcategory(deserialize_at(&value)?),
        SamplerType::Uniform => SamplerParams::Uniform(deserialize_at(&value)?),
        SamplerType::Gaussian => SamplerParams::Gaussian(deserialize_at(&value)?),
        SamplerType::Bernoulli => SamplerParams::Bernoulli(deserialize_at(&value)?),
        SamplerType::Binomial => SamplerParams::Binomial(deserialize_at(&value)?),
        SamplerType::Poisson => SamplerParams::Poisson(deserialize_at(&value)?),
        SamplerType::Uuid => SamplerParams::Uuid(deserialize_at(&value)?),
        SamplerType::Datetime => SamplerParams::Datetime(deserialize_at(&value)?),
        SamplerType::Timedelta => SamplerParams::Timedelta(deserialize_at(&value)?),
        SamplerType::PersonFromFaker => SamplerParams::PersonFromFaker(deserialize_at(&value)?),
        SamplerType::Person => SamplerParams::Person(deserialize_at(&value)?),
        SamplerType::Scipy => SamplerParams::Scipy(deserialize_at(&value)?),
        SamplerType::BernoulliMixture => SamplerParams::BernoulliMixture(deserialize_at(&value)?),
    };
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn injected_sampler_type_is_accepted_and_checked() {
        let p = parse_params(
            SamplerType::Category,
            &json!({"values": ["a", 1, true], "weights": null, "sampler_type": "category"}),
        )
        .unwrap();
        let SamplerParams::Category(c) = p else {
            panic!("not category")
        };
        assert_eq!(c.values.len(), 3);
        assert_eq!(c.weights, None);

        let err = parse_params(
            SamplerType::Uniform,
            &json!({"low": 0, "high": 1, "sampler_type": "gaussian"}),
        )
        .unwrap_err();
        assert_eq!(err.0, "sampler_type");
    }

    #[test]
    fn defaults_match_datadesigner() {
        let SamplerParams::Datetime(d) = parse_params(
            SamplerType::Datetime,
            &json!({"start": "2024-01-01", "end": "2024-12-31"}),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(d.unit, "D");
        let SamplerParams::Uuid(u) = parse_params(SamplerType::Uuid, &json!({})).unwrap() else {
            panic!()
        };
        assert_eq!((u.prefix, u.short_form, u.uppercase), (None, false, false));
    }

    #[test]
    fn shape_errors_carry_the_path() {
        let err = parse_params(SamplerType::Uniform, &json!({"low": "a", "high": 1})).unwrap_err();
        assert_eq!(
            err,
            (
                "low".into(),
                "invalid type: string \"a\", expected f64".into()
            )
        );
        let err = parse_params(SamplerType::Category, &json!({"values": [null]})).unwrap_err();
        assert_eq!(err.0, "values[0]");
        let err = parse_params(SamplerType::Bernoulli, &json!({"p": 0.5, "q": 1})).unwrap_err();
        assert!(err.1.contains("unknown field `q`"), "{err:?}");
    }

    #[test]
    fn person_and_scipy_params_take_datadesigner_defaults() {
        let SamplerParams::PersonFromFaker(p) =
            parse_params(SamplerType::PersonFromFaker, &json!({})).unwrap()
        else {
            panic!("not person_from_faker")
        };
        assert_eq!(
            (p.locale.as_str(), p.sex, p.city, p.age_range),
            ("en_US", None, None, vec![18, 114])
        );
        let SamplerParams::Person(p) =
            parse_params(SamplerType::Person, &json!({"city": "Austin"})).unwrap()
        else {
            panic!("not person")
        };
        assert!(!p.with_synthetic_personas);
        assert_eq!(p.city.unwrap().as_slice(), ["Austin".to_owned()]);
        let err = parse_params(SamplerType::Scipy, &json!({"dist_name": "norm"})).unwrap_err();
        assert_eq!(err.0, "dist_params");
    }
}
