//! Turning a parsed [`DatasetConfig`] into a [`Plan`]: every validation that needs the whole
//! config (names, references, templates, aliases, sampler params, constraints, the dependency
//! graph), then the steps in dependency order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod kinds;
mod media;
mod validation;

use super::columns::{SkipStep, Step, StepKind};
use super::dag::{close_names, topological_order};
use super::processors::{self, Processors};
use super::rng::name_hash;
use super::samplers::constraints;
use super::template::Templates;
use super::validate::{self, Aliases};
use super::{Plan, PlanContext, seed};
use crate::domain::dataset::{
    ColumnConfig, ColumnKind, ConfigIssue, DatasetConfig, KNOWN_COLUMN_TYPES,
    REASONING_CONTENT_POSTFIX, TRACE_POSTFIX, TraceType, codes,
};

/// Unknown references past this many problems get no "did you mean" hint.
const MAX_HINTED_ISSUES: usize = 50;

/// Names, slots and templates shared while compiling the columns.
struct Compiler<'c> {
    columns: Vec<&'c ColumnConfig>,
    /// Name (column or side column) → slot, first definition wins.
    slots: HashMap<String, usize>,
    /// Slot → index of the column that produces it.
    producer: Vec<usize>,
    /// Column index → its value slot.
    column_slot: Vec<usize>,
    /// Column indices whose name is defined more than once.
    duplicated: Vec<bool>,
    templates: Templates,
    /// Slots read by some template.
    ctx_slots: Vec<bool>,
    issues: Vec<ConfigIssue>,
}

/// What compiling one column yields besides issues.
#[derive(Default)]
struct ColumnParts {
    deps: Vec<usize>,
    required: Vec<usize>,
    kind: Option<StepKind>,
    skip: Option<SkipStep>,
}

/// `column_type` of the stand-ins for columns that did not parse.
const PLACEHOLDER_TYPE: &str = "\u{0}unparsed";

