//! The `person_from_faker` sampler: a made-up person with DataDesigner's fields, in its order
//! (`engine/sampling_gen/people_gen.py`, `PeopleGenFaker.make_person`), from the locale
//! tables of the `fake` crate.
//!
//! DataDesigner uses Python's Faker, which knows about ninety locales; `fake` knows fourteen.
//! [`FakerLocale::parse`] maps the DataDesigner locale names that have a `fake` table, and
//! anything else is refused at submit with the list of served ones. Known differences from
//! Faker: `fake` has one first-name table per locale, not one per sex, so `first_name` does not
//! follow `sex`; street, city, post code and phone formats are `fake`'s.
//!
//! Every field is drawn from the column's own random stream, so a person depends only on the
//! job seed and record index, except `birth_date`, which DataDesigner (and synthgate) count
//! back from the day the record is generated.

use chrono::{Datelike, NaiveDate, Utc};
use fake::Fake;
use fake::faker::address::raw::{
    BuildingNumber, CityName, CountryName, PostCode, StateName, StreetName,
};
use fake::faker::job::raw::Title;
use fake::faker::name::raw::{FirstName, LastName};
use fake::faker::phone_number::raw::PhoneNumber;
use fake::locales::{
    AR_SA, DE_DE, EN, FA_IR, FR_FR, IT_IT, JA_JP, NL_NL, PT_BR, PT_PT, TR_TR, ZH_CN, ZH_TW,
};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

/// DataDesigner's `faker_constants.sex`.
pub(crate) const SEXES: [&str; 2] = ["Male", "Female"];
const BACHELORS: [&str; 5] = [
    "stem",
    "business",
    "education",
    "arts_humanities",
    "stem_related",
];
const EDUCATION_LEVEL: [&str; 6] = [
    "secondary_education",
    "some_college",
    "bachelors",
    "associates",
    "graduate",
    "doctorate",
];
const MARITAL_STATUS: [&str; 5] = [
    "married_present",
    "divorced",
    "never_married",
    "separated",
    "widowed",
];
const COLLEGE_LEVEL: [&str; 3] = ["bachelors", "graduate", "doctorate"];

/// A `fake` locale table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FakerLocale {
    En,
    FrFr,
    DeDe,
    ItIt,
    JaJp,
    PtBr,
    PtPt,
    ZhCn,
    ZhTw,
    ArSa,
    NlNl,
    TrTr,
    FaIr,
}

/// DataDesigner locale name → `fake` table, in the order messages list them.
const LOCALES: &[(&str, FakerLocale)] = &[
    ("en_US", FakerLocale::En),
    ("en", FakerLocale::En),
    ("ar_SA", FakerLocale::ArSa),
    ("de_DE", FakerLocale::DeDe),
    ("de", FakerLocale::DeDe),
    ("fa_IR", FakerLocale::FaIr),
    ("fr_FR", FakerLocale::FrFr),
    ("it_IT", FakerLocale::ItIt),
    ("ja_JP", FakerLocale::JaJp),
    ("nl_NL", FakerLocale::NlNl),
    ("pt_BR", FakerLocale::PtBr),
    ("pt_PT", FakerLocale::PtPt),
    ("tr_TR", FakerLocale::TrTr),
    ("zh_CN", FakerLocale::ZhCn),
    ("zh_TW", FakerLocale::ZhTw),
];

impl FakerLocale {
    /// The table for a DataDesigner locale name, if `fake` has one.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        LOCALES.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
    }

    /// The served locale names, comma-separated.
    pub(crate) fn served() -> String {
        LOCALES
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether `fake` has this locale's own states (others fall back to US states, which
    /// Faker would not give: DataDesigner then has `state: null`).
    fn has_states(self) -> bool {
        match self {
            Self::En
            | Self::DeDe
            | Self::FaIr
            | Self::ItIt
            | Self::NlNl
            | Self::PtBr
            | Self::PtPt
            | Self::TrTr => true,
            Self::FrFr | Self::JaJp | Self::ZhCn | Self::ZhTw | Self::ArSa => false,
        }
    }
}

