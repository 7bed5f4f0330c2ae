//! The typed rows of the files a sweep writes, one type per file, written by `posenc eval` and
//! `posenc sweep` (feature `train`) and read back here in every build:
//!
//! | file | row |
//! |---|---|
//! | `ppl_vs_length.csv` (and `items/*.csv`, `posenc eval --csv`) | [`ResultRow`] |
//! | `windows/*.csv` | [`WindowRow`] |
//! | `curves.csv` (and `curves/*.csv`) | [`CurveRow`] |
//! | `per_position/*.csv` (`posenc eval --per-position`) | [`PositionRow`] |
//!
//! A model is a [`ModelKey`], a scheme and a variant, and [`ModelKey::label`] is the one name
//! every table, figure and sentence gives it.

use serde::{Deserialize, Serialize};

pub use crate::lm::config::{Mode, Scheme};

/// The variant of a model as trained (neither scaled at inference nor fine-tuned).
pub const BASE: &str = "base";

/// One model: a position scheme and a variant of it (`base`, a RoPE scaling at inference such
/// as `ntk`, or a fine-tune such as `ft-yarn`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelKey {
    /// Position scheme.
    pub scheme: Scheme,
    /// As in [`ResultRow::variant`].
    pub variant: String,
}

/// Whether `variant` names a budget control (`budget-x2`).
pub(crate) fn is_budget_variant(variant: &str) -> bool {
    variant.starts_with("budget-x")
}

impl ModelKey {
    /// The model `scheme`/`variant`.
    pub fn new(scheme: Scheme, variant: impl Into<String>) -> Self {
        ModelKey {
            scheme,
            variant: variant.into(),
        }
    }

    /// The model as trained: `scheme`/`base`.
    pub fn base(scheme: Scheme) -> Self {
        Self::new(scheme, BASE)
    }

    /// Whether this is a model as trained ([`BASE`]).
    pub fn is_base(&self) -> bool {
        self.variant == BASE
    }

    /// Whether this is a fine-tune (`ft-KIND`, `ft-KIND-matched`).
    pub fn is_finetune(&self) -> bool {
        self.variant.starts_with("ft-")
    }

    /// Whether this is a budget control: a scheme trained from scratch with a multiple of the
    /// bytes (`budget-x2`).
    pub fn is_budget_control(&self) -> bool {
        is_budget_variant(&self.variant)
    }

    /// The model's name in tables, figures and sentences: `scheme` for a base model,
    /// `scheme/variant` otherwise (`rope`, `rope/ntk`, `rope/ft-yarn`).
    ///
    /// # Examples
    /// ```
    /// use posenc::results::{ModelKey, Scheme};
    /// assert_eq!(ModelKey::base(Scheme::Rope).label(), "rope");
    /// assert_eq!(ModelKey::new(Scheme::Rope, "ft-yarn").label(), "rope/ft-yarn");
    /// ```
    pub fn label(&self) -> String {
        if self.is_base() {
            self.scheme.name().to_string()
        } else {
            format!("{}/{}", self.scheme, self.variant)
        }
    }

    /// `scheme/variant` with `base` spelt out: how error messages name a model, unambiguous
    /// whatever the variant.
    pub fn id(&self) -> String {
        format!("{}/{}", self.scheme, self.variant)
    }
}

/// `label` when it has all the `planned` seeds, else `label (1 of 3 seeds)`: how a figure's
/// legend names a model whose mean is over fewer seeds than the sweep runs.
///
/// # Examples
/// ```
/// use posenc::results::{with_seed_count, ModelKey, Scheme};
/// let rope = ModelKey::base(Scheme::Rope).label();
/// assert_eq!(with_seed_count(&rope, 3, 3), "rope");
/// assert_eq!(with_seed_count(&rope, 2, 3), "rope (2 of 3 seeds)");
/// ```
pub fn with_seed_count(label: &str, seeds: usize, planned: usize) -> String {
    if seeds == planned {
        label.to_string()
    } else {
        let noun = if planned == 1 { "seed" } else { "seeds" };
        format!("{label} ({seeds} of {planned} {noun})")
    }
}

