//! API keys: who is calling, and what they may see and use.
//!
//! Keys come from the server config (`auth.api_keys`, each read from an environment variable
//! or given as a `${env:VAR}`-substituted value). Only their SHA-256 digests are kept after
//! start-up, and a presented key is compared with every digest in constant time, so neither the
//! key nor the position of a match leaks through timing. Authentication is on when at least
//! one key is configured; then every `/v1` route needs `Authorization: Bearer <key>`, and each
//! job belongs to the key (by name) that created it: another key gets `404` for the job, its
//! records, traces and events, as if it did not exist.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::AuthConfig;
use crate::error::ApiError;

/// One configured key.
#[derive(Debug)]
struct Key {
    name: String,
    digest: [u8; 32],
    allow_models: Option<Vec<String>>,
    allow_tools: Option<Vec<String>>,
}

/// The configured keys, by digest.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    keys: Arc<Vec<Key>>,
}

/// Why the keys could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("config key `auth.api_keys[{index}]`: {message}")]
pub struct KeyError {
    index: usize,
    message: String,
}

impl ApiKeys {
    /// Reads every key's value (`key_env` from the environment, else `key`).
    pub fn load(cfg: &AuthConfig, env: impl Fn(&str) -> Option<String>) -> Result<Self, KeyError> {
        let mut keys = Vec::with_capacity(cfg.api_keys.len());
        for (index, k) in cfg.api_keys.iter().enumerate() {
            let value = match (&k.key_env, &k.key) {
                (Some(var), _) => env(var).ok_or_else(|| KeyError {
                    index,
                    message: format!("environment variable {var} (key_env) is not set"),
                })?,
                (None, Some(v)) => v.expose_secret().to_owned(),
                (None, None) => {
                    return Err(KeyError {
                        index,
                        message: "set `key_env` or `key`".into(),
                    });
                }
            };
            if value.len() < 16 {
                return Err(KeyError {
                    index,
                    message: "the key must be at least 16 characters".into(),
                });
            }
            keys.push(Key {
                name: k.name.clone(),
                digest: Sha256::digest(value.as_bytes()).into(),
                allow_models: k.allow_models.clone(),
                allow_tools: k.allow_tools.clone(),
            });
        }
        Ok(Self {
            keys: Arc::new(keys),
        })
    }

    /// Whether authentication is on.
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The caller a presented key belongs to. Every digest is compared, match or not.
    fn identify(&self, presented: &str) -> Option<Caller> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for k in self.keys.iter() {
            if bool::from(k.digest.ct_eq(&digest)) {
                found = Some(k);
            }
        }
        found.map(|k| Caller {
            name: Some(k.name.clone()),
            allow_models: k.allow_models.clone(),
            allow_tools: k.allow_tools.clone(),
        })
    }
}

/// Who is calling. With authentication off, everyone is the same anonymous caller who owns
/// every job.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    name: Option<String>,
    allow_models: Option<Vec<String>>,
    allow_tools: Option<Vec<String>>,
}

impl Caller {
    /// The owner name jobs are filtered by (`None`: auth is off, every job is visible).
    pub fn owner(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether this key may use model alias `alias` (no allow list: any).
    pub fn may_use_model(&self, alias: &str) -> bool {
        self.allow_models
            .as_ref()
            .is_none_or(|a| a.iter().any(|m| m == alias))
    }

    /// Whether this key has a model allow list. Such a key may only use server model aliases,
    /// as the server defines them (see `jobs::catalog::check_caller`).
    pub fn restricts_models(&self) -> bool {
        self.allow_models.is_some()
    }

    /// Whether this key has a tool allow list. Such a key may only use server tool aliases.
    pub fn restricts_tools(&self) -> bool {
        self.allow_tools.is_some()
    }

    /// Whether this key may use tool alias `alias` (no allow list: any).
    pub fn may_use_tools(&self, alias: &str) -> bool {
        self.allow_tools
            .as_ref()
            .is_none_or(|a| a.iter().any(|t| t == alias))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_default())
    }
}

