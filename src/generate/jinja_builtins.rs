//! Jinja's built-in filters that minijinja lacks or writes differently, so that every filter a
//! DataDesigner template can reach exists here and gives Python's answer.
//!
//! DataDesigner's default (`secure`) engine allows `abs capitalize escape first float
//! forceescape int items last length list lower max min random replace reverse round sort
//! string title trim truncate unique upper urlencode` and its own `jsonpath`; its `native`
//! engine every Jinja built-in. minijinja has most of them; this module adds `random`,
//! `truncate` (Jinja's positional form), `forceescape`, `jsonpath`, `center`, `wordcount`,
//! `filesizeformat` and `striptags`, and replaces `escape`/`e`, whose minijinja form escapes
//! `/` and writes quotes differently from markupsafe's. Not served: `urlize`, `xmlattr`,
//! `wordwrap` and the `callable` test (HTML and layout helpers no prompt has been seen to
//! use; a template using one is refused at submit as an unknown filter, never silently).
//!
//! `random` draws from the record's own stream (job seed, record index, template), so a job
//! re-run with its seed picks the same items, as every sampler does.

use std::cell::RefCell;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::template::{FORMAT_BUDGET, MAX_RENDERED_LEN};

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_filter("random", random);
    env.add_filter("truncate", truncate);
    env.add_filter("escape", escape);
    env.add_filter("e", escape);
    env.add_filter("forceescape", escape);
    env.add_filter("jsonpath", jsonpath);
    env.add_filter("center", center);
    env.add_filter("wordcount", wordcount);
    env.add_filter("filesizeformat", minijinja_contrib::filters::filesizeformat);
    env.add_filter("striptags", minijinja_contrib::filters::striptags);
}

thread_local! {
    /// The random stream of the render running on this thread (see [`RandScope`]).
    static RAND: RefCell<Option<ChaCha8Rng>> = const { RefCell::new(None) };
}

/// Installs `rng` as the stream `random` draws from for as long as the guard lives: one
/// render, on one thread (minijinja renders synchronously).
pub(crate) struct RandScope(Option<ChaCha8Rng>);

impl RandScope {
    pub(crate) fn enter(rng: ChaCha8Rng) -> Self {
        Self(RAND.with(|r| r.replace(Some(rng))))
    }
}

impl Drop for RandScope {
    fn drop(&mut self) {
        let previous = self.0.take();
        RAND.with(|r| *r.borrow_mut() = previous);
    }
}

/// `seq | random`: one item (a character of a string), or undefined when `seq` is empty, as
/// Python's `random.choice` behind Jinja's filter.
fn random(seq: &Value) -> Result<Value, Error> {
    if !matches!(
        seq.kind(),
        ValueKind::Seq | ValueKind::String | ValueKind::Iterable
    ) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "random: can only pick from a list or a string, got {}",
                seq.kind()
            ),
        ));
    }
    let len = match seq.len() {
        Some(n) => n,
        None => seq.try_iter()?.count(),
    };
    if len == 0 {
        return Ok(Value::UNDEFINED);
    }
    let at = RAND.with(|r| match r.borrow_mut().as_mut() {
        Some(rng) => rng.random_range(0..len),
        // Outside a record (the submit-time probe renders templates once): the first item,
        // deterministically.
        None => 0,
    });
    if seq.kind() == ValueKind::String {
        let s = seq.as_str().unwrap_or_default();
        return Ok(s
            .chars()
            .nth(at)
            .map(Value::from)
            .unwrap_or(Value::UNDEFINED));
    }
    match seq.get_item_by_index(at) {
        Ok(v) if !v.is_undefined() => Ok(v),
        _ => Ok(seq.try_iter()?.nth(at).unwrap_or(Value::UNDEFINED)),
    }
}

/// Python's `str(value)` for the text filters: strings as they are, anything else printed.
fn text(value: &Value) -> String {
    match value.as_str() {
        Some(s) => s.to_owned(),
        None => value.to_string(),
    }
}

