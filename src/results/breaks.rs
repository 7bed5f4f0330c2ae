//! Where each model leaves the lengths it knows, from the mean loss at each position of the
//! longest windows (`per_position/`, one file per model and seed): the loss averaged over the
//! model's seeds and over bins of $b$ bytes ([`position_curves`]), and the first bin past the
//! training length whose loss exceeds the last trained bin's by more than a threshold
//! ([`break_point`]).
//!
//! With $\ell_p$ the loss at position $p$ averaged over seeds, bin $j$ holds
//! $\bar\ell_j = \frac1b \sum_{p = jb}^{jb + b - 1} \ell_p$; the plateau is the bin
//! $[L_{train} - b, L_{train})$, and the model breaks at the first $jb \ge L_{train}$ with
//! $\bar\ell_j > \bar\ell_{plateau} + \delta$.

use std::path::Path;

use super::checks::models_with_seeds;
use super::files::{read_per_position, PER_POSITION_DIR};
use super::record::planned_seeds;
use super::rows::{with_seed_count, ModelKey, ResultRow};
use crate::error::ensure;
use crate::lm::config::SweepConfig;
use crate::Result;

/// The per-position file of `model` and `seed` under a results folder:
/// `per_position/rope-seed0.csv`, `per_position/rope-ft-yarn-x4-seed0.csv`.
pub fn per_position_path(dir: &Path, model: &ModelKey, seed: u64) -> std::path::PathBuf {
    let stem = model.label().replace('/', "-");
    dir.join(PER_POSITION_DIR)
        .join(format!("{stem}-seed{seed}.csv"))
}

/// One model's loss by position bin, the mean over its seeds ([`position_curves`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PositionCurve {
    /// The model.
    pub model: ModelKey,
    /// Its seeds, ascending.
    pub seeds: Vec<u64>,
    /// The bin width $b$, bytes.
    pub bin: usize,
    /// The centre of each bin, $jb + b/2$.
    pub centres: Vec<f64>,
    /// $\bar\ell_j$, nats per byte.
    pub loss: Vec<f64>,
}

impl PositionCurve {
    /// The curve as one named series of a figure: its label with its seed count when it has
    /// fewer than the `record` plans for it ([`with_seed_count`], [`planned_seeds`]), and the
    /// binned loss.
    pub fn series(&self, record: &SweepConfig) -> (String, Vec<f64>) {
        let planned = planned_seeds(record, &self.model).len();
        let name = with_seed_count(&self.model.label(), self.seeds.len(), planned);
        (name, self.loss.clone())
    }
}

/// One [`PositionCurve`] per model of the `rows` that `keep` accepts (in order of first
/// appearance), from the files `per_position/<model>-seed<s>.csv` of `dir`
/// ([`per_position_path`]) of every seed the rows have.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a bin of 0 and for files of one model with
/// different numbers of positions; as [`read_per_position`] (a missing file included).
pub fn position_curves(
    dir: &Path,
    rows: &[ResultRow],
    bin: usize,
    keep: impl Fn(&ModelKey) -> bool,
) -> Result<Vec<PositionCurve>> {
    ensure(bin > 0, "bin", bin, "at least 1 byte")?;
    let models = models_with_seeds(rows).into_iter().filter(|(k, _)| keep(k));
    let mut curves = Vec::new();
    for (model, seeds) in models {
        let mut sum: Vec<f64> = Vec::new();
        for &s in &seeds {
            let loss = read_per_position(&per_position_path(dir, &model, s))?;
            ensure(
                sum.is_empty() || sum.len() == loss.len(),
                "per_position",
                format!("{} positions for {} seed {s}", loss.len(), model.label()),
                &format!("{} positions, as its other seeds", sum.len()),
            )?;
            sum.resize(loss.len(), 0.0);
            for (a, p) in sum.iter_mut().zip(&loss) {
                *a += p.nats_per_byte / seeds.len() as f64;
            }
        }
        let loss: Vec<f64> = sum
            .chunks(bin)
            .map(|c| c.iter().sum::<f64>() / c.len() as f64)
            .collect();
        let centres = (0..loss.len())
            .map(|j| (j * bin) as f64 + bin as f64 / 2.0)
            .collect();
        curves.push(PositionCurve {
            model,
            seeds,
            bin,
            centres,
            loss,
        });
    }
    Ok(curves)
}

/// Where one model breaks ([`break_point`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Break {
    /// The model.
    pub model: ModelKey,
    /// How many seeds its curve averages.
    pub seeds: usize,
    /// $\bar\ell$ of the last trained bin $[L_{train} - b, L_{train})$.
    pub plateau: f64,
    /// $\bar\ell$ of the last bin.
    pub last: f64,
    /// The first byte of the first bin past $L_{train}$ above the plateau by more than
    /// $\delta$; `None` when no bin is.
    pub at: Option<usize>,
}

