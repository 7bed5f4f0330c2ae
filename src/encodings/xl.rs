//! # Transformer-XL and XLNet relative attention
//!
//! Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context"
//! (<https://arxiv.org/abs/1901.02860>), §3.3; Yang et al. 2019, "XLNet"
//! (<https://arxiv.org/abs/1906.08237>); reference code: kimiyoung/transformer-xl
//! `RelPartialLearnableMultiHeadAttn` and `_rel_shift`, zihangdai/xlnet `rel_shift`.
//!
//! Expanding the absolute-position score $(x_i + p_i) W_q W_k^\top (x_j + p_j)^\top$ gives four
//! terms ([`AbsoluteExpansion`]). Transformer-XL keeps their shape but replaces the absolute
//! key position $p_j$ by a sinusoidal *relative* one $R_{i-j}$ (projected by $W_R$), and the
//! query-side position $p_i W_q$ by two learned global vectors $u$ (content bias) and $v$
//! (position bias), because a query should not favour keys differently depending on where the
//! query itself is:
//!
//! ```math
//! A_{ij} = \underbrace{q_i \cdot k_j}_{(a)} + \underbrace{q_i \cdot r_{i-j}}_{(b)} + \underbrace{u \cdot k_j}_{(c)} + \underbrace{v \cdot r_{i-j}}_{(d)}
//! ```
//!
//! that is $A_{ij} = (q_i + u) \cdot k_j + (q_i + v) \cdot r_{i-j}$ with $r_{i-j} = R_{i-j} W_R$.
//!
//! Computing $(q_i + v) \cdot r_{i-j}$ for every pair would need an $[L_q, L_k, d]$ tensor.
//! The **rel_shift** trick instead multiplies by the $L_k$ distinct distances once, giving
//! $B_{ir} = (q_i+v)\cdot r_{L_k-1-r}$, and shifts row $i$ left by $L_q - 1 - i$ with a pad
//! column and a reshape ([`rel_shift`]); entries above the causal diagonal come out as junk
//! from the next row, which the causal mask hides. XLNet attends both ways and uses $L_k + L_q$
//! distances $L_k, \dots, -L_q+1$, so its shift ([`xlnet_rel_shift`]) is exact everywhere.
//!
//! Derived step by step, checked and plotted in `notebooks/04_transformer_xl.ipynb`.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::encodings::sinusoidal::{sinusoidal_embedding, SinusoidalLayout, DEFAULT_BASE};
use crate::error::{ensure, ensure_even, ensure_shape, Result};

/// The four terms of the absolute-position score
/// $(x_i + p_i) W_q W_k^\top (x_j + p_j)^\top$ (unscaled), each `[L, L]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AbsoluteExpansion {
    /// $x_i W_q W_k^\top x_j^\top$: content-content.
    pub content_content: Array2<f32>,
    /// $x_i W_q W_k^\top p_j^\top$: content-position.
    pub content_position: Array2<f32>,
    /// $p_i W_q W_k^\top x_j^\top$: position-content.
    pub position_content: Array2<f32>,
    /// $p_i W_q W_k^\top p_j^\top$: position-position.
    pub position_position: Array2<f32>,
}

impl AbsoluteExpansion {
    /// Expands the score for inputs `x` and positions `p` (`[L, d_model]`) and projections
    /// `w_q`, `w_k` (`[d_model, d]`).
    ///
    /// # Errors
    /// When the shapes do not fit.
    pub fn new(
        x: ArrayView2<f32>,
        p: ArrayView2<f32>,
        w_q: ArrayView2<f32>,
        w_k: ArrayView2<f32>,
    ) -> Result<Self> {
        ensure_shape("expansion: p shape", x.shape(), p.shape())?;
        ensure_shape("expansion: W_q rows", &[x.ncols()], &[w_q.nrows()])?;
        ensure_shape("expansion: W_k shape", w_q.shape(), w_k.shape())?;
        let (xq, xk, pq, pk) = (x.dot(&w_q), x.dot(&w_k), p.dot(&w_q), p.dot(&w_k));
        Ok(Self {
            content_content: xq.dot(&xk.t()),
            content_position: xq.dot(&pk.t()),
            position_content: pq.dot(&xk.t()),
            position_position: pq.dot(&pk.t()),
        })
    }

