//! Generating one record with its I/O: the loop that runs the CPU sections of a record on the
//! [`crate::cpu`] gate and its I/O columns (LLM, embedding, image, validation) one by one, and
//! the LLM and validation steps. Kept apart from `mod.rs` (the plan and its CPU-only
//! generation) so each file does one thing.

use serde_json::Value;

use super::columns::{self, RecordState, Step, StepEnv};
use super::llm::multimodal;
use super::{Generated, LlmRuntime, Plan, Spent, llm, template, validation};
use crate::domain::record::{RecordErrorCode, RecordOutcome, Trace};
use crate::domain::usage::UsageCounts;

impl Plan {
    /// Generates record `index`, LLM columns included, with `seed_row` as its seed row (see
    /// [`Plan::seed_row`]). Deterministic in (seed, index) up to the model's answers. Returns
    /// the outcome and the traces of the LLM columns that keep one.
    pub async fn generate_with(
        &self,
        index: u64,
        seed_row: Option<&serde_json::Map<String, Value>>,
        rt: &LlmRuntime<'_>,
    ) -> Generated {
        let mut rec = RecordState::new(&self.names, &self.ctx_slots);
        let env = StepEnv {
            templates: &self.templates,
            seed: self.seed,
            index,
            seed_row,
            budget: template::RecordBudget::for_record(self.seed, index),
        };
        let mut spent = Spent::default();
        let mut next = 0;
        while next < self.steps.len() {
            let step = &self.steps[next];
            let io = match &step.kind {
                columns::StepKind::Llm(llm) => Some(
                    self.run_llm(step, llm, &env, &mut rec, rt, &mut spent)
                        .await,
                ),
                columns::StepKind::Embedding(e) => Some(
                    self.run_embedding(step, e, &env, &mut rec, rt, &mut spent)
                        .await,
                ),
                columns::StepKind::Image(i) => Some(
                    self.run_image(step, i, &env, &mut rec, rt, &mut spent)
                        .await,
                ),
                columns::StepKind::Validation(v) => {
                    Some(self.run_validation(step, v, &env, &mut rec, rt).await)
                }
                columns::StepKind::Seed { .. }
                | columns::StepKind::Sampler { .. }
                | columns::StepKind::Expression { .. } => None,
            };
            if let Some(result) = io {
                if let Err(e) = result {
                    return spent.into_generated(self.failed(step, e, &rec));
                }
                next += 1;
                continue;
            }
            // The columns up to the next I/O column are pure CPU: one section for all of them.
            let end = self.steps[next..]
                .iter()
                .position(Step::is_io)
                .map_or(self.steps.len(), |p| next + p);
            let segment = &self.steps[next..end];
            let mut run = || {
                segment
                    .iter()
                    .find_map(|step| step.run(&env, &mut rec).err().map(|e| (step, e)))
            };
            // Handing a section to the gate costs a thread switch (measured: about 0.1 ms of
            // CPU and 15 MB of RSS over a 5,000-record job when every record paid it), which
            // only templates can be worth, and only heavy ones (`run_measured`); samplers alone
            // run where they are.
            let failed = if segment.iter().any(Step::renders) {
                rt.cpu.run_measured(&self.steps[next].cost, run).await
            } else {
                run()
            };
            if let Some((step, e)) = failed {
                return spent.into_generated(self.failed(step, e, &rec));
            }
            next = end;
        }
        let values = self.row(&rec);
        let mut generated = spent.into_generated(RecordOutcome::Completed { values });
        generated.selection = self.verdict(&rec);
        generated
    }

