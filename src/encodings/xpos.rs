//! # xPos — RoPE with an exponential decay
//!
//! Sun et al. 2022, "A Length-Extrapolatable Transformer" (<https://arxiv.org/abs/2212.10554>);
//! numbers follow the authors' torchscale implementation (`torchscale/component/xpos_relative_position.py`).
//!
//! RoPE rotates pair $i$ of q and k by $m\theta_i$, so $q_m\cdot k_n$ depends only on $m-n$,
//! but nothing makes far-away keys count less: the high-frequency pairs oscillate wildly at long
//! distances, which hurts extrapolation. xPos multiplies pair $i$ of the query by
//! $\zeta_i^{m/B}$ and of the key by $\zeta_i^{-n/B}$ with $\zeta_i < 1$; the product of the
//! two factors, $\zeta_i^{(m-n)/B}$, still depends only on the distance and *shrinks* as the key
//! moves into the past. Fast-turning pairs (small $i$) get the strongest decay, slow pairs almost
//! none: attention becomes local in exactly the dimensions whose rotation is least reliable.
//!
//! With $\theta_i = \text{base}^{-2i/d}$, $\zeta_i = \dfrac{2i/d + \gamma}{1 + \gamma}$,
//! $\gamma = 0.4$, scale base $B = 512$ and the $2\times2$ rotation $R(\cdot)$ acting on the
//! interleaved pair $(2i, 2i+1)$:
//!
//! ```math
//! \tilde q_m^{(i)} = \zeta_i^{m/B} R(m\theta_i)\  q_m^{(i)}, \qquad
//! \tilde k_n^{(i)} = \zeta_i^{-n/B} R(n\theta_i)\  k_n^{(i)}, \qquad
//! \tilde q_m\cdot\tilde k_n = \sum_{i} \zeta_i^{(m-n)/B}\
//! \big(R((m-n)\theta_i)\  q^{(i)}\big)\cdot k^{(i)}.
//! ```
//!
//! Derived step by step, checked and plotted in `notebooks/09_alibi_and_beyond.ipynb`.

use ndarray::{Array2, ArrayView1, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_even, ensure_shape, Result};

/// The RoPE base, 10000.
pub const DEFAULT_BASE: f64 = 10_000.0;
/// The paper's scale base $B$, 512.
pub const DEFAULT_SCALE_BASE: f64 = 512.0;
/// $\gamma = 0.4$ in $\zeta_i = (2i/d + \gamma)/(1 + \gamma)$ (torchscale's `0.4 * head_dim`).
pub const GAMMA: f64 = 0.4;

/// xPos on heads of width `dim`: rotate pair $i$ by $p\ \theta_i$ and scale it by
/// $\zeta_i^{\pm p/B}$ (queries $+$, keys $-$).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XPos {
    /// Head width $d$; even.
    pub dim: usize,
    /// Rotation base of $\theta_i = \text{base}^{-2i/d}$; default 10000.
    pub base: f64,
    /// Scale base $B$ of the decay $\zeta_i^{(m-n)/B}$; default 512.
    pub scale_base: f64,
}

impl Default for XPos {
    /// `dim = 64`, base 10000, scale base 512.
    fn default() -> Self {
        Self {
            dim: 64,
            base: DEFAULT_BASE,
            scale_base: DEFAULT_SCALE_BASE,
        }
    }
}

