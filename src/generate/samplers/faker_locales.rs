//! The locale tables `person_from_faker` draws from: Python Faker's data (the 20.1.0 release
//! DataDesigner 0.9.6 runs) for every locale DataDesigner accepts, taken out once by
//! `scripts/faker-locales.py` into `assets/faker_locales.jsonl.gz`.
//!
//! Each line of the asset is one locale: per field, Faker's own list (with its weights where it
//! has them), a fixed sample of what Faker's formats give, `null` where the locale lacks the
//! field, or `{"ref": "<locale>/<field>"}` for a list written earlier in the file. The file is
//! read as a stream and only the lines a job names are parsed, so a replica holds the locales
//! its jobs use and nothing else; each is read once and shared.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::sync::{Arc, Mutex, OnceLock};

use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

static ASSET_GZ: &[u8] = include_bytes!("../assets/faker_locales.jsonl.gz");

/// DataDesigner's `AVAILABLE_LOCALES` (data-designer-config 0.9.6), in its order; the asset
/// holds one line for each (checked by a test).
pub(crate) const LOCALES: [&str; 88] = [
    "ar_AA", "ar_AE", "ar_BH", "ar_EG", "ar_JO", "ar_PS", "ar_SA", "az_AZ", "bg_BG", "bn_BD",
    "bs_BA", "cs_CZ", "da_DK", "de", "de_AT", "de_CH", "de_DE", "dk_DK", "el_CY", "el_GR", "en",
    "en_AU", "en_BD", "en_CA", "en_GB", "en_IE", "en_IN", "en_NZ", "en_PH", "en_TH", "en_US", "es",
    "es_AR", "es_CA", "es_CL", "es_CO", "es_ES", "es_MX", "et_EE", "fa_IR", "fi_FI", "fil_PH",
    "fr_BE", "fr_CA", "fr_CH", "fr_FR", "ga_IE", "he_IL", "hi_IN", "hr_HR", "hu_HU", "hy_AM",
    "id_ID", "it_CH", "it_IT", "ja_JP", "ka_GE", "ko_KR", "la", "lb_LU", "lt_LT", "lv_LV", "mt_MT",
    "ne_NP", "nl_BE", "nl_NL", "no_NO", "or_IN", "pl_PL", "pt_BR", "pt_PT", "ro_RO", "ru_RU",
    "sk_SK", "sl_SI", "sq_AL", "sv_SE", "ta_IN", "th", "th_TH", "tl_PH", "tr_TR", "tw_GH", "uk_UA",
    "vi_VN", "zh_CN", "zh_TW", "zu_ZA",
];

/// A field's values, drawn uniformly or by Faker's weights.
#[derive(Debug)]
pub(crate) struct Pool {
    values: Vec<String>,
    /// Running sums of the weights, when the list has weights.
    cumulative: Option<Vec<f64>>,
}

impl Pool {
    /// Whether `value` is one this pool can give.
    #[cfg(test)]
    pub(crate) fn contains(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    pub(crate) fn draw(&self, rng: &mut ChaCha8Rng) -> &str {
        let i = super::sampling::weighted_index(self.values.len(), self.cumulative.as_deref(), rng);
        &self.values[i]
    }
}

/// One locale's fields; `None` where Faker has no such field for it (DataDesigner gives null).
#[derive(Debug)]
pub(crate) struct LocaleTable {
    pub(crate) first_name_male: Option<Pool>,
    pub(crate) first_name_female: Option<Pool>,
    pub(crate) last_name_male: Option<Pool>,
    pub(crate) last_name_female: Option<Pool>,
    pub(crate) building_number: Option<Pool>,
    pub(crate) street_name: Option<Pool>,
    pub(crate) city: Option<Pool>,
    pub(crate) state: Option<Pool>,
    pub(crate) postcode: Option<Pool>,
    pub(crate) country: Option<Pool>,
    pub(crate) job: Option<Pool>,
    pub(crate) phone_number: Option<Pool>,
}

/// A field as the asset writes it.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawField {
    Ref {
        #[serde(rename = "ref")]
        at: String,
    },
    List {
        v: Vec<String>,
        #[serde(default)]
        w: Option<Vec<f64>>,
    },
}

/// One line: the locale and its fields.
#[derive(Deserialize)]
struct RawLine {
    #[allow(dead_code, reason = "the line was found by this name")]
    locale: String,
    #[serde(flatten)]
    fields: HashMap<String, Option<RawField>>,
}

impl RawLine {
    fn get(&self, field: &str) -> Option<&Option<RawField>> {
        self.fields.get(field)
    }
}

