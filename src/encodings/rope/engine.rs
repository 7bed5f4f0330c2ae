//! Where inference engines go wrong with RoPE, as functions: a configuration's attention
//! scales read another way ([`Misreading`]), the attention weights that result
//! ([`query_weights`]), and the score error of keys cached under other frequencies than the
//! query's ([`stale_cache_error`]: dynamic NTK or LongRoPE changing them mid-sequence).
//!
//! Only the product $a^2\mu$ of the cos/sin scale and the softmax multiplier reaches the
//! weights, $\alpha_j = \operatorname{softmax}_j(a^2 \mu\, q \cdot R_{j-m} k_j / \sqrt d)$, and with one key
//! the softmax is 1 whatever it is: a test needs several keys to see a misread scale.
//! Shown in `notebooks/12_rope_in_the_wild.ipynb`.

use ndarray::{Array1, ArrayView1, ArrayView2, Axis};
use serde::{Deserialize, Serialize};

use super::{apply_rope, LayerRope, RopeFrequencies, RopeLayout, RopeScaling};
use crate::attention::softmax_rows;
use crate::error::{ensure_shape, Result};

/// A way of reading the attention scales of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Misreading {
    /// As the model's code: cos and sin times $a$, the softmax scale times $\mu$.
    AsTheModel,
    /// A YaRN layer's attention factor multiplied again by the engine's own
    /// `yarn_get_mscale(factor)`: $a \to a\,(0.1 \ln s + 1)$ (sglang #33558). That is $a^2$ only
    /// where $a$ is the default $0.1 \ln s + 1$ (1.4852 becomes 2.2058 at $s = 128$); where the
    /// configuration gives $a = 1$ (DeepSeek's equal `mscale` and `mscale_all_dim`, Ministral 3)
    /// it is $0.1 \ln s + 1$. $\mu$ is kept; layers of other scalings are read as the model.
    AttentionFactorTimesMscale,
    /// The rotary part ignores `mscale` and `mscale_all_dim` (sglang #22711): a YaRN layer
    /// without an explicit `attention_factor` gets the default $a = 0.1 \ln s + 1$, while the
    /// softmax multiplier $\mu$, which DeepSeek computes from `mscale_all_dim`, is kept (an
    /// engine ignoring both keys would also have $\mu = 1$).
    RotaryIgnoresMscale,
    /// DeepSeek's softmax multiplier left out: $\mu \to 1$.
    NoSoftmaxMultiplier,
}

impl Misreading {
    /// All four.
    pub const ALL: [Misreading; 4] = [
        Misreading::AsTheModel,
        Misreading::AttentionFactorTimesMscale,
        Misreading::RotaryIgnoresMscale,
        Misreading::NoSoftmaxMultiplier,
    ];

    /// A short description.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AsTheModel => "as the model",
            Self::AttentionFactorTimesMscale => "a × (0.1 ln s + 1)",
            Self::RotaryIgnoresMscale => "rotary ignores mscale, μ kept",
            Self::NoSoftmaxMultiplier => "softmax multiplier dropped",
        }
    }

    /// $(a, \mu)$ of `layer` read this way.
    pub fn scales(&self, layer: &LayerRope) -> (f64, f64) {
        let (a, mu) = (layer.attention_factor(), layer.softmax_multiplier);
        let yarn_factor = match layer.scaling {
            super::LayerScaling::Rope(RopeScaling::Yarn {
                factor,
                attention_factor,
                ..
            }) => Some((factor, attention_factor)),
            _ => None,
        };
        match (self, yarn_factor) {
            (Self::AsTheModel, _) => (a, mu),
            // the engine's yarn_get_mscale(s) = 0.1 ln s + 1 on top of the configured a
            (Self::AttentionFactorTimesMscale, Some((factor, _))) => {
                (a * super::yarn_mscale(factor, 1.0), mu)
            }
            (Self::RotaryIgnoresMscale, Some((factor, None))) => {
                (super::yarn_mscale(factor, 1.0), mu)
            }
            (Self::AttentionFactorTimesMscale | Self::RotaryIgnoresMscale, _) => (a, mu),
            (Self::NoSoftmaxMultiplier, _) => (a, 1.0),
        }
    }
}

