//! # CoPE — contextual position encoding
//!
//! Golovneva, Wang, Weston, Sukhbaatar 2024, "Contextual Position Encoding: Learning to Count
//! What's Important" (<https://arxiv.org/abs/2405.18719>, Appendix B); reference code:
//! x-transformers' `CoPE` (`x_transformers/x_transformers.py`, `soft_onehot` and
//! `talking_heads` off) as its `Attend` applies it.
//!
//! A token's position counts tokens; CoPE lets the query decide which tokens count. Each key
//! $t$ between the key $j$ and the query $i$ adds a gate $g_{it} = \sigma(s_{it})$, the
//! sigmoid of the query's own attention logit for it, so a query that looks for sentence
//! ends can measure distance in sentences. The count $p_{ij}$ is fractional: its embedding is
//! interpolated between the two integer positions around it, and it is clamped at the last
//! row of the table, `max_pos - 1`.
//!
//! ```math
//! s_{ij} = c\, q_i \cdot k_j, \qquad g_{ij} = \sigma(s_{ij})\ (j \le i), \quad 0\ (j > i),
//! \qquad p_{ij} = \min\Big(\sum_{t = j}^{L-1} g_{it},\ P - 1\Big),
//! ```
//! ```math
//! w_{ij} = p_{ij} - \lfloor p_{ij} \rfloor, \qquad
//! z_{ij} = (1 - w_{ij})\, q_i \cdot e_{\lfloor p_{ij} \rfloor}
//!   + w_{ij}\, q_i \cdot e_{\lceil p_{ij} \rceil}, \qquad s'_{ij} = s_{ij} + z_{ij},
//! ```
//!
//! with $c = 1/\sqrt{d_h}$, the embeddings $e_0, \dots, e_{P-1}$ shared by the heads of a
//! layer (at an integer $p$ both terms read the same row, and the floor's weight $1 - w$ is 1, as
//! in the paper's $1 - p + \lfloor p \rfloor$ and in x-transformers).
//! The gates see the logits after the causal mask (x-transformers fills future keys with
//! $-\text{max}$ before CoPE: their gates are 0), and $z$ is added without the scale $c$.
//! x-transformers starts the embeddings at zero ([`Cope::new`]).

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, Result};

/// x-transformers' default number of positions, `cope_max_pos`.
pub const DEFAULT_MAX_POS: usize = 16;
/// Most positions (a bound that keeps a typo from allocating gigabytes).
pub const MAX_POS: usize = 1 << 20;

/// $\sigma(z)$.
fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// CoPE's position embeddings for one layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cope {
    /// $e_p$, `[max_pos, d_h]`.
    pub pos_emb: Array2<f32>,
}

impl Cope {
    /// `max_pos` zero embeddings of width `head_dim` (x-transformers' initial values).
    ///
    /// # Errors
    /// When `max_pos` is 0 or above [`MAX_POS`], or `head_dim` is 0.
    pub fn new(max_pos: usize, head_dim: usize) -> Result<Self> {
        Self::from_table(Array2::zeros((max_pos, head_dim)))
    }

    /// Given (e.g. trained) embeddings `[max_pos, d_h]`.
    ///
    /// # Errors
    /// When there is no row or more than [`MAX_POS`], no column, or a value is not finite.
    pub fn from_table(pos_emb: Array2<f32>) -> Result<Self> {
        let (p, d) = pos_emb.dim();
        ensure(
            (1..=MAX_POS).contains(&p),
            "max_pos",
            p,
            &format!("1 to {MAX_POS}"),
        )?;
        ensure(d > 0, "head_dim", d, "at least 1")?;
        ensure(
            pos_emb.iter().all(|v| v.is_finite()),
            "pos_emb",
            "a value that is not finite",
            "finite numbers",
        )?;
        Ok(Self { pos_emb })
    }

    /// $P$.
    pub fn max_pos(&self) -> usize {
        self.pos_emb.nrows()
    }

