//! What a sweep recorded about itself (`sweep.json` beside its results: the configuration it
//! ran, [`read_record`]) held against its result rows: each model's rows record one step
//! count and one parameter count, and a model trained from scratch the recorded steps
//! ([`row_problems`]); each row's RoPE scaling factor follows the rule of its variant
//! ([`expected_factor`], [`factor_problems`]).
//!
//! The rule, for a model trained at $L_{train}$ and scored at $L$:
//! $s = L / L_{train}$ for a scaling applied at inference, the recorded fixed factor for
//! dynamic NTK (its base grows with $L$ instead), $f$ for a fine-tune at $f \cdot L_{train}$
//! scored with the scaling it was trained with (`ft-yarn-x4`), $L / L_{train}$ again for one
//! scored with the matched factor (`ft-yarn-matched`), and no factor for a model without a
//! RoPE scaling (`base`, a budget control `budget-x2`, `rerope`, `log-n`, a control `ft-x16`).

use std::path::Path;

use serde_json::{json, Value};

use super::rows::{is_budget_variant, ModelKey, ResultRow, BASE};
use crate::encodings::rope::{RampBounds, ScalingKind};
use crate::error::{Error, Result};
use crate::lm::config::{InferenceMethod, SweepConfig};

/// The sweep's record beside its results: `sweep.json`.
pub const RECORD_FILE: &str = "sweep.json";

/// The configuration a sweep recorded in `dir/sweep.json` (its `config`).
///
/// The first shipped sweep (`data/results/`) recorded its fine-tunes before they had several
/// factors: one `factor`, the `batch` at that factor, no controls, validation on the training
/// schedule and the reference YaRN ramp. Such a record is read as the configuration that
/// trains the same models: `factors` $= \[f\]$, `batch` $= f \cdot$ batch, no controls, the
/// training's `valid_every`, every seed, [`RampBounds::default`].
///
/// # Errors
/// [`Error::Io`] for a missing file, [`Error::Format`] for a record without `config` or with a
/// configuration [`SweepConfig`] refuses (an unknown key included).
///
/// # Examples
/// ```
/// let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
/// let record = posenc::results::read_record(&dir)?;
/// assert_eq!(record.finetune.factors, [2]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn read_record(dir: &Path) -> Result<SweepConfig> {
    let path = dir.join(RECORD_FILE);
    let format = |message: String| Error::Format {
        path: path.display().to_string(),
        message,
    };
    let mut record: Value = crate::io::read_json(&path)?;
    let mut config = record
        .get_mut("config")
        .map(Value::take)
        .ok_or_else(|| format("no `config`".into()))?;
    upgrade_single_factor(&mut config);
    serde_json::from_value(config).map_err(|e| format(e.to_string()))
}

/// The first sweep's fine-tune section in today's terms (see [`read_record`]).
fn upgrade_single_factor(config: &mut Value) {
    let valid_every = config["train"]["valid_every"].clone();
    let seeds = config["seeds"].clone();
    let Some(ft) = config.get_mut("finetune").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(factor) = ft.remove("factor") else {
        return;
    };
    let f = factor.as_u64().unwrap_or(1);
    if let Some(batch) = ft.get("batch").and_then(Value::as_u64) {
        ft.insert("batch".into(), json!(batch * f));
    }
    ft.insert("factors".into(), json!([factor]));
    ft.insert("controls".into(), json!([]));
    ft.insert("valid_every".into(), valid_every);
    ft.insert("seeds".into(), seeds);
    if config.get("rope_bounds").is_none() {
        config["rope_bounds"] = serde_json::to_value(RampBounds::default()).unwrap_or_default();
    }
}

