//! Validation columns: the compiled validator of each, the server-side environment they run
//! in ([`ValidatorEnv`]: the ruff executable, the remote endpoint allow list, one HTTP
//! client), and the value DataDesigner writes per record.
//!
//! Records are generated one at a time, so a record's validation is a batch of one: the
//! per-record output is what DataDesigner writes for that record, and `batch_size` changes
//! nothing. Module map: `python` (ruff, DataDesigner's pylint-style score), `statements`
//! (counting Python statements for that score), `sql` (parse errors per dialect), `remote`
//! (POST with timeout and retries), `ruff_install` (the pinned ruff, fetched when the server
//! has none).

mod python;
mod remote;
mod ruff_install;
pub(crate) mod sql;
mod sql_dialects;
mod statements;

use std::sync::{Arc, OnceLock, RwLock};
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
    /// Which ruff Python code validators run, once known.
    ruff: RwLock<Ruff>,
    /// The client for remote validators: no redirects (an allowed endpoint must not bounce a
    /// request elsewhere) and no proxy from the environment.
    client: OnceLock<reqwest::Client>,
}

impl ValidatorEnv {
    /// The environment of a server config's `validators` section.
    pub fn new(config: ValidatorsConfig) -> Self {
        Self {
            config,
            ruff: RwLock::new(Ruff::Unchecked),
            client: OnceLock::new(),
        }
    }

    /// The ruff Python code validators run (its path), or why there is none. The first call
    /// looks for one: `validators.ruff_path`, then a ruff installed earlier in
    /// `validators.tools_dir`; that takes the few milliseconds of a `ruff --version` or two
    /// (compilation runs on the `CpuGate`, not a runtime thread). A ruff being fetched
    /// ([`Self::provision_ruff`]) is not there yet.
    pub(crate) fn ruff_ready(&self) -> Result<String, String> {
        if let Some(known) = self.read_ruff().known() {
            return known;
        }
        let found = self.find_ruff();
        let mut state = self
            .ruff
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*state, Ruff::Unchecked) {
            *state = match &found {
                Ok((path, version)) => Ruff::Ready {
                    path: path.clone(),
                    version: version.clone(),
                },
                Err(why) => Ruff::Missing(why.clone()),
            };
        }
        state.known().unwrap_or_else(|| found.map(|(path, _)| path))
    }

    /// At start: finds a ruff, and when there is none and `validators.ruff_download` allows
    /// it, fetches the pinned release into `validators.tools_dir`. Says what it found in the
    /// log; [`Self::ruff_status`] reports it.
    pub async fn provision_ruff(&self) {
        let found = self.find_ruff();
        let missing = match found {
            Ok((path, version)) => {
                tracing::info!(ruff.path = %path, ruff.version = %version, "Python code validators run ruff");
                *self
                    .ruff
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Ruff::Ready { path, version };
                return;
            }
            Err(why) => why,
        };
        let wheel = match ruff_install::wheel_for_this_machine() {
            Some(w) if self.config.ruff_download => w,
            other => {
                let why = if other.is_none() {
                    format!("{missing}; no pinned ruff wheel for this platform")
                } else {
                    format!("{missing}; `validators.ruff_download` is off")
                };
                tracing::warn!(reason = %why, "Python code validators are unavailable: install ruff (`pip install ruff=={}`) or set validators.ruff_path", ruff_install::RUFF_VERSION);
                *self
                    .ruff
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Ruff::Missing(why);
                return;
            }
        };
        *self
            .ruff
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Ruff::Installing;
        tracing::info!(
            ruff.version = ruff_install::RUFF_VERSION,
            url = wheel.url,
            "no ruff here: fetching the pinned release for Python code validators"
        );
        let dir = std::path::PathBuf::from(&self.config.tools_dir);
        crate::install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(300))
            .build()
            .unwrap_or_default();
        // A failed download (no network yet, a mirror's hiccup) is tried again, ever less
        // often, for as long as the server runs; jobs are told why meanwhile.
        let fetched = fetch_retrying(
            || ruff_install::install(&client, wheel.url, wheel.sha256, &dir),
            retry_delays(),
            |why, delay| {
                let why = format!(
                    "{missing}; fetching ruff failed ({why}), trying again in {} s",
                    delay.as_secs()
                );
                tracing::warn!(reason = %why, "Python code validators are unavailable until ruff is fetched");
                *self
                    .ruff
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Ruff::Missing(why);
            },
        )
        .await;
        let state = match fetched {
            Ok(path) => match probe(&path.to_string_lossy()) {
                Ok(version) => {
                    tracing::info!(ruff.path = %path.display(), ruff.version = %version, "ruff installed; Python code validators run it");
                    Ruff::Ready {
                        path: path.to_string_lossy().into_owned(),
                        version,
                    }
                }
                Err(why) => {
                    Ruff::Missing(format!("{missing}; the fetched ruff does not run: {why}"))
                }
            },
            Err(why) => Ruff::Missing(format!("{missing}; fetching ruff failed: {why}")),
        };
        if let Ruff::Missing(why) = &state {
            tracing::warn!(reason = %why, "Python code validators are unavailable: install ruff (`pip install ruff=={}`) or set validators.ruff_path", ruff_install::RUFF_VERSION);
        }
        *self
            .ruff
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = state;
    }

    /// For `/readyz`: `ruff <version> (<path>)`, `installing`, `unavailable: <why>`, or
    /// `unchecked` before anything looked.
    pub fn ruff_status(&self) -> String {
        match &*self.read_ruff() {
            Ruff::Unchecked => "unchecked".into(),
            Ruff::Installing => format!("installing ruff {}", ruff_install::RUFF_VERSION),
            Ruff::Ready { path, version } => format!("{version} ({path})"),
            Ruff::Missing(why) => format!("unavailable: {why}"),
        }
    }

    fn read_ruff(&self) -> std::sync::RwLockReadGuard<'_, Ruff> {
        self.ruff
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The configured ruff, else one installed earlier in `tools_dir`: `(path, version)`, or
    /// why neither runs.
    fn find_ruff(&self) -> Result<(String, String), String> {
        let configured = &self.config.ruff_path;
        let why = match probe(configured) {
            Ok(version) => return Ok((configured.clone(), version)),
            Err(why) => why,
        };
        let installed = ruff_install::installed_path(std::path::Path::new(&self.config.tools_dir));
        if let Ok(installed) = std::fs::canonicalize(installed) {
            let installed = installed.to_string_lossy().into_owned();
            if let Ok(version) = probe(&installed) {
                return Ok((installed, version));
            }
        }
        Err(why)
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
}

