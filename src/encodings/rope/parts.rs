//! NTK-by-parts (bloc97 2023; Peng et al. 2023, "YaRN: Efficient Context Window Extension of
//! Large Language Models", section 3.2, <https://arxiv.org/abs/2309.00071>): the frequency rule
//! YaRN shares, computed in `f32` as Hugging Face's `_compute_yarn_parameters` does.
//!
//! Position interpolation divides every frequency by $s$; NTK-aware changes the base. NTK-by-parts
//! decides pair by pair from how often it turns within the training length $L$: a pair whose
//! wavelength $\lambda_i = 2\pi/\theta_i$ fits more than $\beta_{fast}$ times into $L$ has seen
//! every angle in training and keeps its frequency (extrapolation); a pair that turns fewer than
//! $\beta_{slow}$ times is interpolated; a linear ramp over the pair index joins the two:
//!
//! ```math
//! \theta'_i = \theta_i\Big(\frac{1 - \gamma_i}{s} + \gamma_i\Big), \qquad
//! \gamma_i = 1 - \operatorname{clip}\Big(\frac{i - \text{low}}{\text{high} - \text{low}}, 0, 1\Big),
//! \qquad \text{low/high} = \frac{d \ln\big(L / (2\pi\beta_{fast/slow})\big)}{2 \ln b}.
//! ```
//!
//! YaRN is these frequencies plus a temperature (its attention factor on cos and sin); the
//! scaling [`super::RopeScaling::NtkByParts`] is them alone. Derived in
//! `notebooks/08_rope_scaling.ipynb`; the two ingredients separated in
//! `notebooks/13_rerope_and_log_n.ipynb`.

use super::scaling::check_dim_and_base;
use crate::error::{ensure, ensure_shape, invalid, Result};

/// The dimension (fractional) whose wavelength makes `rotations` turns over `original_max`
/// positions: $d \ln(L / (2\pi r)) / (2 \ln b)$.
pub fn yarn_correction_dim(rotations: f64, dim: usize, base: f64, original_max: usize) -> f64 {
    (dim as f64 * (original_max as f64 / (rotations * 2.0 * std::f64::consts::PI)).ln())
        / (2.0 * base.ln())
}

/// YaRN's ramp ends $(\text{low}, \text{high})$ over dims, low raised to at least 0 and high
/// capped at $d - 1$ as Hugging Face does (high can still fall below 0, and low pass $d - 1$).
pub fn yarn_correction_range(
    beta_fast: f64,
    beta_slow: f64,
    dim: usize,
    base: f64,
    original_max: usize,
    truncate: bool,
) -> (f64, f64) {
    let mut low = yarn_correction_dim(beta_fast, dim, base, original_max);
    let mut high = yarn_correction_dim(beta_slow, dim, base, original_max);
    if truncate {
        low = low.floor();
        high = high.ceil();
    }
    (low.max(0.0), high.min(dim.saturating_sub(1) as f64))
}

/// YaRN's ramp $\gamma_i$ over the $d/2$ pairs, in `f32` as Hugging Face computes it (its
/// `1 - linear_ramp_factor`): with the correction range $(\text{low}, \text{high})$ of
/// [`yarn_correction_range`] (its `high` nudged by 0.001 when the two coincide),
///
/// ```math
/// \gamma_i = 1 - \operatorname{clip}\Big(\frac{i - \text{low}}{\text{high} - \text{low}}, 0, 1\Big),
/// ```
///
/// 1 where the pair keeps its frequency (extrapolation), 0 where it is interpolated. While
/// low $\le$ high, $\gamma_0 = 1$ (low is at least 0): the fastest pair is never interpolated.
/// The ends are not put in order: when both fall below 0 (betas above $L/2\pi$, so that even
/// the fastest pair turns fewer times within $L$), high < low and the ramp runs backwards,
/// keeping every pair's frequency, unless rounding (`truncate`) lifts high to 0: then low =
/// high = 0, the nudge applies and every pair but the first is interpolated. When low passes
/// $d - 1$, high < low the other way and every pair is interpolated.
///
/// # Errors
/// `dim` or `base` invalid, `original_max` 0, $\beta$s not $0 < \beta_{slow} < \beta_{fast}$.
pub fn yarn_ramp(
    dim: usize,
    base: f64,
    original_max: usize,
    beta_fast: f64,
    beta_slow: f64,
    truncate: bool,
) -> Result<Vec<f32>> {
    check_dim_and_base(dim, base)?;
    ensure(
        original_max >= 1,
        "original_max",
        original_max,
        "at least 1",
    )?;
    check_betas(beta_fast, beta_slow)?;
    let (low, high) =
        yarn_correction_range(beta_fast, beta_slow, dim, base, original_max, truncate);
    let high = if low == high { high + 0.001 } else { high };
    let (low32, span32) = (low as f32, (high - low) as f32);
    Ok((0..dim / 2)
        .map(|i| 1.0 - ((i as f32 - low32) / span32).clamp(0.0, 1.0))
        .collect())
}

/// NTK-by-parts frequencies for a ramp `gamma` ($d/2$ values in $[0, 1]$):
/// $\theta'_i = \theta_i\big((1 - \gamma_i)/s + \gamma_i\big)$, in `f32` in Hugging Face's
/// order (`interpolation * (1 - gamma) + extrapolation * gamma`). $\gamma \equiv 1$ gives
/// RoPE, $\gamma \equiv 0$ position interpolation.
///
/// # Errors
/// `gamma` not of length $d/2$ or outside $[0, 1]$, `dim` or `base` invalid, a factor that is
/// not finite and positive.
pub fn ntk_by_parts_inv_freq(
    dim: usize,
    base: f64,
    factor: f64,
    gamma: &[f32],
) -> Result<Vec<f32>> {
    check_dim_and_base(dim, base)?;
    ensure(
        factor.is_finite() && factor > 0.0,
        "factor",
        factor,
        "a finite number > 0",
    )?;
    ensure_shape("NTK-by-parts ramp", &[dim / 2], &[gamma.len()])?;
    if let Some(g) = gamma.iter().find(|g| !(0.0..=1.0).contains(*g)) {
        return Err(invalid("ramp value", g, "in [0, 1]"));
    }
    let (base32, f) = (base as f32, factor as f32);
    Ok(gamma
        .iter()
        .enumerate()
        .map(|(i, &gamma)| {
            // b^(2i/d)
            let pos_freq = base32.powf((2 * i) as f32 / dim as f32);
            let extrapolation = 1.0 / pos_freq;
            let interpolation = 1.0 / (f * pos_freq);
            interpolation * (1.0 - gamma) + extrapolation * gamma
        })
        .collect())
}

/// $0 < \beta_{slow} < \beta_{fast}$, both finite.
pub(super) fn check_betas(beta_fast: f64, beta_slow: f64) -> Result<()> {
    ensure(
        beta_slow.is_finite() && beta_slow > 0.0,
        "beta_slow",
        beta_slow,
        "a finite number > 0",
    )?;
    ensure(
        beta_fast.is_finite() && beta_fast > beta_slow,
        "beta_fast",
        beta_fast,
        &format!("a finite number > beta_slow = {beta_slow}"),
    )
}