    /// The sum of the four terms.
    pub fn total(&self) -> Array2<f32> {
        &self.content_content
            + &self.content_position
            + &self.position_content
            + &self.position_position
    }
}

/// Transformer-XL's `_rel_shift` for one head, `[Lq, Lk] -> [Lq, Lk]`: pad a zero column on
/// the left, view the `[Lq, Lk+1]` buffer as `[Lk+1, Lq]`, drop its first row, view the rest
/// as `[Lq, Lk]`. Entry $(i, j)$ of the result is $x_{i,\ L_q + j - i - 1}$ for
/// $j \le L_k - L_q + i$ and junk above.
pub fn rel_shift(x: ArrayView2<f32>) -> Array2<f32> {
    let (lq, lk) = x.dim();
    // zero-padded buffer, row-major [Lq, Lk+1]
    let mut padded = Vec::with_capacity(lq * (lk + 1));
    for row in x.rows() {
        padded.push(0.0);
        padded.extend(row.iter().copied());
    }
    // dropping the first row of the [Lk+1, Lq] view skips Lq elements
    Array2::from_shape_fn((lq, lk), |(i, j)| padded[lq + i * lk + j])
}

/// XLNet's `rel_shift` for one head: `x` is `[Lq, Lk + Lq]` over distances
/// $L_k, L_k-1, \dots, -L_q+1$; view as `[Lk+Lq, Lq]`, drop the first row, view as
/// `[Lq, Lk+Lq-1]`, keep the first `lk` columns. Entry $(i, j)$ is $x_{i,\ L_q + j - i}$, the
/// distance $(L_k - L_q + i) - j$, for every $(i, j)$.
///
/// # Errors
/// When `x` does not have `lk + Lq` columns.
pub fn xlnet_rel_shift(x: ArrayView2<f32>, lk: usize) -> Result<Array2<f32>> {
    let (lq, rlen) = x.dim();
    ensure_shape("xlnet_rel_shift: columns", &[lk + lq], &[rlen])?;
    let flat: Vec<f32> = x.iter().copied().collect();
    Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
        flat[lq + i * (rlen - 1) + j]
    }))
}

/// Which relative distances are embedded, and so which shift is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum XlDirection {
    /// Transformer-XL: distances $L_k-1, \dots, 0$ and [`rel_shift`]; entries above the causal
    /// diagonal are set to 0 (they are junk; use causal attention).
    #[default]
    Causal,
    /// XLNet: distances $L_k, \dots, -L_q+1$ and [`xlnet_rel_shift`]; exact for every pair.
    Bidirectional,
}

/// One head of Transformer-XL / XLNet relative attention: $u$, $v$ and $W_R$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransformerXl {
    /// Width of the sinusoidal $R$ (the model width in the paper); even.
    pub r_dim: usize,
    /// $W_R$, `[r_dim, d]`.
    pub w_r: Array2<f32>,
    /// $u$, the global content bias, `[d]`.
    pub u: Array1<f32>,
    /// $v$, the global position bias, `[d]`.
    pub v: Array1<f32>,
    /// Causal (XL) or bidirectional (XLNet) distances.
    pub direction: XlDirection,
}

impl TransformerXl {
    /// Random $u, v \sim \mathcal N(0, 0.02^2)$ and $W_R \sim \mathcal N(0, 1/r_{dim})$.
    ///
    /// # Errors
    /// `r_dim` odd or zero, `head_dim == 0`.
    pub fn new(r_dim: usize, head_dim: usize, direction: XlDirection, seed: u64) -> Result<Self> {
        Self::ensure_r_dim(r_dim)?;
        ensure(head_dim >= 1, "head_dim", head_dim, "at least 1")?;
        let mut init = Seeded::new(seed);
        // W_R ~ N(0, 1/r_dim), u, v ~ N(0, 0.02^2)
        let w_r = init.normal((r_dim, head_dim), 1.0 / (r_dim as f32).sqrt())?;
        let u = init.normal_vec(head_dim, 0.02)?;
        let v = init.normal_vec(head_dim, 0.02)?;
        Self::from_parts(w_r, u, v, direction)
    }

