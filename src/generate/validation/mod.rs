//! Validation columns: the compiled validator of each, the server-side environment they run
//! in ([`ValidatorEnv`]: the ruff executable, the remote endpoint allow list, one HTTP
//! client), and the value DataDesigner writes per record.
//!
//! Records are generated one at a time, so a record's validation is a batch of one: the
//! per-record output is what DataDesigner writes for that record, and `batch_size` changes
//! nothing. Module map: `python` (ruff, DataDesigner's pylint-style score), `statements`
//! (counting Python statements for that score), `sql` (parse errors per dialect), `remote`
//! (POST with timeout and retries).

mod python;
mod remote;
pub(crate) mod sql;
mod statements;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::ValidatorsConfig;
use crate::domain::dataset::{CodeLang, ValidationColumn, Validator};
use crate::domain::record::RecordErrorCode;

use super::columns::StepError;

/// What validation columns may use on this server: built once from the `validators` config
/// section and shared by every plan. Checks that do I/O (is ruff runnable?) run once, on first
/// need, and are cached here, not in a global.
#[derive(Debug, Default)]
pub struct ValidatorEnv {
    config: ValidatorsConfig,
    /// `Ok(version)` or why ruff cannot be run; filled on the first Python code validator.
    ruff: OnceLock<Result<String, String>>,
    /// The client for remote validators: no redirects (an allowed endpoint must not bounce a
    /// request elsewhere) and no proxy from the environment.
    client: OnceLock<reqwest::Client>,
}

impl ValidatorEnv {
    /// The environment of a server config's `validators` section.
    pub fn new(config: ValidatorsConfig) -> Self {
        Self {
            config,
            ruff: OnceLock::new(),
            client: OnceLock::new(),
        }
    }

    /// `Ok` when the configured ruff runs (`ruff --version`), else why not. Checked once per
    /// process: a failed check stays failed until restart, so installing ruff needs a restart.
    /// It blocks for the few milliseconds one `ruff --version` takes, the first time only;
    /// compilation runs on the `CpuGate`, so that is not a runtime thread.
    pub(crate) fn ruff_ready(&self) -> Result<&str, &str> {
        let result = self.ruff.get_or_init(|| {
            let path = &self.config.ruff_path;
            match std::process::Command::new(path)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .output()
            {
                Ok(out) if out.status.success() => {
                    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
                }
                Ok(out) => Err(format!(
                    "'{path} --version' exited with {}",
                    out.status
                        .code()
                        .map_or("a signal".into(), |c| c.to_string())
                )),
                Err(e) => Err(format!("'{path}' cannot be run: {e}")),
            }
        });
        result.as_deref().map_err(String::as_str)
    }

    /// Whether a job may name `url` as a remote validator endpoint.
    pub(crate) fn endpoint_allowed(&self, url: &str) -> bool {
        let Ok(url) = reqwest::Url::parse(url) else {
            return false;
        };
        self.config.remote_endpoints.iter().any(|entry| {
            let Ok(allowed) = reqwest::Url::parse(entry) else {
                return false;
            };
            if !entry.ends_with('/') {
                return allowed == url;
            }
            // A prefix: same origin, path under the entry's path, and no credentials.
            url.scheme() == allowed.scheme()
                && url.host() == allowed.host()
                && url.port_or_known_default() == allowed.port_or_known_default()
                && url.username().is_empty()
                && url.password().is_none()
                && url.path().starts_with(allowed.path())
                && !url.path_segments().into_iter().flatten().any(escapes)
        })
    }

    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(|| {
            crate::install_crypto_provider();
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .build()
                .unwrap_or_default()
        })
    }

    fn code_timeout(&self) -> Duration {
        Duration::from_secs(self.config.code_timeout_sec)
    }

    fn ruff_path(&self) -> &str {
        &self.config.ruff_path
    }
}

/// Whether a path segment may climb out of an allowed prefix once the endpoint's server decodes
/// it: an encoded separator (`..%2fadmin`, `%5c`) or an encoded dot segment (`%2e%2e`). The URL
/// parser resolves literal `..` itself; these it leaves as they are, and servers that decode
/// before routing would serve `/ok/..%2fevil` as `/evil`.
fn escapes(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    lower.contains("%2f")
        || lower.contains("%5c")
        || matches!(lower.replace("%2e", ".").as_str(), "." | "..")
}

/// A compiled validation column.
#[derive(Debug)]
pub(crate) struct ValidationStep {
    /// `(name, slot)` of each target column, in config order.
    pub(crate) targets: Vec<(String, usize)>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// Each target is checked on its own.
    Code(Code),
    /// All targets go in one request.
    Remote(Box<remote::RemoteStep>),
}

#[derive(Debug)]
enum Code {
    Python(Arc<ValidatorEnv>),
    Sql(crate::domain::dataset::SqlDialect),
}

/// Why a validator column cannot run on this server (a config issue at compile).
pub(crate) enum Unservable {
    /// Ruff cannot be run.
    Ruff(String),
    /// The endpoint is not on the allow list.
    Endpoint,
}

