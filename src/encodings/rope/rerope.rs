//! # ReRoPE and Leaky ReRoPE — the relative position rectified at a window
//!
//! Su 2023, "Transformer升级之路：12、无限外推的ReRoPE？" (<https://kexue.fm/archives/9708>);
//! reference code: bojone/rerope (`rerope_patch.py`, `leaky_rerope_patch.py`).
//!
//! RoPE makes the score of the query at $i$ and the key at $j$ a function of $i - j$. On an input
//! longer than the training length $L$ some of these relative positions were never trained.
//! Position interpolation divides all of them by $s$: none is new, but neighbours are $1/s$
//! apart, which training never showed either. ReRoPE keeps the relative position exact inside a
//! window $w$ and clips it there, as a ReLU clips (hence the name); Leaky ReRoPE lets it grow on
//! beyond the window with slope $1/k$, interpolation outside and none inside:
//!
//! ```math
//! d_{ij} = \begin{cases} i - j & i - j < w \\ w + (i - j - w)/k & i - j \ge w \end{cases}
//! \qquad s_{ij} = (R_{d_{ij}} q_i) \cdot k_j = q_i^\top R_{-d_{ij}}\, k_j
//! ```
//!
//! ReRoPE is $k \to \infty$, $d_{ij} = \min(i - j, w)$; $k = 1$ is RoPE. Over $\ell$ positions
//! the largest position is $w + (\ell - 1 - w)/k$ for $\ell - 1 \ge w$ ($w$ for ReRoPE), and
//! $\ell - 1$ below.
//!
//! No rotation of q by a function of $i$ and of k by a function of $j$ gives $d_{ij}$ (it is not
//! a difference $a_i - b_j$ across the window's edge), so the scores take **two passes**: the
//! first rotates q at $i$ and k at $j$ (RoPE, $i - j$); the second rotates q at $w$ and k at 0
//! (ReRoPE), or q at $i/k + w(1 - 1/k)$ and k at $j/k$ (Leaky), which by RoPE's relativity gives
//! $w + (i - j - w)/k$; each pair takes the first where $i - j < w$ and the second elsewhere. At
//! $i - j = w$ both give $w$. Keys after their query (hidden by a causal mask) take the first
//! pass; the reference merges on $|i - j| < w$, which differs only on keys $w$ or more positions
//! after the query.
//!
//! [`ReRope::scores`] is the two-pass form, [`ReRope::scores_by_position_map`] rotates every pair
//! by its $d_{ij}$ ([`ReRope::position`]) one at a time. Derived step by step, checked and
//! plotted in `notebooks/13_rerope_and_log_n.ipynb`.

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{apply_rope, Rope};
use crate::encodings::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, Result};

/// ReRoPE (`leak: None`) or Leaky ReRoPE (`leak: Some(k)`) over a RoPE scheme.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let rope = Rope::new(RopeConfig::new(16, 1e4)?, RopeLayout::Half);
/// let (re, leaky) = (ReRope::new(rope, 4)?, ReRope::leaky(rope, 4, 2.0)?);
/// // i - j = 10: clipped at w = 4, or 4 + (10 - 4)/2 = 7
/// assert_eq!((re.position(12, 2), leaky.position(12, 2)), (4.0, 7.0));
/// let (q, k) = (Array2::<f32>::ones((6, 16)), Array2::<f32>::ones((6, 16)));
/// let two_pass = leaky.scores(q.view(), k.view())?;
/// let by_pair = leaky.scores_by_position_map(q.view(), k.view())?;
/// assert!((&two_pass - &by_pair).iter().all(|e| e.abs() < 1e-4));
/// # Ok::<(), posenc::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReRope {
    /// The RoPE whose relative positions are rectified (its frequencies and scaling are kept).
    pub rope: Rope,
    /// $w$, the window of exact relative positions; at least 1.
    pub window: usize,
    /// $k$ of Leaky ReRoPE, at least 1 (slope $1/k$ beyond the window; 1 is RoPE); `None` for
    /// ReRoPE (slope 0).
    pub leak: Option<f64>,
}

