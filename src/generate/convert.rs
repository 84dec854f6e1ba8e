//! Type conversions with DataDesigner's (that is, Python's) semantics: expression `dtype`
//! casts, sampler `convert_to`, `decimal_places` rounding and `str()` of values.
//!
//! Results are JSON values; non-finite floats have no JSON form, so they are errors.

use serde_json::{Number, Value};

use crate::domain::dataset::ExprDtype;

/// A sampler's numeric `convert_to` (DataDesigner's `TypeConversionMixin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumConvert {
    /// `astype(float)`.
    Float,
    /// `round()` (half to even) then `astype(int)`.
    Int,
    /// `astype(str)`.
    Str,
}

impl NumConvert {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "float" => Some(Self::Float),
            "int" => Some(Self::Int),
            "str" => Some(Self::Str),
            _ => None,
        }
    }
}

/// A finite float as JSON.
pub(crate) fn float_value(x: f64) -> Result<Value, String> {
    Number::from_f64(x)
        .map(Value::Number)
        .ok_or_else(|| format!("{x} is not a finite number"))
}

/// Python's `float(text)`: surrounding whitespace and digit-separating underscores allowed.
pub(crate) fn parse_python_float(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.contains('_') {
        let b = t.as_bytes();
        let ok = b.iter().enumerate().all(|(i, c)| {
            *c != b'_'
                || (i > 0
                    && i + 1 < b.len()
                    && b[i - 1].is_ascii_digit()
                    && b[i + 1].is_ascii_digit())
        });
        return if ok {
            t.replace('_', "").parse().ok()
        } else {
            None
        };
    }
    t.parse().ok()
}

/// Casts an expression column's rendered text like DataDesigner's `_cast_type`.
pub(crate) fn cast_expression(text: &str, dtype: ExprDtype) -> Result<Value, String> {
    match dtype {
        ExprDtype::Str => Ok(Value::String(text.to_owned())),
        ExprDtype::Float => match parse_python_float(text) {
            Some(x) => float_value(x),
            None => Err(format!("could not convert {text:?} to float")),
        },
        ExprDtype::Int => match parse_python_float(text) {
            Some(x) => truncate_to_int(x).map(Value::from),
            None => Err(format!("could not convert {text:?} to int")),
        },
        // bool(int(float(x))), falling back to x.lower() == "true" when that raises ValueError
        // (which includes NaN); infinity raises OverflowError in Python, an error here too.
        ExprDtype::Bool => match parse_python_float(text) {
            Some(x) if x.is_infinite() => Err(format!("could not convert {text:?} to bool")),
            Some(x) if !x.is_nan() => Ok(Value::Bool(x.trunc() != 0.0)),
            _ => Ok(Value::Bool(text.to_lowercase() == "true")),
        },
    }
}

/// Python's `int(x)` for a float: truncation toward zero, within i64.
fn truncate_to_int(x: f64) -> Result<i64, String> {
    let t = x.trunc();
    // 2^63 is exactly representable; anything at or above it does not fit.
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&t) {
        Ok(t as i64)
    } else {
        Err(format!("{x} does not fit in a 64-bit integer"))
    }
}

/// Applies a sampler's numeric `convert_to` to a sampled value.
pub(crate) fn convert_number(value: &Value, to: NumConvert) -> Result<Value, String> {
    match to {
        NumConvert::Str => Ok(Value::String(python_str(value))),
        NumConvert::Float => match value {
            Value::Number(n) => float_value(n.as_f64().unwrap_or(f64::NAN)),
            Value::Bool(b) => Ok(Value::from(if *b { 1.0 } else { 0.0 })),
            Value::String(s) => parse_python_float(s)
                .ok_or_else(|| format!("could not convert {s:?} to float"))
                .and_then(float_value),
            other => Err(format!("could not convert {other} to float")),
        },
        NumConvert::Int => match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(value.clone()),
            Value::Number(n) => {
                truncate_to_int(n.as_f64().unwrap_or(f64::NAN).round_ties_even()).map(Value::from)
            }
            Value::Bool(b) => Ok(Value::from(i64::from(*b))),
            other => Err(format!("cannot round {other} to int")),
        },
    }
}

