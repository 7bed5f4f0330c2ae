//! # DPB — dynamic position bias
//!
//! Wang et al. 2021, "CrossFormer: A Versatile Vision Transformer Hinging on Cross-scale
//! Attention" (<https://arxiv.org/abs/2108.00154>); reference code: x-transformers'
//! `DynamicPositionBias` (`x_transformers/x_transformers.py`), with its `log_distance`, `depth`
//! and `norm` options.
//!
//! T5 learns one number per bucket and head; DPB learns a *function* of the distance instead:
//! a small MLP from the (signed) distance to one bias per head. Where a table stops at its
//! last row, the MLP answers any distance, so the bias exists at lengths training never saw;
//! what it answers there is the MLP's extrapolation. With `log_distance` (SwinV2's log-spaced
//! coordinates, the issue's "signed log distance") the input grows like $\ln d$, so the
//! distances of a 64 times longer context reach only about twice the largest input seen.
//!
//! ```math
//! x(d) = \operatorname{sign}(d)\,\ln(|d| + 1) \ \text{(log distance), or } x(d) = d; \qquad
//! h_1 = \operatorname{SiLU}\big(N_1(w_1 x + b_1)\big), \quad
//! h_k = \operatorname{SiLU}\big(N_k(W_k h_{k-1} + b_k)\big), \ k = 2..\text{depth};
//! ```
//! ```math
//! f(d) = W_o^\top h_{\text{depth}} + b_o \in \mathbb R^H, \qquad b^{(h)}_{ij} = f(i - j)_h,
//! ```
//!
//! with $d = i - j$ (the query's position minus the key's: $d \ge 0$ for the keys causal
//! attention sees) and $N_k$ a LayerNorm where `norm` is on (x-transformers: its own
//! bias-free LayerNorm after the first layer, `nn.LayerNorm` with a bias after the others),
//! the identity otherwise. The bias is added to the scaled scores, like T5's.
//!
//! Defaults for the byte LM (`ModelConfig`'s `dpb_*` fields): width $d_{model}/4 = 32$
//! (x-transformers' `dim // 4`, CrossFormer's `D/4`), depth 2 (x-transformers'
//! `dynamic_pos_bias_mlp_depth`), log distance on, no norm (x-transformers' default).
//!
//! Derived, checked against x-transformers and plotted in
//! `notebooks/14_schemes_since_2023.ipynb`.

use ndarray::{Array1, Array2, Array3};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, Result};

/// $\epsilon$ of the LayerNorms (PyTorch's `nn.LayerNorm` default).
pub const NORM_EPS: f32 = 1e-5;
/// Most hidden units (a bound that keeps a typo from allocating gigabytes).
pub const MAX_HIDDEN: usize = 16_384;
/// Most layers of the MLP before its output layer.
pub const MAX_DEPTH: usize = 64;

/// The MLP's input for a signed distance $d = i - j$: $\operatorname{sign}(d)\ln(|d| + 1)$
/// with `log_distance`, else $d$ itself; computed in `f64`, rounded once.
///
/// # Examples
/// ```
/// use posenc::encodings::dpb::dpb_feature;
/// assert_eq!(dpb_feature(0, true), 0.0);
/// assert_eq!(dpb_feature(-3, false), -3.0);
/// assert!((dpb_feature(-3, true) + 4f32.ln()).abs() < 1e-7);
/// ```
pub fn dpb_feature(distance: i64, log_distance: bool) -> f32 {
    let d = distance as f64;
    if log_distance {
        (d.signum() * d.abs().ln_1p()) as f32
    } else {
        d as f32
    }
}

/// A LayerNorm over the hidden units: $\gamma \odot (x - \mu)/\sqrt{\sigma^2 + \epsilon}
/// (+ \beta)$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpbNorm {
    /// $\gamma$, `[hidden]`.
    pub gamma: Array1<f32>,
    /// $\beta$, `[hidden]`; none in x-transformers' bias-free LayerNorm of the first layer.
    pub beta: Option<Array1<f32>>,
}

/// One hidden layer, $\operatorname{SiLU}(N(x W + b))$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpbLayer {
    /// $W$, `[in, hidden]` (`in` is 1 for the first layer).
    pub weight: Array2<f32>,
    /// $b$, `[hidden]`.
    pub bias: Array1<f32>,
    /// $N$, where `norm` is on.
    pub norm: Option<DpbNorm>,
}

