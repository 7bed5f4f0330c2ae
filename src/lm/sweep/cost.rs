//! What each item of a sweep costs before it runs (`posenc sweep --plan`): the bytes it trains
//! on, at which length, the validation positions, and the positions its evaluation runs
//! forward at each length. The cost of a position grows with the length (attention reads every
//! earlier position), so the totals are given by length; a time estimate multiplies them by a
//! measured cost per position at each length.
//!
//! The windows are counted with the evaluation's own layout ([`TargetRegion::windows`],
//! [`window_starts`], [`EvalPlan`]): a matched length $L$ runs about twice the target bytes,
//! a non-overlapping pass the split once (at the longest length, or once per length where a
//! scaling changes with the length).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::plan::Item;
use super::progress::Progress;
use crate::error::Result;
use crate::lm::config::SweepConfig;
use crate::lm::data::{window_starts, TargetRegion};
use crate::lm::eval::{EvalPlan, Mode};
use crate::lm::model::{ModelConfig, Scheme};

/// The cost of one item.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemCost {
    /// [`Item::name`].
    pub name: String,
    /// Training steps (0 for a scaling at inference).
    pub steps: usize,
    /// Sequences per step.
    pub batch: usize,
    /// Bytes per sequence: the training length.
    pub train_len: usize,
    /// Positions of the validation passes during training (at the training length).
    pub valid_positions: usize,
    /// Positions run forward by the evaluation, per length `(L, positions)`, ascending.
    pub eval_positions: Vec<(usize, usize)>,
}

impl ItemCost {
    /// Bytes trained on: steps x batch x length.
    pub fn train_bytes(&self) -> usize {
        self.steps * self.batch * self.train_len
    }

    /// Positions run forward by the evaluation, at all lengths.
    pub fn eval_total(&self) -> usize {
        self.eval_positions.iter().map(|p| p.1).sum()
    }
}

impl SweepConfig {
    /// The cost of every item of `items`, for a validation split of `valid_len` bytes and an
    /// evaluation split of `eval_len` bytes (the lengths of the corpus's files).
    ///
    /// # Errors
    /// An evaluation split too short for the longest length.
    pub fn costs(
        &self,
        items: &[Item],
        valid_len: usize,
        eval_len: usize,
    ) -> Result<Vec<ItemCost>> {
        items
            .iter()
            .map(|item| self.item_cost(item, valid_len, eval_len))
            .collect()
    }

    fn item_cost(&self, item: &Item, valid_len: usize, eval_len: usize) -> Result<ItemCost> {
        let training = self.item_training(item);
        let model = match &training {
            Some((model, _)) => model.clone(),
            None => ModelConfig {
                scheme: Scheme::Rope,
                ..self.model.clone()
            },
        };
        let (steps, batch, valid_positions) = match &training {
            Some((m, t)) => {
                let windows =
                    window_starts(valid_len, m.train_len, m.train_len, Some(t.valid_bytes)).len();
                // a validation every valid_every steps and at the last
                let points = match t.valid_every {
                    0 => 0,
                    every => t.steps.div_ceil(every),
                };
                (t.steps, t.batch, points * windows * m.train_len)
            }
            None => (0, 0, 0),
        };
        let lengths = &self.eval.lengths;
        let at_inference = (self.item_scaling(item), self.item_rope(item));
        let e = &self.eval;
        let longest = e.lengths.iter().copied().max().unwrap_or(1);
        let mut positions: BTreeMap<usize, usize> = BTreeMap::new();
        for &mode in &e.modes {
            let opts = e.options(mode, at_inference, Path::new(""));
            let plan = EvalPlan::new(&model, &opts)?;
            let budget = e.budget(mode);
            let mut add =
                |l: usize, windows: usize| *positions.entry(l).or_default() += windows * l;
            match mode {
                Mode::Matched => {
                    let region = TargetRegion::new(eval_len, longest, e.segment_bytes, budget)?;
                    for &l in lengths {
                        add(l, region.windows(l).len());
                    }
                }
                Mode::Nonoverlap => {
                    let n = window_starts(eval_len, longest, longest, budget).len();
                    if plan.one_pass {
                        add(longest, n);
                    } else {
                        lengths.iter().for_each(|&l| add(l, n));
                    }
                }
                Mode::Sliding => {
                    for &l in lengths {
                        add(l, window_starts(eval_len, l, (l / 2).max(1), budget).len());
                    }
                }
            }
        }
        Ok(ItemCost {
            name: item.name(),
            steps,
            batch,
            train_len: model.train_len,
            valid_positions,
            eval_positions: positions.into_iter().collect(),
        })
    }
}