    /// Checks the width of the sinusoid table $R$: even (sine-cosine pairs) and at least 2.
    fn ensure_r_dim(r_dim: usize) -> Result<()> {
        ensure_even("r_dim", r_dim)
    }

    /// Given parameters.
    ///
    /// # Errors
    /// When `w_r` has an odd or zero number of rows, or `u`, `v` differ from its width.
    pub fn from_parts(
        w_r: Array2<f32>,
        u: Array1<f32>,
        v: Array1<f32>,
        direction: XlDirection,
    ) -> Result<Self> {
        let r_dim = w_r.nrows();
        Self::ensure_r_dim(r_dim)?;
        ensure_shape("XL: u width", &[w_r.ncols()], &[u.len()])?;
        ensure_shape("XL: v width", &[w_r.ncols()], &[v.len()])?;
        Ok(Self {
            r_dim,
            w_r,
            u,
            v,
            direction,
        })
    }

    /// Head width $d$.
    pub fn head_dim(&self) -> usize {
        self.w_r.ncols()
    }

    /// $r_\delta = R_\delta W_R$ for each distance $\delta$ in `distances`, `[n, d]`, with $R$
    /// the concatenated-layout sinusoid of width `r_dim`.
    ///
    /// # Errors
    /// Never for a valid `self`; kept fallible for the sinusoid's validation.
    pub fn relative_embeddings(&self, distances: &[f64]) -> Result<Array2<f32>> {
        let r = sinusoidal_embedding(
            distances,
            self.r_dim,
            DEFAULT_BASE,
            SinusoidalLayout::Concatenated,
        )?;
        Ok(r.dot(&self.w_r))
    }

    /// The distances whose embeddings the fast path multiplies by: $L_k-1..0$ (causal) or
    /// $L_k..-L_q+1$ (bidirectional).
    pub fn distances(&self, lq: usize, lk: usize) -> Vec<f64> {
        match self.direction {
            XlDirection::Causal => (0..lk).rev().map(|d| d as f64).collect(),
            XlDirection::Bidirectional => (-(lq as i64) + 1..=lk as i64)
                .rev()
                .map(|d| d as f64)
                .collect(),
        }
    }

    /// The four terms (a) $q_i\cdot k_j$, (b) $q_i \cdot r_{i-j}$, (c) $u \cdot k_j$,
    /// (d) $v \cdot r_{i-j}$, each `[Lq, Lk]`, computed directly pair by pair (the oracle).
    ///
    /// # Errors
    /// When the widths differ from the head width or `lq > lk`.
    pub fn terms_direct(&self, q: ArrayView2<f32>, k: ArrayView2<f32>) -> Result<[Array2<f32>; 4]> {
        self.check(q, k)?;
        let (lq, lk) = (q.nrows(), k.nrows());
        let mut terms = [(); 4].map(|_| Array2::zeros((lq, lk)));
        for i in 0..lq {
            let qi = query_position(i, lq, lk) as f64;
            let distances: Vec<f64> = (0..lk).map(|j| qi - j as f64).collect();
            // r_{i-j} for every key j, [Lk, d]
            let r = self.relative_embeddings(&distances)?;
            for j in 0..lk {
                terms[0][[i, j]] = q.row(i).dot(&k.row(j));
                terms[1][[i, j]] = q.row(i).dot(&r.row(j));
                terms[2][[i, j]] = self.u.dot(&k.row(j));
                terms[3][[i, j]] = self.v.dot(&r.row(j));
            }
        }
        Ok(terms)
    }