impl DpbLayer {
    /// $\operatorname{SiLU}(N(x W + b))$ of one input row `[in]`, in `f32`.
    fn forward(&self, x: &Array1<f32>) -> Array1<f32> {
        let mut h = x.dot(&self.weight) + &self.bias;
        if let Some(norm) = &self.norm {
            // (h - mean) / sqrt(var + eps), the biased variance as PyTorch's LayerNorm
            let n = h.len() as f32;
            let mean = h.sum() / n;
            let var = h.mapv(|v| (v - mean) * (v - mean)).sum() / n;
            let inv = 1.0 / (var + NORM_EPS).sqrt();
            h = (h - mean) * inv * &norm.gamma;
            if let Some(beta) = &norm.beta {
                h += beta;
            }
        }
        // SiLU(z) = z sigmoid(z)
        h.mapv(|z| z / (1.0 + (-z).exp()))
    }
}

/// Dynamic position bias: an MLP from the signed (log) distance to one bias per head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynamicPositionBias {
    /// Whether the input is $\operatorname{sign}(d)\ln(|d| + 1)$ rather than $d$.
    pub log_distance: bool,
    /// The hidden layers, `depth` of them: the first `1 -> hidden`, then `hidden -> hidden`.
    pub layers: Vec<DpbLayer>,
    /// $W_o$, `[hidden, heads]`.
    pub out_weight: Array2<f32>,
    /// $b_o$, `[heads]`.
    pub out_bias: Array1<f32>,
}

