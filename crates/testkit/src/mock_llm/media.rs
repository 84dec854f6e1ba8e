//! Answers of the non-chat endpoints: embeddings (deterministic vectors, so a test can compute
//! what a record should hold) and image generation (a small real PNG, as base64).

use serde_json::{Value, json};

use super::reply::tokens;

/// A 1×1 PNG: what every image request gets.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The vector the mock answers for `text`: `dims` numbers in [-1, 1), from an FNV-1a hash of
/// the text and a xorshift stream, each exactly representable as an f32.
pub fn embedding_of(text: &str, dims: usize) -> Vec<f64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (0..dims)
        .map(|_| {
            h ^= h << 13;
            h ^= h >> 7;
            h ^= h << 17;
            // 16 bits of mantissa: exact in f32 and f64 alike.
            f64::from((h >> 48) as u16) / 32768.0 - 1.0
        })
        .collect()
}

/// Vectors of `dimensions` (default 8) numbers per input, in input order.
pub(crate) fn embeddings_body(model: &str, request: &Value) -> Value {
    let dims = request
        .get("dimensions")
        .and_then(Value::as_u64)
        .map_or(8, |d| usize::try_from(d).unwrap_or(8));
    let inputs: Vec<String> = match request.get("input") {
        Some(Value::Array(xs)) => xs
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(
            |(i, t)| json!({"object": "embedding", "index": i, "embedding": embedding_of(t, dims)}),
        )
        .collect();
    let prompt_tokens: u64 = inputs.iter().map(|t| tokens(t)).sum();
    json!({"object": "list", "model": model, "data": data,
           "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}})
}

/// `{"type": "image_url", "image_url": {"url": "data:image/png;base64,<PNG>"}}`: an image in
/// a chat answer's `message.images`.
pub(crate) fn png_image_url() -> Value {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}})
}

/// `data: [{"b64_json": <PNG>}]`, as OpenAI's images API answers with `b64_json`.
pub(crate) fn images_body() -> Value {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    json!({"created": 0, "data": [{"b64_json": b64}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_deterministic_and_f32_exact() {
        let a = embedding_of("hello", 4);
        assert_eq!(a, embedding_of("hello", 4));
        assert_ne!(a, embedding_of("hullo", 4));
        assert!(
            a.iter()
                .all(|&x| f64::from(x as f32) == x && (-1.0..1.0).contains(&x))
        );
        let body = embeddings_body("m", &json!({"input": ["a", "b"], "dimensions": 3}));
        assert_eq!(body["data"][1]["embedding"], json!(embedding_of("b", 3)));
    }
}
