//! Numbers with honest uncertainty from the sweep's results: the mean and spread over training
//! seeds of each row of `ppl_vs_length.csv` ([`seed_summaries`]), and the difference of two
//! models, or of one model at two lengths, computed on paired windows and seeds
//! ([`paired_difference`]) from the per-window losses of `windows/*.csv`
//! ([`super::files::read_windows_dir`]). The mean and standard deviation are written once,
//! [`mean_and_sd`] (the curves over seeds of [`super::curves`] use it too).
//!
//! "A extrapolates better than B" may be said where [`PairedDifference::exceeds`] holds: the
//! difference is larger than its standard error times the chosen $z$. Pairing matters: two
//! models scored on the same windows share the windows' difficulty, which cancels in the
//! per-window difference and would otherwise swamp it.
//!
//! Which windows pair: in `nonoverlap` mode every length scores windows at the same starts
//! (the first $L$ bytes of each window of the longest length), so windows pair by
//! (seed, start) across lengths and across models; in `sliding` mode they pair across models
//! at one length only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;

use super::rows::{Mode, ModelKey, ResultRow, Scheme, WindowRow};
use crate::error::{ensure, invalid};
use crate::Result;

/// One model (scheme and variant) at one length in one mode, summarised over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedSummary {
    /// Position scheme.
    pub scheme: Scheme,
    /// As in [`ResultRow::variant`].
    pub variant: String,
    /// Training length (the same for every seed).
    pub train_len: usize,
    /// `nonoverlap` or `sliding`.
    pub mode: Mode,
    /// Evaluated length.
    pub eval_len: usize,
    /// Mean over the $S$ seeds of [`ResultRow::nats_per_byte`]:
    /// $\bar x = \frac{1}{S}\sum_s x_s$.
    pub mean: f64,
    /// Sample standard deviation over the seeds,
    /// $\sqrt{\frac{1}{S-1}\sum_s (x_s - \bar x)^2}$; 0 with one seed (no spread to see, not
    /// an absence of it).
    pub sd: f64,
    /// The seeds, ascending.
    pub seeds: Vec<u64>,
    /// [`ResultRow::scaling_factor`], the same for every seed.
    pub scaling_factor: Option<f64>,
}

impl SeedSummary {
    /// The summary's model.
    pub fn key(&self) -> ModelKey {
        ModelKey::new(self.scheme, self.variant.clone())
    }
}

/// `scheme/variant mode eval_len` ([`ModelKey::id`]), how the errors name a model at a length.
fn describe(key: &ModelKey, mode: Mode, eval_len: usize) -> String {
    format!("{} {} {eval_len}", key.id(), mode.name())
}

/// The rows of each model (scheme, variant) at each length in each mode, summarised over
/// seeds, in the order in which the groups first appear in `rows`: the mean
/// $\bar x = \frac{1}{S}\sum_s x_s$ of `nats_per_byte` and its sample standard deviation
/// $\sqrt{\sum_s (x_s - \bar x)^2 / (S-1)}$ (0 with one seed), summed in ascending seed order.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for two rows of one group with the same seed (naming them), a
/// `scaling_factor` or `train_len` that differs between the seeds of a group, or a
/// `nats_per_byte` that is not finite.
pub fn seed_summaries(rows: &[ResultRow]) -> Result<Vec<SeedSummary>> {
    let mut index: HashMap<(Scheme, &str, &str, usize), usize> = HashMap::new();
    let mut groups: Vec<Vec<&ResultRow>> = Vec::new();
    for r in rows {
        let name = || describe(&r.key(), r.mode, r.eval_len);
        ensure(
            r.nats_per_byte.is_finite(),
            "nats_per_byte",
            format!("{} for {} seed {}", r.nats_per_byte, name(), r.seed),
            "a finite loss",
        )?;
        let key = (r.scheme, r.variant.as_str(), r.mode.name(), r.eval_len);
        let i = *index.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        let group = &mut groups[i];
        if let Some(first) = group.first() {
            if group.iter().any(|g| g.seed == r.seed) {
                return Err(invalid(
                    "rows",
                    format!("{} seed {} (twice)", name(), r.seed),
                    "one row per scheme, variant, mode, length and seed",
                ));
            }
            ensure(
                first.scaling_factor == r.scaling_factor,
                "scaling_factor",
                format!(
                    "{:?} for seed {} but {:?} for seed {} of {}",
                    first.scaling_factor,
                    first.seed,
                    r.scaling_factor,
                    r.seed,
                    name()
                ),
                "the same factor for every seed of a model at one length",
            )?;
            ensure(
                first.train_len == r.train_len,
                "train_len",
                format!(
                    "{} for seed {} but {} for seed {} of {}",
                    first.train_len,
                    first.seed,
                    r.train_len,
                    r.seed,
                    name()
                ),
                "the same training length for every seed of a model",
            )?;
        }
        group.push(r);
    }
    Ok(groups
        .into_iter()
        .map(|mut group| {
            group.sort_by_key(|r| r.seed);
            let values: Vec<f64> = group.iter().map(|r| r.nats_per_byte).collect();
            let (mean, sd) = mean_and_sd(&values);
            let first = group[0];
            SeedSummary {
                scheme: first.scheme,
                variant: first.variant.clone(),
                train_len: first.train_len,
                mode: first.mode,
                eval_len: first.eval_len,
                mean,
                sd,
                seeds: group.iter().map(|r| r.seed).collect(),
                scaling_factor: first.scaling_factor,
            }
        })
        .collect())
}

