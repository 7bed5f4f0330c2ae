//! What the results table may say, and with what uncertainty: each statement is a linear
//! contrast of losses on paired windows ([`compare`]): a model's change from one length to
//! another, $\Delta = x_{L_{max}} - x_{L_{min}}$, or that change against a reference scheme's,
//! $\Delta_m - \Delta_r$ (a difference of changes: "as flat as ALiBi" is a statement about it,
//! not about $\Delta_m$ alone). Each carries two uncertainties side by side:
//!
//! - **seeds**: the per-seed values $D_s$ have standard error
//!   $\mathrm{se}_\mathrm{seeds} = \mathrm{sd}_s(D_s)/\sqrt S$, and
//!   $t = \bar D / \mathrm{se}_\mathrm{seeds}$ is tested against Student's $t$ with $S - 1$
//!   degrees of freedom ([`super::student`]): how much the number depends on the training
//!   run, for this text;
//! - **text**: a bootstrap over the windows (the target segments of `matched` mode), the
//!   seeds' mean resampled [`BOOTSTRAP_RESAMPLES`] times with a fixed seed: how much it
//!   depends on the text sampled, for these runs ($\mathrm{se}_\mathrm{text}$ and a 95 %
//!   percentile interval).
//!
//! A verdict needs the $t$ test over seeds to reject at level [`ALPHA`] after Holm's
//! correction across every test of one table ([`holm`]): with $m$ tests, the smallest
//! $p$-value is compared with $\alpha/m$, the next with $\alpha/(m-1)$, and so on until one
//! fails.

use serde::Serialize;

use super::paired::{align, weighted_mean, WindowKey};
use super::rows::{Mode, ModelKey, WindowRow};
use super::stats::mean_and_sd;
use super::student::{t_quantile, two_sided_p};
use crate::error::{ensure, invalid};
use crate::Result;

/// The family-wise error rate of a table's verdicts: 0.05.
pub const ALPHA: f64 = 0.05;

/// Resamples of the text bootstrap: 2000.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Seed of the text bootstrap's generator: 0 (every comparison draws the same resamples of
/// the same number of windows, so the table is the same on every run).
pub const BOOTSTRAP_SEED: u64 = 0;

/// SplitMix64 (Steele, Lea and Flood 2014): a small generator fixed here so that the
/// bootstrap, and with it the README's table, never changes with a dependency's version.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform on `0..n` (multiply-shift; bias below $n / 2^{64}$).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// One side of a contrast for the bootstrap: its coefficient, and per window its bytes and
/// its loss averaged over the seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapTerm {
    /// Coefficient $c_k$ (+1 or −1 for a difference).
    pub coefficient: f64,
    /// Bytes of each window, $k_{w}$.
    pub bytes: Vec<f64>,
    /// Loss of each window averaged over the seeds, $\bar x_{w}$, nats per byte.
    pub loss: Vec<f64>,
}

/// The contrast $\sum_k c_k \sum_{w} k_{k,w} \bar x_{k,w} / \sum_w k_{k,w}$ for the windows
/// `picked` (with repeats), each side a byte-weighted mean.
fn contrast_of(terms: &[BootstrapTerm], picked: impl Iterator<Item = usize> + Clone) -> f64 {
    terms
        .iter()
        .map(|t| {
            let (num, den) = picked.clone().fold((0.0, 0.0), |(n, d), w| {
                (n + t.bytes[w] * t.loss[w], d + t.bytes[w])
            });
            t.coefficient * num / den
        })
        .sum()
}

/// The text uncertainty of a contrast ([`bootstrap`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TextUncertainty {
    /// Standard deviation of the resampled contrasts ($n - 1$ denominator).
    pub se: f64,
    /// The 2.5 % and 97.5 % percentiles of the resampled contrasts (linear interpolation
    /// between order statistics).
    pub interval: (f64, f64),
    /// Resamples drawn.
    pub resamples: usize,
}

