//! The LLM column family (`llm-text`, `llm-code`, `llm-structured`, `llm-judge`): typed model
//! and parser. Generation itself is not implemented yet; these are fully validated so jobs
//! fail early on bad aliases or templates.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::columns::ColumnIssues;
use super::issues::codes;
use super::sampler_params::json_kind;

/// DataDesigner's `CodeLang` values, accepted by `llm-code` columns.
pub const CODE_LANGS: &[&str] = &[
    "bash",
    "c",
    "cobol",
    "cpp",
    "csharp",
    "go",
    "java",
    "javascript",
    "kotlin",
    "python",
    "ruby",
    "rust",
    "scala",
    "swift",
    "typescript",
    "sql:sqlite",
    "sql:tsql",
    "sql:bigquery",
    "sql:mysql",
    "sql:postgres",
    "sql:ansi",
];

/// The LLM column family (`LLMTextColumnConfig` and subclasses).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmColumn {
    /// Which LLM column type, with its extra field.
    pub kind: LlmKind,
    /// User prompt template.
    pub prompt: String,
    /// Model alias (job or server model config).
    pub model_alias: String,
    /// System prompt template.
    pub system_prompt: Option<String>,
    /// Image/audio/video inputs taken from other columns.
    pub multi_modal_context: Option<Vec<MultiModalContext>>,
    /// Tool alias enabling the MCP tool loop.
    pub tool_alias: Option<String>,
    /// Which messages to keep as the column's trace.
    pub with_trace: TraceType,
    /// Add a `{name}__reasoning_content` column.
    pub extract_reasoning_content: bool,
}

impl LlmColumn {
    /// The `column_type` string.
    pub fn column_type(&self) -> &'static str {
        match self.kind {
            LlmKind::Text => "llm-text",
            LlmKind::Code { .. } => "llm-code",
            LlmKind::Structured { .. } => "llm-structured",
            LlmKind::Judge { .. } => "llm-judge",
        }
    }
}

/// The LLM column subtype.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmKind {
    /// `llm-text`.
    Text,
    /// `llm-code` with its language.
    Code {
        /// One of [`CODE_LANGS`].
        code_lang: String,
    },
    /// `llm-structured` with its JSON schema.
    Structured {
        /// The JSON schema object.
        output_format: Map<String, Value>,
    },
    /// `llm-judge` with its scores.
    Judge {
        /// At least one score.
        scores: Vec<Score>,
    },
}

/// One `llm-judge` score.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Score {
    /// Score name.
    pub name: String,
    /// How to assess it.
    pub description: String,
    /// Option value (as a string key) → description.
    pub options: Map<String, Value>,
}

/// `TraceType`; synthgate also accepts `true` (all messages) and `false` (none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceType {
    /// No trace (default).
    #[default]
    None,
    /// Only the final assistant message.
    LastMessage,
    /// The whole conversation.
    AllMessages,
}

impl<'de> Deserialize<'de> for TraceType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(true) => Ok(Self::AllMessages),
            Value::Bool(false) => Ok(Self::None),
            Value::String(s) => match s.as_str() {
                "none" => Ok(Self::None),
                "last_message" => Ok(Self::LastMessage),
                "all_messages" => Ok(Self::AllMessages),
                other => Err(serde::de::Error::custom(format!(
                    "unknown variant `{other}`, expected one of `none`, `last_message`, \
                     `all_messages` (or a boolean)"
                ))),
            },
            other => Err(serde::de::Error::custom(format!(
                "invalid type: {}, expected `none`, `last_message`, `all_messages` or a boolean",
                json_kind(&other)
            ))),
        }
    }
}

/// One `multi_modal_context` entry (`ImageContext`, `AudioContext`, `VideoContext`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultiModalContext {
    /// Kind of media; a legacy entry without it is an image.
    #[serde(default)]
    pub modality: Modality,
    /// Column holding the media (URL, base64, or a list of them).
    pub column_name: String,
    /// `url` or `base64`; absent means auto-detect.
    #[serde(default)]
    pub data_type: Option<MediaDataType>,
    /// Image format (required with `data_type: base64` for images).
    #[serde(default)]
    pub image_format: Option<String>,
    /// Audio format (required with `data_type: base64` for audio).
    #[serde(default)]
    pub audio_format: Option<String>,
    /// Video format (required with `data_type: base64` for video).
    #[serde(default)]
    pub video_format: Option<String>,
}

/// `Modality`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// Image (default for legacy entries).
    #[default]
    Image,
    /// Audio.
    Audio,
    /// Video.
    Video,
}

