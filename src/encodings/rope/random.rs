//! Randomized positions (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
//! Generalization of Transformers", <https://arxiv.org/abs/2305.16843>; reference code:
//! google-deepmind/randomized_positional_encodings, `noisy_fixed_positional_encodings` and the
//! `NOISY_ROTARY` branch of its `transformer.py`).
//!
//! A model trained on positions $0..L$ meets positions it never saw as soon as a test sequence
//! is longer. Ruoss et al. train on positions drawn from a much larger range instead: for each
//! training sequence of length $L$, an ordered random sample of $L$ distinct integers from
//! $[0, N)$, with $N$ well above the longest test length. Every position up to $N$ is then
//! seen in training, and only the order of the positions carries meaning (the gaps between
//! them are random). The encoding itself is unchanged: here RoPE rotates by the sampled
//! positions,
//!
//! ```math
//! p_0 < p_1 < \dots < p_{L-1}, \quad \{p_i\} \sim \mathcal U\big(\tbinom{[0, N)}{L}\big),
//! \qquad q'_i = R_{p_i} q_i, \ k'_j = R_{p_j} k_j .
//! ```
//!
//! The reference code samples on every call of the model, at test time too (its range
//! evaluation passes a random key to the model, and the `NOISY_ROTARY` branch has no training
//! switch), one sample shared by the batch and by queries and keys; the paper's figure assigns
//! "a random (ordered) positional encoding vector ... to each training example". Their default
//! $N$ is 2048, about four times their longest test length (500).
//!
//! Sampled, measured and plotted in `notebooks/14_schemes_since_2023.ipynb`.

use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{apply_rope, RopeConfig, RopeLayout};
use crate::encodings::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, Result};
use ndarray::{Array2, ArrayView2};

/// Mixes the training seed into the generator of a step's positions (distinct from the data
/// order's generator of the same seed and step).
const STEP_SALT: u64 = 0x5EED_0F90_5171_0500;
/// The generator of an evaluation length's positions.
const EVAL_SALT: u64 = 0x0E7A_1905_1710_5000;
/// Largest $N$: positions stay exact in `f32` below $2^{24}$.
pub const MAX_RANDOM_POSITIONS: usize = 1 << 24;

/// An ordered sample of `len` distinct integers from $[0, N)$, `max` $= N$, uniform over the
/// $\binom{N}{L}$ subsets (Floyd's algorithm: for $j = N - L .. N$, draw $t \in [0, j]$ and
/// take $t$, or $j$ when $t$ was taken), sorted.
///
/// # Errors
/// `len > max`, or `max` above [`MAX_RANDOM_POSITIONS`].
///
/// # Examples
/// ```
/// use ndarray_rand::rand::{rngs::StdRng, SeedableRng};
/// use posenc::encodings::rope::sample_positions;
/// let p = sample_positions(5, 100, &mut StdRng::seed_from_u64(0))?;
/// assert_eq!(p.len(), 5);
/// assert!(p.windows(2).all(|w| w[0] < w[1]) && p[4] < 100);
/// // N = L: every position, in order
/// assert_eq!(sample_positions(4, 4, &mut StdRng::seed_from_u64(1))?, vec![0, 1, 2, 3]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn sample_positions(len: usize, max: usize, rng: &mut StdRng) -> Result<Vec<usize>> {
    ensure(
        max <= MAX_RANDOM_POSITIONS,
        "random positions N",
        max,
        &format!("at most {MAX_RANDOM_POSITIONS}"),
    )?;
    ensure(
        len <= max,
        "length",
        len,
        &format!("at most N = {max} (L distinct positions out of N)"),
    )?;
    let mut taken = std::collections::HashSet::with_capacity(len);
    let mut picked = Vec::with_capacity(len);
    for j in max - len..max {
        let t = rng.random_range(0..=j);
        let p = if taken.insert(t) { t } else { j };
        taken.insert(p);
        picked.push(p);
    }
    picked.sort_unstable();
    Ok(picked)
}

/// Which positions a model trained with randomized positions is evaluated at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RandomEval {
    /// An ordered sample of $L$ from $[0, N)$ as in training, one per evaluated length,
    /// drawn from a generator seeded by $L$ (the reference code samples at test time too).
    #[default]
    Sampled,
    /// $0..L$, the positions of plain RoPE.
    Contiguous,
}

impl RandomEval {
    /// `sampled` or `contiguous`.
    pub fn name(self) -> &'static str {
        match self {
            RandomEval::Sampled => "sampled",
            RandomEval::Contiguous => "contiguous",
        }
    }
}

/// Randomized positions in $[0, N)$: the draws of a training step and of an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RandomPositions {
    /// $N$.
    pub max: usize,
    /// The positions of an evaluation.
    pub eval: RandomEval,
}

impl RandomPositions {
    /// Positions from $[0, N)$, `max` $= N$.
    ///
    /// # Errors
    /// `max` 0 or above [`MAX_RANDOM_POSITIONS`].
    pub fn new(max: usize, eval: RandomEval) -> Result<Self> {
        ensure(
            (1..=MAX_RANDOM_POSITIONS).contains(&max),
            "random positions N",
            max,
            &format!("1 to {MAX_RANDOM_POSITIONS}"),
        )?;
        Ok(Self { max, eval })
    }

