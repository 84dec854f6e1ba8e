//! Python's `json.dumps`, as DataDesigner's text meets it: the schema it prints in a
//! structured or judge prompt, and the arguments its agent-rollout reader stringifies.

use serde_json::Value;

use super::float_repr;

/// `json.dumps(value, sort_keys=sort_keys)` with Python's other defaults: `", "` and `": "`
/// separators, everything outside printable ASCII escaped as `\uXXXX` (surrogate pairs above
/// the BMP), floats as `repr` prints them; keys in code-point order when sorted, else in the
/// value's order.
pub(crate) fn json_dumps(value: &Value, sort_keys: bool) -> String {
    let mut out = String::new();
    write_json(&mut out, value, sort_keys);
    out
}

fn write_json(out: &mut String, value: &Value, sort_keys: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (_, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, f) => out.push_str(&float_repr(f.unwrap_or(f64::NAN))),
        },
        Value::String(s) => write_json_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, item, sort_keys);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(out, key);
                out.push_str(": ");
                write_json(out, item, sort_keys);
            }
            out.push('}');
        }
    }
}

fn write_json_str(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}
