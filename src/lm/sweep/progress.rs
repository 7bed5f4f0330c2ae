//! What a sweep has finished and what is left (`posenc sweep --plan`): the items whose rows are
//! in the results table, and the time the others should take, measured on the same machine: an
//! item of seed $s$ costs what the same item cost at its other seeds (the same model, steps and
//! evaluation; only the initialisation and the data order differ), so the estimate of an item
//! is the mean time of its finished seeds, training and evaluation apart.

use std::collections::BTreeMap;

use super::plan::Item;
use super::store::{finished_record, SweepTiming};
use crate::lm::config::SweepConfig;
use crate::lm::train::read_info;

/// The finished items of a sweep, with their timings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// Timing by item name, for the items whose rows are in the results table.
    finished: BTreeMap<String, SweepTiming>,
}

/// An item's name without its seed: `rope/ntk/seed3` → `rope/ntk`.
fn without_seed(name: &str) -> &str {
    name.rsplit_once("/seed").map_or(name, |(stem, _)| stem)
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

impl Progress {
    /// The items of `items` that `config`'s results folder holds as the configuration
    /// evaluates them (those whose rows are in its table). An item that reused its checkpoint
    /// records no training time; the checkpoint's own record of its training stands for it.
    pub fn read(config: &SweepConfig, items: &[Item]) -> Self {
        let finished = items
            .iter()
            .filter_map(|item| {
                let record = finished_record(config, item)?;
                let mut timing = record.timing;
                if timing.train_seconds == 0.0 && !matches!(item, Item::Inference(..)) {
                    if let Ok(info) = read_info(&config.item_dir(item)) {
                        timing.train_seconds = info.train_seconds;
                    }
                }
                Some((item.name(), timing))
            })
            .collect();
        Self { finished }
    }

    /// Progress from timings given directly (a finished item each).
    pub fn from_timings(timings: impl IntoIterator<Item = SweepTiming>) -> Self {
        Self {
            finished: timings.into_iter().map(|t| (t.name.clone(), t)).collect(),
        }
    }

    /// The names of the finished items, in name order.
    pub fn finished_names(&self) -> Vec<String> {
        self.finished.keys().cloned().collect()
    }

    /// Whether the item named `name` is finished.
    pub fn is_finished(&self, name: &str) -> bool {
        self.finished.contains_key(name)
    }

    /// The seconds the unfinished item `name` should take: the mean training time of its
    /// finished seeds that trained (a seed whose checkpoint was reused records 0), when it
    /// `trains`, plus the mean evaluation time of its finished seeds; `None` when no seed of
    /// it is finished (or none that trained, for an item that trains).
    pub fn estimate(&self, name: &str, trains: bool) -> Option<f64> {
        let stem = without_seed(name);
        let twins: Vec<&SweepTiming> = self
            .finished
            .values()
            .filter(|t| t.name != name && without_seed(&t.name) == stem)
            .collect();
        let eval = mean(twins.iter().map(|t| t.eval_seconds))?;
        let train = if trains {
            mean(twins.iter().map(|t| t.train_seconds).filter(|&s| s > 0.0))?
        } else {
            0.0
        };
        Some(train + eval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(name: &str, train: f64, eval: f64) -> SweepTiming {
        SweepTiming {
            name: name.into(),
            train_seconds: train,
            eval_seconds: eval,
        }
    }

    #[test]
    fn an_item_costs_the_mean_of_its_finished_seeds() {
        let p = Progress::from_timings([
            timing("rope/seed0", 1000.0, 300.0),
            timing("rope/seed1", 0.0, 500.0),
            timing("rope/seed2", 1200.0, 400.0),
            timing("rope/ntk/seed0", 0.0, 200.0),
            timing("nope-ft-x2/seed0", 100.0, 50.0),
        ]);
        assert!(p.is_finished("rope/seed1") && !p.is_finished("rope/seed3"));
        assert_eq!(p.finished_names().len(), 5);
        // training: (1000 + 1200) / 2, the reused seed 1 left out; evaluation (300+500+400)/3
        assert_eq!(p.estimate("rope/seed3", true), Some(1100.0 + 400.0));
        // a scaling at inference does not train
        assert_eq!(p.estimate("rope/ntk/seed4", false), Some(200.0));
        assert_eq!(p.estimate("nope-ft-x2/seed1", true), Some(150.0));
        // no finished seed: no estimate; a name is not its own twin
        assert_eq!(p.estimate("alibi/seed1", true), None);
        let alone = Progress::from_timings([timing("rope/yarn/seed0", 0.0, 9.0)]);
        assert_eq!(alone.estimate("rope/yarn/seed0", false), None);
        // an item that trains, whose only finished seed reused its checkpoint
        let reused = Progress::from_timings([timing("cope/seed0", 0.0, 700.0)]);
        assert_eq!(reused.estimate("cope/seed1", true), None);
        assert_eq!(
            without_seed("rope/dynamic-yarn/seed12"),
            "rope/dynamic-yarn"
        );
        assert_eq!(without_seed("nope"), "nope");
    }
}
