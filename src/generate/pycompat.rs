//! Python's `str`, `list` and `dict` methods in templates (`s.split(',')`, `', '.join(xs)`,
//! `d.items()`), served by minijinja-contrib's pycompat layer, each paid for before it runs.
//!
//! DataDesigner renders with Python's Jinja, so configs call these methods; pycompat implements
//! them but pays for little: the engine charges a method's result only once it exists, so
//! `''.join([s, s, ...])` or `s.split(',')` on a long string would build gigabytes before the
//! fuel ran out. This layer stands in front of pycompat and, for every method it lets through:
//!
//! * charges the **work** of reading the string receiver and string arguments, at the rate the
//!   engine charges a filter's string input, so a loop of cheap-looking calls on a long string
//!   runs out of fuel instead of past the render deadline;
//! * checks that the record's fuel can pay for the most the result can **build** (a bound
//!   computed from the inputs, per method), before anything is allocated.
//!
//! Only the methods listed in [`METHODS`] pass. A method that a new pycompat release adds is
//! refused as unknown until it is listed here with its cost, so nothing can go uncharged by
//! omission; `generate::tests::template_producers` checks the list against what pycompat serves.
//! `str.format` pays through the format budget in synthgate's minijinja patch, field by field,
//! since only the formatter knows what a field writes.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, State, Value};

/// Every method served, by receiver kind. Methods not listed are unknown.
pub(crate) const METHODS: &[(ValueKind, &[&str])] = &[
    (
        ValueKind::String,
        &[
            "upper",
            "lower",
            "islower",
            "isupper",
            "isspace",
            "isdigit",
            "isnumeric",
            "isalnum",
            "isalpha",
            "isascii",
            "strip",
            "lstrip",
            "rstrip",
            "replace",
            "title",
            "split",
            "splitlines",
            "capitalize",
            "count",
            "find",
            "format",
            "rfind",
            "startswith",
            "endswith",
            "join",
        ],
    ),
    (ValueKind::Map, &["keys", "values", "items", "get"]),
    (ValueKind::Seq, &["count"]),
];

/// Bytes one item of a list costs besides its text: the value and its allocation.
const ITEM_BYTES: usize = 64;

/// Bytes one unit of fuel pays for (minijinja's `UNITS_PER_FUEL`).
const BYTES_PER_FUEL: usize = 64;

/// The unknown-method callback of synthgate's template environments.
pub(crate) fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let served = METHODS
        .iter()
        .any(|(kind, names)| *kind == value.kind() && names.contains(&method));
    if !served {
        return Err(Error::from(ErrorKind::UnknownMethod));
    }
    let string_args: usize = args.iter().filter_map(Value::as_str).map(str::len).sum();
    // A string is read byte by byte; a list's `count` visits every item.
    let receiver = match value.as_str() {
        Some(s) => s.len(),
        None => value.len().unwrap_or(0).saturating_mul(ITEM_BYTES),
    };
    state.consume_fuel((receiver.saturating_add(string_args) / BYTES_PER_FUEL) as u64)?;
    state.ensure_bytes(built(value, method, args)?)?;
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// The most bytes the result of `value.method(args)` can take, from its inputs. Reads the
/// receiver at most once more (counting separators), which the work charge paid for.
fn built(value: &Value, method: &str, args: &[Value]) -> Result<usize, Error> {
    let Some(s) = value.as_str() else {
        // A list's `count` compares (charged by the engine's work budget); a dict's `get`
        // returns a value that exists; `keys`, `values` and `items` iterate lazily, item by
        // item, charged as any iteration is.
        return Ok(0);
    };
    let len = s.len();
    let arg = |i: usize| args.get(i).and_then(Value::as_str);
    Ok(match method {
        // Answers of a few bytes.
        "islower" | "isupper" | "isspace" | "isdigit" | "isnumeric" | "isalnum" | "isalpha"
        | "isascii" | "count" | "find" | "rfind" | "startswith" | "endswith" => 0,
        // A slice of the receiver.
        "strip" | "lstrip" | "rstrip" => len,
        // Unicode case mapping turns one character into at most three, each no longer in
        // UTF-8 than the one it came from.
        "upper" | "lower" | "title" | "capitalize" => len.saturating_mul(3),
        "replace" => {
            let (old, new) = (arg(0).unwrap_or(""), arg(1).unwrap_or(""));
            let matches = if old.is_empty() {
                s.chars().count().saturating_add(1)
            } else {
                s.matches(old).count()
            };
            len.saturating_add(matches.saturating_mul(new.len()))
        }
        "split" => {
            let items = match arg(0) {
                Some(sep) => s.matches(sep).count().saturating_add(1),
                None => s.split_whitespace().count(),
            };
            len.saturating_add(items.saturating_mul(ITEM_BYTES))
        }
        "splitlines" => {
            let items = s.bytes().filter(|b| *b == b'\n').count().saturating_add(1);
            len.saturating_add(items.saturating_mul(ITEM_BYTES))
        }
        // Paid field by field as the formatter writes (the format budget).
        "format" => len,
        "join" => joined(s, args.first())?,
        _ => return Err(Error::from(ErrorKind::UnknownMethod)),
    })
}

/// What `sep.join(items)` writes: every item's text and a separator between each two.
/// Counting stops as soon as it passes what any render could pay for.
fn joined(sep: &str, items: Option<&Value>) -> Result<usize, Error> {
    const MORE_THAN_ANY_RENDER: usize = (crate::generate::template::TEMPLATE_FUEL as usize)
        .saturating_mul(BYTES_PER_FUEL)
        .saturating_add(1);
    let Some(items) = items else { return Ok(0) };
    let mut total = 0usize;
    for (i, item) in items.try_iter()?.enumerate() {
        let text = item.as_str().map_or(ITEM_BYTES, str::len);
        let between = if i > 0 { sep.len() } else { 0 };
        total = total.saturating_add(text).saturating_add(between);
        if total >= MORE_THAN_ANY_RENDER {
            break;
        }
    }
    Ok(total)
}
