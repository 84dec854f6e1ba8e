//! Jinja for one plan: a single minijinja [`Environment`] holding every template of the job,
//! compiled once at [`Plan::compile`](super::Plan::compile), and the per-record context that
//! templates read column values from.
//!
//! Choices, and why:
//! * **Undefined values as DataDesigner's Jinja has them.** Prompts and expressions render
//!   with Jinja's default `Undefined` (minijinja's `Lenient`): a missing key of an object
//!   (`{{ person.openness.description }}` without `description`) prints as empty text, a
//!   lookup *on* a missing value (`{{ a.missing.deeper }}`) fails the record. A template that
//!   renders to empty text fails as DataDesigner's does (see `generate::columns`), which is
//!   where a typo shows. Skip conditions render with `StrictUndefined` (DataDesigner's
//!   `skip_evaluator`): any undefined value fails the gate, and a failed gate skips the cell.
//!   Names that are no column are refused at submit (`unknown_reference`) either way.
//! * **Budgets.** Templates come from users, so they run under budgets that no template can
//!   get past, whatever it does (see [`RecordBudget`]): minijinja fuel, which since 3.1 pays
//!   for instructions *and* for the data a template creates (about 64 bytes per unit), checked
//!   before anything of a known size is allocated; a format budget for printing containers,
//!   whose shared items fuel cannot see; a deadline; and an output cap ([`MAX_RENDERED_LEN`],
//!   DataDesigner's limit). Fuel and time are budgets of the *record*, shared by all of its
//!   templates, so a config of many heavy columns cannot multiply them. The last two come from
//!   synthgate's patch of minijinja (`patches/README.md`).
//! * **No auto-escaping**: prompts are not HTML.
//! * **Upstream JSON.** String values holding a JSON object or array are parsed before
//!   rendering (as DataDesigner does), so `{{ col.key }}` works on structured output.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use minijinja::value::{Enumerator, Object};
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde_json::Value;

/// Fuel of one render: about a million instructions, or 64 MiB of data created (minijinja
/// charges one unit per 64 bytes). Generous (a loop over tens of thousands of items still fits)
/// yet small enough that an adversarial template stops within tens of milliseconds.
pub const TEMPLATE_FUEL: u64 = 1_000_000;

/// Fuel of all the renders of one record together: [`TEMPLATE_FUEL`] bounds one template, this
/// bounds a config of many. A render starts only while the record has fuel left, and gets at
/// most what is left (rounded up to what minijinja can enforce: a whole render's fuel, so one
/// record may overshoot by at most one render).
pub const RECORD_FUEL: u64 = 4_000_000;

/// Bytes that printing containers may produce in one render. Far above [`MAX_RENDERED_LEN`]
/// (so intermediate values may be larger than what is kept), far below what could hurt.
pub const FORMAT_BUDGET: usize = 16 * MAX_RENDERED_LEN;

/// Bytes of strings that one render may compare or hash (sorting, `unique`, `max`, `==`...).
/// Sorting ten thousand distinct 1 KB strings reads well under 100 MiB; a list that repeats one
/// long string reads it again for every comparison.
pub const WORK_BUDGET: usize = 512 << 20;

/// Rendering time of all the templates of one record (time spent waiting for an LLM between
/// them does not count). Fuel bounds the instructions; this bounds the
/// few instructions whose cost grows with the data (sorting or searching long strings), and is
/// so far above a legitimate record's rendering time (milliseconds) that load cannot reach it.
pub const RECORD_RENDER_TIME: Duration = Duration::from_secs(5);

/// Prefix of render errors caused by the template itself exhausting a budget (fuel, output
/// size, `range` length, recursion depth) rather than by a record's data: the submit-time probe turns those
/// into `422 invalid_template`.
pub(crate) const BUDGET_EXCEEDED: &str = "rendering budget exceeded";

/// Largest rendered text accepted, in bytes (DataDesigner's `MAX_RENDERED_LEN`).
pub const MAX_RENDERED_LEN: usize = 512_000;

/// Names Jinja provides itself; they are not column references.
const JINJA_NAMES: &[&str] = &[
    "loop", "self", "super", "caller", "varargs", "kwargs", "true", "false", "none", "True",
    "False", "None",
];

/// Every template of one plan.
#[derive(Debug)]
pub(crate) struct Templates {
    /// Prompts, expressions and the rest: undefined values print as empty text.
    env: Environment<'static>,
    /// Skip conditions: any undefined value is an error.
    strict: Environment<'static>,
    /// The templates compiled into `strict`.
    strict_names: HashSet<String>,
    builtins: HashSet<String>,
}