/// The table for `locale`, read from the asset on first use and shared after.
pub(crate) fn table(locale: &str) -> Result<Arc<LocaleTable>, String> {
    if !LOCALES.contains(&locale) {
        return Err(format!(
            "Locale '{locale}' is not a supported locale. Supported locales: {}",
            LOCALES.join(", ")
        ));
    }
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<LocaleTable>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(t) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(locale) {
        return Ok(t.clone());
    }
    // Read outside the lock: two first uses at once both read, and one insert wins.
    let t = Arc::new(read(locale).map_err(|e| format!("faker locale table {locale}: {e}"))?);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    Ok(cache.entry(locale.to_owned()).or_insert(t).clone())
}

/// Parses the asset lines of the given locales, in one pass.
fn lines_of(locales: &[&str]) -> Result<HashMap<String, RawLine>, String> {
    let mut found = HashMap::new();
    let reader = BufReader::new(flate2::read::GzDecoder::new(ASSET_GZ));
    for line in reader.lines() {
        let line = line.map_err(|e| e.to_string())?;
        // Each line starts `{"locale":"<name>"`: matched without parsing the rest.
        let Some(name) = line
            .strip_prefix(r#"{"locale":""#)
            .and_then(|rest| rest.split_once('"'))
            .map(|(name, _)| name)
            .filter(|name| locales.contains(name))
        else {
            continue;
        };
        let raw: RawLine = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        found.insert(name.to_owned(), raw);
        if found.len() == locales.len() {
            break;
        }
    }
    Ok(found)
}

fn read(locale: &str) -> Result<LocaleTable, String> {
    let mut lines = lines_of(&[locale])?;
    let own = lines.remove(locale).ok_or("not in the asset")?;
    // References name the line and field where a list was first written; that field is a list.
    let mut referenced: Vec<&str> = own
        .fields
        .values()
        .filter_map(|f| match f {
            Some(RawField::Ref { at }) => at.split_once('/').map(|(l, _)| l),
            _ => None,
        })
        .filter(|l| *l != locale)
        .collect();
    referenced.sort_unstable();
    referenced.dedup();
    let others = if referenced.is_empty() {
        HashMap::new()
    } else {
        lines_of(&referenced)?
    };
    let field = |name: &str| -> Result<Option<Pool>, String> {
        let (v, w) = match own.get(name) {
            None | Some(None) => return Ok(None),
            Some(Some(RawField::List { v, w })) => (v, w),
            Some(Some(RawField::Ref { at })) => {
                let (l, f) = at.split_once('/').ok_or("bad reference")?;
                let line = if l == locale {
                    Some(&own)
                } else {
                    others.get(l)
                };
                match line.and_then(|line| line.get(f)) {
                    Some(Some(RawField::List { v, w })) => (v, w),
                    _ => return Err(format!("reference {at} names no list")),
                }
            }
        };
        if v.is_empty() {
            return Err(format!("{name} is empty"));
        }
        let cumulative = w.as_ref().map(|w| {
            w.iter()
                .scan(0.0, |sum, x| {
                    *sum += x.max(0.0);
                    Some(*sum)
                })
                .collect()
        });
        Ok(Some(Pool {
            values: v.clone(),
            cumulative,
        }))
    };
    Ok(LocaleTable {
        first_name_male: field("first_name_male")?,
        first_name_female: field("first_name_female")?,
        last_name_male: field("last_name_male")?,
        last_name_female: field("last_name_female")?,
        building_number: field("building_number")?,
        street_name: field("street_name")?,
        city: field("city")?,
        state: field("state")?,
        postcode: field("postcode")?,
        country: field("country")?,
        job: field("job")?,
        phone_number: field("phone_number")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::rng::column_rng;

    #[test]
    fn the_asset_holds_every_locale_in_order() {
        let reader = BufReader::new(flate2::read::GzDecoder::new(ASSET_GZ));
        let names: Vec<String> = reader
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
                v["locale"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(names, LOCALES);
    }

    #[test]
    fn every_locale_reads_and_draws() {
        for l in LOCALES {
            let t = table(l).unwrap_or_else(|e| panic!("{e}"));
            let mut rng = column_rng(1, 0, 0);
            for pool in [&t.first_name_male, &t.last_name_female, &t.job] {
                let pool = pool.as_ref().unwrap_or_else(|| panic!("{l}"));
                assert!(!pool.draw(&mut rng).is_empty(), "{l}");
            }
        }
    }

    #[test]
    fn weights_steer_draws() {
        let pool = Pool {
            values: vec!["rare".into(), "common".into()],
            cumulative: Some(vec![1.0, 100.0]),
        };
        let mut rng = column_rng(2, 0, 0);
        let common = (0..1000)
            .filter(|_| pool.draw(&mut rng) == "common")
            .count();
        assert!(common > 950, "{common}");
    }

    #[test]
    fn unknown_locales_are_refused_with_the_list() {
        let err = table("xx_XX").unwrap_err();
        assert!(err.starts_with("Locale 'xx_XX' is not a supported locale."));
        assert!(err.contains("en_GB"));
    }
}