    /// $(q_i + v) \cdot r_{i-j}$ by the shift trick, `[Lq, Lk]` (terms (b) + (d)).
    ///
    /// # Errors
    /// When the widths differ from the head width or `lq > lk`.
    pub fn position_scores(&self, q: ArrayView2<f32>, lk: usize) -> Result<Array2<f32>> {
        let lq = q.nrows();
        ensure_shape("XL: q width", &[self.head_dim()], &[q.ncols()])?;
        ensure_queries_fit(lq, lk)?;
        let r = self.relative_embeddings(&self.distances(lq, lk))?;
        // (q_i + v) . r_delta for every distance, [Lq, n]
        let raw = (&q + &self.v.view().insert_axis(ndarray::Axis(0))).dot(&r.t());
        match self.direction {
            XlDirection::Causal => {
                let mut shifted = rel_shift(raw.view());
                // junk above the causal diagonal -> 0
                for ((i, j), x) in shifted.indexed_iter_mut() {
                    if j > query_position(i, lq, lk) {
                        *x = 0.0;
                    }
                }
                Ok(shifted)
            }
            XlDirection::Bidirectional => xlnet_rel_shift(raw.view(), lk),
        }
    }

    fn check(&self, q: ArrayView2<f32>, k: ArrayView2<f32>) -> Result<()> {
        ensure_shape("XL: q width", &[self.head_dim()], &[q.ncols()])?;
        ensure_shape("XL: k width", &[self.head_dim()], &[k.ncols()])?;
        ensure_queries_fit(q.nrows(), k.nrows())
    }
}

/// $u \cdot k_j$ broadcast over queries, `[Lq, Lk]`.
fn content_bias(u: ArrayView1<f32>, k: ArrayView2<f32>, lq: usize) -> Array2<f32> {
    let row = k.dot(&u);
    let mut out = Array2::zeros((lq, k.nrows()));
    out.rows_mut().into_iter().for_each(|mut r| r.assign(&row));
    out
}

impl PositionScheme for TransformerXl {
    fn name(&self) -> String {
        match self.direction {
            XlDirection::Causal => "transformer-xl".into(),
            XlDirection::Bidirectional => "xlnet".into(),
        }
    }

