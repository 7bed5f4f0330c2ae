//! # Data-dependent ALiBi — the forgetting gate
//!
//! Lin, Nikishin, He, Courville 2025, "Forgetting Transformer: Softmax Attention with a Forget
//! Gate" (<https://openreview.net/forum?id=q2Lnyegkr8>); reference code: x-transformers'
//! `DataDependentAlibi` (`x_transformers/x_transformers.py`, causal, `post_log_scale` 1).
//!
//! ALiBi subtracts $m_h$ for every token between a query and a key. The forgetting gate lets
//! each token say how much it costs to look past it: token $t$ emits, per head, a log gate
//! $f_t = \ln\sigma(w_h \cdot x_t + b_h) \le 0$ from its own input, and the bias of a pair is
//! the sum of the log gates of the tokens after the key, up to and including the query. A
//! token whose gate is open ($f_t \approx 0$) is free to look past; a closed one ($f_t \ll 0$)
//! hides everything before it. With every gate at the same $f$ this is ALiBi with slope $-f$.
//! The gate's bias starts at 5 ($\sigma(5) = 0.993$, $f \approx -0.0067$ per token): nearly
//! open, a gentle ALiBi.
//!
//! ```math
//! f_{h,t} = \ln\sigma(w_h \cdot x_t + b_h), \qquad C_{h,i} = \sum_{t \le i} f_{h,t}, \qquad
//! b^{(h)}_{ij} = C_{h,i} - C_{h,j} = \sum_{t = j+1}^{i} f_{h,t} \quad (j \le i),
//! ```
//!
//! with $x_t$ the attention's input at position $t$ (after the block's LayerNorm). The bias is
//! added to the scaled scores. Because $C_{h,i}$ is the same for every key of row $i$, the
//! softmax sees only $-C_{h,j}$, one number per key: linear in $L$, whatever the length.
//!
//! x-transformers returns $C_i - C_j$ for every pair, future keys included (positive there,
//! masked by causal attention); [`DataDependentAlibi::bias`] does the same.

use ndarray::{Array1, Array2, Array3, ArrayView2, Axis};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, Result};

/// The gate's initial bias $b_h$ (x-transformers' `bias_init`): $\sigma(5) \approx 0.993$.
pub const GATE_BIAS_INIT: f32 = 5.0;

/// $\ln\sigma(z) = \min(z, 0) - \ln(1 + e^{-|z|})$, stable for large $|z|$.
///
/// # Examples
/// ```
/// use posenc::encodings::dd_alibi::log_sigmoid;
/// assert_eq!(log_sigmoid(0.0), -(2f32.ln()));
/// assert!((log_sigmoid(-100.0) + 100.0).abs() < 1e-6);
/// ```
pub fn log_sigmoid(z: f32) -> f32 {
    z.min(0.0) - (-z.abs()).exp().ln_1p()
}

/// The forgetting gate of one attention layer: a linear map from the input to one log gate
/// per head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataDependentAlibi {
    /// $w$, `[d_model, heads]` (column $h$ is head $h$'s $w_h$).
    pub weight: Array2<f32>,
    /// $b$, `[heads]`.
    pub bias: Array1<f32>,
}

impl DataDependentAlibi {
    /// The gate for inputs of width `d_model` and `heads` heads, initialised as x-transformers
    /// does: $w \sim \mathcal U(\pm 1/\sqrt{d_{model}})$ (PyTorch's `nn.Linear`), drawn from
    /// `seed`, and $b_h = $ `gate_bias` (x-transformers' [`GATE_BIAS_INIT`]).
    ///
    /// # Errors
    /// When `d_model` or `heads` is 0, or `gate_bias` is not finite.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::dd_alibi::{DataDependentAlibi, GATE_BIAS_INIT};
    /// use ndarray::Array2;
    /// let gate = DataDependentAlibi::new(16, 2, GATE_BIAS_INIT, 0)?;
    /// // a zero input: every log gate is ln sigma(5), so b_ij = (i - j) ln sigma(5)
    /// let bias = gate.bias(Array2::zeros((4, 16)).view())?;
    /// assert!((bias[[0, 3, 1]] - 2.0 * (-(1.0 + (-5f32).exp()).ln())).abs() < 1e-6);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(d_model: usize, heads: usize, gate_bias: f32, seed: u64) -> Result<Self> {
        ensure(d_model > 0, "d_model", d_model, "at least 1")?;
        ensure(heads > 0, "heads", heads, "at least 1")?;
        let weight = Seeded::new(seed).uniform((d_model, heads), 1.0 / (d_model as f32).sqrt())?;
        Self::from_parts(weight, Array1::from_elem(heads, gate_bias))
    }

    /// The gate with given (e.g. trained) weights.
    ///
    /// # Errors
    /// When `bias` does not have one entry per column of `weight`, there is no head, or a
    /// value is not finite.
    pub fn from_parts(weight: Array2<f32>, bias: Array1<f32>) -> Result<Self> {
        let (d, heads) = weight.dim();
        ensure(
            d > 0 && heads > 0,
            "weight",
            format!("[{d}, {heads}]"),
            "at least [1, 1]",
        )?;
        ensure_shape("dd_alibi: bias", &[heads], bias.shape())?;
        ensure(
            weight.iter().chain(&bias).all(|v| v.is_finite()),
            "weight",
            "a value that is not finite",
            "finite numbers",
        )?;
        Ok(Self { weight, bias })
    }

    /// Heads.
    pub fn heads(&self) -> usize {
        self.bias.len()
    }

    /// The log gates $f_{h,t} = \ln\sigma(w_h \cdot x_t + b_h)$ of inputs `x [L, d_model]`,
    /// `[H, L]`.
    ///
    /// # Errors
    /// When `x` is not `d_model` wide.
    pub fn log_gates(&self, x: ArrayView2<f32>) -> Result<Array2<f32>> {
        ensure_shape(
            "dd_alibi: input width",
            &[self.weight.nrows()],
            &[x.ncols()],
        )?;
        // x w + b, [L, H] -> [H, L]
        let z = x.dot(&self.weight) + &self.bias;
        Ok(z.mapv(log_sigmoid).reversed_axes())
    }

    /// $C_{h,i} = \sum_{t \le i} f_{h,t}$, `[H, L]`: the running sum of the log gates.
    ///
    /// # Errors
    /// As [`DataDependentAlibi::log_gates`].
    pub fn cumulative(&self, x: ArrayView2<f32>) -> Result<Array2<f32>> {
        let mut c = self.log_gates(x)?;
        c.accumulate_axis_inplace(Axis(1), |&prev, cur| *cur += prev);
        Ok(c)
    }

    /// $b^{(h)}_{ij} = C_{h,i} - C_{h,j}$ for every pair, `[H, L, L]` (x-transformers'
    /// output: future keys included).
    ///
    /// # Errors
    /// As [`DataDependentAlibi::log_gates`].
    pub fn bias(&self, x: ArrayView2<f32>) -> Result<Array3<f32>> {
        let c = self.cumulative(x)?;
        let l = c.ncols();
        Ok(Array3::from_shape_fn((self.heads(), l, l), |(h, i, j)| {
            c[[h, i]] - c[[h, j]]
        }))
    }

    /// The bias of inputs `x [L, d_model]` as a [`PositionScheme`] for attention over them.
    ///
    /// # Errors
    /// As [`DataDependentAlibi::log_gates`].
    pub fn applied(&self, x: ArrayView2<f32>) -> Result<ForgetBias> {
        Ok(ForgetBias {
            cumulative: self.cumulative(x)?,
        })
    }
}

