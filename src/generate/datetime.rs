//! Datetimes for the `datetime` and `timedelta` samplers: parsing the strings pandas'
//! `to_datetime` would accept in practice, truncating to a unit as numpy's `datetime64[unit]`
//! does, and formatting with Python strftime formats.

use std::fmt::Write;

use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// DataDesigner's default output format for sampled datetimes.
const DEFAULT_FORMAT: &str = "%Y-%m-%dT%H:%M:%S";

/// Sampling granularity (`Y`, `M`, `D`, `h`, `m`, `s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

impl Unit {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "Y" => Some(Self::Year),
            "M" => Some(Self::Month),
            "D" => Some(Self::Day),
            "h" => Some(Self::Hour),
            "m" => Some(Self::Minute),
            "s" => Some(Self::Second),
            _ => None,
        }
    }

    /// A duration of `n` units; only for the fixed-length units (not years or months).
    pub(crate) fn duration(self, n: i64) -> Option<Duration> {
        match self {
            Self::Day => Duration::try_days(n),
            Self::Hour => Duration::try_hours(n),
            Self::Minute => Duration::try_minutes(n),
            Self::Second => Duration::try_seconds(n),
            Self::Year | Self::Month => None,
        }
    }
}

/// Parses a datetime string: RFC 3339 (offsets are converted to UTC), ISO 8601 with `T` or a
/// space, optional fractional seconds, or just a date, `YYYY/MM/DD`, `YYYY-MM` or `YYYY`.
pub(crate) fn parse_datetime(s: &str) -> Option<NaiveDateTime> {
    let s = s.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
        return Some(dt.naive_utc());
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(dt);
        }
    }
    for fmt in ["%Y-%m-%d", "%Y/%m/%d"] {
        if let Ok(d) = NaiveDate::parse_from_str(s, fmt) {
            return Some(d.and_time(NaiveTime::MIN));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(&format!("{s}-01"), "%Y-%m-%d") {
        return Some(d.and_time(NaiveTime::MIN));
    }
    if s.len() == 4 && s.bytes().all(|b| b.is_ascii_digit()) {
        let year = s.parse().ok()?;
        return NaiveDate::from_ymd_opt(year, 1, 1).map(|d| d.and_time(NaiveTime::MIN));
    }
    None
}

/// Truncates to the start of its unit (numpy `datetime64[unit]` casting floors).
pub(crate) fn floor_to_unit(dt: NaiveDateTime, unit: Unit) -> NaiveDateTime {
    let date = dt.date();
    let time = dt.time();
    let start_of = |d: Option<NaiveDate>| d.unwrap_or(date).and_time(NaiveTime::MIN);
    let at =
        |h: u32, m: u32, s: u32| date.and_time(NaiveTime::from_hms_opt(h, m, s).unwrap_or(time));
    match unit {
        Unit::Year => start_of(NaiveDate::from_ymd_opt(date.year(), 1, 1)),
        Unit::Month => start_of(NaiveDate::from_ymd_opt(date.year(), date.month(), 1)),
        Unit::Day => start_of(Some(date)),
        Unit::Hour => at(time.hour(), 0, 0),
        Unit::Minute => at(time.hour(), time.minute(), 0),
        Unit::Second => at(time.hour(), time.minute(), time.second()),
    }
}

/// A compiled strftime format.
#[derive(Debug, Clone)]
pub(crate) struct DateFormat(Vec<Item<'static>>);

impl DateFormat {
    /// The format DataDesigner uses when `convert_to` is not set.
    pub(crate) fn default_format() -> Self {
        Self::compile(DEFAULT_FORMAT).unwrap_or(Self(Vec::new()))
    }

    /// Compiles a Python strftime format; `%f` means microseconds, as in Python.
    pub(crate) fn compile(python_format: &str) -> Result<Self, String> {
        let translated = python_format.replace("%f", "%6f");
        let items = StrftimeItems::new(&translated)
            .parse_to_owned()
            .map_err(|_| format!("'{python_format}' is not a valid strftime format"))?;
        let format = Self(items);
        // Formatting fails for fields a naive datetime lacks (e.g. `%z`); find out now.
        let probe = NaiveDate::from_ymd_opt(2012, 12, 21)
            .map(|d| d.and_time(NaiveTime::MIN))
            .unwrap_or_default();
        format
            .format(probe)
            .map_err(|_| format!("'{python_format}' cannot format a datetime without timezone"))?;
        Ok(format)
    }

    /// Formats `dt`; never panics (chrono's `to_string` would on a bad format).
    pub(crate) fn format(&self, dt: NaiveDateTime) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(24);
        write!(out, "{}", dt.format_with_items(self.0.iter()))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> NaiveDateTime {
        parse_datetime(s).unwrap()
    }

    #[test]
    fn parses_the_usual_shapes() {
        let expected = NaiveDate::from_ymd_opt(2024, 3, 5)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        for s in [
            "2024-03-05",
            "2024/03/05",
            "2024-03-05T00:00:00",
            "2024-03-05 00:00",
            "2024-03-05T01:00:00+01:00",
        ] {
            assert_eq!(parse_datetime(s), Some(expected), "{s}");
        }
        assert_eq!(dt("2024-03").day(), 1);
        assert_eq!(dt("2024").month(), 1);
        assert_eq!(dt("2024-03-05T10:20:30.5").nanosecond(), 500_000_000);
        assert_eq!(parse_datetime("not a date"), None);
        assert_eq!(parse_datetime("2024-13-01"), None);
    }

    #[test]
    fn floors_like_numpy() {
        let t = dt("2024-07-15T13:45:59");
        assert_eq!(floor_to_unit(t, Unit::Year), dt("2024-01-01"));
        assert_eq!(floor_to_unit(t, Unit::Month), dt("2024-07-01"));
        assert_eq!(floor_to_unit(t, Unit::Day), dt("2024-07-15"));
        assert_eq!(floor_to_unit(t, Unit::Hour), dt("2024-07-15T13:00:00"));
        assert_eq!(floor_to_unit(t, Unit::Minute), dt("2024-07-15T13:45:00"));
        assert_eq!(floor_to_unit(t, Unit::Second), t);
    }

    #[test]
    fn formats_python_strftime() {
        let t = dt("2024-07-15T13:45:59.25");
        assert_eq!(
            DateFormat::default_format().format(t).unwrap(),
            "2024-07-15T13:45:59"
        );
        assert_eq!(
            DateFormat::compile("%d/%m/%Y %f")
                .unwrap()
                .format(t)
                .unwrap(),
            "15/07/2024 250000"
        );
        assert!(DateFormat::compile("%Y-%Q").is_err());
        assert!(DateFormat::compile("%Y %z").is_err());
    }
}
