//! MCP tool results → chat content blocks, the way the model and the trace see them. It lives
//! here, where MCP tools meet LLM tool calls, so `mcp` stays an MCP client and `llm` a chat
//! client, neither knowing the other.
//!
//! Text stays text; images become `image_url` blocks with a `data:` URI, in their original
//! position among the other blocks; everything the chat formats cannot carry (embedded
//! resources, resource links, audio, structured content) becomes text, so nothing the tool
//! returned is silently dropped. DataDesigner ignores `structuredContent`; here it is used
//! when the result has no content blocks at all (the spec asks servers to mirror it as text,
//! so when blocks exist it would only repeat them).

use rmcp::model::{CallToolResult, ContentBlock as McpBlock, ResourceContents};

use crate::llm::ContentBlock;

/// The blocks of a tool result, and whether the server flagged it as an error (`isError`).
pub fn to_blocks(result: &CallToolResult) -> (Vec<ContentBlock>, bool) {
    let mut out: Vec<ContentBlock> = result.content.iter().map(block).collect();
    if out.is_empty()
        && let Some(s) = &result.structured_content
    {
        out.push(ContentBlock::text(s.to_string()));
    }
    (out, result.is_error == Some(true))
}

fn block(b: &McpBlock) -> ContentBlock {
    match b {
        McpBlock::Text(t) => ContentBlock::text(t.text.clone()),
        McpBlock::Image(i) => {
            ContentBlock::image_url(format!("data:{};base64,{}", i.mime_type, i.data))
        }
        McpBlock::Audio(a) => ContentBlock::text(format!(
            "[audio content ({}), {} bytes of base64 omitted]",
            a.mime_type,
            a.data.len()
        )),
        McpBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { text, .. } => ContentBlock::text(text.clone()),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => match mime_type.as_deref() {
                Some(m) if m.starts_with("image/") => {
                    ContentBlock::image_url(format!("data:{m};base64,{blob}"))
                }
                m => ContentBlock::text(format!(
                    "[resource {uri} ({}), {} bytes of base64 omitted]",
                    m.unwrap_or("application/octet-stream"),
                    blob.len()
                )),
            },
            other => ContentBlock::text(serde_json::to_string(other).unwrap_or_default()),
        },
        McpBlock::ResourceLink(l) => {
            let mut s = format!("[resource link: {}", l.uri);
            if let Some(d) = &l.description {
                s.push_str(&format!(" — {d}"));
            }
            s.push(']');
            ContentBlock::text(s)
        }
        // A block type newer than this build: its JSON, rather than nothing.
        other => ContentBlock::text(serde_json::to_string(other).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock as B;
    use serde_json::json;

    #[test]
    fn keeps_order_and_turns_images_into_data_uris() {
        let r = CallToolResult::success(vec![
            B::text("before"),
            B::image("iVBO", "image/png"),
            B::text("after"),
        ]);
        let (blocks, is_error) = to_blocks(&r);
        assert!(!is_error);
        assert_eq!(
            blocks,
            vec![
                ContentBlock::text("before"),
                ContentBlock::image_url("data:image/png;base64,iVBO"),
                ContentBlock::text("after"),
            ]
        );
    }

    #[test]
    fn structured_content_is_text_only_when_there_are_no_blocks() {
        let mut r = CallToolResult::success(vec![]);
        r.structured_content = Some(json!({"k": "v"}));
        assert_eq!(to_blocks(&r).0, vec![ContentBlock::text(r#"{"k":"v"}"#)]);
        let mut r = CallToolResult::success(vec![B::text("5")]);
        r.structured_content = Some(json!({"sum": 5}));
        assert_eq!(to_blocks(&r).0, vec![ContentBlock::text("5")]);
    }

    #[test]
    fn embedded_text_resources_and_errors() {
        let r = CallToolResult::error(vec![B::Resource(rmcp::model::EmbeddedResource::new(
            ResourceContents::text("note", "mock://note"),
        ))]);
        let (blocks, is_error) = to_blocks(&r);
        assert!(is_error);
        assert_eq!(blocks, vec![ContentBlock::text("note")]);
    }
}
