//! The OpenAI-compatible Chat Completions adapter (`POST {endpoint}/chat/completions`):
//! messages go out as the trace holds them (assistant `reasoning_content` sent back), `tools`
//! only when some are offered, with one difference from DataDesigner's wire shape: content
//! that is only text is sent as a string, the form every OpenAI-compatible server reads.
//! DataDesigner sends the trace's block list; llama.cpp's Python server (llama-cpp-python)
//! answers that with HTTP 500 on every request ("can only concatenate str (not "list") to
//! str"), and its function-calling format refuses tools beside it. Content with an image
//! keeps its blocks.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use super::adapter::Parsed;
use super::params::{Sampled, apply_extra_body};
use super::types::{ChatMessage, ChatRequest, ContentBlock, Role, ToolCall, ToolSpec, Usage};

/// The request body, serialized.
///
/// Written straight from the request, borrowing it: building a `serde_json::Value` first
/// copied the whole conversation and every tool's schema on each turn of the tool loop, then
/// serialized the copy (the largest CPU cost per LLM request in the bench profile). The bytes
/// are the same: `model`, `messages`, `tools`, then the computed fields and `extra_body` in
/// the order they were inserted (`extra_body` can never name the first three, see
/// [`apply_extra_body`]).
///
/// `response_format`, when the provider asks for one, goes before `extra_body`, which can
/// still override it.
pub(crate) fn build_body(
    model_id: &str,
    req: &ChatRequest,
    sampled: &Sampled,
    extra_body: &Map<String, Value>,
    response_format: Option<Value>,
) -> Result<Vec<u8>, String> {
    let mut rest = Map::new();
    if !req.tools.is_empty() {
        if req.forbid_tool_calls {
            rest.insert("tool_choice".into(), "none".into());
        } else if let Some(choice) = &req.tool_choice {
            rest.insert("tool_choice".into(), choice.clone());
        }
    }
    sampled.write(&mut rest);
    if let Some(format) = response_format {
        rest.insert("response_format".into(), format);
    }
    apply_extra_body(&mut rest, extra_body);
    let body = Body {
        model: model_id,
        messages: Messages(&req.messages),
        tools: (!req.tools.is_empty()).then(|| req.tools.iter().map(ToolSchema).collect()),
        rest,
    };
    serde_json::to_vec(&body).map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Messages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ToolSchema<'a>>>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// The conversation as sent (see the module docs): each message as its trace form, with
/// text-only content as one string.
struct Messages<'a>(&'a [ChatMessage]);

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(WireMessage))
    }
}

struct WireMessage<'a>(&'a ChatMessage);

impl<'a> Serialize for WireMessage<'a> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Content<'a> {
            Text(Cow<'a, str>),
            Blocks(&'a [ContentBlock]),
        }
        #[derive(Serialize)]
        struct Message<'a> {
            role: Role,
            content: Content<'a>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reasoning_content: Option<&'a str>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            tool_calls: &'a [ToolCall],
            #[serde(skip_serializing_if = "Option::is_none")]
            tool_call_id: Option<&'a str>,
        }
        let m = self.0;
        let only_text = m
            .content
            .iter()
            .all(|b| matches!(b, ContentBlock::Text { .. }));
        let content = match m.content.as_slice() {
            [ContentBlock::Text { text }] => Content::Text(Cow::Borrowed(text)),
            _ if only_text => Content::Text(Cow::Owned(m.text())),
            blocks => Content::Blocks(blocks),
        };
        fn non_blank(v: &Option<String>) -> Option<&str> {
            v.as_deref().filter(|t| !t.is_empty())
        }
        Message {
            role: m.role,
            content,
            reasoning_content: non_blank(&m.reasoning_content),
            tool_calls: &m.tool_calls,
            tool_call_id: non_blank(&m.tool_call_id),
        }
        .serialize(s)
    }
}

/// A tool's OpenAI JSON, serialized once and written into every request body as it is: the
/// bench profile had each request write every tool's schema out again (8 % of the CPU of a
/// tool-using record, three requests a record). Compares by its text.
#[derive(Debug, Clone)]
pub struct ToolJson(std::sync::Arc<serde_json::value::RawValue>);

