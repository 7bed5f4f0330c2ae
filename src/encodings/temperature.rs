//! # Position-dependent attention temperature
//!
//! Log-$n$ scaling (Chiang and Cholak 2022, "Overcoming a Theoretical Limitation of
//! Self-Attention", <https://arxiv.org/abs/2202.12172>; Su's entropy-invariant softmax; Qwen's
//! `use_logn_attn`) and the floor-log form of recent long-context models (Llama 4's
//! `attn_temperature_tuning`, Ministral 3's `llama_4_scaling_beta`). Reference code: Qwen-7B
//! `modeling_qwen.py` (`logn_list`), transformers `models/llama4/modeling_llama4.py` and
//! `models/ministral3/modeling_ministral3.py` (`get_llama_4_attn_scale`).
//!
//! The entropy of a query's attention grows like $\ln n$ with the number $n$ of keys it sees,
//! so on inputs longer than the training length the weights flatten. Multiplying the query at
//! position $m$ by a factor $\tau(m) \ge 1$ multiplies all its logits by $\tau$ and sharpens them
//! back. Log-$n$ grows smoothly from the training length $L$; the floor-log form is constant on
//! blocks of $F$ positions and grows by $\beta \ln 2$ at the first block boundary:
//!
//! ```math
//! \tau_{\log n}(m) = \max\Big(1, \frac{\ln(m + 1)}{\ln L}\Big), \qquad
//! \tau_{\text{floor}}(m) = 1 + \beta \ln\Big(1 + \Big\lfloor \frac{m + c}{F} \Big\rfloor\Big)
//! ```
//!
//! with $c = 1$ in Llama 4 ($F = 8192$, $\beta = 0.1$) and $c = 0$ in Ministral 3 ($F$ the
//! original length). [`Tempered`] applies $\tau$ to the queries of any scheme. Checked and
//! plotted in `notebooks/12_rope_in_the_wild.ipynb`.
//!
//! **Which log-$n$.** The query at 0-based position $m$ sees $n = m + 1$ keys under a causal
//! mask; [`Temperature::LogN`] multiplies it by $\log_L n$ once $n > L$ and by 1 before, which is
//! $\max(1, \ln n / \ln L)$ since $\log_L n \le 1$ for $n \le L$. This is Qwen's
//! `logn_list[m] = math.log(m + 1, seq_length) if m + 1 > seq_length else 1` and Su's ReRoPE code
//! (bojone/rerope, `rerope_patch.py`: `((position_ids + 1).log() / log(training_length)).clip(1)`).
//! Su's entropy-invariant attention (<https://kexue.fm/archives/8823>, derived again in
//! <https://kexue.fm/archives/9034>) scales the logits by $\kappa \ln n$ at every $n$, a change
//! to training; for a model trained with $1/\sqrt d$ at length $L$, $\ln n / \ln L$ clipped at 1 is
//! that scale normalised to leave every length up to $L$ as trained. The argument: with
//! logits $\lambda s_j$ over $n$ keys, $H = \ln n + \ln \tfrac1n\sum_j e^{\lambda s_j} -
//! \lambda \sum_j p_j s_j \approx \ln n - \lambda (s_{\max} - \bar s)$, so $\lambda \propto \ln n$
//! keeps $H$ level as $n$ grows ([`attention_entropy`] measures it; notebook 13 checks it on
//! random q and k).

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{query_position, PositionScheme};
use crate::error::{ensure, ensure_positive, invalid, Result};

/// A query scale $\tau(m)$ that depends on the query's position $m$ (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Temperature {
    /// $\max(1, \ln(m+1) / \ln L)$: Qwen's `logn_list` (1 up to $L$, then $\log_L(m+1)$).
    LogN {
        /// $L$, the training length; at least 2.
        train_len: usize,
    },
    /// $1 + \beta \ln(1 + \lfloor (m + c) / F \rfloor)$.
    FloorLog {
        /// $\beta$ (Llama 4's `attn_scale`, Ministral 3's `llama_4_scaling_beta`).
        beta: f64,
        /// $F$ (Llama 4's `floor_scale`, Ministral 3's original length).
        floor: usize,
        /// $c$: 1 in Llama 4 (`cache_position + 1`), 0 in Ministral 3.
        offset: usize,
    },
}

impl Temperature {
    /// Llama 4's `attn_temperature_tuning`: $\beta = 0.1$, $F = 8192$, $c = 1$.
    pub fn llama4() -> Self {
        Temperature::FloorLog {
            beta: 0.1,
            floor: 8192,
            offset: 1,
        }
    }

