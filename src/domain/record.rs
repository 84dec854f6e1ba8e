//! How a generated record ends: its values, or a stable error saying where it failed.
//!
//! A failed record is data, not an HTTP error: it is stored with its code, message, column and
//! stage, and is never silently dropped.
//!
//! [`RecordErrorCode`] is the one list of the codes a record can fail with: every producer
//! names a variant, the OpenAPI schema lists [`RecordErrorCode::ALL`], and tests hold the
//! docs/api.md table to it. A code has one stage ([`RecordErrorCode::stage`]), so the two cannot
//! disagree.
//!
//! Codes and stages are read back from the database, which replicas of other versions of the
//! service may share: a code or stage this build does not know is kept as `Unrecognized` (and
//! written out unchanged) instead of failing the read. Only parsing makes one.

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::{PartialSchema, ToSchema};

/// A code or stage name this build does not know, read from a record another version wrote.
/// Its field is private: only [`RecordErrorCode::parse`] and [`RecordStage::parse`] make one,
/// so no code of this build can fail a record with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unrecognized(String);

impl Unrecognized {
    /// The name as read.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An enum of snake_case names plus `Unrecognized`: `ALL`, `as_str`, `parse`, and string
/// serde, `Display` and comparisons with `str`; for error codes also `stage` and `meaning`.
/// The variant list is the one place the names (and a code's stage and meaning) are written.
macro_rules! named_enum {
    // Record error codes: each with its stage and its meaning, which is also its doc.
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $variant:ident = $text:literal in $stage:ident: $meaning:literal, )*
        }
    ) => {
        named_enum! {
            $(#[$meta])*
            pub enum $name {
                $( #[doc = $meaning] $variant = $text, )*
            }
        }

        impl $name {
            /// The stage a record fails in with this code; `None` for an unrecognized code.
            pub fn stage(&self) -> Option<RecordStage> {
                match self {
                    $(Self::$variant => Some(RecordStage::$stage),)*
                    Self::Unrecognized(_) => None,
                }
            }

            /// What the code means, in one line of Markdown; `None` for an unrecognized code.
            pub fn meaning(&self) -> Option<&'static str> {
                match self {
                    $(Self::$variant => Some($meaning),)*
                    Self::Unrecognized(_) => None,
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// Read from a record a version that knows it wrote; never produced by this build.
            Unrecognized(Unrecognized),
        }

        impl $name {
            /// Every value this build produces, in documentation order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The snake_case name, as stored and served.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Unrecognized(u) => u.as_str(),
                }
            }

            /// The value named `s`: a stored or received name, which may come from another
            /// version of the service. Never fails.
            pub fn parse(s: &str) -> Self {
                match s {
                    $($text => Self::$variant,)*
                    _ => Self::Unrecognized(Unrecognized(s.to_owned())),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = Cow::<'de, str>::deserialize(d)?;
                Ok(Self::parse(&s))
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

named_enum! {
    /// Where in a record's generation it failed.
    pub enum RecordStage {
        /// Compiling the job's stored config, before the record's first column.
        Compile = "compile",
        /// Rendering a template: an expression, a condition, a skip gate or an LLM prompt.
        Render = "render",
        /// Drawing a sampler's value.
        Sample = "sample",
        /// Converting a value to the column's type.
        Convert = "convert",
        /// An LLM column's conversation: model calls, its tools, parsing the answer.
        Llm = "llm",
        /// A validation column running its validator (ruff, a SQL parser, a remote endpoint).
        Validation = "validation",
        /// The worker running the record, outside any column's own work.
        Worker = "worker",
        /// Writing the record's result to the database.
        Store = "store",
    }
}

named_enum! {
    /// Why a record failed: the one list of record error codes, each with the stage it fails
    /// in and what it means (shown by the OpenAPI schema and the table in docs/api.md).
    pub enum RecordErrorCode {
        InvalidConfig = "invalid_config" in Compile:
            "the job's stored config no longer compiles against this replica's server config",
        TemplateError = "template_error" in Render:
            "a template (expression, sampler condition, skip gate or prompt) failed to render: a lookup on an undefined value, a type error, text that rendered empty, or its fuel or size limit",
        SamplerError = "sampler_error" in Sample:
            "a sampler could not draw a value (e.g. a timedelta whose reference is not a datetime)",
        ConstraintUnsatisfied = "constraint_unsatisfied" in Sample:
            "a sampler column's `constraints` were not met within 10,000 draws, or compare with a value that is not a number",
        TypeConversion = "type_conversion" in Convert:
            "a value could not be converted to the column's `dtype` or `convert_to`",
        UnknownModelAlias = "unknown_model_alias" in Llm:
            "the column's model alias is not defined on this replica (its server config changed after submit)",
        UnknownModelProvider = "unknown_model_provider" in Llm:
            "the model config names a model provider the server config does not define",
        UnknownToolAlias = "unknown_tool_alias" in Llm:
            "the column's tool alias is not defined on this replica (its server config changed after submit)",
        InvalidToolConfig = "invalid_tool_config" in Llm:
            "the model's `mcp_servers` list allows none of the tool config's providers",
        McpUnavailable = "mcp_unavailable" in Llm:
            "an MCP provider of the column's tool config could not list its tools",
        DuplicateToolName = "duplicate_tool_name" in Llm:
            "two providers of the column's tool config now offer a tool of the same name",
        UnknownTool = "unknown_tool" in Llm:
            "a tool in the tool config's `allow_tools` is no longer offered by its providers",
        PromptTooLarge = "prompt_too_large" in Llm:
            "the rendered prompt is over `limits.max_prompt_chars`; no request was sent",
        LlmTimeout = "llm_timeout" in Llm:
            "every attempt ran past the model's `inference_parameters.timeout`",
        LlmRateLimited = "llm_rate_limited" in Llm:
            "the provider still answered HTTP 429 after the retries (a 429 is retried for up to `llm.admission.patience_secs`, or not at all when it says the quota is spent)",
        LlmServerError = "llm_server_error" in Llm:
            "the provider answered a 5xx (after the retries)",
        LlmConnectionError = "llm_connection_error" in Llm:
            "the provider could not be reached, or the connection broke (after the retries)",
        LlmProviderUnavailable = "llm_provider_unavailable" in Llm:
            "the provider kept failing for every caller: its circuit stayed open for as long as the call could wait (`llm.admission.patience_secs`)",
        LlmAuthFailed = "llm_auth_failed" in Llm:
            "the provider rejected the credentials (HTTP 401 or 403)",
        LlmBadRequest = "llm_bad_request" in Llm:
            "the provider rejected the request (another 4xx: unknown model id, bad parameters)",
        LlmContextWindowExceeded = "llm_context_window_exceeded" in Llm:
            "the prompt does not fit the model's context window",
        LlmInvalidResponse = "llm_invalid_response" in Llm:
            "the provider's answer broke the protocol (not JSON, fields missing, longer than the answer bound of `limits.max_image_bytes`), or the request could not be expressed for it",
        LlmCancelled = "llm_cancelled" in Llm:
            "the model call was cancelled; a worker puts such a record back in the queue instead, so a stored record does not carry it",
        LlmOutputInvalid = "llm_output_invalid" in Llm:
            "the model's answer could not be parsed, or did not match the schema, after the correction steps and conversation restarts",
        EmbeddingInputInvalid = "embedding_input_invalid" in Llm:
            "an embedding column's target holds no text to embed (null, a number, an object, or a list with non-text items)",
        MultiModalContextInvalid = "multi_modal_context_invalid" in Llm:
            "a `multi_modal_context` column holds a value that is not an image URL or base64 image (no request was sent)",
        ImageTooLarge = "image_too_large" in Llm:
            "a generated image is larger than `limits.max_image_bytes`",
        ToolTurnsExceeded = "tool_turns_exceeded" in Llm:
            "the model kept calling tools after its tool-calling turns were used up",
        ValidatorError = "validator_error" in Validation:
            "a validation column's validator could not run: ruff failed or timed out, the remote endpoint could not be reached or answered an error (after the retries), or a code target holds no text",
        ValidatorInvalidResponse = "validator_invalid_response" in Validation:
            "a remote validator's answer is not DataDesigner's `{\"data\": [{\"is_valid\": ...}]}` for one record, or does not match the column's `output_schema`",
        SeedReadFailed = "seed_read_failed" in Worker:
            "the record's seed row could not be read from the dataset the job is bound to: the dataset is gone or its stored rows are damaged (when the database is unreachable the worker puts the record back in the queue instead)",
        InternalError = "internal_error" in Worker:
            "generating or storing the record hit a bug in the service (details only in the log); not retried",
        RecordAbandoned = "record_abandoned" in Worker:
            "the worker generating the record died `workers.max_lease_expiries` times",
        UnstorableValue = "unstorable_value" in Store:
            "a value holds a NUL character, which the database cannot store",
    }
}

/// A string schema listing `values`, with `description` (and no `Unrecognized`: a client may
/// still meet a name added by a later version).
fn names_schema<'a>(description: String, values: impl Iterator<Item = &'a str>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .description(Some(description))
        .enum_values(Some(values.map(str::to_owned)))
        .into()
}

impl PartialSchema for RecordErrorCode {
    fn schema() -> RefOr<Schema> {
        let mut description = String::from(
            "Why a record failed: a stable snake_case code, with the stage it fails in.\n",
        );
        for c in Self::ALL {
            let stage = c.stage().map(|s| s.to_string()).unwrap_or_default();
            let meaning = c.meaning().unwrap_or_default();
            description.push_str(&format!("\n- `{c}` (`{stage}`): {meaning}"));
        }
        names_schema(description, Self::ALL.iter().map(Self::as_str))
    }
}

impl ToSchema for RecordErrorCode {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RecordErrorCode")
    }
}

impl PartialSchema for RecordStage {
    fn schema() -> RefOr<Schema> {
        names_schema(
            "Where in a record's generation it failed; each record error code has one.".into(),
            Self::ALL.iter().map(Self::as_str),
        )
    }
}

impl ToSchema for RecordStage {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RecordStage")
    }
}

use super::{JobId, RecordId, RecordStatus};

/// Why a record failed: a stable code, a message, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RecordError {
    /// Stable snake_case code (`RecordErrorCode` lists them, each with its stage).
    pub code: RecordErrorCode,
    /// Readable on its own; never contains secrets.
    pub message: String,
    /// The column being generated when it failed.
    pub column: Option<String>,
    /// The stage it failed in (each code has one).
    pub stage: Option<RecordStage>,
}

impl RecordError {
    /// An error with `code`, in the code's stage.
    pub fn new(code: RecordErrorCode, column: Option<String>, message: impl Into<String>) -> Self {
        Self {
            stage: code.stage(),
            code,
            message: message.into(),
            column,
        }
    }
}

/// How a record ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOutcome {
    /// Values of the record's columns (an object).
    Completed { values: Value },
    /// The error, and the values generated before it, if any.
    Failed {
        values: Option<Value>,
        error: RecordError,
    },
}

