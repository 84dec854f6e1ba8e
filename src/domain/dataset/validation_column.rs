//! `validation` columns (DataDesigner's `ValidationColumnConfig` and `validator_params`): the
//! typed model and its parser, with DataDesigner's field names and defaults.
//!
//! Only the shape is checked here. Whether the server can run the validator (ruff installed,
//! the remote endpoint on the allow list) is decided at compile, against the server config.
//! `local_callable` validators name a Python function, which a service cannot call: they are
//! refused here with `python_callable_not_served`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::columns::ColumnIssues;
use super::issues::codes;

/// The message for a config that names a Python function (`custom` columns, `local_callable`
/// validators): what cannot run, and what to use instead.
pub const PYTHON_CALLABLE_HELP: &str = "a Python function cannot run inside the synthgate \
     service (the config only carries its name, not its code)";

/// `ValidationColumnConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationColumn {
    /// The columns whose values are validated, in config order.
    pub target_columns: Vec<String>,
    /// Which validator, with its parameters.
    pub validator: Validator,
    /// DataDesigner's records per validator call (default 10). Records are generated one at a
    /// time here, so each record's validation is a batch of one; kept so configs round-trip.
    pub batch_size: u32,
}

/// The validator of a validation column.
#[derive(Debug, Clone, PartialEq)]
pub enum Validator {
    /// `code`: lint Python with ruff, or parse SQL in a dialect.
    Code(CodeLang),
    /// `remote`: POST the record's target values to an HTTP endpoint.
    Remote(RemoteValidatorParams),
}

/// The languages a `code` validator checks (DataDesigner's `SUPPORTED_CODE_LANGUAGES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeLang {
    /// `python`: ruff with DataDesigner's rule selection.
    Python,
    /// `sql:<dialect>`: parse errors only.
    Sql(SqlDialect),
}

/// The SQL dialects of DataDesigner's `SQL_DIALECTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlDialect {
    /// `sql:sqlite`.
    Sqlite,
    /// `sql:tsql`.
    Tsql,
    /// `sql:bigquery`.
    Bigquery,
    /// `sql:mysql`.
    Mysql,
    /// `sql:postgres`.
    Postgres,
    /// `sql:ansi`.
    Ansi,
}

impl CodeLang {
    /// Every language a code validator accepts, as the config writes it.
    pub const ALL: &'static [(&'static str, CodeLang)] = &[
        ("python", CodeLang::Python),
        ("sql:sqlite", CodeLang::Sql(SqlDialect::Sqlite)),
        ("sql:tsql", CodeLang::Sql(SqlDialect::Tsql)),
        ("sql:bigquery", CodeLang::Sql(SqlDialect::Bigquery)),
        ("sql:mysql", CodeLang::Sql(SqlDialect::Mysql)),
        ("sql:postgres", CodeLang::Sql(SqlDialect::Postgres)),
        ("sql:ansi", CodeLang::Sql(SqlDialect::Ansi)),
    ];

    /// The language named `s`, if a code validator supports it.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, l)| *l)
    }
}

/// DataDesigner's `RemoteValidatorParams`, with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteValidatorParams {
    /// Where to POST; must be on the server's `validators.remote_endpoints` allow list.
    pub endpoint_url: String,
    /// JSON schema the response must match (no extra properties), when given.
    pub output_schema: Option<Map<String, Value>>,
    /// Seconds per HTTP request (default 30).
    pub timeout: f64,
    /// Retries after the first attempt (default 3).
    pub max_retries: u32,
    /// Backoff factor in seconds: waits `retry_backoff * 2^attempt` (default 2, must be > 1).
    pub retry_backoff: f64,
    /// Requests in flight at once for this column, per job and replica (default 4).
    pub max_parallel_requests: u32,
}

#[derive(Deserialize)]
struct ValidationDe {
    target_columns: Vec<String>,
    validator_type: String,
    validator_params: Map<String, Value>,
    #[serde(default = "default_batch_size")]
    batch_size: u32,
}