/// Waits before each new attempt to fetch ruff: 30 s, doubling to every 10 minutes.
fn retry_delays() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(Duration::from_secs(30)), |d| {
        Some((*d * 2).min(Duration::from_secs(600)))
    })
}

/// Runs `attempt` until it succeeds, waiting the next of `delays` after each failure (told to
/// `failed` first); the last error once `delays` runs out.
async fn fetch_retrying<T, F, Fut>(
    mut attempt: F,
    mut delays: impl Iterator<Item = Duration>,
    mut failed: impl FnMut(&str, Duration),
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(why) => match delays.next() {
                Some(delay) => {
                    failed(&why, delay);
                    tokio::time::sleep(delay).await;
                }
                None => return Err(why),
            },
        }
    }
}

/// What is known of the ruff Python code validators run.
#[derive(Debug, Default)]
enum Ruff {
    /// Nothing looked yet.
    #[default]
    Unchecked,
    /// Being fetched (at start).
    Installing,
    /// This one runs.
    Ready { path: String, version: String },
    /// None runs, and why.
    Missing(String),
}

impl Ruff {
    /// The path, or why there is none; `None` while unchecked.
    fn known(&self) -> Option<Result<String, String>> {
        match self {
            Self::Unchecked => None,
            Self::Installing => Some(Err(format!(
                "ruff {} is being fetched for Python code validators; try again in a few seconds",
                ruff_install::RUFF_VERSION
            ))),
            Self::Ready { path, .. } => Some(Ok(path.clone())),
            Self::Missing(why) => Some(Err(why.clone())),
        }
    }
}

