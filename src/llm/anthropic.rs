//! The Anthropic Messages adapter (`POST .../v1/messages`), lowering the canonical trace shape
//! the way DataDesigner's `anthropic_translation.py` does: system messages pulled into
//! `system`, tool calls as `tool_use` blocks, consecutive tool results merged into one user
//! message of `tool_result` blocks, `image_url` blocks as native `image` blocks. Assistant
//! reasoning is not sent back (DataDesigner sends no thinking blocks).

use serde_json::{Map, Value, json};

use super::adapter::Parsed;
use super::params::{Sampled, apply_extra_body};
use super::types::{ChatMessage, ChatRequest, ContentBlock, Role, ToolCall, Usage};

/// Anthropic requires `max_tokens`; DataDesigner's default when the model config has none.
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The request body.
pub(crate) fn build_body(
    model_id: &str,
    req: &ChatRequest,
    sampled: &Sampled,
    extra_body: &Map<String, Value>,
) -> Result<Value, String> {
    let mut body = Map::new();
    body.insert("model".into(), model_id.into());

    let (system, rest): (Vec<&ChatMessage>, Vec<&ChatMessage>) =
        req.messages.iter().partition(|m| m.role == Role::System);
    let mut messages: Vec<Value> = Vec::new();
    // Tool results accumulate here until a non-tool message closes the run.
    let mut results: Vec<Value> = Vec::new();
    for m in rest {
        if m.role == Role::Tool {
            results.push(tool_result(m)?);
            continue;
        }
        if !results.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        messages.push(match m.role {
            Role::Assistant => assistant(m)?,
            _ => json!({"role": "user", "content": blocks(&m.content)?}),
        });
    }
    if !results.is_empty() {
        messages.push(json!({"role": "user", "content": results}));
    }
    body.insert("messages".into(), messages.into());
    body.insert(
        "max_tokens".into(),
        sampled.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).into(),
    );
    if let Some(s) = system_field(&system)? {
        body.insert("system".into(), s);
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut o = Map::new();
                o.insert("name".into(), t.name.clone().into());
                if !t.description.is_empty() {
                    o.insert("description".into(), t.description.clone().into());
                }
                let schema = if t.parameters.is_null() {
                    json!({"type": "object", "properties": {}})
                } else {
                    (*t.parameters).clone()
                };
                o.insert("input_schema".into(), schema);
                Value::Object(o)
            })
            .collect();
        body.insert("tools".into(), tools.into());
        if req.forbid_tool_calls {
            body.insert("tool_choice".into(), json!({"type": "none"}));
        } else if let Some(choice) = &req.tool_choice {
            body.insert("tool_choice".into(), tool_choice(choice)?);
        }
    }
    let Sampled {
        temperature, top_p, ..
    } = *sampled;
    Sampled {
        temperature,
        top_p,
        max_tokens: None,
    }
    .write(&mut body);
    apply_extra_body(&mut body, extra_body);
    Ok(Value::Object(body))
}

/// OpenAI's `tool_choice` in Anthropic's shape (DataDesigner's `translate_tool_choice`):
/// `auto` → `auto`, `required` → `any`, `none` → `none`, a named function → `tool`.
fn tool_choice(choice: &Value) -> Result<Value, String> {
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(json!({"type": "auto"})),
            "required" => Ok(json!({"type": "any"})),
            "none" => Ok(json!({"type": "none"})),
            other => Err(format!("tool_choice '{other}' has no Anthropic equivalent")),
        },
        other => other
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|name| json!({"type": "tool", "name": name}))
            .ok_or_else(|| format!("tool_choice {other} has no Anthropic equivalent")),
    }
}

/// All system messages merged: text joined with a blank line, or a block list when one of
/// them carries an image.
fn system_field(system: &[&ChatMessage]) -> Result<Option<Value>, String> {
    if system.is_empty() {
        return Ok(None);
    }
    let all: Vec<&ContentBlock> = system.iter().flat_map(|m| &m.content).collect();
    if all.iter().any(|b| !matches!(b, ContentBlock::Text { .. })) {
        let owned: Vec<ContentBlock> = all.into_iter().cloned().collect();
        return Ok(Some(blocks(&owned)?.into()));
    }
    let texts: Vec<String> = system.iter().map(|m| m.text()).collect();
    Ok(Some(texts.join("\n\n").into()))
}