impl Templates {
    /// Templates whose `{{ }}` print values through `formatter` instead of the default
    /// (schema transforms print lists and maps as JSON; see `generate::processors`).
    pub(crate) fn with_formatter(
        formatter: impl Fn(
            &mut minijinja::Output,
            &mut minijinja::State,
            &minijinja::Value,
        ) -> Result<(), minijinja::Error>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        let mut t = Self::new();
        t.env.set_formatter(formatter);
        t
    }

    pub(crate) fn new() -> Self {
        let env = environment(UndefinedBehavior::Lenient);
        let mut builtins: HashSet<String> = env.globals().map(|(k, _)| k.to_owned()).collect();
        builtins.extend(JINJA_NAMES.iter().map(|s| (*s).to_owned()));
        Self {
            env,
            strict: environment(UndefinedBehavior::Strict),
            strict_names: HashSet::new(),
            builtins,
        }
    }

    /// Compiles `source` under `name`. Errors carry minijinja's message.
    pub(crate) fn add(&mut self, name: &str, source: &str) -> Result<(), String> {
        self.env
            .add_template_owned(name.to_owned(), source.to_owned())
            .map_err(|e| e.to_string())
    }

    /// Compiles a skip condition under `name`: undefined values in it are errors.
    pub(crate) fn add_strict(&mut self, name: &str, source: &str) -> Result<(), String> {
        self.strict
            .add_template_owned(name.to_owned(), source.to_owned())
            .map_err(|e| e.to_string())?;
        self.strict_names.insert(name.to_owned());
        Ok(())
    }

    /// Template `name`, from whichever environment compiled it.
    fn get(&self, name: &str) -> Result<minijinja::Template<'_, '_>, minijinja::Error> {
        if self.strict_names.contains(name) {
            self.strict.get_template(name)
        } else {
            self.env.get_template(name)
        }
    }

    /// The variables template `name` reads (sorted), leaving out Jinja's own names (`range`,
    /// `loop`, ...) unless `is_column` says a column has that name.
    pub(crate) fn references(
        &self,
        name: &str,
        is_column: impl Fn(&str) -> bool,
    ) -> BTreeSet<String> {
        let Ok(tmpl) = self.get(name) else {
            return BTreeSet::new();
        };
        tmpl.undeclared_variables(false)
            .into_iter()
            .filter(|v| is_column(v) || !self.builtins.contains(v))
            .collect()
    }

    /// Renders template `name` against a record context (see [`RecordContext::into_value`]),
    /// paying from the record's `budget`.
    pub(crate) fn render(
        &self,
        name: &str,
        ctx: &minijinja::Value,
        budget: &RecordBudget,
    ) -> Result<String, String> {
        let tmpl = self.get(name).map_err(|e| e.to_string())?;
        if budget.fuel_left.load(Ordering::Relaxed) == 0 {
            return Err(format!(
                "{BUDGET_EXCEEDED}: the record's templates used up their fuel ({RECORD_FUEL} units) before this one"
            ));
        }
        let started = Instant::now();
        let rendered = {
            let _limits =
                minijinja::limits::scope(FORMAT_BUDGET, WORK_BUDGET, Some(budget.deadline()));
            let _rand = super::jinja_builtins::RandScope::enter(budget.rand_stream(name));
            // A panic inside the engine fails this render, not the record's task.
            let rendered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tmpl.render_captured(ctx.clone())
            }))
            .unwrap_or_else(|_| {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    "the template engine failed on this template",
                ))
            });
            // Read inside the scope: dropping the guard restores the outer state.
            (rendered, minijinja::limits::exceeded())
        };
        budget.spend_time(started.elapsed());
        let out = match rendered {
            (Ok(captured), exceeded) => {
                if let Some((used, _)) = captured.state().fuel_levels() {
                    budget.spend(used);
                }
                if let Some(what) = exceeded {
                    return Err(limit_message(what));
                }
                captured.into_output()
            }
            // The limit is the cause; minijinja's error only says where it surfaced.
            (Err(_), Some(what)) => {
                budget.fuel_left.store(0, Ordering::Relaxed);
                return Err(limit_message(what));
            }
            (Err(e), None) => {
                let text = e.to_string();
                let exhausted = e.kind() == minijinja::ErrorKind::OutOfFuel
                    || text.contains("range has too many elements")
                    || text.contains("recursion limit exceeded");
                if exhausted {
                    budget.fuel_left.store(0, Ordering::Relaxed);
                    return Err(format!("{BUDGET_EXCEEDED}: {e}"));
                }
                return Err(text);
            }
        };
        if out.len() > MAX_RENDERED_LEN {
            return Err(format!(
                "{BUDGET_EXCEEDED}: rendered text is {} bytes, more than the {MAX_RENDERED_LEN} allowed",
                out.len()
            ));
        }
        Ok(out)
    }
}

