//! The `person` sampler: people drawn from DataDesigner's managed Nemotron-Personas datasets,
//! the Parquet files `data-designer download personas` saves as
//! `<managed assets>/datasets/<locale>.parquet`, read from the directory the server config
//! names (`samplers.managed_assets_dir`).
//!
//! A dataset is read once per replica (per locale, with or without the persona fields) and kept
//! in memory, shared by every job; the first job that needs it pays the read at submit.
//! Compiling a sampler selects the rows its filters (`sex`, `city`, `age_range`,
//! `select_field_values`) allow, as DataDesigner's SQL `IN` filters do; a record then draws one
//! of them from its own random stream. The fields follow DataDesigner's
//! `generate_and_insert_derived_fields` (see [`super::person_fields`]).

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use parquet::schema::types::Type;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::super::convert::python_str;
use super::person_fields::{PERSONA_FIELDS, PII_FIELDS, derive_fields};
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

/// One dataset in memory: its column names and rows (columns that are null in every row are
/// left out, as DataDesigner drops all-null columns).
#[derive(Debug)]
pub(crate) struct PeopleTable {
    pub(crate) names: Vec<String>,
    pub(crate) rows: Vec<Vec<Value>>,
}

/// Where the managed person datasets are (the server's `samplers.managed_assets_dir`), and
/// the ones read so far.
#[derive(Debug, Clone, Default)]
pub struct PeopleSource {
    dir: Option<PathBuf>,
    loaded: Arc<Mutex<Loaded>>,
}

/// Datasets read so far, by (locale, with persona fields).
type Loaded = HashMap<(String, bool), Arc<PeopleTable>>;

/// A compile problem: `(field inside params, message)`.
type Problem = (String, String);

impl PeopleSource {
    /// Datasets under `dir` (DataDesigner's managed-assets directory), or none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            loaded: Arc::default(),
        }
    }

    /// Compiles a `person` sampler: the dataset rows its filters allow.
    pub(crate) fn person(
        &self,
        params: &PersonParams,
        sex: Option<&'static str>,
        age_range: (i64, i64),
        cities: Option<Vec<String>>,
    ) -> Result<PersonDraw, Problem> {
        let locale = params.locale.as_str();
        if !MANAGED_LOCALES.contains(&locale) {
            return Err((
                "locale".into(),
                format!(
                    "Person sampling from managed datasets is only supported for the following locales: {}",
                    MANAGED_LOCALES.join(", ")
                ),
            ));
        }
        let install = format!(
            "install it with `data-designer download personas --locale {locale}` and set the server's samplers.managed_assets_dir to DataDesigner's managed-assets directory"
        );
        let Some(dir) = &self.dir else {
            return Err((
                "locale".into(),
                format!(
                    "the person dataset for locale '{locale}' is not available: the server sets no samplers.managed_assets_dir; {install}"
                ),
            ));
        };
        let file = dir.join("datasets").join(format!("{locale}.parquet"));
        if !file.is_file() {
            return Err((
                "locale".into(),
                format!(
                    "the person dataset file {} does not exist; {install}",
                    file.display()
                ),
            ));
        }
        // Filters name dataset fields; en_US calls its state `region`.
        let mut filters: Vec<(String, String, Vec<String>)> = Vec::new();
        if let Some(s) = sex {
            filters.push(("sex".into(), "sex".into(), vec![s.to_owned()]));
        }
        if let Some(c) = cities {
            filters.push(("city".into(), "city".into(), c));
        }
        for (key, values) in params.select_field_values.iter().flatten() {
            let field = format!("select_field_values.{key}");
            let column = if key == "state" && locale == "en_US" {
                "region"
            } else {
                key.as_str()
            };
            if !PII_FIELDS.contains(&column) && !PERSONA_FIELDS.contains(&column) {
                return Err((field, format!("Invalid field name: {key}")));
            }
            filters.push((
                field,
                column.into(),
                values.iter().map(python_str).collect(),
            ));
        }
        let personas = params.with_synthetic_personas
            || filters
                .iter()
                .any(|(_, c, _)| PERSONA_FIELDS.contains(&c.as_str()));
        let table = self
            .table(locale, personas, &file)
            .map_err(|e| ("locale".to_owned(), e))?;
        let col = |name: &str| table.names.iter().position(|n| n == name);
        let mut checks = Vec::with_capacity(filters.len());
        for (field, column, values) in &filters {
            let Some(i) = col(column) else {
                let msg = format!("the {locale} person dataset has no field '{column}'");
                return Err((field.clone(), msg));
            };
            checks.push((i, values));
        }
        let age = col("age");
        let matches: Vec<u32> = (0..table.rows.len())
            .filter(|&r| {
                let row = &table.rows[r];
                let age_ok = age.is_none_or(|a| {
                    row[a]
                        .as_i64()
                        .is_some_and(|x| (age_range.0..=age_range.1).contains(&x))
                });
                age_ok
                    && checks
                        .iter()
                        .all(|(i, values)| values.contains(&python_str(&row[*i])))
            })
            .filter_map(|r| u32::try_from(r).ok())
            .collect();
        if matches.is_empty() {
            return Err((
                String::new(),
                format!(
                    "no person in {} matches these filters; person sampling does not support rare combinations of field values, loosen them",
                    file.display()
                ),
            ));
        }
        Ok(PersonDraw {
            locale: locale.to_owned(),
            personas: params.with_synthetic_personas,
            table,
            matches,
        })
    }

    /// The dataset of `locale`, read now or earlier.
    fn table(
        &self,
        locale: &str,
        personas: bool,
        file: &PathBuf,
    ) -> Result<Arc<PeopleTable>, String> {
        let key = (locale.to_owned(), personas);
        // A poisoned lock only means another read panicked; the map is still whole.
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = loaded.get(&key) {
            return Ok(Arc::clone(t));
        }
        let table = Arc::new(read_table(file, locale, personas)?);
        loaded.insert(key, Arc::clone(&table));
        Ok(table)
    }
}