/// Mean $\bar x = \frac1n \sum_i x_i$ and sample standard deviation
/// $\sqrt{\sum_i (x_i - \bar x)^2 / (n-1)}$ (0 for fewer than two values; the mean of no
/// values is 0), summed in the order given.
///
/// # Examples
/// ```
/// let (mean, sd) = posenc::results::mean_and_sd(&[1.0, 2.0, 3.0]);
/// assert_eq!((mean, sd), (2.0, 1.0));
/// assert_eq!(posenc::results::mean_and_sd(&[1.5]), (1.5, 0.0));
/// ```
pub fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = values.iter().map(|x| (x - mean).powi(2)).sum();
    (mean, (ss / (n - 1) as f64).sqrt())
}

/// Which windows of `windows/*.csv` make one side of a [`paired_difference`]: one model
/// (scheme and variant) at one length in one mode, every seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowKey {
    /// Position scheme.
    pub scheme: Scheme,
    /// As in [`WindowRow::variant`] (`base` for a model as trained).
    pub variant: String,
    /// `nonoverlap` or `sliding`.
    pub mode: Mode,
    /// Evaluated length.
    pub eval_len: usize,
}

impl WindowKey {
    /// The key of `scheme`/`variant` at `eval_len` in `mode`.
    pub fn new(scheme: Scheme, variant: &str, mode: Mode, eval_len: usize) -> Self {
        WindowKey {
            scheme,
            variant: variant.into(),
            mode,
            eval_len,
        }
    }

    /// The key of `model` at `eval_len` in `mode`.
    pub fn of(model: &ModelKey, mode: Mode, eval_len: usize) -> Self {
        Self::new(model.scheme, &model.variant, mode, eval_len)
    }

    /// The key's model.
    pub fn model(&self) -> ModelKey {
        ModelKey::new(self.scheme, self.variant.clone())
    }

    /// Whether `w` is one of this key's windows (any seed).
    pub fn matches(&self, w: &WindowRow) -> bool {
        w.scheme == self.scheme
            && w.variant == self.variant
            && w.mode == self.mode
            && w.eval_len == self.eval_len
    }
}

impl fmt::Display for WindowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = describe(&self.model(), self.mode, self.eval_len);
        f.write_str(&name)
    }
}