fn default_batch_size() -> u32 {
    10
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CodeDe {
    #[serde(default, rename = "validator_type")]
    _validator_type: Option<String>,
    code_lang: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteDe {
    #[serde(default, rename = "validator_type")]
    _validator_type: Option<String>,
    endpoint_url: String,
    #[serde(default)]
    output_schema: Option<Map<String, Value>>,
    #[serde(default = "default_timeout")]
    timeout: f64,
    #[serde(default = "default_max_retries")]
    max_retries: u32,
    #[serde(default = "default_retry_backoff")]
    retry_backoff: f64,
    #[serde(default = "default_max_parallel")]
    max_parallel_requests: u32,
}

/// Most retries a remote validator may ask for.
const MAX_RETRIES: u32 = 100;
/// Largest `retry_backoff` factor, in seconds.
const MAX_RETRY_BACKOFF: f64 = 60.0;
/// The longest duration a job may ask for (the service's rule for every job duration).
const MAX_TIMEOUT_SEC: f64 = 86_400.0;

fn default_timeout() -> f64 {
    30.0
}
fn default_max_retries() -> u32 {
    3
}
fn default_retry_backoff() -> f64 {
    2.0
}
fn default_max_parallel() -> u32 {
    4
}

/// Parses the validation-specific fields of a column (the common ones are read elsewhere).
pub(crate) fn parse_validation(
    issues: &mut ColumnIssues<'_>,
    value: &Value,
) -> Option<ValidationColumn> {
    let de = issues.de::<ValidationDe>(value)?;
    if de.batch_size == 0 {
        issues.push(
            codes::INVALID_CONFIG,
            "batch_size",
            "must be greater than or equal to 1",
        );
    }
    if let Some(Value::String(inner)) = de.validator_params.get("validator_type")
        && inner != &de.validator_type
    {
        let msg = format!(
            "validator_params.validator_type '{inner}' differs from validator_type '{}'",
            de.validator_type
        );
        issues.push(
            codes::INVALID_CONFIG,
            "validator_params.validator_type",
            msg,
        );
        return None;
    }
    let params = Value::Object(de.validator_params);
    let validator = match de.validator_type.as_str() {
        "code" => {
            let code = params_de::<CodeDe>(issues, &params)?;
            let Some(lang) = CodeLang::parse(&code.code_lang) else {
                let known: Vec<&str> = CodeLang::ALL.iter().map(|(n, _)| *n).collect();
                let msg = format!(
                    "unsupported code language '{}' for a code validator; supported: {}",
                    code.code_lang,
                    known.join(", ")
                );
                issues.push(codes::INVALID_CONFIG, "validator_params.code_lang", msg);
                return None;
            };
            Validator::Code(lang)
        }
        "remote" => Validator::Remote(remote(issues, &params)?),
        "local_callable" => {
            let function = match params.get("validation_function") {
                Some(Value::String(name)) => format!(" ('{name}')"),
                _ => String::new(),
            };
            let msg = format!(
                "local_callable validators name a Python function{function}; \
                 {PYTHON_CALLABLE_HELP}. Serve the check over HTTP and use a `remote` \
                 validator (its endpoint on the server's validators.remote_endpoints), or a \
                 `code` validator for Python or SQL"
            );
            issues.push(codes::PYTHON_CALLABLE_NOT_SERVED, "validator_type", msg);
            return None;
        }
        other => {
            let msg = format!(
                "unknown validator_type '{other}'; expected one of code, local_callable, remote"
            );
            issues.push(codes::INVALID_CONFIG, "validator_type", msg);
            return None;
        }
    };
    if de.target_columns.is_empty() {
        issues.push(
            codes::INVALID_CONFIG,
            "target_columns",
            "must name at least one column",
        );
        return None;
    }
    (de.batch_size > 0).then_some(ValidationColumn {
        target_columns: de.target_columns,
        validator,
        batch_size: de.batch_size,
    })
}

fn params_de<T: serde::de::DeserializeOwned>(
    issues: &mut ColumnIssues<'_>,
    params: &Value,
) -> Option<T> {
    match super::issues::deserialize_at::<T>(params) {
        Ok(t) => Some(t),
        Err((path, msg)) => {
            let field = super::issues::join_path("validator_params", &path);
            issues.push(codes::INVALID_CONFIG, &field, msg);
            None
        }
    }
}

fn remote(issues: &mut ColumnIssues<'_>, params: &Value) -> Option<RemoteValidatorParams> {
    let de = params_de::<RemoteDe>(issues, params)?;
    let mut ok = true;
    let mut check = |bad: bool, field: &str, msg: &str| {
        if bad {
            issues.push(
                codes::INVALID_CONFIG,
                &format!("validator_params.{field}"),
                msg,
            );
            ok = false;
        }
    };
    check(
        !(de.timeout >= crate::domain::models::MIN_TIMEOUT_SEC && de.timeout <= MAX_TIMEOUT_SEC),
        "timeout",
        "must be at least 0.001 and at most 86400 (a day)",
    );
    // Each wait is capped at two minutes anyway; a factor past a minute says nothing more.
    check(
        !(de.retry_backoff > 1.0 && de.retry_backoff <= MAX_RETRY_BACKOFF),
        "retry_backoff",
        "must be greater than 1 and at most 60",
    );
    // Each retry may wait up to two minutes: more than a hundred would hold a worker slot
    // for hours on an endpoint that is down.
    check(
        de.max_retries > MAX_RETRIES,
        "max_retries",
        "must be at most 100",
    );
    check(
        de.max_parallel_requests == 0,
        "max_parallel_requests",
        "must be greater than or equal to 1",
    );
    if let Some(schema) = &de.output_schema
        && let Err(e) = jsonschema::validator_for(&Value::Object(schema.clone()))
    {
        let msg = format!("not a valid JSON schema: {e}");
        check(true, "output_schema", &msg);
    }
    ok.then_some(RemoteValidatorParams {
        endpoint_url: de.endpoint_url,
        output_schema: de.output_schema,
        timeout: de.timeout,
        max_retries: de.max_retries,
        retry_backoff: de.retry_backoff,
        max_parallel_requests: de.max_parallel_requests,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::domain::dataset::{ColumnKind, ConfigIssue, DatasetConfig};

    fn parse_one(column: Value) -> Result<ValidationColumn, Vec<ConfigIssue>> {
        let cfg = DatasetConfig::parse(&json!({"columns": [column]}))?;
        match &cfg.columns[0].kind {
            ColumnKind::Validation(v) => Ok(v.clone()),
            other => panic!("not a validation column: {other:?}"),
        }
    }

    /// The three columns DataDesigner 0.9.6's builder writes (`write_config`), as written.
    #[test]
    fn builder_output_parses_with_defaults() {
        let code = json!({"batch_size": 10, "column_type": "validation", "drop": false,
            "name": "v", "propagate_skip": true, "skip": null, "target_columns": ["x"],
            "validator_params": {"code_lang": "python", "validator_type": "code"},
            "validator_type": "code"});
        let v = parse_one(code).unwrap();
        assert_eq!(v.validator, Validator::Code(CodeLang::Python));
        assert_eq!((v.target_columns, v.batch_size), (vec!["x".to_owned()], 10));

        let remote = json!({"column_type": "validation", "name": "r", "target_columns": ["x"],
            "validator_params": {"endpoint_url": "http://h/v", "max_parallel_requests": 4,
                "max_retries": 3, "output_schema": null, "retry_backoff": 2.0, "timeout": 30.0,
                "validator_type": "remote"},
            "validator_type": "remote"});
        let Validator::Remote(r) = parse_one(remote).unwrap().validator else {
            panic!("not remote")
        };
        assert_eq!(r.endpoint_url, "http://h/v");
        assert_eq!((r.timeout, r.max_retries, r.retry_backoff), (30.0, 3, 2.0));
        // Without the optional fields: DataDesigner's defaults, and params without the
        // discriminator (DataDesigner injects it).
        let short = json!({"column_type": "validation", "name": "r", "target_columns": ["x"],
            "validator_type": "remote", "validator_params": {"endpoint_url": "http://h/v"}});
        let Validator::Remote(d) = parse_one(short).unwrap().validator else {
            panic!("not remote")
        };
        assert_eq!(d, r);
        assert_eq!(d.max_parallel_requests, 4);

        let sql = json!({"column_type": "validation", "name": "s", "target_columns": ["q"],
            "validator_type": "code", "validator_params": {"code_lang": "sql:tsql"}});
        assert_eq!(
            parse_one(sql).unwrap().validator,
            Validator::Code(CodeLang::Sql(SqlDialect::Tsql))
        );
    }

    #[test]
    fn python_functions_are_refused_with_their_own_code() {
        let local = json!({"column_type": "validation", "name": "l", "target_columns": ["x"],
            "validator_type": "local_callable",
            "validator_params": {"output_schema": null, "validation_function": "myfn",
                "validator_type": "local_callable"}});
        let i = parse_one(local).unwrap_err();
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].code, codes::PYTHON_CALLABLE_NOT_SERVED);
        assert_eq!(i[0].column.as_deref(), Some("l"));
        assert_eq!(i[0].field.as_deref(), Some("validator_type"));
        assert!(i[0].message.contains("'myfn'"), "{}", i[0].message);
        assert!(
            i[0].message.contains("`remote` validator"),
            "{}",
            i[0].message
        );

        let custom = json!({"columns": [{"column_type": "custom", "name": "c",
            "generator_function": "make_it", "generation_strategy": "cell_by_cell"}]});
        let i = DatasetConfig::parse(&custom).unwrap_err();
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].code, codes::PYTHON_CALLABLE_NOT_SERVED);
        assert_eq!(i[0].column.as_deref(), Some("c"));
        assert!(
            i[0].message.contains("`expression` column"),
            "{}",
            i[0].message
        );
    }

    #[test]
    fn bad_params_name_the_field() {
        let bad = |params: Value, vtype: &str| {
            let col = json!({"column_type": "validation", "name": "v", "target_columns": ["x"],
                "validator_type": vtype, "validator_params": params});
            parse_one(col).unwrap_err()
        };
        let i = bad(json!({"code_lang": "javascript"}), "code");
        assert_eq!(i[0].field.as_deref(), Some("validator_params.code_lang"));
        assert!(i[0].message.contains("sql:postgres"), "{}", i[0].message);
        let i = bad(
            json!({"endpoint_url": "http://h", "timeout": 5e-324}),
            "remote",
        );
        assert_eq!(i[0].field.as_deref(), Some("validator_params.timeout"));
        let i = bad(
            json!({"endpoint_url": "http://h", "timeout": 1e300}),
            "remote",
        );
        assert_eq!(i[0].field.as_deref(), Some("validator_params.timeout"));
        let i = bad(
            json!({"endpoint_url": "http://h", "retry_backoff": 1.0}),
            "remote",
        );
        assert_eq!(
            i[0].field.as_deref(),
            Some("validator_params.retry_backoff")
        );
        let i = bad(json!({"endpoint_url": "http://h", "extra": 1}), "remote");
        assert_eq!(i[0].field.as_deref(), Some("validator_params.extra"));
        let i = bad(
            json!({"code_lang": "python", "validator_type": "remote"}),
            "code",
        );
        assert_eq!(
            i[0].field.as_deref(),
            Some("validator_params.validator_type")
        );
        let i = bad(json!({"code_lang": "python"}), "lint");
        assert_eq!(i[0].field.as_deref(), Some("validator_type"));
        let col = json!({"column_type": "validation", "name": "v", "target_columns": [],
            "validator_type": "code", "validator_params": {"code_lang": "python"},
            "batch_size": 0});
        let fields: Vec<_> = parse_one(col)
            .unwrap_err()
            .into_iter()
            .map(|i| i.field.unwrap_or_default())
            .collect();
        assert_eq!(fields, ["batch_size", "target_columns"]);
    }
}