/// Reads the PII (and persona) columns of a dataset file.
fn read_table(file: &PathBuf, locale: &str, personas: bool) -> Result<PeopleTable, String> {
    let shown = file.display();
    let bad =
        |e: parquet::errors::ParquetError| format!("{shown} is not a readable Parquet file: {e}");
    let reader = SerializedFileReader::new(File::open(file).map_err(|e| format!("{shown}: {e}"))?)
        .map_err(bad)?;
    let schema = reader.metadata().file_metadata().schema();
    let wanted =
        |name: &str| PII_FIELDS.contains(&name) || (personas && PERSONA_FIELDS.contains(&name));
    let fields: Vec<_> = schema
        .get_fields()
        .iter()
        .filter(|f| wanted(f.name()))
        .cloned()
        .collect();
    let names: Vec<String> = fields.iter().map(|f| f.name().to_owned()).collect();
    let projection = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(bad)?;
    let mut rows = Vec::new();
    for row in reader.get_row_iter(Some(projection)).map_err(bad)? {
        let row = row.map_err(bad)?;
        let mut values: Vec<Value> = row.get_column_iter().map(|(_, f)| json(f)).collect();
        // de_DE spells the sexes in German; DataDesigner's query maps them.
        if locale == "de_DE"
            && let Some(i) = names.iter().position(|n| n == "sex")
        {
            values[i] = match values[i].as_str() {
                Some("Weiblich") => Value::from("Female"),
                Some("Männlich") => Value::from("Male"),
                _ => values[i].take(),
            };
        }
        rows.push(values);
    }
    // Drop the columns that are null everywhere.
    let keep: Vec<bool> = (0..names.len())
        .map(|c| rows.iter().any(|r| !r[c].is_null()))
        .collect();
    let names = names
        .into_iter()
        .zip(&keep)
        .filter_map(|(n, k)| k.then_some(n))
        .collect();
    let rows = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .zip(&keep)
                .filter_map(|(v, k)| k.then_some(v))
                .collect()
        })
        .collect();
    Ok(PeopleTable { names, rows })
}

/// A Parquet value as JSON: text, numbers and booleans as such, structs (the Big Five traits'
/// `{t_score, label, description}`) as objects, lists as arrays, maps as objects, as
/// DataDesigner's pandas rows hold them, so `{{ person.openness.description }}` reads a key.
/// (The reader's schema guard bounds how deep they nest.)
fn json(field: &Field) -> Value {
    match field {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(x) => Value::from(*x),
        Field::Short(x) => Value::from(*x),
        Field::Int(x) => Value::from(*x),
        Field::Long(x) => Value::from(*x),
        Field::UByte(x) => Value::from(*x),
        Field::UShort(x) => Value::from(*x),
        Field::UInt(x) => Value::from(*x),
        Field::ULong(x) => Value::from(*x),
        Field::Float(x) => {
            serde_json::Number::from_f64(f64::from(*x)).map_or(Value::Null, Value::Number)
        }
        Field::Double(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
        Field::Str(s) => Value::String(s.clone()),
        Field::Group(row) => Value::Object(
            row.get_column_iter()
                .map(|(name, f)| (name.clone(), json(f)))
                .collect(),
        ),
        Field::ListInternal(list) => Value::Array(list.elements().iter().map(json).collect()),
        Field::MapInternal(map) => Value::Object(
            map.entries()
                .iter()
                .map(|(k, v)| {
                    let key = match json(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, json(v))
                })
                .collect(),
        ),
        other => Value::String(other.to_string()),
    }
}

/// A compiled `person` sampler: the rows its filters allow.
#[derive(Debug)]
pub(crate) struct PersonDraw {
    locale: String,
    personas: bool,
    table: Arc<PeopleTable>,
    matches: Vec<u32>,
}

impl PersonDraw {
    /// One person, as DataDesigner returns it.
    pub(crate) fn sample(&self, rng: &mut ChaCha8Rng) -> Result<Value, String> {
        let pick = self.matches[rng.random_range(0..self.matches.len())];
        let row = &self.table.rows[pick as usize];
        Ok(derive_fields(
            &self.table.names,
            row,
            &self.locale,
            self.personas,
            rng,
        ))
    }
}