impl ReRope {
    /// ReRoPE of `rope` with window `window`: $d_{ij} = \min(i - j, w)$.
    ///
    /// # Errors
    /// A window of 0, an invalid RoPE configuration.
    pub fn new(rope: Rope, window: usize) -> Result<Self> {
        let r = Self {
            rope,
            window,
            leak: None,
        };
        r.validate()?;
        Ok(r)
    }

    /// Leaky ReRoPE of `rope` with window `window` and slope $1/k$ beyond it.
    ///
    /// # Errors
    /// A window of 0, $k$ not finite or below 1, an invalid RoPE configuration.
    pub fn leaky(rope: Rope, window: usize, k: f64) -> Result<Self> {
        let r = Self {
            rope,
            window,
            leak: Some(k),
        };
        r.validate()?;
        Ok(r)
    }

    /// Checks every parameter (the fields are public and may have been edited).
    ///
    /// # Errors
    /// As [`ReRope::leaky`].
    pub fn validate(&self) -> Result<()> {
        ensure(self.window >= 1, "window", self.window, "at least 1")?;
        if let Some(k) = self.leak {
            ensure(
                k.is_finite() && k >= 1.0,
                "k",
                k,
                "a finite number >= 1 (Leaky ReRoPE's slope beyond the window is 1/k)",
            )?;
        }
        self.rope.config.frequencies(None).map(|_| ())
    }

    /// $d_{ij}$, the relative position the query at `i` and the key at `j` are treated as:
    /// $i - j$ below the window (negative for a key after the query), $w + (i - j - w)/k$ from
    /// it on ($w$ for ReRoPE).
    pub fn position(&self, i: usize, j: usize) -> f64 {
        let d = i as f64 - j as f64;
        let w = self.window as f64;
        if d < w {
            d
        } else {
            // w + (d - w)/k, k -> infinity for ReRoPE
            self.leak.map_or(w, |k| w + (d - w) / k)
        }
    }

    /// The position map $d_{ij}$, `[Lq, Lk]`, queries at the last `lq` of `lk` positions.
    ///
    /// # Errors
    /// When `lq > lk`.
    pub fn position_map(&self, lq: usize, lk: usize) -> Result<Array2<f64>> {
        ensure_queries_fit(lq, lk)?;
        Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
            self.position(query_position(i, lq, lk), j)
        }))
    }

    /// The largest position over `len` positions, $d_{\ell - 1, 0}$: $\ell - 1$ inside the
    /// window, then $w + (\ell - 1 - w)/k$ ($w$ for ReRoPE).
    pub fn max_position(&self, len: usize) -> f64 {
        self.position(len.saturating_sub(1), 0)
    }

    /// Pass 2's rotation positions of the query at `i` and the key at `j`: $(w, 0)$ for
    /// ReRoPE, $(i/k + w(1 - 1/k),\ j/k)$ for Leaky ReRoPE; their difference is $d_{ij}$ from
    /// the window on.
    pub fn pass_two_positions(&self, i: usize, j: usize) -> (f64, f64) {
        let w = self.window as f64;
        match self.leak {
            None => (w, 0.0),
            Some(k) => (i as f64 / k + w * (1.0 - 1.0 / k), j as f64 / k),
        }
    }

    /// The scores $s_{ij} = q_i^\top R_{-d_{ij}} k_j$ (unscaled), `[Lq, Lk]`, in two passes
    /// merged by the window, as the reference computes them.
    ///
    /// # Errors
    /// When the widths differ from each other or from the rotary dimension, or `Lq > Lk`.
    pub fn scores(&self, q: ArrayView2<f32>, k: ArrayView2<f32>) -> Result<Array2<f32>> {
        self.validate()?;
        windowed_two_pass(
            &self.rope,
            q,
            k,
            self.window,
            |i| self.pass_two_positions(i, 0).0,
            |j| self.pass_two_positions(0, j).1,
        )
    }

    /// The same scores, every pair rotated by its own $d_{ij}$: $q_i$ at $d_{ij}$ against $k_j$
    /// at 0. The test oracle of [`ReRope::scores`]; $O(L_q L_k d)$ rotations.
    ///
    /// # Errors
    /// As [`ReRope::scores`].
    pub fn scores_by_position_map(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Array2<f32>> {
        self.validate()?;
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        ensure_shape("ReRoPE: k width", &[q.ncols()], &[k.ncols()])?;
        let freqs = self.rope.config.frequencies(Some(lk))?;
        let layout = self.rope.layout;
        // k_j rotated at 0 (times the attention factor), [Lk, d]
        let k0 = apply_rope(k, &vec![0.0; lk], &freqs, layout)?;
        let mut scores = Array2::zeros((lq, lk));
        for (i, mut row) in scores.outer_iter_mut().enumerate() {
            // q_i once per key, rotated at d_ij for key j, [Lk, d]
            let qi = Array2::from_shape_fn((lk, q.ncols()), |(_, c)| q[[i, c]]);
            let d: Vec<f64> = (0..lk)
                .map(|j| self.position(query_position(i, lq, lk), j))
                .collect();
            let rotated = apply_rope(qi.view(), &d, &freqs, layout)?;
            for (j, s) in row.iter_mut().enumerate() {
                *s = rotated.row(j).dot(&k0.row(j));
            }
        }
        Ok(scores)
    }
}

