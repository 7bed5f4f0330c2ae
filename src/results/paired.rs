//! Differences on paired windows: which windows of `windows/*.csv` make one side
//! ([`WindowKey`]), the windows of several sides paired by seed and start (`align`, checked
//! once for every contrast built on them), and the difference of two sides with its standard
//! error from windows and seeds ([`paired_difference`]).
//!
//! Pairing matters: two models scored on the same windows share the windows' difficulty,
//! which cancels in the per-window difference and would otherwise swamp it. Which windows
//! pair: in `matched` mode every length scores the same target segments, so windows pair by
//! (seed, start) across lengths and across models; in `nonoverlap` mode every length scores
//! windows at the same starts (the first $L$ bytes of each window of the longest length), so
//! they pair the same way, though two lengths score different bytes; in `sliding` mode they
//! pair across models at one length only.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use super::rows::{Mode, ModelKey, Scheme, WindowRow};
use super::stats::{describe, mean_and_sd};
use crate::error::{ensure, invalid};
use crate::Result;

/// Which windows of `windows/*.csv` make one side of a [`paired_difference`]: one model
/// (scheme and variant) at one length in one mode, every seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowKey {
    /// Position scheme.
    pub scheme: Scheme,
    /// As in [`WindowRow::variant`] (`base` for a model as trained).
    pub variant: String,
    /// `matched`, `nonoverlap` or `sliding`.
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
pub(crate) fn weighted_mean(windows: &[&WindowRow]) -> (f64, Vec<f64>) {
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
    let aligned = align(windows, &[a, b])?;
    let mut per_seed = Vec::with_capacity(aligned.seeds.len());
    // e_{s,w} summed over the seeds, by window
    let mut e_sum = vec![0.0; aligned.starts.len()];
    for (i, &seed) in aligned.seeds.iter().enumerate() {
        let (xa, xb) = (&aligned.sides[0][i], &aligned.sides[1][i]);
        let (ma, ua) = weighted_mean(xa);
        let (mb, ub) = weighted_mean(xb);
        per_seed.push((seed, ma - mb));
        let e = xa
            .iter()
            .zip(&ua)
            .zip(xb.iter().zip(&ub))
            .map(|((p, u), (q, v))| u * (p.nats_per_byte - ma) - v * (q.nats_per_byte - mb));
        e_sum.iter_mut().zip(e).for_each(|(acc, x)| *acc += x);
    }
    let (s, n) = (aligned.seeds.len(), e_sum.len());
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

/// The windows of several [`WindowKey`]s paired by seed and start ([`align`]).
#[derive(Debug, Clone)]
pub(crate) struct Aligned<'a> {
    /// The seeds with windows of every key, ascending.
    pub(crate) seeds: Vec<u64>,
    /// The windows' starts, ascending (the same for every key and seed).
    pub(crate) starts: Vec<usize>,
    /// `sides[k][i][w]`: the window of key `k`, seed `seeds[i]`, start `starts[w]`.
    pub(crate) sides: Vec<Vec<Vec<&'a WindowRow>>>,
}