/// The difference $a - b$ of the losses of two [`WindowKey`]s in nats per byte, with its
/// standard error from paired windows and seeds (see [`paired_difference`] for the formulas).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedDifference {
    /// Mean over the $S$ seeds of the per-seed differences: $\bar D = \frac{1}{S}\sum_s D_s$.
    pub mean: f64,
    /// $(s, D_s)$ for every seed with windows of both sides, ascending: $D_s = m^a_s - m^b_s$,
    /// the byte-weighted mean loss of `a`'s windows minus that of `b`'s.
    pub per_seed: Vec<(u64, f64)>,
    /// Standard error from the window-to-window spread of the paired differences, the
    /// windows' contributions averaged over seeds first:
    /// $\sqrt{\frac{n}{n-1}\sum_w \bar e_w^2}$ with $\bar e_w = \frac{1}{S}\sum_s e_{s,w}$
    /// (0 with one window). With one seed this is the familiar $\mathrm{sd}(d_w)/\sqrt{n}$ for
    /// windows of equal bytes.
    pub se_windows: f64,
    /// Standard error from the seed-to-seed spread: $\mathrm{sd}_s(D_s)/\sqrt{S}$, 0 with one
    /// seed.
    pub se_seeds: f64,
    /// $\sqrt{\mathrm{se}_\mathrm{windows}^2 + \mathrm{se}_\mathrm{seeds}^2}$: every seed is
    /// scored on the same windows, so the noise of having sampled those windows is shared by
    /// the seeds and does not show in their spread; the two parts are added.
    pub se: f64,
    /// Paired windows per seed (the same windows for every seed).
    pub n_windows: usize,
    /// Seeds with windows of both sides, $S$.
    pub n_seeds: usize,
}

impl PairedDifference {
    /// Whether the difference exceeds its uncertainty: $|\bar D| > z \cdot \mathrm{se}$
    /// (e.g. $z = 2$ for about 95 % two-sided). False for a difference of 0 with se 0.
    pub fn exceeds(&self, z: f64) -> bool {
        self.mean.abs() > z * self.se
    }
}

/// One side's windows by seed and start.
type BySeed<'a> = BTreeMap<u64, BTreeMap<usize, &'a WindowRow>>;

/// The windows of `key` by seed and start, checked: one window per (seed, start), bytes > 0,
/// a finite loss.
fn windows_of<'a>(windows: &'a [WindowRow], key: &WindowKey) -> Result<BySeed<'a>> {
    let mut by_seed: BySeed<'a> = BTreeMap::new();
    for w in windows.iter().filter(|w| key.matches(w)) {
        let name = || format!("{key} seed {} start {}", w.seed, w.start);
        ensure(
            w.bytes > 0,
            "bytes",
            format!("0 in {}", name()),
            "at least 1",
        )?;
        ensure(
            w.nats_per_byte.is_finite(),
            "nats_per_byte",
            format!("{} in {}", w.nats_per_byte, name()),
            "a finite loss",
        )?;
        if by_seed
            .entry(w.seed)
            .or_default()
            .insert(w.start, w)
            .is_some()
        {
            return Err(invalid(
                "windows",
                format!("{} (twice)", name()),
                "one window per model, mode, length, seed and start",
            ));
        }
    }
    ensure(
        !by_seed.is_empty(),
        "windows",
        format!("none of {key}"),
        "windows of both models compared",
    )?;
    Ok(by_seed)
}

/// The byte-weighted mean loss of windows given as `(bytes, nats_per_byte)`,
/// $m = \sum_w k_w x_w / \sum_w k_w$, and the weights $k_w / \sum_w k_w$.
fn weighted_mean(windows: &[&WindowRow]) -> (f64, Vec<f64>) {
    let total: f64 = windows.iter().map(|w| w.bytes as f64).sum();
    let weights: Vec<f64> = windows.iter().map(|w| w.bytes as f64 / total).collect();
    let mean = windows
        .iter()
        .zip(&weights)
        .map(|(w, u)| u * w.nats_per_byte)
        .sum();
    (mean, weights)
}

