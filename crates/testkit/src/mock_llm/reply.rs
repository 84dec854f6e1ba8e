//! The mock's answers as protocol bodies: success bodies for both protocols, error bodies, the
//! deterministic default reply (including a minimal JSON object for `<response_schema>`
//! prompts), and token counts (characters / 4, rounded up).

use serde_json::{Map, Value, json};

use super::script::Api;
use super::view::View;

/// An assistant answer before it is put into a protocol's shape.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer {
    pub text: String,
    pub reasoning: Option<String>,
    /// (id, name, arguments: object or verbatim string, broken: sent without `function`)
    pub tool_calls: Vec<(String, String, Value, bool)>,
    pub finish_reason: Option<String>,
    /// Add the mock's PNG as `message.images` (OpenAI; image models on the chat route).
    pub image: bool,
}

/// Deterministic token estimate: characters / 4, rounded up.
pub(crate) fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// A JSON value fenced the way DataDesigner's structured prompts ask for.
pub(crate) fn fenced_json(v: &Value) -> String {
    let pretty = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    format!("```json\n{pretty}\n```")
}

/// What the mock says when no rule matched: a JSON object when the prompt asks for JSON
/// (satisfying a `<response_schema>` when there is one), else `mock reply: <prompt start>`.
pub(crate) fn default_text(v: &View) -> String {
    if let Some(schema) = response_schema(&v.all_text) {
        return fenced_json(&minimal_instance(&schema, &schema, 0));
    }
    if v.all_text.to_lowercase().contains("json format") {
        return fenced_json(&json!({}));
    }
    let head: String = v.last_user.chars().take(60).collect();
    format!("mock reply: {head}")
}

/// The schema between `<response_schema>` tags (DataDesigner's structured-output recipe).
fn response_schema(text: &str) -> Option<Value> {
    let start = text.rfind("<response_schema>")? + "<response_schema>".len();
    let len = text[start..].find("</response_schema>")?;
    serde_json::from_str(text[start..start + len].trim()).ok()
}

/// The smallest plausible instance of `schema`: required properties only, first enum value,
/// lower bounds, `minItems` copies. `$ref`s into `$defs`/`definitions` are followed.
pub(crate) fn minimal_instance(schema: &Value, root: &Value, depth: u32) -> Value {
    if depth > 24 {
        return Value::Null;
    }
    let next = |s: &Value| minimal_instance(s, root, depth + 1);
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .map_or(Value::Null, next);
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let pick = alts
                .iter()
                .find(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .or(alts.first());
            return pick.map_or(Value::Null, next);
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    };
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    match ty.or_else(|| schema.get("properties").map(|_| "object")) {
        Some("object") => {
            let props = schema.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let sub = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_owned(), next(sub));
            }
            Value::Object(out)
        }
        Some("array") => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").map_or(Value::Null, next);
            Value::Array((0..n).map(|_| item.clone()).collect())
        }
        Some("string") => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
            let s = match schema.get("format").and_then(Value::as_str) {
                Some("date") => "2024-01-01".to_owned(),
                Some("date-time") => "2024-01-01T00:00:00Z".to_owned(),
                Some("email") => "mock@example.com".to_owned(),
                Some("uri") => "https://example.com".to_owned(),
                _ => "mock".to_owned(),
            };
            let pad = usize::try_from(min).unwrap_or(0).saturating_sub(s.len());
            Value::String(s + &"x".repeat(pad))
        }
        // The lower bound if there is one, else 0; then clamped under the upper bound.
        Some("integer") => {
            let lo = num("minimum")
                .map(f64::ceil)
                .or_else(|| num("exclusiveMinimum").map(|x| x.floor() + 1.0));
            let v = lo.unwrap_or(0.0);
            json!(num("maximum").map_or(v, |m| v.min(m.floor())) as i64)
        }
        Some("number") => {
            let lo = num("minimum").or_else(|| num("exclusiveMinimum").map(|x| x + 0.5));
            let v = lo.unwrap_or(0.0);
            json!(num("maximum").map_or(v, |m| v.min(m)))
        }
        Some("boolean") => Value::Bool(false),
        _ => Value::Null,
    }
}