impl XPos {
    /// xPos for heads of width `dim`.
    ///
    /// # Errors
    /// When `dim` is odd or zero, `base` is not a finite number > 1, or `scale_base` is not a
    /// finite number > 0.
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let xpos = XPos::new(2, 10_000.0, 1.0)?;
    /// // d = 2: theta_0 = 1, zeta_0 = 0.4 / 1.4; a query (1, 0) at position 1
    /// let q = xpos.apply(array![[1.0f32, 0.0]].view(), &[1.0], false)?;
    /// let zeta = 0.4f32 / 1.4;
    /// assert!((q[[0, 0]] - zeta * 1f32.cos()).abs() < 1e-6);
    /// assert!((q[[0, 1]] - zeta * 1f32.sin()).abs() < 1e-6);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(dim: usize, base: f64, scale_base: f64) -> Result<Self> {
        let xpos = Self {
            dim,
            base,
            scale_base,
        };
        xpos.validate()?;
        Ok(xpos)
    }

    /// Checks the configuration (fields are public, e.g. for deserialisation).
    ///
    /// # Errors
    /// As [`XPos::new`].
    pub fn validate(&self) -> Result<()> {
        ensure_even("dim", self.dim)?;
        ensure(
            self.base.is_finite() && self.base > 1.0,
            "base",
            self.base,
            "a finite number > 1",
        )?;
        ensure(
            self.scale_base.is_finite() && self.scale_base > 0.0,
            "scale_base",
            self.scale_base,
            "a finite number > 0",
        )
    }

    /// Rotation frequencies $\theta_i = \text{base}^{-2i/d}$, $i = 0..d/2$.
    pub fn theta(&self) -> Vec<f64> {
        let d = self.dim as f64;
        (0..self.dim / 2)
            .map(|i| self.base.powf(-2.0 * i as f64 / d))
            .collect()
    }

    /// Per-pair decay bases $\zeta_i = (2i/d + \gamma)/(1 + \gamma)$, in $[\gamma/(1+\gamma), 1)$.
    pub fn zeta(&self) -> Vec<f64> {
        let d = self.dim as f64;
        // torchscale: (arange(0, d, 2) + 0.4 d) / (1.4 d)
        (0..self.dim / 2)
            .map(|i| (2.0 * i as f64 / d + GAMMA) / (1.0 + GAMMA))
            .collect()
    }

    /// The query scales $\zeta_i^{p/B}$ for each position $p$, `[positions.len(), dim/2]`; keys use
    /// the reciprocals.
    pub fn scales(&self, positions: &[f64]) -> Array2<f32> {
        self.scales_f64(positions).mapv(|s| s as f32)
    }

    fn scales_f64(&self, positions: &[f64]) -> Array2<f64> {
        let zeta = self.zeta();
        // zeta_i^{p/B} = exp(p/B ln zeta_i), [n, d/2]
        Array2::from_shape_fn((positions.len(), zeta.len()), |(r, i)| {
            (positions[r] / self.scale_base * zeta[i].ln()).exp()
        })
    }

    /// Rotates and scales the rows of `x` (`[n, dim]`) at `positions`: queries
    /// (`is_key = false`) by $\zeta_i^{p/B}$, keys by $\zeta_i^{-p/B}$.
    ///
    /// # Errors
    /// When the configuration is invalid, `x` is not `dim` wide, `positions` does not have one
    /// entry per row, or a position is not finite.
    pub fn apply(
        &self,
        x: ArrayView2<f32>,
        positions: &[f64],
        is_key: bool,
    ) -> Result<Array2<f32>> {
        ensure_shape("xpos: x width", &[self.dim], &[x.ncols()])?;
        ensure_shape(
            "xpos: one position per row",
            &[x.nrows()],
            &[positions.len()],
        )?;
        let (angle, scale) = self.angles_and_scales(positions, is_key)?;
        Ok(rotate_interleaved_scaled(x, &angle, &scale))
    }

    /// $p\,\theta_i$ and the scales $\zeta_i^{\pm p/B}$ (`+` for queries, `-` for keys) of each
    /// position, `[positions.len(), dim/2]` each, in `f64`.
    ///
    /// # Errors
    /// An invalid configuration or a non-finite position.
    fn angles_and_scales(
        &self,
        positions: &[f64],
        is_key: bool,
    ) -> Result<(Array2<f64>, Array2<f64>)> {
        self.validate()?;
        ensure(
            positions.iter().all(|p| p.is_finite()),
            "positions",
            "a non-finite value",
            "finite numbers",
        )?;
        let theta = self.theta();
        // p * theta_i, [n, d/2]
        let angle = Array2::from_shape_fn((positions.len(), theta.len()), |(r, i)| {
            positions[r] * theta[i]
        });
        // zeta_i^{+p/B} for queries, zeta_i^{-p/B} for keys, [n, d/2]
        let mut scale = self.scales_f64(positions);
        if is_key {
            scale.mapv_inplace(|s| 1.0 / s);
        }
        Ok((angle, scale))
    }

    /// The rotation-and-scale tables of [`apply`](Self::apply): $C_{pi} = \zeta_i^{\pm p/B}
    /// \cos(p\theta_i)$ and $S_{pi} = \zeta_i^{\pm p/B} \sin(p\theta_i)$ for each position $p$,
    /// `+` for queries and `-` for keys (`is_key`), `(C, S)`, `[positions.len(), dim/2]` each.
    /// Pair $i$ of a row at $p$ becomes $(x_{2i} C - x_{2i+1} S,\ x_{2i+1} C + x_{2i} S)$:
    /// the same values `apply` computes, rounded to `f32` once.
    ///
    /// # Errors
    /// As [`apply`](Self::apply): an invalid configuration or a non-finite position.
    pub fn tables(&self, positions: &[f64], is_key: bool) -> Result<(Array2<f32>, Array2<f32>)> {
        let (angle, scale) = self.angles_and_scales(positions, is_key)?;
        // zeta^{+-p/B} (cos, sin)(p theta_i)
        let c = Array2::from_shape_fn(angle.raw_dim(), |ri| (scale[ri] * angle[ri].cos()) as f32);
        let s = Array2::from_shape_fn(angle.raw_dim(), |ri| (scale[ri] * angle[ri].sin()) as f32);
        Ok((c, s))
    }

    /// The positions of `lq` queries and `lk` keys under the crate's convention,
    /// shifted by $-\lfloor L_k/2\rfloor$ (torchscale shifts its scales by $-\lceil L/2\rceil$ and
    /// leaves its angles unshifted): a common shift changes no score
    /// (only $m-n$ matters) and halves the largest $|p|$, so $\zeta^{\pm p/B}$ stays within f32
    /// range up to $L_k \approx 70\ 000$ at $B = 512$ (about $36\ 000$ uncentred).
    /// Returns `(query_positions, key_positions)`.
    pub fn centred_positions(lq: usize, lk: usize) -> (Vec<f64>, Vec<f64>) {
        let centre = (lk / 2) as f64;
        let queries = (0..lq.min(lk))
            .map(|i| query_position(i, lq.min(lk), lk) as f64 - centre)
            .collect();
        let keys = (0..lk).map(|j| j as f64 - centre).collect();
        (queries, keys)
    }

    /// The bound $\sum_i \zeta_i^{\delta/B}\  \lVert q^{(i)}\rVert\  \lVert k^{(i)}\rVert$ on
    /// $|\tilde q_m\cdot\tilde k_n|$ at distance $\delta = m - n$ (rotations preserve pair norms);
    /// non-increasing in $\delta \ge 0$ since every $\zeta_i < 1$.
    ///
    /// # Errors
    /// When `q` or `k` is not `dim` long or the configuration is invalid.
    pub fn score_bound(
        &self,
        q: ArrayView1<f32>,
        k: ArrayView1<f32>,
        distance: f64,
    ) -> Result<f32> {
        self.validate()?;
        ensure_shape("xpos: q length", &[self.dim], &[q.len()])?;
        ensure_shape("xpos: k length", &[self.dim], &[k.len()])?;
        let bound = self
            .zeta()
            .iter()
            .enumerate()
            .map(|(i, z)| {
                let qn = (q[2 * i] as f64).hypot(q[2 * i + 1] as f64);
                let kn = (k[2 * i] as f64).hypot(k[2 * i + 1] as f64);
                // zeta_i^{delta/B} |q^(i)| |k^(i)|
                z.powf(distance / self.scale_base) * qn * kn
            })
            .sum::<f64>();
        Ok(bound as f32)
    }
}