impl ToolJson {
    /// `spec`'s JSON as [`ToolSchema`] writes it.
    pub(crate) fn of(spec: &ToolSpec) -> Option<Self> {
        let text = serde_json::to_string(&ToolSchema(spec)).ok()?;
        serde_json::value::RawValue::from_string(text)
            .ok()
            .map(|raw| Self(raw.into()))
    }
}

impl PartialEq for ToolJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// DataDesigner's `to_openai_tool_schema`: description defaults to `""`, parameters to an
/// empty object schema. Serializes as
/// `{"type": "function", "function": {"name", "description", "parameters"}}`; a spec's
/// pre-written [`ToolJson`] when it has one.
struct ToolSchema<'a>(&'a ToolSpec);

impl Serialize for ToolSchema<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some(json) = &self.0.openai {
            return json.0.serialize(s);
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: Parameters<'a>,
        }
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Parameters<'a> {
            Given(&'a Value),
            Empty {
                #[serde(rename = "type")]
                kind: &'static str,
                properties: Map<String, Value>,
            },
        }
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        let t = self.0;
        let parameters = if t.parameters.is_null() {
            Parameters::Empty {
                kind: "object",
                properties: Map::new(),
            }
        } else {
            Parameters::Given(t.parameters.as_ref())
        };
        Tool {
            kind: "function",
            function: Function {
                name: &t.name,
                description: &t.description,
                parameters,
            },
        }
        .serialize(s)
    }
}

/// Reads `choices[0]` and `usage` from a 2xx body.
pub(crate) fn parse_response(body: &Value) -> Result<Parsed, String> {
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("response has no `choices[0]`")?;
    let msg = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or("response has no `choices[0].message` object")?;

    // A list of blocks is joined text (DataDesigner); null means "" (a pure tool-call turn).
    let text = match msg.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => return Err(format!("`message.content` has unexpected type: {other}")),
    };
    let mut message = ChatMessage::assistant(text);
    // vLLM >= 0.16 says `reasoning`; older servers and DeepSeek say `reasoning_content`.
    message.reasoning_content = ["reasoning", "reasoning_content"]
        .iter()
        .filter_map(|k| msg.get(*k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .map(str::to_owned);
    if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
        message.tool_calls = calls.iter().map(tool_call).collect();
    }

    let usage = body.get("usage").map(usage).unwrap_or_default();
    Ok(Parsed {
        message,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage,
    })
}

/// One entry of `message.tool_calls`. DataDesigner's leniency: a missing id is generated, a
/// missing name is "", non-string arguments are re-serialized. An entry without a `function`
/// object becomes an unreadable call, answered with an extraction error, instead of failing the
/// record without the model ever hearing what was wrong.
fn tool_call(c: &Value) -> ToolCall {
    let id = c
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(
            || format!("call_{}", uuid::Uuid::new_v4().simple()),
            str::to_owned,
        );
    let Some(f) = c.get("function").filter(|f| f.is_object()) else {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        return ToolCall::unreadable(
            id,
            name,
            c.to_string(),
            "the tool call has no `function` object with a `name` and `arguments`",
        );
    };
    let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
    let arguments = match f.get("arguments") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    ToolCall::new(id, name, arguments)
}

