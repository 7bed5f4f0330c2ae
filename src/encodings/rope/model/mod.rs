//! RoPE as a model's `config.json` states it, and what it means.
//!
//! A configuration names a scaling, but what the model computes also depends on keys spread
//! over the file and on the defaults of the model's code: the rotary width (`head_dim`,
//! `partial_rotary_factor` or its aliases `rotary_pct`, `rotary_dim`), the base of each layer type
//! (Gemma 3's sliding layers), the pair layout, and two scales outside the frequencies. With
//! $a$ the factor on cos and sin (YaRN's, LongRoPE's) and $\mu$ the multiplier of the softmax
//! scale beyond $1/\sqrt{d}$ (DeepSeek's $m(s, \mathtt{mscale\_all\_dim})^2$, Gemma's
//! $\sqrt{d / \mathtt{query\_pre\_attn\_scalar}}$), a rotary logit is
//!
//! ```math
//! \frac{\mu}{\sqrt d}\ (a R_m q) \cdot (a R_n k) = \underbrace{a^2 \mu}_{\text{logit multiplier}}
//! \ \frac{q \cdot R_{n-m} k}{\sqrt d} .
//! ```
//!
//! [`ModelRope::from_json`] reads v4 (`rope_scaling` and top-level keys) and v5
//! (`rope_parameters`, possibly nested by layer type) configurations into these types. A key it
//! does not know, or two keys that disagree, is an error naming the key; every default it
//! takes from the model type is listed in [`ModelRope::defaults`]. The model types and their
//! defaults are in `family.rs`. Frequencies, attention factors and softmax scales are checked
//! against the models' own classes in transformers on real configurations
//! (`tests/golden/configs`, `tests/golden/rope_configs.json`).

mod block;
mod family;
mod keys;
mod read;

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::{LongRope, RopeConfig, RopeFrequencies, RopeLayout, RopeScaling};
use crate::encodings::temperature::Temperature;
use crate::error::{Error, Result};

/// The frequency rule of one layer type: one of the crate's scalings, or LongRoPE.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum LayerScaling {
    /// Plain RoPE, PI, dynamic NTK, YaRN or Llama 3.
    Rope(RopeScaling),
    /// LongRoPE's per-pair factors (Phi-3).
    LongRope(LongRope),
}

/// RoPE of one layer type (all layers, unless the configuration gives RoPE per layer type).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerRope {
    /// `full_attention`, `sliding_attention`, ...; `None` when every layer is the same.
    pub layer_type: Option<String>,
    /// Hugging Face's name: `default`, `linear`, `dynamic`, `yarn`, `longrope`, `llama3`.
    pub rope_type: String,
    /// $b$, `rope_theta`.
    pub base: f64,
    /// The frequencies' rule.
    pub scaling: LayerScaling,
    /// $\mu$: the softmax scale over $1/\sqrt{d}$, $d$ the q·k width.
    pub softmax_multiplier: f64,
}

impl LayerRope {
    /// $\theta_i'$ and $a$ for a forward pass over `seq_len` positions (`None`: the state at
    /// initialisation).
    ///
    /// # Errors
    /// An invalid rotary dimension or scaling.
    pub fn frequencies(
        &self,
        rotary_dim: usize,
        seq_len: Option<usize>,
    ) -> Result<RopeFrequencies> {
        match &self.scaling {
            LayerScaling::Rope(s) => {
                RopeConfig::with_scaling(rotary_dim, self.base, *s)?.frequencies(seq_len)
            }
            LayerScaling::LongRope(l) => l.frequencies(rotary_dim, self.base, seq_len),
        }
    }

    /// $a$ in `f64`.
    pub fn attention_factor(&self) -> f64 {
        match &self.scaling {
            LayerScaling::Rope(s) => s.attention_factor(),
            LayerScaling::LongRope(l) => l.attention_factor(),
        }
    }

