//! The stable issue codes a config can be rejected with, and how issue messages are worded.
//!
//! The codes are part of the public API (the HTTP layer returns them and its docs copy
//! [`ISSUE_CODES`]); never rename one.

use super::ConfigIssue;

/// Issue codes as constants, so call sites cannot misspell them.
pub mod codes {
    /// Type, shape, missing or unknown field.
    pub const INVALID_CONFIG: &str = "invalid_config";
    /// The config defines no columns at all.
    pub const NO_COLUMNS: &str = "no_columns";
    /// Two columns (or a column and another's side column) share a name.
    pub const DUPLICATE_COLUMN: &str = "duplicate_column";
    /// `column_type` is not a DataDesigner column type.
    pub const UNKNOWN_COLUMN_TYPE: &str = "unknown_column_type";
    /// A DataDesigner column type synthgate does not serve.
    pub const UNSUPPORTED_COLUMN_TYPE: &str = "unsupported_column_type";
    /// A Jinja template or expression does not parse, or is unusable.
    pub const INVALID_TEMPLATE: &str = "invalid_template";
    /// A template, skip, sampler condition or sampler parameter names a missing column.
    pub const UNKNOWN_REFERENCE: &str = "unknown_reference";
    /// Columns depend on each other in a loop.
    pub const DEPENDENCY_CYCLE: &str = "dependency_cycle";
    /// Sampler parameters are out of range or inconsistent.
    pub const INVALID_SAMPLER_PARAMS: &str = "invalid_sampler_params";
    /// Reserved: once produced for DataDesigner sampler types not served; every 0.9.6 type is
    /// served now. Kept so the code is never reused for something else.
    pub const UNSUPPORTED_SAMPLER_TYPE: &str = "unsupported_sampler_type";
    /// An LLM column's `model_alias` is defined neither in the job nor on the server.
    pub const UNKNOWN_MODEL_ALIAS: &str = "unknown_model_alias";
    /// A column's `model_alias` names a model of another generation type than the column needs
    /// (an LLM column needs a chat-completion model, an embedding column an embedding model, an
    /// image column an image model), or an embedding or image model on an Anthropic provider
    /// (which has neither API).
    pub const MODEL_TYPE_MISMATCH: &str = "model_type_mismatch";
    /// An LLM column's `tool_alias` is defined neither in the job nor on the server.
    pub const UNKNOWN_TOOL_ALIAS: &str = "unknown_tool_alias";
    /// A job model config is malformed, out of range or a duplicate alias.
    pub const INVALID_MODEL_CONFIG: &str = "invalid_model_config";
    /// A job tool config is malformed, out of range or a duplicate alias; or it names a
    /// provider the server does not define, or none its model may use; or it redefines a
    /// server tool alias with more than the server's definition allows.
    pub const INVALID_TOOL_CONFIG: &str = "invalid_tool_config";
    /// Two providers of one tool config list a tool of the same name.
    pub const DUPLICATE_TOOL_NAME: &str = "duplicate_tool_name";
    /// A tool config's `allow_tools` names a tool none of its providers has.
    pub const UNKNOWN_TOOL: &str = "unknown_tool";
    /// `seed_config` or a `seed-dataset` column is inconsistent with the seed rows.
    pub const INVALID_SEED_CONFIG: &str = "invalid_seed_config";
    /// A seed source the server does not serve (`df`, or a server-side
    /// source the server has not configured).
    pub const UNSUPPORTED_SEED_SOURCE: &str = "unsupported_seed_source";
    /// A `local` seed path that matches no uploaded dataset of the caller and no file in the
    /// server's seed directories.
    pub const SEED_DATASET_NOT_FOUND: &str = "seed_dataset_not_found";
    /// An `hf` seed's `endpoint` is not the server's configured Hub endpoint.
    pub const SEED_ENDPOINT_NOT_ALLOWED: &str = "seed_endpoint_not_allowed";
    /// A server-side seed could not be fetched or stored: the Hub refused the server's token,
    /// timed out or failed.
    pub const SEED_FETCH_FAILED: &str = "seed_fetch_failed";
    /// A server-side seed is over a size limit: a file over `datasets.max_upload_bytes`, more
    /// files than `datasets.max_seed_files`, or `file_contents` over `datasets.max_seed_bytes`.
    pub const SEED_SOURCE_TOO_LARGE: &str = "seed_source_too_large";
    /// `skip.when` refers to the column it gates.
    pub const SELF_REFERENCE: &str = "self_reference";
    /// Reserved: once produced for non-empty `constraints`, `processors` or `profilers`, which
    /// are all served now. Kept so the code is never reused for something else.
    pub const UNSUPPORTED_FEATURE: &str = "unsupported_feature";
    /// A run config field has the wrong type, is out of range or unknown.
    pub const INVALID_RUN_CONFIG: &str = "invalid_run_config";
    /// A model config's `extra_body` sets a request field the service computes (`model`,
    /// `messages`, `tools`, ...).
    pub const RESERVED_EXTRA_BODY_FIELD: &str = "reserved_extra_body_field";
    /// Reserved: once a `multi_modal_context` entry of a modality synthgate did not send
    /// (audio, video); every modality is sent now.
    pub const UNSUPPORTED_MODALITY: &str = "unsupported_modality";
    /// More columns than [`MAX_COLUMNS`](crate::domain::dataset::MAX_COLUMNS).
    pub const TOO_MANY_COLUMNS: &str = "too_many_columns";
    /// A `custom` column or a `local_callable` validator: a Python function, which the
    /// service cannot run.
    pub const PYTHON_CALLABLE_NOT_SERVED: &str = "python_callable_not_served";
    /// A Python `code` validator on a server where ruff cannot be run.
    pub const CODE_VALIDATOR_UNAVAILABLE: &str = "code_validator_unavailable";
    /// A `remote` validator whose `endpoint_url` is not on the server's
    /// `validators.remote_endpoints` allow list.
    pub const REMOTE_VALIDATOR_NOT_ALLOWED: &str = "remote_validator_not_allowed";
    /// A processor names a column the config does not define, repeats another's name, or a
    /// `schema_transform` template reads a column that is not in the final dataset.
    pub const INVALID_PROCESSOR: &str = "invalid_processor";
    /// A profiler's `model_alias` is defined neither in the job nor on the server.
    pub const INVALID_PROFILER: &str = "invalid_profiler";
    /// A `constraints` entry is malformed, names an unknown column or one that is not a
    /// numerical sampler, or has an unknown operator.
    pub const INVALID_CONSTRAINT: &str = "invalid_constraint";
    /// `record_selection` is malformed, its `predicate_column` is not a boolean-valued column
    /// of the config, or its `max_candidate_records` is under the job's `num_records` or over
    /// the server's records-per-job limit.
    pub const INVALID_RECORD_SELECTION: &str = "invalid_record_selection";
}

