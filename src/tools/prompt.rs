//! Prompt-based tool calling (LlamaFarm's `tool_call_strategy: prompt_based`), for models
//! without a native tools API: the tool list goes into the system prompt, and calls are read
//! from the reply's text, in this order (the first format found is the only one read):
//!
//! 1. `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (LlamaFarm's format,
//!    the one the system prompt asks for);
//! 2. `TOOL: name` then, on a following line, `PARAMETERS: {json}` (the MCP client
//!    tool-execution guide's format; the name is letters, digits, `_` and `-`, the JSON may
//!    span lines);
//! 3. with the model's `tool_call_fallback`, "use the X tool" for an offered tool X (any case),
//!    which calls X with no arguments.
//!
//! A block that cannot be read (not JSON, not an object, JSON after `PARAMETERS:` that is
//! broken) still becomes a call, marked unreadable, so the model is told what was wrong.
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

/// Splits a reply into its text without the call blocks, and the calls, with ids
/// `call_<turn>_<n>` (see the module doc for the formats and their order). `mentions` are the
/// offered tool names when the "use the X tool" fallback is on.
pub fn parse_calls(text: &str, turn: u32, mentions: Option<&[String]>) -> (String, Vec<ToolCall>) {
    let (kept, calls) = tagged(text, turn);
    if !calls.is_empty() {
        return (kept, calls);
    }
    let (kept, calls) = tool_lines(text, turn);
    if !calls.is_empty() {
        return (kept, calls);
    }
    let calls = mentions
        .map(|m| mentioned(text, m, turn))
        .unwrap_or_default();
    (text.trim().to_owned(), calls)
}

fn call_id(turn: u32, n: usize) -> String {
    format!("call_{turn}_{n}")
}

/// The `<tool_call>` blocks.
fn tagged(text: &str, turn: u32) -> (String, Vec<ToolCall>) {
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
        let id = call_id(turn, calls.len());
        let body = body.trim();
        calls.push(match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(o)) => {
                let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
                match o.get("arguments") {
                    Some(Value::String(s)) => ToolCall::new(id, name, s.clone()),
                    Some(v @ Value::Object(_)) => ToolCall::new(id, name, v.to_string()),
                    None => ToolCall::new(id, name, "{}"),
                    Some(other) => ToolCall::unreadable(
                        id,
                        name,
                        other.to_string(),
                        "the \"arguments\" of a <tool_call> block must be a JSON object",
                    ),
                }
            }
            Ok(_) => ToolCall::unreadable(
                id,
                "",
                body,
                "a <tool_call> block must hold a JSON object like {\"name\": \"tool\", \"arguments\": {...}}",
            ),
            Err(e) => ToolCall::unreadable(
                id,
                "",
                body,
                format!("a <tool_call> block is not valid JSON ({e})"),
            ),
        });
        rest = next;
    }
    kept.push_str(rest);
    (kept.trim().to_owned(), calls)
}

const TOOL: &str = "TOOL:";
const PARAMETERS: &str = "PARAMETERS:";

/// `TOOL: name` / `PARAMETERS: {json}` pairs. A `TOOL:` without a name, a line break and
/// `PARAMETERS:` is not a call (as the guide's pattern would not match it); JSON after
/// `PARAMETERS:` that does not parse is an unreadable call, read to the end of its line.
fn tool_lines(text: &str, turn: u32) -> (String, Vec<ToolCall>) {
    let mut kept = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(TOOL) {
        let after = &rest[start + TOOL.len()..];
        let Some((name, args_at)) = tool_header(after) else {
            kept.push_str(&rest[..start + TOOL.len()]);
            rest = after;
            continue;
        };
        kept.push_str(&rest[..start]);
        let params = &after[args_at..];
        let id = call_id(turn, calls.len());
        let mut stream = serde_json::Deserializer::from_str(params).into_iter::<Value>();
        match stream.next() {
            Some(Ok(v @ Value::Object(_))) => {
                calls.push(ToolCall::new(id, name, v.to_string()));
                rest = &params[stream.byte_offset()..];
            }
            other => {
                let line = params.find('\n').map_or(params, |e| &params[..e]);
                let why = match other {
                    Some(Err(e)) => format!("the JSON after PARAMETERS: is not valid ({e})"),
                    _ => "PARAMETERS: must be followed by a JSON object".to_owned(),
                };
                calls.push(ToolCall::unreadable(id, name, line.trim(), why));
                rest = &params[line.len()..];
            }
        }
    }
    kept.push_str(rest);
    (kept.trim().to_owned(), calls)
}

/// After `TOOL:`: the name, then at least one line break, then `PARAMETERS:`; returns the name
/// and where the JSON starts.
fn tool_header(after: &str) -> Option<(&str, usize)> {
    let name_at = after.len() - after.trim_start().len();
    let name_len = after[name_at..]
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(after.len() - name_at);
    if name_len == 0 {
        return None;
    }
    let name = &after[name_at..name_at + name_len];
    let tail = &after[name_at + name_len..];
    let gap = tail.len() - tail.trim_start().len();
    if !tail[..gap].contains(['\n', '\r']) || !tail[gap..].starts_with(PARAMETERS) {
        return None;
    }
    let params = &tail[gap + PARAMETERS.len()..];
    let json_at = params.len() - params.trim_start().len();
    Some((name, after.len() - params.len() + json_at))
}