/// The forgetting gate's bias for one input sequence: $b^{(h)}_{ij} = C_{h,i} - C_{h,j}$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForgetBias {
    /// $C$, `[H, L]`.
    pub cumulative: Array2<f32>,
}

impl ForgetBias {
    /// $C_{h,i} - C_{h,j}$ of head `head`, `[Lq, Lk]`, queries at the last `lq` of the `lk`
    /// positions.
    ///
    /// # Errors
    /// When `head` is out of range, `lk` is not the input's length, or `lq > lk`.
    pub fn bias(&self, head: usize, lq: usize, lk: usize) -> Result<Array2<f32>> {
        let (heads, l) = self.cumulative.dim();
        ensure(head < heads, "head", head, &format!("0..{heads}"))?;
        ensure(lk == l, "Lk", lk, &format!("the input's length {l}"))?;
        ensure_queries_fit(lq, lk)?;
        let c = self.cumulative.row(head);
        Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
            c[query_position(i, lq, lk)] - c[j]
        }))
    }
}

impl PositionScheme for ForgetBias {
    fn name(&self) -> String {
        "dd_alibi".into()
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.bias(head, lq, lk).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::init::seeded_normal;

    /// $\sum_{t=j+1}^{i} f_t$ by a loop over the tokens between (the oracle of the running
    /// sums' difference).
    fn summed(f: &Array2<f32>, h: usize, i: usize, j: usize) -> f32 {
        (j + 1..=i).map(|t| f[[h, t]]).sum()
    }

    #[test]
    fn bias_is_the_sum_of_the_log_gates_between() {
        let gate = DataDependentAlibi::new(6, 3, GATE_BIAS_INIT, 4).unwrap();
        let x = seeded_normal(9, 6, 1) * 3.0;
        let f = gate.log_gates(x.view()).unwrap();
        assert!(f.iter().all(|&v| v < 0.0));
        let b = gate.bias(x.view()).unwrap();
        for ((h, i, j), &v) in b.indexed_iter() {
            let want = if j <= i {
                summed(&f, h, i, j)
            } else {
                -summed(&f, h, j, i)
            };
            assert!((v - want).abs() < 1e-5, "{h} {i} {j}: {v} vs {want}");
        }
        // the scheme's view: the last 4 queries of 9 keys
        let applied = gate.applied(x.view()).unwrap();
        let part = applied.bias(2, 4, 9).unwrap();
        assert_eq!(part[[1, 3]], b[[2, 6, 3]]);
    }

    #[test]
    fn log_sigmoid_is_stable_and_exact() {
        for z in [-80.0f32, -3.0, -0.5, 0.0, 0.5, 3.0, 80.0] {
            let want = -((-(z as f64)).exp().ln_1p());
            assert!((log_sigmoid(z) as f64 - want).abs() < 1e-6, "{z}");
        }
    }

    #[test]
    fn invalid_input_is_an_error() {
        assert!(DataDependentAlibi::new(0, 2, 5.0, 0).is_err());
        assert!(DataDependentAlibi::new(4, 0, 5.0, 0).is_err());
        assert!(DataDependentAlibi::new(4, 2, f32::NAN, 0).is_err());
        assert!(DataDependentAlibi::from_parts(Array2::zeros((3, 2)), Array1::zeros(3)).is_err());
        let gate = DataDependentAlibi::new(4, 2, 5.0, 0).unwrap();
        assert!(gate.log_gates(Array2::zeros((3, 5)).view()).is_err());
        let applied = gate.applied(Array2::zeros((3, 4)).view()).unwrap();
        assert!(applied.bias(2, 3, 3).is_err());
        assert!(applied.bias(0, 3, 4).is_err());
        assert!(applied.bias(0, 4, 3).is_err());
    }
}