/// GPT-J-style interleaved rotation of pairs $(2i, 2i+1)$ by `angle[r, i]`, then scaling by
/// `scale[r, i]`:
/// $(x_{2i}, x_{2i+1}) \mapsto s\ (x_{2i}\cos\phi - x_{2i+1}\sin\phi,\  x_{2i+1}\cos\phi + x_{2i}\sin\phi)$.
/// The caller guarantees `angle` and `scale` are `[x.nrows(), x.ncols()/2]`.
fn rotate_interleaved_scaled(
    x: ArrayView2<f32>,
    angle: &Array2<f64>,
    scale: &Array2<f64>,
) -> Array2<f32> {
    let mut out = Array2::zeros(x.raw_dim());
    for ((r, i), &phi) in angle.indexed_iter() {
        let s = scale[[r, i]];
        let (x0, x1) = (x[[r, 2 * i]] as f64, x[[r, 2 * i + 1]] as f64);
        let (sin, cos) = phi.sin_cos();
        out[[r, 2 * i]] = (s * (x0 * cos - x1 * sin)) as f32;
        out[[r, 2 * i + 1]] = (s * (x1 * cos + x0 * sin)) as f32;
    }
    out
}

impl PositionScheme for XPos {
    fn name(&self) -> String {
        "xpos".into()
    }

