//! Compiling the person samplers' parameters (`person_from_faker`, `person`): DataDesigner's
//! checks of `sex`, `age_range` and `city`, the faker locale, and the managed dataset.

use super::SamplerIssues;
use super::faker_locales;
use super::faker_person::{FakerPerson, SEXES};
use super::person::PersonDraw;
use crate::domain::dataset::{CityFilter, MAX_AGE, MIN_AGE, PersonFromFakerParams, PersonParams};

/// Compiles `person_from_faker` params found at `field`.
pub(crate) fn compile_faker(
    field: &str,
    pf: &PersonFromFakerParams,
    issues: &mut SamplerIssues<'_>,
) -> Option<FakerPerson> {
    let f = |name: &str| format!("{field}.{name}");
    let table = faker_locales::table(&pf.locale)
        .map_err(|msg| issues.bad(&f("locale"), msg))
        .ok();
    let sex = check_sex(pf.sex.as_deref(), &f("sex"), issues);
    let age_range = check_age_range(&pf.age_range, &f("age_range"), issues);
    let cities = check_cities(pf.city.as_ref(), &f("city"), issues);
    Some(FakerPerson {
        locale_name: pf.locale.clone(),
        table: table?,
        sex: sex?,
        cities: cities?,
        age_range: age_range?,
    })
}

/// Compiles `person` params found at `field`: filters checked, dataset rows selected.
pub(crate) fn compile_person(
    field: &str,
    pp: &PersonParams,
    issues: &mut SamplerIssues<'_>,
) -> Option<PersonDraw> {
    let f = |name: &str| format!("{field}.{name}");
    let sex = check_sex(pp.sex.as_deref(), &f("sex"), issues);
    let age_range = check_age_range(&pp.age_range, &f("age_range"), issues);
    let cities = check_cities(pp.city.as_ref(), &f("city"), issues);
    let (sex, age_range, cities) = (sex?, age_range?, cities?);
    match issues.people.person(pp, sex, age_range, cities) {
        Ok(d) => Some(d),
        Err((key, msg)) => {
            let at = if key.is_empty() {
                field.to_owned()
            } else {
                f(&key)
            };
            issues.bad(&at, msg);
            None
        }
    }
}

/// `sex`: DataDesigner's `SexT` (`Male` or `Female`), or both when absent.
fn check_sex(
    sex: Option<&str>,
    field: &str,
    issues: &mut SamplerIssues<'_>,
) -> Option<Option<&'static str>> {
    match sex {
        None => Some(None),
        Some(s) => match SEXES.iter().find(|x| **x == s) {
            Some(x) => Some(Some(*x)),
            None => {
                issues.bad(field, format!("sex must be 'Male' or 'Female', got '{s}'"));
                None
            }
        },
    }
}

/// `age_range`: DataDesigner's checks and messages.
fn check_age_range(
    range: &[i64],
    field: &str,
    issues: &mut SamplerIssues<'_>,
) -> Option<(i64, i64)> {
    let prefix = "'age_range' must be a list of two integers, representing the min and max age.";
    let &[lo, hi] = range else {
        issues.bad(field, format!("{prefix} Got {} values.", range.len()));
        return None;
    };
    let problem = if lo < MIN_AGE {
        Some(format!(
            "{prefix} The first integer (min age) must be greater than or equal to {MIN_AGE}, but the first integer provided was {lo}."
        ))
    } else if hi > MAX_AGE {
        Some(format!(
            "{prefix} The second integer (max age) must be less than or equal to {MAX_AGE}, but the second integer provided was {hi}."
        ))
    } else if lo >= hi {
        Some(format!(
            "{prefix} The first integer (min age) must be less than the second integer (max age), but the first integer provided was {lo} and the second integer provided was {hi}."
        ))
    } else {
        None
    };
    match problem {
        Some(msg) => {
            issues.bad(field, msg);
            None
        }
        None => Some((lo, hi)),
    }
}

/// `city`: one name or a non-empty list.
fn check_cities(
    city: Option<&CityFilter>,
    field: &str,
    issues: &mut SamplerIssues<'_>,
) -> Option<Option<Vec<String>>> {
    match city {
        None => Some(None),
        Some(c) if c.as_slice().is_empty() => {
            issues.bad(field, "city must name at least one city");
            None
        }
        Some(c) => Some(Some(c.as_slice().to_vec())),
    }
}
