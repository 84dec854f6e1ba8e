//! `multi_modal_context` of LLM columns: the images, audio and video other columns hold,
//! turned into the content parts DataDesigner puts before the prompt text in the user message
//! (`[*media, {"type": "text", ...}]`), as its OpenAI-compatible adapter writes them:
//! `image_url`; `audio_url` for an audio URL and `input_audio` (`{data, format}`) for base64
//! audio; `video_url` for a video URL or data URI. The Anthropic adapter lowers images to
//! `image` blocks and refuses audio and video, as DataDesigner's does.
//!
//! synthgate never fetches a URL a record holds: an http(s) URL goes to the provider as it is,
//! and the provider fetches it (as with DataDesigner), so no job can make the service reach a
//! host of its choosing. Only the data in the record is read.

use base64::Engine as _;
use serde_json::Value;

use crate::domain::dataset::{MediaDataType, Modality, MultiModalContext};
use crate::domain::media::Media;
use crate::llm::ContentBlock;

/// What DataDesigner's `is_image_url` counts as an image URL's extension.
const IMAGE_EXTENSIONS: &[&str] = &[".png", ".jpg", ".jpeg", ".gif", ".webp"];

/// The context parts for one record, in context order then value order. `value` looks a
/// column up; `media` holds the images this record's `image` columns drew, which a reference
/// in a value (`{"media_id": ...}`) stands for (DataDesigner loads its image files the same
/// way); `Err` says which column and value could not be used.
pub(crate) fn context_parts<'v>(
    contexts: &[MultiModalContext],
    value: impl Fn(&str) -> Option<&'v Value>,
    media: &[Media],
) -> Result<Vec<ContentBlock>, String> {
    let mut parts = Vec::new();
    for ctx in contexts {
        let column = &ctx.column_name;
        let raw = value(column).unwrap_or(&Value::Null);
        for (i, item) in normalize(raw).into_iter().enumerate() {
            if ctx.modality != Modality::Image {
                let Some(text) = item.as_str() else {
                    return Err(format!(
                        "multi_modal_context column '{column}' holds a non-text value at item {i}; expected a URL or base64 {}",
                        kind(ctx.modality).name
                    ));
                };
                let part = audio_video_part(ctx, text)
                    .map_err(|e| format!("multi_modal_context column '{column}' item {i}: {e}"))?;
                parts.push(part);
                continue;
            }
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

/// What DataDesigner knows of audio and video: its formats with their MIME types, and the
/// MIME types it reads each format from (`AudioFormat`, `VideoFormat` and the tables of
/// `data_designer/config/utils/media_helpers.py`).
struct MediaKind {
    name: &'static str,
    /// Format and the MIME type DataDesigner writes for it.
    formats: &'static [(&'static str, &'static str)],
    /// MIME type (lowercase) and the format it is read as.
    mime_types: &'static [(&'static str, &'static str)],
}

const AUDIO: MediaKind = MediaKind {
    name: "audio",
    formats: &[("mp3", "audio/mpeg"), ("wav", "audio/wav")],
    mime_types: &[
        ("audio/mpeg", "mp3"),
        ("audio/mp3", "mp3"),
        ("audio/wav", "wav"),
        ("audio/wave", "wav"),
        ("audio/x-wav", "wav"),
        ("audio/vnd.wave", "wav"),
    ],
};

const VIDEO: MediaKind = MediaKind {
    name: "video",
    formats: &[
        ("mp4", "video/mp4"),
        ("mov", "video/quicktime"),
        ("webm", "video/webm"),
    ],
    mime_types: &[
        ("video/mp4", "mp4"),
        ("video/quicktime", "mov"),
        ("video/webm", "webm"),
    ],
};

fn kind(modality: Modality) -> &'static MediaKind {
    match modality {
        Modality::Audio => &AUDIO,
        // Images never get here; video is the remaining kind.
        Modality::Video | Modality::Image => &VIDEO,
    }
}

/// One audio or video value as DataDesigner's `AudioContext`/`VideoContext` builds it: with
/// `data_type: url` an http(s) URL or a local media path goes as a URL (a path is read by a
/// model server on the same machine, never by synthgate); with no `data_type` an http(s) URL
/// does too; anything else is base64: a data URI of a known MIME type (matching the
/// configured format, if any), or raw base64 in the configured format. A value that looks like
/// a local path is refused there: it is not base64.
fn audio_video_part(ctx: &MultiModalContext, v: &str) -> Result<ContentBlock, String> {
    let k = kind(ctx.modality);
    let configured = match ctx.modality {
        Modality::Audio => ctx.audio_format.as_deref(),
        _ => ctx.video_format.as_deref(),
    };
    let is_url = v.starts_with("http://") || v.starts_with("https://");
    let lower = v.to_lowercase();
    let is_path = !is_url
        && k.formats
            .iter()
            .any(|(f, _)| lower.ends_with(&format!(".{f}")));
    let url_block = |url: &str| match ctx.modality {
        Modality::Audio => ContentBlock::audio_url(url),
        _ => ContentBlock::video_url(url),
    };
    match ctx.data_type {
        Some(MediaDataType::Url) if is_url || is_path => return Ok(url_block(v)),
        Some(MediaDataType::Url) => {
            return Err(format!(
                "{} URL context values must be HTTP(S) URLs or local {} paths",
                k.name, k.name
            ));
        }
        None if is_url => return Ok(url_block(v)),
        _ => {}
    }
    let (media_type, data) = match data_uri(v) {
        Some((media_type, data)) => {
            let Some(format) = lookup(k.mime_types, &media_type.to_lowercase()) else {
                return Err(format!("unsupported {} media type '{media_type}'", k.name));
            };
            if let Some(configured) = configured
                && configured != format
            {
                return Err(format!(
                    "{}_format '{configured}' does not match data URI media type '{media_type}'",
                    k.name
                ));
            }
            (media_type.to_owned(), data)
        }
        None if is_path => {
            return Err(format!(
                "{} context values that look like local paths must use data_type=url; \
                 otherwise provide base64 {} data",
                k.name, k.name
            ));
        }
        None => {
            let Some(configured) = configured else {
                return Err(format!(
                    "{}_format is required for base64 {} context values",
                    k.name, k.name
                ));
            };
            let mime = lookup(k.formats, configured)
                .ok_or_else(|| format!("unknown {}_format '{configured}'", k.name))?;
            (mime.to_owned(), v)
        }
    };
    Ok(match ctx.modality {
        Modality::Audio => {
            let format = lookup(k.mime_types, &media_type.to_lowercase()).unwrap_or_default();
            ContentBlock::input_audio(data, format)
        }
        _ => ContentBlock::video_url(format!("data:{media_type};base64,{data}")),
    })
}

/// DataDesigner's `parse_base64_data_uri`: `data:<type>;base64,<data>`, the type holding no
/// `;` and the data not empty.
fn data_uri(v: &str) -> Option<(&str, &str)> {
    let rest = v.strip_prefix("data:")?;
    let (media_type, data) = rest.split_once(";base64,")?;
    (!media_type.is_empty() && !media_type.contains(';') && !data.is_empty())
        .then_some((media_type, data))
}

fn lookup(table: &'static [(&'static str, &'static str)], key: &str) -> Option<&'static str> {
    table.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
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
        context_parts(std::slice::from_ref(c), |_| Some(&v), &[]).map(|parts| {
            parts
                .into_iter()
                .map(|p| match p {
                    ContentBlock::ImageUrl { image_url } => image_url.url,
                    other => unreachable!("only images: {other:?}"),
                })
                .collect()
        })
    }

    /// The parts of one value as JSON, as they go on the wire.
    fn parts(c: Value, v: Value) -> Result<Value, String> {
        context_parts(std::slice::from_ref(&ctx(c)), |_| Some(&v), &[])
            .map(|p| serde_json::to_value(p).unwrap())
    }

    #[test]
    fn audio_and_video_become_datadesigners_blocks() {
        let audio = json!({"modality": "audio"});
        // URLs go as URLs, in value order.
        assert_eq!(
            parts(audio.clone(), json!(["https://a/x.mp3", "http://b/y"])).unwrap(),
            json!([
                {"type": "audio_url", "audio_url": {"url": "https://a/x.mp3"}},
                {"type": "audio_url", "audio_url": {"url": "http://b/y"}}
            ])
        );
        // Base64: a data URI's type names the format; raw base64 needs audio_format.
        assert_eq!(
            parts(audio.clone(), json!("data:audio/x-wav;base64,UklGRg==")).unwrap(),
            json!([{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}])
        );
        let mp3 = json!({"modality": "audio", "audio_format": "mp3"});
        assert_eq!(
            parts(mp3.clone(), json!("SUQz")).unwrap(),
            json!([{"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}}])
        );
        let e = parts(audio.clone(), json!("SUQz")).unwrap_err();
        assert!(e.contains("audio_format is required"), "{e}");
        let e = parts(mp3.clone(), json!("data:audio/wav;base64,UklGRg==")).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        let e = parts(audio.clone(), json!("data:audio/ogg;base64,T2dn")).unwrap_err();
        assert!(
            e.contains("unsupported audio media type 'audio/ogg'"),
            "{e}"
        );
        // A local path is refused unless the column says url; then the model server reads it.
        let e = parts(mp3, json!("clips/a.MP3")).unwrap_err();
        assert!(e.contains("must use data_type=url"), "{e}");
        let url = json!({"modality": "audio", "data_type": "url"});
        assert_eq!(
            parts(url.clone(), json!("clips/a.wav")).unwrap(),
            json!([{"type": "audio_url", "audio_url": {"url": "clips/a.wav"}}])
        );
        assert!(parts(url, json!("not a url")).is_err());
        assert!(
            parts(audio, json!(7))
                .unwrap_err()
                .contains("non-text value")
        );

        // Video: a URL, or base64 as a data URI in `video_url`.
        let video = json!({"modality": "video", "video_format": "mp4"});
        assert_eq!(
            parts(video.clone(), json!(["https://v/x.mov", "AAAAIGZ0eXA="])).unwrap(),
            json!([
                {"type": "video_url", "video_url": {"url": "https://v/x.mov"}},
                {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAAIGZ0eXA="}}
            ])
        );
        assert_eq!(
            parts(
                json!({"modality": "video"}),
                json!("data:video/WebM;base64,GkXf")
            )
            .unwrap(),
            json!([{"type": "video_url", "video_url": {"url": "data:video/WebM;base64,GkXf"}}])
        );
        let e = parts(json!({"modality": "video"}), json!("AAAA")).unwrap_err();
        assert!(e.contains("video_format is required"), "{e}");
        let e = parts(video, json!("movie.webm")).unwrap_err();
        assert!(e.contains("local paths"), "{e}");
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