fn assistant(m: &ChatMessage) -> Result<Value, String> {
    let mut content = blocks(&m.content)?;
    for c in &m.tool_calls {
        let input: Value = if c.function.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&c.function.arguments).map_err(|e| {
                format!(
                    "tool call '{}' has arguments that are not JSON ({e}); Anthropic needs an object",
                    c.function.name
                )
            })?
        };
        if !input.is_object() {
            return Err(format!(
                "tool call '{}' has arguments that are not a JSON object; Anthropic needs one",
                c.function.name
            ));
        }
        content
            .push(json!({"type": "tool_use", "id": c.id, "name": c.function.name, "input": input}));
    }
    Ok(json!({"role": "assistant", "content": content}))
}

fn tool_result(m: &ChatMessage) -> Result<Value, String> {
    let id = m
        .tool_call_id
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or("a tool message has no tool_call_id")?;
    // All-text content travels as one string, mixed content as native blocks (in order).
    let all_text = m
        .content
        .iter()
        .all(|b| matches!(b, ContentBlock::Text { .. }));
    let content: Value = if all_text {
        m.text().into()
    } else {
        blocks(&m.content)?.into()
    };
    Ok(json!({"type": "tool_result", "tool_use_id": id, "content": content}))
}

/// Canonical blocks to Anthropic blocks; empty text blocks are dropped (Anthropic rejects them).
fn blocks(content: &[ContentBlock]) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(content.len());
    for b in content {
        match b {
            ContentBlock::Text { text } if text.is_empty() => {}
            ContentBlock::Text { text } => out.push(json!({"type": "text", "text": text})),
            ContentBlock::ImageUrl { image_url } => out.push(image(&image_url.url)?),
            // DataDesigner's Anthropic adapter refuses them too: the Messages API has no
            // audio or video block.
            ContentBlock::AudioUrl { .. } | ContentBlock::InputAudio { .. } => {
                return Err("Anthropic's Messages API takes no audio context blocks; \
                            use an OpenAI-compatible provider that accepts audio"
                    .into());
            }
            ContentBlock::VideoUrl { .. } => {
                return Err("Anthropic's Messages API takes no video context blocks; \
                            use an OpenAI-compatible provider that accepts video"
                    .into());
            }
        }
    }
    Ok(out)
}

/// `data:<mime>;base64,<data>` becomes a base64 source, an http(s) URL a url source.
fn image(url: &str) -> Result<Value, String> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (meta, data) = rest
            .split_once(',')
            .ok_or("an image data URI has no ',' separator")?;
        let media_type = meta
            .strip_suffix(";base64")
            .ok_or("Anthropic accepts only base64 image data URIs")?;
        return Ok(json!({"type": "image", "source":
            {"type": "base64", "media_type": media_type, "data": data}}));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(json!({"type": "image", "source": {"type": "url", "url": url}}));
    }
    Err("an image URL is neither a data URI nor http(s)".into())
}

/// Reads `content`, `stop_reason` and `usage` from a 2xx body.
pub(crate) fn parse_response(body: &Value) -> Result<Parsed, String> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or("response has no `content` array")?;
    let mut texts = Vec::new();
    let mut thinking = Vec::new();
    let mut calls = Vec::new();
    for b in content {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => texts.push(b.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("thinking") => {
                thinking.push(
                    b.get("thinking")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                );
            }
            Some("tool_use") => {
                // A missing id is generated (as for OpenAI): the conversation sent back
                // carries it on both the `tool_use` and its `tool_result`.
                let id = b
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map_or_else(
                        || format!("toolu_{}", uuid::Uuid::new_v4().simple()),
                        str::to_owned,
                    );
                let name = b.get("name").and_then(Value::as_str).unwrap_or_default();
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(ToolCall::new(id, name, input.to_string()));
            }
            // redacted_thinking and future block types carry nothing for the trace.
            _ => {}
        }
    }
    let mut message = ChatMessage::assistant(texts.join("\n"));
    message.reasoning_content = Some(thinking.join("\n")).filter(|s| !s.is_empty());
    message.tool_calls = calls;
    let usage = body.get("usage").map(usage).unwrap_or_default();
    Ok(Parsed {
        message,
        finish_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage,
    })
}

