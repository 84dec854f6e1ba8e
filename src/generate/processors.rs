//! Processors (`processors` in a config): `drop_columns` decides which columns leave the
//! dataset at compile; `schema_transform` compiles its template into the plan and renders a
//! record's row of its second dataset, named by the processor.
//!
//! A `schema_transform` dataset is rendered when it is exported, from the stored rows of the
//! main dataset, not stored itself: rendering is deterministic in the row (Jinja over the
//! values, no randomness, no model), cheap (one small template per row, under the same budgets
//! as any template), and costs no migration, no storage and no write per record. The price is
//! that its templates may read only columns that are in the final dataset: DataDesigner also
//! lets them read columns dropped later, which are not stored here, so such a template is
//! refused with `invalid_processor` and the message says to keep the column.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::template::{BUDGET_EXCEEDED, MAX_RENDERED_LEN, RecordBudget, Templates, template_value};
use crate::domain::dataset::{ConfigIssue, ProcessorConfig, ProcessorKind, codes};

/// One `schema_transform` processor, compiled.
#[derive(Debug)]
pub(crate) struct OutputDataset {
    /// The processor's `name`.
    pub(crate) name: String,
    /// Its index in `processors`.
    index: usize,
    /// The template, its strings compiled.
    shape: Vec<(String, Shape)>,
}

/// A template value: strings are compiled templates, other scalars stay as they are.
#[derive(Debug)]
enum Shape {
    /// A compiled string: its template name and its path below `template`.
    Template {
        name: String,
        at: String,
    },
    /// A number, boolean or null, or a string that did not compile (the config is refused).
    Literal(Value),
    Array(Vec<Shape>),
    Object(Vec<(String, Shape)>),
}

/// What compiling the processors yields.
#[derive(Debug)]
pub(crate) struct Processors {
    /// Columns (and side columns) `drop_columns` processors remove from the dataset.
    pub(crate) dropped: HashSet<String>,
    /// The `schema_transform` datasets, in config order.
    pub(crate) outputs: Vec<OutputDataset>,
    /// Their templates: an environment of their own, since they print values as JSON.
    pub(crate) templates: Templates,
}

impl Default for Processors {
    fn default() -> Self {
        Self {
            dropped: HashSet::new(),
            outputs: Vec::new(),
            templates: Templates::with_formatter(json_formatter),
        }
    }
}

/// Compiles `processors` against the config's names: `known` holds every column and side
/// column; `kept(name)` says whether a name is in the final dataset before processors.
pub(crate) fn compile(
    processors: &[ProcessorConfig],
    known: &HashSet<String>,
    kept: impl Fn(&str) -> bool,
    issues: &mut Vec<ConfigIssue>,
) -> Processors {
    let mut out = Processors::default();
    let templates = &mut out.templates;
    let mut names = HashSet::new();
    for (i, p) in processors.iter().enumerate() {
        if !names.insert(p.name.as_str()) {
            let msg = format!(
                "processor name '{}' is used more than once; each names its own output",
                p.name
            );
            issues.push(ConfigIssue::at_field(
                codes::INVALID_PROCESSOR,
                &format!("processors[{i}].name"),
                msg,
            ));
        }
        match &p.kind {
            ProcessorKind::DropColumns { column_names } => {
                for (j, pattern) in column_names.iter().enumerate() {
                    let field = format!("processors[{i}].column_names[{j}]");
                    drop_matching(pattern, known, &field, &mut out.dropped, issues);
                }
            }
            ProcessorKind::SchemaTransform { template } => {
                let at = format!("processors[{i}].template");
                let mut c = ShapeCompiler {
                    processor: &p.name,
                    at: &at,
                    known,
                    kept: &kept,
                    templates,
                    issues,
                    count: 0,
                };
                let shape = c.entries(template, &at);
                out.outputs.push(OutputDataset {
                    name: p.name.clone(),
                    index: i,
                    shape,
                });
            }
        }
    }
    // A dropped column is out of the final dataset too, whichever processor comes first:
    // checked once every drop is known.
    for o in &out.outputs {
        for (leaf, refs) in leaf_refs(&o.shape, &out.templates) {
            for r in refs.iter().filter(|r| out.dropped.contains(*r)) {
                let field = format!("processors[{}].template{leaf}", o.index);
                issues.push(read_dropped(&o.name, r, &field));
            }
        }
    }
    out
}