impl RecordOutcome {
    /// Whether the record completed (else it failed).
    pub fn is_completed(&self) -> bool {
        matches!(self, Self::Completed { .. })
    }
}

/// A stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow {
    pub id: RecordId,
    pub job_id: JobId,
    /// Position in the job's dataset, from 0.
    pub index: u32,
    pub status: RecordStatus,
    /// Column values (object), set when completed; partial values may be kept on failure.
    pub values: Option<Value>,
    /// How many times the record was claimed.
    pub attempts: u32,
    pub error: Option<RecordError>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// A candidate's verdict in a `record_selection` job (`None` for other jobs' records).
    pub selection: Option<crate::domain::selection::Selection>,
}

/// A stored trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub record_id: RecordId,
    pub column: String,
    pub messages: Value,
    pub created_at: DateTime<Utc>,
}

/// A record that reached a final state, for progress streams.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedRecord {
    pub id: RecordId,
    pub index: u32,
    pub status: RecordStatus,
    pub error_code: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// The message trace of one LLM column of a record, as generated.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The LLM column.
    pub column: String,
    /// The ordered message list (JSON array).
    pub messages: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_kept() {
        for c in RecordErrorCode::ALL {
            assert_eq!(&RecordErrorCode::parse(c.as_str()), c);
            assert!(c.stage().is_some(), "{c}");
        }
        for s in RecordStage::ALL {
            assert_eq!(&RecordStage::parse(s.as_str()), s);
        }
        let later = RecordErrorCode::parse("added_later");
        assert!(matches!(later, RecordErrorCode::Unrecognized(_)));
        assert_eq!(later, "added_later");
        assert_eq!(later.stage(), None);
    }

    #[test]
    fn a_record_error_reads_whatever_another_version_wrote() {
        let stored = serde_json::json!({"code": "added_later", "message": "m",
            "column": null, "stage": "somewhere_new"});
        let e: RecordError = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(e.code, "added_later");
        assert_eq!(
            e.stage.as_ref().map(RecordStage::as_str),
            Some("somewhere_new")
        );
        assert_eq!(serde_json::to_value(&e).unwrap(), stored);

        let e = RecordError::new(RecordErrorCode::TypeConversion, Some("c".into()), "bad");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"code": "type_conversion", "message": "bad", "column": "c",
                "stage": "convert"})
        );
    }
}