    /// Ministral 3: $\beta$ = `llama_4_scaling_beta`, $F$ = `original_max_position_embeddings`,
    /// $c = 0$.
    pub fn ministral3(beta: f64, original_max: usize) -> Self {
        Temperature::FloorLog {
            beta,
            floor: original_max,
            offset: 0,
        }
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// A training length below 2, a floor of 0, a $\beta$ that is not finite and positive.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Temperature::LogN { train_len } => {
                ensure(train_len >= 2, "train_len", train_len, "at least 2")
            }
            Temperature::FloorLog { beta, floor, .. } => {
                ensure_positive("beta", beta)?;
                ensure(floor >= 1, "floor", floor, "at least 1")
            }
        }
    }

    /// $\tau(m)$ in `f64`.
    pub fn scale(&self, position: usize) -> f64 {
        match *self {
            Temperature::LogN { train_len } => {
                ((position as f64 + 1.0).ln() / (train_len as f64).ln()).max(1.0)
            }
            Temperature::FloorLog {
                beta,
                floor,
                offset,
            } => {
                // 1 + beta ln(1 + floor((m + c) / F))
                let blocks = (position.saturating_add(offset) / floor.max(1)) as f64;
                1.0 + beta * blocks.ln_1p()
            }
        }
    }

    /// A short name: `log-n (L = 128)`, `floor-log (beta 0.1, F 8192, c 1)`.
    pub fn name(&self) -> String {
        match *self {
            Temperature::LogN { train_len } => format!("log-n (L = {train_len})"),
            Temperature::FloorLog {
                beta,
                floor,
                offset,
            } => format!("floor-log (beta {beta}, F {floor}, c {offset})"),
        }
    }
}

/// The entropy $H_i = -\sum_j \alpha_{ij} \ln \alpha_{ij}$ of each row of attention weights, in
/// nats ($0 \ln 0 = 0$): $\ln n$ for uniform weights over $n$ keys, 0 for one key.
///
/// # Errors
/// A weight that is negative or not finite.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let uniform = Array2::<f32>::from_elem((1, 4), 0.25);
/// assert!((attention_entropy(uniform.view())?[0] - 4f64.ln()).abs() < 1e-7);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn attention_entropy(probs: ArrayView2<f32>) -> Result<Vec<f64>> {
    if let Some(p) = probs.iter().find(|p| !(p.is_finite() && **p >= 0.0)) {
        return Err(invalid("attention weight", p, "a finite number >= 0"));
    }
    Ok(probs
        .outer_iter()
        .map(|row| {
            // -sum_j p_j ln p_j
            -row.iter()
                .filter(|&&p| p > 0.0)
                .map(|&p| f64::from(p) * f64::from(p).ln())
                .sum::<f64>()
        })
        .collect())
}

/// A scheme whose queries are multiplied by $\tau(m)$ before anything else: the query's content
/// score $q \cdot k$, and every position term linear in $q$ (RoPE's, xPos's, Shaw's
/// $q \cdot a^K$, DeBERTa's c2p), is $\tau(m)$ times the inner scheme's; terms without $q$
/// (DeBERTa's p2c, Transformer-XL's $u \cdot k$ and $v \cdot r$, TUPE's position term, additive
/// biases), an absolute encoding added to $q$ after the scaling, and CoPE's gates are not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tempered<S> {
    /// The scheme whose queries are scaled.
    pub inner: S,
    /// $\tau$.
    pub temperature: Temperature,
}

impl<S: PositionScheme> Tempered<S> {
    /// `inner` with queries scaled by `temperature`.
    ///
    /// # Errors
    /// An invalid temperature.
    pub fn new(inner: S, temperature: Temperature) -> Result<Self> {
        temperature.validate()?;
        Ok(Self { inner, temperature })
    }

    /// $q_i \tau(m_i)$ for queries at the last `q.nrows()` of `lk` positions.
    fn scaled_queries(&self, q: ArrayView2<f32>, lk: usize) -> Array2<f32> {
        let lq = q.nrows();
        let mut q = q.to_owned();
        for (i, mut row) in q.outer_iter_mut().enumerate() {
            row *= self.temperature.scale(query_position(i, lq, lk)) as f32;
        }
        q
    }
}

