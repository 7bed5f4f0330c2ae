//! Partial RoPE and p-RoPE: RoPE on some of the pairs only, the others left as they are.
//!
//! **Partial RoPE** (GPT-NeoX's `rotary_pct`, Hugging Face's `partial_rotary_factor`,
//! x-transformers' `rotary_emb_dim`) rotates the first $r = \lfloor f d \rfloor$ channels of
//! each head and copies the other $d - r$. The rotated block is a RoPE of width $r$ with its
//! own frequencies $\theta_i = b^{-2i/r}$, $i < r/2$: from 1 down to $b^{-(r-2)/r}$ (close to
//! $b^{-1}$ for a large $r$) on fewer pairs. GPT-NeoX pairs channel $i$ with $i + r/2$ (half layout), x-transformers
//! channel $2i$ with $2i + 1$; GPT-NeoX and Pythia use $f = 0.25$.
//!
//! **p-RoPE** (Barbero et al. 2024, "Round and Round We Go! What makes Rotary Positional
//! Encodings useful?", <https://arxiv.org/abs/2410.06205>; Hugging Face's `rope_type`
//! `"proportional"`, Gemma 4's global layers) keeps RoPE's own frequencies
//! $\theta_i = b^{-2i/d}$ for the fastest $\lfloor p\,d/2 \rfloor$ pairs and sets the others,
//! the slowest, to 0: a pair at frequency 0 is never rotated. The paper finds the slowest pairs
//! used as semantic channels that RoPE makes unreliable at long range; $p = 0$ is NoPE and
//! $p = 1$ is RoPE.
//!
//! ```math
//! \text{partial: } \theta_i = \begin{cases} b^{-2i/r} & i < r/2 \\ 0 & \text{else}\end{cases}
//! \qquad
//! \text{p-RoPE: } \theta_i = \begin{cases} b^{-2i/d} & i < \lfloor p\,d/2 \rfloor \\ 0 &
//! \text{else}\end{cases} \qquad (i = 0..d/2)
//! ```
//!
//! Both are frequency vectors over all $d/2$ pairs, which is how they reach the model's
//! rotation (its half layout, pairs $(i, i + d/2)$): for partial RoPE that rotates the pairs
//! $(i, i + d/2)$, $i < r/2$, where GPT-NeoX rotates $(i, i + r/2)$, the same rotation after a
//! fixed permutation of the channels ([`neox_to_half`]), which changes no score
//! $q' \cdot k'$ when queries and keys both get it.
//!
//! Both derived, checked against transformers and plotted in
//! `notebooks/14_schemes_since_2023.ipynb`.

use serde::{Deserialize, Serialize};

use super::scaling::{check_dim_and_base, default_inv_freq};
use super::{apply_rope, RopeFrequencies, RopeLayout};
use crate::encodings::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, Result};
use ndarray::{Array2, ArrayView2};

/// GPT-NeoX's and Pythia's `rotary_pct`, 0.25.
pub const NEOX_ROTARY_FACTOR: f64 = 0.25;
/// The fraction of pairs p-RoPE keeps in Barbero et al.'s experiments, 0.75.
pub const P_ROPE_KEPT: f64 = 0.75;

/// The rotary width $r = \lfloor f d \rfloor$ of partial RoPE (transformers'
/// `int(head_dim * partial_rotary_factor)`).
///
/// # Errors
/// `factor` outside $(0, 1]$, or an $r$ that is odd or 0 (the rotated channels form pairs).
pub fn partial_rotary_dim(head_dim: usize, factor: f64) -> Result<usize> {
    ensure(
        factor.is_finite() && factor > 0.0 && factor <= 1.0,
        "partial_rotary_factor",
        factor,
        "a number in (0, 1]",
    )?;
    let r = (head_dim as f64 * factor).floor() as usize;
    ensure(
        r >= 2 && r.is_multiple_of(2),
        "partial_rotary_factor",
        factor,
        &format!("one that rotates an even number >= 2 of the {head_dim} channels (floor(factor x {head_dim}) = {r})"),
    )?;
    Ok(r)
}