pub(crate) fn compile(
    config: &DatasetConfig,
    ctx: &PlanContext,
    seed: u64,
    placeholders: &[String],
    stored: Option<&seed::StoredSeed>,
) -> Result<Plan, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    validate::model_and_tool_configs(config, &mut issues);
    let seed_rows = config
        .seed_config
        .as_ref()
        .and_then(|sc| seed::compile(sc, seed, stored, &mut issues));

    // Without listed seed-dataset columns, every seed field becomes a column (first).
    let listed_seed = config
        .columns
        .iter()
        .any(|c| matches!(c.kind, ColumnKind::SeedDataset));
    let implicit: Vec<ColumnConfig> = match (&seed_rows, listed_seed) {
        (Some(rows), false) => rows
            .keys()
            .into_iter()
            .map(|name| ColumnConfig {
                name,
                drop: false,
                skip: None,
                propagate_skip: true,
                kind: ColumnKind::SeedDataset,
            })
            .collect(),
        _ => Vec::new(),
    };
    // Stand-ins define the names of columns that did not parse (their issues are reported
    // already), so references to them are not reported as unknown.
    let stand_ins: Vec<ColumnConfig> = placeholders
        .iter()
        .filter(|name| !config.columns.iter().any(|c| &c.name == *name))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|name| ColumnConfig {
            name: name.clone(),
            drop: true,
            skip: None,
            propagate_skip: true,
            kind: ColumnKind::Unsupported {
                column_type: PLACEHOLDER_TYPE.to_owned(),
            },
        })
        .collect();
    let columns: Vec<&ColumnConfig> = implicit
        .iter()
        .chain(&config.columns)
        .chain(&stand_ins)
        .collect();
    if columns.is_empty() {
        issues.push(ConfigIssue::new(
            codes::NO_COLUMNS,
            None,
            None,
            "the config defines no columns",
        ));
        return Err(issues);
    }

    let mut c = Compiler::new(columns, issues);
    let aliases = Aliases::new(config, ctx);
    let by_name: HashMap<&str, &ColumnConfig> = c
        .columns
        .iter()
        .rev()
        .map(|col| (col.name.as_str(), *col))
        .collect();
    let mut parts = Vec::with_capacity(c.columns.len());
    for ci in 0..c.columns.len() {
        let col = c.columns[ci];
        let mut p = ColumnParts::default();
        if let Some(skip) = &col.skip {
            p.skip = c.skip(ci, &skip.when, &skip.value, &mut p.deps);
        }
        p.kind = match &col.kind {
            ColumnKind::SeedDataset => c.seed_column(col, config, seed_rows.as_ref()),
            ColumnKind::Sampler(s) => c.sampler(ci, s, &by_name, &ctx.people, &mut p),
            ColumnKind::Expression(e) => {
                let template = c.template(ci, "expr", &e.expr, &mut p, true);
                template.map(|template| StepKind::Expression {
                    template,
                    dtype: e.dtype,
                })
            }
            ColumnKind::Llm(l) => c.llm(ci, l, &aliases, &mut p),
            ColumnKind::Unsupported { column_type } if column_type == PLACEHOLDER_TYPE => None,
            ColumnKind::Validation(v) => c.validation(ci, v, &ctx.validators, &mut p),
            ColumnKind::Embedding(e) => c.embedding(ci, e, &aliases, &mut p),
            ColumnKind::Image(i) => c.image(ci, i, &aliases, &mut p),
            ColumnKind::Unsupported { column_type } => {
                let msg = format!(
                    "column_type '{column_type}' is not supported by synthgate; supported types: {}",
                    KNOWN_COLUMN_TYPES.join(", ")
                );
                c.issue(codes::UNSUPPORTED_COLUMN_TYPE, ci, Some("column_type"), msg);
                None
            }
        };
        parts.push(p);
    }
    let constraints = constraints::compile(
        config.constraints.as_ref(),
        &c.columns,
        &c.column_slot,
        &mut c.issues,
    );
    for con in constraints {
        let p = &mut parts[con.target];
        if let Some(r) = con.rhs_column
            && !p.deps.contains(&r)
        {
            p.deps.push(r);
        }
        if let Some(StepKind::Sampler { constraints, .. }) = &mut p.kind {
            constraints.push(con.check);
        }
    }

    // Seed columns come first; the rest keep config order where the graph allows.
    let n = c.columns.len();
    let deps: Vec<Vec<usize>> = parts.iter().map(|p| p.deps.clone()).collect();
    let priority: Vec<usize> = (0..n)
        .map(|i| {
            if matches!(c.columns[i].kind, ColumnKind::SeedDataset) {
                i
            } else {
                n + i
            }
        })
        .collect();
    let order = match topological_order(&deps, &priority) {
        Ok(order) => order,
        Err(cycles) => {
            for cycle in cycles {
                let path: Vec<&str> = cycle.iter().map(|&i| c.columns[i].name.as_str()).collect();
                let msg = format!(
                    "columns depend on each other in a loop: {} (each reads the next)",
                    path.join(" -> ")
                );
                c.issue(codes::DEPENDENCY_CYCLE, cycle[0], None, msg);
            }
            Vec::new()
        }
    };
    let processors = c.processors(config);
    profilers(config, &aliases, &mut c.issues);
    let predicate = super::selection::compile(
        config.record_selection.as_ref(),
        &c.columns,
        &c.slots,
        &mut c.issues,
    );
    if !c.issues.is_empty() {
        return Err(c.issues);
    }
    Ok(c.finish(order, parts, seed, seed_rows, processors, predicate))
}

/// A judge-score profiler's `model_alias` must be defined, as DataDesigner requires.
fn profilers(config: &DatasetConfig, aliases: &Aliases, issues: &mut Vec<ConfigIssue>) {
    for (i, p) in config.profilers.iter().enumerate() {
        if !aliases.models.contains(&p.model_alias) {
            let msg = format!(
                "model_alias '{}' is defined neither in the job nor on the server",
                p.model_alias
            );
            let field = format!("profilers[{i}].model_alias");
            issues.push(ConfigIssue::at_field(codes::INVALID_PROFILER, &field, msg));
        }
    }
}

