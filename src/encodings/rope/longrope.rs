//! LongRoPE (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million
//! Tokens", <https://arxiv.org/abs/2402.13753>), as Phi-3 and Phi-3.5 ship it: a searched
//! rescale factor $\lambda_i$ per pair instead of one formula, one list for short inputs and
//! one for long ones:
//!
//! ```math
//! \theta_i' = \frac{1}{\lambda_i\, b^{2i/d}}, \qquad
//! \lambda = \begin{cases} \lambda^{short} & \ell \le L \\ \lambda^{long} & \ell > L \end{cases},
//! \qquad a = \sqrt{1 + \frac{\ln s}{\ln L}}\ (s > 1;\ \text{else } 1)
//! ```
//!
//! with $\ell$ the current length, $L$ the original one and $s$ the extension factor (given, or
//! `max_position_embeddings` / $L$). The attention factor $a$ multiplies cos and sin like
//! YaRN's. Computed in `f32` in the order of Hugging Face's `_compute_longrope_parameters`.
//!
//! The switch is a state: a model that cached keys rotated with the short factors and then
//! grows past $L$ rotates new queries with the long ones (see `notebooks/12_rope_in_the_wild.ipynb`).

use serde::{Deserialize, Serialize};

use super::scaling::{check_dim_and_base, RopeFrequencies};
use crate::error::{ensure, ensure_positive, invalid, Result};

/// LongRoPE's per-pair factors. Not a [`super::RopeScaling`] variant: its two lists make it a
/// value that is not `Copy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongRope {
    /// $\lambda^{short}_i$, one per pair ($d/2$), used up to the original length.
    pub short_factor: Vec<f64>,
    /// $\lambda^{long}_i$, one per pair, used beyond it.
    pub long_factor: Vec<f64>,
    /// The extension factor $s$ (HF: `factor`, or `max_position_embeddings` / $L$).
    pub factor: f64,
    /// $L$, `original_max_position_embeddings`.
    pub original_max: usize,
    /// An explicit attention factor overriding $\sqrt{1 + \ln s / \ln L}$.
    pub attention_factor: Option<f64>,
}

impl LongRope {
    /// Whether a forward pass over `seq_len` positions uses the long factors (`None`: the
    /// state at initialisation, short).
    pub fn is_long(&self, seq_len: Option<usize>) -> bool {
        seq_len.is_some_and(|l| l > self.original_max)
    }

    /// $a$: the explicit factor, or $\sqrt{1 + \ln s / \ln L}$ for $s > 1$, else 1.
    pub fn attention_factor(&self) -> f64 {
        self.attention_factor.unwrap_or_else(|| {
            if self.factor <= 1.0 {
                1.0
            } else {
                (1.0 + self.factor.ln() / (self.original_max as f64).ln()).sqrt()
            }
        })
    }

    /// Checks the factors against the rotary dimension `dim`.
    ///
    /// # Errors
    /// Lists that are not $d/2$ long or hold a value that is not finite and positive; a factor
    /// or attention factor that is not finite and positive; an original length below 2.
    pub fn validate(&self, dim: usize) -> Result<()> {
        for (name, list) in [
            ("short_factor", &self.short_factor),
            ("long_factor", &self.long_factor),
        ] {
            ensure(
                list.len() == dim / 2,
                name,
                format!("a list of {}", list.len()),
                &format!("one factor per pair: {} (rotary dimension {dim})", dim / 2),
            )?;
            if let Some(bad) = list.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                return Err(invalid(name, bad, "finite factors > 0"));
            }
        }
        ensure_positive("factor", self.factor)?;
        if let Some(a) = self.attention_factor {
            ensure_positive("attention_factor", a)?;
        }
        ensure(
            self.original_max >= 2,
            "original_max_position_embeddings",
            self.original_max,
            "at least 2",
        )
    }

    /// $\theta_i'$ and $a$ for a forward pass over `seq_len` positions.
    ///
    /// # Errors
    /// As [`validate`](Self::validate), and an odd `dim` or a base not above 1.
    pub fn frequencies(
        &self,
        dim: usize,
        base: f64,
        seq_len: Option<usize>,
    ) -> Result<RopeFrequencies> {
        check_dim_and_base(dim, base)?;
        self.validate(dim)?;
        let ext = if self.is_long(seq_len) {
            &self.long_factor
        } else {
            &self.short_factor
        };
        let base32 = base as f32;
        // 1 / (lambda_i b^(2i/d)), in f32 as `1.0 / (ext_factors * base**inv_freq_shape)`
        let inv_freq = ext
            .iter()
            .enumerate()
            .map(|(i, &lambda)| 1.0 / (lambda as f32 * base32.powf((2 * i) as f32 / dim as f32)))
            .collect();
        Ok(RopeFrequencies {
            inv_freq,
            attention_factor: self.attention_factor() as f32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::rope::RopeConfig;

    fn uniform(lambda: f64, d: usize) -> LongRope {
        LongRope {
            short_factor: vec![1.0; d / 2],
            long_factor: vec![lambda; d / 2],
            factor: 32.0,
            original_max: 4096,
            attention_factor: None,
        }
    }

    #[test]
    fn short_factors_of_one_are_plain_rope_and_long_ones_are_pi() {
        let d = 16;
        let lr = uniform(4.0, d);
        let plain = RopeConfig::new(d, 1e4).unwrap().frequencies(None).unwrap();
        let short = lr.frequencies(d, 1e4, Some(4096)).unwrap();
        assert_eq!(short.inv_freq, plain.inv_freq);
        let long = lr.frequencies(d, 1e4, Some(4097)).unwrap();
        for (l, p) in long.inv_freq.iter().zip(&plain.inv_freq) {
            assert!((l * 4.0 / p - 1.0).abs() < 1e-6);
        }
        // a = sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12)
        assert!((short.attention_factor - (17.0f64 / 12.0).sqrt() as f32).abs() < 1e-6);
        assert!(!lr.is_long(None) && lr.is_long(Some(5000)));
    }

    #[test]
    fn bad_lists_are_errors() {
        let mut lr = uniform(4.0, 16);
        assert!(lr.frequencies(18, 1e4, None).is_err());
        lr.long_factor[3] = 0.0;
        let e = lr.frequencies(16, 1e4, None).unwrap_err().to_string();
        assert!(e.contains("long_factor"), "{e}");
        let mut lr = uniform(4.0, 16);
        lr.factor = f64::NAN;
        assert!(lr.validate(16).is_err());
    }
}
