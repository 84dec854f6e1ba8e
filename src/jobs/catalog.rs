//! The server's catalog: the model and tool configs it defines and the providers job configs
//! may name. Built once from the server config; everything that resolves a job's aliases
//! (compiling its plan, checking a caller's allow lists, merging its own configs) reads it.

use std::collections::{HashMap, HashSet};

use crate::auth::Caller;
use crate::config::Config;
use crate::domain::dataset::{ConfigIssue, DatasetConfig, codes};
use crate::domain::models::{JobLimit, ModelConfig, ToolConfig, reserved_extra_body_fields};
use crate::error::ApiError;
use crate::generate::PlanContext;

use super::CompiledJob;

/// The server's model and tool configs, and the provider names job configs may use. Read-only
/// once built, so the aliases plan compilation sees always match the configs.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Server model configs.
    models: Vec<ModelConfig>,
    /// Names of the server's model providers.
    model_providers: Vec<String>,
    /// Names of the server's Anthropic model providers (no embeddings or images API).
    anthropic_providers: Vec<String>,
    /// Server tool configs.
    tool_configs: Vec<ToolConfig>,
    /// Names a tool config's `providers` may use: MCP providers and inline tools.
    tool_providers: Vec<String>,
    /// The aliases above, as plan compilation sees them.
    plan: PlanContext,
}

impl Catalog {
    /// A catalog of these configs and provider names.
    pub fn new(
        models: Vec<ModelConfig>,
        model_providers: Vec<String>,
        tool_configs: Vec<ToolConfig>,
        tool_providers: Vec<String>,
    ) -> Self {
        let plan = PlanContext {
            model_aliases: models.iter().map(|m| m.alias.clone()).collect(),
            tool_aliases: tool_configs.iter().map(|t| t.tool_alias.clone()).collect(),
            people: crate::generate::PeopleSource::default(),
            validators: Default::default(),
        };
        Self {
            models,
            model_providers,
            anthropic_providers: Vec::new(),
            tool_configs,
            tool_providers,
            plan,
        }
    }

    /// Reads `person` sampler datasets from `people` (the server's managed-assets directory).
    pub fn with_people(mut self, people: crate::generate::PeopleSource) -> Self {
        self.plan.people = people;
        self
    }

    /// The catalog of a validated server config: its `model_configs` and `model_providers`,
    /// its `tool_configs`, as tool providers its `mcp_providers` and inline `tools`, and its
    /// `samplers.managed_assets_dir`.
    pub fn from_config(config: &Config) -> Self {
        let people = crate::generate::PeopleSource::new(config.samplers.managed_assets_dir.clone());
        let mut catalog = Self::new(
            config.model_configs.clone(),
            config
                .model_providers
                .iter()
                .map(|p| p.name.clone())
                .collect(),
            config.tool_configs.clone(),
            config
                .mcp_providers
                .iter()
                .map(|p| p.name.clone())
                .chain(config.tools.iter().map(|t| t.name.clone()))
                .collect(),
        )
        .with_people(people);
        catalog.plan.validators = std::sync::Arc::new(crate::generate::ValidatorEnv::new(
            config.validators.clone(),
        ));
        catalog.anthropic_providers = config
            .model_providers
            .iter()
            .filter(|p| p.provider_type == crate::config::ProviderType::Anthropic)
            .map(|p| p.name.clone())
            .collect();
        catalog
    }

    /// Whether `provider` is one of the server's Anthropic model providers.
    pub fn is_anthropic_provider(&self, provider: &str) -> bool {
        self.anthropic_providers.iter().any(|p| p == provider)
    }

    /// The server-defined aliases columns may reference.
    pub fn plan_context(&self) -> &PlanContext {
        &self.plan
    }

    /// Whether the server defines model alias `alias` (a job may define others).
    pub fn is_server_model_alias(&self, alias: &str) -> bool {
        self.models.iter().any(|m| m.alias == alias)
    }

