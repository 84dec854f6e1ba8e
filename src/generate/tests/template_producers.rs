//! Every filter, global function and Python method a template can call, each with the call
//! that makes it build or read the most, run against a string of half a render's fuel. Each
//! must end in a budget error, within the render deadline (plus slack) and a bounded amount of
//! memory, instead of building gigabytes or running past the deadline (issue 49, Q4).
//!
//! The lists are checked against what the engine really serves: minijinja's registered
//! filters and globals (read from the vendored source), synthgate's own filters, and the
//! methods minijinja-contrib's pycompat answers. A filter, function or method that an upgrade
//! adds fails [`every_producer_is_listed`] until it is listed here with its worst case.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use minijinja::value::ValueKind;
use minijinja::{Environment, ErrorKind, Value};

use crate::generate::template::{
    BUDGET_EXCEEDED, RECORD_RENDER_TIME, RecordBudget, RecordContext, Templates,
};

/// `s`: 8 MB (an eighth of what one render's fuel pays for), made of the characters that split,
/// escape or break lines; `d`: a map holding it; `l`: a list of 250,000 strings; `s40!()`: a
/// list sharing `s` forty times (a few bytes of fuel, 320 MB of text).
const SETUP: &str = "{% set s = ',<\\\"\\n' * 2000000 %}{% set d = {'a': s, 'b': [s]} %}\
                     {% set l = (s[:1000000]).split(',') %}";

macro_rules! s40 {
    () => {
        "[s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s]"
    };
}

/// Repeats `expr` until some budget ends it: a call that is cheap to make but costly to run
/// (reading `s` again each time) must be paid for, or the loop outruns the deadline.
fn looped(expr: &str) -> String {
    format!(
        "{SETUP}{{% for i in range(1000) %}}{{% for j in range(1000) %}}\
         {{% set r = {expr} %}}{{% endfor %}}{{% endfor %}}"
    )
}

/// Filters: the name, and the expression that makes it build or read the most.
const FILTERS: &[(&str, &str)] = &[
    ("abs", "(s|length)|abs"),
    ("attr", "d|attr('a')"),
    ("batch", "s|batch(3)"),
    ("bool", "s|bool"),
    ("capitalize", "s|capitalize"),
    ("center", "s|center(500000)"),
    ("chain", "s|chain(s)|list"),
    ("count", "s|count"),
    ("d", "none|d(s)"),
    ("default", "none|default(s)"),
    ("dictsort", "d|dictsort"),
    ("e", "s|e"),
    ("escape", "s|escape"),
    ("filesizeformat", "(s|length)|filesizeformat"),
    ("first", "s|first"),
    ("float", "(s|length|string)|float"),
    ("forceescape", "s|forceescape"),
    (
        "format",
        "('%s' * 40)|format(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)",
    ),
    ("groupby", "[d, d]|groupby('a')"),
    ("indent", "s|indent(64)"),
    ("int", "(s|length|string)|int"),
    ("items", "d|items|list"),
    ("join", concat!(s40!(), "|join")),
    ("jsonpath", "d|jsonpath('$.c')"),
    ("last", "s|last"),
    ("length", "s|length"),
    ("lines", "s|lines"),
    ("list", "s|list"),
    ("lower", "s|lower"),
    ("map", "l|map('upper')|list"),
    ("max", "s|max"),
    ("min", "s|min"),
    ("pprint", concat!(s40!(), "|pprint")),
    ("random", "s|random"),
    ("reject", "s|reject|list"),
    ("rejectattr", "[d, d]|rejectattr('a')|list"),
    ("replace", "s|replace(',', s)"),
    ("reverse", "s|reverse"),
    ("round", "(s|length)|round"),
    ("safe", "s|safe"),
    ("select", "s|select|list"),
    ("selectattr", "[d, d]|selectattr('a')|list"),
    ("slice", "s|slice(3)|list"),
    ("sort", "s|sort"),
    ("split", "s|split(',')"),
    ("string", concat!(s40!(), "|string")),
    ("striptags", "s|striptags"),
    ("sum", "l|map('length')|sum"),
    ("title", "s|title"),
    ("tojson", concat!(s40!(), "|tojson")),
    ("trim", "s|trim"),
    ("truncate", "s|truncate(100000000)"),
    ("unique", "s|unique|list"),
    ("upper", "s|upper"),
    ("wordcount", "s|wordcount"),
    ("zip", "s|zip(s)|list"),
];

/// Global functions.
const FUNCTIONS: &[(&str, &str)] = &[
    ("range", "range(100000000)|list"),
    ("dict", concat!("dict(a=", s40!(), ")|string")),
    ("debug", "debug()"),
    ("namespace", concat!("namespace(a=", s40!(), ")|string")),
];