/// Where `curve` breaks for a model trained at `train_len` (see the module documentation),
/// with threshold `delta` nats per byte.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] when the bin does not divide `train_len`, or the curve
/// has no bin below `train_len`.
///
/// # Examples
/// ```
/// use posenc::results::{break_point, ModelKey, PositionCurve, Scheme};
/// let curve = PositionCurve {
///     model: ModelKey::base(Scheme::Rope), seeds: vec![0], bin: 64,
///     centres: vec![32.0, 96.0, 160.0, 224.0], loss: vec![2.0, 1.5, 1.55, 1.8],
/// };
/// let b = break_point(&curve, 128, 0.1)?;
/// assert_eq!((b.plateau, b.at), (1.5, Some(192)));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn break_point(curve: &PositionCurve, train_len: usize, delta: f64) -> Result<Break> {
    let bin = curve.bin;
    ensure(
        bin > 0
            && train_len >= bin
            && train_len.is_multiple_of(bin)
            && train_len / bin <= curve.loss.len(),
        "bin",
        format!(
            "{bin} for training length {train_len} and {} bins",
            curve.loss.len()
        ),
        "a width that divides the training length, with a bin below it",
    )?;
    let trained = train_len / bin;
    let plateau = curve.loss[trained - 1];
    let at = curve.loss[trained..]
        .iter()
        .position(|&l| l > plateau + delta)
        .map(|j| (trained + j) * bin);
    Ok(Break {
        model: curve.model.clone(),
        seeds: curve.seeds.len(),
        plateau,
        last: curve.loss.last().copied().unwrap_or(plateau),
        at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::rows::Scheme;

    /// Two seeds of one model written to a folder: the curve is their mean, binned.
    #[test]
    fn curves_average_the_seeds_and_bin_the_positions() {
        let dir = std::env::temp_dir().join(format!("posenc-breaks-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(PER_POSITION_DIR)).unwrap();
        let model = ModelKey::new(Scheme::Rope, "ft-yarn-x2");
        for (seed, shift) in [(0, 0.0), (1, 0.2)] {
            let text: String = (0..8)
                .map(|p| format!("{p},{}\n", p as f64 + shift))
                .collect();
            let path = per_position_path(&dir, &model, seed);
            assert!(path.ends_with("per_position/rope-ft-yarn-x2-seed1.csv") || seed == 0);
            std::fs::write(path, format!("position,nats_per_byte\n{text}")).unwrap();
        }
        let rows: Vec<ResultRow> = [0, 1, 0]
            .iter()
            .map(|&s| ResultRow::example(Scheme::Rope, "ft-yarn-x2", 128, s, 1.0))
            .collect();
        let curves = position_curves(&dir, &rows, 4, |_| true).unwrap();
        assert_eq!(curves.len(), 1);
        assert_eq!(curves[0].seeds, [0, 1]);
        // positions 0..3 mean 1.5 (+0.1), 4..7 mean 5.5 (+0.1); centres 2 and 6
        assert_eq!(curves[0].centres, [2.0, 6.0]);
        assert!((curves[0].loss[0] - 1.6).abs() < 1e-12);
        assert!((curves[0].loss[1] - 5.6).abs() < 1e-12);
        assert!(position_curves(&dir, &rows, 0, |_| true).is_err());
        assert!(position_curves(&dir, &rows, 4, |m| m.is_base())
            .unwrap()
            .is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A naive scan of the bins against the function.
    #[test]
    fn the_break_is_the_first_bin_past_training_above_the_plateau() {
        let loss = vec![3.0, 2.0, 1.4, 1.45, 1.39, 1.6, 1.5, 2.5];
        let curve = PositionCurve {
            model: ModelKey::base(Scheme::Nope),
            seeds: vec![0, 1],
            bin: 16,
            centres: (0..8).map(|j| j as f64 * 16.0 + 8.0).collect(),
            loss: loss.clone(),
        };
        // trained at 64 bytes: plateau bin 3 (1.45); bins 4.. : 1.39, 1.6 (> 1.55) -> 5 * 16
        let b = break_point(&curve, 64, 0.1).unwrap();
        let mut naive = None;
        for (j, l) in loss.iter().enumerate().skip(4) {
            if *l > loss[3] + 0.1 && naive.is_none() {
                naive = Some(j * 16);
            }
        }
        assert_eq!(b.at, naive);
        assert_eq!(b.at, Some(80));
        assert_eq!((b.seeds, b.last), (2, 2.5));
        assert_eq!(break_point(&curve, 64, 2.0).unwrap().at, None);
        assert!(break_point(&curve, 40, 0.1).is_err());
        assert!(break_point(&curve, 256, 0.1).is_err());
        assert!(break_point(&curve, 0, 0.1).is_err());
    }
}