    /// The contextual positions $p_{ij}$ `[Lq, Lk]` of scaled logits `s [Lq, Lk]`, queries at
    /// the last `Lq` of the `Lk` positions; causal: the gates of future keys are 0.
    ///
    /// # Errors
    /// When `Lq > Lk`.
    pub fn positions(&self, scores: ArrayView2<f32>) -> Result<Array2<f32>> {
        let (lq, lk) = scores.dim();
        ensure_queries_fit(lq, lk)?;
        let top = (self.max_pos() - 1) as f32;
        let mut p = Array2::zeros((lq, lk));
        for i in 0..lq {
            let last = query_position(i, lq, lk);
            // p_ij = sum_{t = j..=i} sigma(s_it), from the query back
            let mut count = 0.0f32;
            for j in (0..=last).rev() {
                count += sigmoid(scores[[i, j]]);
                p[[i, j]] = count.min(top);
            }
        }
        Ok(p)
    }

    /// $z_{ij}$ `[Lq, Lk]` for queries `q [Lq, d_h]` and their scaled logits `s [Lq, Lk]`.
    ///
    /// # Errors
    /// When `q` is not `d_h` wide or does not have a row per logit row, or `Lq > Lk`.
    pub fn term(&self, q: ArrayView2<f32>, scores: ArrayView2<f32>) -> Result<Array2<f32>> {
        ensure_shape("cope: query width", &[self.pos_emb.ncols()], &[q.ncols()])?;
        ensure_shape("cope: query rows", &[scores.nrows()], &[q.nrows()])?;
        let p = self.positions(scores)?;
        // q_i . e_p for every integer position, [Lq, P]
        let logits = q.dot(&self.pos_emb.t());
        Ok(Array2::from_shape_fn(p.dim(), |(i, j)| {
            let p = p[[i, j]];
            let (floor, ceil) = (p.floor(), p.ceil());
            let w = p - floor;
            logits[[i, ceil as usize]] * w + logits[[i, floor as usize]] * (1.0 - w)
        }))
    }
}

impl PositionScheme for Cope {
    fn name(&self) -> String {
        "cope".into()
    }

    /// $z_{ij} / c$: the reference attention scales the score term by $c$, CoPE adds $z$
    /// after the scale.
    fn score_term(
        &self,
        _head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        let c = self.score_scale(q.ncols());
        let scores = q.dot(&k.t()) * c;
        Ok(Some(self.term(q, scores.view())? / c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::init::seeded_normal;

    #[test]
    fn positions_count_the_gates_from_the_query_back() {
        let cope = Cope::new(4, 2).unwrap();
        // logits 0: every gate 1/2
        let p = cope.positions(Array2::zeros((3, 3)).view()).unwrap();
        assert_eq!(p.row(2).to_vec(), vec![1.5, 1.0, 0.5]);
        assert_eq!(p.row(0).to_vec(), vec![0.5, 0.0, 0.0]);
        // large logits: every gate 1, counts clamped at P - 1 = 3
        let p = cope
            .positions(Array2::from_elem((1, 6), 50.0).view())
            .unwrap();
        assert_eq!(p.row(0).to_vec(), vec![3.0, 3.0, 3.0, 3.0, 2.0, 1.0]);
    }

    #[test]
    fn term_interpolates_between_integer_positions() {
        let e = seeded_normal(5, 3, 2);
        let cope = Cope::from_table(e.clone()).unwrap();
        let q = seeded_normal(4, 3, 3);
        let s = seeded_normal(4, 4, 4) * 2.0;
        let z = cope.term(q.view(), s.view()).unwrap();
        let p = cope.positions(s.view()).unwrap();
        for i in 0..4 {
            for j in 0..=i {
                let (f, w) = (p[[i, j]].floor() as usize, p[[i, j]].fract());
                let c = (f + 1).min(4);
                let want = (1.0 - w) * q.row(i).dot(&e.row(f)) + w * q.row(i).dot(&e.row(c));
                assert!((z[[i, j]] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn invalid_input_is_an_error() {
        assert!(Cope::new(0, 4).is_err());
        assert!(Cope::new(MAX_POS + 1, 4).is_err());
        assert!(Cope::new(4, 0).is_err());
        assert!(Cope::from_table(Array2::from_elem((2, 2), f32::NAN)).is_err());
        let cope = Cope::new(4, 2).unwrap();
        assert!(cope
            .term(Array2::zeros((2, 3)).view(), Array2::zeros((2, 2)).view())
            .is_err());
        assert!(cope
            .term(Array2::zeros((3, 2)).view(), Array2::zeros((2, 2)).view())
            .is_err());
        assert!(cope.positions(Array2::zeros((3, 2)).view()).is_err());
    }
}
