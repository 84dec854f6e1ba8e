//! The `person_from_faker` sampler: a made-up person with DataDesigner's fields, in its order
//! (`engine/sampling_gen/people_gen.py`, `PeopleGenFaker.make_person`), from Python Faker's
//! data for the locale ([`super::faker_locales`]): every locale DataDesigner accepts is served.
//!
//! As in DataDesigner, first and last names follow `sex`, and a field Faker lacks for a locale
//! (`state` outside the locales that have states, `phone_number` in the Philippine ones) is
//! null. Faker's list fields are drawn with Faker's weights; fields Faker builds from formats
//! (street, building number, post code, phone) come from a fixed sample of Faker's output.
//!
//! Every field is drawn from the column's own random stream, so a person depends only on the
//! job seed and record index, except `birth_date`, which DataDesigner (and synthgate) count
//! back from the day the record is generated.

use std::sync::Arc;

use chrono::{Datelike, NaiveDate, Utc};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

use super::faker_locales::{LocaleTable, Pool};

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

/// A compiled `person_from_faker` sampler.
#[derive(Debug, Clone)]
pub(crate) struct FakerPerson {
    pub(crate) locale_name: String,
    pub(crate) table: Arc<LocaleTable>,
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
        let t = &*self.table;
        let draw = |pool: &Option<Pool>, rng: &mut ChaCha8Rng| match pool {
            Some(p) => Value::String(p.draw(rng).to_owned()),
            None => Value::Null,
        };
        let (first, last) = if sex == "Male" {
            (&t.first_name_male, &t.last_name_male)
        } else {
            (&t.first_name_female, &t.last_name_female)
        };
        let first_name = draw(first, rng);
        let last_name = draw(last, rng);
        let street_number = draw(&t.building_number, rng);
        let street_name = draw(&t.street_name, rng);
        let city = match &self.cities {
            Some(cities) if !cities.is_empty() => {
                Value::String(cities[rng.random_range(0..cities.len())].clone())
            }
            _ => draw(&t.city, rng),
        };
        let state = draw(&t.state, rng);
        let postcode = draw(&t.postcode, rng);
        let (lo, hi) = self.age_range;
        let age = rng.random_range(lo..=hi);
        let birth_date = birth_date(Utc::now().date_naive(), age, rng);
        let country = draw(&t.country, rng);
        let marital = MARITAL_STATUS[rng.random_range(0..MARITAL_STATUS.len())];
        let education = EDUCATION_LEVEL[rng.random_range(0..EDUCATION_LEVEL.len())];
        let bachelors = if COLLEGE_LEVEL.contains(&education) {
            BACHELORS[rng.random_range(0..BACHELORS.len())]
        } else {
            "no_degree"
        };
        let occupation = draw(&t.job, rng);
        let phone = if age >= 18 {
            draw(&t.phone_number, rng)
        } else {
            Value::Null
        };
        let mut p = Map::with_capacity(20);
        p.insert("uuid".into(), Value::String(uuid));
        p.insert("locale".into(), Value::String(self.locale_name.clone()));
        p.insert("first_name".into(), first_name);
        p.insert("last_name".into(), last_name);
        p.insert("middle_name".into(), Value::Null);
        p.insert("sex".into(), Value::String(sex.to_owned()));
        p.insert("street_number".into(), street_number);
        p.insert("street_name".into(), street_name);
        p.insert("city".into(), city);
        p.insert("state".into(), state);
        p.insert("postcode".into(), postcode);
        p.insert("age".into(), Value::from(age));
        p.insert("birth_date".into(), Value::String(birth_date));
        p.insert("country".into(), country);
        p.insert("marital_status".into(), Value::String(marital.into()));
        p.insert("education_level".into(), Value::String(education.into()));
        p.insert("unit".into(), Value::String(String::new()));
        p.insert("occupation".into(), occupation);
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
            table: super::super::faker_locales::table(locale).unwrap(),
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
            let first = v["first_name"].as_str().unwrap();
            assert!(p.table.first_name_female.as_ref().unwrap().contains(first));
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
    fn locales_beyond_the_old_list_follow_faker() {
        // en_GB is DataDesigner's own all-samplers test locale: British names, no state.
        let gb = person("en_GB");
        let v = gb.sample(&mut column_rng(1, 0, 7));
        assert!(v["state"].is_null());
        let last = v["last_name"].as_str().unwrap();
        let pools = &gb.table;
        let sex_pool = if v["sex"] == "Male" {
            &pools.last_name_male
        } else {
            &pools.last_name_female
        };
        assert!(sex_pool.as_ref().unwrap().contains(last));
        // Faker has no phone numbers for the Philippine locales: DataDesigner gives null.
        let ph = person("en_PH").sample(&mut column_rng(1, 0, 7));
        assert!(ph["phone_number"].is_null());
        assert!(ph["first_name"].is_string());
    }
}