/// One row of the results table (`ppl_vs_length.csv`): one model (scheme and variant) at one
/// length in one mode, for one training seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Position scheme.
    pub scheme: Scheme,
    /// `base`, an inference scaling (`linear`, `ntk`, ...), or a fine-tune (`ft-linear`).
    pub variant: String,
    /// Training length.
    pub train_len: usize,
    /// Evaluated length.
    pub eval_len: usize,
    /// `matched`, `nonoverlap` or `sliding`.
    pub mode: Mode,
    /// Mean negative log-likelihood, nats per byte.
    pub nats_per_byte: f64,
    /// Standard error of `nats_per_byte` from the spread of the windows' means (of the
    /// segments' in `matched` mode).
    pub std_error: f64,
    /// The same in bits.
    pub bits_per_byte: f64,
    /// $e^{\text{nats}}$, per byte.
    pub perplexity: f64,
    /// Bytes scored.
    pub tokens_scored: usize,
    /// Training steps of the checkpoint.
    pub steps: usize,
    /// Trainable parameters.
    pub params: usize,
    /// Training seed.
    pub seed: u64,
    /// The RoPE scaling factor $s$ in effect at this length (the inference scaling's, or the
    /// one the model was trained with); empty without a scaling (and in older tables without
    /// the column).
    #[serde(default)]
    pub scaling_factor: Option<f64>,
}

impl ResultRow {
    /// The row's model.
    pub fn key(&self) -> ModelKey {
        ModelKey::new(self.scheme, self.variant.clone())
    }

    /// `rows` again in `mode`, for tests.
    #[cfg(test)]
    pub(crate) fn in_mode(rows: &[ResultRow], mode: Mode) -> Vec<ResultRow> {
        rows.iter()
            .map(|r| ResultRow { mode, ..r.clone() })
            .collect()
    }

    /// A `nonoverlap` row of a model trained at 128 bytes, for tests: `nats` at `eval_len`.
    #[cfg(test)]
    pub(crate) fn example(
        scheme: Scheme,
        variant: &str,
        eval_len: usize,
        seed: u64,
        nats: f64,
    ) -> Self {
        ResultRow {
            scheme,
            variant: variant.into(),
            train_len: 128,
            eval_len,
            mode: Mode::Nonoverlap,
            nats_per_byte: nats,
            std_error: 0.01,
            bits_per_byte: nats / std::f64::consts::LN_2,
            perplexity: nats.exp(),
            tokens_scored: 1000,
            steps: 10,
            params: 100,
            seed,
            scaling_factor: None,
        }
    }
}

/// The loss of one evaluation window (`windows/*.csv`): the windows behind a [`ResultRow`], for
/// uncertainties computed on paired windows (two lengths, or two models, scored on the same
/// text). In `matched` mode a row is one target segment, scored by as many windows as cover
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRow {
    /// Position scheme.
    pub scheme: Scheme,
    /// As in [`ResultRow::variant`].
    pub variant: String,
    /// Training seed.
    pub seed: u64,
    /// `matched`, `nonoverlap` or `sliding`.
    pub mode: Mode,
    /// Evaluated length.
    pub eval_len: usize,
    /// In `matched` mode the segment's first target byte in the split, the same at every
    /// length; otherwise the window's first (input) byte. It identifies the window across
    /// lengths in `matched` and `nonoverlap` mode, and across models in every mode.
    pub start: usize,
    /// Bytes of the window scored (the segment's target bytes in `matched` mode).
    pub bytes: usize,
    /// Mean negative log-likelihood of those bytes, nats per byte.
    pub nats_per_byte: f64,
}

impl WindowRow {
    /// The window's model.
    pub fn key(&self) -> ModelKey {
        ModelKey::new(self.scheme, self.variant.clone())
    }
}

/// One point of a training curve (`curves.csv`): the validation loss after `step` steps and
/// the mean training loss of the steps since the previous point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveRow {
    /// Position scheme.
    pub scheme: Scheme,
    /// `base`, or `ft-KIND` for a fine-tune.
    pub variant: String,
    /// Training seed.
    pub seed: u64,
    /// Steps done.
    pub step: usize,
    /// Training bytes seen.
    pub bytes: usize,
    /// Mean training loss of the steps since the previous point, nats per byte.
    pub train_loss: f64,
    /// Validation loss at this step (the training's `valid_bytes` of the split), nats per
    /// byte.
    pub valid_loss: f64,
}

impl CurveRow {
    /// The curve's model.
    pub fn key(&self) -> ModelKey {
        ModelKey::new(self.scheme, self.variant.clone())
    }
}

