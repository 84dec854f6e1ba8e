//! The `person` sampler: people drawn from DataDesigner's managed Nemotron-Personas datasets,
//! the Parquet files `data-designer download personas` saves as
//! `<managed assets>/datasets/<locale>.parquet`, read from the directory the server config
//! names (`samplers.managed_assets_dir`).

use std::path::PathBuf;

use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::domain::dataset::PersonParams;

/// DataDesigner's `LOCALES_WITH_MANAGED_DATASETS`.
pub(crate) const MANAGED_LOCALES: &[&str] = &[
    "en_GB",
    "de_DE",
    "en_US",
    "en_IN",
    "en_SG",
    "fr_FR",
    "hi_Deva_IN",
    "hi_Latn_IN",
    "ja_JP",
    "ko_KR",
    "pt_BR",
];

/// Where the managed person datasets are (the server's `samplers.managed_assets_dir`).
#[derive(Debug, Clone, Default)]
pub struct PeopleSource {
    dir: Option<PathBuf>,
}

impl PeopleSource {
    /// Datasets under `dir` (DataDesigner's managed-assets directory), or none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// The file DataDesigner reads for `locale`.
    fn file(&self, locale: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join("datasets").join(format!("{locale}.parquet")))
    }

    /// Compiles a `person` sampler. Errors are `(field inside params, message)`.
    pub(crate) fn person(
        &self,
        _field: &str,
        params: &PersonParams,
        _sex: Option<&'static str>,
        _age_range: (i64, i64),
        _cities: Option<Vec<String>>,
        _column: &str,
    ) -> Result<PersonDraw, (String, String)> {
        if !MANAGED_LOCALES.contains(&params.locale.as_str()) {
            return Err((
                "locale".into(),
                format!(
                    "Person sampling from managed datasets is only supported for the following locales: {}",
                    MANAGED_LOCALES.join(", ")
                ),
            ));
        }
        let install = format!(
            "install it with `data-designer download personas --locale {}` and point the server's samplers.managed_assets_dir at DataDesigner's managed-assets directory",
            params.locale
        );
        let Some(file) = self.file(&params.locale) else {
            return Err((
                "locale".into(),
                format!(
                    "the person dataset for locale '{}' is not available: the server has no samplers.managed_assets_dir; {install}",
                    params.locale
                ),
            ));
        };
        Err((
            "locale".into(),
            format!(
                "the person dataset file {} is not available; {install}",
                file.display()
            ),
        ))
    }
}

/// A compiled `person` sampler.
#[derive(Debug)]
pub(crate) struct PersonDraw {}

impl PersonDraw {
    /// One person.
    pub(crate) fn sample(&self, _rng: &mut ChaCha8Rng) -> Result<Value, String> {
        Err("person datasets are not loaded".into())
    }
}