/// What all the renders of one record may still spend: fuel, and rendering time. Made when
/// the record starts; see [`RECORD_FUEL`] and [`RECORD_RENDER_TIME`]. Time counts only while
/// rendering: a record's LLM calls between its templates do not use it up. It also names the
/// record's random stream, which the `random` filter draws from.
#[derive(Debug)]
pub(crate) struct RecordBudget {
    fuel_left: AtomicU64,
    /// Rendering time spent so far, in microseconds.
    spent_us: AtomicU64,
    /// (job seed, record index): with the template's name, the `random` filter's stream.
    /// Renders outside a record (schema transforms, the submit-time probe) use (0, 0).
    stream: (u64, u64),
}

impl RecordBudget {
    pub(crate) fn new() -> Self {
        Self::for_record(0, 0)
    }

    /// The budget of record `index` of a job with `seed`.
    pub(crate) fn for_record(seed: u64, index: u64) -> Self {
        Self {
            fuel_left: AtomicU64::new(RECORD_FUEL),
            spent_us: AtomicU64::new(0),
            stream: (seed, index),
        }
    }

    /// The stream `random` draws from in template `name`: its own per record and template,
    /// so adding a template never changes another's picks.
    fn rand_stream(&self, name: &str) -> rand_chacha::ChaCha8Rng {
        let (seed, index) = self.stream;
        super::rng::column_rng(
            seed,
            index,
            super::rng::name_hash(&format!("jinja random|{name}")),
        )
    }

    /// When a render starting now must stop: what is left of the record's rendering time.
    fn deadline(&self) -> Instant {
        let spent = Duration::from_micros(self.spent_us.load(Ordering::Relaxed));
        Instant::now() + RECORD_RENDER_TIME.saturating_sub(spent)
    }

    pub(crate) fn spend_time(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.spent_us.fetch_add(us, Ordering::Relaxed);
    }

    fn spend(&self, fuel: u64) {
        // One record renders on one task at a time: no other writer to race with.
        let left = self.fuel_left.load(Ordering::Relaxed);
        self.fuel_left
            .store(left.saturating_sub(fuel), Ordering::Relaxed);
    }
}

fn limit_message(what: minijinja::limits::Exceeded) -> String {
    match what {
        minijinja::limits::Exceeded::FormatBudget => format!(
            "{BUDGET_EXCEEDED}: printing lists and maps, or formatting, would produce more than {FORMAT_BUDGET} bytes"
        ),
        minijinja::limits::Exceeded::Work => format!(
            "{BUDGET_EXCEEDED}: comparing or hashing strings would read more than {} MiB",
            WORK_BUDGET >> 20
        ),
        minijinja::limits::Exceeded::Nesting => format!(
            "{BUDGET_EXCEEDED}: a value is nested more than {} levels deep",
            minijinja::limits::MAX_NESTING
        ),
        minijinja::limits::Exceeded::Deadline => format!(
            "{BUDGET_EXCEEDED}: the record's templates ran for more than {} s",
            RECORD_RENDER_TIME.as_secs()
        ),
    }
}

/// The column values a template can see: every column generated so far in this record.
#[derive(Debug, Clone)]
pub(crate) struct RecordContext {
    /// Column (and side column) name → slot; shared by every record of the plan.
    pub(crate) names: Arc<HashMap<String, usize>>,
    /// Slot → value, `None` while not generated (undefined in templates).
    pub(crate) values: Vec<Option<minijinja::Value>>,
}

impl RecordContext {
    /// The context as a template value (cheap to clone for several renders).
    pub(crate) fn into_value(self) -> minijinja::Value {
        minijinja::Value::from_object(self)
    }
}

impl Object for RecordContext {
    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let slot = *self.names.get(key.as_str()?)?;
        self.values.get(slot)?.clone()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut names: Vec<(usize, &String)> = self
            .names
            .iter()
            .filter(|(_, slot)| self.values.get(**slot).is_some_and(Option::is_some))
            .map(|(name, slot)| (*slot, name))
            .collect();
        names.sort();
        Enumerator::Values(names.into_iter().map(|(_, n)| n.as_str().into()).collect())
    }
}