    async fn run_llm(
        &self,
        step: &Step,
        llm: &llm::LlmStep,
        env: &StepEnv<'_>,
        rec: &mut RecordState<'_>,
        rt: &LlmRuntime<'_>,
        out: &mut Spent,
    ) -> Result<(), columns::StepError> {
        // The skip gate and the prompts are templates: CPU work, off the runtime threads unless
        // they measured cheap.
        let prompts = rt
            .cpu
            .run_measured(&step.cost, || {
                let Some(ctx) = step.apply_skip(env, rec) else {
                    return Ok(None);
                };
                let ctx = ctx.unwrap_or_else(|| rec.context());
                let render = |name: &str, what: &str| {
                    let text = env
                        .render(name, &ctx)
                        .map_err(|e| columns::StepError::new(RecordErrorCode::TemplateError, e))?;
                    if text.is_empty() {
                        let msg = super::template::empty_render(what);
                        return Err(columns::StepError::new(RecordErrorCode::TemplateError, msg));
                    }
                    Ok(text)
                };
                let user = render(&llm.prompt, "prompt")?;
                let system = llm
                    .system
                    .as_deref()
                    .map(|s| render(s, "system prompt"))
                    .transpose()?;
                Ok(Some((system, user)))
            })
            .await?;
        let Some((system, user)) = prompts else {
            return Ok(());
        };
        let media = match &llm.column.multi_modal_context {
            Some(contexts) => multimodal::context_parts(
                contexts,
                |name| self.names.get(name).map(|&slot| &rec.values[slot]),
                &out.media,
            )
            .map_err(|m| columns::StepError::new(RecordErrorCode::MultiModalContextInvalid, m))?,
            None => Vec::new(),
        };
        let (answer, spent) = llm.run(rt, &step.name, system, user, media).await;
        // What the column spent is kept whether it answered or failed: a failed record's
        // requests count, and its conversation up to the failure is its trace.
        if spent.requests > 0 || spent.cached > 0 {
            let alias = &llm.column.model_alias;
            let cost_nanos = rt.models.get(alias).and_then(|m| m.prices).map_or(0, |p| {
                let u = &spent.usage;
                p.cost_nanos(u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, 0)
            });
            let counts = UsageCounts {
                requests: u64::from(spent.requests),
                prompt_tokens: spent.usage.prompt_tokens,
                completion_tokens: spent.usage.completion_tokens,
                cached_requests: u64::from(spent.cached),
                cost_nanos,
            };
            out.add(&step.name, alias, counts);
        }
        if !spent.tools.is_empty() {
            out.tool_usage
                .entry(step.name.clone())
                .or_default()
                .add(&spent.tools);
        }
        let trace = spent.trace.map(|trace| {
            let messages = serde_json::to_value(&trace).unwrap_or(Value::Null);
            out.traces.push(Trace {
                column: step.name.clone(),
                messages: messages.clone(),
            });
            messages
        });
        let a = answer.map_err(|f| columns::StepError::new(f.code, f.message))?;
        rec.put(step.slot, a.value);
        let reasoning = format!(
            "{}{}",
            step.name,
            crate::domain::dataset::REASONING_CONTENT_POSTFIX
        );
        if let Some(&slot) = self.names.get(&reasoning) {
            rec.put(slot, a.reasoning.map_or(Value::Null, Value::String));
        }
        if let Some(messages) = trace {
            let name = format!("{}{}", step.name, crate::domain::dataset::TRACE_POSTFIX);
            if let Some(&slot) = self.names.get(&name) {
                rec.put(slot, messages);
            }
        }
        Ok(())
    }

    /// Runs a validation column: its skip gate, then its validator on the target values.
    async fn run_validation(
        &self,
        step: &Step,
        v: &validation::ValidationStep,
        env: &StepEnv<'_>,
        rec: &mut RecordState<'_>,
        rt: &LlmRuntime<'_>,
    ) -> Result<(), columns::StepError> {
        let gate = |rec: &mut RecordState<'_>| step.apply_skip(env, rec).is_some();
        // A skip template is CPU work; without one the gate is a few comparisons.
        let run = if step.skip.is_some() {
            rt.cpu.run_measured(&step.cost, || gate(rec)).await
        } else {
            gate(rec)
        };
        if !run {
            return Ok(());
        }
        let values = v
            .targets
            .iter()
            .map(|(_, slot)| rec.values[*slot].clone())
            .collect();
        let value = v.run(values, rt.cpu, rt.waits).await?;
        rec.put(step.slot, value);
        Ok(())
    }
}