impl DynamicPositionBias {
    /// DPB with `heads` outputs, `depth` hidden layers of `hidden` units, initialised like
    /// PyTorch's `nn.Linear` ($\mathcal U(\pm 1/\sqrt{\text{fan\_in}})$ for weights and biases,
    /// fan-in 1 for the first layer) and its LayerNorms ($\gamma = 1$, $\beta = 0$), drawn
    /// layer by layer (weight, then bias) from a ChaCha RNG seeded by `seed`.
    ///
    /// # Errors
    /// When `heads`, `hidden` or `depth` is 0 or too large.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::dpb::DynamicPositionBias;
    /// let dpb = DynamicPositionBias::new(4, 32, 2, true, false, 0)?;
    /// let beta = dpb.distance_bias(128)?; // [H, L]: f(d) for d = 0..L
    /// assert_eq!(beta.dim(), (4, 128));
    /// assert_eq!(dpb.num_params(), 64 + 1056 + 132);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(
        heads: usize,
        hidden: usize,
        depth: usize,
        log_distance: bool,
        norm: bool,
        seed: u64,
    ) -> Result<Self> {
        check_sizes(heads, hidden, depth)?;
        let mut init = Seeded::new(seed);
        let mut layers = Vec::with_capacity(depth);
        for k in 0..depth {
            let fan_in = if k == 0 { 1 } else { hidden };
            let bound = 1.0 / (fan_in as f32).sqrt();
            let weight = init.uniform((fan_in, hidden), bound)?;
            let bias = init.uniform_vec(hidden, bound)?;
            let norm = norm.then(|| DpbNorm {
                gamma: Array1::ones(hidden),
                // x-transformers' own LayerNorm (first layer) has no bias
                beta: (k > 0).then(|| Array1::zeros(hidden)),
            });
            layers.push(DpbLayer { weight, bias, norm });
        }
        let bound = 1.0 / (hidden as f32).sqrt();
        let out_weight = init.uniform((hidden, heads), bound)?;
        let out_bias = init.uniform_vec(heads, bound)?;
        Self::from_layers(log_distance, layers, out_weight, out_bias)
    }

    /// DPB with given (e.g. trained) weights.
    ///
    /// # Errors
    /// As [`DynamicPositionBias::validate`].
    pub fn from_layers(
        log_distance: bool,
        layers: Vec<DpbLayer>,
        out_weight: Array2<f32>,
        out_bias: Array1<f32>,
    ) -> Result<Self> {
        let dpb = Self {
            log_distance,
            layers,
            out_weight,
            out_bias,
        };
        dpb.validate()?;
        Ok(dpb)
    }

    /// Checks shapes and values (fields are public, e.g. for deserialisation).
    ///
    /// # Errors
    /// No layer or more than [`MAX_DEPTH`], shapes that do not chain (`[1, hidden]`, then
    /// `[hidden, hidden]`, norms `[hidden]`, output `[hidden, heads]` and `[heads]`), or a
    /// weight that is not finite.
    pub fn validate(&self) -> Result<()> {
        let (hidden, heads) = self.out_weight.dim();
        check_sizes(heads, hidden, self.layers.len())?;
        ensure_shape("dpb: out_bias", &[heads], self.out_bias.shape())?;
        let mut finite = self
            .out_weight
            .iter()
            .chain(&self.out_bias)
            .all(|w| w.is_finite());
        for (k, layer) in self.layers.iter().enumerate() {
            let fan_in = if k == 0 { 1 } else { hidden };
            ensure_shape("dpb: layer weight", &[fan_in, hidden], layer.weight.shape())?;
            ensure_shape("dpb: layer bias", &[hidden], layer.bias.shape())?;
            finite &= layer
                .weight
                .iter()
                .chain(&layer.bias)
                .all(|w| w.is_finite());
            if let Some(norm) = &layer.norm {
                ensure_shape("dpb: norm gamma", &[hidden], norm.gamma.shape())?;
                finite &= norm.gamma.iter().all(|w| w.is_finite());
                if let Some(beta) = &norm.beta {
                    ensure_shape("dpb: norm beta", &[hidden], beta.shape())?;
                    finite &= beta.iter().all(|w| w.is_finite());
                }
            }
        }
        ensure(
            finite,
            "dpb weights",
            "a non-finite value",
            "finite numbers",
        )
    }

    /// Number of heads (MLP outputs).
    pub fn heads(&self) -> usize {
        self.out_bias.len()
    }

    /// Trainable parameters: every weight, bias and norm scale.
    pub fn num_params(&self) -> usize {
        let norms: usize = self
            .layers
            .iter()
            .filter_map(|l| l.norm.as_ref())
            .map(|n| n.gamma.len() + n.beta.as_ref().map_or(0, |b| b.len()))
            .sum();
        let layers: usize = self
            .layers
            .iter()
            .map(|l| l.weight.len() + l.bias.len())
            .sum();
        layers + norms + self.out_weight.len() + self.out_bias.len()
    }

    /// $f(d)$ for one signed distance, `[heads]`, in `f32` as PyTorch computes it.
    pub fn mlp(&self, distance: i64) -> Array1<f32> {
        let mut h = Array1::from_elem(1, dpb_feature(distance, self.log_distance));
        for layer in &self.layers {
            h = layer.forward(&h);
        }
        h.dot(&self.out_weight) + &self.out_bias
    }

    /// $\beta_{h,d} = f(d)_h$ for the distances $d = 0..L$ that causal attention sees,
    /// `[H, L]`: the compact form the model's attention takes.
    ///
    /// # Errors
    /// When the configuration is invalid.
    pub fn distance_bias(&self, len: usize) -> Result<Array2<f32>> {
        self.validate()?;
        let mut beta = Array2::zeros((self.heads(), len));
        for d in 0..len {
            beta.column_mut(d).assign(&self.mlp(d as i64));
        }
        Ok(beta)
    }

    /// $b^{(h)}_{ij} = f(i - j)_h$ for every query and key of `len` positions, future keys
    /// included (negative distances), `[H, L, L]`: what x-transformers' `forward(n, n)`
    /// returns.
    ///
    /// # Errors
    /// When the configuration is invalid.
    pub fn bias_matrix(&self, len: usize) -> Result<Array3<f32>> {
        self.validate()?;
        let mut b = Array3::zeros((self.heads(), len, len));
        // f(d) for d = -(L-1)..L, row d + L - 1
        let table: Vec<Array1<f32>> = (0..2 * len.max(1) - 1)
            .map(|r| self.mlp(r as i64 - len as i64 + 1))
            .collect();
        for ((h, i, j), v) in b.indexed_iter_mut() {
            *v = table[i + len - 1 - j][h];
        }
        Ok(b)
    }
}

