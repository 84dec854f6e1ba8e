//! Resolving a tool config for one generation: each tool routed to the provider (MCP server
//! or inline tool) that lists it, in the order of the config's `providers`, checked against
//! what the model may use; the errors say which tool config and what is wrong.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{InlineTool, InlineToolError, Route, Source, ToolHub, Toolset, ToolsetError};
use crate::config::InlineToolConfig;
use crate::domain::models::{ModelConfig, ToolConfig, duration_from_secs};
use crate::llm::ToolSpec;
use crate::mcp::{CallScope, McpPool};

impl ToolHub {
    /// A hub with no MCP provider and no inline tool: a server that configures none.
    pub fn empty() -> Self {
        let max_result_chars = crate::config::LimitsConfig::default().max_tool_result_chars;
        let pool = McpPool::new(&[]).expect("a pool without providers builds");
        Self::new(pool, &[], max_result_chars).expect("a hub without inline tools builds")
    }

    /// A hub over the shared pool and the server's inline tools. Fails when an inline tool's
    /// HTTP client cannot be built.
    pub fn new(
        pool: McpPool,
        inline: &[InlineToolConfig],
        max_result_chars: usize,
    ) -> Result<Self, InlineToolError> {
        crate::install_crypto_provider();
        let inline = inline
            .iter()
            .map(|t| Ok((t.name.clone(), Arc::new(InlineTool::new(t.clone())?))))
            .collect::<Result<_, InlineToolError>>()?;
        Ok(Self {
            pool,
            inline: Arc::new(inline),
            max_result_chars,
        })
    }

    /// The MCP pool (status, shutdown, scope release).
    pub fn pool(&self) -> &McpPool {
        &self.pool
    }

    /// The providers `model` may use out of `cfg.providers`: LlamaFarm's `mcp_servers` access
    /// list (absent = all, `[]` = none) filters MCP providers; inline tools are not servers
    /// and are never filtered.
    fn providers_for<'c>(&self, cfg: &'c ToolConfig, model: Option<&ModelConfig>) -> Vec<&'c str> {
        cfg.providers
            .iter()
            .map(String::as_str)
            .filter(|p| {
                self.inline.contains_key(*p)
                    || model
                        .and_then(|m| m.mcp_servers.as_ref())
                        .is_none_or(|allowed| allowed.iter().any(|a| a == p))
            })
            .collect()
    }

    /// Resolves `cfg` for `model` (`None`: no `mcp_servers` restriction): lists each
    /// provider's tools (cached), checks duplicates and the allow list, and returns what the
    /// model is offered and where each call goes.
    pub async fn toolset(
        &self,
        cfg: &ToolConfig,
        model: Option<&ModelConfig>,
        scope: Option<&CallScope>,
    ) -> Result<Toolset, ToolsetError> {
        let providers = self.providers_for(cfg, model);
        if let Some(model) = model
            && providers.is_empty()
            && !cfg.providers.is_empty()
        {
            return Err(ToolsetError::ModelNotAllowed {
                model: model.alias.clone(),
                tool_alias: cfg.tool_alias.clone(),
                allowed: model.mcp_servers.clone().unwrap_or_default(),
            });
        }
        let mut sources: Vec<(&str, Source)> = Vec::with_capacity(providers.len());
        for p in providers {
            if let Some(t) = self.inline.get(p) {
                sources.push((p, Source::Inline(t.clone())));
                continue;
            }
            let list = self.pool.tools(p, scope).await.map_err(|error| {
                ToolsetError::ProviderUnavailable {
                    tool_alias: cfg.tool_alias.clone(),
                    error,
                }
            })?;
            sources.push((p, Source::Mcp(list)));
        }

        // Duplicates are checked before the allow list, as DataDesigner does.
        let mut owners: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (p, s) in &sources {
            for name in s.names() {
                owners.entry(name.to_owned()).or_default().push(p);
            }
        }
        let dups: Vec<(String, Vec<String>)> = owners
            .iter()
            .filter(|(_, ps)| ps.len() > 1)
            .map(|(n, ps)| (n.clone(), ps.iter().map(|p| (*p).to_owned()).collect()))
            .collect();
        if !dups.is_empty() {
            return Err(ToolsetError::DuplicateToolName {
                tool_alias: cfg.tool_alias.clone(),
                names: dups,
            });
        }
        if let Some(allow) = &cfg.allow_tools {
            let missing: Vec<String> = allow
                .iter()
                .filter(|a| !owners.contains_key(a.as_str()))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(ToolsetError::AllowedToolNotFound {
                    tool_alias: cfg.tool_alias.clone(),
                    missing,
                    providers: sources.iter().map(|(p, _)| (*p).to_owned()).collect(),
                });
            }
        }

        let allowed = |name: &str| {
            cfg.allow_tools
                .as_ref()
                .is_none_or(|a| a.iter().any(|t| t == name))
        };
        let hidden: Vec<String> = owners.into_keys().filter(|n| !allowed(n)).collect();
        let mut specs = Vec::new();
        let mut routes = HashMap::new();
        for (p, s) in sources {
            match s {
                Source::Inline(t) => {
                    if allowed(&t.cfg.name) {
                        specs.push(t.spec());
                        routes.insert(t.cfg.name.clone(), Route::Inline(t));
                    }
                }
                Source::Mcp(list) => {
                    for (i, tool) in list.tools.iter().enumerate() {
                        if allowed(&tool.name) {
                            // Shares the list's schema and its pre-written JSON.
                            specs.push(ToolSpec {
                                name: tool.name.clone(),
                                description: tool.description.clone(),
                                parameters: tool.input_schema.clone(),
                                openai: tool.openai.clone(),
                            });
                            routes.insert(
                                tool.name.clone(),
                                Route::Mcp {
                                    provider: p.to_owned(),
                                    list: list.clone(),
                                    index: i,
                                },
                            );
                        }
                    }
                }
            }
        }
        Ok(Toolset {
            alias: cfg.tool_alias.clone(),
            offered: specs.iter().map(|s| s.name.clone()).collect(),
            specs,
            routes,
            hidden,
            // Validation bounds `timeout_sec`; an unusable value means the default, not a panic.
            timeout: cfg.timeout_sec.and_then(duration_from_secs),
            max_turns: cfg.max_tool_call_turns,
            coerce: cfg.coerce_arguments,
            max_result_chars: self.max_result_chars,
            pool: self.pool.clone(),
        })
    }
}
