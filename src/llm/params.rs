//! Inference parameters for one request: `temperature`/`top_p` fixed or sampled from their
//! distribution (DataDesigner samples on every request, so each tool-loop turn draws afresh),
//! `max_tokens`, the timeout, and the `extra_body` merge.

use std::time::Duration;

use rand::{Rng, RngExt};
use serde_json::{Map, Value};

use crate::domain::models::{
    Distribution, InferenceParameters, ParamValue, RESERVED_EXTRA_BODY_FIELDS,
};

/// DataDesigner's HTTP timeout when `inference_parameters.timeout` is absent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The sampling parameters of one request, after drawing from any distribution.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Sampled {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
}

impl Sampled {
    /// Draws `temperature` and `top_p` for one request.
    pub(crate) fn draw<R: Rng + ?Sized>(p: &InferenceParameters, rng: &mut R) -> Self {
        Self {
            temperature: p.temperature.as_ref().map(|v| sample(v, rng)),
            top_p: p.top_p.as_ref().map(|v| sample(v, rng)),
            max_tokens: p.max_tokens,
        }
    }

    /// Writes the present values into a request body.
    pub(crate) fn write(&self, body: &mut Map<String, Value>) {
        if let Some(t) = self.temperature {
            body.insert("temperature".into(), t.into());
        }
        if let Some(t) = self.top_p {
            body.insert("top_p".into(), t.into());
        }
        if let Some(t) = self.max_tokens {
            body.insert("max_tokens".into(), t.into());
        }
    }
}

/// The per-attempt timeout of a model.
pub(crate) fn timeout(p: &InferenceParameters) -> Duration {
    p.timeout.map_or(DEFAULT_TIMEOUT, Duration::from_secs)
}

/// One value: the fixed number, a uniform draw in `[low, high)`, or a weighted pick.
///
/// Configs are validated at submission; should a bad one slip through, this degrades to
/// something sensible (the lower bound, or an unweighted pick) rather than panicking.
pub(crate) fn sample<R: Rng + ?Sized>(v: &ParamValue, rng: &mut R) -> f64 {
    match v {
        ParamValue::Fixed(x) => *x,
        ParamValue::Distribution(Distribution::Uniform { low, high }) => {
            if low < high {
                rng.random_range(*low..*high)
            } else {
                *low
            }
        }
        ParamValue::Distribution(Distribution::Manual { values, weights }) => {
            if values.is_empty() {
                return 0.0;
            }
            let usable = weights.as_ref().filter(|w| {
                w.len() == values.len()
                    && w.iter().all(|x| x.is_finite() && *x >= 0.0)
                    && w.iter().sum::<f64>() > 0.0
            });
            match usable {
                None => values[rng.random_range(0..values.len())],
                Some(w) => {
                    let total: f64 = w.iter().sum();
                    let mut point = rng.random_range(0.0..total);
                    for (value, weight) in values.iter().zip(w) {
                        if point < *weight {
                            return *value;
                        }
                        point -= weight;
                    }
                    // Rounding can leave `point` a hair above the last weight.
                    values[values.len() - 1]
                }
            }
        }
    }
}

/// DataDesigner 0.9.7's merge: model-config keys first, then provider keys, which win.
pub(crate) fn merge_extra_body(
    model: Option<&Map<String, Value>>,
    provider: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for m in [model, provider].into_iter().flatten() {
        for (k, v) in m {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Flattens `extra` into the body, key by key, as DataDesigner does, so `extra_body` can set
/// any provider-specific field and override the sampling parameters. Unlike DataDesigner, it
/// never replaces a field the adapters compute ([`RESERVED_EXTRA_BODY_FIELDS`]: the model, the
/// conversation, the tools, the response framing). Configs setting one are refused when they
/// are read; skipping them here as well keeps that true for any caller of the client.
pub(crate) fn apply_extra_body(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (k, v) in extra {
        if !RESERVED_EXTRA_BODY_FIELDS.contains(&k.as_str()) {
            body.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use serde_json::json;

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(7)
    }

    #[test]
    fn uniform_draws_stay_in_range_and_vary() {
        let v = ParamValue::Distribution(Distribution::Uniform {
            low: 0.2,
            high: 0.9,
        });
        let mut r = rng();
        let draws: Vec<f64> = (0..200).map(|_| sample(&v, &mut r)).collect();
        assert!(draws.iter().all(|x| (0.2..0.9).contains(x)));
        assert!(draws.iter().any(|x| *x < 0.4) && draws.iter().any(|x| *x > 0.7));
    }

    #[test]
    fn manual_follows_weights() {
        let v = ParamValue::Distribution(Distribution::Manual {
            values: vec![0.1, 0.5, 0.9],
            weights: Some(vec![0.0, 1.0, 3.0]),
        });
        let mut r = rng();
        let mut counts = [0u32; 3];
        for _ in 0..4000 {
            let x = sample(&v, &mut r);
            counts[[0.1, 0.5, 0.9].iter().position(|v| *v == x).unwrap()] += 1;
        }
        assert_eq!(counts[0], 0, "zero weight is never drawn");
        let ratio = f64::from(counts[2]) / f64::from(counts[1]);
        assert!((2.5..3.5).contains(&ratio), "{counts:?}");
    }

    #[test]
    fn manual_without_weights_is_uniform_and_fixed_is_fixed() {
        let v = ParamValue::Distribution(Distribution::Manual {
            values: vec![1.0, 2.0],
            weights: None,
        });
        let mut r = rng();
        let ones = (0..1000).filter(|_| sample(&v, &mut r) == 1.0).count();
        assert!((400..600).contains(&ones));
        assert_eq!(sample(&ParamValue::Fixed(0.3), &mut r), 0.3);
    }

    #[test]
    fn provider_extra_body_wins() {
        let model = json!({"a": 1, "b": 1}).as_object().cloned();
        let provider = json!({"b": 2, "c": 2}).as_object().cloned();
        let merged = merge_extra_body(model.as_ref(), provider.as_ref());
        assert_eq!(Value::Object(merged), json!({"a": 1, "b": 2, "c": 2}));
        assert!(merge_extra_body(None, None).is_empty());
    }

    #[test]
    fn extra_body_never_replaces_computed_fields() {
        let mut body = json!({"model": "m", "messages": [1], "temperature": 0.5})
            .as_object()
            .cloned()
            .unwrap();
        let extra = json!({"model": "evil", "messages": [], "tools": [], "stream": true,
                           "n": 5, "system": "x", "temperature": 0.1, "seed": 3});
        apply_extra_body(&mut body, extra.as_object().unwrap());
        assert_eq!(
            Value::Object(body),
            json!({"model": "m", "messages": [1], "temperature": 0.1, "seed": 3})
        );
    }

    #[test]
    fn timeout_defaults_to_sixty_seconds() {
        let mut p = InferenceParameters::default();
        assert_eq!(timeout(&p), Duration::from_secs(60));
        p.timeout = Some(5);
        assert_eq!(timeout(&p), Duration::from_secs(5));
    }
}