/// The bootstrap over windows of a contrast of byte-weighted means: `resamples` times, $n$
/// windows drawn with replacement from the $n$ of every term (the same draw for every term,
/// so paired windows stay paired) by a SplitMix64 generator seeded with `seed`, and the
/// contrast of [`BootstrapTerm`]s recomputed on them.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for no term, terms with different numbers of windows or
/// none, bytes that are not positive, losses that are not finite, or fewer than 2 resamples.
pub fn bootstrap(terms: &[BootstrapTerm], resamples: usize, seed: u64) -> Result<TextUncertainty> {
    ensure(!terms.is_empty(), "terms", "[]", "one or more")?;
    let n = terms[0].loss.len();
    for t in terms {
        ensure(
            t.loss.len() == n && t.bytes.len() == n && n > 0,
            "windows",
            format!(
                "{} losses and {} bytes against {n}",
                t.loss.len(),
                t.bytes.len()
            ),
            "the same windows, at least one, for every term",
        )?;
        ensure(
            t.bytes.iter().all(|&b| b > 0.0) && t.loss.iter().all(|x| x.is_finite()),
            "windows",
            "a window without bytes or with a loss that is not finite",
            "positive bytes and finite losses",
        )?;
    }
    ensure(resamples >= 2, "resamples", resamples, "at least 2")?;
    let mut rng = SplitMix64(seed);
    let mut picked = vec![0; n];
    let mut values: Vec<f64> = (0..resamples)
        .map(|_| {
            picked.iter_mut().for_each(|w| *w = rng.below(n));
            contrast_of(terms, picked.iter().copied())
        })
        .collect();
    let (_, se) = mean_and_sd(&values);
    values.sort_by(f64::total_cmp);
    Ok(TextUncertainty {
        se,
        interval: (percentile(&values, 0.025), percentile(&values, 0.975)),
        resamples,
    })
}

/// The `q` quantile of ascending `values` (at least one), interpolated linearly between the
/// order statistics at $(n - 1) q$ (Hyndman and Fan's type 7, R's default).
fn percentile(values: &[f64], q: f64) -> f64 {
    let h = (values.len() - 1) as f64 * q;
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    let hi = (lo + 1).min(values.len() - 1);
    values[lo] + frac * (values[hi] - values[lo])
}

/// A contrast of losses on paired windows with both uncertainties ([`compare`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The contrast averaged over the seeds, $\bar D = \frac1S \sum_s D_s$, nats per byte.
    pub mean: f64,
    /// $(s, D_s)$ for each seed, ascending: $D_s = \sum_k c_k m_{k,s}$, with $m_{k,s}$ the
    /// byte-weighted mean loss of side $k$'s windows for seed $s$.
    pub per_seed: Vec<(u64, f64)>,
    /// $\mathrm{sd}_s(D_s)/\sqrt S$ (0 with one seed).
    pub se_seeds: f64,
    /// Degrees of freedom of the $t$ test, $S - 1$.
    pub df: usize,
    /// $t = \bar D / \mathrm{se}_\mathrm{seeds}$ (0 for $\bar D = 0$, $\pm\infty$ for
    /// $\mathrm{se}_\mathrm{seeds} = 0 \ne \bar D$).
    pub t: f64,
    /// The two-sided $p$-value of $t$ with $S - 1$ degrees of freedom, before any
    /// correction; `None` with one seed (nothing to test with).
    pub p: Option<f64>,
    /// The bootstrap over windows.
    pub text: TextUncertainty,
    /// Paired windows per seed.
    pub n_windows: usize,
    /// Seeds with windows of every side, $S$.
    pub n_seeds: usize,
}

impl Comparison {
    /// $\mathrm{sd}_s(D_s)/\sqrt S$, or `None` with one seed: one seed has no spread to
    /// estimate, and the 0 that [`Comparison::se_seeds`] holds then is not an uncertainty.
    pub fn seed_se(&self) -> Option<f64> {
        (self.n_seeds > 1).then_some(self.se_seeds)
    }
}

