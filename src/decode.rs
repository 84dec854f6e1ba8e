//! Untrusted documents (request bodies, `/mcp` messages, JSONL dataset rows) to JSON values,
//! strictly: duplicate keys and runaway nesting are refused before any expensive work, for JSON
//! and YAML alike.
//!
//! * **Duplicate keys.** `serde_json` and YAML loaders keep the last of two equal keys, so a
//!   config could say two things and mean one. Refused with `duplicate_key`, naming the path.
//! * **Nesting.** Documents nest at most [`MAX_DEPTH`] levels. For YAML that is checked by a
//!   linear pre-scan ([`yaml_flow_depth_exceeds`]) *before* parsing: the YAML parser's cost grows
//!   with the square of the flow nesting depth (a 300 KB document of nested `[` took 64 s).
//! * **Size.** A document holds at most [`MAX_VALUES`] values, counted as they are parsed: a
//!   10 MB body of small numbers is five million values, which took 10 to 19 s of CPU and
//!   800 MB to build before any size check could look at it. YAML documents are at most
//!   [`MAX_YAML_BYTES`] long, since the YAML loader reads a whole document into events before
//!   the first value is built.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Deepest nesting of arrays and objects a request body may have. DataDesigner configs nest
/// a handful of levels (a JSON schema in an `llm-structured` column perhaps a dozen).
pub const MAX_DEPTH: usize = 64;

/// Most values (arrays, objects, strings, numbers, booleans and nulls, each counting one) a
/// request body may hold. A DataDesigner config is hundreds to a few thousand; inline seed
/// rows may bring tens of thousands. Bigger data belongs in an uploaded dataset.
pub const MAX_VALUES: usize = 250_000;

/// Longest YAML document accepted: configs are kilobytes; this keeps the loader's event list
/// (about 100 bytes an event) to a few hundred megabytes at worst.
pub const MAX_YAML_BYTES: usize = 2 << 20;

/// Why a body was refused.
#[derive(Debug)]
pub enum DecodeError {
    /// Not well-formed, or nested too deeply; the message says which.
    Syntax(String),
    /// An object has the same key twice; the message names the path.
    DuplicateKey(String),
}

/// Parses JSON strictly (see the module docs).
pub fn json(body: &[u8]) -> Result<Value, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = decode(&mut de)?;
    de.end()
        .map_err(|e| DecodeError::Syntax(format!("not valid JSON: {e}")))?;
    Ok(value)
}

/// Parses YAML strictly (see the module docs).
pub fn yaml(text: &str) -> Result<Value, DecodeError> {
    if text.len() > MAX_YAML_BYTES {
        return Err(DecodeError::Syntax(format!(
            "the YAML document is {} bytes, more than the {MAX_YAML_BYTES} allowed; send large documents as JSON",
            text.len()
        )));
    }
    if yaml_flow_depth_exceeds(text, MAX_DEPTH) {
        return Err(DecodeError::Syntax(format!(
            "not valid YAML: flow collections ([ ] and {{ }}) nest more than {MAX_DEPTH} levels deep"
        )));
    }
    decode(yaml_serde::Deserializer::from_str(text))
}

fn decode<'de, D: Deserializer<'de>>(de: D) -> Result<Value, DecodeError>
where
    D::Error: fmt::Display,
{
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(de, &mut track);
    let left = Cell::new(MAX_VALUES);
    match (Strict {
        depth: 0,
        left: &left,
    })
    .deserialize(tracked)
    {
        Ok(v) => Ok(v),
        Err(e) => {
            let path = track.path().to_string();
            let text = e.to_string();
            // YAML errors put the path in front of the message, JSON errors a position after.
            let duplicate = text
                .find(DUPLICATE_MARK)
                .and_then(|at| text[at + DUPLICATE_MARK.len()..].split_once('\u{0}'))
                .map(|(key, _)| key);
            Err(match duplicate {
                Some(key) if path == "." => {
                    DecodeError::DuplicateKey(format!("the key `{key}` appears twice"))
                }
                // The path is the object's own (the key was not taken yet).
                Some(key) => {
                    DecodeError::DuplicateKey(format!("the key `{key}` appears twice in `{path}`"))
                }
                None if path == "." => DecodeError::Syntax(text),
                None => DecodeError::Syntax(format!("{text} (at `{path}`)")),
            })
        }
    }
}

