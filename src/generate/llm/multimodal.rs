//! `multi_modal_context` of LLM columns: the images other columns hold, turned into the
//! `image_url` content parts DataDesigner puts before the prompt text in the user message
//! (`[*images, {"type": "text", ...}]`). The Anthropic adapter lowers them to `image` blocks.
//!
//! synthgate never fetches a URL a record holds: an http(s) URL goes to the provider as it is,
//! and the provider fetches it (as with DataDesigner), so no job can make the service reach a
//! host of its choosing. Only the data in the record is read.

use base64::Engine as _;
use serde_json::Value;

use crate::domain::dataset::{MediaDataType, MultiModalContext};
use crate::domain::media::Media;
use crate::llm::ContentBlock;

/// What DataDesigner's `is_image_url` counts as an image URL's extension.
const IMAGE_EXTENSIONS: &[&str] = &[".png", ".jpg", ".jpeg", ".gif", ".webp"];

/// The image parts for one record, in context order then value order. `value` looks a column
/// up; `media` holds the images this record's `image` columns drew, which a reference in a
/// value (`{"media_id": ...}`) stands for (DataDesigner loads its image files the same way);
/// `Err` says which column and value could not be used.
pub(crate) fn image_parts<'v>(
    contexts: &[MultiModalContext],
    value: impl Fn(&str) -> Option<&'v Value>,
    media: &[Media],
) -> Result<Vec<ContentBlock>, String> {
    let mut parts = Vec::new();
    for ctx in contexts {
        let column = &ctx.column_name;
        let raw = value(column).unwrap_or(&Value::Null);
        for (i, item) in normalize(raw).into_iter().enumerate() {
            if let Some(m) = item
                .get("media_id")
                .and_then(Value::as_str)
                .and_then(|id| stored(media, id))
            {
                let b64 = base64::engine::general_purpose::STANDARD.encode(&m.data);
                parts.push(ContentBlock::image_url(format!(
                    "data:{};base64,{b64}",
                    m.mime_type
                )));
                continue;
            }
            let Some(text) = item.as_str() else {
                return Err(format!(
                    "multi_modal_context column '{column}' holds a non-text value at item {i}; expected a URL or base64 image"
                ));
            };
            let url = image_url(ctx, text.trim())
                .map_err(|e| format!("multi_modal_context column '{column}' item {i}: {e}"))?;
            parts.push(ContentBlock::image_url(url));
        }
    }
    Ok(parts)
}

/// The image a `media_id` (`<record>/<column>/<index>`) names among this record's images.
fn stored<'m>(media: &'m [Media], id: &str) -> Option<&'m Media> {
    let (rest, index) = id.rsplit_once('/')?;
    let (_, column) = rest.split_once('/')?;
    let index: u32 = index.parse().ok()?;
    media
        .iter()
        .find(|m| m.column == column && m.index == index)
}

/// DataDesigner's `normalize_media_context_values`: a JSON list in a string gives its items,
/// a list its items, anything else is one value. Null gives nothing (a skipped column).
fn normalize(raw: &Value) -> Vec<Value> {
    match raw {
        Value::Null => Vec::new(),
        Value::Array(items) => items.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(items)) => items,
            _ => vec![raw.clone()],
        },
        other => vec![other.clone()],
    }
}

/// The `image_url` of one value, by `data_type`: `url` as it is; `base64` (a data URI, or raw
/// base64 of `image_format`); absent: an http(s) URL with an image extension as it is,
/// anything else base64 whose format is read from its bytes.
fn image_url(ctx: &MultiModalContext, v: &str) -> Result<String, String> {
    let is_url = v.starts_with("http://") || v.starts_with("https://");
    match ctx.data_type {
        Some(MediaDataType::Url) => {
            if is_url {
                Ok(v.to_owned())
            } else {
                Err("data_type is url but the value is not an http(s) URL".into())
            }
        }
        Some(MediaDataType::Base64) => base64_url(v, ctx.image_format.as_deref()),
        None if is_url
            && IMAGE_EXTENSIONS
                .iter()
                .any(|e| v.to_lowercase().contains(e)) =>
        {
            Ok(v.to_owned())
        }
        None => base64_url(v, ctx.image_format.as_deref()),
    }
}

fn base64_url(v: &str, format: Option<&str>) -> Result<String, String> {
    if let Some(rest) = v.strip_prefix("data:") {
        let (head, _) = rest
            .split_once(',')
            .ok_or("a data URI without a ',' separator")?;
        if !head.starts_with("image/") || !head.ends_with(";base64") {
            return Err(format!("unsupported data URI media type '{head}'"));
        }
        return Ok(v.to_owned());
    }
    let mime = match format {
        Some(f) => format!("image/{}", f.to_lowercase()),
        None => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v)
                .map_err(|e| format!("invalid base64 data ({e})"))?;
            format!(
                "image/{}",
                detect(&bytes).ok_or(
                    "the image format cannot be detected from its bytes; set image_format"
                )?
            )
        }
    };
    Ok(format!("data:{mime};base64,{v}"))
}

/// PNG, JPEG, GIF or WEBP from the magic bytes (DataDesigner's checks before PIL).
pub(crate) fn detect(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("png")
    } else if b.starts_with(b"\xff\xd8\xff") {
        Some("jpg")
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some("gif")
    } else if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        Some("webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    fn ctx(v: Value) -> MultiModalContext {
        let mut o = json!({"column_name": "img"});
        o.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(o).unwrap()
    }

    fn urls(c: &MultiModalContext, v: Value) -> Result<Vec<String>, String> {
        image_parts(std::slice::from_ref(c), |_| Some(&v), &[]).map(|parts| {
            parts
                .into_iter()
                .map(|p| match p {
                    ContentBlock::ImageUrl { image_url } => image_url.url,
                    ContentBlock::Text { .. } => unreachable!("only images"),
                })
                .collect()
        })
    }

    #[test]
    fn values_become_image_urls_as_datadesigner_builds_them() {
        let auto = ctx(json!({}));
        assert_eq!(
            urls(&auto, json!("https://x/y.PNG")).unwrap(),
            ["https://x/y.PNG"]
        );
        let png_uri = format!("data:image/png;base64,{PNG}");
        assert_eq!(
            urls(&auto, json!(PNG)).unwrap(),
            std::slice::from_ref(&png_uri)
        );
        let list = json!(format!("[\"https://a/b.jpg\", \"{PNG}\"]"));
        assert_eq!(urls(&auto, list).unwrap(), ["https://a/b.jpg", &png_uri]);
        assert_eq!(urls(&auto, json!(null)).unwrap(), Vec::<String>::new());
        // An extensionless URL is not an image URL to the auto-detection: read as base64.
        assert!(urls(&auto, json!("https://a/b")).is_err());
        let jpg = ctx(json!({"data_type": "base64", "image_format": "jpg"}));
        assert_eq!(
            urls(&jpg, json!("abcd")).unwrap(),
            ["data:image/jpg;base64,abcd"]
        );
        let url = ctx(json!({"data_type": "url"}));
        assert_eq!(urls(&url, json!("https://a/b")).unwrap(), ["https://a/b"]);
        assert!(urls(&url, json!("not a url")).is_err());
        assert!(
            urls(&auto, json!(3))
                .unwrap_err()
                .contains("non-text value")
        );
    }
}