impl Modality {
    /// The formats DataDesigner's `ImageFormat`, `AudioFormat` and `VideoFormat` name: the
    /// only values of `image_format`, `audio_format` and `video_format` it accepts.
    pub fn formats(self) -> &'static [&'static str] {
        match self {
            Self::Image => &["png", "jpg", "jpeg", "gif", "webp"],
            Self::Audio => &["mp3", "wav"],
            Self::Video => &["mp4", "mov", "webm"],
        }
    }

    /// How DataDesigner names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Audio => "audio",
            Self::Video => "video",
        }
    }
}

/// `ModalityDataType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaDataType {
    /// An http(s) URL.
    Url,
    /// Base64 data.
    Base64,
}

#[derive(Deserialize)]
struct LlmDe {
    prompt: String,
    model_alias: String,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    multi_modal_context: Option<Vec<MultiModalContext>>,
    #[serde(default)]
    tool_alias: Option<String>,
    #[serde(default)]
    with_trace: TraceType,
    #[serde(default)]
    extract_reasoning_content: bool,
}

#[derive(Deserialize)]
struct CodeDe {
    code_lang: String,
}

#[derive(Deserialize)]
struct StructuredDe {
    output_format: Value,
}

#[derive(Deserialize)]
struct JudgeDe {
    scores: Vec<Score>,
}

pub(crate) fn parse_llm(
    issues: &mut ColumnIssues<'_>,
    column_type: &str,
    value: &Value,
) -> Option<LlmColumn> {
    let de = issues.de::<LlmDe>(value);
    let kind = match column_type {
        "llm-code" => {
            let code = issues.de::<CodeDe>(value)?;
            if !CODE_LANGS.contains(&code.code_lang.as_str()) {
                let msg = format!(
                    "unknown code_lang '{}'; expected one of {}",
                    code.code_lang,
                    CODE_LANGS.join(", ")
                );
                issues.push(codes::INVALID_CONFIG, "code_lang", msg);
                return None;
            }
            LlmKind::Code {
                code_lang: code.code_lang,
            }
        }
        "llm-structured" => match issues.de::<StructuredDe>(value)?.output_format {
            Value::Object(output_format) => LlmKind::Structured { output_format },
            other => {
                let msg = format!(
                    "invalid type: {}, expected a JSON schema object",
                    json_kind(&other)
                );
                issues.push(codes::INVALID_CONFIG, "output_format", msg);
                return None;
            }
        },
        "llm-judge" => {
            let scores = issues.de::<JudgeDe>(value)?.scores;
            if scores.is_empty() {
                issues.push(
                    codes::INVALID_CONFIG,
                    "scores",
                    "must contain at least one score",
                );
                return None;
            }
            for (i, score) in scores.iter().enumerate() {
                for (key, v) in &score.options {
                    if !v.is_string() {
                        let msg = format!("invalid type: {}, expected a string", json_kind(v));
                        issues.push(
                            codes::INVALID_CONFIG,
                            &format!("scores[{i}].options.{key}"),
                            msg,
                        );
                    }
                }
            }
            LlmKind::Judge { scores }
        }
        _ => LlmKind::Text,
    };
    let de = de?;
    check_multi_modal(issues, de.multi_modal_context.as_deref());
    Some(LlmColumn {
        kind,
        prompt: de.prompt,
        model_alias: de.model_alias,
        system_prompt: de.system_prompt,
        multi_modal_context: de.multi_modal_context,
        tool_alias: de.tool_alias,
        with_trace: de.with_trace,
        extract_reasoning_content: de.extract_reasoning_content,
    })
}

/// A base64 context entry must say its format (DataDesigner's validator).
pub(crate) fn check_multi_modal(
    issues: &mut ColumnIssues<'_>,
    contexts: Option<&[MultiModalContext]>,
) {
    for (i, ctx) in contexts.into_iter().flatten().enumerate() {
        let format = match ctx.modality {
            Modality::Image => (&ctx.image_format, "image_format"),
            Modality::Audio => (&ctx.audio_format, "audio_format"),
            Modality::Video => (&ctx.video_format, "video_format"),
        };
        if ctx.data_type == Some(MediaDataType::Base64) && format.0.is_none() {
            let msg = format!("{} is required when data_type is base64", format.1);
            issues.push(
                codes::INVALID_CONFIG,
                &format!("multi_modal_context[{i}].{}", format.1),
                msg,
            );
        }
        if let Some(value) = format.0
            && !ctx.modality.formats().contains(&value.as_str())
        {
            let msg = format!(
                "'{value}' is not a {} format DataDesigner sends; one of: {}",
                ctx.modality.as_str(),
                ctx.modality.formats().join(", ")
            );
            issues.push(
                codes::INVALID_CONFIG,
                &format!("multi_modal_context[{i}].{}", format.1),
                msg,
            );
        }
    }
}