/// Partial RoPE's frequencies over all $d/2$ pairs: $b^{-2i/r}$ for $i < r/2$, then 0
/// ($r$ from [`partial_rotary_dim`]).
///
/// # Errors
/// As [`partial_rotary_dim`], and a head width or base RoPE rejects.
///
/// # Examples
/// ```
/// use posenc::encodings::rope::partial_inv_freq;
/// // d = 32, f = 0.25: r = 8, four pairs at 1, 0.1, 0.01, 0.001
/// let theta = partial_inv_freq(32, 10_000.0, 0.25)?;
/// assert_eq!(theta.len(), 16);
/// assert_eq!(theta[0], 1.0);
/// assert!((theta[3] - 1e-3).abs() < 1e-9 && theta[4..].iter().all(|&t| t == 0.0));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn partial_inv_freq(head_dim: usize, base: f64, factor: f64) -> Result<Vec<f32>> {
    check_dim_and_base(head_dim, base)?;
    let r = partial_rotary_dim(head_dim, factor)?;
    let mut theta = default_inv_freq(r, base);
    theta.resize(head_dim / 2, 0.0);
    Ok(theta)
}

/// The number of pairs p-RoPE rotates, $\lfloor p\,d/2 \rfloor$ (transformers'
/// `int(partial_rotary_factor * head_dim // 2)`).
///
/// # Errors
/// `kept` outside $[0, 1]$.
pub fn p_rope_pairs(head_dim: usize, kept: f64) -> Result<usize> {
    ensure(
        kept.is_finite() && (0.0..=1.0).contains(&kept),
        "p_rope_kept",
        kept,
        "a number in [0, 1] (the fraction of the pairs that rotate)",
    )?;
    Ok((kept * head_dim as f64 / 2.0).floor() as usize)
}

/// p-RoPE's frequencies over all $d/2$ pairs: RoPE's own $b^{-2i/d}$ for the fastest
/// $\lfloor p\,d/2 \rfloor$ pairs, then 0 (transformers' `"proportional"` RoPE).
///
/// # Errors
/// As [`p_rope_pairs`], and a head width or base RoPE rejects.
///
/// # Examples
/// ```
/// use posenc::encodings::rope::{p_rope_inv_freq, RopeConfig};
/// let rope = RopeConfig::new(32, 10_000.0)?.frequencies(None)?.inv_freq;
/// let theta = p_rope_inv_freq(32, 10_000.0, 0.75)?;
/// assert_eq!(theta[..12], rope[..12]);
/// assert!(theta[12..].iter().all(|&t| t == 0.0));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn p_rope_inv_freq(head_dim: usize, base: f64, kept: f64) -> Result<Vec<f32>> {
    check_dim_and_base(head_dim, base)?;
    let pairs = p_rope_pairs(head_dim, kept)?;
    let mut theta = default_inv_freq(head_dim, base);
    theta[pairs..].fill(0.0);
    Ok(theta)
}

/// The permutation $\pi$ with `half[:, k] = neox[:, π[k]]` that takes GPT-NeoX's partial
/// layout (pairs $(i, i + r/2)$ in the first $r$ channels, then the unrotated ones) to the
/// half layout of all $d$ channels with the rotated pairs first (pairs $(i, i + d/2)$,
/// $i < r/2$): `apply_rope(x[:, π], θ_full) == apply_rope_partial(x, θ_r)[:, π]`.
///
/// # Errors
/// `head_dim` odd, or `rotary_dim` odd or above `head_dim`.
pub fn neox_to_half(head_dim: usize, rotary_dim: usize) -> Result<Vec<usize>> {
    ensure(
        head_dim.is_multiple_of(2) && rotary_dim.is_multiple_of(2) && rotary_dim <= head_dim,
        "rotary_dim",
        rotary_dim,
        &format!("even and at most the even head width {head_dim}"),
    )?;
    let (h, r) = (head_dim / 2, rotary_dim / 2);
    // first halves: rotated firsts, then the unrotated channels' first half; likewise seconds
    let unrotated: Vec<usize> = (2 * r..head_dim).collect();
    let (u1, u2) = unrotated.split_at(h - r);
    Ok((0..r)
        .chain(u1.iter().copied())
        .chain(r..2 * r)
        .chain(u2.iter().copied())
        .collect())
}