/// The RoPE scaling factor a row of `variant` at `eval_len` is scored with (see the module
/// documentation), for a sweep trained at `record.model.train_len`.
///
/// # Errors
/// [`Error::InvalidParameter`] for a variant that is neither `base`, a budget control
/// (`budget-x…`), a fine-tune (`ft-…`) nor an inference method of the sweep, and for an unmatched fine-tune without a factor in its
/// name when the record has several.
///
/// # Examples
/// ```
/// use posenc::lm::config::SweepConfig;
/// let record = SweepConfig::default(); // trained at 128 bytes
/// let at = |variant, len| posenc::results::expected_factor(&record, variant, len).unwrap();
/// assert_eq!(at("yarn", 2048), Some(16.0));
/// assert_eq!(at("ft-yarn-x4", 2048), Some(4.0));
/// assert_eq!(at("dynamic", 2048), Some(record.dynamic_factor));
/// assert_eq!(at("rerope", 2048), None);
/// ```
pub fn expected_factor(
    record: &SweepConfig,
    variant: &str,
    eval_len: usize,
) -> Result<Option<f64>> {
    let matched = eval_len as f64 / record.model.train_len.max(1) as f64;
    if variant == BASE || is_budget_variant(variant) {
        return Ok(None); // trained from scratch, without a scaling
    }
    if let Some(tune) = variant.strip_prefix("ft-") {
        if tune.ends_with("-matched") {
            return Ok(Some(matched));
        }
        if tune.starts_with('x') {
            return Ok(None); // a control without a scaling: ft-x16
        }
        return match tune
            .rsplit_once("-x")
            .and_then(|(_, f)| f.parse::<f64>().ok())
        {
            Some(f) => Ok(Some(f)),
            None if record.finetune.factors.len() == 1 => {
                Ok(Some(record.finetune.factors[0] as f64))
            }
            None => Err(crate::error::invalid(
                "variant",
                variant,
                "a fine-tune named with its factor (ft-yarn-x4)",
            )),
        };
    }
    let method: InferenceMethod = variant.parse()?;
    Ok(match method.scaling_kind() {
        None => None,
        Some(ScalingKind::Dynamic) => Some(record.dynamic_factor),
        Some(_) => Some(matched),
    })
}

/// One sentence per result row whose scaling factor differs from [`expected_factor`] (by
/// more than $10^{-9}$), and per fine-tune row whose training length is not its factor times
/// the record's; empty when every row follows the rule.
///
/// # Errors
/// As [`expected_factor`].
pub fn factor_problems(record: &SweepConfig, rows: &[ResultRow]) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for r in rows {
        let want = expected_factor(record, &r.variant, r.eval_len)?;
        let same = match (r.scaling_factor, want) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9,
            (x, y) => x.is_none() && y.is_none(),
        };
        let name = || {
            format!(
                "{} {} {} seed {}",
                r.key().label(),
                r.mode.name(),
                r.eval_len,
                r.seed
            )
        };
        if !same {
            problems.push(format!(
                "{}: factor {:?}, want {want:?}",
                name(),
                r.scaling_factor
            ));
        }
        let trained = ModelKey::new(r.scheme, r.variant.clone());
        let tuned = expected_factor(record, &r.variant, record.model.train_len)?;
        if trained.is_finetune() && !r.variant.ends_with("-matched") {
            if let Some(f) = tuned {
                let want_len = (f * record.model.train_len as f64).round() as usize;
                if r.train_len != want_len {
                    problems.push(format!(
                        "{}: trained at {} bytes, want {want_len}",
                        name(),
                        r.train_len
                    ));
                }
            }
        }
    }
    Ok(problems)
}

/// One sentence per model whose rows record more than one step count or parameter count, and
/// per model trained from scratch (not a fine-tune) whose rows record other steps than the
/// record's `train.steps` (or the budget control's multiple of them); empty when none.
/// The rows come from the models that were scored, the record from the sweep's plan: two
/// independent accounts of the same training.
pub fn row_problems(record: &SweepConfig, rows: &[ResultRow]) -> Vec<String> {
    let mut models: Vec<(ModelKey, Vec<&ResultRow>)> = Vec::new();
    for r in rows {
        match models.iter_mut().find(|(k, _)| *k == r.key()) {
            Some((_, of)) => of.push(r),
            None => models.push((r.key(), vec![r])),
        }
    }
    let budget = record.train.steps * record.budget_control.multiple.max(1);
    let mut problems = Vec::new();
    for (model, of) in &models {
        let (steps, params) = (of[0].steps, of[0].params);
        if of.iter().any(|r| r.steps != steps || r.params != params) {
            problems.push(format!(
                "{}: steps or parameters differ between its rows",
                model.label()
            ));
        }
        if !model.is_finetune() && steps != record.train.steps && steps != budget {
            problems.push(format!(
                "{}: {steps} steps, the record says {}",
                model.label(),
                record.train.steps
            ));
        }
    }
    problems
}

