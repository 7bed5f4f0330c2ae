//! Which rotary pairs a context-extension scaling keeps, blends and interpolates.
//!
//! YaRN ("NTK-by-parts", Peng et al. 2023, <https://arxiv.org/abs/2309.00071>, section 3.2)
//! and Llama 3.1 (Meta 2024; Hugging Face `_compute_llama3_parameters`) split the $d/2$ pairs by
//! how often each turns over the original context $L$: pair $i$, of wavelength
//! $\lambda_i = 2\pi/\theta_i$, makes
//!
//! ```math
//! r_i = \frac{L}{\lambda_i} = \frac{L\,\theta_i}{2\pi}
//! ```
//!
//! rotations ([`rotations`]). A pair that turned many times in training has seen every angle
//! and keeps its frequency (it is *extrapolated*, $\theta_i$); a pair that turned less than
//! once would meet angles it never saw, so it is *interpolated* ($\theta_i / s$); the pairs
//! between are blended (the *ramp*). The boundaries are rotation counts ([`RampBounds`]):
//! YaRN keeps $r_i \ge \beta_{fast}$ and interpolates $r_i \le \beta_{slow}$ (up to the
//! rounding of its ramp's ends to whole pairs), Llama 3 keeps $\lambda_i < L/\text{high}$,
//! i.e. $r_i > \text{high}$, and interpolates $r_i < \text{low}$.
//!
//! [`pair_bands`] reads the split off the scaled frequencies themselves (each $\theta'_i$
//! against $\theta_i$ and $\theta_i/s$), so it is a second computation of what the bounds
//! say; the sweep's choice of bounds for its small model, and the test that compares the two,
//! are in `crate::lm::config`.

use serde::{Deserialize, Serialize};

use super::scaling::{
    default_inv_freq, ScalingKind, LLAMA3_HIGH_FREQ_FACTOR, LLAMA3_LOW_FREQ_FACTOR, YARN_BETA_FAST,
    YARN_BETA_SLOW,
};
use super::{RopeConfig, RopeScaling};
use crate::error::Result;

/// The rotation counts that bound the ramps of YaRN and Llama 3 ([`ScalingKind::scaling_with`]).
/// The default is the references' (YaRN's $\beta_{fast} = 32$, $\beta_{slow} = 1$ for LLaMA;
/// Llama 3.1's factors 1 and 4). Read from JSON, missing keys take the defaults and unknown
/// keys are an error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RampBounds {
    /// YaRN's $\beta_{fast}$: pairs with at least this many rotations over the original
    /// context keep their frequency; default 32.
    pub beta_fast: f64,
    /// YaRN's $\beta_{slow}$ ($\alpha$ in the paper): pairs with at most this many rotations
    /// are interpolated; default 1.
    pub beta_slow: f64,
    /// Llama 3's `low_freq_factor`: wavelengths above $L/\text{low}$ (fewer than `low`
    /// rotations) are interpolated; default 1.
    pub low_freq_factor: f64,
    /// Llama 3's `high_freq_factor`: wavelengths below $L/\text{high}$ (more than `high`
    /// rotations) are kept; default 4.
    pub high_freq_factor: f64,
}

impl Default for RampBounds {
    fn default() -> Self {
        Self {
            beta_fast: YARN_BETA_FAST,
            beta_slow: YARN_BETA_SLOW,
            low_freq_factor: LLAMA3_LOW_FREQ_FACTOR,
            high_freq_factor: LLAMA3_HIGH_FREQ_FACTOR,
        }
    }
}

impl RampBounds {
    /// Checks every bound, as [`RopeScaling::validate`] checks the scalings built from them.
    ///
    /// # Errors
    /// $\beta_{slow} \le 0$, $\beta_{fast} \le \beta_{slow}$, `low_freq_factor` $\le 0$ or
    /// `high_freq_factor` $\le$ `low_freq_factor` (or any of them not finite), by name.
    pub fn validate(&self) -> Result<()> {
        for kind in [ScalingKind::Yarn, ScalingKind::Llama3] {
            kind.scaling_with(2.0, 1, self).validate()?;
        }
        Ok(())
    }
}