/// RoPE with a given frequency vector over all pairs (some of them 0) in the half layout, as an
/// attention scheme: partial RoPE and p-RoPE as the byte LM applies them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRope {
    /// `"partial_rope"` or `"p_rope"`.
    pub name: String,
    /// $\theta_i$ for all $d/2$ pairs.
    pub inv_freq: Vec<f32>,
}

impl PairRope {
    /// Partial RoPE ([`partial_inv_freq`]).
    ///
    /// # Errors
    /// As [`partial_inv_freq`].
    pub fn partial(head_dim: usize, base: f64, factor: f64) -> Result<Self> {
        Ok(Self {
            name: "partial_rope".into(),
            inv_freq: partial_inv_freq(head_dim, base, factor)?,
        })
    }

    /// p-RoPE ([`p_rope_inv_freq`]).
    ///
    /// # Errors
    /// As [`p_rope_inv_freq`].
    pub fn p_rope(head_dim: usize, base: f64, kept: f64) -> Result<Self> {
        Ok(Self {
            name: "p_rope".into(),
            inv_freq: p_rope_inv_freq(head_dim, base, kept)?,
        })
    }

    /// The frequencies, attention factor 1.
    pub fn frequencies(&self) -> RopeFrequencies {
        RopeFrequencies {
            inv_freq: self.inv_freq.clone(),
            attention_factor: 1.0,
        }
    }
}

impl PositionScheme for PairRope {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        let freqs = self.frequencies();
        let q_pos: Vec<f64> = (0..lq).map(|i| query_position(i, lq, lk) as f64).collect();
        let k_pos: Vec<f64> = (0..lk).map(|j| j as f64).collect();
        Ok((
            apply_rope(q, &q_pos, &freqs, RopeLayout::Half)?,
            apply_rope(k, &k_pos, &freqs, RopeLayout::Half)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::init::seeded_normal;
    use crate::encodings::rope::{apply_rope_partial, RopeConfig};

    #[test]
    fn widths_and_pairs_as_transformers_rounds_them() {
        assert_eq!(partial_rotary_dim(32, 0.25).unwrap(), 8);
        assert_eq!(partial_rotary_dim(80, 0.4).unwrap(), 32);
        assert_eq!(partial_rotary_dim(32, 1.0).unwrap(), 32);
        assert_eq!(p_rope_pairs(32, 0.75).unwrap(), 12);
        assert_eq!(p_rope_pairs(32, 0.3).unwrap(), 4);
        assert_eq!(p_rope_pairs(32, 0.0).unwrap(), 0);
        for bad in [0.0, -0.5, 1.5, f64::NAN, 0.03] {
            assert!(partial_rotary_dim(32, bad).is_err(), "{bad}");
        }
        // floor(0.3 x 30) = 9 channels: odd
        assert!(partial_rotary_dim(30, 0.3).is_err());
        for bad in [-0.1, 1.01, f64::INFINITY] {
            assert!(p_rope_pairs(32, bad).is_err(), "{bad}");
        }
        assert!(partial_inv_freq(31, 1e4, 0.5).is_err());
        assert!(p_rope_inv_freq(32, 0.5, 0.5).is_err());
    }

    /// Partial RoPE in the half layout of all channels equals GPT-NeoX's partial rotation
    /// after [`neox_to_half`]: every rotated row, hence every score.
    #[test]
    fn partial_rope_is_neox_permuted() {
        for (d, f) in [(32, 0.25), (16, 0.5), (12, 1.0), (10, 0.2)] {
            let r = partial_rotary_dim(d, f).unwrap();
            let x = seeded_normal(7, d, d as u64);
            let pos: Vec<f64> = (0..7).map(|p| p as f64 * 3.0).collect();
            let neox = apply_rope_partial(
                x.view(),
                &pos,
                &RopeConfig::new(r, 1e4).unwrap().frequencies(None).unwrap(),
                RopeLayout::Half,
            )
            .unwrap();
            let pi = neox_to_half(d, r).unwrap();
            let permute = |a: &Array2<f32>| a.select(ndarray::Axis(1), &pi);
            let ours = apply_rope(
                permute(&x).view(),
                &pos,
                &PairRope::partial(d, 1e4, f).unwrap().frequencies(),
                RopeLayout::Half,
            )
            .unwrap();
            assert_eq!(ours, permute(&neox), "d = {d}, f = {f}");
        }
    }
}