    /// Queries at $L_k - L_q + i$ scaled up, keys at $j$ scaled down, all positions centred by
    /// [`XPos::centred_positions`].
    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        let (query_positions, key_positions) = Self::centred_positions(lq, lk);
        Ok((
            self.apply(q, &query_positions, false)?,
            self.apply(k, &key_positions, true)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array1};
    use proptest::prelude::*;

    /// Oracle: $\sum_i \zeta_i^{(m-n)/B} (R((m-n)\theta_i) q^{(i)}) \cdot k^{(i)}$, in f64.
    fn score_by_formula(x: &XPos, q: &[f32], k: &[f32], m: f64, n: f64) -> f64 {
        let (theta, zeta) = (x.theta(), x.zeta());
        (0..x.dim / 2)
            .map(|i| {
                let phi = (m - n) * theta[i];
                let (q0, q1) = (q[2 * i] as f64, q[2 * i + 1] as f64);
                let (k0, k1) = (k[2 * i] as f64, k[2 * i + 1] as f64);
                let rotated = (
                    q0 * phi.cos() - q1 * phi.sin(),
                    q1 * phi.cos() + q0 * phi.sin(),
                );
                zeta[i].powf((m - n) / x.scale_base) * (rotated.0 * k0 + rotated.1 * k1)
            })
            .sum()
    }

    fn score(x: &XPos, q: &[f32], k: &[f32], m: f64, n: f64) -> f32 {
        let qa = Array2::from_shape_vec((1, q.len()), q.to_vec()).unwrap();
        let ka = Array2::from_shape_vec((1, k.len()), k.to_vec()).unwrap();
        let qm = x.apply(qa.view(), &[m], false).unwrap();
        let kn = x.apply(ka.view(), &[n], true).unwrap();
        qm.row(0).dot(&kn.row(0))
    }

    #[test]
    fn zeta_matches_torchscale() {
        let x = XPos::new(8, DEFAULT_BASE, DEFAULT_SCALE_BASE).unwrap();
        // (arange(0, 8, 2) + 0.4 * 8) / (1.4 * 8)
        let expected = [3.2 / 11.2, 5.2 / 11.2, 7.2 / 11.2, 9.2 / 11.2];
        for (z, e) in x.zeta().iter().zip(expected) {
            assert!((z - e).abs() < 1e-12);
        }
        let theta = x.theta();
        assert!((theta[1] - 0.1).abs() < 1e-12); // 10000^{-2/8}
        let s = x.scales(&[512.0, -512.0]);
        assert!((s[[0, 0]] - (3.2f32 / 11.2)).abs() < 1e-6);
        assert!((s[[1, 0]] - (11.2f32 / 3.2)).abs() < 1e-5);
    }

    #[test]
    fn key_is_rotated_and_scaled_down() {
        let x = XPos::new(2, 10_000.0, 2.0).unwrap();
        let k = x.apply(array![[0.0f32, 1.0]].view(), &[3.0], true).unwrap();
        let s = (0.4f32 / 1.4).powf(-1.5);
        // (0, 1) rotated by 3 rad: (-sin 3, cos 3)
        assert!((k[[0, 0]] + s * 3f32.sin()).abs() < 1e-5);
        assert!((k[[0, 1]] - s * 3f32.cos()).abs() < 1e-5);
    }

    #[test]
    fn scores_equal_the_closed_form() {
        let x = XPos::new(8, 10_000.0, 16.0).unwrap();
        let q = [0.3f32, -1.0, 0.5, 2.0, -0.7, 0.1, 1.5, -0.2];
        let k = [1.1f32, 0.4, -0.3, 0.8, 0.2, -1.2, 0.6, 0.9];
        for (m, n) in [(5.0, 2.0), (0.0, 0.0), (40.0, 1.0), (-3.0, 7.0)] {
            let a = score(&x, &q, &k, m, n) as f64;
            let b = score_by_formula(&x, &q, &k, m, n);
            assert!(
                (a - b).abs() < 1e-4 * (1.0 + b.abs()),
                "m={m} n={n}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn transform_qk_uses_centred_positions_without_changing_scores() {
        let x = XPos::new(4, 10_000.0, 8.0).unwrap();
        let q = array![[0.5f32, -1.0, 2.0, 0.3], [1.0, 1.0, -0.5, 0.2]];
        let k = array![
            [1.0f32, 0.0, 0.5, 0.5],
            [0.2, -0.3, 1.0, 0.0],
            [0.7, 0.7, -1.0, 2.0]
        ];
        let (qt, kt) = x.transform_qk(q.view(), k.view()).unwrap();
        // queries at 1, 2 and keys at 0, 1, 2 without centring
        let qr = x.apply(q.view(), &[1.0, 2.0], false).unwrap();
        let kr = x.apply(k.view(), &[0.0, 1.0, 2.0], true).unwrap();
        let (a, b) = (qt.dot(&kt.t()), qr.dot(&kr.t()));
        for (u, v) in a.iter().zip(b.iter()) {
            assert!((u - v).abs() < 1e-5, "{u} vs {v}");
        }
        assert_eq!(
            XPos::centred_positions(2, 5),
            (vec![1.0, 2.0], vec![-2.0, -1.0, 0.0, 1.0, 2.0])
        );
    }

    #[test]
    fn long_sequences_stay_finite() {
        let x = XPos::new(8, 10_000.0, 512.0).unwrap();
        // uncentred, zeta_0^{-60000/512} would overflow f32
        let k = Array2::<f32>::ones((60_000, 8));
        let (qt, kt) = x.transform_qk(k.view(), k.view()).unwrap();
        assert!(qt.iter().chain(kt.iter()).all(|v| v.is_finite()));
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(XPos::new(7, 10_000.0, 512.0).is_err());
        assert!(XPos::new(0, 10_000.0, 512.0).is_err());
        assert!(XPos::new(8, 1.0, 512.0).is_err());
        assert!(XPos::new(8, f64::INFINITY, 512.0).is_err());
        assert!(XPos::new(8, 10_000.0, 0.0).is_err());
        assert!(XPos::new(8, 10_000.0, f64::NAN).is_err());
        let x = XPos::default();
        assert!(x.validate().is_ok());
        let rows = Array2::<f32>::ones((2, 64));
        assert!(x.apply(rows.view(), &[0.0], false).is_err());
        assert!(x.apply(rows.view(), &[0.0, f64::NAN], false).is_err());
        assert!(x
            .apply(Array2::<f32>::ones((1, 6)).view(), &[0.0], false)
            .is_err());
        assert!(x
            .transform_qk(rows.view(), rows.slice(ndarray::s![..1, ..]))
            .is_err());
        let v = Array1::<f32>::ones(4);
        assert!(x.score_bound(v.view(), v.view(), 1.0).is_err());
    }

    proptest! {
        #[test]
        fn score_depends_only_on_distance(m in 0.0f64..2000.0, n in 0.0f64..2000.0, shift in -500.0f64..500.0,
                                          q in proptest::collection::vec(-1.0f32..1.0, 16),
                                          k in proptest::collection::vec(-1.0f32..1.0, 16)) {
            let x = XPos::new(16, 10_000.0, 512.0).unwrap();
            let (a, b) = (score(&x, &q, &k, m, n), score(&x, &q, &k, m + shift, n + shift));
            let bound = x.score_bound(ArrayView1::from(&q), ArrayView1::from(&k), m - n).unwrap();
            prop_assert!((a - b).abs() <= 1e-4 * (bound + 1e-3), "{} vs {} (bound {})", a, b, bound);
        }

        #[test]
        fn scores_decay_under_a_monotone_bound(dist in 0usize..4000) {
            let x = XPos::new(16, 10_000.0, 512.0).unwrap();
            let ones = [1.0f32; 16];
            let v = ArrayView1::from(&ones);
            let (b0, b1) = (x.score_bound(v, v, dist as f64).unwrap(), x.score_bound(v, v, dist as f64 + 1.0).unwrap());
            prop_assert!(b1 <= b0, "bound rises from {} to {}", b0, b1);
            let s = score(&x, &ones, &ones, dist as f64, 0.0);
            prop_assert!(s.abs() <= b0 * (1.0 + 1e-5), "score {} above bound {}", s, b0);
            // at distance 0 the bound is attained: q . k = sum_i 2
            if dist == 0 {
                prop_assert!((s - 16.0).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn tables_are_what_apply_rotates_and_scales_with() {
        let x = XPos::new(8, DEFAULT_BASE, 16.0).unwrap();
        let positions = [-3.0, 0.0, 2.0, 7.5];
        for is_key in [false, true] {
            let (c, s) = x.tables(&positions, is_key).unwrap();
            // apply on rows (1, 0, 1, 0, ...) returns (C, S) in every pair, to the bit
            let ones = Array2::from_shape_fn((4, 8), |(_, j)| if j % 2 == 0 { 1.0 } else { 0.0 });
            let unit = x.apply(ones.view(), &positions, is_key).unwrap();
            for ((r, i), &cv) in c.indexed_iter() {
                assert_eq!(unit[[r, 2 * i]].to_bits(), cv.to_bits());
                assert_eq!(unit[[r, 2 * i + 1]].to_bits(), s[[r, i]].to_bits());
            }
            // and on any row, the pair formula with the tables (up to f32 rounding)
            let q = Array2::from_shape_fn((4, 8), |(r, j)| (r as f32 - 1.5) * 0.3 + j as f32 * 0.1);
            let out = x.apply(q.view(), &positions, is_key).unwrap();
            for ((r, i), &cv) in c.indexed_iter() {
                let (q0, q1, sv) = (q[[r, 2 * i]], q[[r, 2 * i + 1]], s[[r, i]]);
                assert!((out[[r, 2 * i]] - (q0 * cv - q1 * sv)).abs() < 1e-5);
                assert!((out[[r, 2 * i + 1]] - (q1 * cv + q0 * sv)).abs() < 1e-5);
            }
        }
        assert!(x.tables(&[f64::NAN], false).is_err());
    }
}