/// What a scaling does to one pair's frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Band {
    /// $\theta'_i = \theta_i$: extrapolated (unscaled).
    Kept,
    /// Strictly between $\theta_i / s$ and $\theta_i$ (or anything else): the ramp.
    Ramped,
    /// $\theta'_i = \theta_i / s$: interpolated.
    Interpolated,
}

/// How many pairs fall in each [`Band`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BandCounts {
    /// Pairs kept (extrapolated).
    pub kept: usize,
    /// Pairs on the ramp.
    pub ramped: usize,
    /// Pairs interpolated.
    pub interpolated: usize,
}

impl BandCounts {
    /// The counts of `bands`.
    pub fn of(bands: &[Band]) -> Self {
        let count = |b: Band| bands.iter().filter(|&&x| x == b).count();
        Self {
            kept: count(Band::Kept),
            ramped: count(Band::Ramped),
            interpolated: count(Band::Interpolated),
        }
    }

    /// The fractions of all pairs kept, ramped and interpolated.
    pub fn fractions(&self) -> [f64; 3] {
        let n = (self.kept + self.ramped + self.interpolated).max(1) as f64;
        [self.kept, self.ramped, self.interpolated].map(|c| c as f64 / n)
    }
}

/// The band of every pair of RoPE with width `dim`, base `base` and `scaling`, read off its
/// frequencies (at the original length): pair $i$ is kept when
/// $|\theta'_i / \theta_i - 1| \le 10^{-5}$, interpolated when
/// $|s\,\theta'_i / \theta_i - 1| \le 10^{-5}$, else ramped. A scaling without a factor keeps
/// every pair.
///
/// # Errors
/// An invalid width, base or scaling.
///
/// # Examples
/// ```
/// use posenc::encodings::rope::{pair_bands, Band, BandCounts, RopeScaling};
/// // PI interpolates every pair
/// let bands = pair_bands(32, 10_000.0, &RopeScaling::Linear { factor: 4.0 })?;
/// assert!(bands.iter().all(|&b| b == Band::Interpolated));
/// // LLaMA 2's YaRN (head width 128, 4096 positions): 21 pairs kept, 18 interpolated
/// let yarn = RopeScaling::yarn(16.0, 4096);
/// let counts = BandCounts::of(&pair_bands(128, 10_000.0, &yarn)?);
/// assert_eq!((counts.kept, counts.ramped, counts.interpolated), (21, 25, 18));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn pair_bands(dim: usize, base: f64, scaling: &RopeScaling) -> Result<Vec<Band>> {
    let scaled = RopeConfig::with_scaling(dim, base, *scaling)?.frequencies(None)?;
    let plain = default_inv_freq(dim, base);
    let s = scaling.factor().unwrap_or(1.0);
    let near = |x: f64| (x - 1.0).abs() <= 1e-5;
    Ok(scaled
        .inv_freq
        .iter()
        .zip(&plain)
        .map(|(&t, &t0)| {
            // theta'_i / theta_i
            let ratio = f64::from(t) / f64::from(t0);
            if near(ratio) {
                Band::Kept
            } else if near(ratio * s) {
                Band::Interpolated
            } else {
                Band::Ramped
            }
        })
        .collect())
}

