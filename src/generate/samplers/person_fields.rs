//! The fields of a `person` sampler's value: DataDesigner's field lists
//! (`entities/dataset_based_person_fields.py`) and the fields it derives from a dataset row
//! (`entities/person.py`, `entities/email_address_utils.py`): `locale`, `birth_date`,
//! `email_address`, and for en_US `state` in place of `region`.
//!
//! For en_US, `national_id` is a synthetic SSN as DataDesigner makes it (an area number of the
//! person's state when born before the 2011 randomization, else any, never 666), and adults
//! get a `phone_number` whose area code comes from their postcode (`super::phone`). Both are
//! `null` for every other locale, as in DataDesigner.

use chrono::{Datelike, NaiveDate, Utc};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

use super::faker_person::birth_date;

/// DataDesigner's `PII_FIELDS`, in its order (the order of a person's keys).
pub(crate) const PII_FIELDS: &[&str] = &[
    "uuid",
    "first_name",
    "middle_name",
    "last_name",
    "sex",
    "age",
    "marital_status",
    "postcode",
    "city",
    "district",
    "region",
    "country",
    "street_name",
    "street_number",
    "unit",
    "bachelors_field",
    "education_level",
    "occupation",
    "locale",
    "birth_date",
    "state",
    "email_address",
    "phone_number",
    "national_id",
    "ethnic_background",
    "industry",
    "preferred_english_name",
    "first_name_heritage",
    "name_heritage",
    "is_first_gen_immigrant",
    "household_type",
    "monthly_income_eur",
    "area",
    "blood_pressure_status",
    "blood_sugar_status",
    "bmi_status",
    "drinking_status",
    "economic_activity_status",
    "family_type",
    "housing_tenure",
    "housing_type",
    "income_bracket",
    "military_status",
    "smoking_status",
    "waist_status",
    "ethnicity",
    "country_of_birth",
    "disability",
    "migration_background",
    "employment_status",
    "job_position",
    "occupation_kldb",
    "last_occupation",
    "last_occupation_kldb",
    "kreis_code",
    "nationality",
    "race",
    "education_degree",
    "first_language",
    "second_language",
    "third_language",
    "zone",
    "religion",
];

/// DataDesigner's `PERSONA_FIELDS` (returned with `with_synthetic_personas`).
pub(crate) const PERSONA_FIELDS: &[&str] = &[
    "persona",
    "detailed_persona",
    "professional_persona",
    "career_goals_and_ambitions",
    "cultural_background",
    "arts_persona",
    "culinary_persona",
    "finance_persona",
    "healthcare_persona",
    "sports_persona",
    "travel_persona",
    "hobbies_and_interests",
    "hobbies_and_interests_list",
    "skills_and_expertise",
    "skills_and_expertise_list",
    "openness",
    "conscientiousness",
    "extraversion",
    "agreeableness",
    "neuroticism",
    "aspects",
    "digital_skill",
    "family_persona",
    "religious_persona",
    "religious_background",
    "linguistic_persona",
    "linguistic_background",
];

/// A person from dataset row `row` (columns `names`), with the derived fields.
pub(crate) fn derive_fields(
    names: &[String],
    row: &[Value],
    locale: &str,
    personas: bool,
    rng: &mut ChaCha8Rng,
) -> Value {
    let get = |f: &str| names.iter().position(|n| n == f).map(|i| row[i].clone());
    let mut pii: Vec<(String, Value)> = Vec::new();
    for f in PII_FIELDS {
        if *f == "locale" {
            pii.push(("locale".into(), Value::from(locale)));
        } else if let Some(v) = get(f) {
            pii.push(((*f).into(), v));
        }
    }
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    let field = |pii: &[(String, Value)], key: &str| {
        pii.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    let age = field(&pii, "age").and_then(|v| v.as_i64());
    let born = age.map(|a| birth_date(Utc::now().date_naive(), a, rng));
    let email = match (age, &born) {
        (Some(a), Some(b)) if a >= 18 => {
            let first = text(field(&pii, "first_name").as_ref());
            let middle = field(&pii, "middle_name").and_then(|v| v.as_str().map(str::to_owned));
            let last = text(field(&pii, "last_name").as_ref());
            let b = NaiveDate::parse_from_str(b, "%Y-%m-%d").ok();
            b.and_then(|b| email_address(&first, middle.as_deref(), &last, a, b, rng))
        }
        _ => None,
    };
    let phone = match (locale, age, field(&pii, "postcode")) {
        ("en_US", Some(a), Some(postcode)) if a >= 18 => {
            let code = match postcode {
                Value::String(s) => s,
                Value::Number(n) => format!("{:05}", n.as_u64().unwrap_or_default()),
                _ => String::new(),
            };
            super::phone::phone_number(&code, rng)
        }
        _ => None,
    };
    // DataDesigner derives it from `region` (the state, for en_US) and the birth date.
    let national_id = match (locale, field(&pii, "region"), &born) {
        ("en_US", Some(Value::String(state)), Some(b)) => NaiveDate::parse_from_str(b, "%Y-%m-%d")
            .ok()
            .map(|b| Value::String(ssn(&state, b, rng))),
        _ => None,
    };
    let mut set = |key: &str, value: Value| match pii.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => pii.push((key.into(), value)),
    };
    set("birth_date", born.map_or(Value::Null, Value::String));
    set("phone_number", phone.map_or(Value::Null, Value::String));
    set("email_address", email.map_or(Value::Null, Value::String));
    set("national_id", national_id.unwrap_or(Value::Null));
    if locale == "en_US"
        && !pii.iter().any(|(k, _)| k == "state")
        && let Some(i) = pii.iter().position(|(k, _)| k == "region")
    {
        let (_, region) = pii.remove(i);
        pii.push(("state".into(), region));
    }
    let mut out: Map<String, Value> = pii.into_iter().collect();
    if personas {
        for f in PERSONA_FIELDS {
            if let Some(v) = get(f) {
                out.insert((*f).into(), v);
            }
        }
    }
    Value::Object(out)
}

