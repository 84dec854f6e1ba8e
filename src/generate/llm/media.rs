//! Media columns at generation time: `embedding` (the target's text or texts, embedded in one
//! call, in DataDesigner's output shape) and `image` (the images a model draws, kept beside the
//! record, the value holding references to them).

use base64::Engine as _;
use serde_json::{Value, json};

use super::super::columns::{RecordState, Step, StepEnv, StepError};
use super::super::{Plan, Spent};
use super::LlmRuntime;
use super::multimodal::{context_parts, detect};
use crate::domain::dataset::MultiModalContext;
use crate::domain::media::{Media, media_reference};
use crate::domain::record::RecordErrorCode;
use crate::domain::usage::UsageCounts;

/// A compiled `embedding` column.
#[derive(Debug)]
pub(crate) struct EmbeddingStep {
    pub(crate) model_alias: String,
    /// Slot of `target_column`.
    pub(crate) target_slot: usize,
}

/// A compiled `image` column.
#[derive(Debug)]
pub(crate) struct ImageStep {
    pub(crate) model_alias: String,
    /// Template name of the prompt.
    pub(crate) prompt: String,
    pub(crate) contexts: Vec<MultiModalContext>,
}

impl Plan {
    /// Draws the column's images: the value is a list with one reference per image (as
    /// DataDesigner's is one path per image), the bytes go to `out.media`.
    pub(in crate::generate) async fn run_image(
        &self,
        step: &Step,
        i: &ImageStep,
        env: &StepEnv<'_>,
        rec: &mut RecordState<'_>,
        rt: &LlmRuntime<'_>,
        out: &mut Spent,
    ) -> Result<(), StepError> {
        let prompt = rt
            .cpu
            .run_measured(&step.cost, || {
                let Some(ctx) = step.apply_skip(env, rec) else {
                    return Ok(None);
                };
                let ctx = ctx.unwrap_or_else(|| rec.context());
                env.render(&i.prompt, &ctx)
                    .map(Some)
                    .map_err(|e| StepError::new(RecordErrorCode::TemplateError, e))
            })
            .await?;
        let Some(prompt) = prompt else {
            return Ok(());
        };
        if prompt.trim().is_empty() {
            let msg = "the rendered prompt is empty";
            return Err(StepError::new(RecordErrorCode::TemplateError, msg));
        }
        let context = context_parts(
            &i.contexts,
            |name| self.names.get(name).map(|&slot| &rec.values[slot]),
            &out.media,
        )
        .map_err(|m| StepError::new(RecordErrorCode::MultiModalContextInvalid, m))?;
        let model = rt.models.get(&i.model_alias).ok_or_else(|| {
            StepError::new(
                RecordErrorCode::UnknownModelAlias,
                format!("model alias '{}' is not defined", i.model_alias),
            )
        })?;
        let r = rt
            .chat
            .generate_image(model, &prompt, context, rt.cancel)
            .await
            .map_err(|err| StepError::new(err.code(), err.to_string()))?;
        let cost_nanos = model.prices.map_or(0, |p| {
            let images = r.images.len() as u64;
            p.cost_nanos(
                r.usage.prompt_tokens,
                r.usage.completion_tokens,
                None,
                images,
            )
        });
        let counts = UsageCounts {
            requests: 1,
            prompt_tokens: r.usage.prompt_tokens,
            completion_tokens: r.usage.completion_tokens,
            cached_requests: 0,
            cost_nanos,
        };
        out.add(&step.name, &i.model_alias, counts);
        let record = rt
            .scope
            .as_ref()
            .map(|s| s.record.to_string())
            .unwrap_or_default();
        let mut refs = Vec::with_capacity(r.images.len());
        for (index, img) in r.images.into_iter().enumerate() {
            let data = base64::engine::general_purpose::STANDARD
                .decode(img.b64.trim())
                .map_err(|e| {
                    StepError::new(
                        RecordErrorCode::LlmInvalidResponse,
                        format!("image {index} is not valid base64 ({e})"),
                    )
                })?;
            if data.len() > rt.max_image_bytes {
                return Err(StepError::new(
                    RecordErrorCode::ImageTooLarge,
                    format!(
                        "image {index} has {} bytes, more than limits.max_image_bytes ({})",
                        data.len(),
                        rt.max_image_bytes
                    ),
                ));
            }
            let mime_type = img.mime_type.unwrap_or_else(|| {
                detect(&data).map_or("application/octet-stream".to_owned(), |f| {
                    format!("image/{}", if f == "jpg" { "jpeg" } else { f })
                })
            });
            let media = Media {
                column: step.name.clone(),
                index: u32::try_from(index).unwrap_or(u32::MAX),
                mime_type,
                data,
            };
            refs.push(media_reference(&record, &media));
            out.media.push(media);
        }
        rec.put(step.slot, Value::Array(refs));
        Ok(())
    }