/// Adds the names `pattern` selects to `dropped`: a name with `*` is a glob over every
/// column and side column (DataDesigner warns when it matches nothing; so it is accepted),
/// any other must be a column.
fn drop_matching(
    pattern: &str,
    known: &HashSet<String>,
    field: &str,
    dropped: &mut HashSet<String>,
    issues: &mut Vec<ConfigIssue>,
) {
    if pattern.contains('*') {
        match glob::Pattern::new(pattern) {
            Ok(glob) => dropped.extend(known.iter().filter(|n| glob.matches(n)).cloned()),
            Err(e) => {
                let msg = format!("'{pattern}' is not a valid pattern: {e}");
                issues.push(ConfigIssue::at_field(codes::INVALID_PROCESSOR, field, msg));
            }
        }
    } else if known.contains(pattern) {
        dropped.insert(pattern.to_owned());
    } else {
        let msg =
            format!("drop_columns names column '{pattern}', which the config does not define");
        issues.push(ConfigIssue::at_field(codes::INVALID_PROCESSOR, field, msg));
    }
}

fn read_dropped(processor: &str, column: &str, field: &str) -> ConfigIssue {
    let msg = format!(
        "schema_transform '{processor}' reads column '{column}', which is not in the final dataset; synthgate renders a processor's dataset from the stored rows, so keep the column (drop: false, not in a drop_columns processor)"
    );
    ConfigIssue::at_field(codes::INVALID_PROCESSOR, field, msg)
}

struct ShapeCompiler<'a, K: Fn(&str) -> bool> {
    processor: &'a str,
    /// `processors[i].template`.
    at: &'a str,
    known: &'a HashSet<String>,
    kept: &'a K,
    templates: &'a mut Templates,
    issues: &'a mut Vec<ConfigIssue>,
    count: usize,
}

impl<K: Fn(&str) -> bool> ShapeCompiler<'_, K> {
    /// A template object's entries, sorted by key: the stored config of a Postgres job is
    /// `jsonb`, which does not keep key order, and a dataset's columns must not depend on
    /// the backend or on whether the plan was compiled at submit or from the store.
    fn entries(&mut self, map: &Map<String, Value>, at: &str) -> Vec<(String, Shape)> {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        keys.into_iter()
            .map(|k| (k.clone(), self.value(&map[k], &format!("{at}.{k}"))))
            .collect()
    }

    fn value(&mut self, v: &Value, at: &str) -> Shape {
        match v {
            Value::String(source) => self.leaf(source, at),
            Value::Array(items) => Shape::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.value(item, &format!("{at}[{i}]")))
                    .collect(),
            ),
            Value::Object(map) => Shape::Object(self.entries(map, at)),
            other => Shape::Literal(other.clone()),
        }
    }

    /// Compiles one string of the template and checks the names it reads.
    fn leaf(&mut self, source: &str, at: &str) -> Shape {
        self.count += 1;
        let name = format!("processor:{}#{}", self.processor, self.count);
        if let Err(msg) = self.templates.add(&name, source) {
            self.issues
                .push(ConfigIssue::at_field(codes::INVALID_TEMPLATE, at, msg));
            return Shape::Literal(Value::Null);
        }
        for r in self.templates.references(&name, |r| self.known.contains(r)) {
            if !self.known.contains(&r) {
                let msg = format!(
                    "schema_transform '{}' reads '{r}', which is not a column",
                    self.processor
                );
                self.issues
                    .push(ConfigIssue::at_field(codes::UNKNOWN_REFERENCE, at, msg));
            } else if !(self.kept)(&r) {
                self.issues.push(read_dropped(self.processor, &r, at));
            }
        }
        let below = at.strip_prefix(self.at).unwrap_or(at).to_owned();
        Shape::Template { name, at: below }
    }
}