/// The difference $a - b$ of two models, or of one model at two lengths, on windows paired
/// by (seed, start), with its standard error.
///
/// For each seed $s$ present on both sides, with windows $w = 1..n$ scored $k_w$ bytes at a
/// loss of $x_w$ nats per byte (each window's `bytes` and `nats_per_byte` as given):
/// - the per-seed difference is of byte-weighted means (what the results' rows hold):
///   $D_s = m^a_s - m^b_s$, $m_s = \sum_w k_w x_w / \sum_w k_w$;
/// - each window's contribution to it is
///   $e_{s,w} = u^a_w (x^a_w - m^a_s) - u^b_w (x^b_w - m^b_s)$ with $u_w = k_w / \sum k$;
///   they sum to 0 over the windows, and with equal bytes on each side
///   $e_{s,w} = (d_w - D_s)/n$ for the per-window difference $d_w = x^a_w - x^b_w$;
/// - [`PairedDifference::mean`] $\bar D = \frac1S \sum_s D_s$;
/// - [`PairedDifference::se_windows`] $= \sqrt{\frac{n}{n-1}\sum_w \bar e_w^2}$,
///   $\bar e_w = \frac1S\sum_s e_{s,w}$: the seeds are scored on the same windows, so a
///   window's contribution is averaged over the seeds before the spread is taken (the window
///   noise of the seeds is correlated, and $\sqrt{\sum_s \mathrm{se}_s^2}/S$ would assume it
///   independent, understating it by up to $\sqrt S$). With one seed and equal bytes this is
///   $\mathrm{sd}(d_w)/\sqrt n$;
/// - [`PairedDifference::se_seeds`] $= \mathrm{sd}_s(D_s)/\sqrt S$ ($n - 1$ denominator, 0
///   with one seed);
/// - [`PairedDifference::se`] $= \sqrt{\mathrm{se}_\mathrm{windows}^2 +
///   \mathrm{se}_\mathrm{seeds}^2}$: window sampling noise is shared by the seeds and not
///   seen in their spread, so it is added to it.
///
/// Seeds with windows on one side only are left out. Swapping `a` and `b` negates every
/// difference exactly and leaves the standard errors unchanged; a model minus itself is
/// exactly 0 with standard error 0.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] when `a` and `b` differ in mode, or in length in another mode
/// than `nonoverlap`; when either has no windows, or no seed has windows of both; for a
/// window of either side without its partner (same seed and start) on the other, naming it;
/// for a seed whose paired windows start elsewhere than the first seed's; for paired windows
/// of the same length whose bytes differ; and for a window twice, of 0 bytes or with a loss
/// that is not finite.
pub fn paired_difference(
    windows: &[WindowRow],
    a: &WindowKey,
    b: &WindowKey,
) -> Result<PairedDifference> {
    ensure(
        a.mode == b.mode,
        "modes",
        format!("{a} against {b}"),
        "one mode for both sides (windows of two modes score different bytes)",
    )?;
    ensure(
        a.eval_len == b.eval_len || a.mode.pairs_across_lengths(),
        "lengths",
        format!("{a} against {b}"),
        "one length in sliding mode (its windows pair across lengths only in matched and nonoverlap mode)",
    )?;
    let (wa, wb) = (windows_of(windows, a)?, windows_of(windows, b)?);
    let seeds: Vec<u64> = wa.keys().filter(|s| wb.contains_key(s)).copied().collect();
    ensure(
        !seeds.is_empty(),
        "seeds",
        format!(
            "{:?} of {a} against {:?} of {b}",
            wa.keys().collect::<Vec<_>>(),
            wb.keys().collect::<Vec<_>>()
        ),
        "at least one seed with windows of both sides",
    )?;
    let mut starts: Option<BTreeSet<usize>> = None;
    let mut per_seed = Vec::with_capacity(seeds.len());
    // e_{s,w} summed over the seeds, by window
    let mut e_sum: Vec<f64> = Vec::new();
    for &seed in &seeds {
        let (sa, sb) = (&wa[&seed], &wb[&seed]);
        for (side, other, of, to) in [(sa, sb, a, b), (sb, sa, b, a)] {
            if let Some(start) = side.keys().find(|s| !other.contains_key(s)) {
                return Err(invalid(
                    "windows",
                    format!("{of} seed {seed} start {start}"),
                    format!("a partner window of {to} with the same seed and start"),
                ));
            }
        }
        let these: BTreeSet<usize> = sa.keys().copied().collect();
        match &starts {
            None => starts = Some(these),
            Some(first) => ensure(
                *first == these,
                "windows",
                format!(
                    "{} starts of {a} seed {seed} against {} of seed {}",
                    these.len(),
                    first.len(),
                    seeds[0]
                ),
                "the same windows for every seed",
            )?,
        }
        let xa: Vec<&WindowRow> = sa.values().copied().collect();
        let xb: Vec<&WindowRow> = sb.values().copied().collect();
        if a.eval_len == b.eval_len {
            if let Some((p, q)) = xa.iter().zip(&xb).find(|(p, q)| p.bytes != q.bytes) {
                return Err(invalid(
                    "bytes",
                    format!(
                        "{} in {a} against {} in {b} at seed {seed} start {}",
                        p.bytes, q.bytes, p.start
                    ),
                    "the same bytes scored in paired windows of one length",
                ));
            }
        }
        let (ma, ua) = weighted_mean(&xa);
        let (mb, ub) = weighted_mean(&xb);
        per_seed.push((seed, ma - mb));
        let e = xa
            .iter()
            .zip(&ua)
            .zip(xb.iter().zip(&ub))
            .map(|((p, u), (q, v))| u * (p.nats_per_byte - ma) - v * (q.nats_per_byte - mb));
        if e_sum.is_empty() {
            e_sum = e.collect();
        } else {
            e_sum.iter_mut().zip(e).for_each(|(acc, x)| *acc += x);
        }
    }
    let (s, n) = (seeds.len(), e_sum.len());
    let diffs: Vec<f64> = per_seed.iter().map(|p| p.1).collect();
    let (mean, sd) = mean_and_sd(&diffs);
    let se_windows = if n < 2 {
        0.0
    } else {
        let ss: f64 = e_sum.iter().map(|x| (x / s as f64).powi(2)).sum();
        (ss * n as f64 / (n - 1) as f64).sqrt()
    };
    let se_seeds = sd / (s as f64).sqrt();
    Ok(PairedDifference {
        mean,
        per_seed,
        se_windows,
        se_seeds,
        se: se_windows.hypot(se_seeds),
        n_windows: n,
        n_seeds: s,
    })
}