impl ValidationStep {
    /// Compiles `column` against the server's environment; `targets` are resolved already.
    pub(crate) fn new(
        column: &ValidationColumn,
        targets: Vec<(String, usize)>,
        env: &Arc<ValidatorEnv>,
    ) -> Result<Self, Unservable> {
        let kind = match &column.validator {
            Validator::Code(CodeLang::Python) => {
                env.ruff_ready()
                    .map_err(|e| Unservable::Ruff(e.to_owned()))?;
                Kind::Code(Code::Python(Arc::clone(env)))
            }
            Validator::Code(CodeLang::Sql(dialect)) => Kind::Code(Code::Sql(*dialect)),
            Validator::Remote(params) => {
                if !env.endpoint_allowed(&params.endpoint_url) {
                    return Err(Unservable::Endpoint);
                }
                Kind::Remote(Box::new(remote::RemoteStep::new(
                    params.clone(),
                    Arc::clone(env),
                )))
            }
        };
        Ok(Self { targets, kind })
    }

    /// Validates one record's target values and returns the column's value, shaped as
    /// DataDesigner writes it: a code validator's output object for one target, or an object
    /// keyed by target name for several (DataDesigner validates code columns one by one); a
    /// remote validator's output object for all targets together. A remote validator's
    /// requests and backoff run through `waits`.
    pub(crate) async fn run(
        &self,
        values: Vec<Value>,
        cpu: &crate::cpu::CpuGate,
        waits: &dyn crate::generate::Waits,
    ) -> Result<Value, StepError> {
        match &self.kind {
            Kind::Remote(step) => {
                let mut record = Map::new();
                for ((name, _), v) in self.targets.iter().zip(values) {
                    record.insert(name.clone(), v);
                }
                // Requests and their backoff wait: without the record's worker slot.
                crate::generate::waiting(waits, step.validate(record)).await
            }
            Kind::Code(code_kind) => {
                let mut outputs = Vec::with_capacity(values.len());
                for ((name, _), v) in self.targets.iter().zip(values) {
                    let Value::String(code) = v else {
                        let msg = format!(
                            "target column '{name}' holds a JSON {}, not code text",
                            crate::domain::dataset::json_kind(&v)
                        );
                        return Err(StepError::new(RecordErrorCode::ValidatorError, msg));
                    };
                    let out = match code_kind {
                        Code::Python(env) => python::validate(env, &code).await?,
                        Code::Sql(dialect) => cpu.run(|| sql::validate(*dialect, &code)).await,
                    };
                    outputs.push((name.clone(), out));
                }
                if outputs.len() == 1 {
                    return Ok(outputs.pop().map(|(_, v)| v).unwrap_or(Value::Null));
                }
                Ok(Value::Object(outputs.into_iter().collect()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(entries: &[&str]) -> ValidatorEnv {
        ValidatorEnv::new(ValidatorsConfig {
            remote_endpoints: entries.iter().map(|e| (*e).to_owned()).collect(),
            ..ValidatorsConfig::default()
        })
    }

    #[test]
    fn nothing_is_allowed_by_default() {
        assert!(!env(&[]).endpoint_allowed("http://127.0.0.1:8080/validate"));
    }

    #[test]
    fn exact_entries_allow_that_url_only() {
        let e = env(&["https://checks.example/v1/validate"]);
        assert!(e.endpoint_allowed("https://checks.example/v1/validate"));
        // The URL is compared parsed: the default port is the same URL.
        assert!(e.endpoint_allowed("https://checks.example:443/v1/validate"));
        for other in [
            "https://checks.example/v1/validate/x",
            "https://checks.example/v1/validate?x=1",
            "http://checks.example/v1/validate",
            "https://checks.example.evil.net/v1/validate",
            "not a url",
        ] {
            assert!(!e.endpoint_allowed(other), "{other}");
        }
    }

    #[test]
    fn prefix_entries_stay_on_their_origin_and_path() {
        let e = env(&["http://10.0.0.5:9000/validators/"]);
        assert!(e.endpoint_allowed("http://10.0.0.5:9000/validators/sql"));
        assert!(e.endpoint_allowed("http://10.0.0.5:9000/validators/a/b?q=1"));
        for other in [
            "http://10.0.0.5:9000/validators/..%2fadmin",
            "http://10.0.0.5:9000/validators/..%2Fadmin",
            "http://10.0.0.5:9000/validators/%2e%2e/admin",
            "http://10.0.0.5:9000/validators/%2E./admin",
            "http://10.0.0.5:9000/validators/a%5c..%5cadmin",
            "http://10.0.0.5:9000/validatorsx",
            "http://10.0.0.5:9000/admin",
            "http://10.0.0.5:9001/validators/sql",
            "https://10.0.0.5:9000/validators/sql",
            "http://user:pw@10.0.0.5:9000/validators/sql",
            "http://10.0.0.5.evil.net:9000/validators/sql",
        ] {
            assert!(!e.endpoint_allowed(other), "{other}");
        }
    }

    #[test]
    fn a_missing_ruff_is_reported_once_with_the_path() {
        let e = ValidatorEnv::new(ValidatorsConfig {
            ruff_path: "/nonexistent/ruff".into(),
            ..ValidatorsConfig::default()
        });
        let why = e.ruff_ready().unwrap_err().to_owned();
        assert!(why.contains("/nonexistent/ruff"), "{why}");
        assert_eq!(e.ruff_ready().unwrap_err(), why, "cached");
    }
}
