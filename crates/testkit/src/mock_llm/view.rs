//! One neutral view of an incoming request, whichever protocol it used, for rule matching,
//! the default reply and token counts.

use serde_json::Value;

use super::script::Api;

/// What the rules can look at.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// Protocol of the request.
    pub api: Api,
    /// The `model` field.
    pub model: String,
    /// System prompt text (all system parts joined with a newline).
    pub system: String,
    /// Text of the last user message that has text (tool results excluded).
    pub last_user: String,
    /// Assistant messages so far.
    pub assistant_turns: u32,
    /// Tools were offered.
    pub has_tools: bool,
    /// The last message is a tool result.
    pub last_is_tool_result: bool,
    /// Text of the tool results at the end of the conversation (empty when it does not end
    /// with tool results).
    pub last_tool_text: String,
    /// `tool_choice` forbids tool calls (`"none"`, or Anthropic's `{"type": "none"}`).
    pub tools_forbidden: bool,
    /// All text of the request (system, messages, tool results), for `<response_schema>`
    /// lookup and token counts.
    pub all_text: String,
    /// An OpenAI message's `content` is a list of text parts only (what llama-cpp-python's
    /// server refuses, see `Faults::string_content_only`).
    pub text_part_lists: bool,
}

/// Text of a string, or of the text blocks of a block list (tool_result contents included).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                Some("tool_result") => b.get("content").map(text_of).unwrap_or_default(),
                _ => String::new(),
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn is_tool_result_message(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .is_some_and(|bs| {
            !bs.is_empty()
                && bs
                    .iter()
                    .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        })
}

impl View {
    /// Reads a request body of either protocol. Never fails: missing fields read as empty.
    pub fn of(api: Api, body: &Value) -> Self {
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let role = |m: &Value| {
            m.get("role")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let mut system_parts: Vec<String> = Vec::new();
        if api == Api::Anthropic
            && let Some(s) = body.get("system")
        {
            system_parts.push(text_of(s));
        }
        let mut last_user = match api {
            Api::Embeddings => match body.get("input") {
                Some(Value::Array(xs)) => xs
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n"),
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            },
            Api::Images => body
                .get("prompt")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Api::Openai | Api::Anthropic => String::new(),
        };
        let mut assistant_turns = 0;
        let mut all_text: Vec<String> = system_parts.clone();
        if !last_user.is_empty() {
            all_text.push(last_user.clone());
        }
        for m in messages {
            let text = m.get("content").map(text_of).unwrap_or_default();
            match (api, role(m).as_str()) {
                (_, "system") => system_parts.push(text.clone()),
                (_, "assistant") => assistant_turns += 1,
                (Api::Anthropic, "user") if is_tool_result_message(m) => {}
                (_, "user") if !text.is_empty() => last_user.clone_from(&text),
                _ => {}
            }
            all_text.push(text);
        }
        let last_is_tool_result = messages.last().is_some_and(|m| match api {
            Api::Openai | Api::Embeddings | Api::Images => role(m) == "tool",
            Api::Anthropic => role(m) == "user" && is_tool_result_message(m),
        });
        let mut trailing = Vec::new();
        for m in messages.iter().rev() {
            let is_result = match api {
                Api::Openai | Api::Embeddings | Api::Images => role(m) == "tool",
                Api::Anthropic => role(m) == "user" && is_tool_result_message(m),
            };
            if !is_result {
                break;
            }
            trailing.push(m.get("content").map(text_of).unwrap_or_default());
        }
        trailing.reverse();
        let text_part_lists = api == Api::Openai
            && messages.iter().any(|m| {
                m.get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|bs| {
                        bs.iter()
                            .all(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    })
            });
        let tools_forbidden = match body.get("tool_choice") {
            Some(Value::String(s)) => s == "none",
            Some(o) => o.get("type").and_then(Value::as_str) == Some("none"),
            None => false,
        };
        Self {
            api,
            text_part_lists,
            last_tool_text: trailing.join("\n"),
            tools_forbidden,
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            system: system_parts.join("\n"),
            last_user,
            assistant_turns,
            has_tools: body
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty()),
            last_is_tool_result,
            all_text: all_text.join("\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_view() {
        let v = View::of(
            Api::Openai,
            &json!({"model": "m", "tools": [{"type": "function"}], "messages": [
                {"role": "system", "content": [{"type": "text", "text": "sys"}]},
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "", "tool_calls": []},
                {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "42"}]}
            ]}),
        );
        assert_eq!(v.model, "m");
        assert_eq!(v.system, "sys");
        assert_eq!(v.last_user, "first");
        assert_eq!(v.assistant_turns, 1);
        assert!(v.has_tools && v.last_is_tool_result);
        assert!(v.all_text.contains("42"));
    }

    #[test]
    fn anthropic_view_skips_tool_results_as_user_text() {
        let v = View::of(
            Api::Anthropic,
            &json!({"model": "c", "system": "be brief", "messages": [
                {"role": "user", "content": [{"type": "text", "text": "question"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}
            ]}),
        );
        assert_eq!(v.system, "be brief");
        assert_eq!(v.last_user, "question");
        assert!(v.last_is_tool_result && !v.has_tools);
        assert_eq!(v.assistant_turns, 1);
    }
}