/// The fields `fake` supplies for one person.
struct Drawn {
    first_name: String,
    last_name: String,
    street_number: String,
    street_name: String,
    city: String,
    state: String,
    postcode: String,
    country: String,
    occupation: String,
    phone_number: String,
}

/// Draws the locale-dependent fields, in DataDesigner's draw order.
macro_rules! draw_with {
    ($l:expr, $rng:expr) => {
        Drawn {
            first_name: FirstName($l).fake_with_rng($rng),
            last_name: LastName($l).fake_with_rng($rng),
            street_number: BuildingNumber($l).fake_with_rng($rng),
            street_name: StreetName($l).fake_with_rng($rng),
            city: CityName($l).fake_with_rng($rng),
            state: StateName($l).fake_with_rng($rng),
            postcode: PostCode($l).fake_with_rng($rng),
            country: CountryName($l).fake_with_rng($rng),
            occupation: Title($l).fake_with_rng($rng),
            phone_number: PhoneNumber($l).fake_with_rng($rng),
        }
    };
}

/// A compiled `person_from_faker` sampler.
#[derive(Debug, Clone)]
pub(crate) struct FakerPerson {
    pub(crate) locale_name: String,
    pub(crate) locale: FakerLocale,
    pub(crate) sex: Option<&'static str>,
    pub(crate) cities: Option<Vec<String>>,
    pub(crate) age_range: (i64, i64),
}

impl FakerPerson {
    /// One person as a JSON object with DataDesigner's keys, in its order.
    pub(crate) fn sample(&self, rng: &mut ChaCha8Rng) -> Value {
        let uuid = super::sampling::uuid4(rng);
        let sex = self
            .sex
            .unwrap_or_else(|| SEXES[rng.random_range(0..SEXES.len())]);
        let d = match self.locale {
            FakerLocale::En => draw_with!(EN, rng),
            FakerLocale::FrFr => draw_with!(FR_FR, rng),
            FakerLocale::DeDe => draw_with!(DE_DE, rng),
            FakerLocale::ItIt => draw_with!(IT_IT, rng),
            FakerLocale::JaJp => draw_with!(JA_JP, rng),
            FakerLocale::PtBr => draw_with!(PT_BR, rng),
            FakerLocale::PtPt => draw_with!(PT_PT, rng),
            FakerLocale::ZhCn => draw_with!(ZH_CN, rng),
            FakerLocale::ZhTw => draw_with!(ZH_TW, rng),
            FakerLocale::ArSa => draw_with!(AR_SA, rng),
            FakerLocale::NlNl => draw_with!(NL_NL, rng),
            FakerLocale::TrTr => draw_with!(TR_TR, rng),
            FakerLocale::FaIr => draw_with!(FA_IR, rng),
        };
        let city = match &self.cities {
            Some(cities) if !cities.is_empty() => cities[rng.random_range(0..cities.len())].clone(),
            _ => d.city,
        };
        let (lo, hi) = self.age_range;
        let age = rng.random_range(lo..=hi);
        let birth_date = birth_date(Utc::now().date_naive(), age, rng);
        let marital = MARITAL_STATUS[rng.random_range(0..MARITAL_STATUS.len())];
        let education = EDUCATION_LEVEL[rng.random_range(0..EDUCATION_LEVEL.len())];
        let bachelors = if COLLEGE_LEVEL.contains(&education) {
            BACHELORS[rng.random_range(0..BACHELORS.len())]
        } else {
            "no_degree"
        };
        let state = if self.locale.has_states() {
            Value::String(d.state)
        } else {
            Value::Null
        };
        let phone = if age >= 18 {
            Value::String(d.phone_number)
        } else {
            Value::Null
        };
        let mut p = Map::with_capacity(20);
        p.insert("uuid".into(), Value::String(uuid));
        p.insert("locale".into(), Value::String(self.locale_name.clone()));
        p.insert("first_name".into(), Value::String(d.first_name));
        p.insert("last_name".into(), Value::String(d.last_name));
        p.insert("middle_name".into(), Value::Null);
        p.insert("sex".into(), Value::String(sex.to_owned()));
        p.insert("street_number".into(), Value::String(d.street_number));
        p.insert("street_name".into(), Value::String(d.street_name));
        p.insert("city".into(), Value::String(city));
        p.insert("state".into(), state);
        p.insert("postcode".into(), Value::String(d.postcode));
        p.insert("age".into(), Value::from(age));
        p.insert("birth_date".into(), Value::String(birth_date));
        p.insert("country".into(), Value::String(d.country));
        p.insert("marital_status".into(), Value::String(marital.into()));
        p.insert("education_level".into(), Value::String(education.into()));
        p.insert("unit".into(), Value::String(String::new()));
        p.insert("occupation".into(), Value::String(d.occupation));
        p.insert("phone_number".into(), phone);
        p.insert("bachelors_field".into(), Value::String(bachelors.into()));
        Value::Object(p)
    }
}

