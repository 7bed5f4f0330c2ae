//! Inference-time context extension without new frequencies: Self-Extend (Jin et al. 2024,
//! "LLM Maybe LongLM: Self-Extend LLM Context Window Without Tuning",
//! <https://arxiv.org/abs/2401.01325>; reference code: datamllab/LongLM `self_extend_patch`)
//! and dynamic YaRN (Peng et al. 2023, section 3.3; jquesnelle/yarn
//! `LlamaDynamicYaRNScaledRotaryEmbedding`).
//!
//! **Self-Extend** keeps exact relative positions inside a neighbour window $w$ and, beyond it,
//! maps positions to groups of $G$ (floor division), shifted so that the grouped distances
//! continue where the window ends. For a query at $i$ and a key at $j \le i$:
//!
//! ```math
//! d_{ij} = \begin{cases} i - j & i - j < w \\
//! \lfloor i/G \rfloor - \lfloor j/G \rfloor + w - \lfloor w/G \rfloor & i - j \ge w \end{cases}
//! ```
//!
//! The implementation rotates q and k twice (the two-pass form it shares with ReRoPE), with the
//! plain positions $(i, j)$ and with the grouped ones $(\lfloor i/G\rfloor + w - \lfloor w/G\rfloor, \lfloor j/G\rfloor)$, and merges
//! the two score matrices by the window; by RoPE's relativity each merged score is the score at
//! distance $d_{ij}$. The largest distance over $\ell$ positions is
//! $\lfloor (\ell-1)/G\rfloor + w - \lfloor w/G\rfloor$ for $\ell - 1 \ge w$ ($\ell - 1$ below), so a
//! model trained at $L$ reaches
//! about $(L - w)\,G + w$ positions.
//!
//! **Dynamic YaRN** recomputes YaRN for the current length $\ell$ with $s = \max(1, \ell/L)$;
//! at or below $L$ it is plain RoPE.

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::rerope::windowed_two_pass;
use super::{Rope, RopeScaling};
use crate::encodings::PositionScheme;
use crate::error::{ensure, Result};

/// The Self-Extend distance $d_{ij}$ of a query at `i` and a key at `j <= i` (above: `i - j`,
/// saturating at 0 for a key after the query).
pub fn self_extend_distance(i: usize, j: usize, window: usize, group: usize) -> usize {
    let d = i.saturating_sub(j);
    if d < window {
        d
    } else {
        i / group - j / group + window - window / group
    }
}

/// Self-Extend over a RoPE scheme: neighbour window $w$, group size $G$.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelfExtend {
    /// The RoPE whose positions are regrouped.
    pub rope: Rope,
    /// $w$, the neighbour window (exact distances below it); at least 1.
    pub window: usize,
    /// $G$, the group size; at least 1 (1 is plain RoPE).
    pub group: usize,
}

impl SelfExtend {
    /// Self-Extend of `rope` with window `window` and group size `group`.
    ///
    /// # Errors
    /// A window or group of 0.
    pub fn new(rope: Rope, window: usize, group: usize) -> Result<Self> {
        ensure(window >= 1, "window", window, "at least 1")?;
        ensure(group >= 1, "group", group, "at least 1")?;
        Ok(Self {
            rope,
            window,
            group,
        })
    }

    /// The largest distance over `len` positions, $\lfloor (\ell-1)/G\rfloor + w -
    /// \lfloor w/G\rfloor$ (or $\ell - 1$ inside the window).
    pub fn max_distance(&self, len: usize) -> usize {
        let last = len.saturating_sub(1);
        if last < self.window {
            last
        } else {
            last / self.group + self.window - self.window / self.group
        }
    }

    /// Pass 2's rotation positions of the query at `i` and the key at `j`:
    /// $(\lfloor i/G \rfloor + w - \lfloor w/G \rfloor,\ \lfloor j/G \rfloor)$; their difference is
    /// $d_{ij}$ from the window on. A group of 0 reads as 1 ([`SelfExtend::new`] refuses it).
    pub fn pass_two_positions(&self, i: usize, j: usize) -> (f64, f64) {
        let (w, g) = (self.window, self.group.max(1));
        ((i / g + w - w / g) as f64, (j / g) as f64)
    }

    /// The merged scores $q_i^{(\cdot)} \cdot k_j^{(\cdot)}$ (unscaled), `[Lq, Lk]`: plain
    /// rotations inside the window, grouped ones outside.
    ///
    /// # Errors
    /// When the widths differ from the rotary dimension or `Lq > Lk`, or a window or group of
    /// 0 (the fields are public).
    pub fn scores(&self, q: ArrayView2<f32>, k: ArrayView2<f32>) -> Result<Array2<f32>> {
        let (w, g) = (self.window, self.group);
        // the fields are public: checked again before dividing by G
        ensure(w >= 1, "window", w, "at least 1")?;
        ensure(g >= 1, "group", g, "at least 1")?;
        // grouped rotations: floor(i/G) + w - floor(w/G) and floor(j/G)
        windowed_two_pass(
            &self.rope,
            q,
            k,
            w,
            |i| self.pass_two_positions(i, 0).0,
            |j| self.pass_two_positions(0, j).1,
        )
    }
}