    /// (b) + (c) + (d); the shared attention adds (a) $= q_i \cdot k_j$.
    fn score_term(
        &self,
        _head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        self.check(q, k)?;
        let bd = self.position_scores(q, k.nrows())?;
        Ok(Some(bd + content_bias(self.u.view(), k, q.nrows())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;
    use ndarray::s;
    use proptest::prelude::*;

    use crate::encodings::init::seeded_normal as random;

    #[test]
    fn rel_shift_of_a_small_matrix() {
        // x[i][j] = 10 i + j + 1, [3, 5]
        let x = Array2::from_shape_fn((3, 5), |(i, j)| (10 * i + j + 1) as f32);
        let y = rel_shift(x.view());
        // row i, valid j <= 2 + i: x[i][2 + j - i]
        assert_eq!(y.row(0).slice(s![..3]).to_vec(), vec![3.0, 4.0, 5.0]);
        assert_eq!(y.row(2).to_vec(), vec![21.0, 22.0, 23.0, 24.0, 25.0]);
        // junk: entry (0, 3) is the pad zero of row 1
        assert_eq!(y[[0, 3]], 0.0);
    }

    #[test]
    fn shapes_and_parameters_are_validated() {
        assert!(TransformerXl::new(7, 4, XlDirection::Causal, 0).is_err());
        assert!(TransformerXl::new(8, 0, XlDirection::Causal, 0).is_err());
        assert!(TransformerXl::from_parts(
            Array2::zeros((8, 4)),
            Array1::zeros(3),
            Array1::zeros(4),
            XlDirection::Causal
        )
        .is_err());
        let xl = TransformerXl::new(8, 4, XlDirection::Causal, 0).unwrap();
        assert!(xl.position_scores(random(3, 5, 0).view(), 3).is_err());
        assert!(xl.position_scores(random(4, 4, 0).view(), 3).is_err());
        assert!(xlnet_rel_shift(random(2, 5, 0).view(), 4).is_err());
        let x = random(2, 4, 1);
        let e = AbsoluteExpansion::new(
            x.view(),
            random(3, 4, 1).view(),
            random(4, 2, 0).view(),
            random(4, 2, 0).view(),
        );
        assert!(e.is_err());
    }

    #[test]
    fn four_absolute_terms_sum_to_the_full_score() {
        let (x, p) = (random(5, 6, 1), random(5, 6, 2));
        let (wq, wk) = (random(6, 3, 3), random(6, 3, 4));
        let e = AbsoluteExpansion::new(x.view(), p.view(), wq.view(), wk.view()).unwrap();
        let full = (&x + &p).dot(&wq).dot(&(&x + &p).dot(&wk).t());
        let diff = (&e.total() - &full)
            .mapv(f32::abs)
            .fold(0.0f32, |m, &d| m.max(d));
        assert!(diff < 1e-4, "{diff}");
    }

    #[test]
    fn attention_score_is_the_four_term_formula() {
        let xl = TransformerXl::new(8, 4, XlDirection::Causal, 3).unwrap();
        let (q, k) = (random(4, 4, 1), random(4, 4, 2));
        let out = attention(q.view(), k.view(), k.view(), &xl, 0, true).unwrap();
        let [a, b, c, d] = xl.terms_direct(q.view(), k.view()).unwrap();
        for i in 0..4 {
            for j in 0..=i {
                let expected = (a[[i, j]] + b[[i, j]] + c[[i, j]] + d[[i, j]]) / 2.0;
                assert!((out.scores[[i, j]] - expected).abs() < 1e-4);
            }
        }
    }

    proptest! {
        #[test]
        fn shift_equals_direct_on_the_valid_triangle(lq in 1usize..7, mem in 0usize..5, seed in 0u64..1000, bidirectional in any::<bool>()) {
            let lk = lq + mem;
            let direction = if bidirectional { XlDirection::Bidirectional } else { XlDirection::Causal };
            let xl = TransformerXl::new(8, 4, direction, seed).unwrap();
            let (q, k) = (random(lq, 4, seed + 1), random(lk, 4, seed + 2));
            let fast = xl.position_scores(q.view(), lk).unwrap();
            let [a, b, c, d] = xl.terms_direct(q.view(), k.view()).unwrap();
            let _ = (a, c);
            for i in 0..lq {
                for j in 0..lk {
                    if bidirectional || j <= mem + i {
                        let direct = b[[i, j]] + d[[i, j]];
                        prop_assert!((fast[[i, j]] - direct).abs() < 1e-4, "({},{}) {} vs {}", i, j, fast[[i, j]], direct);
                    }
                }
            }
        }

        #[test]
        fn four_terms_equal_the_factored_form(seed in 0u64..1000) {
            let xl = TransformerXl::new(6, 3, XlDirection::Bidirectional, seed).unwrap();
            let (q, k) = (random(3, 3, seed + 1), random(5, 3, seed + 2));
            let [a, b, c, d] = xl.terms_direct(q.view(), k.view()).unwrap();
            for i in 0..3 {
                let qi = query_position(i, 3, 5) as f64;
                let dist: Vec<f64> = (0..5).map(|j| qi - j as f64).collect();
                let r = xl.relative_embeddings(&dist).unwrap();
                for j in 0..5 {
                    // (q_i + u).k_j + (q_i + v).r_{i-j}
                    let factored = (&q.row(i) + &xl.u).dot(&k.row(j)) + (&q.row(i) + &xl.v).dot(&r.row(j));
                    let sum = a[[i, j]] + b[[i, j]] + c[[i, j]] + d[[i, j]];
                    prop_assert!((factored - sum).abs() < 1e-4);
                }
            }
        }
    }
}