/// Python's `str(value)` for a JSON scalar (`True`, `3.0`, `1e+16`, ...).
pub(crate) fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        Value::Number(n) if n.is_f64() => python_float_repr(n.as_f64().unwrap_or(f64::NAN)),
        other => other.to_string(),
    }
}

/// Python's `repr(float)`: shortest round-trip digits, `.0` on integral values, and
/// exponent notation outside `[1e-4, 1e16)`.
pub(crate) fn python_float_repr(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let a = x.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        let s = format!("{x}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{x:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// numpy's `round(x, places)`: half to even, negative places round to tens, hundreds, ...
pub(crate) fn round_places(x: f64, places: i32) -> f64 {
    // Beyond 15 places an f64 has no digits left to round; beyond -308 everything is 0.
    if places > 15 {
        return x;
    }
    if places < -308 {
        return 0.0;
    }
    if places >= 0 {
        let f = 10f64.powi(places);
        let r = (x * f).round_ties_even() / f;
        if r.is_finite() { r } else { x }
    } else {
        let f = 10f64.powi(-places);
        (x / f).round_ties_even() * f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expression_casts_follow_python() {
        assert_eq!(cast_expression(" 3.7 ", ExprDtype::Int).unwrap(), json!(3));
        assert_eq!(cast_expression("-3.7", ExprDtype::Int).unwrap(), json!(-3));
        assert_eq!(
            cast_expression("1_000", ExprDtype::Float).unwrap(),
            json!(1000.0)
        );
        assert_eq!(cast_expression("2", ExprDtype::Bool).unwrap(), json!(true));
        assert_eq!(
            cast_expression("0.4", ExprDtype::Bool).unwrap(),
            json!(false)
        );
        assert_eq!(
            cast_expression("TRUE", ExprDtype::Bool).unwrap(),
            json!(true)
        );
        assert_eq!(
            cast_expression("yes", ExprDtype::Bool).unwrap(),
            json!(false)
        );
        assert_eq!(
            cast_expression("nan", ExprDtype::Bool).unwrap(),
            json!(false)
        );
        assert_eq!(
            cast_expression("abc", ExprDtype::Str).unwrap(),
            json!("abc")
        );
        assert!(cast_expression("abc", ExprDtype::Int).is_err());
        assert!(cast_expression("inf", ExprDtype::Float).is_err());
        assert!(cast_expression("1e300", ExprDtype::Int).is_err());
        assert!(cast_expression("inf", ExprDtype::Bool).is_err());
        assert!(cast_expression("_1", ExprDtype::Float).is_err());
    }

    #[test]
    fn convert_to_follows_pandas_astype() {
        assert_eq!(
            convert_number(&json!(2.5), NumConvert::Int).unwrap(),
            json!(2)
        );
        assert_eq!(
            convert_number(&json!(3.5), NumConvert::Int).unwrap(),
            json!(4)
        );
        assert_eq!(
            convert_number(&json!(true), NumConvert::Int).unwrap(),
            json!(1)
        );
        assert_eq!(
            convert_number(&json!(3), NumConvert::Float).unwrap(),
            json!(3.0)
        );
        assert_eq!(
            convert_number(&json!("1.5"), NumConvert::Float).unwrap(),
            json!(1.5)
        );
        assert_eq!(
            convert_number(&json!(3.0), NumConvert::Str).unwrap(),
            json!("3.0")
        );
        assert_eq!(
            convert_number(&json!(false), NumConvert::Str).unwrap(),
            json!("False")
        );
        assert!(convert_number(&json!("a"), NumConvert::Int).is_err());
        assert!(convert_number(&json!("a"), NumConvert::Float).is_err());
    }

    #[test]
    fn float_repr_matches_python() {
        assert_eq!(python_float_repr(0.1), "0.1");
        assert_eq!(python_float_repr(3.0), "3.0");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(1.5e-5), "1.5e-05");
        assert_eq!(python_float_repr(-0.0), "-0.0");
    }

    #[test]
    fn rounding_is_half_to_even() {
        assert_eq!(round_places(2.5, 0), 2.0);
        assert_eq!(round_places(1.2345, 2), 1.23);
        assert_eq!(round_places(1250.0, -2), 1200.0);
        assert_eq!(round_places(1.0e300, 20), 1.0e300);
        assert_eq!(round_places(1.0e300, 10), 1.0e300);
        assert_eq!(round_places(5.0, -400), 0.0);
    }
}
