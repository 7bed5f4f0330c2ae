//! RoPE frequencies and their context-extension scalings, computed in `f32` in the same order
//! of operations as Hugging Face's `modeling_rope_utils.py`, so that they agree with it to the
//! last bit or two.
//!
//! With $\theta_i = b^{-2i/d}$ ($i = 0..d/2$), training length $L$ and extension factor $s$:
//!
//! | scaling | inverse frequencies | attention factor |
//! |---|---|---|
//! | none | $\theta_i$ | 1 |
//! | linear (PI) | $\theta_i / s$ | 1 |
//! | NTK-aware | $\theta_i$ with $b' = b\ s^{d/(d-2)}$ | 1 |
//! | dynamic NTK | $\theta_i$ with $b' = b\ (s\ \ell/L - (s-1))^{d/(d-2)}$, $\ell = \max(\text{len}, L)$ | 1 |
//! | NTK-by-parts | $\theta_i\ \big((1-\gamma_i)/s + \gamma_i\big)$, $\gamma_i$ a ramp over dims | 1 |
//! | YaRN | as NTK-by-parts | $0.1 \ln s + 1$ |
//! | Llama3 | $\theta_i$ (high freq.), $\theta_i/s$ (low), smooth blend between | 1 |
//!
//! YaRN is NTK-by-parts plus a temperature: both take their frequencies from one ramp
//! ([`yarn_ramp`], [`ntk_by_parts_inv_freq`]); YaRN also multiplies cos and sin by its
//! attention factor, so every logit by its square.
//!
//! Derived step by step, checked and plotted in `notebooks/08_rope_scaling.ipynb`; YaRN's two
//! ingredients separated in `notebooks/13_rerope_and_log_n.ipynb`.

use serde::{Deserialize, Serialize};

use super::bands::RampBounds;
use super::parts::{check_betas, ntk_by_parts_inv_freq, yarn_ramp};
use crate::error::{ensure, invalid, Result};

/// YaRN's default $\beta_{fast}$ (rotations at which interpolation stops).
pub const YARN_BETA_FAST: f64 = 32.0;
/// YaRN's default $\beta_{slow}$ (rotations below which dims are fully interpolated).
pub const YARN_BETA_SLOW: f64 = 1.0;
/// Llama3's default low-frequency factor.
pub const LLAMA3_LOW_FREQ_FACTOR: f64 = 1.0;
/// Llama3's default high-frequency factor.
pub const LLAMA3_HIGH_FREQ_FACTOR: f64 = 4.0;

/// Largest rotary dimension $d$ (a bound that keeps a typo from allocating gigabytes).
pub const MAX_DIM: usize = 65_536;

/// A context-extension scaling of RoPE. `original_max` is the training context $L$
/// (HF: `original_max_position_embeddings`, or `max_position_embeddings` for dynamic). Read
/// from JSON, unknown keys are an error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RopeScaling {
    /// Plain RoPE.
    #[default]
    None,
    /// Position interpolation (Chen et al. 2023): positions divided by `factor`.
    Linear {
        /// $s > 0$.
        factor: f64,
    },
    /// NTK-aware (bloc97 2023): base raised to $b\ s^{d/(d-2)}$, fixed.
    NtkAware {
        /// $s > 0$.
        factor: f64,
    },
    /// Dynamic NTK (HF `dynamic`): the NTK base recomputed for the current length.
    Dynamic {
        /// $s > 0$.
        factor: f64,
        /// $L$, the length up to which RoPE is left unchanged.
        original_max: usize,
    },
    /// NTK-by-parts (bloc97 2023; Peng et al. 2023, section 3.2): YaRN's frequency ramp
    /// without its attention temperature (attention factor 1): pairs that turn more than
    /// $\beta_{fast}$ times within $L$ keep their frequency, those turning fewer than
    /// $\beta_{slow}$ times are interpolated (divided by $s$), a linear ramp between.
    NtkByParts {
        /// $s > 0$.
        factor: f64,
        /// $L$.
        original_max: usize,
        /// $\beta_{fast}$, default 32.
        beta_fast: f64,
        /// $\beta_{slow}$, default 1.
        beta_slow: f64,
        /// Round the ramp's ends to whole dims (HF default true).
        truncate: bool,
    },
    /// YaRN (Peng et al. 2023): NTK-by-parts ramp plus attention temperature.
    Yarn {
        /// $s > 0$.
        factor: f64,
        /// $L$.
        original_max: usize,
        /// $\beta_{fast}$, default 32.
        beta_fast: f64,
        /// $\beta_{slow}$, default 1.
        beta_slow: f64,
        /// DeepSeek's `mscale` (with `mscale_all_dim`), default none.
        mscale: Option<f64>,
        /// DeepSeek's `mscale_all_dim`, default none.
        mscale_all_dim: Option<f64>,
        /// An explicit attention factor overriding $0.1 \ln s + 1$.
        attention_factor: Option<f64>,
        /// Round the ramp's ends to whole dims (HF default true).
        truncate: bool,
    },
    /// Llama 3.1 (Meta 2024): low frequencies interpolated, high ones kept, smooth between.
    Llama3 {
        /// $s > 0$.
        factor: f64,
        /// $L$ (8192 for Llama 3.1).
        original_max: usize,
        /// Wavelengths above $L/\text{low}$ are interpolated; default 1.
        low_freq_factor: f64,
        /// Wavelengths below $L/\text{high}$ are kept; default 4.
        high_freq_factor: f64,
    },
}