/// Error text that marks a duplicate key, followed by the key and a NUL (read back by
/// [`decode`]; a key from a parsed document cannot hold a NUL that confuses this, since the
/// first NUL after the mark ends the key as written here).
const DUPLICATE_MARK: &str = "\u{0}duplicate key:";

/// Builds a [`Value`] like `Value::deserialize`, refusing duplicate keys, deep nesting and
/// more than [`MAX_VALUES`] values.
#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    /// Values the document may still hold (shared by every level).
    left: &'a Cell<usize>,
}

impl Strict<'_> {
    fn nested<E: serde::de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format_args!(
                "arrays and objects nest more than {MAX_DEPTH} levels deep"
            )));
        }
        Ok(Self {
            depth: self.depth + 1,
            left: self.left,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        // Counted before the value is built, so a long array stops at the bound.
        match self.left.get().checked_sub(1) {
            Some(left) => self.left.set(left),
            None => {
                return Err(D::Error::custom(format_args!(
                    "the document holds more than {MAX_VALUES} values"
                )));
            }
        }
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        // A non-finite float (YAML's `.inf`, `.nan`) has no JSON form. Read as null it was
        // silently the field's default; refused, the client learns what it sent.
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| {
                E::custom(format_args!(
                    "{v} is not a finite number (`.inf` and `.nan` have no JSON form)"
                ))
            })
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        self.deserialize(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<KeyString>()? {
            if out.contains_key(&key.0) {
                // Closed by a second NUL: parsers append a position to custom errors.
                return Err(A::Error::custom(format_args!(
                    "{DUPLICATE_MARK}{}\u{0}",
                    key.0
                )));
            }
            let value = map.next_value_seed(inner)?;
            out.insert(key.0, value);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key as JSON sees it: YAML keys that are numbers or booleans become their text,
/// as `serde_json::Value` makes them.
struct KeyString(String);

impl<'de> serde::Deserialize<'de> for KeyString {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean key")
            }
            fn visit_str<E>(self, v: &str) -> Result<KeyString, E> {
                Ok(KeyString(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<KeyString, E> {
                Ok(KeyString(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<KeyString, E> {
                Ok(KeyString(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<KeyString, E> {
                Ok(KeyString(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<KeyString, E> {
                Ok(KeyString(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<KeyString, E> {
                Ok(KeyString(v.to_string()))
            }
        }
        de.deserialize_any(V)
    }
}

/// What kind of JSON value `v` is, as messages say it ("a number", "an object").
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether YAML flow collections in `text` nest deeper than `limit`, by a linear scan that
/// follows YAML's rules as far as they decide where a `[` or `{` opens a collection: quoted
/// scalars and comments are skipped; in block context only a bracket that starts a node
/// opens one (`key: a[b` is text); block scalars (`|`, `>`) are skipped by indentation. When
/// in doubt it counts, so it may overestimate (refusing some odd document a parser would take)
/// but never underestimates what a parser would nest.
pub fn yaml_flow_depth_exceeds(text: &str, limit: usize) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    let mut depth = 0usize;
    // Whether the next non-blank character starts a node (a scalar or a collection).
    let mut node_start = true;
    // Indentation of the current line, and where a block scalar's content must be deeper.
    let mut line_indent = 0usize;
    let mut at_line_start = true;
    let mut block_scalar_indent: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        if at_line_start {
            let start = i;
            while i < b.len() && b[i] == b' ' {
                i += 1;
            }
            line_indent = i - start;
            at_line_start = false;
            if let Some(min) = block_scalar_indent {
                let blank = i >= b.len() || b[i] == b'\n' || b[i] == b'\r';
                if blank || line_indent > min {
                    skip_line(b, &mut i);
                    i += 1; // the newline
                    at_line_start = true;
                    continue;
                }
                block_scalar_indent = None;
            }
            if depth == 0 {
                node_start = true;
            }
            continue;
        }
        match c {
            b'\n' => {
                at_line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' if i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n') => {
                skip_line(b, &mut i);
                continue;
            }
            b'"' | b'\'' if node_start => {
                skip_quoted(b, &mut i);
                node_start = false;
                continue;
            }
            b'[' | b'{' if node_start || depth > 0 => {
                depth += 1;
                if depth > limit {
                    return true;
                }
                node_start = true;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                node_start = false;
            }
            b',' if depth > 0 => node_start = true,
            b'|' | b'>' if node_start && depth == 0 => {
                block_scalar_indent = Some(line_indent);
                skip_line(b, &mut i);
                continue;
            }
            b'-' | b'?' | b':' => {
                // An indicator when a blank follows (`- [`, `key: {`, `? [`), or `:` in flow
                // context: a node may follow. Otherwise part of a plain scalar (`-5`, `a:b`).
                let blank_next = b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
                node_start = blank_next || (depth > 0 && c == b':');
            }
            b'&' | b'!' if node_start => {
                // An anchor or a tag: the node follows after the next blank.
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                continue;
            }
            // A plain scalar: it ends at a flow indicator in flow context, or at `: ` or ` #`
            // in block context, both of which the arms above catch.
            _ => node_start = false,
        }
        i += 1;
    }
    false
}

fn skip_line(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i] != b'\n' {
        *i += 1;
    }
}

/// Skips a quoted scalar starting at `b[*i]` (a quote), honouring `\` escapes in double quotes
/// and `''` in single quotes; an unterminated one runs to the end.
fn skip_quoted(b: &[u8], i: &mut usize) {
    let quote = b[*i];
    *i += 1;
    while *i < b.len() {
        let c = b[*i];
        if quote == b'"' && c == b'\\' {
            *i += 2;
            continue;
        }
        if c == quote {
            if quote == b'\'' && b.get(*i + 1) == Some(&b'\'') {
                *i += 2;
                continue;
            }
            *i += 1;
            return;
        }
        *i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn dup(r: Result<Value, DecodeError>) -> String {
        match r {
            Err(DecodeError::DuplicateKey(m)) => m,
            other => panic!("expected a duplicate key, got {other:?}"),
        }
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let m = dup(json(
            br#"{"config": {"columns": [{"name": "a", "name": "b"}]}}"#,
        ));
        assert_eq!(m, "the key `name` appears twice in `config.columns[0]`");
        let m = dup(json(br#"{"x": {"a": {"a": 1, "a": 2}}}"#));
        assert_eq!(m, "the key `a` appears twice in `x.a`");
        let m = dup(json(br#"{"x": {"a": 1, "b": 2, "a": 3}}"#));
        assert_eq!(m, "the key `a` appears twice in `x`");
        let m = dup(json(br#"{"a": 1, "a": 2}"#));
        assert_eq!(m, "the key `a` appears twice");
        let m = dup(yaml("columns:\n  - name: a\n    name: b\n"));
        assert!(m.contains("`name`") && m.contains("columns[0]"), "{m}");
        let m = dup(yaml("num_records: 1\nnum_records: 2\n"));
        assert!(m.contains("num_records"), "{m}");
    }

    #[test]
    fn same_values_as_serde_json_otherwise() {
        let text =
            r#"{"a": [1, -2, 3.5, true, null, "x"], "b": {"c": {}}, "u": 18446744073709551615}"#;
        let strict = json(text.as_bytes()).unwrap();
        let plain: Value = serde_json::from_str(text).unwrap();
        assert_eq!(strict, plain);
        let y = yaml("a: [1, -2, 3.5, true, null, x]\nb: {c: {}}\n1: one\ntrue: yes\n").unwrap();
        assert_eq!(y["a"], plain["a"]);
        assert_eq!(y["1"], "one");
        assert_eq!(y["true"], "yes");
        assert!(matches!(json(b"{} x"), Err(DecodeError::Syntax(_))));
    }

    #[test]
    fn non_finite_yaml_numbers_are_refused() {
        for text in ["timeout: .inf\n", "x: [1, -.inf]\n", "rate: .nan\n"] {
            match yaml(text) {
                Err(DecodeError::Syntax(m)) => assert!(m.contains("not a finite number"), "{m}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert_eq!(yaml("x: 1.5e3\n").unwrap()["x"], 1500.0);
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(json(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(matches!(json(deep.as_bytes()), Err(DecodeError::Syntax(m)) if m.contains("nest")));
        assert!(matches!(yaml(&deep), Err(DecodeError::Syntax(m)) if m.contains("nest")));
        let block = (0..MAX_DEPTH + 1)
            .map(|d| format!("{}k:\n", "  ".repeat(d)))
            .collect::<String>();
        assert!(matches!(yaml(&block), Err(DecodeError::Syntax(m)) if m.contains("nest")));
    }

    /// A 10 MB list of numbers took 10 to 19 s of CPU and 800 MB before the bound.
    #[test]
    fn value_count_is_bounded() {
        let list = |n: usize| format!("{{\"metadata\": [{}1]}}", "1,".repeat(n - 1));
        // The object and the array count too.
        assert!(json(list(MAX_VALUES - 2).as_bytes()).is_ok());
        for body in [list(MAX_VALUES - 1), list(5_000_000)] {
            let started = Instant::now();
            match json(body.as_bytes()) {
                Err(DecodeError::Syntax(m)) => assert!(m.contains("values"), "{m}"),
                other => panic!("expected a size error, got {other:?}"),
            }
            assert!(started.elapsed() < Duration::from_secs(5));
        }
        let yaml_list = format!("metadata:\n{}", "- 1\n".repeat(MAX_VALUES));
        assert!(matches!(yaml(&yaml_list), Err(DecodeError::Syntax(m)) if m.contains("values")));
        let long = format!("a: '{}'\n", "x".repeat(MAX_YAML_BYTES));
        assert!(matches!(yaml(&long), Err(DecodeError::Syntax(m)) if m.contains("bytes")));
    }

    /// 300 KB of nested flow sequences took 64 s to parse before the pre-scan.
    #[test]
    fn deep_yaml_is_refused_in_linear_time() {
        let n = 150_000;
        let bomb = format!("a: {}{}", "[".repeat(n), "]".repeat(n));
        let started = Instant::now();
        assert!(yaml(&bomb).is_err());
        assert!(started.elapsed() < Duration::from_secs(1));
        // Brackets inside quotes or after a key's text do not open collections.
        let text = format!(
            "p: \"{}\"\nq: '{}'\nr: a{}\ns: |\n  {}\n# {}\n",
            "[".repeat(500),
            "{".repeat(500),
            "[".repeat(500),
            "[".repeat(500),
            "[".repeat(500)
        );
        assert!(!yaml_flow_depth_exceeds(&text, MAX_DEPTH), "{text}");
        assert_eq!(yaml(&text).unwrap()["p"].as_str().unwrap().len(), 500);
        // A quoted closer does not hide real nesting.
        let sneaky = format!("a: {}", "[ \"]\", ".repeat(MAX_DEPTH + 1));
        assert!(yaml_flow_depth_exceeds(&sneaky, MAX_DEPTH));
        // Nor does a quote inside a plain scalar.
        let sneaky = format!("a: don't\nb: {}", "[".repeat(MAX_DEPTH + 1));
        assert!(yaml_flow_depth_exceeds(&sneaky, MAX_DEPTH));
    }
}