/// SSN area numbers by state before the 2011 randomization (DataDesigner's
/// `STATE_TO_AREA_SSN`, from the Social Security Administration's allocation).
const SSN_AREAS: &[(&str, u16, u16)] = &[
    ("NH", 1, 3),
    ("ME", 4, 7),
    ("VT", 8, 9),
    ("MA", 10, 34),
    ("RI", 35, 39),
    ("CT", 40, 49),
    ("NY", 50, 134),
    ("NJ", 135, 158),
    ("PA", 159, 211),
    ("MD", 212, 220),
    ("DE", 221, 222),
    ("VA", 223, 231),
    ("WV", 232, 236),
    ("NC", 237, 246),
    ("SC", 247, 251),
    ("GA", 252, 260),
    ("FL", 261, 267),
    ("OH", 268, 302),
    ("IN", 303, 317),
    ("IL", 318, 361),
    ("MI", 362, 386),
    ("WI", 387, 399),
    ("KY", 400, 407),
    ("TN", 408, 415),
    ("AL", 416, 424),
    ("MS", 425, 428),
    ("AR", 429, 432),
    ("LA", 433, 439),
    ("OK", 440, 448),
    ("TX", 449, 467),
    ("MN", 468, 477),
    ("IA", 478, 485),
    ("MO", 486, 500),
    ("ND", 501, 502),
    ("SD", 503, 504),
    ("NE", 505, 508),
    ("KS", 509, 515),
    ("MT", 516, 517),
    ("ID", 518, 519),
    ("WY", 520, 520),
    ("CO", 521, 524),
    ("NM", 525, 527),
    ("AZ", 526, 527),
    ("UT", 528, 529),
    ("NV", 530, 530),
    ("WA", 531, 539),
    ("OR", 540, 544),
    ("CA", 545, 573),
    ("AK", 574, 574),
    ("HI", 575, 576),
    ("DC", 577, 579),
    ("VI", 580, 580),
    ("PR", 580, 599),
    ("GU", 586, 586),
    ("AS", 586, 586),
];

/// The day SSNs stopped encoding the state (DataDesigner's `SSN_RANDOMIZATION_DATE`).
const SSN_RANDOMIZATION: (i32, u32, u32) = (2011, 6, 25);

/// DataDesigner's `generate_ssn`: `AAA-GG-SSSS` with an area number of `state` for people
/// born before the randomization (any, 1 to 899, for others and unknown states), never 666.
/// (DataDesigner's 30% "born in another state" draw is overwritten right after it is made,
/// so its area is always the state's; so is this one's.)
fn ssn(state: &str, born: NaiveDate, rng: &mut ChaCha8Rng) -> String {
    let (y, m, d) = SSN_RANDOMIZATION;
    let randomized = NaiveDate::from_ymd_opt(y, m, d).is_some_and(|r| born >= r);
    let (lo, hi) = SSN_AREAS
        .iter()
        .find(|(s, _, _)| *s == state)
        .filter(|_| !randomized)
        .map_or((1, 899), |&(_, lo, hi)| (lo, hi));
    let area = loop {
        let a = rng.random_range(lo..=hi);
        if a != 666 {
            break a;
        }
    };
    let group = rng.random_range(1..=99u16);
    let serial = rng.random_range(1..=9999u16);
    format!("{area:03}-{group:02}-{serial:04}")
}

/// Picks from `options` by weight.
fn weighted<'a>(options: &[(&'a str, f64)], rng: &mut ChaCha8Rng) -> &'a str {
    let total: f64 = options.iter().map(|(_, w)| w).sum();
    let mut u = rng.random::<f64>() * total;
    for (o, w) in options {
        if u < *w {
            return o;
        }
        u -= w;
    }
    options.last().map_or("", |(o, _)| o)
}