/// The mean loss at one position of the longest evaluation window, over the windows
/// (`per_position/*.csv`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PositionRow {
    /// Position in the window, from 0.
    pub position: usize,
    /// Mean negative log-likelihood at that position, nats per byte.
    pub nats_per_byte: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::csv::{csv_bytes, read_csv};

    #[test]
    fn a_model_has_one_label() {
        assert_eq!(ModelKey::base(Scheme::T5).label(), "t5");
        assert_eq!(ModelKey::new(Scheme::Rope, "ntk").label(), "rope/ntk");
        assert_eq!(
            ModelKey::new(Scheme::Rope, "ft-yarn-matched").label(),
            "rope/ft-yarn-matched"
        );
        assert_eq!(ModelKey::base(Scheme::Xpos).id(), "xpos/base");
        assert!(ModelKey::new(Scheme::Rope, "ft-linear").is_finetune());
        assert!(!ModelKey::new(Scheme::Rope, "linear").is_finetune());
        // every row type gives the same key for the same model
        let row = ResultRow::example(Scheme::Rope, "ntk", 256, 0, 1.0);
        let window = WindowRow {
            scheme: Scheme::Rope,
            variant: "ntk".into(),
            seed: 0,
            mode: Mode::Nonoverlap,
            eval_len: 256,
            start: 0,
            bytes: 256,
            nats_per_byte: 1.0,
        };
        let curve = CurveRow {
            scheme: Scheme::Rope,
            variant: "ntk".into(),
            seed: 0,
            step: 100,
            bytes: 1000,
            train_loss: 2.0,
            valid_loss: 1.0,
        };
        assert_eq!(row.key(), window.key());
        assert_eq!(row.key(), curve.key());
        assert_eq!(row.key().label(), "rope/ntk");
    }

    #[test]
    fn seed_counts_show_only_when_short() {
        assert_eq!(with_seed_count("rope", 3, 3), "rope");
        assert_eq!(with_seed_count("rope/ntk", 1, 3), "rope/ntk (1 of 3 seeds)");
        assert_eq!(with_seed_count("t5", 2, 3), "t5 (2 of 3 seeds)");
        assert_eq!(with_seed_count("t5", 0, 1), "t5 (0 of 1 seed)");
    }

    #[test]
    fn rows_are_written_with_a_header_of_the_field_names() {
        let row = ResultRow {
            scheme: Scheme::Rope,
            variant: "ft-yarn".into(),
            train_len: 256,
            eval_len: 512,
            mode: Mode::Nonoverlap,
            nats_per_byte: 1.25,
            std_error: 0.5,
            bits_per_byte: 1.25 / std::f64::consts::LN_2,
            perplexity: 1.25f64.exp(),
            tokens_scored: 100,
            steps: 600,
            params: 826_112,
            seed: 0,
            scaling_factor: Some(2.0),
        };
        let text = String::from_utf8(csv_bytes(&[row.clone(), row]).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "scheme,variant,train_len,eval_len,mode,nats_per_byte,std_error,bits_per_byte,perplexity,tokens_scored,steps,params,seed,scaling_factor"
        );
        assert!(
            lines[1].starts_with("rope,ft-yarn,256,512,nonoverlap,1.25,0.5,")
                && lines[1].ends_with(",0,2.0"),
            "{}",
            lines[1]
        );
        // read back as written, the scaling factor included; an empty factor reads as none
        let file = tempfile::Builder::new()
            .prefix("posenc-rows-")
            .suffix(".csv")
            .tempfile()
            .unwrap();
        let path = file.path();
        std::fs::write(path, &text).unwrap();
        let back: Vec<ResultRow> = read_csv(path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].scaling_factor, Some(2.0));
        assert_eq!(back[0].eval_len, 512);
        std::fs::write(path, text.replace(",0,2.0", ",0,")).unwrap();
        let back: Vec<ResultRow> = read_csv(path).unwrap();
        assert_eq!(back[1].scaling_factor, None);
        // a scheme or mode the crate does not know is an error naming the file
        std::fs::write(path, text.replace("rope,ft-yarn", "bogus,ft-yarn")).unwrap();
        let e = read_csv::<ResultRow>(path).unwrap_err().to_string();
        assert!(e.contains("posenc-rows-"), "{e}");
        std::fs::write(path, text.replace("nonoverlap", "overlap")).unwrap();
        assert!(read_csv::<ResultRow>(path).is_err());
    }

    #[test]
    fn curve_and_position_rows_have_the_shipped_headers() {
        let curve = CurveRow {
            scheme: Scheme::Alibi,
            variant: "base".into(),
            seed: 2,
            step: 100,
            bytes: 409_600,
            train_loss: 3.5,
            valid_loss: 2.25,
        };
        let text = String::from_utf8(csv_bytes(&[curve]).unwrap()).unwrap();
        assert_eq!(
            text,
            "scheme,variant,seed,step,bytes,train_loss,valid_loss\nalibi,base,2,100,409600,3.5,2.25\n"
        );
        let position = PositionRow {
            position: 3,
            nats_per_byte: 1.5,
        };
        let text = String::from_utf8(csv_bytes(&[position]).unwrap()).unwrap();
        assert_eq!(text, "position,nats_per_byte\n3,1.5\n");
    }
}