/// The weights $\alpha_j$ of one query `q` at position `query_pos` over `keys` at positions
/// $0..n$: $\operatorname{softmax}_j(\mu\, (a R_m q) \cdot (a R_j k_j) / \sqrt d)$ with `freqs`'
/// $\theta$ and the given $a$, $\mu$ (the attention factor in `freqs` is ignored).
///
/// # Errors
/// When the widths differ from the rotary dimension.
pub fn query_weights(
    q: ArrayView1<f32>,
    keys: ArrayView2<f32>,
    query_pos: f64,
    freqs: &RopeFrequencies,
    (a, mu): (f64, f64),
    layout: RopeLayout,
) -> Result<Array1<f32>> {
    ensure_shape("query_weights: q width", &[keys.ncols()], &[q.len()])?;
    let f = RopeFrequencies {
        inv_freq: freqs.inv_freq.clone(),
        attention_factor: a as f32,
    };
    let positions: Vec<f64> = (0..keys.nrows()).map(|j| j as f64).collect();
    let qm = apply_rope(q.insert_axis(Axis(0)), &[query_pos], &f, layout)?;
    let kj = apply_rope(keys, &positions, &f, layout)?;
    // mu q'.k' / sqrt(d), [1, n]
    let scores = qm.dot(&kj.t()) * (mu / (q.len() as f64).sqrt()) as f32;
    Ok(softmax_rows(&scores).row(0).to_owned())
}

