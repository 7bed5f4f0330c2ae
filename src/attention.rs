//! Reference attention on ndarray, composing the content scores with any scheme's position
//! term.
//!
//! For one head with queries $q_i$, keys $k_j$ and values $v_j$ (rows of `[L, d]` arrays):
//!
//! ```math
//! s_{ij} = c \ \big(q'_i \cdot k'_j + t_{ij}\big) + b_{ij}, \qquad
//! \alpha_{ij} = \operatorname{softmax}_j(s_{ij}), \qquad
//! o_i = \sum_j \alpha_{ij} v_j + \sum_j \alpha_{ij} a^V_{ij}
//! ```
//!
//! where each scheme supplies only its difference through [`PositionScheme`]:
//! * $q', k'$: q and k after [`PositionScheme::transform_qk`] (absolute schemes add $p_i$,
//!   RoPE and xPos rotate);
//! * $c$: the scale, $1/\sqrt{d}$ unless [`PositionScheme::score_scale`] says otherwise
//!   (DeBERTa $1/\sqrt{3d}$, TUPE $1/\sqrt{2d}$);
//! * $t_{ij}$: a position term scaled like the content term, content-dependent or not
//!   ([`PositionScheme::score_term`]: Shaw, Transformer-XL, DeBERTa, TUPE, CoPE);
//! * $b_{ij}$: a content-free bias added after scaling ([`PositionScheme::score_bias`]: T5,
//!   ALiBi, Kerple, FIRE, TUPE's bucket bias);
//! * $a^V_{ij}$: relative value vectors ([`PositionScheme::value_term`]: Shaw).
//!
//! **Position convention.** Keys sit at positions $0..L_k$ and queries at the *last* $L_q$
//! positions, $L_k - L_q + i$ (as with a cache or Transformer-XL memory); with
//! $L_q = L_k$ query $i$ is at position $i$. Causal attention lets query $i$ see key $j$
//! iff $j \le L_k - L_q + i$.

use ndarray::{Array2, ArrayView2, Axis};

use crate::encodings::ensure_queries_fit;
pub use crate::encodings::{query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, Result};

/// Scores, weights and output of one head of [`attention`].
#[derive(Debug, Clone)]
pub struct AttentionOutput {
    /// Pre-softmax scores $s_{ij}$, `[Lq, Lk]`; masked entries are $-\infty$.
    pub scores: Array2<f32>,
    /// Attention weights $\alpha_{ij}$, `[Lq, Lk]`, rows sum to 1.
    pub probs: Array2<f32>,
    /// Output $o_i$, `[Lq, d_v]`.
    pub output: Array2<f32>,
}