/// The kinds of [`RopeScaling`] by name, for configurations and the command line (`linear`
/// also reads as `pi`). [`ScalingKind::scaling`] builds the scaling with the defaults of the
/// references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalingKind {
    /// Position interpolation.
    #[serde(alias = "pi")]
    Linear,
    /// NTK-aware base change.
    Ntk,
    /// Dynamic NTK.
    Dynamic,
    /// NTK-by-parts: YaRN's ramp without its temperature.
    #[serde(rename = "ntk-by-parts")]
    NtkByParts,
    /// YaRN.
    Yarn,
    /// Llama 3.1.
    Llama3,
}

impl ScalingKind {
    /// Every kind, in the order of the results table.
    pub const ALL: [ScalingKind; 6] = [
        ScalingKind::Linear,
        ScalingKind::Ntk,
        ScalingKind::Dynamic,
        ScalingKind::NtkByParts,
        ScalingKind::Yarn,
        ScalingKind::Llama3,
    ];

    /// One line on the scaling, for help texts.
    pub fn summary(&self) -> &'static str {
        match self {
            Self::Linear => "Position interpolation",
            Self::Ntk => "NTK-aware base change",
            Self::Dynamic => "Dynamic NTK",
            Self::NtkByParts => "NTK-by-parts (YaRN's ramp, no temperature)",
            Self::Yarn => "YaRN",
            Self::Llama3 => "Llama 3.1",
        }
    }

    /// The command-line name (as [`RopeScaling::name`]).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Linear => "linear",
            Self::Ntk => "ntk",
            Self::Dynamic => "dynamic",
            Self::NtkByParts => "ntk-by-parts",
            Self::Yarn => "yarn",
            Self::Llama3 => "llama3",
        }
    }

    /// The scaling with factor `factor` for a model trained at `original_max`, with the
    /// references' defaults (YaRN's betas, Llama3's frequency factors).
    pub fn scaling(&self, factor: f64, original_max: usize) -> RopeScaling {
        self.scaling_with(factor, original_max, &RampBounds::default())
    }

    /// [`ScalingKind::scaling`] with YaRN's betas and Llama 3's frequency factors from
    /// `bounds` (the other kinds have no ramp and ignore them).
    pub fn scaling_with(
        &self,
        factor: f64,
        original_max: usize,
        bounds: &RampBounds,
    ) -> RopeScaling {
        match self {
            Self::Linear => RopeScaling::Linear { factor },
            Self::Ntk => RopeScaling::NtkAware { factor },
            Self::Dynamic => RopeScaling::Dynamic {
                factor,
                original_max,
            },
            Self::NtkByParts => RopeScaling::NtkByParts {
                factor,
                original_max,
                beta_fast: bounds.beta_fast,
                beta_slow: bounds.beta_slow,
                truncate: true,
            },
            Self::Yarn => RopeScaling::Yarn {
                factor,
                original_max,
                beta_fast: bounds.beta_fast,
                beta_slow: bounds.beta_slow,
                mscale: None,
                mscale_all_dim: None,
                attention_factor: None,
                truncate: true,
            },
            Self::Llama3 => RopeScaling::Llama3 {
                factor,
                original_max,
                low_freq_factor: bounds.low_freq_factor,
                high_freq_factor: bounds.high_freq_factor,
            },
        }
    }
}