/// Middleware: on `/v1` routes and `/mcp`, with keys configured, resolves the bearer key to a
/// [`Caller`] or answers `401`. Health, metrics and docs stay open. The MCP tools find the
/// caller in the request's extensions, which rmcp hands them with the request's parts.
pub async fn authenticate(State(keys): State<ApiKeys>, mut req: Request, next: Next) -> Response {
    if !keys.enabled() || !is_guarded(req.uri().path()) {
        return next.run(req).await;
    }
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(header) = header else {
        return ApiError::Unauthorized("missing `Authorization: Bearer <api key>` header".into())
            .into_response();
    };
    let token = bearer_token(header);
    let Some(caller) = token.and_then(|t| keys.identify(t)) else {
        return ApiError::Unauthorized("the API key is not valid".into()).into_response();
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// The paths behind the keys: the REST API, the NeMo Platform door and the MCP twin. The
/// platform's auth discovery stays open: a client asks it before it has a key to send.
fn is_guarded(path: &str) -> bool {
    path.starts_with("/v1/")
        || (path.starts_with("/apis/") && !path.starts_with("/apis/auth/"))
        || path == "/mcp"
        || path.starts_with("/mcp/")
}

/// The credentials of a `Bearer` authorization header. The scheme is matched without regard
/// to case (RFC 9110 §11.1), and any run of spaces or tabs may separate it from the token.
/// The token of an `Authorization: Bearer <token>` value; the scheme in any case (RFC 9110).
pub(crate) fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(rest.trim_matches([' ', '\t'])).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(yaml: &str) -> AuthConfig {
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn keys_resolve_by_digest_and_env() {
        let keys = ApiKeys::load(
            &cfg("api_keys: [{name: a, key_env: KEY_A}, {name: b, key: bbbbbbbbbbbbbbbbbbbb, allow_models: [m]}]"),
            |v| (v == "KEY_A").then(|| "aaaaaaaaaaaaaaaaaaaa".to_owned()),
        )
        .unwrap();
        assert!(keys.enabled());
        assert_eq!(
            keys.identify("aaaaaaaaaaaaaaaaaaaa").unwrap().owner(),
            Some("a")
        );
        let b = keys.identify("bbbbbbbbbbbbbbbbbbbb").unwrap();
        assert_eq!(b.owner(), Some("b"));
        assert!(b.may_use_model("m") && !b.may_use_model("other"));
        assert!(b.may_use_tools("anything"));
        assert!(keys.identify("aaaaaaaaaaaaaaaaaaab").is_none());
        assert!(keys.identify("").is_none());
        assert!(
            !format!("{keys:?}").contains("aaaa"),
            "only digests are kept"
        );
    }

    #[test]
    fn the_api_and_mcp_are_guarded() {
        for p in [
            "/v1/jobs",
            "/mcp",
            "/mcp/",
            "/apis/data-designer/v2/workspaces/default/preview",
        ] {
            assert!(is_guarded(p), "{p}");
        }
        for p in [
            "/healthz",
            "/metrics",
            "/ui",
            "/docs",
            "/mcpx",
            "/v1",
            "/apis/auth/discovery",
        ] {
            assert!(!is_guarded(p), "{p}");
        }
    }

    #[test]
    fn the_scheme_is_case_insensitive() {
        for h in [
            "Bearer abc",
            "bearer abc",
            "BEARER abc",
            "bEaReR   abc ",
            "Bearer\tabc",
        ] {
            assert_eq!(bearer_token(h), Some("abc"), "{h:?}");
        }
        for h in [
            "Basic abc",
            "Bearerabc",
            "Bearer",
            "Bearer   ",
            "",
            "Token abc",
        ] {
            assert_eq!(bearer_token(h), None, "{h:?}");
        }
    }

    #[test]
    fn missing_env_and_short_keys_are_config_errors() {
        let e = ApiKeys::load(&cfg("api_keys: [{name: a, key_env: NOPE}]"), |_| None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config key `auth.api_keys[0]`: environment variable NOPE (key_env) is not set"
        );
        let e = ApiKeys::load(&cfg("api_keys: [{name: a, key: short}]"), |_| None).unwrap_err();
        assert!(e.to_string().contains("at least 16 characters"));
        assert!(!ApiKeys::load(&cfg("{}"), |_| None).unwrap().enabled());
    }
}