    /// (original, extended) length: the training context $L$ the scaling extends (YaRN,
    /// Llama 3, LongRoPE: `original_max_position_embeddings`; dynamic NTK:
    /// `max_position_embeddings`; PI: `max_position_embeddings` / $s$; none:
    /// `max_position_embeddings`) and $\max(\texttt{max\_position\_embeddings}, sL)$.
    pub fn lengths(&self, max_position: usize) -> (usize, usize) {
        let stretch = |l: usize, s: f64| (l, max_position.max((s * l as f64).round() as usize));
        match &self.scaling {
            LayerScaling::Rope(RopeScaling::None | RopeScaling::NtkAware { .. }) => {
                (max_position, max_position)
            }
            LayerScaling::Rope(RopeScaling::Linear { factor }) => (
                ((max_position as f64 / factor).round() as usize).max(1),
                max_position,
            ),
            LayerScaling::Rope(RopeScaling::Dynamic { factor, .. }) => {
                stretch(max_position, *factor)
            }
            LayerScaling::Rope(
                RopeScaling::Yarn {
                    factor,
                    original_max,
                    ..
                }
                | RopeScaling::Llama3 {
                    factor,
                    original_max,
                    ..
                },
            ) => stretch(*original_max, *factor),
            LayerScaling::LongRope(l) => stretch(l.original_max, l.factor),
        }
    }

    /// The wavelengths where the scaling changes regime, named: YaRN keeps pairs that turn more
    /// than $\beta_{fast}$ times within $L$ ($\lambda < L/\beta_{fast}$) and interpolates those
    /// turning less than $\beta_{slow}$ times; Llama 3 keeps $\lambda < L/\text{high}$ and
    /// interpolates $\lambda > L/\text{low}$. Empty for the other rules.
    pub fn boundaries(&self) -> Vec<(&'static str, f64)> {
        match self.scaling {
            LayerScaling::Rope(RopeScaling::Yarn {
                original_max,
                beta_fast,
                beta_slow,
                ..
            }) => vec![
                ("L / beta_fast", original_max as f64 / beta_fast),
                ("L / beta_slow", original_max as f64 / beta_slow),
            ],
            LayerScaling::Rope(RopeScaling::Llama3 {
                original_max,
                low_freq_factor,
                high_freq_factor,
                ..
            }) => vec![
                (
                    "L / high_freq_factor",
                    original_max as f64 / high_freq_factor,
                ),
                ("L / low_freq_factor", original_max as f64 / low_freq_factor),
            ],
            _ => Vec::new(),
        }
    }
}

/// A model's RoPE, read from its configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRope {
    /// `model_type` (of the text model for a multimodal wrapper); `None` when absent.
    pub model_type: Option<String>,
    /// Pair layout of the model's rotation.
    pub layout: RopeLayout,
    /// Head width that `partial_rotary_factor` applies to.
    pub head_dim: usize,
    /// Channels rotated: the first `rotary_dim` of each head.
    pub rotary_dim: usize,
    /// Width of $q \cdot k$, the $d$ of $1/\sqrt d$ (DeepSeek: `qk_nope_head_dim +
    /// qk_rope_head_dim`; else `head_dim`).
    pub qk_width: usize,
    /// `max_position_embeddings`.
    pub max_position: usize,
    /// One entry per layer type (one for all layers in most models).
    pub layers: Vec<LayerRope>,
    /// A position-dependent query scale (Ministral 3's `llama_4_scaling_beta`).
    pub temperature: Option<Temperature>,
    /// Every value taken from the model type's defaults because the configuration lacks the
    /// key, as `key = value (default of model_type X)`.
    pub defaults: Vec<String>,
}

/// What `posenc rope --config` prints for one layer type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RopeSummary {
    /// The layer type, `None` for all layers.
    pub layer_type: Option<String>,
    /// Hugging Face's `rope_type`.
    pub rope_type: String,
    /// $b$.
    pub rope_theta: f64,
    /// The length the frequencies are for (`None`: initialisation).
    pub seq_len: Option<usize>,
    /// $\theta_i'$, one per rotated pair.
    pub inv_freq: Vec<f32>,
    /// $\lambda_i = 2\pi/\theta_i'$ in positions.
    pub wavelength: Vec<f64>,
    /// $L$ ([`LayerRope::lengths`]).
    pub original_len: usize,
    /// The extended length.
    pub extended_len: usize,
    /// $a$, multiplying cos and sin.
    pub attention_factor: f64,
    /// $\mu$.
    pub softmax_multiplier: f64,
    /// $a^2 \mu$: a rotary channel's logit over the plain $q\cdot k/\sqrt d$.
    pub logit_multiplier: f64,
    /// Named wavelengths where the scaling changes regime.
    pub boundaries: Vec<(String, f64)>,
}