/// A window of `key` for tests.
#[cfg(test)]
pub(crate) fn window(
    key: &WindowKey,
    seed: u64,
    start: usize,
    bytes: usize,
    nats_per_byte: f64,
) -> WindowRow {
    WindowRow {
        scheme: key.scheme,
        variant: key.variant.clone(),
        seed,
        mode: key.mode,
        eval_len: key.eval_len,
        start,
        bytes,
        nats_per_byte,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys() -> (WindowKey, WindowKey) {
        (
            WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 256),
            WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 128),
        )
    }

    /// Two seeds, three windows (starts 0, 256, 512): `a` the model at 256 (256 bytes a
    /// window), `b` at 128 (128 bytes).
    fn example() -> Vec<WindowRow> {
        let (a, b) = keys();
        let mut rows = Vec::new();
        for (seed, xa, xb) in [
            (0, [2.0, 2.3, 2.7], [1.0, 1.6, 1.4]),
            (1, [1.8, 1.9, 2.0], [1.0, 1.5, 1.4]),
        ] {
            for (i, (&p, &q)) in xa.iter().zip(&xb).enumerate() {
                rows.push(window(&a, seed, 256 * i, 256, p));
                rows.push(window(&b, seed, 256 * i, 128, q));
            }
        }
        rows
    }

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() < 1e-12
    }

    #[test]
    fn paired_difference_by_hand() {
        // Equal bytes within each side, so D_s is the plain mean of d_w = x^a_w - x^b_w and
        // e_{s,w} = (d_w - D_s) / 3.
        // seed 0: d = 1.0, 0.7, 1.3 -> D_0 = 1.0, e_0 = (0, -0.1, 0.1)
        // seed 1: d = 0.8, 0.4, 0.6 -> D_1 = 0.6, e_1 = (0.2/3, -0.2/3, 0)
        // mean = (1.0 + 0.6) / 2 = 0.8
        // se_seeds = sd(1.0, 0.6) / sqrt 2 = sqrt(0.08) / sqrt 2 = 0.2
        // e averaged over seeds: (1/30, -1/12, 1/20); sum of squares
        //   1/900 + 1/144 + 1/400 = (4 + 25 + 9) / 3600 = 38/3600
        // se_windows = sqrt(3/2 * 38/3600) = sqrt(57/3600) = sqrt(57) / 60
        // se = sqrt(57/3600 + 0.04) = sqrt(201/3600) = sqrt(201) / 60
        // (Each seed alone: se_0 = sqrt(0.09/3) = sqrt(0.03), the sd of d over sqrt 3.)
        let (a, b) = keys();
        let d = paired_difference(&example(), &a, &b).unwrap();
        assert!(close(d.mean, 0.8), "{d:?}");
        assert_eq!(d.per_seed.len(), 2);
        assert_eq!((d.per_seed[0].0, d.per_seed[1].0), (0, 1));
        assert!(close(d.per_seed[0].1, 1.0) && close(d.per_seed[1].1, 0.6));
        assert!(close(d.se_seeds, 0.2));
        assert!(close(d.se_windows, 57f64.sqrt() / 60.0), "{}", d.se_windows);
        assert!(close(d.se, 201f64.sqrt() / 60.0));
        assert_eq!((d.n_windows, d.n_seeds), (3, 2));
        // 0.8 against 3 * 0.2363 = 0.709 and 3.5 * 0.2363 = 0.827
        assert!(d.exceeds(3.0) && !d.exceeds(3.5));

        // seed 0 alone: se_windows = se_0 = sqrt(0.03), se_seeds = 0
        let seed0: Vec<WindowRow> = example().into_iter().filter(|w| w.seed == 0).collect();
        let d = paired_difference(&seed0, &a, &b).unwrap();
        assert!(close(d.mean, 1.0) && close(d.se_windows, 0.03f64.sqrt()));
        assert_eq!((d.se_seeds, d.n_seeds), (0.0, 1));
        assert!(close(d.se, d.se_windows));
    }

    #[test]
    fn windows_are_weighted_by_their_bytes() {
        // Sliding windows at one length: the first scores 128 bytes, the others 64.
        // m_a = (128 * 1 + 64 * 2 + 64 * 4) / 256 = 2, m_b = 1, D = 1 (the unweighted mean
        // of d = (0, 1, 3) would be 4/3);
        // weights (0.5, 0.25, 0.25): e = (0.5 * -1, 0.25 * 0, 0.25 * 2) - 0 = (-0.5, 0, 0.5)
        // se_windows = sqrt(3/2 * 0.5) = sqrt(0.75)
        let a = WindowKey::new(Scheme::Xl, "base", Mode::Sliding, 128);
        let b = WindowKey::new(Scheme::Xpos, "base", Mode::Sliding, 128);
        let mut rows = Vec::new();
        for (start, bytes, p) in [(0, 128, 1.0), (64, 64, 2.0), (128, 64, 4.0)] {
            rows.push(window(&a, 0, start, bytes, p));
            rows.push(window(&b, 0, start, bytes, 1.0));
        }
        let d = paired_difference(&rows, &a, &b).unwrap();
        assert!(
            close(d.mean, 1.0) && close(d.se_windows, 0.75f64.sqrt()),
            "{d:?}"
        );
    }

    #[test]
    fn unpaired_and_inconsistent_windows_are_errors() {
        let (a, b) = keys();
        let rows = example();
        let err = |rows: &[WindowRow], a: &WindowKey, b: &WindowKey| {
            paired_difference(rows, a, b).unwrap_err().to_string()
        };
        // a window of a, or of b, without its partner
        let mut r = rows.clone();
        r.retain(|w| !(w.eval_len == 128 && w.seed == 1 && w.start == 512));
        let e = err(&r, &a, &b);
        assert!(
            e.contains("rope/base nonoverlap 256 seed 1 start 512") && e.contains("partner"),
            "{e}"
        );
        let e = err(&r, &b, &a);
        assert!(
            e.contains("rope/base nonoverlap 256 seed 1 start 512"),
            "{e}"
        );
        // a seed whose windows start elsewhere than the first seed's
        let mut r = rows.clone();
        r.retain(|w| !(w.seed == 1 && w.start == 512));
        assert!(err(&r, &a, &b).contains("the same windows for every seed"));
        // no seed on both sides; no windows of a side at all
        let mut r = rows.clone();
        r.retain(|w| (w.eval_len == 256) == (w.seed == 0));
        assert!(err(&r, &a, &b).contains("at least one seed"));
        let c = WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 512);
        assert!(err(&rows, &c, &b).contains("none of rope/base nonoverlap 512"));
        // bytes that differ between paired windows of one length
        let mut r = rows.clone();
        let other = WindowKey::new(Scheme::Nope, "base", Mode::Nonoverlap, 128);
        r.extend(rows.iter().filter(|w| b.matches(w)).map(|w| WindowRow {
            scheme: Scheme::Nope,
            bytes: if w.start == 256 { 100 } else { w.bytes },
            ..w.clone()
        }));
        let e = err(&r, &b, &other);
        assert!(
            e.contains("128 in rope/base nonoverlap 128 against 100"),
            "{e}"
        );
        // a window twice, no bytes, a loss that is not finite
        let mut r = rows.clone();
        r.push(rows[0].clone());
        assert!(err(&r, &a, &b).contains("(twice)"));
        let mut r = rows.clone();
        r[0].bytes = 0;
        assert!(err(&r, &a, &b).contains("invalid bytes"));
        r[0].bytes = 256;
        r[0].nats_per_byte = f64::NAN;
        assert!(err(&r, &a, &b).contains("NaN"));
        // modes, and lengths outside nonoverlap mode
        let s = WindowKey::new(Scheme::Rope, "base", Mode::Sliding, 128);
        assert!(err(&rows, &a, &s).contains("invalid modes"));
        let s2 = WindowKey::new(Scheme::Rope, "base", Mode::Sliding, 256);
        assert!(err(&rows, &s2, &s).contains("invalid lengths"));
    }

    fn arbitrary_windows() -> impl Strategy<Value = Vec<WindowRow>> {
        // 1-3 seeds of the same 1-8 windows, for models m and n at one length
        (
            1u64..4,
            proptest::collection::vec((1usize..300, 0.0f64..6.0, 0.0f64..6.0), 1..8),
            proptest::collection::vec(-1.0f64..1.0, 3),
        )
            .prop_map(|(seeds, windows, shift)| {
                let m = WindowKey::new(Scheme::Rope, "base", Mode::Sliding, 256);
                let n = WindowKey::new(Scheme::Nope, "ntk", Mode::Sliding, 256);
                let mut rows = Vec::new();
                for seed in 0..seeds {
                    for (i, &(bytes, x, y)) in windows.iter().enumerate() {
                        let shifted = (y + shift[seed as usize]).abs();
                        rows.push(window(&m, seed, 128 * i, bytes, x));
                        rows.push(window(&n, seed, 128 * i, bytes, shifted));
                    }
                }
                rows
            })
    }

    proptest! {
        #[test]
        fn a_model_against_itself_is_exactly_zero(rows in arbitrary_windows()) {
            let m = WindowKey::new(Scheme::Rope, "base", Mode::Sliding, 256);
            let d = paired_difference(&rows, &m, &m).unwrap();
            prop_assert_eq!(d.mean, 0.0);
            prop_assert_eq!(d.se, 0.0);
            prop_assert!(d.per_seed.iter().all(|p| p.1 == 0.0));
            prop_assert!(!d.exceeds(0.0));
        }

        #[test]
        fn swapping_the_sides_negates_the_difference(rows in arbitrary_windows()) {
            let m = WindowKey::new(Scheme::Rope, "base", Mode::Sliding, 256);
            let n = WindowKey::new(Scheme::Nope, "ntk", Mode::Sliding, 256);
            let (ab, ba) = (
                paired_difference(&rows, &m, &n).unwrap(),
                paired_difference(&rows, &n, &m).unwrap(),
            );
            prop_assert_eq!(ab.mean, -ba.mean);
            prop_assert_eq!(ab.se_windows, ba.se_windows);
            prop_assert_eq!(ab.se_seeds, ba.se_seeds);
            prop_assert_eq!(ab.se, ba.se);
            for (p, q) in ab.per_seed.iter().zip(&ba.per_seed) {
                prop_assert_eq!((p.0, p.1), (q.0, -q.1));
            }
        }
    }

    fn result(variant: &str, eval_len: usize, seed: u64, nats: f64) -> ResultRow {
        ResultRow {
            scaling_factor: (variant == "ntk").then_some(2.0),
            ..ResultRow::example(Scheme::Rope, variant, eval_len, seed, nats)
        }
    }

    #[test]
    fn seed_summaries_by_hand() {
        // rope 128: seeds 2, 0, 1 at 1.5, 1.2, 1.8 -> mean 1.5,
        //   sd = sqrt((0.09 + 0.09 + 0) / 2) = 0.3
        // rope/ntk 256: one seed -> mean 2.0, sd 0
        // rope 256: seeds 0, 1 at 1.0, 2.0 -> mean 1.5, sd = sqrt(0.5)
        let rows = vec![
            result("base", 128, 2, 1.5),
            result("ntk", 256, 0, 2.0),
            result("base", 128, 0, 1.2),
            result("base", 256, 0, 1.0),
            result("base", 128, 1, 1.8),
            result("base", 256, 1, 2.0),
        ];
        let s = seed_summaries(&rows).unwrap();
        let found: Vec<(String, usize)> = s.iter().map(|s| (s.key().label(), s.eval_len)).collect();
        assert_eq!(
            found,
            [
                ("rope".to_string(), 128),
                ("rope/ntk".to_string(), 256),
                ("rope".to_string(), 256)
            ]
        );
        assert!(close(s[0].mean, 1.5) && close(s[0].sd, 0.3), "{:?}", s[0]);
        assert_eq!(s[0].seeds, [0, 1, 2]);
        assert_eq!(
            (s[1].mean, s[1].sd, s[1].seeds.clone()),
            (2.0, 0.0, vec![0])
        );
        assert_eq!(s[1].scaling_factor, Some(2.0));
        assert!(close(s[2].mean, 1.5) && close(s[2].sd, 0.5f64.sqrt()));
        assert!(seed_summaries(&[]).unwrap().is_empty());
    }

    #[test]
    fn seed_summaries_reject_duplicates_and_disagreements() {
        let rows = vec![result("base", 128, 0, 1.5), result("base", 128, 0, 1.6)];
        let e = seed_summaries(&rows).unwrap_err().to_string();
        assert!(e.contains("rope/base nonoverlap 128 seed 0 (twice)"), "{e}");
        let mut other = result("ntk", 256, 1, 1.0);
        other.scaling_factor = Some(4.0);
        let rows = vec![result("ntk", 256, 0, 1.5), other];
        let e = seed_summaries(&rows).unwrap_err().to_string();
        assert!(
            e.contains("Some(2.0) for seed 0 but Some(4.0) for seed 1"),
            "{e}"
        );
        let mut other = result("base", 128, 1, 1.0);
        other.train_len = 256;
        let e = seed_summaries(&[result("base", 128, 0, 1.0), other])
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid train_len"), "{e}");
        let e = seed_summaries(&[result("base", 128, 0, f64::INFINITY)]).unwrap_err();
        assert!(e.to_string().contains("a finite loss"), "{e}");
    }

    /// The sweep's real windows: rope at 2048 against 128 (nonoverlap, seed 0) paired by
    /// start is the difference of the two rows of `ppl_vs_length.csv`, which are computed
    /// from the same losses independently (total nats over total bytes).
    #[test]
    fn real_windows_agree_with_the_results_rows() {
        let results = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
        let (rows, windows) = crate::results::files::read_results_dir(&results).unwrap();
        let windows = windows.unwrap();
        let row = |l: usize| {
            rows.iter()
                .find(|r| {
                    r.scheme == Scheme::Rope
                        && r.variant == "base"
                        && r.mode == Mode::Nonoverlap
                        && r.eval_len == l
                        && r.seed == 0
                })
                .unwrap()
                .nats_per_byte
        };
        let a = WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 2048);
        let b = WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 128);
        let d = paired_difference(&windows, &a, &b).unwrap();
        let (_, seed0) = d.per_seed.iter().find(|p| p.0 == 0).copied().unwrap();
        println!(
            "rope/base nonoverlap 2048 - 128, seed 0: {seed0:.6} nats/byte, se_windows \
             {:.6} ({} windows, {} seeds; rows: {:.6} - {:.6})",
            d.se_windows,
            d.n_windows,
            d.n_seeds,
            row(2048),
            row(128)
        );
        assert!((seed0 - (row(2048) - row(128))).abs() < 1e-9);
        assert!(d.se_windows > 0.0 && d.n_windows > 1);
        // sliding windows pair across models at one length
        let ntk = WindowKey::new(Scheme::Rope, "ntk", Mode::Sliding, 2048);
        let base = WindowKey::new(Scheme::Rope, "base", Mode::Sliding, 2048);
        let d = paired_difference(&windows, &ntk, &base).unwrap();
        println!(
            "rope/ntk - rope, sliding 2048, seed 0: {:.6} ± {:.6} ({} windows)",
            d.mean, d.se, d.n_windows
        );
        assert_eq!(d.n_windows, 30);
        // every row summarises without error, with the three shipped seeds
        let summaries = seed_summaries(&rows).unwrap();
        assert!(
            summaries.iter().all(|s| s.seeds == [0, 1, 2]),
            "a model without three seeds"
        );
    }
}