    /// The positions of the `batch` sequences of training step `step` of a run seeded by
    /// `seed`, one ordered sample of `len` per sequence, `[batch][len]`: a generator per step,
    /// so $(seed, step)$ fixes them and a resumed run draws the same.
    ///
    /// # Errors
    /// `len > N`.
    pub fn training(
        &self,
        batch: usize,
        len: usize,
        seed: u64,
        step: u64,
    ) -> Result<Vec<Vec<usize>>> {
        let mut rng =
            StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step ^ STEP_SALT);
        (0..batch)
            .map(|_| sample_positions(len, self.max, &mut rng))
            .collect()
    }

    /// The positions of an evaluation at length `len` ([`RandomEval`]).
    ///
    /// # Errors
    /// `len > N` when sampled.
    pub fn evaluation(&self, len: usize) -> Result<Vec<usize>> {
        match self.eval {
            RandomEval::Contiguous => Ok((0..len).collect()),
            RandomEval::Sampled => {
                let mut rng = StdRng::seed_from_u64(EVAL_SALT ^ len as u64);
                sample_positions(len, self.max, &mut rng)
            }
        }
    }
}

/// RoPE (half layout) at the evaluation positions of [`RandomPositions`], as an attention
/// scheme: keys at $p_0 .. p_{L_k - 1}$, queries at the last $L_q$ of them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RandomRope {
    /// Frequencies.
    pub config: RopeConfig,
    /// $N$ and the evaluation positions.
    pub positions: RandomPositions,
}

impl PositionScheme for RandomRope {
    fn name(&self) -> String {
        format!(
            "random_rope (N = {}, {})",
            self.positions.max,
            self.positions.eval.name()
        )
    }

    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        let freqs = self.config.frequencies(None)?;
        let k_pos: Vec<f64> = self
            .positions
            .evaluation(lk)?
            .into_iter()
            .map(|p| p as f64)
            .collect();
        let q_pos: Vec<f64> = (0..lq).map(|i| k_pos[query_position(i, lq, lk)]).collect();
        Ok((
            apply_rope(q, &q_pos, &freqs, RopeLayout::Half)?,
            apply_rope(k, &k_pos, &freqs, RopeLayout::Half)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_ordered_distinct_and_in_range() {
        let mut rng = StdRng::seed_from_u64(3);
        for (len, max) in [(1, 1), (10, 10), (128, 32_768), (500, 501), (0, 7)] {
            let p = sample_positions(len, max, &mut rng).unwrap();
            assert_eq!(p.len(), len);
            assert!(p.windows(2).all(|w| w[0] < w[1]), "{len} of {max}");
            assert!(p.iter().all(|&x| x < max));
        }
        assert!(sample_positions(5, 4, &mut rng).is_err());
        assert!(sample_positions(1, MAX_RANDOM_POSITIONS + 1, &mut rng).is_err());
        assert!(RandomPositions::new(0, RandomEval::Sampled).is_err());
    }

    /// Every position is equally likely: 20,000 draws of 3 out of 12 hit each position
    /// $20000 \cdot 3/12 = 5000$ times, within five standard deviations; and each of the
    /// $\binom{4}{2} = 6$ pairs out of 4 about a sixth of the time.
    #[test]
    fn samples_are_uniform() {
        let mut rng = StdRng::seed_from_u64(11);
        let mut hits = [0usize; 12];
        for _ in 0..20_000 {
            for p in sample_positions(3, 12, &mut rng).unwrap() {
                hits[p] += 1;
            }
        }
        // binomial sd: sqrt(20000 * 0.25 * 0.75) = 61
        assert!(hits.iter().all(|&h| h.abs_diff(5000) < 5 * 61), "{hits:?}");
        let mut pairs = std::collections::HashMap::new();
        for _ in 0..12_000 {
            *pairs
                .entry(sample_positions(2, 4, &mut rng).unwrap())
                .or_insert(0usize) += 1;
        }
        assert_eq!(pairs.len(), 6);
        // sd sqrt(12000 / 6 * 5 / 6) = 41
        assert!(
            pairs.values().all(|&n| n.abs_diff(2000) < 5 * 41),
            "{pairs:?}"
        );
    }

    #[test]
    fn draws_are_fixed_by_seed_and_step() {
        let r = RandomPositions::new(1000, RandomEval::Sampled).unwrap();
        let a = r.training(3, 20, 7, 5).unwrap();
        assert_eq!(a, r.training(3, 20, 7, 5).unwrap());
        assert_ne!(a, r.training(3, 20, 7, 6).unwrap());
        assert_ne!(a, r.training(3, 20, 8, 5).unwrap());
        // the sequences of a step differ from one another
        assert_ne!(a[0], a[1]);
        assert_eq!(r.evaluation(50).unwrap(), r.evaluation(50).unwrap());
        assert!(r.evaluation(1001).is_err());
        let c = RandomPositions::new(10, RandomEval::Contiguous).unwrap();
        assert_eq!(c.evaluation(20).unwrap(), (0..20).collect::<Vec<_>>());
    }
}