/// The contrast $\sum_k c_k x_k$ of the `terms` $(c_k, \text{key}_k)$ on windows paired by
/// (seed, start), with its $t$ test over seeds and its text bootstrap
/// ([`BOOTSTRAP_RESAMPLES`] resamples, seed [`BOOTSTRAP_SEED`]); see the module
/// documentation.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for no term, a coefficient that is not finite, and for
/// windows that do not pair (as [`super::paired::paired_difference`]: another mode, lengths that
/// do not pair in the mode, a window without its partner, seeds with other windows, bytes
/// that differ between paired windows of one length or between seeds).
pub fn compare(windows: &[WindowRow], terms: &[(f64, &WindowKey)]) -> Result<Comparison> {
    ensure(
        terms.iter().all(|(c, _)| c.is_finite()),
        "coefficients",
        format!("{:?}", terms.iter().map(|t| t.0).collect::<Vec<_>>()),
        "finite numbers",
    )?;
    let keys: Vec<&WindowKey> = terms.iter().map(|t| t.1).collect();
    let aligned = align(windows, &keys)?;
    let (s, n) = (aligned.seeds.len(), aligned.starts.len());
    let per_seed: Vec<(u64, f64)> = aligned
        .seeds
        .iter()
        .enumerate()
        .map(|(i, &seed)| {
            let d = terms
                .iter()
                .zip(&aligned.sides)
                .map(|((c, _), side)| c * weighted_mean(&side[i]).0)
                .sum();
            (seed, d)
        })
        .collect();
    let values: Vec<f64> = per_seed.iter().map(|p| p.1).collect();
    let (mean, sd) = mean_and_sd(&values);
    let se_seeds = sd / (s as f64).sqrt();
    let t = if mean == 0.0 { 0.0 } else { mean / se_seeds };
    let p = if s >= 2 {
        Some(two_sided_p(t, s - 1)?)
    } else {
        None
    };
    let boot: Vec<BootstrapTerm> = terms
        .iter()
        .zip(&aligned.sides)
        .map(|((c, _), side)| BootstrapTerm {
            coefficient: *c,
            bytes: side[0].iter().map(|w| w.bytes as f64).collect(),
            loss: (0..n)
                .map(|w| side.iter().map(|seed| seed[w].nats_per_byte).sum::<f64>() / s as f64)
                .collect(),
        })
        .collect();
    Ok(Comparison {
        mean,
        per_seed,
        se_seeds,
        df: s.saturating_sub(1),
        t,
        p,
        text: bootstrap(&boot, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)?,
        n_windows: n,
        n_seeds: s,
    })
}

/// Holm's step-down adjustment: with the $m$ given $p$-values sorted,
/// $p_{(1)} \le \dots \le p_{(m)}$, the adjusted
/// $\tilde p_{(i)} = \max_{j \le i} \min\{1, (m - j + 1)\, p_{(j)}\}$, returned in the input's
/// order; rejecting where $\tilde p < \alpha$ keeps the chance of any false verdict among the
/// $m$ at most $\alpha$. `None` (a test that could not be made) stays `None` and does not
/// count in $m$.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a $p$-value outside $[0, 1]$ (NaN included).
///
/// # Examples
/// ```
/// // sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> max so far
/// let p = posenc::results::holm(&[Some(0.01), Some(0.04), Some(0.03), Some(0.005)])?;
/// let rounded: Vec<String> = p.iter().map(|p| format!("{:.2}", p.unwrap())).collect();
/// assert_eq!(rounded, ["0.03", "0.06", "0.06", "0.02"]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn holm(p: &[Option<f64>]) -> Result<Vec<Option<f64>>> {
    if let Some(bad) = p.iter().flatten().find(|p| !(0.0..=1.0).contains(*p)) {
        return Err(invalid("p-value", bad, "a probability from 0 to 1"));
    }
    let mut order: Vec<(usize, f64)> = p
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|p| (i, p)))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let m = order.len();
    let mut adjusted = vec![None; p.len()];
    let mut running = 0.0f64;
    for (j, (i, p)) in order.into_iter().enumerate() {
        running = running.max(((m - j) as f64 * p).min(1.0));
        adjusted[i] = Some(running);
    }
    Ok(adjusted)
}