/// Python methods, by receiver kind (see `generate::pycompat`).
const METHODS: &[(ValueKind, &str, &str)] = &[
    (ValueKind::String, "upper", "s.upper()"),
    (ValueKind::String, "lower", "s.lower()"),
    (ValueKind::String, "islower", "s.islower()"),
    (ValueKind::String, "isupper", "s.isupper()"),
    (ValueKind::String, "isspace", "s.isspace()"),
    (ValueKind::String, "isdigit", "s.isdigit()"),
    (ValueKind::String, "isnumeric", "s.isnumeric()"),
    (ValueKind::String, "isalnum", "s.isalnum()"),
    (ValueKind::String, "isalpha", "s.isalpha()"),
    (ValueKind::String, "isascii", "s.isascii()"),
    (ValueKind::String, "strip", "s.strip('a')"),
    (ValueKind::String, "lstrip", "s.lstrip('a')"),
    (ValueKind::String, "rstrip", "s.rstrip('\\n')"),
    (ValueKind::String, "replace", "s.replace(',', s)"),
    (ValueKind::String, "title", "s.title()"),
    (ValueKind::String, "split", "s.split(',')"),
    (ValueKind::String, "splitlines", "s.splitlines()"),
    (ValueKind::String, "capitalize", "s.capitalize()"),
    (ValueKind::String, "count", "s.count('z')"),
    (ValueKind::String, "find", "s.find('z')"),
    (ValueKind::String, "format", "('{0}' * 40).format(s)"),
    (ValueKind::String, "rfind", "s.rfind('z')"),
    (ValueKind::String, "startswith", "s.startswith(s)"),
    (ValueKind::String, "endswith", "s.endswith(s)"),
    (ValueKind::String, "join", concat!("''.join(", s40!(), ")")),
    (ValueKind::Map, "keys", "d.keys()|list"),
    (ValueKind::Map, "values", "d.values()|list"),
    (ValueKind::Map, "items", "d.items()|list"),
    (ValueKind::Map, "get", "d.get('a')"),
    (ValueKind::Seq, "count", "l.count('z')"),
];