fn usage(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64);
    Usage {
        prompt_tokens: n(u.get("prompt_tokens")).unwrap_or(0),
        completion_tokens: n(u.get("completion_tokens")).unwrap_or(0),
        reasoning_tokens: n(u.get("reasoning_tokens"))
            .or_else(|| n(u.pointer("/completion_tokens_details/reasoning_tokens"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ContentBlock;
    use serde_json::json;

    #[test]
    fn body_has_trace_shaped_messages_tools_and_params() {
        let mut a = ChatMessage::assistant("");
        a.reasoning_content = Some("plan".into());
        a.tool_calls = vec![ToolCall::new("call_1", "lookup", r#"{"q":"x"}"#)];
        let req = ChatRequest::new(vec![
            ChatMessage::system("sys"),
            ChatMessage::user("hi"),
            a,
            ChatMessage::tool(
                "call_1",
                vec![ContentBlock::image_url("data:image/png;base64,AA")],
            ),
        ])
        .with_tools(vec![ToolSpec::new(
            "lookup".into(),
            String::new(),
            Value::Null,
        )]);
        let sampled = Sampled {
            temperature: Some(0.5),
            top_p: None,
            max_tokens: Some(100),
        };
        let extra = json!({"seed": 1, "temperature": 0.1})
            .as_object()
            .cloned()
            .unwrap();
        let body: Value =
            serde_json::from_slice(&build_body("m-1", &req, &sampled, &extra, None).unwrap())
                .unwrap();
        assert_eq!(body["model"], "m-1");
        assert_eq!(
            body["temperature"], 0.1,
            "extra_body overrides computed fields"
        );
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["seed"], 1);
        assert!(body.get("top_p").is_none());
        assert_eq!(body["messages"][2]["reasoning_content"], "plan");
        assert_eq!(body["messages"][3]["tool_call_id"], "call_1");
        assert_eq!(body["messages"][3]["content"][0]["type"], "image_url");
        // Text-only content goes as a string (llama-cpp-python refuses a block list).
        assert_eq!(body["messages"][0]["content"], "sys");
        assert_eq!(body["messages"][1]["content"], "hi");
        assert_eq!(body["messages"][2]["content"], "");
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "lookup", "description": "",
                    "parameters": {"type": "object", "properties": {}}}}])
        );
        let no_tools = build_body(
            "m",
            &ChatRequest::new(vec![]),
            &Sampled::default(),
            &Map::new(),
            None,
        );
        let no_tools: Value = serde_json::from_slice(&no_tools.unwrap()).unwrap();
        assert!(no_tools.get("tools").is_none());
    }

    /// The body written from the request is byte for byte the one built as a `Value` (the
    /// form before it was serialized directly): same keys, order and text.
    #[test]
    fn body_bytes_match_the_value_form() {
        let mut a = ChatMessage::assistant("");
        a.tool_calls = vec![ToolCall::new("c1", "lookup", r#"{"q":"\u00e9"}"#)];
        let written = vec![
            ToolSpec::new(
                "lookup".into(),
                "Find \"it\"".into(),
                json!({"type": "object", "properties": {"q": {"type": "string"}},
                       "required": ["q"]}),
            ),
            ToolSpec::new("now".into(), String::new(), Value::Null),
        ];
        assert!(written.iter().all(|t| t.openai.is_some()));
        // The same tools without their pre-written JSON: both paths give the same bytes.
        let fresh: Vec<ToolSpec> = written
            .iter()
            .map(|t| ToolSpec {
                openai: None,
                ..t.clone()
            })
            .collect();
        let messages = vec![
            ChatMessage::system("sys"),
            ChatMessage::user("héllo\n"),
            a,
            ChatMessage::tool_text("c1", "found"),
        ];
        let sampled = Sampled {
            temperature: Some(0.25),
            top_p: Some(0.9),
            max_tokens: Some(64),
        };
        let extra = json!({"top_p": 0.5, "seed": 3})
            .as_object()
            .cloned()
            .unwrap();
        let cases = [(false, Some(json!("auto"))), (true, None), (false, None)];
        for ((forbid, choice), specs) in cases
            .into_iter()
            .flat_map(|c| [(c.clone(), &written), (c, &fresh)])
        {
            let mut req = ChatRequest::new(messages.clone()).with_tools(specs.clone());
            req.tool_choice = choice.clone();
            req.forbid_tool_calls = forbid;
            let mut expected = Map::new();
            expected.insert("model".into(), "m".into());
            // The trace form, with text-only content as one string.
            let mut wire = serde_json::to_value(&messages).unwrap();
            for m in wire.as_array_mut().unwrap() {
                let text = m["content"][0]["text"].clone();
                m["content"] = text;
            }
            expected.insert("messages".into(), wire);
            let tools: Vec<Value> = specs
                .iter()
                .map(|t| {
                    let parameters = if t.parameters.is_null() {
                        json!({"type": "object", "properties": {}})
                    } else {
                        (*t.parameters).clone()
                    };
                    json!({"type": "function", "function": {"name": t.name,
                        "description": t.description, "parameters": parameters}})
                })
                .collect();
            expected.insert("tools".into(), tools.into());
            if forbid {
                expected.insert("tool_choice".into(), "none".into());
            } else if let Some(c) = choice {
                expected.insert("tool_choice".into(), c);
            }
            sampled.write(&mut expected);
            apply_extra_body(&mut expected, &extra);
            let got = build_body("m", &req, &sampled, &extra, None).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                serde_json::to_string(&Value::Object(expected)).unwrap()
            );
        }
        let plain = ChatRequest::new(vec![ChatMessage::user("x")]);
        assert_eq!(
            build_body("m", &plain, &Sampled::default(), &Map::new(), None).unwrap(),
            br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#
        );
    }

    /// Several text blocks (an MCP tool's result) go as their text joined by newlines, as a
    /// column reads a message's text; an image keeps every block.
    #[test]
    fn text_blocks_are_joined_and_images_keep_their_blocks() {
        let text = ChatMessage::tool("c", vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        let image = ChatMessage::tool(
            "c",
            vec![
                ContentBlock::text("see"),
                ContentBlock::image_url("data:image/png;base64,AA"),
            ],
        );
        let req = ChatRequest::new(vec![text, image]);
        let body = build_body("m", &req, &Sampled::default(), &Map::new(), None).unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["messages"][0]["content"], "a\nb");
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "text", "text": "see"},
                   {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}])
        );
    }

    /// The provider's `response_format` goes after the sampled fields and before
    /// `extra_body`, which may replace it.
    #[test]
    fn a_response_format_is_sent_and_extra_body_still_wins() {
        let req = ChatRequest::new(vec![ChatMessage::user("x")]);
        let format = json!({"type": "json_object", "schema": {"type": "object"}});
        let body = build_body(
            "m",
            &req,
            &Sampled::default(),
            &Map::new(),
            Some(format.clone()),
        );
        let body: Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(body["response_format"], format);
        let extra = json!({"response_format": {"type": "text"}})
            .as_object()
            .cloned()
            .unwrap();
        let body = build_body("m", &req, &Sampled::default(), &extra, Some(format));
        let body: Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(body["response_format"], json!({"type": "text"}));
    }

    #[test]
    fn parses_reasoning_tool_calls_and_usage() {
        let body = json!({
            "choices": [{"finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "reasoning": "", "reasoning_content": "because",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                    {"function": {"name": "g", "arguments": {"b": 2}}}
                ]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                      "completion_tokens_details": {"reasoning_tokens": 3}}
        });
        let p = parse_response(&body).unwrap();
        assert_eq!(p.message.content, vec![ContentBlock::text("")]);
        assert_eq!(p.message.reasoning_content.as_deref(), Some("because"));
        assert_eq!(
            p.message.tool_calls[0],
            ToolCall::new("c1", "f", "{\"a\":1}")
        );
        assert_eq!(p.message.tool_calls[1].function.arguments, "{\"b\":2}");
        assert!(p.message.tool_calls[1].id.starts_with("call_"));
        assert_eq!(p.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(p.usage.prompt_tokens, 10);
        assert_eq!(p.usage.reasoning_tokens, Some(3));
    }

    #[test]
    fn reasoning_field_wins_and_block_content_is_joined() {
        let body = json!({"choices": [{"message": {
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "reasoning": "r1", "reasoning_content": "r2"}}]});
        let p = parse_response(&body).unwrap();
        assert_eq!(p.message.text(), "a\nb");
        assert_eq!(p.message.reasoning_content.as_deref(), Some("r1"));
        assert_eq!(p.usage, Usage::default());
    }

    #[test]
    fn missing_fields_are_errors() {
        assert!(parse_response(&json!({})).is_err());
        assert!(parse_response(&json!({"choices": []})).is_err());
        assert!(parse_response(&json!({"choices": [{"message": "x"}]})).is_err());
        assert!(parse_response(&json!({"choices": [{"message": {"content": 3}}]})).is_err());
    }
}
