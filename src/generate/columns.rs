//! The compiled steps of a plan and how one record runs through them: skip decisions, then
//! the column's own work (seed value, sampler draw, expression render, or LLM placeholder).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::convert::cast_expression;
use super::rng::column_rng;
use super::samplers::constraints::{Check, MAX_DRAWS};
use super::samplers::{Convert, Dist, Sampled};
use super::template::{
    RecordBudget, RecordContext, Templates, rendered_condition, rendered_truthy,
    seed_template_value, template_value,
};
use crate::domain::dataset::ExprDtype;
use crate::domain::record::RecordErrorCode;

/// One column's work, in dependency order.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) name: String,
    pub(crate) slot: usize,
    /// Side columns (`__reasoning_content`, `__trace`) the column fills.
    pub(crate) side_slots: Vec<usize>,
    /// FNV-1a 128 of the name: the column's random stream.
    pub(crate) rng_key: u128,
    pub(crate) skip: Option<SkipStep>,
    pub(crate) propagate_skip: bool,
    /// Slots of the columns whose skip propagates here (the column's data dependencies).
    pub(crate) required: Vec<usize>,
    pub(crate) kind: StepKind,
    /// What this step's CPU section has been costing: an I/O step's skip gate and prompts, or
    /// for a CPU step after an I/O step, it and the CPU steps up to the next I/O step. Cheap
    /// sections run inline: see [`crate::cpu::CpuGate::run_measured`].
    pub(crate) cost: crate::cpu::SectionCost,
}

impl Step {
    /// Whether running this step renders a template (a skip gate, an expression, a sampler
    /// condition, an LLM prompt): the work a user's template can make expensive. Samplers and
    /// seed fields alone cost microseconds, bounded by the config.
    pub(crate) fn renders(&self) -> bool {
        self.skip.is_some()
            || match &self.kind {
                StepKind::Seed { .. } => false,
                StepKind::Sampler { conditional, .. } => !conditional.is_empty(),
                StepKind::Expression { .. } | StepKind::Llm(_) => true,
                StepKind::Validation(_) | StepKind::Embedding(_) => false,
                StepKind::Image(_) => true,
            }
    }

    /// Whether the step waits on I/O (a model, a subprocess, an HTTP endpoint): such steps
    /// run one by one in `Plan::generate_with`, the CPU steps between them in one section.
    pub(crate) fn is_io(&self) -> bool {
        match &self.kind {
            StepKind::Llm(_)
            | StepKind::Validation(_)
            | StepKind::Embedding(_)
            | StepKind::Image(_) => true,
            StepKind::Seed { .. } | StepKind::Sampler { .. } | StepKind::Expression { .. } => false,
        }
    }
}

/// A compiled `skip` config.
#[derive(Debug)]
pub(crate) struct SkipStep {
    pub(crate) template: String,
    pub(crate) value: Value,
}

/// The type-specific work of a step.
#[derive(Debug)]
pub(crate) enum StepKind {
    Seed {
        field: String,
    },
    Sampler {
        base: Dist,
        conditional: Vec<(String, Dist)>,
        convert: Convert,
        /// `constraints` targeting this column: redraw until all hold.
        constraints: Vec<Check>,
    },
    Expression {
        template: String,
        dtype: ExprDtype,
    },
    Llm(Box<super::llm::LlmStep>),
    Validation(Box<super::validation::ValidationStep>),
    Embedding(super::llm::media::EmbeddingStep),
    Image(super::llm::media::ImageStep),
}

/// Why a step failed: a record error code (which names the stage) and a message.
#[derive(Debug)]
pub(crate) struct StepError {
    pub(crate) code: RecordErrorCode,
    pub(crate) message: String,
}

impl StepError {
    pub(crate) fn new(code: RecordErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The values of one record while it is generated.
pub(crate) struct RecordState<'p> {
    names: &'p Arc<HashMap<String, usize>>,
    /// Slots some template reads; only those get a template value.
    ctx_slots: &'p [bool],
    pub(crate) values: Vec<Value>,
    pub(crate) set: Vec<bool>,
    ctx: Vec<Option<minijinja::Value>>,
    raw: Vec<Option<Sampled>>,
    skipped: Vec<bool>,
}

impl<'p> RecordState<'p> {
    pub(crate) fn new(names: &'p Arc<HashMap<String, usize>>, ctx_slots: &'p [bool]) -> Self {
        let n = ctx_slots.len();
        Self {
            names,
            ctx_slots,
            values: vec![Value::Null; n],
            set: vec![false; n],
            ctx: vec![None; n],
            raw: vec![None; n],
            skipped: vec![false; n],
        }
    }

    pub(crate) fn put(&mut self, slot: usize, value: Value) {
        if self.ctx_slots[slot] {
            self.ctx[slot] = Some(template_value(&value));
        }
        self.values[slot] = value;
        self.set[slot] = true;
    }

    /// [`put`](Self::put) for a value read from the seed, which templates see as DataDesigner
    /// does (see [`seed_template_value`]).
    fn put_seed(&mut self, slot: usize, value: Value) {
        if self.ctx_slots[slot] {
            self.ctx[slot] = Some(seed_template_value(&value));
        }
        self.values[slot] = value;
        self.set[slot] = true;
    }

    pub(crate) fn context(&self) -> minijinja::Value {
        RecordContext {
            names: Arc::clone(self.names),
            values: self.ctx.clone(),
        }
        .into_value()
    }
}

/// What a step needs from the plan besides the record.
pub(crate) struct StepEnv<'p> {
    pub(crate) templates: &'p Templates,
    pub(crate) seed: u64,
    pub(crate) index: u64,
    pub(crate) seed_row: Option<&'p Map<String, Value>>,
    /// What this record's templates may still spend, all columns together.
    pub(crate) budget: RecordBudget,
}