    /// The model and tool configs a job sees: the server's, overridden by alias by the job's.
    /// A job's model configs that its LLM columns use (`used` aliases) and its tool configs
    /// must name providers the server defines (providers never come with a job: they hold
    /// commands, URLs and keys); one no column uses is never called, so its provider is not
    /// checked (DataDesigner's builder writes its default model configs, for providers a
    /// server may not have, into every config). Model configs may not set request fields the service
    /// computes through `extra_body`, and may redefine a server tool alias only to narrow it
    /// (a subset of its providers and of its `allow_tools`). The job's own model configs get
    /// a [`JobLimit`] in `scope`, so their `max_parallel_requests` caps this job only.
    #[expect(clippy::type_complexity, reason = "a pair of alias maps")]
    pub(super) fn resolve(
        &self,
        dataset: &DatasetConfig,
        used: &HashSet<String>,
        scope: &str,
    ) -> Result<(HashMap<String, ModelConfig>, HashMap<String, ToolConfig>), Vec<ConfigIssue>> {
        let mut issues = Vec::new();
        for (i, m) in dataset.model_configs.iter().enumerate() {
            if used.contains(&m.alias) && !self.model_providers.contains(&m.provider) {
                let known = if self.model_providers.is_empty() {
                    "none".to_owned()
                } else {
                    self.model_providers.join(", ")
                };
                issues.push(ConfigIssue {
                    code: codes::INVALID_MODEL_CONFIG,
                    column: None,
                    field: Some(format!("model_configs[{i}].provider")),
                    message: format!(
                        "model config '{}': provider '{}' is not defined on the server (defined: {known})",
                        m.alias, m.provider
                    ),
                });
            }
            if m.prices.is_some() {
                issues.push(ConfigIssue {
                    code: codes::INVALID_MODEL_CONFIG,
                    column: None,
                    field: Some(format!("model_configs[{i}].prices")),
                    message: format!(
                        "model config '{}': prices are set by the server's model configs, not \
                         by a job (a job's model on a priced server model gets its prices)",
                        m.alias
                    ),
                });
            }
            for key in m
                .inference_parameters
                .extra_body
                .as_ref()
                .map(reserved_extra_body_fields)
                .unwrap_or_default()
            {
                issues.push(ConfigIssue {
                    code: codes::RESERVED_EXTRA_BODY_FIELD,
                    column: None,
                    field: Some(format!(
                        "model_configs[{i}].inference_parameters.extra_body.{key}"
                    )),
                    message: format!(
                        "model config '{}': extra_body may not set '{key}': the service computes it",
                        m.alias
                    ),
                });
            }
        }
        for (i, t) in dataset.tool_configs.iter().enumerate() {
            for (j, p) in t.providers.iter().enumerate() {
                if !self.tool_providers.contains(p) {
                    let known = if self.tool_providers.is_empty() {
                        "none".to_owned()
                    } else {
                        self.tool_providers.join(", ")
                    };
                    issues.push(ConfigIssue {
                        code: codes::INVALID_TOOL_CONFIG,
                        column: None,
                        field: Some(format!("tool_configs[{i}].providers[{j}]")),
                        message: format!(
                            "tool config '{}': provider '{p}' is not defined on the server (defined: {known})",
                            t.tool_alias
                        ),
                    });
                }
            }
            if let Some(own) = self
                .tool_configs
                .iter()
                .find(|o| o.tool_alias == t.tool_alias)
            {
                narrowing_issues(i, own, t, &mut issues);
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        let mut tools: HashMap<String, ToolConfig> = self
            .tool_configs
            .iter()
            .map(|t| (t.tool_alias.clone(), t.clone()))
            .collect();
        for t in &dataset.tool_configs {
            tools.insert(t.tool_alias.clone(), t.clone());
        }
        let mut out: HashMap<String, ModelConfig> = self
            .models
            .iter()
            .map(|m| (m.alias.clone(), m.clone()))
            .collect();
        // The job's cap per (provider, model): the least of its own aliases', as DataDesigner
        // shares one limit among aliases of a model.
        let mut caps: HashMap<(&str, &str), u32> = HashMap::new();
        for m in &dataset.model_configs {
            let cap = m.inference_parameters.max_parallel_requests;
            caps.entry((&m.provider, &m.model))
                .and_modify(|c| *c = (*c).min(cap))
                .or_insert(cap);
        }
        for m in &dataset.model_configs {
            let mut m = m.clone();
            // What the job's own config of a server model costs is what the server's does.
            m.prices = self
                .models
                .iter()
                .find(|s| s.provider == m.provider && s.model == m.model && s.prices.is_some())
                .and_then(|s| s.prices);
            m.job_limit = Some(JobLimit {
                scope: scope.to_owned(),
                cap: caps[&(m.provider.as_str(), m.model.as_str())],
            });
            out.insert(m.alias.clone(), m);
        }
        Ok((out, tools))
    }
}

/// Checks the caller's per-key allow lists against every model and tool alias the job's LLM
/// columns use (`403 alias_not_allowed`), as the job really uses them.
///
/// An allow list names server aliases. A key with `allow_models` may use an alias in its list
/// only as the server defines it: the job may re-tune it (temperature, `max_tokens`, its own
/// `max_parallel_requests`...) but its effective definition must call the same provider and
/// model, and may only narrow the model's `mcp_servers`. A key with `allow_tools` may use the
/// server tool aliases in its list, which a job can narrow but never widen (checked for every
/// key by [`Catalog::resolve`]). Aliases a job defines itself are for keys without a list.
pub(super) fn check_caller(compiled: &CompiledJob, caller: &Caller) -> Result<(), ApiError> {
    let server = &compiled.catalog;
    for (column, model, tool) in compiled.plan.llm_aliases() {
        if !caller.may_use_model(&model) {
            return Err(ApiError::Forbidden(format!(
                "column '{column}': this API key may not use model alias '{model}'"
            )));
        }
        if caller.restricts_models()
            && let Some(effective) = compiled.models.get(&model)
        {
            let Some(own) = server.models.iter().find(|m| m.alias == model) else {
                return Err(ApiError::Forbidden(format!(
                    "column '{column}': this API key may use model alias '{model}' only as the server defines it, and the server defines no such alias"
                )));
            };
            if let Err(why) = within_server_model(own, effective) {
                return Err(ApiError::Forbidden(format!(
                    "column '{column}': this API key may use model alias '{model}' only as the server defines it: {why}"
                )));
            }
        }
        let Some(tool) = tool else { continue };
        if !caller.may_use_tools(&tool) {
            return Err(ApiError::Forbidden(format!(
                "column '{column}': this API key may not use tool alias '{tool}'"
            )));
        }
        if caller.restricts_tools() && !server.tool_configs.iter().any(|t| t.tool_alias == tool) {
            return Err(ApiError::Forbidden(format!(
                "column '{column}': this API key may use tool alias '{tool}' only as the server defines it, and the server defines no such alias"
            )));
        }
    }
    Ok(())
}

/// Whether a job's definition of a server model alias calls what the server's does.
fn within_server_model(own: &ModelConfig, job: &ModelConfig) -> Result<(), String> {
    if job.provider != own.provider || job.model != own.model {
        return Err(format!(
            "the job's model_configs point it at provider '{}', model '{}' instead of provider '{}', model '{}'",
            job.provider, job.model, own.provider, own.model
        ));
    }
    if let Some(allowed) = &own.mcp_servers {
        let wider: Vec<&str> = match &job.mcp_servers {
            None => vec!["(all)"],
            Some(j) => j
                .iter()
                .filter(|p| !allowed.contains(p))
                .map(String::as_str)
                .collect(),
        };
        if !wider.is_empty() {
            return Err(format!(
                "its mcp_servers may only narrow the server's [{}], not add {}",
                allowed.join(", "),
                wider.join(", ")
            ));
        }
    }
    Ok(())
}

/// What a job's tool config `t` (at `tool_configs[i]`) adds to the server's `own` definition
/// of the same alias: providers the server's does not route to, tools its `allow_tools` hides.
fn narrowing_issues(i: usize, own: &ToolConfig, t: &ToolConfig, issues: &mut Vec<ConfigIssue>) {
    let alias = &t.tool_alias;
    let issue = |field: String, message: String| ConfigIssue {
        code: codes::INVALID_TOOL_CONFIG,
        column: None,
        field: Some(field),
        message: format!(
            "tool config '{alias}' redefines the server's, which a job may narrow but not widen: {message}"
        ),
    };
    for (j, p) in t.providers.iter().enumerate() {
        if !own.providers.contains(p) {
            issues.push(issue(
                format!("tool_configs[{i}].providers[{j}]"),
                format!(
                    "provider '{p}' is not among the server's [{}]",
                    own.providers.join(", ")
                ),
            ));
        }
    }
    let Some(allowed) = &own.allow_tools else {
        return;
    };
    match &t.allow_tools {
        None => issues.push(issue(
            format!("tool_configs[{i}].allow_tools"),
            format!(
                "the server allows only [{}]; list those you need (or fewer) in allow_tools",
                allowed.join(", ")
            ),
        )),
        Some(mine) => {
            for (j, name) in mine.iter().enumerate() {
                if !allowed.contains(name) {
                    issues.push(issue(
                        format!("tool_configs[{i}].allow_tools[{j}]"),
                        format!(
                            "tool '{name}' is not among the server's allowed [{}]",
                            allowed.join(", ")
                        ),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn model(v: Value) -> ModelConfig {
        serde_json::from_value(v).unwrap()
    }

    fn tool(v: Value) -> ToolConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_restricted_alias_keeps_its_model_and_may_only_narrow_mcp_servers() {
        let own =
            model(json!({"alias": "a", "model": "m", "provider": "p", "mcp_servers": ["x", "y"]}));
        let job = |v: Value| {
            let mut base = json!({"alias": "a", "model": "m", "provider": "p",
                "inference_parameters": {"temperature": 0.1}});
            base.as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
            model(base)
        };
        assert!(within_server_model(&own, &job(json!({"mcp_servers": ["x"]}))).is_ok());
        assert!(within_server_model(&own, &job(json!({"mcp_servers": []}))).is_ok());
        let e = within_server_model(&own, &job(json!({}))).unwrap_err();
        assert!(e.contains("(all)"), "{e}");
        let e = within_server_model(&own, &job(json!({"mcp_servers": ["x", "z"]}))).unwrap_err();
        assert!(e.contains("not add z"), "{e}");
        let e = within_server_model(&own, &job(json!({"model": "other", "mcp_servers": []})))
            .unwrap_err();
        assert!(e.contains("model 'other'"), "{e}");
        let e = within_server_model(&own, &job(json!({"provider": "q", "mcp_servers": []})))
            .unwrap_err();
        assert!(e.contains("provider 'q'"), "{e}");
    }

    #[test]
    fn a_job_tool_config_may_narrow_but_not_widen_the_servers() {
        let own =
            tool(json!({"tool_alias": "t", "providers": ["a", "b"], "allow_tools": ["x", "y"]}));
        let fields = |v: Value| {
            let mut issues = Vec::new();
            narrowing_issues(0, &own, &tool(v), &mut issues);
            issues
                .into_iter()
                .map(|i| i.field.unwrap())
                .collect::<Vec<_>>()
        };
        assert!(
            fields(
                json!({"tool_alias": "t", "providers": ["b"], "allow_tools": ["y"],
                "max_tool_call_turns": 9})
            )
            .is_empty()
        );
        assert_eq!(
            fields(json!({"tool_alias": "t", "providers": ["a", "c"]})),
            [
                "tool_configs[0].providers[1]",
                "tool_configs[0].allow_tools"
            ]
        );
        assert_eq!(
            fields(json!({"tool_alias": "t", "providers": ["a"], "allow_tools": ["x", "z"]})),
            ["tool_configs[0].allow_tools[1]"]
        );
        let open = tool(json!({"tool_alias": "t", "providers": ["a"]}));
        let mut issues = Vec::new();
        narrowing_issues(
            0,
            &open,
            &tool(json!({"tool_alias": "t", "providers": ["a"]})),
            &mut issues,
        );
        assert!(
            issues.is_empty(),
            "no server allow list: any of the provider's tools"
        );
    }
}