/// One head of attention with the position scheme `scheme` (see the module docs for the
/// formula and the position convention).
///
/// # Errors
/// When q and k differ in width, k and v in length, `Lq > Lk`, a length is zero, or the scheme
/// rejects the shapes.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let q = Array2::<f32>::ones((3, 4));
/// let out = attention(q.view(), q.view(), q.view(), &Alibi::new(1)?, 0, true)?;
/// assert_eq!(out.probs[[0, 0]], 1.0); // the first query sees only itself
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn attention(
    q: ArrayView2<f32>,
    k: ArrayView2<f32>,
    v: ArrayView2<f32>,
    scheme: &dyn PositionScheme,
    head: usize,
    causal: bool,
) -> Result<AttentionOutput> {
    let (lq, d) = q.dim();
    let (lk, dk) = k.dim();
    ensure(
        lq > 0 && lk > 0,
        "sequence length",
        format!("Lq={lq}, Lk={lk}"),
        ">= 1",
    )?;
    ensure_shape("attention: k width", &[d], &[dk])?;
    ensure_shape("attention: v length", &[lk], &[v.nrows()])?;
    ensure_queries_fit(lq, lk)?;
    let (q, k) = scheme.transform_qk(q, k)?;
    // c (q'_i . k'_j + t_ij), [Lq, Lk]
    let mut scores = q.dot(&k.t());
    if let Some(term) = scheme.score_term(head, q.view(), k.view())? {
        ensure_shape("attention: score term", &[lq, lk], term.shape())?;
        scores += &term;
    }
    scores *= scheme.score_scale(d);
    // + b_ij
    if let Some(bias) = scheme.score_bias(head, lq, lk)? {
        ensure_shape("attention: score bias", &[lq, lk], bias.shape())?;
        scores += &bias;
    }
    if causal {
        for ((i, j), s) in scores.indexed_iter_mut() {
            if j > query_position(i, lq, lk) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    let probs = softmax_rows(&scores);
    let mut output = probs.dot(&v);
    if let Some(term) = scheme.value_term(head, probs.view())? {
        ensure_shape("attention: value term", output.shape(), term.shape())?;
        output += &term;
    }
    Ok(AttentionOutput {
        scores,
        probs,
        output,
    })
}

/// Row-wise softmax, stable against large scores; a row of all $-\infty$ gives zeros.
pub fn softmax_rows(scores: &Array2<f32>) -> Array2<f32> {
    let mut probs = scores.clone();
    for mut row in probs.axis_iter_mut(Axis(0)) {
        let max = row.fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        if max == f32::NEG_INFINITY {
            row.fill(0.0);
            continue;
        }
        row.mapv_inplace(|x| (x - max).exp());
        let sum = row.sum();
        row /= sum;
    }
    probs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::nope::NoPe;
    use ndarray::array;

    #[test]
    fn nope_attention_is_plain_softmax_attention() {
        let q = array![[1.0f32, 0.0], [0.0, 1.0]];
        let k = array![[1.0f32, 0.0], [0.0, 2.0]];
        let v = array![[1.0f32, 2.0], [3.0, 4.0]];
        let out = attention(q.view(), k.view(), v.view(), &NoPe, 0, false).unwrap();
        let c = 1.0 / 2f32.sqrt();
        // row 0: scores (c, 0); row 1: scores (0, 2c)
        let p01 = 1.0 / (1.0 + c.exp());
        assert!((out.probs[[0, 1]] - p01).abs() < 1e-6);
        assert!((out.scores[[1, 1]] - 2.0 * c).abs() < 1e-6);
        let o = 1.0 - p01;
        assert!((out.output[[0, 0]] - (o * 1.0 + p01 * 3.0)).abs() < 1e-6);
    }

    #[test]
    fn causal_mask_hides_future_keys_with_queries_aligned_to_the_end() {
        let q = Array2::<f32>::ones((2, 3));
        let k = Array2::<f32>::ones((4, 3));
        let out = attention(q.view(), k.view(), k.view(), &NoPe, 0, true).unwrap();
        // query 0 sits at position 2: sees keys 0..=2
        assert_eq!(
            out.probs.row(0).to_vec(),
            vec![1.0 / 3.0; 3]
                .into_iter()
                .chain([0.0])
                .collect::<Vec<_>>()
        );
        assert!((out.probs.row(1).sum() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let a = Array2::<f32>::ones((2, 3));
        let b = Array2::<f32>::ones((2, 4));
        assert!(attention(a.view(), b.view(), b.view(), &NoPe, 0, false).is_err());
        let long = Array2::<f32>::ones((3, 3));
        assert!(attention(long.view(), a.view(), a.view(), &NoPe, 0, false).is_err());
        let empty = Array2::<f32>::ones((0, 3));
        assert!(attention(empty.view(), a.view(), a.view(), &NoPe, 0, false).is_err());
    }

    #[test]
    fn softmax_of_masked_row_is_zero() {
        let s = array![[f32::NEG_INFINITY, f32::NEG_INFINITY], [0.0, 0.0]];
        let p = softmax_rows(&s);
        assert_eq!(p.row(0).sum(), 0.0);
        assert_eq!(p.row(1).to_vec(), vec![0.5, 0.5]);
    }
}