/// Every compiled template of `shape` with the names it reads, by path below `template`.
fn leaf_refs(shape: &[(String, Shape)], templates: &Templates) -> Vec<(String, HashSet<String>)> {
    fn walk(s: &Shape, templates: &Templates, out: &mut Vec<(String, HashSet<String>)>) {
        match s {
            Shape::Template { name, at } => {
                let refs = templates.references(name, |_| true).into_iter().collect();
                out.push((at.clone(), refs));
            }
            Shape::Literal(_) => {}
            Shape::Array(items) => items.iter().for_each(|v| walk(v, templates, out)),
            Shape::Object(entries) => entries.iter().for_each(|(_, v)| walk(v, templates, out)),
        }
    }
    let mut out = Vec::new();
    shape.iter().for_each(|(_, v)| walk(v, templates, &mut out));
    out
}

impl OutputDataset {
    /// The columns of this dataset: the template's keys, sorted.
    pub(crate) fn columns(&self) -> Vec<String> {
        self.shape.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Renders the row of this dataset for one row of the main dataset. Values are seen as
    /// DataDesigner's schema transform sees them: JSON strings parsed, so `{{ col.field }}`
    /// works; strings render as themselves, lists and maps as JSON, booleans as `true`/`false`.
    pub(crate) fn render(&self, templates: &Templates, row: &Value) -> Result<Value, String> {
        let ctx: BTreeMap<String, minijinja::Value> = row
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), template_value(v)))
            .collect();
        let ctx = minijinja::Value::from(ctx);
        let budget = RecordBudget::new();
        let mut out = Map::with_capacity(self.shape.len());
        for (k, v) in &self.shape {
            out.insert(k.clone(), render_shape(v, templates, &ctx, &budget)?);
        }
        Ok(Value::Object(out))
    }
}

fn render_shape(
    shape: &Shape,
    templates: &Templates,
    ctx: &minijinja::Value,
    budget: &RecordBudget,
) -> Result<Value, String> {
    Ok(match shape {
        Shape::Template { name, at } => {
            let text = templates
                .render(name, ctx, budget)
                .map_err(|e| format!("template{at}: {e}"))?;
            Value::String(text)
        }
        Shape::Literal(v) => v.clone(),
        Shape::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render_shape(v, templates, ctx, budget))
                .collect::<Result<_, _>>()?,
        ),
        Shape::Object(entries) => {
            let mut out = Map::with_capacity(entries.len());
            for (k, v) in entries {
                out.insert(k.clone(), render_shape(v, templates, ctx, budget)?);
            }
            Value::Object(out)
        }
    })
}

/// Prints values as DataDesigner's schema transform does (its Jinja `finalize`): lists and
/// maps as JSON, booleans as `true`/`false`, none as `null`; strings as they are.
fn json_formatter(
    out: &mut minijinja::Output,
    state: &mut minijinja::State,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    use minijinja::value::ValueKind;
    match value.kind() {
        ValueKind::Bool => out.write_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::None => out.write_str("null"),
        ValueKind::Seq | ValueKind::Map => {
            let mut text = String::new();
            json_text(value, &mut text)?;
            out.write_str(&text)
        }
        _ => return minijinja::escape_formatter(out, state, value),
    }
    .map_err(minijinja::Error::from)
}

/// Writes `value` as Python's `json.dumps` does by default (`, ` and `: ` separators, non-ASCII
/// escaped), failing past [`MAX_RENDERED_LEN`] bytes: lists can share items, so a small
/// value may print huge.
fn json_text(value: &minijinja::Value, out: &mut String) -> Result<(), minijinja::Error> {
    use minijinja::value::ValueKind;
    use std::fmt::Write as _;
    if out.len() > MAX_RENDERED_LEN {
        return Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("{BUDGET_EXCEEDED}: a printed value is more than {MAX_RENDERED_LEN} bytes"),
        ));
    }
    match value.kind() {
        ValueKind::None | ValueKind::Undefined => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            let _ = write!(out, "{value}");
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_text(&item, out)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_string(&key.to_string(), out);
                out.push_str(": ");
                json_text(&value.get_item(&key)?, out)?;
            }
            out.push('}');
        }
        _ => json_string(&value.to_string(), out),
    }
    Ok(())
}

/// A JSON string literal with non-ASCII escaped, as Python's `json.dumps` writes it.
fn json_string(s: &str, out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7f => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
