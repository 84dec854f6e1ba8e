//! Chat types shared by every adapter. They are also the trace format: a `ChatMessage`
//! serializes exactly like DataDesigner's `ChatMessage.to_dict()`, so a `{column}__trace` is a
//! plain `Vec<ChatMessage>`.
//!
//! DataDesigner's rules, kept here: `content` is always a list of ChatML blocks (a string
//! becomes one text block, `""` one empty text block); `reasoning_content`, `tool_calls` and
//! `tool_call_id` appear only when non-empty.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions (DataDesigner's rendered `system_prompt`).
    System,
    /// The rendered prompt, or a correction request.
    User,
    /// A model response.
    Assistant,
    /// The result of one tool call, linked by `tool_call_id`.
    Tool,
}

/// One ChatML content block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// `{"type":"text","text":...}`
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"image_url","image_url":{"url":...}}`; the URL is usually a `data:` URI (MCP
    /// image results) and may be http(s).
    ImageUrl {
        /// Where the image is.
        image_url: ImageUrl,
    },
    /// `{"type":"audio_url","audio_url":{"url":...}}`: audio at an http(s) URL (or a path the
    /// model server reads itself), the OpenAI-compatible extension vLLM and NVIDIA serve.
    AudioUrl {
        /// Where the audio is.
        audio_url: MediaUrl,
    },
    /// `{"type":"input_audio","input_audio":{"data":...,"format":"mp3"}}`: base64 audio, as
    /// OpenAI's chat completions take it.
    InputAudio {
        /// The audio.
        input_audio: InputAudio,
    },
    /// `{"type":"video_url","video_url":{"url":...}}`: video at an http(s) URL or in a
    /// `data:` URI (no provider takes an `input_video` block).
    VideoUrl {
        /// Where the video is.
        video_url: MediaUrl,
    },
}

/// The target of an `audio_url` or `video_url` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaUrl {
    /// An http(s) URL, a `data:` URI (video) or a path on the model's server.
    pub url: String,
}

/// The audio of an `input_audio` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAudio {
    /// Base64 of the audio's bytes, no data-URI prefix.
    pub data: String,
    /// `mp3` or `wav`.
    pub format: String,
}

/// The target of an `image_url` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// A `data:<mime>;base64,<data>` URI or an http(s) URL.
    pub url: String,
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image block from a URL or `data:` URI.
    pub fn image_url(url: impl Into<String>) -> Self {
        Self::ImageUrl {
            image_url: ImageUrl { url: url.into() },
        }
    }

    /// An `audio_url` block.
    pub fn audio_url(url: impl Into<String>) -> Self {
        Self::AudioUrl {
            audio_url: MediaUrl { url: url.into() },
        }
    }

    /// An `input_audio` block of base64 `data` in `format` (`mp3`, `wav`).
    pub fn input_audio(data: impl Into<String>, format: impl Into<String>) -> Self {
        Self::InputAudio {
            input_audio: InputAudio {
                data: data.into(),
                format: format.into(),
            },
        }
    }

    /// A `video_url` block from a URL or `data:` URI.
    pub fn video_url(url: impl Into<String>) -> Self {
        Self::VideoUrl {
            video_url: MediaUrl { url: url.into() },
        }
    }
}

/// One message of a conversation, in DataDesigner's trace shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Author.
    pub role: Role,
    /// Always a block list on the wire; a plain string or `null` is accepted when reading.
    #[serde(deserialize_with = "content_from_any")]
    pub content: Vec<ContentBlock>,
    /// The model's reasoning, when the provider returned any. Omitted when empty.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub reasoning_content: Option<String>,
    /// Tool calls requested by an assistant message. Omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a `tool` message: the id of the call it answers. Omitted when empty.
    #[serde(default, skip_serializing_if = "is_blank")]
    pub tool_call_id: Option<String>,
    /// On an assistant message of a trace: it came from the response cache, not from the
    /// model. Omitted when false (never sent to a provider: the adapters build their own
    /// bodies).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

fn is_blank(s: &Option<String>) -> bool {
    s.as_deref().is_none_or(str::is_empty)
}

/// Accepts DataDesigner's block list, the documented string form, and `null` (no blocks).
fn content_from_any<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Any {
        Blocks(Vec<ContentBlock>),
        Text(String),
        Null(()),
    }
    Ok(match Any::deserialize(d)? {
        Any::Blocks(b) => b,
        Any::Text(s) => vec![ContentBlock::text(s)],
        Any::Null(()) => Vec::new(),
    })
}

impl ChatMessage {
    fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self {
            role,
            content,
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            cached: false,
        }
    }

    /// A system message with one text block.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, vec![ContentBlock::text(text)])
    }

    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![ContentBlock::text(text)])
    }

    /// A user message with arbitrary blocks (multimodal context first, then the prompt).
    pub fn user_blocks(content: Vec<ContentBlock>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message with one text block (`""` stays one empty block, as in DataDesigner).
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![ContentBlock::text(text)])
    }

    /// A tool result answering `tool_call_id`; content keeps its blocks (text and images).
    pub fn tool(tool_call_id: impl Into<String>, content: Vec<ContentBlock>) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            ..Self::new(Role::Tool, content)
        }
    }

    /// A tool result with one text block (e.g. an `Error: ...` message for the model).
    pub fn tool_text(tool_call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::tool(tool_call_id, vec![ContentBlock::text(text)])
    }

    /// The text blocks joined with `"\n"` (media skipped): the column value of a final answer.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id, echoed by the tool message that answers it.
    pub id: String,
    /// Always `"function"`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// What to call.
    pub function: FunctionCall,
    /// Why the call could not be read as a call (a native call without a `function` object, a
    /// prompt-based block that is not JSON). Such a call is still answered, with an extraction
    /// error the model can act on; never serialized, the trace shows the call as received.
    #[serde(skip)]
    pub unreadable: Option<String>,
}

fn function_type() -> String {
    "function".to_owned()
}

/// Name and raw arguments of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Tool name.
    pub name: String,
    /// The arguments as raw JSON text, exactly as the model wrote them (may be invalid JSON:
    /// the tool loop reports that back to the model).
    pub arguments: String,
}

impl ToolCall {
    /// A `function` tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
            unreadable: None,
        }
    }

    /// A call that could not be read, with what was received of it and why.
    pub fn unreadable(
        id: impl Into<String>,
        name: impl Into<String>,
        received: impl Into<String>,
        why: impl Into<String>,
    ) -> Self {
        let mut call = Self::new(id, name, received);
        call.unreadable = Some(why.into());
        call
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description shown to the model (may be empty).
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments (MCP `inputSchema`, passed through unmodified). Shared:
    /// a record's tool set points at the tool list's schemas instead of copying them.
    pub parameters: std::sync::Arc<Value>,
    /// The OpenAI `{"type": "function", ...}` JSON of this tool, written once when its tool
    /// list was fetched (see [`super::openai::ToolJson`]); `None` builds it per request.
    #[serde(skip)]
    pub openai: Option<super::openai::ToolJson>,
}

impl ToolSpec {
    /// A spec with its OpenAI JSON written once, for a tool offered many times.
    pub fn new(name: String, description: String, parameters: Value) -> Self {
        let mut spec = Self {
            name,
            description,
            parameters: std::sync::Arc::new(parameters),
            openai: None,
        };
        spec.openai = super::openai::ToolJson::of(&spec);
        spec
    }
}

/// One chat completion to run: the conversation so far and the tools on offer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools offered; none means no `tools` key is sent at all.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// `true`: the tools stay defined (providers require their definitions while the
    /// conversation holds tool calls) but the model may not call any (`tool_choice: none`).
    /// Used for the last answer after the tool-turn budget is spent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbid_tool_calls: bool,
    /// The model's `tool_choice` (OpenAI's shape), sent with the tools unless tool calls are
    /// forbidden; the tool loop leaves it out after the first tool turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<serde_json::Value>,
    /// The JSON schema the answer must follow (structured and judge columns), sent as
    /// `response_format` to a provider whose `structured_output` asks for it.
    #[serde(skip)]
    pub response_schema: Option<std::sync::Arc<Value>>,
}

impl ChatRequest {
    /// A request without tools.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            tools: Vec::new(),
            forbid_tool_calls: false,
            tool_choice: None,
            response_schema: None,
        }
    }

    /// The same request offering `tools`.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// The same request with `tool_choice` (see [`Self::tool_choice`]).
    pub fn with_tool_choice(mut self, choice: Option<serde_json::Value>) -> Self {
        self.tool_choice = choice;
        self
    }

    /// The same request, with tool calls forbidden (see [`Self::forbid_tool_calls`]).
    pub fn forbidding_tool_calls(mut self) -> Self {
        self.forbid_tool_calls = true;
        self
    }
}

/// Token counts reported by the provider for one call (zero when it reported none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens (including reasoning, as providers count them).
    pub completion_tokens: u64,
    /// Reasoning tokens, when the provider reports them separately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// The model's answer to one [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant message, unstripped (the tool loop applies DataDesigner's whitespace rules,
    /// which differ between intermediate and final messages).
    pub message: ChatMessage,
    /// `stop`, `length`, `tool_calls` (OpenAI) or `end_turn`, `max_tokens`, `tool_use`
    /// (Anthropic), as the provider sent it.
    pub finish_reason: Option<String>,
    /// Tokens of the successful attempt.
    pub usage: Usage,
    /// HTTP attempts made, including the successful one (`attempts - 1` retries).
    pub attempts: u32,
    /// Answered from the response cache (no request was made).
    #[serde(skip)]
    pub cached: bool,
}

impl ChatResponse {
    /// True when the model stopped because it hit `max_tokens` (truncated output).
    pub fn is_truncated(&self) -> bool {
        matches!(self.finish_reason.as_deref(), Some("length" | "max_tokens"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_like_datadesigner_to_dict() {
        let mut a = ChatMessage::assistant("");
        a.reasoning_content = Some("think".into());
        a.tool_calls = vec![ToolCall::new("call_a", "get_fact", r#"{"topic": "math"}"#)];
        let t = ChatMessage::tool(
            "call_a",
            vec![
                ContentBlock::text("Rendered:"),
                ContentBlock::image_url("data:image/png;base64,iVBO"),
            ],
        );
        let got = serde_json::to_value([ChatMessage::system("Use tools."), a, t]).unwrap();
        assert_eq!(
            got,
            json!([
                {"role": "system", "content": [{"type": "text", "text": "Use tools."}]},
                {"role": "assistant", "content": [{"type": "text", "text": ""}],
                 "reasoning_content": "think",
                 "tool_calls": [{"id": "call_a", "type": "function",
                                 "function": {"name": "get_fact", "arguments": "{\"topic\": \"math\"}"}}]},
                {"role": "tool", "content": [{"type": "text", "text": "Rendered:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}],
                 "tool_call_id": "call_a"}
            ])
        );
    }

    #[test]
    fn empty_optionals_are_omitted() {
        let mut m = ChatMessage::user("hi");
        m.reasoning_content = Some(String::new());
        m.tool_call_id = Some(String::new());
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
        );
    }

    #[test]
    fn reads_documented_string_and_null_content() {
        let m: ChatMessage =
            serde_json::from_value(json!({"role": "user", "content": "q"})).unwrap();
        assert_eq!(m.content, vec![ContentBlock::text("q")]);
        let m: ChatMessage =
            serde_json::from_value(json!({"role": "assistant", "content": null})).unwrap();
        assert!(m.content.is_empty());
        let round: ChatMessage =
            serde_json::from_value(serde_json::to_value(ChatMessage::tool_text("c", "x")).unwrap())
                .unwrap();
        assert_eq!(round, ChatMessage::tool_text("c", "x"));
    }
}