/// The fallback: each offered tool the text asks to "use the X tool" for, in offer order.
fn mentioned(text: &str, names: &[String], turn: u32) -> Vec<ToolCall> {
    let lower = text.to_lowercase();
    names
        .iter()
        .filter(|n| lower.contains(&format!("use the {} tool", n.to_lowercase())))
        .enumerate()
        .map(|(i, n)| ToolCall::new(call_id(turn, i), n.as_str(), "{}"))
        .collect()
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
        ToolSpec::new("echo".into(), "Echo".into(), json!({"type": "object"}))
    }

    #[test]
    fn parses_blocks_and_keeps_the_rest_of_the_text() {
        let (text, calls) = parse_calls(
            "Let me check.\n<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>\n<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}}</tool_call>",
            1,
            None,
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
        let (_, calls) = parse_calls("<tool_call>{oops</tool_call>", 2, None);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].function.name, "");
        assert_eq!(calls[0].function.arguments, "{oops");
        let why = calls[0].unreadable.as_deref().unwrap();
        assert!(
            why.starts_with("a <tool_call> block is not valid JSON ("),
            "{why}"
        );
        let (_, calls) = parse_calls("<tool_call>[1]</tool_call>", 2, None);
        assert!(
            calls[0]
                .unreadable
                .as_deref()
                .unwrap()
                .contains("JSON object")
        );
        let (_, calls) = parse_calls(
            r#"<tool_call>{"name": "echo", "arguments": [1]}</tool_call>"#,
            2,
            None,
        );
        assert_eq!(calls[0].function.name, "echo");
        assert!(calls[0].unreadable.is_some());
        assert!(parse_calls("no calls here", 1, None).1.is_empty());
    }

    #[test]
    fn reads_tool_and_parameters_lines() {
        let text = "I will look it up.\nTOOL: get-time_2\nPARAMETERS: {\"tz\": \"UTC\",\n  \"fmt\": {\"iso\": true}}\nand then\nTOOL: echo\r\n\n  PARAMETERS:{}";
        let (kept, calls) = parse_calls(text, 3, None);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "call_3_0");
        assert_eq!(calls[0].function.name, "get-time_2");
        assert_eq!(
            calls[0].function.arguments,
            r#"{"tz":"UTC","fmt":{"iso":true}}"#
        );
        assert_eq!(calls[1].function.name, "echo");
        assert_eq!(calls[1].function.arguments, "{}");
        assert!(calls.iter().all(|c| c.unreadable.is_none()));
        assert_eq!(kept, "I will look it up.\n\nand then");
    }

    #[test]
    fn tool_lines_that_are_not_calls_or_are_broken() {
        // No line break between the name and PARAMETERS:, or no name: prose, not a call.
        let (kept, calls) = parse_calls("TOOL: echo PARAMETERS: {}", 1, None);
        assert!(calls.is_empty());
        assert_eq!(kept, "TOOL: echo PARAMETERS: {}");
        assert!(parse_calls("TOOL:\nPARAMETERS: {}", 1, None).1.is_empty());
        // Broken JSON: an unreadable call, read to the end of its line.
        let (kept, calls) = parse_calls("TOOL: echo\nPARAMETERS: {\"text\": oops}\nDone.", 1, None);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].function.name, "echo");
        assert_eq!(calls[0].function.arguments, "{\"text\": oops}");
        let why = calls[0].unreadable.as_deref().unwrap();
        assert!(
            why.starts_with("the JSON after PARAMETERS: is not valid"),
            "{why}"
        );
        assert_eq!(kept, "Done.");
        let (_, calls) = parse_calls("TOOL: echo\nPARAMETERS: [1, 2]", 1, None);
        assert_eq!(
            calls[0].unreadable.as_deref(),
            Some("PARAMETERS: must be followed by a JSON object")
        );
    }

    #[test]
    fn tool_call_blocks_win_over_tool_lines_and_mentions() {
        let text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nTOOL: b\nPARAMETERS: {}\nuse the c tool";
        let names = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let (_, calls) = parse_calls(text, 1, Some(&names));
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].function.name, "a");
        let (_, calls) = parse_calls("TOOL: b\nPARAMETERS: {}\nuse the c tool", 1, Some(&names));
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].function.name, "b");
    }

    #[test]
    fn the_mention_fallback_is_opt_in() {
        let names = vec!["get_time".to_owned(), "echo".to_owned()];
        let text = "I should Use the GET_TIME tool first, then use the echo tool.";
        assert!(parse_calls(text, 1, None).1.is_empty());
        let (kept, calls) = parse_calls(text, 1, Some(&names));
        assert_eq!(kept, text);
        let got: Vec<(&str, &str)> = calls
            .iter()
            .map(|c| (c.function.name.as_str(), c.function.arguments.as_str()))
            .collect();
        assert_eq!(got, [("get_time", "{}"), ("echo", "{}")]);
        assert!(
            parse_calls("use the clock tool", 1, Some(&names))
                .1
                .is_empty()
        );
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