impl<S: PositionScheme> PositionScheme for Tempered<S> {
    fn name(&self) -> String {
        format!("{} + {}", self.inner.name(), self.temperature.name())
    }

    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        super::ensure_queries_fit(q.nrows(), k.nrows())?;
        let q = self.scaled_queries(q, k.nrows());
        self.inner.transform_qk(q.view(), k)
    }

    fn score_scale(&self, head_dim: usize) -> f32 {
        self.inner.score_scale(head_dim)
    }

    fn score_term(
        &self,
        head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        // q here is already scaled (it comes from transform_qk)
        self.inner.score_term(head, q, k)
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.inner.score_bias(head, lq, lk)
    }

    fn value_term(&self, head: usize, probs: ArrayView2<f32>) -> Result<Option<Array2<f32>>> {
        self.inner.value_term(head, probs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;
    use crate::encodings::init::seeded_normal as random;
    use crate::encodings::rope::{Rope, RopeConfig, RopeLayout};
    use proptest::prelude::*;

    #[test]
    fn log_n_is_one_up_to_the_training_length_then_log_base_l() {
        let t = Temperature::LogN { train_len: 128 };
        assert_eq!(t.scale(0), 1.0);
        assert_eq!(t.scale(127), 1.0);
        assert!(t.scale(128) > 1.0);
        // m + 1 = L^2: tau = 2
        assert!((t.scale(128 * 128 - 1) - 2.0).abs() < 1e-12);
        assert!(Temperature::LogN { train_len: 1 }.validate().is_err());
    }

    #[test]
    fn floor_log_steps_at_multiples_of_the_floor() {
        let llama4 = Temperature::llama4();
        assert_eq!(llama4.scale(8190), 1.0);
        // c = 1: position 8191 is the first of the second block
        assert!((llama4.scale(8191) - (1.0 + 0.1 * 2f64.ln())).abs() < 1e-15);
        let m3 = Temperature::ministral3(0.1, 16_384);
        assert_eq!(m3.scale(16_383), 1.0);
        assert!((m3.scale(16_384) - (1.0 + 0.1 * 2f64.ln())).abs() < 1e-15);
        assert!((m3.scale(3 * 16_384) - (1.0 + 0.1 * 4f64.ln())).abs() < 1e-15);
        assert!(Temperature::ministral3(-0.1, 16).validate().is_err());
        assert!(Temperature::ministral3(0.1, 0).validate().is_err());
    }

    #[test]
    fn entropy_is_zero_on_one_key_and_log_n_on_uniform_weights() {
        let probs = ndarray::array![[0.0f32, 1.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]];
        let h = attention_entropy(probs.view()).unwrap();
        assert_eq!(h[0], 0.0);
        assert!((h[1] - 2f64.ln()).abs() < 1e-12);
        // -(0.2 ln 0.2 + 0.3 ln 0.3 + 0.5 ln 0.5), written out
        let expected: f64 = 0.2 * 5f64.ln() + 0.3 * (10f64 / 3.0).ln() + 0.5 * 2f64.ln();
        assert!((h[2] - expected).abs() < 1e-7);
        let bad = ndarray::array![[0.5f32, -0.1, 0.6]];
        assert!(attention_entropy(bad.view()).is_err());
        assert!(attention_entropy(ndarray::array![[f32::NAN]].view()).is_err());
    }

    proptest! {
        #[test]
        fn floor_log_is_monotone_and_constant_within_a_block(m in 0usize..1_000_000, floor in 1usize..5000) {
            let t = Temperature::ministral3(0.1, floor);
            prop_assert!(t.scale(m + 1) >= t.scale(m));
            let start = m / floor * floor;
            prop_assert_eq!(t.scale(m), t.scale(start));
        }

        #[test]
        fn tempered_logits_are_tau_times_the_inner_logits(seed in 0u64..200, lq in 1usize..6) {
            // the crate's scores with scaled queries against tau_i x the plain scores, row by row
            let rope = Rope::new(RopeConfig::new(8, 1e4).unwrap(), RopeLayout::Half);
            let t = Temperature::LogN { train_len: 2 };
            let lk = 7;
            let (q, k) = (random(lq, 8, seed), random(lk, 8, seed + 1));
            let plain = attention(q.view(), k.view(), k.view(), &rope, 0, false).unwrap().scores;
            let hot = attention(q.view(), k.view(), k.view(), &Tempered::new(rope, t).unwrap(), 0, false).unwrap().scores;
            for i in 0..lq {
                let tau = t.scale(lk - lq + i) as f32;
                for j in 0..lk {
                    prop_assert!((hot[[i, j]] - tau * plain[[i, j]]).abs() < 1e-5 * (1.0 + plain[[i, j]].abs()));
                }
            }
        }
    }
}