impl StepEnv<'_> {
    /// Renders template `name` from this record's budget.
    pub(crate) fn render(&self, name: &str, ctx: &minijinja::Value) -> Result<String, String> {
        self.templates.render(name, ctx, &self.budget)
    }
}

impl Step {
    /// Decides whether the column is skipped for this record; if so writes the skip value and
    /// returns `None`. Otherwise returns the template context if computing the decision built it.
    pub(crate) fn apply_skip(
        &self,
        env: &StepEnv<'_>,
        rec: &mut RecordState<'_>,
    ) -> Option<Option<minijinja::Value>> {
        // DataDesigner checks propagation first (cheaper), then the expression gate.
        let propagated = self.propagate_skip && self.required.iter().any(|&s| rec.skipped[s]);
        let mut ctx = None;
        let skipped = propagated
            || self.skip.as_ref().is_some_and(|skip| {
                let c = rec.context();
                // A gate that fails to render skips the cell, as DataDesigner does (fail-safe:
                // never spend an LLM call on a record whose filter status is unknown).
                let skip = env
                    .render(&skip.template, &c)
                    .map_or(true, |text| rendered_truthy(&text));
                ctx = Some(c);
                skip
            });
        if skipped {
            let value = self.skip.as_ref().map_or(Value::Null, |s| s.value.clone());
            rec.put(self.slot, value);
            rec.skipped[self.slot] = true;
            for &side in &self.side_slots {
                rec.put(side, Value::Null);
            }
            return None;
        }
        Some(ctx)
    }

    /// Runs the step for one record, writing its value (and side values) into `rec`.
    pub(crate) fn run(
        &self,
        env: &StepEnv<'_>,
        rec: &mut RecordState<'_>,
    ) -> Result<(), StepError> {
        let Some(ctx) = self.apply_skip(env, rec) else {
            return Ok(());
        };
        match &self.kind {
            StepKind::Seed { field } => {
                let value = env
                    .seed_row
                    .and_then(|row| row.get(field))
                    .cloned()
                    .unwrap_or(Value::Null);
                rec.put_seed(self.slot, value);
            }
            StepKind::Sampler {
                base,
                conditional,
                convert,
                constraints,
            } => {
                let mut dist = base;
                if !conditional.is_empty() {
                    let c = rec.context();
                    for (template, d) in conditional {
                        let text = env.render(template, &c).map_err(|e| {
                            StepError::new(
                                RecordErrorCode::TemplateError,
                                format!("condition: {e}"),
                            )
                        })?;
                        if rendered_condition(&text) {
                            dist = d;
                            break;
                        }
                    }
                }
                let mut rng = column_rng(env.seed, env.index, self.rng_key);
                let mut draws = 0;
                let (sampled, value) = loop {
                    let sampled = dist
                        .sample(&mut rng, |s| rec.raw[s].clone(), |s| rec.values[s].clone())
                        .map_err(|e| StepError::new(RecordErrorCode::SamplerError, e))?;
                    let value = convert
                        .apply(&sampled)
                        .map_err(|e| StepError::new(RecordErrorCode::TypeConversion, e))?;
                    draws += 1;
                    if meets(constraints, &sampled, &value, &rec.raw, &rec.values)? {
                        break (sampled, value);
                    }
                    if draws == MAX_DRAWS {
                        let all: Vec<String> = constraints.iter().map(Check::describe).collect();
                        let msg = format!(
                            "no value met the constraints ({}) in {MAX_DRAWS} draws; loosen the constraints or the sampler's parameters",
                            all.join(", ")
                        );
                        return Err(StepError::new(RecordErrorCode::ConstraintUnsatisfied, msg));
                    }
                };
                rec.raw[self.slot] = Some(sampled);
                rec.put(self.slot, value);
            }
            StepKind::Expression { template, dtype } => {
                let c = ctx.unwrap_or_else(|| rec.context());
                let text = env
                    .render(template, &c)
                    .map_err(|e| StepError::new(RecordErrorCode::TemplateError, e))?;
                // DataDesigner drops a row whose expression renders blank.
                if text.trim().is_empty() {
                    let msg = super::template::empty_render("expression");
                    return Err(StepError::new(RecordErrorCode::TemplateError, msg));
                }
                let value = cast_expression(&text, *dtype)
                    .map_err(|e| StepError::new(RecordErrorCode::TypeConversion, e))?;
                rec.put(self.slot, value);
            }
            // Only `Plan::generate` (the submit-time probe and tests) meets an LLM column
            // here; a job's records run through `Plan::generate_with`. Reaching it from a job
            // would be a bug, hence `internal_error`.
            StepKind::Llm(step) => {
                let msg = format!(
                    "{} generation needs an LLM runtime (Plan::generate_with)",
                    step.column.column_type()
                );
                return Err(StepError::new(RecordErrorCode::InternalError, msg));
            }
            // Validators and models do I/O, which only `generate_with` runs.
            StepKind::Validation(_) | StepKind::Embedding(_) | StepKind::Image(_) => {
                let msg = "validation and media columns need a runtime (Plan::generate_with)";
                return Err(StepError::new(RecordErrorCode::InternalError, msg));
            }
        }
        Ok(())
    }
}

/// Whether a draw (`sampled`, converted to `value`) meets every constraint on its column.
fn meets(
    constraints: &[Check],
    sampled: &Sampled,
    value: &Value,
    raw: &[Option<Sampled>],
    values: &[Value],
) -> Result<bool, StepError> {
    for c in constraints {
        let ok = c
            .holds(sampled, value, raw, values)
            .map_err(|e| StepError::new(RecordErrorCode::ConstraintUnsatisfied, e))?;
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}