/// $r_i = L\,\theta_i / 2\pi$, the rotations of pair $i$ over `original_max` positions, with
/// $\theta_i = b^{-2i/d}$ in `f64`: the quantity the ramp bounds are stated in.
///
/// # Examples
/// ```
/// use posenc::encodings::rope::rotations;
/// // the fastest pair turns L / 2 pi times
/// let r = rotations(32, 10_000.0, 128);
/// assert!((r[0] - 128.0 / std::f64::consts::TAU).abs() < 1e-12);
/// assert!(r.windows(2).all(|w| w[1] < w[0]));
/// ```
pub fn rotations(dim: usize, base: f64, original_max: usize) -> Vec<f64> {
    (0..dim / 2)
        .map(|i| {
            let theta = base.powf(-((2 * i) as f64) / dim as f64);
            original_max as f64 * theta / std::f64::consts::TAU
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_by_name() {
        RampBounds::default().validate().unwrap();
        let bad = |b: RampBounds| b.validate().unwrap_err().to_string();
        let d = RampBounds::default();
        assert!(bad(RampBounds {
            beta_fast: 0.5,
            ..d
        })
        .contains("beta_fast"));
        assert!(bad(RampBounds {
            beta_slow: 0.0,
            ..d
        })
        .contains("beta_slow"));
        assert!(bad(RampBounds {
            high_freq_factor: 1.0,
            ..d
        })
        .contains("high_freq_factor"));
        assert!(bad(RampBounds {
            low_freq_factor: f64::NAN,
            ..d
        })
        .contains("low_freq_factor"));
        let e = serde_json::from_str::<RampBounds>(r#"{"beta_fats": 2}"#).unwrap_err();
        assert!(e.to_string().contains("beta_fats"), "{e}");
        let partial: RampBounds = serde_json::from_str(r#"{"beta_fast": 2}"#).unwrap();
        assert_eq!(
            partial,
            RampBounds {
                beta_fast: 2.0,
                ..d
            }
        );
    }

    /// By hand, d = 8, b = 10^4, L = 128: theta_i = 10^-i, r_i = 128 / (2 pi 10^i) = 20.37,
    /// 2.037, 0.204, 0.0204. With beta = 2 / 1 YaRN's ramp runs from pair
    /// floor(8 ln(128 / (2 pi 2)) / (2 ln 10^4)) = floor(1.008) = 1 to ceil(1.309) = 2: pairs
    /// 0 and 1 kept, none between, 2 and 3 interpolated; Llama 3 with low 1, high 2 keeps
    /// r > 2 (pairs 0, 1) and interpolates r < 1 (2, 3). Plain RoPE keeps all.
    #[test]
    fn bands_by_hand() {
        let r = rotations(8, 10_000.0, 128);
        let tau = std::f64::consts::TAU;
        for (i, want) in [128.0 / tau, 12.8 / tau, 1.28 / tau, 0.128 / tau]
            .iter()
            .enumerate()
        {
            assert!((r[i] - want).abs() < 1e-12 * want, "{i}: {} {want}", r[i]);
        }
        let bounds = RampBounds {
            beta_fast: 2.0,
            beta_slow: 1.0,
            low_freq_factor: 1.0,
            high_freq_factor: 2.0,
        };
        use Band::*;
        for kind in [ScalingKind::Yarn, ScalingKind::Llama3] {
            let s = kind.scaling_with(4.0, 128, &bounds);
            assert_eq!(
                pair_bands(8, 10_000.0, &s).unwrap(),
                [Kept, Kept, Interpolated, Interpolated],
                "{kind}"
            );
        }
        assert_eq!(
            pair_bands(8, 10_000.0, &RopeScaling::None).unwrap(),
            [Kept; 4]
        );
        // NTK: theta'_i / theta_i = s^(-2i/(d-2)) = 4^(-i/3): 1 for the first pair, 1/s for
        // the last, between for the others
        let ntk = pair_bands(8, 10_000.0, &RopeScaling::NtkAware { factor: 4.0 }).unwrap();
        assert_eq!(ntk, [Kept, Ramped, Ramped, Interpolated]);
        let counts = BandCounts::of(&ntk);
        assert_eq!((counts.kept, counts.ramped, counts.interpolated), (1, 2, 1));
        assert_eq!(counts.fractions(), [0.25, 0.5, 0.25]);
        assert!(pair_bands(7, 10_000.0, &RopeScaling::None).is_err());
    }
}
