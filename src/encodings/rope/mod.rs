//! # RoPE — rotary position embedding
//!
//! Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding"
//! (<https://arxiv.org/abs/2104.09864>); reference code: Hugging Face
//! `modeling_rope_utils.py` and `apply_rotary_pos_emb` (LLaMA, GPT-NeoX), GPT-J's
//! `rotate_every_two`.
//!
//! RoPE asks for an encoding $f(x, m)$ with $f(q, m) \cdot f(k, n) = g(q, k, m - n)$: the
//! score should see only the offset. In two dimensions a rotation by $m\theta$ does it,
//! since $R_{m\theta}^\top R_{n\theta} = R_{(n-m)\theta}$; in $d$ dimensions RoPE rotates
//! $d/2$ independent pairs, pair $i$ at frequency $\theta_i = b^{-2i/d}$:
//!
//! ```math
//! f(x, m)_{\text{pair } i} = \begin{pmatrix}\cos m\theta_i & -\sin m\theta_i \\
//! \sin m\theta_i & \cos m\theta_i\end{pmatrix} \begin{pmatrix} x_{i,1} \\ x_{i,2}
//! \end{pmatrix}, \qquad f(q, m)\cdot f(k, n) = \sum_i \operatorname{Re}\big[
//! \tilde q_i \overline{\tilde k_i}\  e^{\mathrm{i}(m-n)\theta_i}\big]
//! ```
//!
//! Rotations keep norms. Which dimensions form a pair is a memory layout:
//! **interleaved** ($x_{2i}, x_{2i+1}$; GPT-J, RoFormer, Meta's LLaMA code,
//! [`rope_interleaved`]) or **half** ($x_i, x_{i+d/2}$; GPT-NeoX, Hugging Face's
//! `rotate_half`, [`rope_half`]); they agree up to the permutation [`interleaved_to_half`],
//! which is why Hugging Face's LLaMA conversion permutes the rows of $W_q$ and $W_k$. The
//! same rotation as a matrix, and Su et al.'s decay bound: [`rotation_matrix`],
//! [`decay_bound`]. Context extension ([`RopeScaling`]) changes only
//! the frequencies (and for YaRN an attention factor multiplying cos and sin).
//!
//! Derived step by step, checked and plotted in `notebooks/07_rope.ipynb`; RoPE as real
//! models configure it (a model's `config.json` read into these types, [`ModelRope`]), and
//! where engines misread it, in `notebooks/12_rope_in_the_wild.ipynb`; the relative position
//! rectified at a window at inference ([`ReRope`]: ReRoPE, Leaky ReRoPE) in
//! `notebooks/13_rerope_and_log_n.ipynb`. Some pairs only ([`PairRope`]): partial RoPE and
//! p-RoPE; trained at randomly drawn positions: [`RandomPositions`]; both in
//! `notebooks/14_schemes_since_2023.ipynb`.

mod bands;
mod engine;
mod extend;
mod longrope;
mod matrix;
mod model;
mod partial;
mod parts;
mod precision;
mod random;
mod rerope;
mod scaling;

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_even, ensure_shape, Result};
pub use bands::{pair_bands, rotations, Band, BandCounts, RampBounds};
pub use engine::{query_weights, stale_cache_error, Misreading};
pub use extend::{self_extend_distance, SelfExtend};
pub use longrope::LongRope;
pub use matrix::{decay_bound, rotation_matrix};
pub use model::{LayerRope, LayerScaling, ModelRope, RopeSummary};
pub use partial::{
    neox_to_half, p_rope_inv_freq, p_rope_pairs, partial_inv_freq, partial_rotary_dim, PairRope,
    NEOX_ROTARY_FACTOR, P_ROPE_KEPT,
};
pub use parts::{ntk_by_parts_inv_freq, yarn_correction_dim, yarn_correction_range, yarn_ramp};
pub use precision::{phase_error, wrapped_difference, AnglePrecision};
pub use random::{sample_positions, RandomEval, RandomPositions, RandomRope, MAX_RANDOM_POSITIONS};
pub use rerope::ReRope;
pub use scaling::{
    yarn_mscale, RopeFrequencies, RopeScaling, ScalingKind, LLAMA3_HIGH_FREQ_FACTOR,
    LLAMA3_LOW_FREQ_FACTOR, MAX_DIM, YARN_BETA_FAST, YARN_BETA_SLOW,
};