/// The critical $|t|$ of each step of Holm's procedure for $m$ two-sided tests with `df`
/// degrees of freedom at level `alpha`: the test with the $i$-th smallest $p$-value
/// ($i = 1..m$) rejects when $|t| > t_{1 - \alpha / (2(m - i + 1)),\,\nu}$ and every test
/// before it did. The last is the uncorrected $t_{1-\alpha/2,\nu}$.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for `df` 0 or `alpha` outside $(0, 1)$.
///
/// # Examples
/// ```
/// // one test, 2 degrees of freedom: t_{0.975, 2} = 4.303
/// let t = posenc::results::holm_critical_t(1, 2, 0.05)?;
/// assert_eq!(format!("{:.3}", t[0]), "4.303");
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn holm_critical_t(m: usize, df: usize, alpha: f64) -> Result<Vec<f64>> {
    ensure(
        alpha > 0.0 && alpha < 1.0,
        "alpha",
        alpha,
        "a level strictly between 0 and 1",
    )?;
    (1..=m)
        .map(|i| t_quantile(1.0 - alpha / (2.0 * (m - i + 1) as f64), df))
        .collect()
}

/// The terms of a model's change from `shortest` to `longest` in `mode`,
/// $\Delta_m = x_{m, L_{max}} - x_{m, L_{min}}$, times `sign`.
pub(crate) fn change_terms(
    model: &ModelKey,
    mode: Mode,
    (shortest, longest): (usize, usize),
    sign: f64,
) -> [(f64, WindowKey); 2] {
    [
        (sign, WindowKey::of(model, mode, longest)),
        (-sign, WindowKey::of(model, mode, shortest)),
    ]
}

/// The difference of two models' changes from `shortest` to `longest` in `mode`,
/// $\Delta_a - \Delta_b$, on paired windows ([`compare`]).
///
/// # Errors
/// As [`compare`].
pub fn difference_of_changes(
    windows: &[WindowRow],
    mode: Mode,
    a: &ModelKey,
    b: &ModelKey,
    span: (usize, usize),
) -> Result<Comparison> {
    let terms = [
        change_terms(a, mode, span, 1.0),
        change_terms(b, mode, span, -1.0),
    ];
    let refs: Vec<(f64, &WindowKey)> = terms.iter().flatten().map(|(c, k)| (*c, k)).collect();
    compare(windows, &refs)
}

/// `comparisons` as one Holm family ([`holm`]), in their order.
///
/// # Errors
/// As [`holm`].
pub fn holm_family(comparisons: Vec<Comparison>) -> Result<Vec<Tested>> {
    let adjusted = holm(&comparisons.iter().map(|c| c.p).collect::<Vec<_>>())?;
    Ok(comparisons
        .into_iter()
        .zip(adjusted)
        .map(|(comparison, p_holm)| Tested { comparison, p_holm })
        .collect())
}

/// Which way a tested contrast goes ([`Tested::verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Above 0: rejected after the Holm correction, with $\bar D > 0$.
    Above,
    /// Below 0.
    Below,
    /// Not rejected: no difference from 0 detected (which is not a proof of none).
    NotDetected,
}

/// A [`Comparison`] with its Holm-adjusted $p$-value in the family of its table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tested {
    /// The contrast and its uncertainties.
    pub comparison: Comparison,
    /// Its $p$-value after [`holm`] over the table's tests; `None` with one seed.
    pub p_holm: Option<f64>,
}