impl<'c> Compiler<'c> {
    fn new(columns: Vec<&'c ColumnConfig>, issues: Vec<ConfigIssue>) -> Self {
        let mut c = Self {
            slots: HashMap::new(),
            producer: Vec::new(),
            column_slot: Vec::new(),
            duplicated: vec![false; columns.len()],
            templates: Templates::new(),
            ctx_slots: Vec::new(),
            issues,
            columns,
        };
        for ci in 0..c.columns.len() {
            let col = c.columns[ci];
            let slot = c.define(ci, col.name.clone(), None);
            c.column_slot.push(slot);
            if let ColumnKind::Llm(l) = &col.kind {
                if l.extract_reasoning_content {
                    c.define(
                        ci,
                        format!("{}{REASONING_CONTENT_POSTFIX}", col.name),
                        Some(&col.name),
                    );
                }
                if l.with_trace != TraceType::None {
                    c.define(ci, format!("{}{TRACE_POSTFIX}", col.name), Some(&col.name));
                }
            }
        }
        c.ctx_slots = vec![false; c.producer.len()];
        c
    }

    /// Gives `name` a slot produced by column `ci`, reporting a clash with an earlier name.
    fn define(&mut self, ci: usize, name: String, side_of: Option<&str>) -> usize {
        let slot = self.producer.len();
        self.producer.push(ci);
        if let Some(&other) = self.slots.get(&name) {
            let owner = &self.columns[self.producer[other]].name;
            let msg = match side_of {
                Some(p) => {
                    format!("side column '{name}' of '{p}' clashes with an existing column name")
                }
                None if owner == &name => format!("column name '{name}' is used more than once"),
                None => format!("column name '{name}' clashes with a side column of '{owner}'"),
            };
            self.duplicated[ci] = true;
            self.issue(codes::DUPLICATE_COLUMN, ci, None, msg);
        } else {
            self.slots.insert(name, slot);
        }
        slot
    }

    fn issue(
        &mut self,
        code: &'static str,
        ci: usize,
        field: Option<&str>,
        detail: impl std::fmt::Display,
    ) {
        let column = &self.columns[ci].name;
        self.issues
            .push(ConfigIssue::in_column(code, column, field, detail));
    }

    /// Compiles a template of column `ci` and records the columns it reads.
    /// `data` marks data dependencies (they propagate skips); returns the template name.
    fn template(
        &mut self,
        ci: usize,
        field: &str,
        source: &str,
        p: &mut ColumnParts,
        data: bool,
    ) -> Option<String> {
        let name = self.template_name(ci, field);
        if let Err(msg) = self.templates.add(&name, source) {
            self.issue(codes::INVALID_TEMPLATE, ci, Some(field), msg);
            return None;
        }
        let refs = self
            .templates
            .references(&name, |r| self.slots.contains_key(r));
        for reference in refs {
            if let Some(slot) = self.resolve(ci, field, &reference, &mut p.deps) {
                let producer_slot = self.column_slot[self.producer[slot]];
                if data && !p.required.contains(&producer_slot) {
                    p.required.push(producer_slot);
                }
            }
        }
        Some(name)
    }

    fn template_name(&self, ci: usize, field: &str) -> String {
        let col = &self.columns[ci].name;
        if self.duplicated[ci] {
            format!("{col}#{ci}.{field}")
        } else {
            format!("{col}.{field}")
        }
    }