/// Lower-case ASCII letters and digits of `name` (DataDesigner transliterates with anyascii).
fn ascii_letters(name: &str) -> String {
    deunicode::deunicode(name)
        .to_lowercase()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

/// DataDesigner's `get_email_address`: a free-mail domain by age, a user name from the name,
/// and a suffix from the birth date. `None` when a name has no letters left.
fn email_address(
    first: &str,
    middle: Option<&str>,
    last: &str,
    age: i64,
    born: NaiveDate,
    rng: &mut ChaCha8Rng,
) -> Option<String> {
    let domains: [(&str, f64); 9] = match age {
        ..30 => [
            ("gmail.com", 710.0),
            ("icloud.com", 300.0),
            ("outlook.com", 50.0),
            ("hotmail.com", 40.0),
            ("yahoo.com", 35.0),
            ("protonmail.com", 20.0),
            ("zoho.com", 3.0),
            ("gmx.com", 3.0),
            ("aol.com", 0.1),
        ],
        30..50 => [
            ("gmail.com", 360.0),
            ("icloud.com", 270.0),
            ("outlook.com", 60.0),
            ("hotmail.com", 50.0),
            ("yahoo.com", 60.0),
            ("protonmail.com", 18.0),
            ("zoho.com", 7.0),
            ("gmx.com", 4.0),
            ("aol.com", 0.3),
        ],
        _ => [
            ("gmail.com", 430.0),
            ("icloud.com", 280.0),
            ("outlook.com", 90.0),
            ("hotmail.com", 110.0),
            ("yahoo.com", 135.0),
            ("protonmail.com", 12.0),
            ("zoho.com", 5.0),
            ("gmx.com", 4.0),
            ("aol.com", 1.1),
        ],
    };
    let domain = weighted(&domains, rng);
    let (first, last) = (ascii_letters(first), ascii_letters(last));
    let fi = first.chars().next()?;
    let li = last.chars().next()?;
    let mut patterns = vec![
        (format!("{first}.{last}"), 0.3),
        (format!("{first}{last}"), 0.2),
        (format!("{fi}{last}"), 0.15),
        (format!("{first}_{last}"), 0.1),
        (format!("{last}{fi}"), 0.15),
        (format!("{first}{li}"), 0.1),
    ];
    let middle = middle.map(ascii_letters).filter(|m| !m.is_empty());
    if let Some(m) = middle {
        let mi = &m[..1];
        patterns.extend([
            (format!("{first}{m}"), 0.0),
            (format!("{first}{mi}{last}"), 0.0),
            (format!("{first}{m}{last}"), 0.0),
        ]);
        let weights = [0.25, 0.17, 0.12, 0.08, 0.12, 0.08, 0.06, 0.06, 0.06];
        for (p, w) in patterns.iter_mut().zip(weights) {
            p.1 = w;
        }
    }
    let options: Vec<(&str, f64)> = patterns.iter().map(|(p, w)| (p.as_str(), *w)).collect();
    let user = weighted(&options, rng).to_owned();
    let random = rng.random_range(1..=99).to_string();
    let suffixes = [
        ("", 0.4),
        (random.as_str(), 0.3),
        (&format!("{:02}", born.year() % 100), 0.1),
        (&born.year().to_string(), 0.1),
        (&born.day().to_string(), 0.1),
    ];
    let suffix = weighted(&suffixes, rng);
    Some(format!("{user}{suffix}@{domain}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::rng::column_rng;
    use serde_json::json;

    fn person(age: i64, locale: &str) -> Value {
        let names: Vec<String> = ["first_name", "last_name", "age", "region", "persona"]
            .map(String::from)
            .to_vec();
        let row = [
            json!("Zoë"),
            json!("O'Brien"),
            json!(age),
            json!("NY"),
            json!("p"),
        ];
        derive_fields(&names, &row, locale, false, &mut column_rng(1, 2, 3))
    }

    #[test]
    fn derived_fields_follow_datadesigner() {
        let p = person(40, "en_US");
        let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "first_name",
                "last_name",
                "age",
                "locale",
                "birth_date",
                "phone_number",
                "email_address",
                "national_id",
                "state"
            ]
        );
        let email = p["email_address"].as_str().unwrap();
        let (user, domain) = email.split_once('@').unwrap();
        assert!(user.contains("zoe") || user.contains("obrien"), "{email}");
        assert!(
            user.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        );
        assert!(domain.ends_with(".com"), "{email}");
        assert_eq!(p["state"], "NY");
        assert!(p.get("persona").is_none(), "persona fields only when asked");
    }

    #[test]
    fn children_have_no_email_and_other_locales_keep_region() {
        let p = person(12, "en_GB");
        assert!(p["email_address"].is_null());
        assert_eq!(p["region"], "NY");
        assert!(p.get("state").is_none());
    }
}