/// Converts a column value for templates as DataDesigner's `deserialize_json_values` prepares a
/// record: a string that parses as JSON is that JSON value (an object or array, and also a
/// number, `true`, `null`, a quoted string), strings inside lists and objects likewise, and
/// what a string parsed into is not parsed again. So `"1234.5"` from a `dtype: str` expression
/// is the number 1234.5 in the next template, and `{{ num_str * 2 }}` is `2469.0`, as in
/// DataDesigner (parsing only objects and arrays repeated the string instead, silently).
pub(crate) fn template_value(value: &Value) -> minijinja::Value {
    prepared(value, deserialized(value, true))
}

/// [`template_value`] for a value read from a seed dataset. DataDesigner reads seed files
/// with DuckDB, whose lists reach the record as numpy arrays, which `deserialize_json_values`
/// passes over: a JSON string inside a seed's list stays a string (`{{ tags[0] }}` of
/// `["{\"x\": 1}"]` prints `{"x": 1}`), while one in an object or the value itself is parsed
/// as for any column.
pub(crate) fn seed_template_value(value: &Value) -> minijinja::Value {
    prepared(value, deserialized(value, false))
}

fn prepared(value: &Value, deserialized: Option<Value>) -> minijinja::Value {
    match deserialized {
        Some(parsed) => minijinja::Value::from(minijinja::value::Serde(&parsed)),
        None => match value {
            Value::String(s) => minijinja::Value::from(s.as_str()),
            other => minijinja::Value::from(minijinja::value::Serde(other)),
        },
    }
}

/// A string's JSON value, if it is JSON.
fn json_of(s: &str) -> Option<Value> {
    serde_json::from_str(s).ok()
}

/// `Some(copy)` when `value` holds JSON-in-a-string that DataDesigner would parse: the value
/// itself, or strings in objects and (when `lists`) lists at any depth (each parsed once).
fn deserialized(value: &Value, lists: bool) -> Option<Value> {
    match value {
        Value::String(s) => json_of(s),
        Value::Array(_) if !lists => None,
        Value::Array(items) => {
            let changed: Vec<Option<Value>> =
                items.iter().map(|v| deserialized(v, lists)).collect();
            if changed.iter().all(Option::is_none) {
                return None;
            }
            let out = items
                .iter()
                .zip(changed)
                .map(|(orig, new)| new.unwrap_or_else(|| orig.clone()))
                .collect();
            Some(Value::Array(out))
        }
        Value::Object(map) => {
            let changed: Vec<Option<Value>> =
                map.values().map(|v| deserialized(v, lists)).collect();
            if changed.iter().all(Option::is_none) {
                return None;
            }
            let out = map
                .iter()
                .zip(changed)
                .map(|((k, orig), new)| (k.clone(), new.unwrap_or_else(|| orig.clone())))
                .collect();
            Some(Value::Object(out))
        }
        _ => None,
    }
}

/// Why a template that rendered to empty text fails its record, as DataDesigner's
/// `EmptyTemplateRenderError` does (an empty prompt or expression is almost always a field
/// missing from the record, or a typo that Jinja's lenient undefined printed as nothing).
pub(crate) fn empty_render(what: &str) -> String {
    format!(
        "the {what} rendered to empty text: a field it reads is missing, null or empty in this \
         record; give a fallback (`{{{{ field if field else 'N/A' }}}}`) or gate the column with \
         `skip`"
    )
}

/// An environment with synthgate's settings and `undefined` behaviour: fuel, no escaping,
/// Python's methods.
fn environment(undefined: UndefinedBehavior) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(undefined);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_auto_escape_callback(|_| AutoEscape::None);
    // DataDesigner renders with Python's Jinja, so configs call Python's str, list and dict
    // methods (`split`, `strip`, `startswith`, `items`, ...): minijinja-contrib's pycompat
    // layer serves them, each paid for before it runs (see `generate::pycompat`).
    env.set_unknown_method_callback(super::pycompat::unknown_method);
    super::jinja_builtins::register(&mut env);
    env
}

/// Truthiness of a rendered `skip.when`, as DataDesigner's native Jinja environment sees it
/// (the text is read back as a literal, then Python's `bool`).
pub(crate) fn rendered_truthy(text: &str) -> bool {
    let t = text.trim();
    match t {
        "" | "false" | "False" | "none" | "None" | "[]" | "{}" | "()" | "''" | "\"\"" => false,
        _ => t.parse::<f64>() != Ok(0.0),
    }
}