/// Names in `rv.insert("name"` calls of one function of minijinja's `defaults.rs`.
fn registered(function: &str) -> BTreeSet<String> {
    let source = include_str!("../../../vendor/minijinja/src/defaults.rs");
    let body = source
        .split(&format!("fn {function}()"))
        .nth(1)
        .and_then(|rest| rest.split("\n}\n").next())
        .unwrap_or_else(|| panic!("no fn {function} in defaults.rs"));
    body.split("rv.insert(")
        .skip(1)
        .filter_map(|call| call.trim_start().strip_prefix('"'))
        .filter_map(|call| call.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_producer_is_listed() {
    let ours = include_str!("../jinja_builtins.rs");
    let mut filters = registered("build_builtin_filters");
    filters.extend(
        ours.split("env.add_filter(\"")
            .skip(1)
            .filter_map(|call| call.split('"').next())
            .map(str::to_owned),
    );
    // Registered under a cargo feature synthgate does not enable (`urlencode`): not served.
    filters.retain(|name| {
        let (out, _, _) = attack(&format!("{{{{ 1|{name} }}}}"));
        !out.starts_with("unknown filter")
    });
    let listed: BTreeSet<String> = FILTERS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert!(filters.len() > 50, "{filters:?}");
    assert_eq!(filters, listed, "filters served vs. listed here");

    let functions = registered("build_globals");
    let listed: BTreeSet<String> = FUNCTIONS.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(functions, listed, "global functions served vs. listed here");

    // What pycompat answers, probed with every method Python's str, list and dict have.
    let env = Environment::new();
    let mut state = env.empty_state();
    let mut served = BTreeSet::new();
    for (kind, receiver, names) in [
        (ValueKind::String, Value::from("a b"), PY_STR),
        (ValueKind::Seq, Value::from(vec![Value::from(1)]), PY_LIST),
        (ValueKind::Map, Value::from_pairs([("a", 1)]), PY_DICT),
    ] {
        for name in names.split_whitespace() {
            let answer = minijinja_contrib::pycompat::unknown_method_callback(
                &mut state,
                &receiver,
                name,
                &[],
            );
            if !matches!(&answer, Err(e) if e.kind() == ErrorKind::UnknownMethod) {
                served.insert(format!("{kind:?}.{name}"));
            }
        }
    }
    let listed: BTreeSet<String> = METHODS
        .iter()
        .map(|(kind, name, _)| format!("{kind:?}.{name}"))
        .collect();
    assert_eq!(served, listed, "pycompat methods served vs. listed here");
    let passed: BTreeSet<String> = crate::generate::pycompat::METHODS
        .iter()
        .flat_map(|(kind, names)| names.iter().map(move |n| format!("{kind:?}.{n}")))
        .collect();
    assert_eq!(
        passed, listed,
        "methods generate::pycompat lets through vs. listed here"
    );
}

// Python 3.11's `dir(str)`, `dir(list)` and `dir(dict)`, without the dunder names.
const PY_STR: &str = "capitalize casefold center count encode endswith expandtabs find format \
    format_map index isalnum isalpha isascii isdecimal isdigit isidentifier islower isnumeric \
    isprintable isspace istitle isupper join ljust lower lstrip maketrans partition \
    removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split \
    splitlines startswith strip swapcase title translate upper zfill";
const PY_LIST: &str = "append clear copy count extend index insert pop remove reverse sort";
const PY_DICT: &str = "clear copy fromkeys get items keys pop popitem setdefault update values";

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// The setup alone fits a render's budgets, so what ends an attack is the call it makes.
#[test]
fn the_setup_fits() {
    let (out, _, _) = attack(&format!("{SETUP}{{{{ s|length }}}} {{{{ l|length }}}}"));
    assert_eq!(out, "rendered 14 bytes", "{out}");
    let (out, _, _) = attack(&format!("{SETUP}{}{{{{ s|length }}}}", looped("1")));
    assert!(out.starts_with(BUDGET_EXCEEDED), "{out}");
    assert!(!out.contains("range"), "{out}");
}

/// Runs `template`; returns the error, how long it took and the peak memory it reached.
fn attack(template: &str) -> (String, Duration, u64) {
    let ctx = RecordContext {
        names: Arc::new(HashMap::new()),
        values: vec![],
    }
    .into_value();
    let mut t = Templates::new();
    t.add("p", template).unwrap();
    // Linux: resets the peak to what the process holds now, so each attack is measured alone.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let started = Instant::now();
    let result = t.render("p", &ctx, &RecordBudget::new());
    let took = started.elapsed();
    let err = result
        .map(|out| format!("rendered {} bytes", out.len()))
        .unwrap_or_else(|e| e);
    (err, took, peak_rss_mib())
}

#[test]
fn every_producer_stops_within_budget() {
    let all = FILTERS
        .iter()
        .chain(FUNCTIONS)
        .map(|(name, expr)| (format!("|{name}"), *expr))
        .chain(
            METHODS
                .iter()
                .map(|(kind, name, expr)| (format!("{kind:?}.{name}"), *expr)),
        );
    let mut failures = Vec::new();
    for (name, expr) in all {
        for template in [format!("{SETUP}{{{{ {expr} }}}}"), looped(expr)] {
            let looping = template.contains("range(1000)");
            let (err, took, peak_mib) = attack(&template);
            // Once, a call may succeed (most build less than what is left); repeated, some
            // budget must end it. One render may hold its fuel's worth of data (64 MiB) and
            // the 32 MB it started with, plus a copy while a result is charged.
            if (looping && !err.starts_with(BUDGET_EXCEEDED))
                || took > RECORD_RENDER_TIME + Duration::from_secs(3)
                || peak_mib > 300
            {
                failures.push(format!(
                    "{name}: {err:.120} in {took:?}, peak {peak_mib} MiB <- {expr}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A template can nest lists about as deep as its fuel allows (here 100,000 levels). Every walk
/// of such a value (dropping, printing, serializing, comparing, hashing) recursed once per
/// level and overflowed the stack: the process aborted. On a thread with tokio's default worker
/// stack (2 MiB, where renders run), each must now render or fail the render, never abort;
/// an abort takes this test's process down with it.
#[test]
fn deeply_nested_values_cannot_overflow_the_stack() {
    const WALKS: &[&str] = &[
        "{{ ns.l|length }}",
        "{% for x in ns.l %}{% endfor %}",
        "{{ ns.l|first|length }}",
        "{{ ns.l ~ '' }}",
        "{{ ns.l|string|length }}",
        "{{ ns.l|pprint|length }}",
        "{{ ns.l|tojson|length }}",
        "{{ ns.l|tojson(indent=2)|length }}",
        "{{ {'a': ns.l}|jsonpath('$.b') }}",
        "{{ ns.l == ns.l }}",
        "{{ ns.l == [ns.l] }}",
        "{{ [ns.l, [ns.l]]|unique|list|length }}",
        "{{ [ns.l, [ns.l]]|sort|length }}",
        "{{ [ns.l, [ns.l]]|max|length }}",
        "{{ debug()|length }}",
    ];
    for walk in WALKS {
        let template = format!(
            "{{% set ns = namespace(l=[]) %}}{{% for j in range(10) %}}\
             {{% for i in range(10000) %}}{{% set ns.l = [ns.l] %}}{{% endfor %}}{{% endfor %}}\
             {walk}"
        );
        let (out, _, _) = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || attack(&template))
            .unwrap()
            .join()
            .unwrap();
        assert!(
            out.starts_with("rendered") || out.starts_with(BUDGET_EXCEEDED),
            "{walk}: {out}"
        );
    }
}