/// $|q_m' \cdot k_j^{cached} - q_m' \cdot k_j'|$ for keys at positions $0..n$: the query and the
/// fresh keys rotated with `current`, the cached keys with `cached` (the frequencies when they
/// were written); scores $q' \cdot k'$ with the frequencies' attention factors, not divided by
/// $\sqrt d$.
///
/// # Errors
/// When the widths differ from the rotary dimension, or the two frequency sets differ in length.
pub fn stale_cache_error(
    q: ArrayView1<f32>,
    keys: ArrayView2<f32>,
    query_pos: f64,
    cached: &RopeFrequencies,
    current: &RopeFrequencies,
    layout: RopeLayout,
) -> Result<Vec<f64>> {
    ensure_shape(
        "stale_cache_error: frequencies",
        &[current.inv_freq.len()],
        &[cached.inv_freq.len()],
    )?;
    let positions: Vec<f64> = (0..keys.nrows()).map(|j| j as f64).collect();
    let qm = apply_rope(q.insert_axis(Axis(0)), &[query_pos], current, layout)?;
    let stale = apply_rope(keys, &positions, cached, layout)?.dot(&qm.row(0));
    let fresh = apply_rope(keys, &positions, current, layout)?.dot(&qm.row(0));
    Ok(stale
        .iter()
        .zip(&fresh)
        .map(|(s, f)| f64::from((s - f).abs()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;
    use crate::encodings::init::seeded_normal as random;
    use crate::encodings::rope::{ModelRope, Rope, RopeConfig};

    fn yarn_layer() -> LayerRope {
        let v = serde_json::json!({"model_type": "deepseek_v3", "max_position_embeddings": 163840,
            "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                             "original_max_position_embeddings": 4096}});
        ModelRope::from_json(&v).unwrap().layers[0].clone()
    }

    #[test]
    fn weights_as_the_model_equal_the_reference_attention_of_the_last_query() {
        let config = RopeConfig::new(16, 1e4).unwrap();
        let freqs = config.frequencies(None).unwrap();
        let (q, k) = (random(6, 16, 1), random(6, 16, 2));
        let reference = attention(
            q.view(),
            k.view(),
            k.view(),
            &Rope::new(config, RopeLayout::Half),
            0,
            true,
        )
        .unwrap()
        .probs;
        let ours = query_weights(
            q.row(5),
            k.view(),
            5.0,
            &freqs,
            (1.0, 1.0),
            RopeLayout::Half,
        )
        .unwrap();
        for j in 0..6 {
            assert!((ours[j] - reference[[5, j]]).abs() < 1e-6);
        }
        // only a^2 mu matters
        let w = |s| query_weights(q.row(5), k.view(), 5.0, &freqs, s, RopeLayout::Half).unwrap();
        let (a, b) = (w((1.5, 1.0)), w((1.0, 2.25)));
        assert!((&a - &b).mapv(f32::abs).sum() < 1e-5);
        // one key: weight 1 whatever the scale
        let one = query_weights(
            q.row(0),
            k.slice(ndarray::s![..1, ..]),
            0.0,
            &freqs,
            (7.0, 3.0),
            RopeLayout::Half,
        )
        .unwrap();
        assert_eq!(one[0], 1.0);
    }

    #[test]
    fn misreadings_of_deepseek_v3() {
        let layer = yarn_layer();
        // a = m(40, 1) / m(40, 1) = 1; mu = m(40, 1)^2
        let m = 0.1 * 40f64.ln() + 1.0;
        let close = |(a, mu): (f64, f64), (x, y): (f64, f64)| {
            (a - x).abs() < 1e-12 && (mu - y).abs() < 1e-12
        };
        assert!(close(Misreading::AsTheModel.scales(&layer), (1.0, m * m)));
        assert!(close(
            Misreading::RotaryIgnoresMscale.scales(&layer),
            (m, m * m)
        ));
        assert!(close(
            Misreading::NoSoftmaxMultiplier.scales(&layer),
            (1.0, 1.0)
        ));
        // a = 1 times the engine's 0.1 ln s + 1: not a^2 = 1
        assert!(close(
            Misreading::AttentionFactorTimesMscale.scales(&layer),
            (m, m * m)
        ));
    }

    #[test]
    fn the_engine_mscale_squares_only_the_default_attention_factor() {
        let read = |scaling: serde_json::Value| {
            let v = serde_json::json!({"model_type": "qwen2", "head_dim": 128, "rope_theta": 1e6,
                "max_position_embeddings": 524288, "rope_scaling": scaling});
            ModelRope::from_json(&v).unwrap().layers[0].clone()
        };
        // sglang #33558: the default a = 0.1 ln 128 + 1 = 1.4852 became 2.2058
        let default = read(serde_json::json!({"rope_type": "yarn", "factor": 128.0,
            "original_max_position_embeddings": 4096}));
        let (a, mu) = Misreading::AttentionFactorTimesMscale.scales(&default);
        assert!((a - 2.2058).abs() < 5e-5 && mu == 1.0);
        // an explicit a = 1.5: 1.5 (0.1 ln 128 + 1), and ignoring mscale keeps it
        let explicit = read(serde_json::json!({"rope_type": "yarn", "factor": 128.0,
            "attention_factor": 1.5, "original_max_position_embeddings": 4096}));
        let (a, _) = Misreading::AttentionFactorTimesMscale.scales(&explicit);
        assert!((a - 1.5 * (0.1 * 128f64.ln() + 1.0)).abs() < 1e-12);
        assert_eq!(
            Misreading::RotaryIgnoresMscale.scales(&explicit),
            (1.5, 1.0)
        );
        // not YaRN: read as the model
        let linear = read(serde_json::json!({"rope_type": "linear", "factor": 4.0}));
        for r in Misreading::ALL {
            assert_eq!(r.scales(&linear), (1.0, 1.0));
        }
    }

    #[test]
    fn no_error_when_the_frequencies_did_not_change() {
        let f = RopeConfig::new(8, 1e4).unwrap().frequencies(None).unwrap();
        let g = RopeConfig::with_scaling(8, 1e4, RopeScaling::NtkAware { factor: 4.0 })
            .unwrap()
            .frequencies(None)
            .unwrap();
        let (q, k) = (random(1, 8, 3), random(20, 8, 4));
        let same = stale_cache_error(q.row(0), k.view(), 19.0, &f, &f, RopeLayout::Half).unwrap();
        assert!(same.iter().all(|&e| e == 0.0));
        let changed =
            stale_cache_error(q.row(0), k.view(), 19.0, &f, &g, RopeLayout::Half).unwrap();
        // the key at the query's own position is wrong too, and the error grows with distance
        assert!(changed[19] > 0.0 && changed.iter().cloned().fold(0.0, f64::max) > 1e-2);
        let short = RopeConfig::new(6, 1e4).unwrap().frequencies(None).unwrap();
        assert!(stale_cache_error(q.row(0), k.view(), 1.0, &short, &f, RopeLayout::Half).is_err());
    }
}
