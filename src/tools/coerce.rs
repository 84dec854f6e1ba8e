//! `coerce_arguments`: a tool config's opt-in conversion of a call's arguments to the types its
//! input schema declares, where the conversion loses nothing (`"42"` to `42`, `"true"` to
//! `true`, `3.0` to `3`, `7` to `"7"`). Off by default, as in DataDesigner, which sends the
//! model's arguments unchanged; the MCP client tool-execution guide converts them. Whatever is
//! still wrong after conversion is a validation error the model is told about.

use serde_json::{Number, Value};

/// Converts `value` in place toward `schema`: the declared `type` of the value itself, then of
/// object `properties` (and `additionalProperties`) and array `items`, recursively. Values
/// that already match, schemas with several types, and conversions that would change the
/// value are left alone.
pub fn to_schema(value: &mut Value, schema: &Value) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if let Some(ty) = schema.get("type").and_then(Value::as_str)
        && let Some(converted) = convert(value, ty)
    {
        *value = converted;
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|s| s.is_object());
            for (k, v) in map.iter_mut() {
                if let Some(s) = props.and_then(|p| p.get(k)).or(extra) {
                    to_schema(v, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for v in items {
                    to_schema(v, s);
                }
            }
        }
        _ => {}
    }
}

/// `value` as JSON type `ty`, when it is not one already and the conversion is lossless.
fn convert(value: &Value, ty: &str) -> Option<Value> {
    match (ty, value) {
        ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
        ("integer", Value::Number(n)) if !n.is_i64() && !n.is_u64() => {
            let f = n.as_f64()?;
            // Whole and inside the range where f64 holds every integer exactly.
            (f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0).then(|| Value::from(f as i64))
        }
        ("number", Value::String(s)) => {
            let f = s.trim().parse::<f64>().ok()?;
            // "1e400" parses to infinity; JSON has no such number.
            Number::from_f64(f).map(Value::Number)
        }
        ("boolean", Value::String(s)) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "flag": {"type": "boolean"},
            "label": {"type": "string"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "inner": {"type": "object", "properties": {"k": {"type": "integer"}}}
        }})
    }

    #[test]
    fn converts_what_is_lossless() {
        let mut v = json!({"n": "42", "x": " 1.5 ", "flag": "true", "label": 7,
            "ids": ["1", 2, 3.0], "inner": {"k": "-3"}, "other": "9"});
        to_schema(&mut v, &schema());
        assert_eq!(
            v,
            json!({"n": 42, "x": 1.5, "flag": true, "label": "7",
                "ids": [1, 2, 3], "inner": {"k": -3}, "other": "9"})
        );
    }

    #[test]
    fn leaves_what_would_change_or_cannot_convert() {
        let mut v = json!({"n": "4.2", "x": "1e400", "flag": "yes", "ids": [2.5],
            "inner": "not an object"});
        let before = v.clone();
        to_schema(&mut v, &schema());
        assert_eq!(v, before);
        let mut v = json!({"n": 1e300});
        to_schema(&mut v, &schema());
        assert_eq!(
            v,
            json!({"n": 1e300}),
            "past 2^53 a float is not an exact integer"
        );
    }

    #[test]
    fn schemas_without_a_single_type_are_left_alone() {
        let mut v = json!({"a": "1"});
        to_schema(
            &mut v,
            &json!({"type": "object", "properties": {"a": {"type": ["integer", "string"]}}}),
        );
        assert_eq!(v, json!({"a": "1"}));
        to_schema(&mut v, &json!(true));
        assert_eq!(v, json!({"a": "1"}));
    }
}
