//! RoPE's side of notebook 10's claims:
//!
//! - [`rope_unseen_pairs`]: claim 2 (c), the pairs whose angle at a distance longer than
//!   training's reaches a cosine no trained distance produced;
//! - [`rope_edits`]: claim 5, what cutting, concatenating and sorting a sequence do to RoPE's
//!   logits among the same tokens.

use std::ops::Range;

use ndarray::{s, Array2, ArrayView2, Axis};

use super::check::{max_err, randn};
use crate::attention::attention;
use crate::encodings::rope::{Rope, RopeConfig, RopeLayout};
use crate::error::{ensure, Result};

/// The pairs $i$ (indices into `inv_freq`, the $\theta_i$) for which some whole distance
/// $\delta$ in `train..=until` gives a cosine $\cos(\delta\theta_i)$ more than $10^{-3}$ below
/// the smallest cosine of the distances $0, \dots, L - 1$ ($L$ = `train`): the pairs that
/// show attention an angle at a longer distance that training never produced.
///
/// The distances below $L$ reach every cosine in $[-1, 1]$ once $(L - 1)\theta_i \ge \pi$, so
/// for `until` long enough these are the pairs with $\theta_i < \pi / (L - 1)$; with
/// $\theta_i = b^{-2i/d}$ that is $i > \frac d2 \ln((L - 1)/\pi) / \ln b$.
///
/// # Errors
/// A `train` of 0, or `until` below `train`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// // pair 0 turns by π/2: distance 2 < 8 already reaches cos π = -1; pair 1 turns slowly
/// assert_eq!(rope_unseen_pairs(&[std::f32::consts::FRAC_PI_2, 1e-3], 8, 100)?, vec![1]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn rope_unseen_pairs(inv_freq: &[f32], train: usize, until: usize) -> Result<Vec<usize>> {
    ensure(train > 0, "training length", train, "at least 1")?;
    ensure(
        until >= train,
        "longest distance",
        until,
        &format!("at least {train}"),
    )?;
    // the smallest cosine of a pair turning by theta over the whole distances of `range`
    let lowest = |theta: f32, range: Range<usize>| {
        range
            .map(|dl| (dl as f64 * theta as f64).cos())
            .fold(1.0, f64::min)
    };
    Ok((0..inv_freq.len())
        .filter(|&i| {
            let theta = inv_freq[i];
            lowest(theta, train..until + 1) < lowest(theta, 0..train) - 1e-3
        })
        .collect())
}

/// What cutting, concatenating and sorting change in RoPE's logits (claim 5).
#[derive(Debug, Clone, PartialEq)]
pub struct RopeEdits {
    /// The tokens cut out and scored on their own.
    pub cut_window: Range<usize>,
    /// Where the sequence splits into the two parts of a concatenation.
    pub split: usize,
    /// The largest change of a logit among the cut-out tokens.
    pub cut: f64,
    /// The largest change of a logit inside the second part, scored alone against after
    /// the first part.
    pub concatenated: f64,
    /// The largest change of a logit between the same two tokens after sorting.
    pub sorted: f64,
}

/// Claim 5 under RoPE: `len` tokens with seeded random queries and keys of width `d`
/// (bidirectional attention, $b = 10\,000$, half layout, positions $0, 1, \dots$) and their
/// logits $s_{ij} = f(q_i, i) \cdot f(k_j, j) / \sqrt d$, against the logits of the same
/// tokens after three edits:
///
/// - **cut**: tokens $5L/16 \dots 9L/16$ (40..72 of 128) on their own;
/// - **concatenate**: the second half on its own, against after the first half;
/// - **sort**: the tokens reordered by their first query coordinate.
///
/// Cutting and concatenating keep every distance among the tokens compared, so their logits
/// cannot change beyond rounding; sorting changes the distances themselves.
///
/// # Errors
/// `len` below 4, or `d` not even and positive.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let edits = rope_edits(8, 16)?;
/// assert_eq!((edits.cut_window.clone(), edits.split), (5..9, 8));
/// assert!(edits.cut < 1e-4 && edits.concatenated < 1e-4);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn rope_edits(d: usize, len: usize) -> Result<RopeEdits> {
    ensure(len >= 4, "length", len, "at least 4")?;
    let rope = Rope::new(RopeConfig::new(d, 10_000.0)?, RopeLayout::Half);
    let logits = |q: ArrayView2<f32>, k: ArrayView2<f32>| -> Result<Array2<f32>> {
        Ok(attention(q, k, k, &rope, 0, false)?.scores)
    };
    let (q, k) = (randn(len, d, 50), randn(len, d, 51));
    let full = logits(q.view(), k.view())?;
    let (window, split) = (len * 5 / 16..len * 9 / 16, len / 2);
    let w = window.clone();
    let cut = logits(q.slice(s![w.clone(), ..]), k.slice(s![w.clone(), ..]))?;
    let cut = max_err(&cut, &full.slice(s![w.clone(), w]))?;
    let second = logits(q.slice(s![split.., ..]), k.slice(s![split.., ..]))?;
    let concatenated = max_err(&second, &full.slice(s![split.., split..]))?;
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| q[[a, 0]].total_cmp(&q[[b, 0]]));
    let sorted = logits(
        q.select(Axis(0), &order).view(),
        k.select(Axis(0), &order).view(),
    )?;
    // the logit of the same pair of tokens before sorting
    let same_pairs = full.select(Axis(0), &order).select(Axis(1), &order);
    Ok(RopeEdits {
        cut_window: window,
        split,
        cut,
        concatenated,
        sorted: max_err(&sorted, &same_pairs)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count against the closed form $\frac d2 - \lfloor \frac d2 \ln((L - 1)/\pi) / \ln b
    /// \rfloor - 1$ for $d = 64$, $b = 10\,000$, $L = 512$ (14 pairs), the boundary pair on
    /// each side of $\theta = \pi/(L - 1)$, and bad inputs.
    #[test]
    fn unseen_pairs_follow_the_closed_form() {
        let freqs = RopeConfig::new(64, 10_000.0)
            .unwrap()
            .frequencies(None)
            .unwrap();
        let unseen = rope_unseen_pairs(&freqs.inv_freq, 512, 4096).unwrap();
        let slow = (32.0 * (511f64 / std::f64::consts::PI).ln() / 10_000f64.ln()).floor();
        assert_eq!(unseen.len(), 32 - slow as usize - 1);
        assert_eq!(unseen, (slow as usize + 1..32).collect::<Vec<_>>());
        let edge = std::f64::consts::PI / 511.0;
        let pairs = [(edge * 1.01) as f32, (edge * 0.9) as f32];
        assert_eq!(rope_unseen_pairs(&pairs, 512, 4096).unwrap(), vec![1]);
        assert!(rope_unseen_pairs(&pairs, 0, 4096).is_err());
        assert!(rope_unseen_pairs(&pairs, 512, 511).is_err());
    }

    /// Cutting and concatenating keep the logits to rounding; sorting moves them by more than
    /// 1 (the notebook's 128 tokens, d = 32); a length or width RoPE cannot take is an error.
    #[test]
    fn edits_keep_distances_or_not() {
        let edits = rope_edits(32, 128).unwrap();
        assert_eq!((edits.cut_window.clone(), edits.split), (40..72, 64));
        assert!(edits.cut < 1e-4 && edits.concatenated < 1e-4, "{edits:?}");
        assert!(edits.sorted > 1.0, "{edits:?}");
        assert!(rope_edits(32, 3).is_err());
        assert!(rope_edits(7, 16).is_err());
    }
}