/// Jinja's `truncate(s, length=255, killwords=False, end='...', leeway=5)`, positional or by
/// keyword (`leeway` by keyword only): `s` unchanged when it is at most `length + leeway`
/// characters, else cut to `length` characters including `end`, at the last space unless
/// `killwords`.
fn truncate(
    value: &Value,
    length: Option<usize>,
    killwords: Option<bool>,
    end: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let length = length.or(kwargs.get("length")?).unwrap_or(255);
    let killwords = killwords.or(kwargs.get("killwords")?).unwrap_or(false);
    let end = end
        .or(kwargs.get("end")?)
        .unwrap_or_else(|| "...".to_owned());
    let leeway = kwargs.get::<Option<usize>>("leeway")?.unwrap_or(5);
    kwargs.assert_all_used()?;
    let s = text(value);
    let end_len = end.chars().count();
    if length < end_len {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("truncate: expected length >= {end_len}, got {length}"),
        ));
    }
    if s.chars().count() <= length.saturating_add(leeway) {
        return Ok(Value::from(s));
    }
    let head: String = s.chars().take(length - end_len).collect();
    let kept = if killwords {
        head.as_str()
    } else {
        // Python's `rsplit(" ", 1)[0]`: everything before the last space, or all of it.
        head.rsplit_once(' ')
            .map_or(head.as_str(), |(before, _)| before)
    };
    Ok(Value::from(format!("{kept}{end}")))
}

/// markupsafe's `escape`, as Jinja's `escape`, `e` and `forceescape` apply it: `& < > " '`
/// (quotes as `&#34;` and `&#39;`), nothing else.
fn escape(value: &Value) -> Value {
    let s = text(value);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Value::from_safe_string(out)
}

/// DataDesigner's own `jsonpath(data, expression)`: the values `expression` matches in the
/// object `data`, as a list. DataDesigner runs it with the Rust crate `jsonpath-rust` (through
/// its Python bindings); this is the same crate, so both read a path the same way.
fn jsonpath(data: &Value, expression: &str) -> Result<Value, Error> {
    if data.kind() != ValueKind::Map {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "jsonpath: cannot run a JSONPath on data that is not an object",
        ));
    }
    check_path(expression)?;
    let json = serde_json::to_value(data)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("jsonpath: {e}")))?;
    let found = jsonpath_rust::query::js_path_vals(expression, &json).map_err(|e| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("jsonpath: invalid expression {expression:?}: {e}"),
        )
    })?;
    // A match is a reference into `json`; `$..*` matches every node, so the copies made
    // below could be quadratic in the data's depth. Pay for them first.
    let mut size = 0usize;
    for v in &found {
        size = size.saturating_add(serde_json::to_string(v).map_or(0, |s| s.len()));
        if size > FORMAT_BUDGET {
            return Err(Error::new(
                ErrorKind::OutOfFuel,
                format!("jsonpath matches would copy more than {FORMAT_BUDGET} bytes"),
            ));
        }
    }
    Ok(found
        .into_iter()
        .map(|v| Value::from(minijinja::value::Serde(v)))
        .collect())
}

/// Longest JSONPath expression accepted, in bytes, and deepest nesting of brackets in it.
/// `jsonpath-rust` parses with a recursive-descent (pest) grammar, so a template, or a record
/// value passed as the path, could otherwise nest brackets until the parser overflows the
/// stack. Real paths are a few dozen characters and a few levels deep.
const MAX_PATH_LEN: usize = 4096;
const MAX_PATH_NESTING: usize = 32;