/// `posenc sweep --plan`: one line per item (training steps x bytes per step at its length,
/// validation and evaluation positions in millions, whether it is finished), the totals by
/// length, then what is finished and an estimate of the time the rest takes ([`Progress`]).
pub fn plan_text(costs: &[ItemCost], progress: &Progress) -> String {
    let mb = |x: usize| x as f64 / 1e6;
    let mut out = format!(
        "{:<28} {:>22} {:>9} {:>8} {:>9} {:>5}\n",
        "item", "training", "train MB", "valid M", "eval M", "done"
    );
    let (mut finished, mut left_seconds, mut unestimated) = (0, 0.0, 0);
    let mut train: BTreeMap<usize, usize> = BTreeMap::new();
    let mut eval: BTreeMap<usize, usize> = BTreeMap::new();
    for c in costs {
        let training = if c.steps == 0 {
            "-".to_string()
        } else {
            format!("{} x {} x {}", c.steps, c.batch, c.train_len)
        };
        let done = progress.is_finished(&c.name);
        if done {
            finished += 1;
        } else {
            match progress.estimate(&c.name, c.steps > 0) {
                Some(s) => left_seconds += s,
                None => unestimated += 1,
            }
        }
        let _ = writeln!(
            out,
            "{:<28} {:>22} {:>9.2} {:>8.2} {:>9.2} {:>5}",
            c.name,
            training,
            mb(c.train_bytes()),
            mb(c.valid_positions),
            mb(c.eval_total()),
            if done { "yes" } else { "" }
        );
        if c.steps > 0 {
            *train.entry(c.train_len).or_default() += c.train_bytes();
            *eval.entry(c.train_len).or_default() += c.valid_positions;
        }
        for &(l, p) in &c.eval_positions {
            *eval.entry(l).or_default() += p;
        }
    }
    let by_length = |m: &BTreeMap<usize, usize>| {
        m.iter()
            .map(|(l, x)| format!("{:.1} M at {l}", mb(*x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let total = |m: &BTreeMap<usize, usize>| mb(m.values().sum());
    let _ = writeln!(
        out,
        "total: {} items; training {:.1} MB ({}); forward-only positions (validation and \
         evaluation) {:.1} M ({})",
        costs.len(),
        total(&train),
        by_length(&train),
        total(&eval),
        by_length(&eval)
    );
    let left = costs.len() - finished;
    let _ = write!(
        out,
        "finished: {finished} of {} items (their rows are in the results table); left: {left}",
        costs.len()
    );
    if left > unestimated {
        let _ = write!(
            out,
            ", about {left_seconds:.0} s ({:.1} h) of one worker at the times their finished \
             seeds took",
            left_seconds / 3600.0
        );
    }
    if unestimated > 0 {
        let _ = write!(out, " ({unestimated} with no finished seed, not estimated)");
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: model length 128, steps 10 of batch 4 (valid every 5: 2 points), lengths
    /// 128 and 256, a test split of 256 + 3 x 100 + 44 bytes in segments of 100, a valid split of
    /// 1000 bytes with 512 scored (3 windows of 128 + 1 bytes).
    #[test]
    fn costs_by_hand() {
        let c: SweepConfig = serde_json::from_str(
            r#"{"schemes": ["rope"], "rope_inference": ["ntk"],
                "train": {"steps": 10, "batch": 4, "valid_every": 5, "valid_bytes": 512},
                "eval": {"lengths": [128, 256], "segment_bytes": 100,
                         "modes": ["matched", "nonoverlap", "sliding"],
                         "sliding_max_bytes": 600},
                "finetune": {"kinds": ["yarn"], "factors": [2], "controls": [], "steps": 4,
                             "batch": 2, "valid_every": 2, "seeds": [0]},
                "budget_control": {"schemes": ["rope"], "seeds": [0]},
                "seeds": [0]}"#,
        )
        .unwrap();
        c.validate().unwrap();
        let items = c.items();
        let costs = c.costs(&items, 1000, 600).unwrap();
        let names: Vec<&str> = costs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "rope/seed0",
                "rope/ntk/seed0",
                "rope-ft-yarn-x2/seed0",
                "rope-budget-x2/seed0"
            ]
        );
        // matched: targets 256..556 (3 segments); at 128, 300 / 64 -> 5 windows of 128;
        // at 256, 300 / 128 -> 3 windows of 256
        let matched = [(128, 5 * 128), (256, 3 * 256)];
        // nonoverlap: starts 0..=600 - 257 every 256: 0, 256 -> 2 windows, one pass at 256
        // (NTK's factor changes with the length: a pass per length)
        // sliding: 128: starts 0..=471 every 64: 8 windows; 256: 0..=343 every 128: 3
        let sliding = [(128, 8 * 128), (256, 3 * 256)];
        let base = &costs[0];
        assert_eq!((base.steps, base.batch, base.train_len), (10, 4, 128));
        assert_eq!(base.train_bytes(), 5120);
        // 2 validation points x 3 windows x 128
        assert_eq!(base.valid_positions, 2 * 3 * 128);
        let want = |nonoverlap: [(usize, usize); 2]| -> Vec<(usize, usize)> {
            (0..2)
                .map(|k| (matched[k].0, matched[k].1 + nonoverlap[k].1 + sliding[k].1))
                .collect()
        };
        assert_eq!(base.eval_positions, want([(128, 0), (256, 2 * 256)]));
        let ntk = &costs[1];
        assert_eq!(
            (ntk.steps, ntk.train_bytes(), ntk.valid_positions),
            (0, 0, 0)
        );
        assert_eq!(ntk.eval_positions, want([(128, 2 * 128), (256, 2 * 256)]));
        // the fine-tune: 4 steps of 1 x 256 bytes (batch 2 / factor 2), validation every 2
        // steps (2 points) on 1 window of 256 of the 512 bytes; scored as the base model (its
        // scaling fixed: one nonoverlap pass)
        let ft = &costs[2];
        assert_eq!((ft.steps, ft.batch, ft.train_len), (4, 1, 256));
        assert_eq!(ft.valid_positions, 2 * 256);
        assert_eq!(ft.eval_positions, want([(128, 0), (256, 2 * 256)]));
        // the budget control: twice the steps and validation points
        let budget = &costs[3];
        assert_eq!((budget.steps, budget.valid_positions), (20, 4 * 3 * 128));
        let text = plan_text(&costs, &Progress::default());
        assert!(text.contains("rope-ft-yarn-x2/seed0"), "{text}");
        assert!(text.contains("4 x 1 x 256"), "{text}");
        // training: 5120 + 10240 at 128, 1024 at 256
        assert!(
            text.contains("training 0.0 MB (0.0 M at 128, 0.0 M at 256)"),
            "{text}"
        );
        assert!(text.starts_with("item"), "{text}");
        assert!(
            text.ends_with(
                "finished: 0 of 4 items (their rows are in the results table); left: 4 \
                 (4 with no finished seed, not estimated)\n"
            ),
            "{text}"
        );
    }

    /// A finished item is marked and not counted in what is left; the others are estimated
    /// from their finished seeds.
    #[test]
    fn the_plan_says_what_is_finished_and_estimates_the_rest() {
        let c: SweepConfig = serde_json::from_str(
            r#"{"schemes": ["nope"], "seeds": [0, 1, 2],
                "finetune": {"kinds": [], "controls": []}, "budget_control": {"schemes": []}}"#,
        )
        .unwrap();
        let items = c.items();
        let costs = c.costs(&items, 100_000, 300_000).unwrap();
        let progress = Progress::from_timings([super::super::SweepTiming {
            name: "nope/seed0".into(),
            train_seconds: 1000.0,
            eval_seconds: 800.0,
        }]);
        let text = plan_text(&costs, &progress);
        let line = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(line("nope/seed0").ends_with("yes"), "{text}");
        assert!(!line("nope/seed1").ends_with("yes"), "{text}");
        assert!(
            text.ends_with(
                "finished: 1 of 3 items (their rows are in the results table); left: 2, about \
                 3600 s (1.0 h) of one worker at the times their finished seeds took\n"
            ),
            "{text}"
        );
    }
}
