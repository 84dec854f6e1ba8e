//! What a model's tokens and images cost (issue 51 item 2, DataDesigner #956): set on the
//! server's model configs, never by a job. Costs are kept in billionths of the price's unit
//! (`nanos`), integers, so a job's cost is an exact sum of its records' whatever the order
//! they were written in.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Prices of one model config, in the operator's currency (the API shows plain numbers).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Per million input (prompt) tokens.
    pub input_per_million: f64,
    /// Per million output (completion) tokens.
    pub output_per_million: f64,
    /// Per million reasoning tokens, where the provider reports them apart from the output
    /// (they are part of the completion tokens; these are then priced at this instead).
    /// Absent: reasoning tokens cost as output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_per_million: Option<f64>,
    /// Per image an `image` column generates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_image: Option<f64>,
}

/// Nanos per unit of price.
pub const NANOS: f64 = 1e9;

impl Prices {
    /// Problems with the prices, each naming the field (relative to `at`).
    pub fn problems(&self, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        let fields = [
            ("input_per_million", Some(self.input_per_million)),
            ("output_per_million", Some(self.output_per_million)),
            ("reasoning_per_million", self.reasoning_per_million),
            ("per_image", self.per_image),
        ];
        for (name, v) in fields {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                out.push(format!(
                    "config key `{at}.{name}`: must be a number at least 0, got {v}"
                ));
            }
        }
        out
    }

    /// The cost, in nanos, of `prompt` input and `completion` output tokens, `reasoning` of
    /// which (if reported) were reasoning, and `images` generated images.
    pub fn cost_nanos(
        &self,
        prompt: u64,
        completion: u64,
        reasoning: Option<u64>,
        images: u64,
    ) -> u64 {
        let per_token = |price_per_million: f64| price_per_million / 1e6 * NANOS;
        let (output, reasoning) = match (self.reasoning_per_million, reasoning) {
            (Some(price), Some(r)) => {
                let r = r.min(completion);
                (
                    (completion - r) as f64 * per_token(self.output_per_million),
                    r as f64 * per_token(price),
                )
            }
            _ => (completion as f64 * per_token(self.output_per_million), 0.0),
        };
        let total = prompt as f64 * per_token(self.input_per_million)
            + output
            + reasoning
            + images as f64 * self.per_image.unwrap_or(0.0) * NANOS;
        total.round() as u64
    }
}

/// Nanos as the price's unit, for display.
pub fn from_nanos(nanos: u64) -> f64 {
    nanos as f64 / NANOS
}

/// A budget in the price's unit as nanos (saturating; a budget is validated positive).
pub fn to_nanos(amount: f64) -> u64 {
    (amount * NANOS).round().clamp(0.0, u64::MAX as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_tokens_times_prices() {
        let p = Prices {
            input_per_million: 0.15,
            output_per_million: 0.60,
            reasoning_per_million: None,
            per_image: Some(0.04),
        };
        // 1M in, 2M out: 0.15 + 1.20.
        assert_eq!(p.cost_nanos(1_000_000, 2_000_000, None, 0), 1_350_000_000);
        // 10 in, 20 out: 1.5e-6 + 1.2e-5 = 13.5 µ = 13,500 nanos.
        assert_eq!(p.cost_nanos(10, 20, Some(5), 0), 13_500);
        assert_eq!(p.cost_nanos(0, 0, None, 3), 120_000_000);
        let r = Prices {
            reasoning_per_million: Some(1.0),
            ..p
        };
        // 20 out of which 5 reasoning: 15 at 0.60, 5 at 1.0.
        assert_eq!(r.cost_nanos(0, 20, Some(5), 0), 9_000 + 5_000);
        assert!(p.problems("m").is_empty());
        let bad = Prices {
            input_per_million: -1.0,
            per_image: Some(f64::NAN),
            ..p
        };
        assert_eq!(bad.problems("m").len(), 2);
    }
}
