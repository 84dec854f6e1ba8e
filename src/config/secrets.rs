//! Every secret the config holds, as the log redactor needs them (see `telemetry`).

use secrecy::{ExposeSecret, SecretString};

use super::Config;
use super::providers::resolve_api_key;

impl Config {
    /// The values of every secret in the config: keys, tokens, passwords, header values and
    /// child environments. A value that names an environment variable (DataDesigner's rule for
    /// `api_key` and OAuth credentials) counts twice: as configured and as resolved. Empty and
    /// very short values are left out: redacting them would garble every log line.
    pub fn secret_values(&self) -> Vec<String> {
        let env = |k: &str| std::env::var(k).ok();
        // As configured; `resolvable` ones may name an environment variable.
        let mut configured: Vec<&SecretString> = Vec::new();
        let mut resolvable: Vec<&SecretString> = Vec::new();
        for p in &self.model_providers {
            resolvable.extend(&p.api_key);
        }
        for p in &self.mcp_providers {
            resolvable.extend(&p.api_key);
            configured.extend(p.headers.values());
            configured.extend(p.env.values());
            if let Some(o) = &p.oauth {
                resolvable.extend(&o.client_secret);
                resolvable.extend(&o.private_key);
            }
        }
        for t in &self.tools {
            configured.extend(t.headers.values());
        }
        for k in &self.auth.api_keys {
            configured.extend(&k.key);
        }
        configured.extend(&self.server.metrics_token);
        configured.extend(&self.database.url);
        configured.extend(&self.datasets.hf.token);
        configured.extend(self.otel.headers.values());

        let mut out: Vec<String> = configured
            .iter()
            .chain(&resolvable)
            .map(|s| s.expose_secret().to_owned())
            .collect();
        out.extend(
            resolvable
                .iter()
                .map(|s| resolve_api_key(s, env).expose_secret().to_owned()),
        );
        let env_names = self.auth.api_keys.iter().map(|k| k.key_env.as_deref());
        out.extend(
            env_names
                .chain([self.datasets.hf.token_env.as_deref()])
                .flatten()
                .filter_map(env),
        );
        // The collector's headers from the environment (an API key, typically), each value
        // as the exporter reads them: `key=value` pairs separated by commas.
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(headers) = env(var) {
                out.extend(
                    headers
                        .split(',')
                        .filter_map(|kv| kv.split_once('='))
                        .map(|(_, v)| v.trim().to_owned()),
                );
            }
        }
        // A database URL's password also appears on its own (drivers' errors quote it).
        if let Some(url) = &self.database.url
            && let Some((_, rest)) = url.expose_secret().split_once("://")
            && let Some((userinfo, _)) = rest.split_once('@')
            && let Some((_, password)) = userinfo.split_once(':')
        {
            out.push(password.to_owned());
        }
        out.retain(|s| s.len() >= MIN_SECRET_LEN);
        out.sort();
        out.dedup();
        out
    }
}

/// Shortest value treated as a secret.
pub const MIN_SECRET_LEN: usize = 6;