/// Two RoPE passes merged by a window $w$, `[Lq, Lk]` (unscaled scores): pass 1 rotates the
/// query at its position $i$ and the key at $j$, pass 2 at `q2(i)` and `k2(j)`; a pair takes pass
/// 1 where $i - j < w$ (keys after the query included) and pass 2 elsewhere. ReRoPE, Leaky
/// ReRoPE and Self-Extend differ only in `q2` and `k2`.
pub(super) fn windowed_two_pass(
    rope: &Rope,
    q: ArrayView2<f32>,
    k: ArrayView2<f32>,
    window: usize,
    q2: impl Fn(usize) -> f64,
    k2: impl Fn(usize) -> f64,
) -> Result<Array2<f32>> {
    let (lq, lk) = (q.nrows(), k.nrows());
    ensure_queries_fit(lq, lk)?;
    ensure_shape("two-pass RoPE: k width", &[q.ncols()], &[k.ncols()])?;
    let freqs = rope.config.frequencies(Some(lk))?;
    let layout = rope.layout;
    let q_pos: Vec<usize> = (0..lq).map(|i| query_position(i, lq, lk)).collect();
    // pass 1: q at i, k at j
    let as_f64: Vec<f64> = q_pos.iter().map(|&i| i as f64).collect();
    let q1 = apply_rope(q, &as_f64, &freqs, layout)?;
    let k1 = apply_rope(
        k,
        &(0..lk).map(|j| j as f64).collect::<Vec<_>>(),
        &freqs,
        layout,
    )?;
    // pass 2: q at q2(i), k at k2(j)
    let q2_pos: Vec<f64> = q_pos.iter().map(|&i| q2(i)).collect();
    let q2 = apply_rope(q, &q2_pos, &freqs, layout)?;
    let k2 = apply_rope(k, &(0..lk).map(k2).collect::<Vec<_>>(), &freqs, layout)?;
    let (first, second) = (q1.dot(&k1.t()), q2.dot(&k2.t()));
    Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
        // i - j >= w (so j < i, since w >= 1): pass 2
        if q_pos[i] >= j + window {
            second[[i, j]]
        } else {
            first[[i, j]]
        }
    }))
}

impl PositionScheme for ReRope {
    fn name(&self) -> String {
        match self.leak {
            None => format!("{} + rerope (w {})", self.rope.name(), self.window),
            Some(k) => format!(
                "{} + leaky rerope (w {}, k {k})",
                self.rope.name(),
                self.window
            ),
        }
    }