impl ModelRope {
    /// Reads a configuration (a parsed `config.json`, or its RoPE part).
    ///
    /// # Errors
    /// [`Error::Format`] naming the key that is unknown, missing, of the wrong type, out of
    /// range, or in disagreement with another.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::rope::ModelRope;
    /// let v = serde_json::json!({"model_type": "gpt_neox", "hidden_size": 768,
    ///     "num_attention_heads": 12, "max_position_embeddings": 2048, "rotary_pct": 0.25});
    /// let model = ModelRope::from_json(&v)?;
    /// assert_eq!((model.head_dim, model.rotary_dim), (64, 16));
    /// let wrong = serde_json::json!({"model_type": "gpt_neox", "hidden_size": 768,
    ///     "num_attention_heads": 12, "rotary_pct": 0.25, "partial_rotary_factor": 0.5});
    /// assert!(ModelRope::from_json(&wrong).unwrap_err().to_string().contains("rotary_pct"));
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn from_json(value: &Value) -> Result<Self> {
        read::read(value).map_err(|message| Error::Format {
            path: "configuration".into(),
            message,
        })
    }

    /// Reads the configuration file at `path`.
    ///
    /// # Errors
    /// An unreadable file, invalid JSON, or as [`from_json`](Self::from_json) (the message
    /// names the file).
    pub fn read(path: &Path) -> Result<Self> {
        let value: Value = crate::io::read_json(path)?;
        read::read(&value).map_err(|message| Error::Format {
            path: path.display().to_string(),
            message,
        })
    }

    /// The layer types, in order (`["all"]` when every layer is the same).
    pub fn layer_types(&self) -> Vec<String> {
        self.layers
            .iter()
            .map(|l| l.layer_type.clone().unwrap_or_else(|| "all".into()))
            .collect()
    }

    /// The RoPE of `layer_type`; `None` picks `full_attention` when there are several, else
    /// the only one.
    ///
    /// # Errors
    /// A layer type the configuration does not have.
    pub fn layer(&self, layer_type: Option<&str>) -> Result<&LayerRope> {
        let wanted = layer_type.or(if self.layers.len() > 1 {
            Some("full_attention")
        } else {
            None
        });
        match wanted {
            None => Ok(&self.layers[0]),
            Some(name) => self
                .layers
                .iter()
                .find(|l| l.layer_type.as_deref().unwrap_or("all") == name)
                .ok_or_else(|| {
                    crate::error::invalid(
                        "layer type",
                        name,
                        format!("one of {}", self.layer_types().join(", ")),
                    )
                }),
        }
    }

    /// Frequencies, wavelengths, lengths and scales of `layer_type` at `seq_len`.
    ///
    /// # Errors
    /// As [`layer`](Self::layer) and [`LayerRope::frequencies`].
    pub fn summary(&self, layer_type: Option<&str>, seq_len: Option<usize>) -> Result<RopeSummary> {
        let layer = self.layer(layer_type)?;
        let freqs = layer.frequencies(self.rotary_dim, seq_len)?;
        let (original_len, extended_len) = layer.lengths(self.max_position);
        let a = layer.attention_factor();
        Ok(RopeSummary {
            layer_type: layer.layer_type.clone(),
            rope_type: layer.rope_type.clone(),
            rope_theta: layer.base,
            seq_len,
            wavelength: freqs
                .inv_freq
                .iter()
                .map(|&t| std::f64::consts::TAU / f64::from(t))
                .collect(),
            inv_freq: freqs.inv_freq,
            original_len,
            extended_len,
            attention_factor: a,
            softmax_multiplier: layer.softmax_multiplier,
            logit_multiplier: a * a * layer.softmax_multiplier,
            boundaries: layer
                .boundaries()
                .into_iter()
                .map(|(n, w)| (n.to_string(), w))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests;