/// Which dimensions form a rotated pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RopeLayout {
    /// Pairs $(x_{2i}, x_{2i+1})$: GPT-J, RoFormer, Meta's LLaMA code.
    Interleaved,
    /// Pairs $(x_i, x_{i+d/2})$: GPT-NeoX, Hugging Face's `rotate_half` (its LLaMA after the
    /// conversion permutes $W_q$ and $W_k$).
    #[default]
    Half,
}

/// RoPE hyper-parameters: rotary width, base and scaling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RopeConfig {
    /// Rotary dimension $d$ (the head width); even.
    pub dim: usize,
    /// Frequency base $b$; 10000 in RoFormer and LLaMA 2, 500000 in Llama 3.
    pub base: f64,
    /// Context-extension scaling; default none.
    pub scaling: RopeScaling,
}

impl RopeConfig {
    /// Plain RoPE with width `dim` and base `base`.
    ///
    /// # Errors
    /// `dim` odd, zero or above [`MAX_DIM`], `base` not a finite number above 1.
    pub fn new(dim: usize, base: f64) -> Result<Self> {
        Self::with_scaling(dim, base, RopeScaling::None)
    }

    /// RoPE with a scaling.
    ///
    /// # Errors
    /// As [`new`](Self::new) and [`RopeScaling::validate`].
    pub fn with_scaling(dim: usize, base: f64, scaling: RopeScaling) -> Result<Self> {
        scaling::check_dim_and_base(dim, base)?;
        scaling.validate()?;
        Ok(Self { dim, base, scaling })
    }

    /// The inverse frequencies and attention factor for a sequence of `seq_len` positions
    /// (only dynamic NTK looks at it; `None` means the training length).
    ///
    /// # Errors
    /// When the configuration is invalid (fields are public and may have been edited).
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let f = RopeConfig::new(64, 10_000.0)?.frequencies(None)?;
    /// assert_eq!(f.inv_freq[0], 1.0);
    /// assert_eq!(f.inv_freq.len(), 32);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn frequencies(&self, seq_len: Option<usize>) -> Result<RopeFrequencies> {
        scaling::check_dim_and_base(self.dim, self.base)?;
        self.scaling.validate()?;
        scaling::scaled_frequencies(self.dim, self.base, &self.scaling, seq_len)
    }
}

/// $\cos(m\theta_i)$ and $\sin(m\theta_i)$ times the attention factor, `[L, d/2]` each. The
/// angle is computed in `f64` and rounded once.
pub fn rope_cos_sin(positions: &[f64], freqs: &RopeFrequencies) -> (Array2<f32>, Array2<f32>) {
    let shape = (positions.len(), freqs.inv_freq.len());
    let a = f64::from(freqs.attention_factor);
    // m * theta_i, [L, d/2]
    let angle = |(m, i): (usize, usize)| positions[m] * f64::from(freqs.inv_freq[i]);
    let cos = Array2::from_shape_fn(shape, |mi| (angle(mi).cos() * a) as f32);
    let sin = Array2::from_shape_fn(shape, |mi| (angle(mi).sin() * a) as f32);
    (cos, sin)
}

fn check_tables(x: &ArrayView2<f32>, cos: &Array2<f32>, sin: &Array2<f32>) -> Result<()> {
    let (l, d) = x.dim();
    ensure(d % 2 == 0, "width", d, "even (RoPE rotates pairs)")?;
    ensure_shape("RoPE cos table", &[l, d / 2], cos.shape())?;
    ensure_shape("RoPE sin table", &[l, d / 2], sin.shape())
}