    /// Embeds the target column's text(s): `{"embeddings": [[...]], "num_embeddings": n,
    /// "dimension": d}`, as DataDesigner's `EmbeddingGenerationResult` dumps it.
    pub(in crate::generate) async fn run_embedding(
        &self,
        step: &Step,
        e: &EmbeddingStep,
        env: &StepEnv<'_>,
        rec: &mut RecordState<'_>,
        rt: &LlmRuntime<'_>,
        out: &mut Spent,
    ) -> Result<(), StepError> {
        // Only a skip gate renders a template here: off the runtime threads when there is one.
        let go = if step.skip.is_some() {
            rt.cpu
                .run_measured(&step.cost, || step.apply_skip(env, rec).is_some())
                .await
        } else {
            step.apply_skip(env, rec).is_some()
        };
        if !go {
            return Ok(());
        }
        let inputs = embedding_inputs(&rec.values[e.target_slot])
            .map_err(|m| StepError::new(RecordErrorCode::EmbeddingInputInvalid, m))?;
        if inputs.is_empty() {
            rec.put(step.slot, embedding_value(Vec::new()));
            return Ok(());
        }
        let model = rt.models.get(&e.model_alias).ok_or_else(|| {
            StepError::new(
                RecordErrorCode::UnknownModelAlias,
                format!("model alias '{}' is not defined", e.model_alias),
            )
        })?;
        let r = rt
            .chat
            .embed(model, &inputs, rt.cancel)
            .await
            .map_err(|err| StepError::new(err.code(), err.to_string()))?;
        let cost_nanos = model
            .prices
            .map_or(0, |p| p.cost_nanos(r.usage.prompt_tokens, 0, None, 0));
        let counts = UsageCounts {
            requests: 1,
            prompt_tokens: r.usage.prompt_tokens,
            completion_tokens: 0,
            cached_requests: 0,
            cost_nanos,
        };
        out.add(&step.name, &e.model_alias, counts);
        rec.put(step.slot, embedding_value(r.vectors));
        Ok(())
    }
}

fn embedding_value(vectors: Vec<Vec<f64>>) -> Value {
    let dimension = vectors.first().map_or(0, Vec::len);
    json!({"num_embeddings": vectors.len(), "dimension": dimension, "embeddings": vectors})
}

/// The texts to embed from the target's value, as DataDesigner's `parse_list_string` reads a
/// string: a JSON list (trailing commas allowed) or a Python list literal of strings gives its
/// items, any other text is one input; items are trimmed. A list value gives its items too
/// (DataDesigner 0.9.6 crashes on a list, or on a string holding a JSON list, though its docs
/// promise one embedding per item; synthgate keeps the promise). Anything else is not text.
pub(crate) fn embedding_inputs(value: &Value) -> Result<Vec<String>, String> {
    let items = match value {
        Value::String(s) => return Ok(list_string(s)),
        Value::Array(items) => items,
        other => {
            return Err(format!(
                "the target column holds {}, not a text or a list of texts",
                kind(other)
            ));
        }
    };
    items
        .iter()
        .map(|item| match item {
            Value::String(s) => Ok(s.trim().to_owned()),
            other => Err(format!(
                "the target column's list holds {}, not only texts",
                kind(other)
            )),
        })
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn list_string(text: &str) -> Vec<String> {
    let text = text.trim();
    let strings = |v: Value| -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(|s| s.trim().to_owned()))
            .collect()
    };
    if let Some(list) = serde_json::from_str(text).ok().and_then(strings) {
        return list;
    }
    if text.starts_with('[') {
        let cleaned = strip_trailing_commas(text);
        if let Some(list) = serde_json::from_str(&cleaned).ok().and_then(strings) {
            return list;
        }
        if let Some(list) = python_string_list(&cleaned) {
            return list.into_iter().map(|s| s.trim().to_owned()).collect();
        }
    }
    vec![text.to_owned()]
}

/// `,` followed by whitespace and `]` or `}` loses the comma (DataDesigner's regex cleanup).
fn strip_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some(']' | '}')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// A Python list literal of single- or double-quoted strings (`['a', "b"]`), the part of
/// `ast.literal_eval` that yields a list of texts.
fn python_string_list(text: &str) -> Option<Vec<String>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(quote) = chars.next() else {
            return Some(out);
        };
        if quote != '\'' && quote != '"' {
            return None;
        }
        let mut s = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => s.push('\n'),
                    't' => s.push('\t'),
                    c => s.push(c),
                },
                c if c == quote => break,
                c => s.push(c),
            }
        }
        out.push(s);
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Some(out),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_follow_parse_list_string() {
        let s = |t: &str| embedding_inputs(&json!(t)).unwrap();
        assert_eq!(s(" hello "), ["hello"]);
        assert_eq!(s("a, b"), ["a, b"]);
        assert_eq!(s(r#"["a", " b "]"#), ["a", "b"]);
        assert_eq!(s(r#"["a",]"#), ["a"]);
        assert_eq!(s("['x','y',]"), ["x", "y"]);
        assert_eq!(s(r#"['it\'s', "q"]"#), ["it's", "q"]);
        assert_eq!(s("[not a list"), ["[not a list"]);
        assert_eq!(s("[1, 2]"), ["[1, 2]"]);
        assert_eq!(embedding_inputs(&json!([" p", "q"])).unwrap(), ["p", "q"]);
        assert!(embedding_inputs(&json!(42)).is_err());
        assert!(embedding_inputs(&json!(null)).is_err());
        assert!(embedding_inputs(&json!(["a", 1])).is_err());
    }
}
