//! The parameters of DataDesigner's person and scipy-backed samplers (`person`,
//! `person_from_faker`, `scipy`, `bernoulli_mixture`), with DataDesigner 0.9.6's field names and
//! defaults (`data_designer.config.sampler_params`).
//!
//! As in [`super::sampler_params`], only the shape is checked here; ranges, locales and
//! distribution names are checked when the plan is compiled (`invalid_sampler_params`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// DataDesigner's `DEFAULT_AGE_RANGE`.
pub const DEFAULT_AGE_RANGE: [i64; 2] = [18, 114];
/// DataDesigner's `MIN_AGE`.
pub const MIN_AGE: i64 = 0;
/// DataDesigner's `MAX_AGE`.
pub const MAX_AGE: i64 = 114;

fn default_locale() -> String {
    "en_US".to_owned()
}

fn default_age_range() -> Vec<i64> {
    DEFAULT_AGE_RANGE.to_vec()
}

/// `city`: one city name or a list of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CityFilter {
    /// One city.
    One(String),
    /// Any of these cities.
    Many(Vec<String>),
}

impl CityFilter {
    /// The cities, as a list.
    pub fn as_slice(&self) -> &[String] {
        match self {
            Self::One(c) => std::slice::from_ref(c),
            Self::Many(cs) => cs,
        }
    }
}

/// `PersonFromFakerSamplerParams`: a person made up from a fake-data generator's locale tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonFromFakerParams {
    /// A DataDesigner (Faker) locale name, e.g. `en_US`.
    #[serde(default = "default_locale")]
    pub locale: String,
    /// `Male` or `Female`; both when absent.
    #[serde(default)]
    pub sex: Option<String>,
    /// Only people from these cities (the city is picked from the list).
    #[serde(default)]
    pub city: Option<CityFilter>,
    /// `[min_age, max_age]`, inclusive.
    #[serde(default = "default_age_range")]
    pub age_range: Vec<i64>,
}

/// `PersonSamplerParams`: a person drawn from a managed Nemotron-Personas dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonParams {
    /// A locale with a managed dataset, e.g. `en_US`.
    #[serde(default = "default_locale")]
    pub locale: String,
    /// `Male` or `Female`; both when absent.
    #[serde(default)]
    pub sex: Option<String>,
    /// Only people from these cities.
    #[serde(default)]
    pub city: Option<CityFilter>,
    /// `[min_age, max_age]`, inclusive.
    #[serde(default = "default_age_range")]
    pub age_range: Vec<i64>,
    /// Dataset field → accepted values.
    #[serde(default)]
    pub select_field_values: Option<BTreeMap<String, Vec<Value>>>,
    /// Also return the synthetic persona fields.
    #[serde(default)]
    pub with_synthetic_personas: bool,
}

/// `ScipySamplerParams`: any scipy.stats distribution by name (synthgate serves a listed set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScipyParams {
    /// The scipy.stats name, e.g. `gamma`.
    pub dist_name: String,
    /// Keyword arguments of the distribution (shapes, `loc`, `scale`).
    pub dist_params: Map<String, Value>,
    /// Round to this many decimal places.
    #[serde(default)]
    pub decimal_places: Option<i32>,
}

/// `BernoulliMixtureSamplerParams`: 0 with probability `1 - p`, else a draw from the
/// distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BernoulliMixtureParams {
    /// Probability of drawing from the distribution, in `[0, 1]`.
    pub p: f64,
    /// The scipy.stats name.
    pub dist_name: String,
    /// Keyword arguments of the distribution.
    pub dist_params: Map<String, Value>,
}