/// `ruff --version` of the ruff at `path`: its version line, or why it does not run.
fn probe(path: &str) -> Result<String, String> {
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
}

/// Whether a path segment under an allowed prefix is anything but plain: letters, digits and
/// `-`, `.`, `_`, `~` (RFC 3986's unreserved characters), and not a dot segment. The URL parser
/// resolves a literal `..` itself, but servers decode, normalise and split paths in ways of their
/// own: an encoded separator or dot (`..%2fadmin`, `%2e%2e`), a double encoding (`%252e`), an
/// overlong UTF-8 dot (`%c0%ae`), full-width dots (`．．`, which the parser percent-encodes),
/// a path parameter (`..;/`, which Tomcat strips). A list of such tricks is never complete;
/// refusing every segment outside the plain set closes the class. Real validator paths
/// (`/validators/sql`, `/v1/check-code`) are plain.
fn escapes(segment: &str) -> bool {
    let plain = segment
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    !plain || segment == "." || segment == ".."
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
                env.ruff_ready().map_err(Unservable::Ruff)?;
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

    /// Issue 49: a failed ruff download was never tried again. Two failures, then success:
    /// three attempts, each failure told with the wait before the next.
    #[tokio::test]
    async fn a_failed_fetch_is_tried_again() {
        let attempts = std::cell::Cell::new(0);
        let mut told = Vec::new();
        let got = fetch_retrying(
            || {
                attempts.set(attempts.get() + 1);
                let n = attempts.get();
                async move {
                    if n < 3 {
                        Err(format!("down {n}"))
                    } else {
                        Ok(n)
                    }
                }
            },
            // The real waits, scaled down a thousandfold.
            retry_delays().map(|d| d / 1000),
            |why, delay| told.push((why.to_owned(), delay.as_millis())),
        )
        .await;
        assert_eq!(got, Ok(3));
        assert_eq!(told, [("down 1".to_owned(), 30), ("down 2".to_owned(), 60)]);
        // Out of waits: the last error.
        let got: Result<(), String> = fetch_retrying(
            || async { Err("down".to_owned()) },
            std::iter::empty(),
            |_, _| {},
        )
        .await;
        assert_eq!(got, Err("down".to_owned()));
        let delays: Vec<u64> = retry_delays().take(7).map(|d| d.as_secs()).collect();
        assert_eq!(delays, [30, 60, 120, 240, 480, 600, 600]);
    }

    #[test]
    fn prefix_entries_stay_on_their_origin_and_path() {
        let e = env(&["http://10.0.0.5:9000/validators/"]);
        assert!(e.endpoint_allowed("http://10.0.0.5:9000/validators/sql"));
        assert!(e.endpoint_allowed("http://10.0.0.5:9000/validators/a/b?q=1"));
        assert!(e.endpoint_allowed("http://10.0.0.5:9000/validators/check-code_v2.1~x"));
        for other in [
            "http://10.0.0.5:9000/validators/..%2fadmin",
            "http://10.0.0.5:9000/validators/..%2Fadmin",
            "http://10.0.0.5:9000/validators/%2e%2e/admin",
            "http://10.0.0.5:9000/validators/%2E./admin",
            "http://10.0.0.5:9000/validators/a%5c..%5cadmin",
            // Issue 49: the tricks a list missed; the plain-segment rule refuses them all.
            "http://10.0.0.5:9000/validators/..;/admin",
            "http://10.0.0.5:9000/validators/%252e%252e%252fadmin",
            "http://10.0.0.5:9000/validators/%c0%ae%c0%ae/admin",
            "http://10.0.0.5:9000/validators/\u{ff0e}\u{ff0e}/admin",
            "http://10.0.0.5:9000/validators/a;b",
            "http://10.0.0.5:9000/validators/a%20b",
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
            tools_dir: "/nonexistent/tools".into(),
            ..ValidatorsConfig::default()
        });
        let why = e.ruff_ready().unwrap_err();
        assert!(why.contains("/nonexistent/ruff"), "{why}");
        assert_eq!(e.ruff_ready().unwrap_err(), why, "cached");
        assert!(
            e.ruff_status().starts_with("unavailable: "),
            "{}",
            e.ruff_status()
        );
    }
}