    /// q and k unchanged: the whole score is the position term below.
    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        Ok((q.to_owned(), k.to_owned()))
    }

    /// $t_{ij} = s_{ij} - q_i \cdot k_j$: the merged two-pass score replaces the unrotated
    /// content score.
    fn score_term(
        &self,
        _head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        Ok(Some(self.scores(q, k)? - q.dot(&k.t())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;
    use crate::encodings::init::seeded_normal as random;
    use crate::encodings::rope::{RopeConfig, RopeLayout, RopeScaling};
    use proptest::prelude::*;

    fn rope(layout: RopeLayout, scaling: RopeScaling) -> Rope {
        Rope::new(RopeConfig::with_scaling(16, 1e4, scaling).unwrap(), layout)
    }

    #[test]
    fn positions_are_exact_in_the_window_then_clipped_or_leaky() {
        let plain = rope(RopeLayout::Half, RopeScaling::None);
        let re = ReRope::new(plain, 4).unwrap();
        let leaky = ReRope::leaky(plain, 4, 2.0).unwrap();
        // i - j = 3 < w: exact; = 4: w; = 10: w (ReRoPE), 4 + 6/2 = 7 (leaky)
        assert_eq!((re.position(13, 10), leaky.position(13, 10)), (3.0, 3.0));
        assert_eq!((re.position(14, 10), leaky.position(14, 10)), (4.0, 4.0));
        assert_eq!((re.position(20, 10), leaky.position(20, 10)), (4.0, 7.0));
        // a key after the query keeps i - j
        assert_eq!(re.position(3, 9), -6.0);
        assert_eq!(
            (re.max_position(1000), leaky.max_position(1000)),
            (4.0, 501.5)
        );
        assert_eq!(re.max_position(3), 2.0);
        // queries at the last Lq positions
        let map = leaky.position_map(2, 12).unwrap();
        assert_eq!((map[[0, 0]], map[[1, 11]], map[[1, 0]]), (7.0, 0.0, 7.5));
        assert!(re.position_map(3, 2).is_err());
    }

    #[test]
    fn bad_parameters_are_errors() {
        let plain = rope(RopeLayout::Half, RopeScaling::None);
        assert!(ReRope::new(plain, 0).is_err());
        for k in [0.5, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = ReRope::leaky(plain, 4, k).unwrap_err().to_string();
            assert!(err.contains("1/k"), "{err}");
        }
        assert!(ReRope::leaky(plain, 4, 1.0).is_ok());
        let mut edited = ReRope::new(plain, 4).unwrap();
        edited.window = 0;
        let (q, k) = (random(3, 16, 1), random(3, 16, 2));
        assert!(edited.scores(q.view(), k.view()).is_err());
        assert!(edited.scores_by_position_map(q.view(), k.view()).is_err());
        let re = ReRope::new(plain, 2).unwrap();
        assert!(re
            .scores(random(3, 8, 1).view(), random(3, 8, 2).view())
            .is_err());
        assert!(re
            .scores(random(3, 16, 1).view(), random(3, 8, 2).view())
            .is_err());
        assert!(re
            .scores(random(4, 16, 1).view(), random(3, 16, 2).view())
            .is_err());
    }

    proptest! {
        #[test]
        fn two_passes_equal_the_position_map_pair_by_pair(
            seed in 0u64..500, w in 1usize..8, lq in 1usize..14, extra in 0usize..4,
            leak in prop_oneof![Just(None), Just(Some(1.0)), (1.0f64..20.0).prop_map(Some)],
            half in any::<bool>(), yarn in any::<bool>(),
        ) {
            // every (i, j) of up to 17 keys, the boundary i - j = w among them whenever L > w
            let layout = if half { RopeLayout::Half } else { RopeLayout::Interleaved };
            let scaling = if yarn { RopeScaling::yarn(4.0, 8) } else { RopeScaling::None };
            let r = ReRope { rope: rope(layout, scaling), window: w, leak };
            let lk = lq + extra;
            let (q, k) = (random(lq, 16, seed), random(lk, 16, seed + 1));
            let two = r.scores(q.view(), k.view()).unwrap();
            let map = r.scores_by_position_map(q.view(), k.view()).unwrap();
            for ((i, j), &s) in two.indexed_iter() {
                let m = map[[i, j]];
                prop_assert!((s - m).abs() < 1e-4 * (1.0 + m.abs()), "({i}, {j}): {s} vs {m}");
            }
        }

        #[test]
        fn attention_uses_the_merged_scores(seed in 0u64..200, w in 1usize..6) {
            // the reference attention's scores are the two-pass scores over sqrt(d)
            let r = ReRope::leaky(rope(RopeLayout::Half, RopeScaling::None), w, 3.0).unwrap();
            let (q, k) = (random(9, 16, seed), random(9, 16, seed + 7));
            let out = attention(q.view(), k.view(), k.view(), &r, 0, false).unwrap();
            let expected = r.scores(q.view(), k.view()).unwrap() / 4.0;
            prop_assert!((&out.scores - &expected).mapv(f32::abs).fold(0.0f32, |a, &b| a.max(b)) < 1e-5);
        }
    }
}