/// Every issue code with a one-line description, for API documentation.
pub const ISSUE_CODES: &[(&str, &str)] = &[
    (
        codes::INVALID_RECORD_SELECTION,
        "`record_selection` is malformed, names no boolean-valued column, or its candidate budget is under `num_records` or over the server's limit",
    ),
    (
        codes::UNSUPPORTED_MODALITY,
        "reserved, no longer produced: audio and video multi_modal_context entries are sent to models",
    ),
    (
        codes::TOO_MANY_COLUMNS,
        "the config has more columns than a job may have (`domain::dataset::MAX_COLUMNS`)",
    ),
    (
        codes::INVALID_CONFIG,
        "a field has the wrong type or shape, is missing, or is unknown",
    ),
    (codes::NO_COLUMNS, "the config defines no columns"),
    (
        codes::DUPLICATE_COLUMN,
        "two columns, or a column and another column's side column, share a name",
    ),
    (
        codes::UNKNOWN_COLUMN_TYPE,
        "`column_type` is not a DataDesigner column type",
    ),
    (
        codes::UNSUPPORTED_COLUMN_TYPE,
        "a DataDesigner column type synthgate does not serve (none today; kept for types a newer DataDesigner adds)",
    ),
    (
        codes::INVALID_TEMPLATE,
        "a Jinja template or expression does not parse or references nothing where it must",
    ),
    (
        codes::UNKNOWN_REFERENCE,
        "a template, skip.when, sampler condition or sampler parameter names a missing column",
    ),
    (
        codes::DEPENDENCY_CYCLE,
        "columns depend on each other in a loop",
    ),
    (
        codes::INVALID_SAMPLER_PARAMS,
        "sampler parameters are out of range or inconsistent",
    ),
    (
        codes::UNSUPPORTED_SAMPLER_TYPE,
        "reserved; no longer produced (every DataDesigner 0.9.6 sampler type is served)",
    ),
    (
        codes::UNKNOWN_MODEL_ALIAS,
        "an LLM column's model_alias is defined neither in the job nor on the server",
    ),
    (
        codes::MODEL_TYPE_MISMATCH,
        "a column's model_alias names a model of another generation type than the column needs (LLM columns: chat-completion; embedding: embedding; image: image), or an embedding or image model on an Anthropic provider",
    ),
    (
        codes::UNKNOWN_TOOL_ALIAS,
        "an LLM column's tool_alias is defined neither in the job nor on the server",
    ),
    (
        codes::INVALID_MODEL_CONFIG,
        "a job model config is malformed, out of range, or repeats an alias",
    ),
    (
        codes::INVALID_TOOL_CONFIG,
        "a tool config is malformed, out of range, repeats an alias, names a provider the server does not define, or none its model may use, or widens the server's tool config of the same alias",
    ),
    (
        codes::DUPLICATE_TOOL_NAME,
        "two providers of one tool config list a tool of the same name",
    ),
    (
        codes::UNKNOWN_TOOL,
        "a tool config's allow_tools names a tool none of its providers has",
    ),
    (
        codes::INVALID_SEED_CONFIG,
        "seed_config or a seed-dataset column does not fit the seed rows",
    ),
    (
        codes::UNSUPPORTED_SEED_SOURCE,
        "a seed source the server does not serve (df, or a server-side source it has not configured)",
    ),
    (
        codes::SEED_DATASET_NOT_FOUND,
        "a local seed path matches none of the caller's uploaded datasets (upload it: POST /v1/datasets or synthgate submit) and no file in the server's seed directories",
    ),
    (
        codes::SEED_ENDPOINT_NOT_ALLOWED,
        "an hf seed's `endpoint` is not the server's configured Hub endpoint (datasets.hf.endpoint)",
    ),
    (
        codes::SEED_FETCH_FAILED,
        "a server-side seed could not be fetched or stored (the Hub refused access, timed out or failed)",
    ),
    (
        codes::SEED_SOURCE_TOO_LARGE,
        "a server-side seed is over a limit: a file over datasets.max_upload_bytes, more files than datasets.max_seed_files, or file_contents over datasets.max_seed_bytes",
    ),
    (
        codes::SELF_REFERENCE,
        "skip.when refers to the column it gates",
    ),
    (
        codes::UNSUPPORTED_FEATURE,
        "reserved; no longer produced (constraints, processors and profilers are served)",
    ),
    (
        codes::INVALID_RUN_CONFIG,
        "a run config field has the wrong type, is out of range, or is unknown",
    ),
    (
        codes::RESERVED_EXTRA_BODY_FIELD,
        "a model config's extra_body sets a field the service computes (model, messages, system, tools, tool_choice, functions, function_call, mcp_servers, web_search_options, stream, stream_options, n)",
    ),
    (
        codes::PYTHON_CALLABLE_NOT_SERVED,
        "a custom column or a local_callable validator names a Python function, which the service cannot run (use an expression or llm-* column, or a remote validator)",
    ),
    (
        codes::CODE_VALIDATOR_UNAVAILABLE,
        "a Python code validator on a server where ruff cannot be run (`validators.ruff_path`)",
    ),
    (
        codes::REMOTE_VALIDATOR_NOT_ALLOWED,
        "a remote validator's endpoint_url is not on the server's `validators.remote_endpoints` allow list",
    ),
    (
        codes::INVALID_PROCESSOR,
        "a processor names a column the config does not define, repeats another processor's name, or a schema_transform template reads a column that is not in the final dataset",
    ),
    (
        codes::INVALID_PROFILER,
        "a profiler's model_alias is defined neither in the job nor on the server",
    ),
    (
        codes::INVALID_CONSTRAINT,
        "a constraints entry is malformed, names an unknown column or one that is not a numerical sampler, or has an unknown operator",
    ),
];

