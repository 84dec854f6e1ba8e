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
//!
//! An image block that is not an image (a non-`image/` MIME type, data that is not base64) is a
//! formatting error: sent on, the provider would refuse the whole request and the record would
//! fail without the model hearing why.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock as McpBlock, ResourceContents};

use crate::llm::ContentBlock;

/// The blocks of a tool result, and whether the server flagged it as an error (`isError`);
/// `Err` says why the result cannot be shown to the model.
pub fn to_blocks(result: &CallToolResult) -> Result<(Vec<ContentBlock>, bool), String> {
    let mut out = Vec::with_capacity(result.content.len());
    for (i, b) in result.content.iter().enumerate() {
        out.push(block(b).map_err(|why| format!("content block {} {why}", i + 1))?);
    }
    if out.is_empty()
        && let Some(s) = &result.structured_content
    {
        out.push(ContentBlock::text(s.to_string()));
    }
    Ok((out, result.is_error == Some(true)))
}

/// An image as a `data:` URI, if it is one.
fn image(mime_type: &str, data: &str) -> Result<ContentBlock, String> {
    if !mime_type.starts_with("image/") {
        return Err(format!(
            "is an image whose MIME type '{mime_type}' is not an image type"
        ));
    }
    if base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .is_err()
    {
        return Err(format!(
            "is an image ({mime_type}) whose data is not valid base64"
        ));
    }
    Ok(ContentBlock::image_url(format!(
        "data:{mime_type};base64,{data}"
    )))
}

/// Whether a MIME type names text: `text/*`, JSON, XML, YAML and their `+json`/`+xml` kinds.
fn textual(mime_type: &str) -> bool {
    let m = mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    m.starts_with("text/")
        || matches!(
            m.as_str(),
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/javascript"
                | "application/toml"
        )
        || m.ends_with("+json")
        || m.ends_with("+xml")
}

/// The blob's bytes as text, when they are base64 of UTF-8.
fn utf8_of(blob: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn block(b: &McpBlock) -> Result<ContentBlock, String> {
    Ok(match b {
        McpBlock::Text(t) => ContentBlock::text(t.text.clone()),
        McpBlock::Image(i) => image(&i.mime_type, &i.data)?,
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
                Some(m) if m.starts_with("image/") => image(m, blob)?,
                // Text sent as a blob (servers do, for files they read as bytes): its text.
                Some(m)
                    if textual(m)
                        && let Some(text) = utf8_of(blob) =>
                {
                    ContentBlock::text(text)
                }
                m => ContentBlock::text(format!(
                    "[resource {uri} ({}), {} bytes of base64 omitted]",
                    m.unwrap_or("application/octet-stream"),
                    blob.len()
                )),
            },
            other => ContentBlock::text(
                serde_json::to_string(other).map_err(|e| format!("cannot be written out ({e})"))?,
            ),
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
        other => ContentBlock::text(
            serde_json::to_string(other).map_err(|e| format!("cannot be written out ({e})"))?,
        ),
    })
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
        let (blocks, is_error) = to_blocks(&r).unwrap();
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
        assert_eq!(
            to_blocks(&r).unwrap().0,
            vec![ContentBlock::text(r#"{"k":"v"}"#)]
        );
        let mut r = CallToolResult::success(vec![B::text("5")]);
        r.structured_content = Some(json!({"sum": 5}));
        assert_eq!(to_blocks(&r).unwrap().0, vec![ContentBlock::text("5")]);
    }

    #[test]
    fn embedded_text_resources_and_errors() {
        let r = CallToolResult::error(vec![B::Resource(rmcp::model::EmbeddedResource::new(
            ResourceContents::text("note", "mock://note"),
        ))]);
        let (blocks, is_error) = to_blocks(&r).unwrap();
        assert!(is_error);
        assert_eq!(blocks, vec![ContentBlock::text("note")]);
    }

    #[test]
    fn text_blobs_are_read_as_text_and_other_blobs_named() {
        let blob = |b64: &str, mime: &str| {
            B::Resource(rmcp::model::EmbeddedResource::new(
                ResourceContents::blob(b64, "file:///r").with_mime_type(mime),
            ))
        };
        let csv = base64::engine::general_purpose::STANDARD.encode("a,b\n1,2\n");
        let r = CallToolResult::success(vec![
            blob(&csv, "text/csv; charset=utf-8"),
            blob(&csv, "application/vnd.api+json"),
            blob("AAEC", "application/octet-stream"),
            // Declared text, but not UTF-8: named, not garbled.
            blob("/w==", "text/plain"),
        ]);
        let (blocks, _) = to_blocks(&r).unwrap();
        assert_eq!(blocks[0], ContentBlock::text("a,b\n1,2\n"));
        assert_eq!(blocks[1], ContentBlock::text("a,b\n1,2\n"));
        assert_eq!(
            blocks[2],
            ContentBlock::text(
                "[resource file:///r (application/octet-stream), 4 bytes of base64 omitted]"
            )
        );
        assert_eq!(
            blocks[3],
            ContentBlock::text("[resource file:///r (text/plain), 4 bytes of base64 omitted]")
        );
    }

    #[test]
    fn an_image_that_is_not_one_cannot_be_shown() {
        let r = CallToolResult::success(vec![B::text("x"), B::image("not base64!", "image/png")]);
        assert_eq!(
            to_blocks(&r).unwrap_err(),
            "content block 2 is an image (image/png) whose data is not valid base64"
        );
        let r = CallToolResult::success(vec![B::image("iVBO", "text/plain")]);
        assert_eq!(
            to_blocks(&r).unwrap_err(),
            "content block 1 is an image whose MIME type 'text/plain' is not an image type"
        );
    }
}
