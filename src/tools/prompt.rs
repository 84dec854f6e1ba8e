//! Prompt-based tool calling (LlamaFarm's `tool_call_strategy: prompt_based`), for models
//! without a native tools API: the tool list goes into the system prompt, and
//! `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks are read from the reply.
//!
//! The conversation (and so the trace) keeps the standard shape: assistant `tool_calls` and
//! `tool` messages. [`lower`] rewrites it into plain text turns just before each request,
//! because a provider without tool support would reject those message kinds.

use serde_json::{Value, json};

use crate::llm::{ChatMessage, ContentBlock, Role, ToolCall, ToolSpec};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// LlamaFarm's system-prompt addition, with the tools in OpenAI function format.
pub fn system_section(specs: &[ToolSpec]) -> String {
    let mut s = String::from(
        "You may call one or more tools to assist with the user query.\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n",
    );
    for t in specs {
        let f = json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}});
        s.push_str(&format!("<tool>{f}</tool>\n"));
    }
    s.push_str(
        "</tools>\nFor each tool call, return a json object with function name and arguments \
         within <tool_call></tool_call> XML tags:\n<tool_call>\n\
         {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    s
}

/// Splits a reply into its text without the `<tool_call>` blocks, and the calls, with ids
/// `call_<turn>_<n>`. A block that is not valid JSON still becomes a call, with the raw text as
/// arguments, so the tool loop can tell the model what was wrong.
pub fn parse_calls(text: &str, turn: u32) -> (String, Vec<ToolCall>) {
    let mut rest = text;
    let mut kept = String::new();
    let mut calls = Vec::new();
    while let Some(start) = rest.find(OPEN) {
        kept.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let (body, next) = match after.find(CLOSE) {
            Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
            None => (after, ""),
        };
        let id = format!("call_{turn}_{}", calls.len());
        calls.push(match serde_json::from_str::<Value>(body.trim()) {
            Ok(Value::Object(o)) => {
                let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
                let args = match o.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "{}".to_owned(),
                };
                ToolCall::new(id, name, args)
            }
            _ => ToolCall::new(id, "", body.trim()),
        });
        rest = next;
    }
    kept.push_str(rest);
    (kept.trim().to_owned(), calls)
}

/// The conversation as a model without tool support sees it: the tools section appended to
/// the system prompt (or as one), assistant calls written back as `<tool_call>` blocks, and
/// each run of tool results as one user message of `<tool_response>` blocks (images kept).
pub fn lower(messages: &[ChatMessage], specs: &[ToolSpec]) -> Vec<ChatMessage> {
    let section = system_section(specs);
    let mut out = Vec::with_capacity(messages.len() + 1);
    if !messages.iter().any(|m| m.role == Role::System) {
        out.push(ChatMessage::system(section.clone()));
    }
    for m in messages {
        match m.role {
            Role::System => {
                let text = m.text();
                out.push(ChatMessage::system(format!("{text}\n\n{section}")));
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut text = m.text();
                for c in &m.tool_calls {
                    let args: Value = serde_json::from_str(&c.function.arguments)
                        .unwrap_or_else(|_| Value::String(c.function.arguments.clone()));
                    let call = json!({"name": c.function.name, "arguments": args});
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("{OPEN}\n{call}\n{CLOSE}"));
                }
                out.push(ChatMessage::assistant(text));
            }
            Role::Tool => {
                let mut blocks = vec![ContentBlock::text("<tool_response>")];
                blocks.extend(m.content.iter().cloned());
                blocks.push(ContentBlock::text("</tool_response>"));
                match out.last_mut() {
                    Some(prev)
                        if prev.role == Role::User
                            && prev.tool_call_id.is_none()
                            && ends_with_response(prev) =>
                    {
                        prev.content.extend(blocks);
                    }
                    _ => out.push(ChatMessage::user_blocks(blocks)),
                }
            }
            _ => out.push(m.clone()),
        }
    }
    out
}

fn ends_with_response(m: &ChatMessage) -> bool {
    matches!(m.content.last(), Some(ContentBlock::Text { text }) if text == "</tool_response>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: "Echo".into(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn parses_blocks_and_keeps_the_rest_of_the_text() {
        let (text, calls) = parse_calls(
            "Let me check.\n<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>\n<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}}</tool_call>",
            1,
        );
        assert_eq!(text, "Let me check.");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "call_1_0");
        assert_eq!(calls[0].function.name, "echo");
        assert_eq!(calls[0].function.arguments, r#"{"text":"hi"}"#);
        assert_eq!(calls[1].function.name, "add");
    }

    #[test]
    fn a_broken_block_is_still_a_call_so_the_model_hears_about_it() {
        let (_, calls) = parse_calls("<tool_call>{oops</tool_call>", 2);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].function.name, "");
        assert_eq!(calls[0].function.arguments, "{oops");
        assert!(parse_calls("no calls here", 1).1.is_empty());
    }

    #[test]
    fn lowers_calls_and_results_to_text_turns() {
        let mut a = ChatMessage::assistant("");
        a.tool_calls = vec![ToolCall::new("c1", "echo", r#"{"text":"hi"}"#)];
        let msgs = vec![
            ChatMessage::user("q"),
            a,
            ChatMessage::tool_text("c1", "hi"),
            ChatMessage::tool_text("c2", "there"),
        ];
        let out = lower(&msgs, &[spec()]);
        assert_eq!(out[0].role, Role::System);
        assert!(
            out[0]
                .text()
                .contains(r#"<tool>{"type":"function","function":{"name":"echo""#),
            "{}",
            out[0].text()
        );
        assert_eq!(out[2].role, Role::Assistant);
        assert!(out[2].tool_calls.is_empty());
        assert_eq!(
            out[2].text(),
            "<tool_call>\n{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}\n</tool_call>"
        );
        assert_eq!(out.len(), 4, "two results merge into one user turn");
        assert_eq!(out[3].role, Role::User);
        assert_eq!(
            out[3].text(),
            "<tool_response>\nhi\n</tool_response>\n<tool_response>\nthere\n</tool_response>"
        );
    }
}