fn check_path(expression: &str) -> Result<(), Error> {
    let refuse = |why: String| {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("jsonpath: {why}"),
        ))
    };
    if expression.len() > MAX_PATH_LEN {
        return refuse(format!(
            "the expression is longer than {MAX_PATH_LEN} bytes"
        ));
    }
    let mut depth = 0usize;
    for c in expression.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_PATH_NESTING {
                    return refuse(format!(
                        "the expression nests brackets deeper than {MAX_PATH_NESTING} levels"
                    ));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Python's `str.center(width)`, Jinja's `center(value, width=80)`.
fn center(value: &Value, width: Option<usize>) -> Result<Value, Error> {
    let width = width.unwrap_or(80);
    if width > MAX_RENDERED_LEN {
        return Err(Error::new(
            ErrorKind::OutOfFuel,
            format!("center width {width} is over {MAX_RENDERED_LEN}"),
        ));
    }
    let s = text(value);
    let len = s.chars().count();
    if width <= len {
        return Ok(Value::from(s));
    }
    let pad = width - len;
    // CPython's rule: the odd space goes left when the width is odd.
    let left = pad / 2 + (pad & width & 1);
    Ok(Value::from(format!(
        "{}{s}{}",
        " ".repeat(left),
        " ".repeat(pad - left)
    )))
}

/// Jinja's `wordcount`: runs of word characters (Python's `\w`: letters, digits, `_`).
fn wordcount(value: &Value) -> usize {
    let s = text(value);
    let mut count = 0;
    let mut in_word = false;
    for c in s.chars() {
        let word = c.is_alphanumeric() || c == '_';
        if word && !in_word {
            count += 1;
        }
        in_word = word;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn env() -> Environment<'static> {
        let mut env = Environment::new();
        register(&mut env);
        env
    }

    fn render(src: &str) -> String {
        env().render_str(src, ()).unwrap()
    }

    #[test]
    fn random_draws_from_the_installed_stream_and_is_reproducible() {
        let env = env();
        let draw = |seed: u64| {
            let _scope = RandScope::enter(ChaCha8Rng::seed_from_u64(seed));
            env.render_str(
                "{% for _ in range(20) %}{{ ['a', 'b', 'c', 'd'] | random }}{% endfor %}",
                (),
            )
            .unwrap()
        };
        assert_eq!(draw(7), draw(7), "same stream, same picks");
        assert_ne!(draw(7), draw(8), "another stream, other picks");
        let picks = draw(7);
        for c in ["a", "b", "c", "d"] {
            assert!(picks.contains(c), "{picks}: every item can be picked");
        }
        let _scope = RandScope::enter(ChaCha8Rng::seed_from_u64(1));
        let n: i64 = env
            .render_str("{{ range(1, 1001) | random }}", ())
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=1000).contains(&n));
        assert_eq!(env.render_str("{{ 'x' | random }}", ()).unwrap(), "x");
        assert_eq!(env.render_str("[{{ [] | random }}]", ()).unwrap(), "[]");
        assert!(env.render_str("{{ 5 | random }}", ()).is_err());
    }

    #[test]
    fn truncate_is_jinjas() {
        // Jinja 3.1's outputs (DataDesigner's venv) on the same arguments.
        let s = "{% set s = 'Lorem ipsum dolor sit amet consectetur' %}";
        assert_eq!(
            render(&format!("{s}{{{{ s | truncate(20) }}}}")),
            "Lorem ipsum..."
        );
        assert_eq!(
            render(&format!("{s}{{{{ s | truncate(20, True) }}}}")),
            "Lorem ipsum dolor..."
        );
        assert_eq!(
            render(&format!(
                "{s}{{{{ s | truncate(18, killwords=true, end='!') }}}}"
            )),
            "Lorem ipsum dolor!"
        );
        assert_eq!(
            render(&format!("{s}{{{{ s | truncate(15) }}}}")),
            "Lorem ipsum..."
        );
        assert_eq!(
            render(&format!("{s}{{{{ s | truncate(length=36) }}}}")),
            "Lorem ipsum dolor sit amet consectetur"
        );
        assert_eq!(render("{{ 'abc' | truncate(2, end='') }}"), "abc");
        assert!(
            env()
                .render_str("{{ 'abcdefghij' | truncate(2) }}", ())
                .is_err()
        );
    }

    #[test]
    fn escape_is_markupsafes() {
        assert_eq!(
            render(r#"{{ '<a href="x/y">Tom & Jerry\'s</a>' | e }}"#),
            "&lt;a href=&#34;x/y&#34;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;"
        );
        assert_eq!(render("{{ '<b>' | forceescape }}"), "&lt;b&gt;");
    }

    #[test]
    fn jsonpath_is_datadesigners() {
        let env = env();
        let data = serde_json::json!({"a": {"b": [1, 2, {"c": "x"}]}, "n": [{"k": 1}, {"k": 2}]});
        let out = env
            .render_str(
                "{{ d | jsonpath('$.n[*].k') }} {{ d | jsonpath('$.a.b[2].c') }} {{ d | jsonpath('$.zz') }}",
                minijinja::context! { d => Value::from(minijinja::value::Serde(&data)) },
            )
            .unwrap();
        // As Python prints DataDesigner's lists: `[1, 2] ['x'] []`.
        assert_eq!(out, "[1, 2] ['x'] []");
        assert!(
            env.render_str("{{ [1] | jsonpath('$') }}", ())
                .unwrap_err()
                .to_string()
                .contains("not an object")
        );
        assert!(
            env.render_str(
                "{{ d | jsonpath('$[') }}",
                minijinja::context! { d => Value::from(minijinja::value::Serde(&data)) }
            )
            .is_err()
        );
    }

    /// A path nested past the bound, or too long, is refused before the recursive parser
    /// sees it (a stack overflow would abort the process).
    #[test]
    fn jsonpath_bounds_what_reaches_the_parser() {
        let env = env();
        let data = Value::from(minijinja::value::Serde(&serde_json::json!({"a": 1})));
        let deep = format!("$[?{}@.a{}]", "(".repeat(1_000), ")".repeat(1_000));
        let err = env
            .render_str(
                "{{ d | jsonpath(p) }}",
                minijinja::context! { d => data.clone(), p => deep },
            )
            .unwrap_err();
        assert!(format!("{err:#}").contains("deeper than 32"), "{err:#}");
        let long = format!("$.{}", "a".repeat(5000));
        let err = env
            .render_str(
                "{{ d | jsonpath(p) }}",
                minijinja::context! { d => data.clone(), p => long },
            )
            .unwrap_err();
        assert!(format!("{err:#}").contains("longer than 4096"), "{err:#}");
        let ok = env
            .render_str(
                "{{ d | jsonpath('$[?(@ == 1)]') }}",
                minijinja::context! { d => data },
            )
            .unwrap();
        assert_eq!(ok, "[1]");
    }

    #[test]
    fn center_wordcount_filesizeformat_striptags_are_jinjas() {
        // CPython: 'ab'.center(7) == '   ab  ', 'ab'.center(6) == '  ab  ', 'abc'.center(6) == ' abc  '
        assert_eq!(render("[{{ 'ab' | center(7) }}]"), "[   ab  ]");
        assert_eq!(render("[{{ 'ab' | center(6) }}]"), "[  ab  ]");
        assert_eq!(render("[{{ 'abc' | center(6) }}]"), "[ abc  ]");
        assert_eq!(render("[{{ 'abcdef' | center(3) }}]"), "[abcdef]");
        assert!(
            env()
                .render_str("{{ 'a' | center(999999999) }}", ())
                .is_err()
        );
        assert_eq!(
            render("{{ 'Hello, wide_world! 42 café' | wordcount }}"),
            "4"
        );
        assert_eq!(render("{{ 1000000 | filesizeformat }}"), "1.0 MB");
        assert_eq!(render("{{ 1048576 | filesizeformat(true) }}"), "1.0 MiB");
        assert_eq!(
            render("{{ '<p>a  <b>b</b>\n c</p>' | striptags }}"),
            "a b c"
        );
    }
}