/// The training seeds the record plans for `model`: the fine-tunes' (`finetune.seeds`) for a
/// fine-tune (`ft-…`), the budget control's (`budget_control.seeds`) for `budget-x…`, and every
/// seed of the sweep (`seeds`) otherwise: a model trained from scratch and the RoPE extensions
/// at inference, which score its checkpoints.
///
/// # Examples
/// ```
/// use posenc::lm::config::SweepConfig;
/// use posenc::results::{planned_seeds, ModelKey, Scheme};
/// let record = SweepConfig::default(); // seeds 0 to 4, fine-tunes and budget control 0 to 2
/// assert_eq!(planned_seeds(&record, &ModelKey::base(Scheme::T5)), [0, 1, 2, 3, 4]);
/// assert_eq!(planned_seeds(&record, &ModelKey::new(Scheme::Rope, "yarn")), [0, 1, 2, 3, 4]);
/// assert_eq!(planned_seeds(&record, &ModelKey::new(Scheme::Rope, "ft-yarn-x4")), [0, 1, 2]);
/// assert_eq!(planned_seeds(&record, &ModelKey::new(Scheme::Nope, "budget-x2")), [0, 1, 2]);
/// ```
pub fn planned_seeds<'a>(record: &'a SweepConfig, model: &ModelKey) -> &'a [u64] {
    if model.is_finetune() {
        &record.finetune.seeds
    } else if model.is_budget_control() {
        &record.budget_control.seeds
    } else {
        &record.seeds
    }
}