/// The windows of `keys` paired by (seed, start): the seeds every key has, each with the same
/// starts for every key, and the same bytes in a window for every seed (and, between keys of
/// one length, for every key).
///
/// # Errors
/// As [`paired_difference`], for any two of the keys; and for a window whose bytes differ
/// between seeds.
pub(crate) fn align<'a>(windows: &'a [WindowRow], keys: &[&WindowKey]) -> Result<Aligned<'a>> {
    ensure(!keys.is_empty(), "keys", "[]", "one or more window keys")?;
    let a = keys[0];
    for b in &keys[1..] {
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
            "one length in sliding mode (its windows pair across lengths only in matched and \
             nonoverlap mode)",
        )?;
    }
    let by_key: Vec<BySeed<'a>> = keys
        .iter()
        .map(|k| windows_of(windows, k))
        .collect::<Result<_>>()?;
    let seeds: Vec<u64> = by_key[0]
        .keys()
        .filter(|s| by_key.iter().all(|w| w.contains_key(s)))
        .copied()
        .collect();
    if seeds.is_empty() {
        let each: Vec<String> = keys
            .iter()
            .zip(&by_key)
            .map(|(k, w)| format!("{:?} of {k}", w.keys().collect::<Vec<_>>()))
            .collect();
        return Err(invalid(
            "seeds",
            each.join(" against "),
            "at least one seed with windows of both sides",
        ));
    }
    let mut starts: Option<BTreeSet<usize>> = None;
    let mut sides: Vec<Vec<Vec<&'a WindowRow>>> = vec![Vec::new(); keys.len()];
    for &seed in &seeds {
        let first = &by_key[0][&seed];
        for (b, wb) in keys.iter().zip(&by_key).skip(1) {
            let other = &wb[&seed];
            for (side, against, of, to) in [(first, other, a, b), (other, first, b, &a)] {
                if let Some(start) = side.keys().find(|s| !against.contains_key(s)) {
                    return Err(invalid(
                        "windows",
                        format!("{of} seed {seed} start {start}"),
                        format!("a partner window of {to} with the same seed and start"),
                    ));
                }
            }
        }
        let these: BTreeSet<usize> = first.keys().copied().collect();
        match &starts {
            None => starts = Some(these),
            Some(known) => ensure(
                *known == these,
                "windows",
                format!(
                    "{} starts of {a} seed {seed} against {} of seed {}",
                    these.len(),
                    known.len(),
                    seeds[0]
                ),
                "the same windows for every seed",
            )?,
        }
        for (k, wk) in by_key.iter().enumerate() {
            sides[k].push(wk[&seed].values().copied().collect());
        }
    }
    for (k, b) in keys.iter().enumerate() {
        // bytes: the same for every seed of a key, and for every key of one length
        for (i, seed_windows) in sides[k].iter().enumerate() {
            let mut same_key = sides[k][0].iter().zip(seed_windows);
            if let Some((p, q)) = same_key.find(|(p, q)| p.bytes != q.bytes) {
                return Err(invalid(
                    "bytes",
                    format!(
                        "{} at seed {} against {} at seed {} in {b} start {}",
                        q.bytes, seeds[i], p.bytes, seeds[0], p.start
                    ),
                    "the same bytes in a window for every seed",
                ));
            }
            if a.eval_len == b.eval_len {
                let first = &sides[0][i];
                if let Some((p, q)) = first
                    .iter()
                    .zip(seed_windows)
                    .find(|(p, q)| p.bytes != q.bytes)
                {
                    return Err(invalid(
                        "bytes",
                        format!(
                            "{} in {a} against {} in {b} at seed {} start {}",
                            p.bytes, q.bytes, seeds[i], p.start
                        ),
                        "the same bytes scored in paired windows of one length",
                    ));
                }
            }
        }
    }
    Ok(Aligned {
        seeds,
        starts: starts.unwrap_or_default().into_iter().collect(),
        sides,
    })
}