fn usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        // Cached input is billed input too; Anthropic reports it apart from `input_tokens`.
        prompt_tokens: n("input_tokens")
            + n("cache_creation_input_tokens")
            + n("cache_read_input_tokens"),
        completion_tokens: n("output_tokens"),
        reasoning_tokens: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolSpec;

    #[test]
    fn tool_choice_maps_as_datadesigner_does() {
        assert_eq!(
            tool_choice(&json!("auto")).unwrap(),
            json!({"type": "auto"})
        );
        assert_eq!(
            tool_choice(&json!("required")).unwrap(),
            json!({"type": "any"})
        );
        assert_eq!(
            tool_choice(&json!("none")).unwrap(),
            json!({"type": "none"})
        );
        assert_eq!(
            tool_choice(&json!({"type": "function", "function": {"name": "f"}})).unwrap(),
            json!({"type": "tool", "name": "f"})
        );
        assert!(tool_choice(&json!("sometimes")).is_err());
    }

    fn sample_request() -> ChatRequest {
        let mut a = ChatMessage::assistant("");
        a.reasoning_content = Some("dropped".into());
        a.tool_calls = vec![
            ToolCall::new("call_a", "get_fact", r#"{"topic": "math"}"#),
            ToolCall::new("call_c", "render", ""),
        ];
        ChatRequest::new(vec![
            ChatMessage::system("Use tools."),
            ChatMessage::system("Be brief."),
            ChatMessage::user("q"),
            a,
            ChatMessage::tool_text("call_a", "42"),
            ChatMessage::tool(
                "call_c",
                vec![
                    ContentBlock::text("Rendered:"),
                    ContentBlock::text(""),
                    ContentBlock::image_url("data:image/png;base64,iVBORw0KGgo="),
                ],
            ),
        ])
        .with_tools(vec![ToolSpec::new(
            "get_fact".into(),
            "facts".into(),
            json!({"type": "object"}),
        )])
    }

    #[test]
    fn lowers_system_tools_tool_use_and_merged_tool_results() {
        let body = build_body(
            "claude",
            &sample_request(),
            &Sampled::default(),
            &Map::new(),
        )
        .unwrap();
        assert_eq!(body["system"], "Use tools.\n\nBe brief.");
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(
            body["tools"],
            json!([{"name": "get_fact", "description": "facts", "input_schema": {"type": "object"}}])
        );
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3, "{msgs:#?}");
        assert_eq!(
            msgs[0],
            json!({"role": "user", "content": [{"type": "text", "text": "q"}]})
        );
        assert_eq!(
            msgs[1],
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_a", "name": "get_fact", "input": {"topic": "math"}},
                {"type": "tool_use", "id": "call_c", "name": "render", "input": {}}]})
        );
        assert_eq!(
            msgs[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "42"},
                {"type": "tool_result", "tool_use_id": "call_c", "content": [
                    {"type": "text", "text": "Rendered:"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": "iVBORw0KGgo="}}]}]})
        );
    }

    #[test]
    fn params_and_extra_body() {
        let sampled = Sampled {
            temperature: Some(0.2),
            top_p: Some(0.9),
            max_tokens: Some(50),
        };
        let extra = json!({"top_k": 5}).as_object().cloned().unwrap();
        let body = build_body(
            "c",
            &ChatRequest::new(vec![ChatMessage::user("x")]),
            &sampled,
            &extra,
        )
        .unwrap();
        assert_eq!(body["max_tokens"], 50);
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(body["top_p"], 0.9);
        assert_eq!(body["top_k"], 5);
        assert!(body.get("system").is_none() && body.get("tools").is_none());
    }

    #[test]
    fn rejects_what_anthropic_cannot_express() {
        let mut a = ChatMessage::assistant("");
        a.tool_calls = vec![ToolCall::new("c", "f", "[1, 2]")];
        let req = ChatRequest::new(vec![ChatMessage::user("x"), a]);
        let err = build_body("c", &req, &Sampled::default(), &Map::new()).unwrap_err();
        assert!(err.contains("not a JSON object"), "{err}");
        assert!(image("data:image/png,abc").is_err());
        assert_eq!(image("https://x/y.png").unwrap()["source"]["type"], "url");
    }

    #[test]
    fn parses_thinking_text_and_tool_use() {
        let body = json!({
            "content": [
                {"type": "thinking", "thinking": "a", "signature": "s"},
                {"type": "thinking", "thinking": "b"},
                {"type": "text", "text": "hello"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 2}
        });
        let p = parse_response(&body).unwrap();
        assert_eq!(p.message.text(), "hello");
        assert_eq!(p.message.reasoning_content.as_deref(), Some("a\nb"));
        assert_eq!(
            p.message.tool_calls,
            vec![ToolCall::new("toolu_1", "f", r#"{"x":1}"#)]
        );
        assert_eq!(p.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!((p.usage.prompt_tokens, p.usage.completion_tokens), (10, 2));
        assert!(parse_response(&json!({"type": "message"})).is_err());
    }
}