crate::named::named!(ScalingKind, "scaling", "pi" => ScalingKind::Linear);

impl RopeScaling {
    /// The kind, or `None` for plain RoPE.
    pub fn kind(&self) -> Option<ScalingKind> {
        match self {
            RopeScaling::None => None,
            RopeScaling::Linear { .. } => Some(ScalingKind::Linear),
            RopeScaling::NtkAware { .. } => Some(ScalingKind::Ntk),
            RopeScaling::Dynamic { .. } => Some(ScalingKind::Dynamic),
            RopeScaling::NtkByParts { .. } => Some(ScalingKind::NtkByParts),
            RopeScaling::Yarn { .. } => Some(ScalingKind::Yarn),
            RopeScaling::Llama3 { .. } => Some(ScalingKind::Llama3),
        }
    }

    /// YaRN with the defaults of the reference ($\beta_{fast} = 32$, $\beta_{slow} = 1$,
    /// attention factor $0.1 \ln s + 1$, truncated ramp).
    pub fn yarn(factor: f64, original_max: usize) -> Self {
        ScalingKind::Yarn.scaling(factor, original_max)
    }

    /// NTK-by-parts with YaRN's defaults ($\beta_{fast} = 32$, $\beta_{slow} = 1$, truncated
    /// ramp): the frequencies of [`RopeScaling::yarn`], attention factor 1.
    pub fn ntk_by_parts(factor: f64, original_max: usize) -> Self {
        ScalingKind::NtkByParts.scaling(factor, original_max)
    }

    /// Llama3 with the default low/high frequency factors 1 and 4.
    pub fn llama3(factor: f64, original_max: usize) -> Self {
        ScalingKind::Llama3.scaling(factor, original_max)
    }