/// One entry per model of the rows whose seeds are not the ones the record plans for it
/// ([`planned_seeds`]): `label (seeds [0, 1] of [0, 1, 2, 3, 4])`, in order of first
/// appearance; empty when every model has every planned seed and no other.
pub fn seed_gaps(record: &SweepConfig, rows: &[ResultRow]) -> Vec<String> {
    super::checks::models_with_seeds(rows)
        .into_iter()
        .filter_map(|(model, seeds)| {
            let planned = planned_seeds(record, &model);
            (seeds != planned)
                .then(|| format!("{} (seeds {seeds:?} of {planned:?})", model.label()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::files::read_results;
    use crate::results::rows::Scheme;

    fn shipped(dir: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
    }

    /// The first sweep's record reads as one fine-tune factor with its batch at factor 1; a
    /// current record reads as it is.
    #[test]
    fn records_old_and_new_read_as_one_configuration() {
        let old = read_record(&shipped("data/results")).unwrap();
        assert_eq!(old.finetune.factors, [2]);
        assert_eq!(old.finetune_train(2, 0).batch, 16);
        assert_eq!(old.finetune.valid_every, old.train.valid_every);
        assert!(old.finetune.controls.is_empty());
        let dir = shipped("data/sweep/results");
        if dir.join(RECORD_FILE).is_file() {
            let new = read_record(&dir).unwrap();
            let value: Value = crate::io::read_json(&dir.join(RECORD_FILE)).unwrap();
            let direct: SweepConfig = serde_json::from_value(value["config"].clone()).unwrap();
            assert_eq!(new, direct);
        }
        let e = read_record(&shipped("data/missing")).unwrap_err();
        assert!(e.to_string().contains("sweep.json"), "{e}");
    }

    /// The shipped checkpoints are the models the upgraded record describes.
    #[test]
    fn shipped_checkpoints_match_the_upgraded_record() {
        let record = read_record(&shipped("data/results")).unwrap();
        let checkpoints = shipped("data/checkpoints");
        let models = crate::results::read_checkpoints(&[checkpoints.as_path()]).unwrap();
        let setup = crate::results::check_setup(&record, &models);
        assert!(setup.problems.is_empty(), "{:?}", setup.problems);
        assert!(setup
            .rows
            .iter()
            .any(|r| r.describe() == "fine-tune x2 (yarn)"));
    }

    /// A model is complete with the seeds of its kind: every seed from scratch and at
    /// inference, the fine-tunes' and the budget control's own (0 to 2 by default).
    #[test]
    fn seed_gaps_name_the_models_without_their_planned_seeds() {
        let record = SweepConfig::default();
        let mut rows = Vec::new();
        for (scheme, variant, seeds) in [
            (Scheme::Rope, "base", 0..2),
            (Scheme::Rope, "ft-yarn-x2", 0..3),
            (Scheme::Alibi, "base", 0..5),
            (Scheme::Nope, "budget-x2", 0..2),
            (Scheme::Rope, "yarn", 0..5),
        ] {
            for seed in seeds {
                rows.push(ResultRow::example(scheme, variant, 128, seed, 1.5));
                rows.push(ResultRow::example(scheme, variant, 256, seed, 1.5));
            }
        }
        assert_eq!(
            seed_gaps(&record, &rows),
            [
                "rope (seeds [0, 1] of [0, 1, 2, 3, 4])",
                "nope/budget-x2 (seeds [0, 1] of [0, 1, 2])"
            ]
        );
        rows.push(ResultRow::example(Scheme::Rope, "ft-yarn-x2", 128, 4, 1.5));
        assert_eq!(
            seed_gaps(&record, &rows)[1],
            "rope/ft-yarn-x2 (seeds [0, 1, 2, 4] of [0, 1, 2])",
            "a seed the record does not plan is a gap too"
        );
    }

    #[test]
    fn every_variant_has_its_factor() {
        let mut record = SweepConfig::default();
        let at = |r: &SweepConfig, v: &str, l| expected_factor(r, v, l).unwrap();
        assert_eq!(at(&record, "base", 2048), None);
        assert_eq!(at(&record, "linear", 256), Some(2.0));
        assert_eq!(at(&record, "yarn+log-n", 512), Some(4.0));
        assert_eq!(at(&record, "log-n", 512), None);
        assert_eq!(at(&record, "ft-linear-x8", 128), Some(8.0));
        assert_eq!(at(&record, "ft-x16", 128), None);
        assert_eq!(at(&record, "budget-x2", 2048), None);
        assert_eq!(at(&record, "ft-yarn-matched", 1024), Some(8.0));
        assert!(expected_factor(&record, "ft-yarn", 128).is_err()); // four factors
        assert!(expected_factor(&record, "wobble", 128).is_err());
        record.finetune.factors = vec![2];
        assert_eq!(at(&record, "ft-yarn", 1024), Some(2.0));
    }

    /// The shipped rows follow the rule; one changed factor, step or length is named.
    #[test]
    fn shipped_rows_follow_the_record_and_a_change_is_named() {
        let dir = shipped("data/results");
        let (record, mut rows) = (
            read_record(&dir).unwrap(),
            read_results(&dir.join("ppl_vs_length.csv")).unwrap(),
        );
        assert_eq!(
            factor_problems(&record, &rows).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(row_problems(&record, &rows), Vec::<String>::new());
        let i = rows
            .iter()
            .position(|r| r.variant == "ntk" && r.eval_len == 512)
            .unwrap();
        rows[i].scaling_factor = Some(2.0);
        let j = rows.iter().position(|r| r.scheme == Scheme::Alibi).unwrap();
        rows[j].steps = 1999;
        let k = rows.iter().position(|r| r.variant == "ft-yarn").unwrap();
        rows[k].train_len = 128;
        let factors = factor_problems(&record, &rows).unwrap();
        assert_eq!(factors.len(), 2, "{factors:?}");
        assert!(
            factors[0].contains("rope/ntk nonoverlap 512")
                || factors[1].contains("rope/ntk nonoverlap 512")
        );
        let steps = row_problems(&record, &rows);
        assert!(
            steps
                .iter()
                .any(|p| p.starts_with("alibi: steps or parameters differ")),
            "{steps:?}"
        );
    }
}