/// Rotates pairs $(x_{2i}, x_{2i+1})$ of each row $m$ by $m\theta_i$, `[L, d]`:
/// $y_{2i} = x_{2i}\cos - x_{2i+1}\sin$, $y_{2i+1} = x_{2i+1}\cos + x_{2i}\sin$.
///
/// # Errors
/// When the tables are not `[L, d/2]` or `d` is odd.
pub fn rope_interleaved(
    x: ArrayView2<f32>,
    cos: &Array2<f32>,
    sin: &Array2<f32>,
) -> Result<Array2<f32>> {
    check_tables(&x, cos, sin)?;
    let mut y = Array2::zeros(x.dim());
    for ((m, i), &c) in cos.indexed_iter() {
        let s = sin[[m, i]];
        let (a, b) = (x[[m, 2 * i]], x[[m, 2 * i + 1]]);
        y[[m, 2 * i]] = a * c - b * s;
        y[[m, 2 * i + 1]] = b * c + a * s;
    }
    Ok(y)
}

/// Rotates pairs $(x_i, x_{i+d/2})$ of each row $m$ by $m\theta_i$, `[L, d]`: HF's
/// `x * cos + rotate_half(x) * sin` with `rotate_half(x) = [-x_2, x_1]`.
///
/// # Errors
/// When the tables are not `[L, d/2]` or `d` is odd.
pub fn rope_half(x: ArrayView2<f32>, cos: &Array2<f32>, sin: &Array2<f32>) -> Result<Array2<f32>> {
    check_tables(&x, cos, sin)?;
    let half = x.ncols() / 2;
    let mut y = Array2::zeros(x.dim());
    for ((m, i), &c) in cos.indexed_iter() {
        let s = sin[[m, i]];
        let (a, b) = (x[[m, i]], x[[m, i + half]]);
        y[[m, i]] = a * c - b * s;
        y[[m, i + half]] = b * c + a * s;
    }
    Ok(y)
}

/// The permutation $\pi$ with `half[:, k] = interleaved[:, π[k]]`: $\pi = (0, 2, 4, \dots,
/// 1, 3, 5, \dots)$. Then `rope_half(x[:, π]) == rope_interleaved(x)[:, π]`.
///
/// # Errors
/// When `dim` is odd or zero.
pub fn interleaved_to_half(dim: usize) -> Result<Vec<usize>> {
    ensure_even("dim", dim)?;
    Ok((0..dim).step_by(2).chain((1..dim).step_by(2)).collect())
}

/// Applies RoPE to rows at `positions` in the given layout.
///
/// # Errors
/// When the width differs from the config's or the lengths differ.
pub fn apply_rope(
    x: ArrayView2<f32>,
    positions: &[f64],
    freqs: &RopeFrequencies,
    layout: RopeLayout,
) -> Result<Array2<f32>> {
    ensure_shape("RoPE: positions", &[x.nrows()], &[positions.len()])?;
    ensure_shape("RoPE: width", &[2 * freqs.inv_freq.len()], &[x.ncols()])?;
    let (cos, sin) = rope_cos_sin(positions, freqs);
    match layout {
        RopeLayout::Interleaved => rope_interleaved(x, &cos, &sin),
        RopeLayout::Half => rope_half(x, &cos, &sin),
    }
}

/// RoPE on the first `2 * inv_freq.len()` channels of rows at `positions` (partial rotary:
/// GPT-NeoX's `rotary_pct`, `partial_rotary_factor`), the others copied unchanged, `[L, d]`.
///
/// # Errors
/// When the rows are narrower than the rotary dimension or the lengths differ.
pub fn apply_rope_partial(
    x: ArrayView2<f32>,
    positions: &[f64],
    freqs: &RopeFrequencies,
    layout: RopeLayout,
) -> Result<Array2<f32>> {
    let rotary = 2 * freqs.inv_freq.len();
    ensure(
        rotary <= x.ncols(),
        "rotary dimension",
        rotary,
        &format!("at most the width {}", x.ncols()),
    )?;
    let mut y = x.to_owned();
    let rotated = apply_rope(x.slice(ndarray::s![.., ..rotary]), positions, freqs, layout)?;
    y.slice_mut(ndarray::s![.., ..rotary]).assign(&rotated);
    Ok(y)
}