impl ConfigIssue {
    /// Builds an issue whose message starts with where it is: `column 'x': field 'y': ...`.
    pub fn new(
        code: &'static str,
        column: Option<&str>,
        field: Option<&str>,
        detail: impl std::fmt::Display,
    ) -> Self {
        let message = match (column, field) {
            (Some(c), Some(f)) => format!("column '{c}': field '{f}': {detail}"),
            (Some(c), None) => format!("column '{c}': {detail}"),
            (None, Some(f)) => format!("field '{f}': {detail}"),
            (None, None) => detail.to_string(),
        };
        Self {
            code,
            column: column.map(str::to_owned),
            field: field.map(str::to_owned),
            message,
        }
    }

    /// An issue inside column `column` at `field` (`None` for the column as a whole).
    pub fn in_column(
        code: &'static str,
        column: &str,
        field: Option<&str>,
        detail: impl std::fmt::Display,
    ) -> Self {
        Self::new(code, Some(column), field, detail)
    }

    /// An issue outside any column, at `field`.
    pub fn at_field(code: &'static str, field: &str, detail: impl std::fmt::Display) -> Self {
        Self::new(code, None, Some(field), detail)
    }
}

/// Extracts `x` from serde's "missing field `x`" so the issue can name the field.
pub(crate) fn missing_field_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