/// The target segments of the `matched` windows, `(start, bytes)` ascending, after checking
/// that every model, seed and length has exactly these: the same target bytes scored at every
/// length and for every model. `None` when no window is in `matched` mode.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] naming the first model, seed and length whose segments
/// differ from the first one's (or that has a segment twice).
pub fn matched_segments(windows: &[WindowRow]) -> Result<Option<Vec<(usize, usize)>>> {
    // (model, seed, length) -> its segments (start -> bytes), in order of first appearance
    type Group = ((ModelKey, u64, usize), BTreeMap<usize, usize>);
    let mut groups: Vec<Group> = Vec::new();
    for w in windows.iter().filter(|w| w.mode == Mode::Matched) {
        let key = (w.key(), w.seed, w.eval_len);
        let at = match groups.iter().position(|g| g.0 == key) {
            Some(at) => at,
            None => {
                groups.push((key, BTreeMap::new()));
                groups.len() - 1
            }
        };
        let ((model, seed, l), segments) = &mut groups[at];
        if segments.insert(w.start, w.bytes).is_some() {
            return Err(invalid(
                "windows",
                format!(
                    "{} matched {l} seed {seed} start {} (twice)",
                    model.id(),
                    w.start
                ),
                "one row per segment",
            ));
        }
    }
    let Some(((first_model, first_seed, first_len), first)) = groups.first() else {
        return Ok(None);
    };
    for ((model, seed, l), segments) in &groups[1..] {
        ensure(
            segments == first,
            "matched segments",
            format!(
                "{} of {} seed {seed} at {l} against {} of {} seed {first_seed} at {first_len}",
                segments.len(),
                model.id(),
                first.len(),
                first_model.id()
            ),
            "the same target segments (starts and bytes) for every model, seed and length",
        )?;
    }
    Ok(Some(first.iter().map(|(&s, &b)| (s, b)).collect()))
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

/// Rows and windows for tests of models that rise from 1.5 nats/byte at 128 bytes by
/// `rise ± per_seed · spread(seed)` at 2048 bytes, signs alternating over the seeds: for each
/// `(scheme, variant, rise, per_seed)`, seeds `0..seeds`, three windows a length, in `mode`.
#[cfg(test)]
pub(crate) fn rising_models(
    models: &[(Scheme, &str, f64, f64)],
    seeds: u64,
    mode: Mode,
    spread: impl Fn(u64) -> f64,
) -> (Vec<super::rows::ResultRow>, Vec<WindowRow>) {
    let (mut rows, mut windows) = (Vec::new(), Vec::new());
    for &(scheme, variant, rise, per_seed) in models {
        let model = ModelKey::new(scheme, variant);
        for seed in 0..seeds {
            let flip = if seed % 2 == 0 { 1.0 } else { -1.0 };
            for (len, add) in [
                (128usize, 0.0),
                (2048, rise + flip * per_seed * spread(seed)),
            ] {
                let k = WindowKey::of(&model, mode, len);
                for w in 0..3 {
                    windows.push(window(&k, seed, w * 2048, 10, 1.5 + add));
                }
                let mut row =
                    super::rows::ResultRow::example(scheme, variant, len, seed, 1.5 + add);
                row.mode = mode;
                rows.push(row);
            }
        }
    }
    (rows, windows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::stats::seed_summaries;
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

    #[test]
    fn matched_segments_are_the_same_for_every_model_seed_and_length() {
        let key = |s, l| WindowKey::new(s, "base", Mode::Matched, l);
        let mut rows = Vec::new();
        for (scheme, seed, l) in [
            (Scheme::Rope, 0, 128),
            (Scheme::Rope, 1, 256),
            (Scheme::T5, 0, 256),
        ] {
            for start in [2048, 3072] {
                rows.push(window(&key(scheme, l), seed, start, 1024, 1.5));
            }
        }
        // other modes are not looked at
        rows.push(window(
            &WindowKey::new(Scheme::T5, "base", Mode::Nonoverlap, 128),
            0,
            7,
            128,
            1.0,
        ));
        assert_eq!(
            matched_segments(&rows).unwrap(),
            Some(vec![(2048, 1024), (3072, 1024)])
        );
        let mut missing = rows.clone();
        missing.remove(3);
        let e = matched_segments(&missing).unwrap_err().to_string();
        assert!(
            e.contains("1 of rope/base seed 1 at 256 against 2 of rope/base seed 0 at 128"),
            "{e}"
        );
        let mut other_bytes = rows.clone();
        other_bytes[5].bytes = 1000;
        assert!(matched_segments(&other_bytes).is_err());
        let mut twice = rows.clone();
        twice.push(rows[0].clone());
        assert!(matched_segments(&twice)
            .unwrap_err()
            .to_string()
            .contains("(twice)"));
        assert_eq!(matched_segments(&rows[6..]).unwrap(), None);
    }

    /// The shipped results: where they have matched windows, every table row's targets are
    /// the same segments at every length for every model and seed, and they come from the
    /// test split (the sweep's record says so). Results from before the matched mode have
    /// none.
    #[test]
    fn shipped_matched_windows_score_the_same_test_targets() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
        let (rows, windows) = crate::results::files::read_results_dir(&dir).unwrap();
        let segments = matched_segments(&windows.unwrap_or_default()).unwrap();
        let matched_rows: Vec<_> = rows.iter().filter(|r| r.mode == Mode::Matched).collect();
        match segments {
            None => assert!(
                matched_rows.is_empty(),
                "matched rows without matched windows"
            ),
            Some(segments) => {
                let targets: usize = segments.iter().map(|s| s.1).sum();
                assert!(matched_rows.iter().all(|r| r.tokens_scored == targets));
                let record: serde_json::Value =
                    crate::io::read_json(&dir.join("sweep.json")).unwrap();
                assert_eq!(record["config"]["eval"]["split"], "test");
                println!(
                    "{} segments, {targets} target bytes of the test split",
                    segments.len()
                );
            }
        }
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