/// `heads`, `hidden` and `depth` within their bounds.
fn check_sizes(heads: usize, hidden: usize, depth: usize) -> Result<()> {
    ensure(heads >= 1, "heads", heads, ">= 1")?;
    ensure(
        (1..=MAX_HIDDEN).contains(&hidden),
        "dpb hidden",
        hidden,
        &format!("1 to {MAX_HIDDEN}"),
    )?;
    ensure(
        (1..=MAX_DEPTH).contains(&depth),
        "dpb depth",
        depth,
        &format!("1 to {MAX_DEPTH} (x-transformers asserts depth >= 1)"),
    )
}

impl PositionScheme for DynamicPositionBias {
    fn name(&self) -> String {
        "dpb".into()
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.validate()?;
        ensure_queries_fit(lq, lk)?;
        let heads = self.heads();
        ensure(head < heads, "head", head, &format!("0..{heads}"))?;
        Ok(Some(Array2::from_shape_fn((lq, lk), |(r, j)| {
            let i = query_position(r, lq, lk);
            self.mlp(i as i64 - j as i64)[head]
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// hidden 2, heads 1, depth 1: f(d) = 2 SiLU(d) - SiLU(1 - d) + 0.5 on the raw distance.
    fn tiny() -> DynamicPositionBias {
        let layer = DpbLayer {
            weight: array![[1.0, -1.0]],
            bias: array![0.0, 1.0],
            norm: None,
        };
        DynamicPositionBias::from_layers(false, vec![layer], array![[2.0], [-1.0]], array![0.5])
            .unwrap()
    }

    fn silu(z: f64) -> f64 {
        z / (1.0 + (-z).exp())
    }

    #[test]
    fn the_mlp_by_hand() {
        let dpb = tiny();
        for d in [-3i64, 0, 1, 5] {
            let x = d as f64;
            let want = 2.0 * silu(x) - silu(1.0 - x) + 0.5;
            assert!((f64::from(dpb.mlp(d)[0]) - want).abs() < 1e-6, "d = {d}");
        }
        // the compact vector is the matrix's diagonals below the main one
        let (beta, b) = (dpb.distance_bias(6).unwrap(), dpb.bias_matrix(6).unwrap());
        for i in 0..6 {
            for j in 0..6 {
                let want = dpb.mlp(i as i64 - j as i64)[0];
                assert_eq!(b[[0, i, j]], want);
                if j <= i {
                    assert_eq!(beta[[0, i - j]], want);
                }
            }
        }
    }

    /// The norm of a layer with $\gamma$, $\beta$: zero mean and unit variance before them.
    #[test]
    fn the_norm_centres_and_scales() {
        let layer = DpbLayer {
            weight: array![[1.0, 2.0, 3.0]],
            bias: array![0.0, 0.0, 0.0],
            norm: Some(DpbNorm {
                gamma: array![1.0, 1.0, 1.0],
                beta: Some(array![0.0, 0.0, 0.0]),
            }),
        };
        // x = 1: (1, 2, 3) -> (-1, 0, 1) / sqrt(2/3 + eps) -> SiLU
        let out = layer.forward(&array![1.0]);
        let z = 1.0 / (2.0f32 / 3.0 + NORM_EPS).sqrt();
        let silu32 = |z: f32| z / (1.0 + (-z).exp());
        for (o, w) in out.iter().zip([-z, 0.0, z]) {
            assert!((o - silu32(w)).abs() < 1e-6);
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        for (heads, hidden, depth) in [(0, 8, 2), (2, 0, 2), (2, 8, 0), (2, MAX_HIDDEN + 1, 1)] {
            assert!(DynamicPositionBias::new(heads, hidden, depth, true, false, 0).is_err());
        }
        let mut dpb = tiny();
        dpb.out_bias[0] = f32::NAN;
        assert!(dpb
            .validate()
            .unwrap_err()
            .to_string()
            .contains("dpb weights"));
        let mut dpb = tiny();
        dpb.layers[0].bias = array![1.0];
        assert!(dpb.distance_bias(4).is_err());
        assert!(tiny().score_bias(1, 2, 2).is_err());
        assert!(tiny().score_bias(0, 3, 2).is_err());
    }

    #[test]
    fn parameters_are_counted() {
        let dpb = DynamicPositionBias::new(4, 32, 3, true, true, 1).unwrap();
        // 1 -> 32 (+ gamma), 32 -> 32 (+ gamma, beta) twice, 32 -> 4
        assert_eq!(dpb.num_params(), (64 + 32) + 2 * (1056 + 64) + 132);
    }
}