    /// The short name used on the command line: `none`, `linear`, `ntk`, `dynamic`,
    /// `ntk-by-parts`, `yarn`, `llama3`.
    pub fn name(&self) -> &'static str {
        match self {
            RopeScaling::None => "none",
            RopeScaling::Linear { .. } => "linear",
            RopeScaling::NtkAware { .. } => "ntk",
            RopeScaling::Dynamic { .. } => "dynamic",
            RopeScaling::NtkByParts { .. } => "ntk-by-parts",
            RopeScaling::Yarn { .. } => "yarn",
            RopeScaling::Llama3 { .. } => "llama3",
        }
    }

    /// The scaling factor $s$, or `None` for plain RoPE.
    pub fn factor(&self) -> Option<f64> {
        match *self {
            RopeScaling::None => None,
            RopeScaling::Linear { factor }
            | RopeScaling::NtkAware { factor }
            | RopeScaling::Dynamic { factor, .. }
            | RopeScaling::NtkByParts { factor, .. }
            | RopeScaling::Yarn { factor, .. }
            | RopeScaling::Llama3 { factor, .. } => Some(factor),
        }
    }

    /// Whether the frequencies depend on the current sequence length (dynamic NTK): such a
    /// scheme needs one forward pass per evaluation length.
    pub fn is_dynamic(&self) -> bool {
        matches!(self, RopeScaling::Dynamic { .. })
    }

    /// The factor multiplying cos and sin, in `f64`: YaRN's explicit `attention_factor`, or
    /// $m(s, \mathtt{mscale}) / m(s, \mathtt{mscale\_all\_dim})$ when both are non-zero,
    /// else $m(s, 1) = 0.1 \ln s + 1$ ([`yarn_mscale`]); 1 for every other scaling.
    pub fn attention_factor(&self) -> f64 {
        match *self {
            RopeScaling::Yarn {
                factor,
                mscale,
                mscale_all_dim,
                attention_factor,
                ..
            } => attention_factor.unwrap_or_else(|| match (mscale, mscale_all_dim) {
                (Some(m), Some(m_all)) if m != 0.0 && m_all != 0.0 => {
                    yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
                }
                _ => yarn_mscale(factor, 1.0),
            }),
            _ => 1.0,
        }
    }

    /// Checks every parameter.
    ///
    /// # Errors
    /// A factor that is not positive and finite, a zero original length, $\beta_{slow}$ not
    /// positive and finite or $\beta_{fast} \le \beta_{slow}$, an `mscale`, `mscale_all_dim` or
    /// attention factor that is not positive, a low frequency factor that is not positive, low/high
    /// frequency factors out of order.
    pub fn validate(&self) -> Result<()> {
        let factor_ok =
            |f: f64| ensure(f.is_finite() && f > 0.0, "factor", f, "a finite number > 0");
        let original_ok = |l: usize| ensure(l >= 1, "original_max", l, "at least 1");
        match *self {
            RopeScaling::None => Ok(()),
            RopeScaling::Linear { factor } | RopeScaling::NtkAware { factor } => factor_ok(factor),
            RopeScaling::Dynamic {
                factor,
                original_max,
            } => factor_ok(factor).and(original_ok(original_max)),
            RopeScaling::NtkByParts {
                factor,
                original_max,
                beta_fast,
                beta_slow,
                ..
            } => factor_ok(factor)
                .and(original_ok(original_max))
                .and(check_betas(beta_fast, beta_slow)),
            RopeScaling::Yarn {
                factor,
                original_max,
                beta_fast,
                beta_slow,
                mscale,
                mscale_all_dim,
                attention_factor,
                ..
            } => {
                factor_ok(factor)?;
                original_ok(original_max)?;
                check_betas(beta_fast, beta_slow)?;
                for (name, v) in [
                    ("mscale", mscale),
                    ("mscale_all_dim", mscale_all_dim),
                    ("attention_factor", attention_factor),
                ] {
                    if let Some(v) = v {
                        ensure(v.is_finite() && v > 0.0, name, v, "a finite number > 0")?;
                    }
                }
                Ok(())
            }
            RopeScaling::Llama3 {
                factor,
                original_max,
                low_freq_factor,
                high_freq_factor,
            } => {
                factor_ok(factor)?;
                original_ok(original_max)?;
                ensure(
                    low_freq_factor.is_finite() && low_freq_factor > 0.0,
                    "low_freq_factor",
                    low_freq_factor,
                    "a finite number > 0",
                )?;
                ensure(
                    high_freq_factor.is_finite() && high_freq_factor > low_freq_factor,
                    "high_freq_factor",
                    high_freq_factor,
                    &format!("a finite number > low_freq_factor = {low_freq_factor}"),
                )
            }
        }
    }
}

/// Inverse frequencies and the attention factor (HF's `attention_scaling`, which multiplies
/// both cos and sin).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RopeFrequencies {
    /// $\theta_i$ after scaling, `d/2` values.
    pub inv_freq: Vec<f32>,
    /// Multiplies cos and sin: YaRN's factor ([`RopeScaling::attention_factor`]: $0.1 \ln s + 1$
    /// unless given), LongRoPE's $\sqrt{1 + \ln s / \ln L}$, else 1.
    pub attention_factor: f32,
}

/// $\theta_i = 1 / b^{2i/d}$ in `f32`, as `1.0 / (base ** (arange(0, d, 2).float() / d))`.
pub(crate) fn default_inv_freq(dim: usize, base: f64) -> Vec<f32> {
    let base = base as f32;
    (0..dim / 2)
        .map(|i| 1.0 / base.powf((2 * i) as f32 / dim as f32))
        .collect()
}