/// Joins a parent path and a child segment the way serde_path_to_error prints paths.
pub(crate) fn join_path(parent: &str, child: &str) -> String {
    match (parent.is_empty(), child.is_empty() || child == ".") {
        (true, _) => child.to_owned(),
        (false, true) => parent.to_owned(),
        (false, false) if child.starts_with('[') => format!("{parent}{child}"),
        (false, false) => format!("{parent}.{child}"),
    }
}

/// Deserializes `value` into `T`, returning the failing field path (relative to `value`,
/// empty for the value itself) and serde's message.
pub(crate) fn deserialize_at<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        let path = if path == "." { String::new() } else { path };
        // serde reports a missing field at its parent; point at the field itself.
        let path = match missing_field_name(&message) {
            Some(name) => join_path(&path, name),
            None => path,
        };
        (path, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_column_and_field() {
        let i = ConfigIssue::in_column(codes::INVALID_CONFIG, "price", Some("params.low"), "bad");
        assert_eq!(i.message, "column 'price': field 'params.low': bad");
        assert_eq!(i.column.as_deref(), Some("price"));
        let i = ConfigIssue::at_field(codes::INVALID_SEED_CONFIG, "seed_config", "x");
        assert_eq!(i.message, "field 'seed_config': x");
        assert!(i.column.is_none());
    }

    #[test]
    fn every_code_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for (code, desc) in ISSUE_CODES {
            assert!(seen.insert(*code), "{code} listed twice");
            assert!(!desc.is_empty());
        }
        assert_eq!(seen.len(), 36);
    }

    #[test]
    fn missing_field_path_points_at_the_field() {
        #[derive(serde::Deserialize, Debug)]
        #[expect(dead_code, reason = "only deserialization is under test")]
        struct Inner {
            low: f64,
        }
        #[derive(serde::Deserialize, Debug)]
        #[expect(dead_code, reason = "only deserialization is under test")]
        struct Outer {
            params: Inner,
        }
        let err = deserialize_at::<Outer>(&serde_json::json!({"params": {}})).unwrap_err();
        assert_eq!(err.0, "params.low");
        let err =
            deserialize_at::<Outer>(&serde_json::json!({"params": {"low": "a"}})).unwrap_err();
        assert_eq!(err.0, "params.low");
        assert_eq!(err.1, "invalid type: string \"a\", expected f64");
    }
}