impl Tested {
    /// [`Tested::verdict`] in words: `above` or `below` for a detected direction, `not
    /// detected`, or `untested` without a test (one seed).
    pub fn verdict_words<'a>(&self, above: &'a str, below: &'a str, untested: &'a str) -> &'a str {
        match self.verdict() {
            Some(Verdict::Above) => above,
            Some(Verdict::Below) => below,
            Some(Verdict::NotDetected) => "not detected",
            None => untested,
        }
    }

    /// The verdict at level [`ALPHA`]: `None` without a test (one seed).
    pub fn verdict(&self) -> Option<Verdict> {
        self.p_holm.map(|p| {
            if p >= ALPHA {
                Verdict::NotDetected
            } else if self.comparison.mean > 0.0 {
                Verdict::Above
            } else {
                Verdict::Below
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::paired::window;
    use crate::results::rows::{Mode, Scheme};

    fn close(x: f64, y: f64, tol: f64) -> bool {
        (x - y).abs() <= tol
    }

    #[test]
    fn splitmix64_gives_the_published_sequence() {
        // the reference sequence from state 0
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
        // below(n) stays below n
        assert!((0..1000).all(|_| rng.below(7) < 7));
    }

    #[test]
    fn percentiles_interpolate_between_order_statistics() {
        // (n - 1) q = 4 * 0.25 = 1 -> the second value; 4 * 0.1 = 0.4 -> 1 + 0.4 * (2 - 1)
        let v = [1.0, 2.0, 4.0, 8.0, 16.0];
        assert_eq!(percentile(&v, 0.25), 2.0);
        assert!(close(percentile(&v, 0.1), 1.4, 1e-12));
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 1.0), 16.0);
        assert_eq!(percentile(&[3.0], 0.975), 3.0);
    }

    fn term(coefficient: f64, loss: &[f64]) -> BootstrapTerm {
        BootstrapTerm {
            coefficient,
            bytes: vec![1.0; loss.len()],
            loss: loss.to_vec(),
        }
    }

    #[test]
    fn bootstrap_by_hand() {
        // Two windows at 0 and 1 (one side, equal bytes): a resample's mean is 0, 1/2 or 1
        // with probabilities 1/4, 1/2, 1/4, so its variance is 1/4 * 1/4 * 2 = 1/8 and the
        // bootstrap se tends to sqrt(1/8) = 0.3536.
        let u = bootstrap(&[term(1.0, &[0.0, 1.0])], 40_000, 7).unwrap();
        assert!(close(u.se, 0.125f64.sqrt(), 0.005), "{u:?}");
        assert_eq!(u.interval, (0.0, 1.0));
        assert_eq!(u.resamples, 40_000);
        // the same seed draws the same resamples; one window, or equal windows: no spread
        assert_eq!(
            bootstrap(&[term(1.0, &[0.0, 1.0])], 100, 3).unwrap(),
            bootstrap(&[term(1.0, &[0.0, 1.0])], 100, 3).unwrap()
        );
        assert_eq!(bootstrap(&[term(1.0, &[2.5])], 50, 0).unwrap().se, 0.0);
        assert_eq!(
            bootstrap(&[term(1.0, &[2.0, 2.0, 2.0])], 50, 0).unwrap().se,
            0.0
        );
        // a difference of paired windows that move together has no spread either:
        // a = b + 1 window by window, so a - b = 1 in every resample
        let u = bootstrap(
            &[term(1.0, &[2.0, 3.0, 7.0]), term(-1.0, &[1.0, 2.0, 6.0])],
            50,
            0,
        )
        .unwrap();
        assert!(
            close(u.se, 0.0, 1e-12) && close(u.interval.0, 1.0, 1e-12),
            "{u:?}"
        );
        // bytes weigh the windows: windows of 3 and 1 bytes at 0 and 4; every resample of
        // two windows is 0 (both first), 4 (both second) or 3 (one each) with probabilities
        // 1/4, 1/4, 1/2: mean 2.5, variance (6.25 + 2.25 + 2 * 0.25) / 4 = 2.25, se 1.5
        let weighted = BootstrapTerm {
            coefficient: 1.0,
            bytes: vec![3.0, 1.0],
            loss: vec![0.0, 4.0],
        };
        let u = bootstrap(&[weighted], 40_000, 1).unwrap();
        assert!(close(u.se, 1.5, 0.02), "{u:?}");
        // bad input
        assert!(bootstrap(&[], 10, 0).is_err());
        assert!(bootstrap(&[term(1.0, &[1.0]), term(1.0, &[1.0, 2.0])], 10, 0).is_err());
        assert!(bootstrap(&[term(1.0, &[f64::NAN])], 10, 0).is_err());
        assert!(bootstrap(&[term(1.0, &[1.0])], 1, 0).is_err());
    }

    #[test]
    fn holm_by_hand() {
        // m = 4 (the None does not count): sorted 0.005, 0.01, 0.03, 0.04 -> times 4, 3, 2, 1
        // = 0.02, 0.03, 0.06, 0.04 -> running maximum 0.02, 0.03, 0.06, 0.06
        let p = holm(&[Some(0.01), Some(0.04), None, Some(0.03), Some(0.005)]).unwrap();
        let expected = [Some(0.03), Some(0.06), None, Some(0.06), Some(0.02)];
        for (p, e) in p.iter().zip(expected) {
            assert_eq!(p.is_some(), e.is_some());
            if let (Some(p), Some(e)) = (p, e) {
                assert!(close(*p, e, 1e-15), "{p} vs {e}");
            }
        }
        // capped at 1; one test is unchanged; no test is no test
        assert_eq!(
            holm(&[Some(0.6), Some(0.7)]).unwrap(),
            [Some(1.0), Some(1.0)]
        );
        assert_eq!(holm(&[Some(0.2)]).unwrap(), [Some(0.2)]);
        assert!(holm(&[]).unwrap().is_empty());
        assert!(holm(&[Some(1.5)]).is_err());
        assert!(holm(&[Some(f64::NAN)]).is_err());
    }

    #[test]
    fn holm_critical_t_by_hand() {
        // nu = 2 has the closed form t_p = (2p - 1) / sqrt(2 p (1 - p)). With m = 3 at
        // alpha = 0.05 the steps are p = 1 - 0.05/6, 1 - 0.05/4, 1 - 0.05/2:
        //   0.98333 / sqrt(0.016528) = 7.649, 0.975 / sqrt(0.024688) = 6.205, 4.303
        let t = holm_critical_t(3, 2, 0.05).unwrap();
        let closed = |p: f64| (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
        for (t, p) in t.iter().zip([1.0 - 0.05 / 6.0, 1.0 - 0.05 / 4.0, 0.975]) {
            assert!(close(*t, closed(p), 1e-9), "{t}");
        }
        let rounded: Vec<String> = t.iter().map(|t| format!("{t:.3}")).collect();
        assert_eq!(rounded, ["7.649", "6.205", "4.303"]);
        // 4 degrees of freedom, one test and two: 2.776; t_{1 - 0.0125, 4} = 3.495
        let t = holm_critical_t(2, 4, 0.05).unwrap();
        assert_eq!(format!("{:.3} {:.3}", t[0], t[1]), "3.495 2.776");
        assert!(holm_critical_t(0, 4, 0.05).unwrap().is_empty());
        assert!(holm_critical_t(2, 0, 0.05).is_err());
        assert!(holm_critical_t(2, 4, 1.0).is_err());
    }

    /// Model `m` at two lengths and a reference `r`, three seeds, two windows (starts 0 and
    /// 512), equal bytes within a length.
    fn example() -> (Vec<WindowRow>, [WindowKey; 4]) {
        let key = |s, l| WindowKey::new(s, "base", Mode::Matched, l);
        let (m_lo, m_hi) = (key(Scheme::Rope, 128), key(Scheme::Rope, 512));
        let (r_lo, r_hi) = (key(Scheme::Alibi, 128), key(Scheme::Alibi, 512));
        let mut rows = Vec::new();
        // m rises by 1.0, 1.2, 1.4 over the seeds, r by 0.1 in every seed; both changes
        // 0.1 lower in the first window and 0.1 higher in the second
        for (seed, rise) in [(0, 1.0), (1, 1.2), (2, 1.4)] {
            for (start, noise) in [(0, -0.1), (512, 0.1)] {
                rows.push(window(&m_lo, seed, start, 512, 1.0));
                rows.push(window(&m_hi, seed, start, 512, 1.0 + rise + noise));
                rows.push(window(&r_lo, seed, start, 512, 2.0));
                rows.push(window(&r_hi, seed, start, 512, 2.1 + noise));
            }
        }
        (rows, [m_hi, m_lo, r_hi, r_lo])
    }

    #[test]
    fn a_change_and_a_difference_of_changes_by_hand() {
        let (rows, [m_hi, m_lo, r_hi, r_lo]) = example();
        // m's change per seed: D = 1.0, 1.2, 1.4 (the windows' noise averages out)
        // mean 1.2, sd = sqrt((0.04 + 0 + 0.04) / 2) = 0.2, se = 0.2 / sqrt 3 = 0.11547
        // t = 1.2 / 0.11547 = 10.392, 2 df: p = 1 - t / sqrt(2 + t^2) = 0.009132
        let c = compare(&rows, &[(1.0, &m_hi), (-1.0, &m_lo)]).unwrap();
        assert!(close(c.mean, 1.2, 1e-12), "{c:?}");
        assert_eq!(
            c.per_seed.iter().map(|p| p.0).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(close(c.se_seeds, 0.2 / 3f64.sqrt(), 1e-12));
        assert!(close(c.t, 1.2 * 3f64.sqrt() / 0.2, 1e-9));
        assert_eq!((c.df, c.n_seeds, c.n_windows), (2, 3, 2));
        let p = 1.0 - c.t / (2.0 + c.t * c.t).sqrt();
        assert!(close(c.p.unwrap(), p, 1e-12), "{:?} vs {p}", c.p);
        // the text: the two windows differ by 0.2 in every seed (1.1 and 1.3 averaged over
        // the seeds); a resample's change is 1.1, 1.2 or 1.3 with probabilities 1/4, 1/2, 1/4:
        // se -> sqrt(0.01 / 2) = 0.0707 (2000 resamples: within 0.005)
        assert!(close(c.text.se, 0.005f64.sqrt(), 0.005), "{:?}", c.text);
        assert!(close(c.text.interval.0, 1.1, 1e-12) && close(c.text.interval.1, 1.3, 1e-12));
        // against the reference's change (0.1 in every seed): 1.1 on average, the same
        // seed spread, and no text spread (the windows' noise is the same in both changes)
        let d = compare(
            &rows,
            &[(1.0, &m_hi), (-1.0, &m_lo), (-1.0, &r_hi), (1.0, &r_lo)],
        )
        .unwrap();
        assert!(close(d.mean, 1.1, 1e-12) && close(d.se_seeds, c.se_seeds, 1e-12));
        assert!(close(d.text.se, 0.0, 1e-12), "{:?}", d.text);
        // the reference's own change: exactly 0.1 everywhere, se 0, t infinite, p 0
        let r = compare(&rows, &[(1.0, &r_hi), (-1.0, &r_lo)]).unwrap();
        assert!(close(r.mean, 0.1, 1e-12) && r.se_seeds < 1e-12);
        // a model against itself: exactly 0, t 0, p 1
        let z = compare(&rows, &[(1.0, &m_hi), (-1.0, &m_hi)]).unwrap();
        assert_eq!((z.mean, z.t, z.p), (0.0, 0.0, Some(1.0)));
        // one seed: no test
        let one: Vec<WindowRow> = rows.iter().filter(|w| w.seed == 0).cloned().collect();
        let c = compare(&one, &[(1.0, &m_hi), (-1.0, &m_lo)]).unwrap();
        assert_eq!((c.p, c.df, c.se_seeds), (None, 0, 0.0));
        assert!(compare(&rows, &[(f64::NAN, &m_hi)]).is_err());
    }

    #[test]
    fn a_verdict_needs_the_holm_adjusted_p_below_alpha() {
        let (rows, [m_hi, m_lo, ..]) = example();
        let c = compare(&rows, &[(1.0, &m_hi), (-1.0, &m_lo)]).unwrap();
        let tested = |p_holm| Tested {
            comparison: c.clone(),
            p_holm,
        };
        assert_eq!(tested(Some(0.01)).verdict(), Some(Verdict::Above));
        assert_eq!(tested(Some(0.05)).verdict(), Some(Verdict::NotDetected));
        assert_eq!(tested(None).verdict(), None);
        let falls = compare(&rows, &[(-1.0, &m_hi), (1.0, &m_lo)]).unwrap();
        let tested = Tested {
            comparison: falls,
            p_holm: Some(0.001),
        };
        assert_eq!(tested.verdict(), Some(Verdict::Below));
    }
}