/// $0.1\ m \ln s + 1$ for $s > 1$, else 1 (YaRN's `get_mscale`).
pub fn yarn_mscale(factor: f64, mscale: f64) -> f64 {
    if factor <= 1.0 {
        1.0
    } else {
        0.1 * mscale * factor.ln() + 1.0
    }
}

pub(crate) fn scaled_frequencies(
    dim: usize,
    base: f64,
    scaling: &RopeScaling,
    seq_len: Option<usize>,
) -> Result<RopeFrequencies> {
    let exponent = dim as f64 / (dim as f64 - 2.0);
    let plain = |inv_freq| RopeFrequencies {
        inv_freq,
        attention_factor: 1.0,
    };
    Ok(match *scaling {
        RopeScaling::None => plain(default_inv_freq(dim, base)),
        RopeScaling::Linear { factor } => {
            // theta_i / s
            let f = factor as f32;
            plain(
                default_inv_freq(dim, base)
                    .into_iter()
                    .map(|t| t / f)
                    .collect(),
            )
        }
        RopeScaling::NtkAware { factor } => {
            // b' = b s^(d/(d-2))
            plain(default_inv_freq(dim, base * factor.powf(exponent)))
        }
        RopeScaling::Dynamic {
            factor,
            original_max,
        } => {
            // l = max(len, L); b' = b (s l / L - (s - 1))^(d/(d-2))
            let len = seq_len.unwrap_or(original_max).max(original_max) as f64;
            let grown = factor * len / original_max as f64 - (factor - 1.0);
            plain(default_inv_freq(dim, base * grown.powf(exponent)))
        }
        RopeScaling::NtkByParts {
            factor,
            original_max,
            beta_fast,
            beta_slow,
            truncate,
        } => {
            let gamma = yarn_ramp(dim, base, original_max, beta_fast, beta_slow, truncate)?;
            plain(ntk_by_parts_inv_freq(dim, base, factor, &gamma)?)
        }
        RopeScaling::Yarn {
            factor,
            original_max,
            beta_fast,
            beta_slow,
            truncate,
            ..
        } => {
            // NTK-by-parts frequencies, times the attention factor on cos and sin
            let gamma = yarn_ramp(dim, base, original_max, beta_fast, beta_slow, truncate)?;
            RopeFrequencies {
                inv_freq: ntk_by_parts_inv_freq(dim, base, factor, &gamma)?,
                attention_factor: scaling.attention_factor() as f32,
            }
        }
        RopeScaling::Llama3 {
            factor,
            original_max,
            low_freq_factor,
            high_freq_factor,
        } => {
            let old = original_max as f32;
            let (low, high, f) = (
                low_freq_factor as f32,
                high_freq_factor as f32,
                factor as f32,
            );
            let low_freq_wavelen = (original_max as f64 / low_freq_factor) as f32;
            let high_freq_wavelen = (original_max as f64 / high_freq_factor) as f32;
            let two_pi = (2.0 * std::f64::consts::PI) as f32;
            let inv_freq = default_inv_freq(dim, base)
                .into_iter()
                .map(|theta| {
                    let wavelen = two_pi / theta;
                    // low frequencies: theta / s
                    let scaled = if wavelen > low_freq_wavelen {
                        theta / f
                    } else {
                        theta
                    };
                    let is_medium = wavelen >= high_freq_wavelen && wavelen <= low_freq_wavelen;
                    if is_medium {
                        // (1 - a) theta / s + a theta, a = (L / wavelen - low) / (high - low)
                        let smooth = (old / wavelen - low) / (high - low);
                        (1.0 - smooth) * scaled / f + smooth * scaled
                    } else {
                        scaled
                    }
                })
                .collect();
            plain(inv_freq)
        }
    })
}

pub(crate) fn check_dim_and_base(dim: usize, base: f64) -> Result<()> {
    if !(2..=MAX_DIM).contains(&dim) || !dim.is_multiple_of(2) {
        return Err(invalid(
            "dim",
            dim,
            format!("an even number from 2 to {MAX_DIM} (RoPE rotates pairs of dimensions)"),
        ));
    }
    ensure(
        base.is_finite() && base > 1.0,
        "base",
        base,
        "a finite number > 1",
    )
}