impl PositionScheme for SelfExtend {
    fn name(&self) -> String {
        format!(
            "{} + self-extend (w {}, G {})",
            self.rope.name(),
            self.window,
            self.group
        )
    }

    /// q and k unchanged: the whole score is the position term below.
    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        Ok((q.to_owned(), k.to_owned()))
    }

    /// $t_{ij} = s^{SE}_{ij} - q_i \cdot k_j$: the merged Self-Extend score replaces the
    /// unrotated content score.
    fn score_term(
        &self,
        _head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        Ok(Some(self.scores(q, k)? - q.dot(&k.t())))
    }
}

impl RopeScaling {
    /// Dynamic YaRN at length `len`: YaRN with $s = \max(1, \ell/L)$ and the reference
    /// defaults (plain RoPE, attention factor 1, up to $L$).
    pub fn dynamic_yarn(len: usize, original_max: usize) -> Self {
        let s = (len as f64 / original_max.max(1) as f64).max(1.0);
        RopeScaling::yarn(s, original_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;
    use crate::encodings::init::seeded_normal as random;
    use crate::encodings::rope::{apply_rope, RopeConfig, RopeLayout};
    use proptest::prelude::*;

    fn rope(layout: RopeLayout) -> Rope {
        Rope::new(RopeConfig::new(16, 1e4).unwrap(), layout)
    }

    #[test]
    fn distances_are_exact_in_the_window_and_grouped_beyond() {
        // w = 4, G = 3: i = 20, j = 2 -> 6 - 0 + 4 - 1 = 9
        assert_eq!(self_extend_distance(20, 18, 4, 3), 2);
        assert_eq!(self_extend_distance(20, 2, 4, 3), 9);
        // G = 1 is plain RoPE
        for (i, j) in [(5, 0), (100, 3), (7, 7)] {
            assert_eq!(self_extend_distance(i, j, 4, 1), i - j);
        }
        let se = SelfExtend::new(rope(RopeLayout::Half), 512, 8).unwrap();
        // (L - w) G + w positions stay within a training length L = 2048
        assert!(se.max_distance((2048 - 512) * 8 + 512) < 2048);
        assert!(SelfExtend::new(rope(RopeLayout::Half), 0, 2).is_err());
    }

    #[test]
    fn dynamic_yarn_is_rope_up_to_the_original_length() {
        let plain = RopeConfig::new(64, 1e4).unwrap().frequencies(None).unwrap();
        for len in [1, 100, 2048] {
            let s = RopeScaling::dynamic_yarn(len, 2048);
            let f = RopeConfig::with_scaling(64, 1e4, s)
                .unwrap()
                .frequencies(None)
                .unwrap();
            assert_eq!(f.attention_factor, 1.0);
            for (a, b) in f.inv_freq.iter().zip(&plain.inv_freq) {
                assert!(
                    (a.to_bits() as i64 - b.to_bits() as i64).abs() <= 1,
                    "{a} {b}"
                );
            }
        }
        assert_eq!(
            RopeScaling::dynamic_yarn(8192, 2048),
            RopeScaling::yarn(4.0, 2048)
        );
    }

    proptest! {
        #[test]
        fn merged_scores_are_the_scores_at_the_self_extend_distance(
            seed in 0u64..300, w in 1usize..6, g in 1usize..5, half in any::<bool>()
        ) {
            // independent computation: rotate q by d_ij and k by 0
            let layout = if half { RopeLayout::Half } else { RopeLayout::Interleaved };
            let se = SelfExtend::new(rope(layout), w, g).unwrap();
            let (l, d) = (12, 16);
            let (q, k) = (random(l, d, seed), random(l, d, seed + 1));
            let merged = se.scores(q.view(), k.view()).unwrap();
            let freqs = se.rope.config.frequencies(Some(l)).unwrap();
            for i in 0..l {
                for j in 0..=i {
                    let dist = self_extend_distance(i, j, w, g) as f64;
                    let qi = apply_rope(q.slice(ndarray::s![i..i + 1, ..]), &[dist], &freqs, layout).unwrap();
                    let kj = apply_rope(k.slice(ndarray::s![j..j + 1, ..]), &[0.0], &freqs, layout).unwrap();
                    let expected = qi.row(0).dot(&kj.row(0));
                    prop_assert!((merged[[i, j]] - expected).abs() < 1e-4 * (1.0 + expected.abs()));
                }
            }
        }

        #[test]
        fn a_window_as_long_as_the_input_is_plain_rope(seed in 0u64..300, g in 1usize..5) {
            let base = rope(RopeLayout::Half);
            let se = SelfExtend::new(base, 10, g).unwrap();
            let (q, k) = (random(10, 16, seed), random(10, 16, seed + 2));
            let a = attention(q.view(), k.view(), k.view(), &se, 0, true).unwrap().probs;
            let b = attention(q.view(), k.view(), k.view(), &base, 0, true).unwrap().probs;
            prop_assert!((&a - &b).mapv(f32::abs).fold(0.0f32, |m, &x| m.max(x)) < 1e-5);
        }
    }
}