/// RoPE as an attention scheme: $q'_i = f(q_i, L_k - L_q + i)$, $k'_j = f(k_j, j)$. Dynamic
/// NTK frequencies are computed for the current key length.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rope {
    /// Frequencies and scaling.
    pub config: RopeConfig,
    /// Pair layout.
    pub layout: RopeLayout,
}

impl Rope {
    /// RoPE with `config` in `layout`.
    pub fn new(config: RopeConfig, layout: RopeLayout) -> Self {
        Self { config, layout }
    }
}

impl PositionScheme for Rope {
    fn name(&self) -> String {
        let layout = match self.layout {
            RopeLayout::Interleaved => "interleaved",
            RopeLayout::Half => "half",
        };
        match self.config.scaling {
            RopeScaling::None => format!("rope ({layout})"),
            s => format!("rope ({layout}, {})", s.name()),
        }
    }

    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        let freqs = self.config.frequencies(Some(lk))?;
        let q_pos: Vec<f64> = (0..lq).map(|i| query_position(i, lq, lk) as f64).collect();
        let k_pos: Vec<f64> = (0..lk).map(|j| j as f64).collect();
        Ok((
            apply_rope(q, &q_pos, &freqs, self.layout)?,
            apply_rope(k, &k_pos, &freqs, self.layout)?,
        ))
    }
}

/// Dynamic NTK with Hugging Face's caching rule (`dynamic_rope_update`): frequencies are
/// recomputed when a longer sequence arrives, and reset to the original ones when a sequence
/// shorter than the training length follows a longer one.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicNtkRope {
    config: RopeConfig,
    original: RopeFrequencies,
    current: RopeFrequencies,
    original_max: usize,
    max_seq_len_cached: usize,
}

impl DynamicNtkRope {
    /// Starts at the training length with the unscaled frequencies.
    ///
    /// # Errors
    /// When `config` is invalid or its scaling is not [`RopeScaling::Dynamic`].
    pub fn new(config: RopeConfig) -> Result<Self> {
        let RopeScaling::Dynamic { original_max, .. } = config.scaling else {
            return Err(crate::error::invalid(
                "scaling",
                config.scaling.name(),
                "dynamic (DynamicNtkRope caches dynamic NTK frequencies)",
            ));
        };
        let original = config.frequencies(Some(original_max))?;
        Ok(Self {
            config,
            current: original.clone(),
            original,
            original_max,
            max_seq_len_cached: original_max,
        })
    }

    /// Frequencies for a forward pass whose largest position is `seq_len - 1`, updating the cache.
    ///
    /// `seq_len` is the largest position + 1, as transformers' `_dynamic_frequency_update`
    /// takes `max(position_ids) + 1`, not the number of tokens in the pass: in cached decoding a
    /// one-token step at position 5000 passes 5001. The reset to the original frequencies
    /// therefore happens only when positions start again below the training length.
    ///
    /// # Errors
    /// Never for a valid config; kept fallible for validation.
    pub fn update(&mut self, seq_len: usize) -> Result<&RopeFrequencies> {
        if seq_len > self.max_seq_len_cached {
            // growth: recompute for the new length
            self.current = self.config.frequencies(Some(seq_len))?;
            self.max_seq_len_cached = seq_len;
        }
        if seq_len < self.original_max && self.max_seq_len_cached > self.original_max {
            // reset to the original frequencies
            self.current = self.original.clone();
            self.max_seq_len_cached = self.original_max;
        }
        Ok(&self.current)
    }

    /// The length the cached frequencies were computed for.
    pub fn cached_len(&self) -> usize {
        self.max_seq_len_cached
    }
}

#[cfg(test)]
mod tests;