/// A 200 body in the protocol's shape.
pub(crate) fn success_body(
    api: Api,
    model: &str,
    seq: u64,
    a: &Answer,
    prompt_tokens: u64,
) -> Value {
    let args_text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let completion_tokens = tokens(&a.text)
        + a.reasoning.as_deref().map_or(0, tokens)
        + a.tool_calls
            .iter()
            .map(|(_, n, v, _)| tokens(n) + tokens(&args_text(v)))
            .sum::<u64>();
    match api {
        // Embeddings and images are answered by `media`; an image model on the chat route is
        // `Api::Openai`.
        Api::Openai | Api::Embeddings | Api::Images => {
            let mut msg = Map::new();
            msg.insert("role".into(), "assistant".into());
            let content = if a.text.is_empty() && !a.tool_calls.is_empty() {
                Value::Null
            } else {
                a.text.clone().into()
            };
            msg.insert("content".into(), content);
            if let Some(r) = &a.reasoning {
                msg.insert("reasoning_content".into(), r.clone().into());
            }
            if a.image {
                msg.insert("images".into(), json!([super::media::png_image_url()]));
            }
            if !a.tool_calls.is_empty() {
                let calls: Vec<Value> = a
                    .tool_calls
                    .iter()
                    .map(|(id, name, args, broken)| {
                        if *broken {
                            return json!({"id": id, "type": "function", "name": name});
                        }
                        json!({"id": id, "type": "function",
                               "function": {"name": name, "arguments": args_text(args)}})
                    })
                    .collect();
                msg.insert("tool_calls".into(), calls.into());
            }
            let finish = a.finish_reason.clone().unwrap_or_else(|| {
                if a.tool_calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                }
                .to_owned()
            });
            json!({
                "id": format!("chatcmpl-mock-{seq}"), "object": "chat.completion",
                "created": 0, "model": model,
                "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}
            })
        }
        Api::Anthropic => {
            let mut content = Vec::new();
            if let Some(r) = &a.reasoning {
                content.push(json!({"type": "thinking", "thinking": r, "signature": "mock"}));
            }
            if !a.text.is_empty() || a.tool_calls.is_empty() {
                content.push(json!({"type": "text", "text": a.text}));
            }
            for (id, name, args, _) in &a.tool_calls {
                // Anthropic inputs are objects; a scripted string is parsed when it can be.
                let input = match args {
                    Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
                    other => other.clone(),
                };
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            }
            let stop = a.finish_reason.clone().unwrap_or_else(|| {
                if a.tool_calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                }
                .to_owned()
            });
            json!({
                "id": format!("msg_mock_{seq}"), "type": "message", "role": "assistant",
                "model": model, "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}
            })
        }
    }
}

/// An error body: the scripted one (string as text, else JSON) or the protocol's usual shape.
/// Returns (content type, bytes).
pub(crate) fn error_body(api: Api, status: u16, body: Option<&Value>) -> (&'static str, Vec<u8>) {
    match body {
        Some(Value::String(s)) => ("text/plain; charset=utf-8", s.clone().into_bytes()),
        Some(v) => ("application/json", v.to_string().into_bytes()),
        None => {
            let message = format!("mock error (HTTP {status})");
            let v = match api {
                Api::Openai | Api::Embeddings | Api::Images => {
                    json!({"error": {"message": message, "type": "mock_error",
                                                "code": status}})
                }
                Api::Anthropic => json!({"type": "error",
                                         "error": {"type": "api_error", "message": message}}),
            };
            ("application/json", v.to_string().into_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_instances_satisfy_required_fields() {
        let schema = json!({
            "type": "object", "required": ["title", "score", "tags", "kind", "when", "ref"],
            "properties": {
                "title": {"type": "string", "minLength": 6},
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
                "tags": {"type": "array", "minItems": 2, "items": {"type": "string"}},
                "kind": {"enum": ["a", "b"]},
                "when": {"type": ["string", "null"], "format": "date"},
                "ref": {"$ref": "#/$defs/Inner"},
                "optional": {"type": "string"}
            },
            "$defs": {"Inner": {"type": "object", "required": ["ok"],
                                "properties": {"ok": {"type": "boolean"}}}}
        });
        assert_eq!(
            minimal_instance(&schema, &schema, 0),
            json!({"title": "mockxx", "score": 1, "tags": ["mock", "mock"], "kind": "a",
                   "when": "2024-01-01", "ref": {"ok": false}})
        );
        let neg = json!({"type": "integer", "maximum": -3});
        assert_eq!(minimal_instance(&neg, &neg, 0), json!(-3));
    }

    #[test]
    fn default_reply_follows_the_prompt() {
        let mut v = View {
            api: Api::Openai,
            model: "m".into(),
            system: String::new(),
            last_user: "x".repeat(100),
            assistant_turns: 0,
            has_tools: false,
            last_is_tool_result: false,
            last_tool_text: String::new(),
            tools_forbidden: false,
            all_text: String::new(),
            text_part_lists: false,
        };
        assert_eq!(default_text(&v), format!("mock reply: {}", "x".repeat(60)));
        v.all_text = r#"Answer. <response_schema>{"type":"object","required":["n"],
            "properties":{"n":{"type":"number"}}}</response_schema>"#
            .into();
        assert_eq!(default_text(&v), "```json\n{\n  \"n\": 0.0\n}\n```");
        v.all_text = "Your response must be in JSON format.".into();
        assert_eq!(default_text(&v), "```json\n{}\n```");
    }

    #[test]
    fn bodies_have_deterministic_usage() {
        let a = Answer {
            text: "abcdefgh".into(),
            ..Answer::default()
        };
        let b = success_body(Api::Openai, "m", 1, &a, 3);
        assert_eq!(b["usage"]["completion_tokens"], 2);
        assert_eq!(b["choices"][0]["finish_reason"], "stop");
        let b = success_body(Api::Anthropic, "m", 1, &a, 3);
        assert_eq!(b["usage"], json!({"input_tokens": 3, "output_tokens": 2}));
        let (ct, body) = error_body(Api::Anthropic, 529, None);
        assert_eq!(ct, "application/json");
        assert!(String::from_utf8(body).unwrap().contains("HTTP 529"));
    }
}