/// Whether a rendered sampler condition is true: DataDesigner compares the text with `True`.
pub(crate) fn rendered_condition(text: &str) -> bool {
    matches!(text.trim(), "true" | "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(pairs: &[(&str, Value)]) -> RecordContext {
        let names: HashMap<String, usize> = pairs
            .iter()
            .enumerate()
            .map(|(i, (n, _))| ((*n).to_owned(), i))
            .collect();
        RecordContext {
            names: Arc::new(names),
            values: pairs.iter().map(|(_, v)| Some(template_value(v))).collect(),
        }
    }

    #[test]
    fn renders_with_json_strings_parsed() {
        let mut t = Templates::new();
        t.add("a", "{{ obj.key }}-{{ n + 1 }}-{{ s }}").unwrap();
        let c = ctx(&[
            ("obj", json!("{\"key\": \"v\"}")),
            ("n", json!(2)),
            ("s", json!("{not json")),
        ]);
        assert_eq!(
            t.render("a", &c.into_value(), &RecordBudget::new())
                .unwrap(),
            "v-3-{not json"
        );
    }

    #[test]
    fn references_exclude_jinja_globals_and_locals() {
        let mut t = Templates::new();
        t.add("a", "{% for i in range(3) %}{{ loop.index }}{{ x }}{% endfor %}{% set y = z %}{{ y }}{{ namespace() }}")
            .unwrap();
        let refs: Vec<String> = t.references("a", |_| false).into_iter().collect();
        assert!(t.references("a", |n| n == "range").contains("range"));
        assert_eq!(refs, ["x", "z"]);
    }

    #[test]
    fn undefined_values_render_as_pythons_jinja_renders_them() {
        let mut t = Templates::new();
        t.add("p", "[{{ obj.missing }}]").unwrap();
        t.add("q", "{% if obj.missing %}y{% else %}n{% endif %}")
            .unwrap();
        t.add("deeper", "{{ obj.missing.deeper }}").unwrap();
        t.add_strict("skip", "{{ obj.missing }}").unwrap();
        let c = ctx(&[("obj", json!({"a": 1}))]).into_value();
        let b = RecordBudget::new();
        // Jinja's default `Undefined`: empty text, false, but no lookup on it.
        assert_eq!(t.render("p", &c, &b).unwrap(), "[]");
        assert_eq!(t.render("q", &c, &b).unwrap(), "n");
        assert!(
            t.render("deeper", &c, &b)
                .unwrap_err()
                .contains("undefined")
        );
        // `StrictUndefined`, for skip conditions.
        assert!(t.render("skip", &c, &b).unwrap_err().contains("undefined"));
        assert_eq!(t.references("skip", |_| false).len(), 1);
    }

    #[test]
    fn fuel_stops_runaway_templates() {
        let mut t = Templates::new();
        t.add(
            "f",
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        )
        .unwrap();
        let err = t
            .render("f", &ctx(&[]).into_value(), &RecordBudget::new())
            .unwrap_err();
        assert!(err.contains("fuel"), "{err}");
    }

    #[test]
    fn output_is_capped() {
        let mut t = Templates::new();
        t.add("big", "{{ 'x' * 600000 }}").unwrap();
        assert!(
            t.render("big", &ctx(&[]).into_value(), &RecordBudget::new())
                .unwrap_err()
                .contains("512000")
        );
    }

    #[test]
    fn truthiness_follows_datadesigner() {
        for falsy in ["", " False ", "false", "0", "0.0", "None", "none", "[]"] {
            assert!(!rendered_truthy(falsy), "{falsy:?}");
        }
        for truthy in ["True", "true", "1", "yes", "nan", "-2"] {
            assert!(rendered_truthy(truthy), "{truthy:?}");
        }
        assert!(rendered_condition("true") && rendered_condition("True"));
        assert!(!rendered_condition("math"));
    }

    #[test]
    fn context_enumerates_defined_columns() {
        let mut c = ctx(&[("a", json!(1)), ("b", json!(2))]);
        c.values[1] = None;
        let mut t = Templates::new();
        t.add("e", "{{ a }}{{ b is defined }}").unwrap();
        // minijinja prints booleans as Python does.
        assert_eq!(
            t.render("e", &c.into_value(), &RecordBudget::new())
                .unwrap(),
            "1False"
        );
    }
}