    /// Resolves a column reference to its slot and adds the dependency edge.
    fn resolve(
        &mut self,
        ci: usize,
        field: &str,
        name: &str,
        deps: &mut Vec<usize>,
    ) -> Option<usize> {
        let Some(&slot) = self.slots.get(name) else {
            // Suggestions cost a distance per known name; past a few dozen problems nobody reads
            // them, and a config of thousands of bad references must not cost seconds.
            let close = if self.issues.len() < MAX_HINTED_ISSUES {
                close_names(name, self.slots.keys().map(String::as_str))
            } else {
                Vec::new()
            };
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!("; did you mean {}?", quote_list(&close))
            };
            let msg = format!("'{name}' is not a column{hint}");
            self.issue(codes::UNKNOWN_REFERENCE, ci, Some(field), msg);
            return None;
        };
        self.ctx_slots[slot] = true;
        let producer = self.producer[slot];
        if !deps.contains(&producer) {
            deps.push(producer);
        }
        Some(slot)
    }

    fn skip(
        &mut self,
        ci: usize,
        when: &str,
        value: &serde_json::Value,
        deps: &mut Vec<usize>,
    ) -> Option<SkipStep> {
        let name = self.template_name(ci, "skip.when");
        if let Err(msg) = self.templates.add_strict(&name, when) {
            self.issue(codes::INVALID_TEMPLATE, ci, Some("skip.when"), msg);
            return None;
        }
        let refs = self
            .templates
            .references(&name, |r| self.slots.contains_key(r));
        if refs.is_empty() {
            let msg = format!(
                "'{when}' references no column; write it with Jinja delimiters, e.g. '{{{{ in_stock == 0 }}}}'"
            );
            self.issue(codes::INVALID_TEMPLATE, ci, Some("skip.when"), msg);
            return None;
        }
        for r in refs {
            if self.slots.get(&r).is_some_and(|&s| self.producer[s] == ci) {
                let msg = format!(
                    "skip.when reads '{r}', produced by this column; a column cannot gate its own generation"
                );
                self.issue(codes::SELF_REFERENCE, ci, Some("skip.when"), msg);
                continue;
            }
            self.resolve(ci, "skip.when", &r, deps);
        }
        Some(SkipStep {
            template: name,
            value: value.clone(),
        })
    }

    /// The dataset's columns before processors, with their slots: config order, dropped
    /// columns out, reasoning content after its LLM column.
    fn row_columns(&self) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        for (ci, col) in self.columns.iter().enumerate() {
            if col.drop {
                continue;
            }
            out.push((col.name.clone(), self.column_slot[ci]));
            if let ColumnKind::Llm(l) = &col.kind
                && l.extract_reasoning_content
            {
                let side = format!("{}{REASONING_CONTENT_POSTFIX}", col.name);
                if let Some(&slot) = self.slots.get(&side) {
                    out.push((side, slot));
                }
            }
        }
        out
    }

    /// Compiles the config's processors against the columns' names.
    fn processors(&mut self, config: &DatasetConfig) -> Processors {
        let known: HashSet<String> = self.slots.keys().cloned().collect();
        let kept: HashSet<String> = self.row_columns().into_iter().map(|(n, _)| n).collect();
        processors::compile(
            &config.processors,
            &known,
            |name| kept.contains(name),
            &mut self.issues,
        )
    }

    fn finish(
        self,
        order: Vec<usize>,
        mut parts: Vec<ColumnParts>,
        seed: u64,
        seed_rows: Option<seed::SeedRows>,
        processors: Processors,
        predicate: Option<super::selection::Predicate>,
    ) -> Plan {
        let (output_columns, output_slots) = self
            .row_columns()
            .into_iter()
            .filter(|(name, _)| !processors.dropped.contains(name))
            .unzip();
        let mut steps = Vec::with_capacity(order.len());
        for ci in order {
            let col = self.columns[ci];
            let p = std::mem::take(&mut parts[ci]);
            let slot = self.column_slot[ci];
            let side_slots = (0..self.producer.len())
                .filter(|&s| self.producer[s] == ci && s != slot)
                .collect();
            let Some(kind) = p.kind else { continue };
            steps.push(Step {
                name: col.name.clone(),
                slot,
                side_slots,
                rng_key: name_hash(&col.name),
                skip: p.skip,
                propagate_skip: col.propagate_skip,
                required: p.required,
                kind,
                cost: crate::cpu::SectionCost::new(),
            });
        }
        Plan {
            seed,
            output_columns,
            output_slots,
            names: Arc::new(self.slots),
            ctx_slots: self.ctx_slots,
            steps,
            templates: self.templates,
            seed_rows,
            outputs: processors.outputs,
            output_templates: processors.templates,
            predicate,
        }
    }
}

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(" or ")
}