/// DataDesigner's `convert_age_to_birth_date`: a day between the dates `age + 1` and `age`
/// years before `today` (inclusive), as ISO `YYYY-MM-DD`.
pub(crate) fn birth_date(today: NaiveDate, age: i64, rng: &mut ChaCha8Rng) -> String {
    let years_back = |n: i64| {
        let year = today.year() - i32::try_from(n).unwrap_or(0);
        // Python's `replace` fails on 29 February; the 28th is the nearest real day.
        today
            .with_year(year)
            .or_else(|| NaiveDate::from_ymd_opt(year, today.month(), 28))
            .unwrap_or(today)
    };
    let start = years_back(age + 1);
    let end = years_back(age);
    let days = (end - start).num_days().max(0);
    let offset = rng.random_range(0..=days);
    (start + chrono::Duration::days(offset))
        .format("%Y-%m-%d")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::rng::column_rng;

    fn person(locale: &str) -> FakerPerson {
        FakerPerson {
            locale_name: locale.into(),
            locale: FakerLocale::parse(locale).unwrap(),
            sex: None,
            cities: None,
            age_range: (18, 114),
        }
    }

    #[test]
    fn fields_and_order_match_datadesigner() {
        let v = person("en_US").sample(&mut column_rng(1, 0, 7));
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "uuid",
                "locale",
                "first_name",
                "last_name",
                "middle_name",
                "sex",
                "street_number",
                "street_name",
                "city",
                "state",
                "postcode",
                "age",
                "birth_date",
                "country",
                "marital_status",
                "education_level",
                "unit",
                "occupation",
                "phone_number",
                "bachelors_field"
            ]
        );
        assert_eq!(v["locale"], "en_US");
        assert!(v["state"].is_string());
        assert_eq!(v["uuid"].as_str().unwrap().len(), 36);
        let ja = person("ja_JP").sample(&mut column_rng(1, 0, 7));
        assert!(ja["state"].is_null());
    }

    #[test]
    fn filters_are_honoured_and_draws_are_deterministic() {
        let mut p = person("de_DE");
        p.sex = Some("Female");
        p.cities = Some(vec!["Berlin".into(), "Köln".into()]);
        p.age_range = (10, 12);
        for i in 0..50 {
            let v = p.sample(&mut column_rng(3, i, 9));
            assert_eq!(v["sex"], "Female");
            assert!(["Berlin", "Köln"].contains(&v["city"].as_str().unwrap()));
            let age = v["age"].as_i64().unwrap();
            assert!((10..=12).contains(&age));
            assert!(v["phone_number"].is_null(), "no phone under 18");
            let again = p.sample(&mut column_rng(3, i, 9));
            assert_eq!(v["first_name"], again["first_name"]);
            assert_eq!(v["uuid"], again["uuid"]);
        }
    }

    #[test]
    fn birth_date_is_within_the_age_year() {
        let today = NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
        for i in 0..100 {
            let d = birth_date(today, 30, &mut column_rng(0, i, 0));
            let d = NaiveDate::parse_from_str(&d, "%Y-%m-%d").unwrap();
            assert!(d >= NaiveDate::from_ymd_opt(1993, 2, 28).unwrap(), "{d}");
            assert!(d <= NaiveDate::from_ymd_opt(1994, 2, 28).unwrap(), "{d}");
        }
    }

    #[test]
    fn unknown_locales_are_not_mapped() {
        assert_eq!(FakerLocale::parse("en_GB"), None);
        assert!(FakerLocale::served().starts_with("en_US, en, ar_SA"));
    }
}
