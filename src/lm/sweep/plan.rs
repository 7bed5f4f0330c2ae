//! The plan of a sweep: its items ([`Item`]), in the order they run and the results list
//! them, and which of them a run takes ([`Selection`]: `--only`, `--shard`; `--list` prints
//! the names).
//!
//! Names: a model is `SCHEME` as trained from scratch, else `SCHEME-VARIANT`, and an item is
//! `MODEL/seedK` (an extension at inference, which trains nothing, `rope/METHOD/seedK`,
//! [`InferenceMethod::name`]):
//!
//! | item | variant (results rows) | what it is |
//! |---|---|---|
//! | `alibi/seed0` | `base` | the scheme trained from scratch |
//! | `rope/yarn/seed0` | `yarn` | RoPE's checkpoint with YaRN at inference, factor $L/128$ |
//! | `rope/leaky-rerope/seed0` | `leaky-rerope` | RoPE's checkpoint with Leaky ReRoPE at inference |
//! | `rope/yarn+log-n/seed0` | `yarn+log-n` | YaRN and log-$n$ query scaling at inference |
//! | `rope-ft-yarn-x4/seed0` | `ft-yarn-x4` | RoPE fine-tuned at 4 x 128 bytes with YaRN of factor 4 |
//! | `alibi-ft-x4/seed0` | `ft-x4` | ALiBi fine-tuned the same way (a control) |
//! | `nope-budget-x2/seed0` | `budget-x2` | NoPE trained from scratch with twice the bytes |
//!
//! A fine-tune's rows pair with its base model's (`rope/seed0` for `rope-ft-yarn-x4/seed0`):
//! the same seed, scored on the same target bytes at the same lengths.

use std::collections::BTreeMap;

use crate::error::{ensure, invalid, Result};
use crate::lm::config::{InferenceMethod, SweepConfig};
use crate::lm::eval::ScalingKind;
use crate::lm::model::Scheme;
use crate::results::BASE;

/// One unit of work of the sweep, for one training seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// Train (or reuse) a scheme and evaluate it.
    Base(Scheme, u64),
    /// Evaluate the RoPE checkpoint extended at inference (a scaling, ReRoPE, log-$n$).
    Inference(InferenceMethod, u64),
    /// Fine-tune a scheme's checkpoint of the same seed at `factor` times the length (RoPE
    /// with `scaling` of that factor) and evaluate it at every length, as trained.
    Finetune {
        /// The scheme whose checkpoint it starts from.
        scheme: Scheme,
        /// RoPE's scaling; `None` for a control.
        scaling: Option<ScalingKind>,
        /// The length factor.
        factor: usize,
        /// The seed.
        seed: u64,
    },
    /// Train a scheme from scratch with `multiple` times the bytes (the budget control) and
    /// evaluate it.
    Budget(Scheme, usize, u64),
}

impl Item {
    /// The variant of the item's results rows: `base`, the scaling at inference
    /// (`yarn`), `ft-KIND-xF` (a RoPE fine-tune), `ft-xF` (a control), `budget-xM`.
    pub fn variant(&self) -> String {
        match *self {
            Item::Base(..) => BASE.to_string(),
            Item::Inference(m, _) => m.name(),
            Item::Finetune {
                scaling, factor, ..
            } => match scaling {
                Some(k) => format!("ft-{}-x{factor}", k.name()),
                None => format!("ft-x{factor}"),
            },
            Item::Budget(_, m, _) => format!("budget-x{m}"),
        }
    }

    /// The scheme of the item's model.
    pub fn scheme(&self) -> Scheme {
        match *self {
            Item::Base(s, _) | Item::Budget(s, ..) | Item::Finetune { scheme: s, .. } => s,
            Item::Inference(..) => Scheme::Rope,
        }
    }

    /// The model the item trains, by name: `SCHEME` from scratch, `SCHEME-VARIANT`
    /// otherwise (`rope-ft-yarn-x4`, `nope-budget-x2`); for a scaling at inference, `rope`,
    /// whose checkpoint it evaluates.
    pub fn model(&self) -> String {
        match self {
            Item::Base(..) | Item::Inference(..) => self.scheme().name().to_string(),
            _ => format!("{}-{}", self.scheme().name(), self.variant()),
        }
    }

    /// `MODEL/seedK`, or `rope/KIND/seedK` for a scaling at inference: what `--list` prints
    /// and `--only` takes.
    pub fn name(&self) -> String {
        match self {
            Item::Inference(m, seed) => format!("rope/{}/seed{seed}", m.name()),
            _ => format!("{}/seed{}", self.model(), self.seed()),
        }
    }

    /// The item's name as a file stem (`/` replaced by `-`).
    pub(super) fn stem(&self) -> String {
        self.name().replace('/', "-")
    }

    /// The training seed.
    pub fn seed(&self) -> u64 {
        match *self {
            Item::Base(_, seed)
            | Item::Inference(_, seed)
            | Item::Budget(_, _, seed)
            | Item::Finetune { seed, .. } => seed,
        }
    }

    /// The scheme whose from-scratch checkpoint of the same seed the item reads (a scaling at
    /// inference, a fine-tune), if any.
    pub fn needs(&self) -> Option<Scheme> {
        match *self {
            Item::Inference(..) => Some(Scheme::Rope),
            Item::Finetune { scheme, .. } => Some(scheme),
            Item::Base(..) | Item::Budget(..) => None,
        }
    }

    /// The item's share group: the model it needs, else its own, and its seed. A shard takes
    /// whole groups, so that no shard needs another's checkpoint.
    fn group(&self) -> (String, u64) {
        let model = self
            .needs()
            .map_or_else(|| self.model(), |s| s.name().to_string());
        (model, self.seed())
    }
}

/// Which items of the sweep to run: all, those named (`--only`), all but some (`--left`: the
/// finished ones), or a share of those (`--shard I/N`, 0-based): the chosen items form groups
/// (a seed's from-scratch model with the items that use its checkpoint; every other model
/// alone), and shard `I` takes groups `I, I + N, ...` in the order of the list, so no shard
/// needs another's checkpoint and shards formed together split the chosen items evenly. The
/// results of every item done so far, by any run, are merged into one CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Item names ([`Item::name`]); empty for all.
    pub only: Vec<String>,
    /// `(i, n)`: groups `i, i + n, i + 2n, ...` of the chosen items.
    pub shard: Option<(usize, usize)>,
    /// Item names left out before the groups are formed (`--left`: the finished items).
    pub left_out: Vec<String>,
}

impl Selection {
    /// The chosen items' indices in `items` (of [`SweepConfig::items`]), in order.
    ///
    /// # Errors
    /// A name that is not an item, or a shard `i/n` with `n = 0` or `i >= n`.
    pub fn choose(&self, items: &[Item]) -> Result<Vec<usize>> {
        let names: Vec<String> = items.iter().map(Item::name).collect();
        for want in &self.only {
            if !names.contains(want) {
                return Err(invalid(
                    "--only",
                    want,
                    "an item of `posenc sweep --list` (for example nope/seed0)",
                ));
            }
        }
        if let Some((i, n)) = self.shard {
            ensure(
                n >= 1 && i < n,
                "--shard",
                format!("{i}/{n}"),
                "I/N with 0 <= I < N",
            )?;
        }
        let chosen = (0..items.len()).filter(|&k| {
            (self.only.is_empty() || self.only.contains(&names[k]))
                && !self.left_out.contains(&names[k])
        });
        // the chosen items' groups, numbered in the order they first appear
        let mut groups: BTreeMap<(String, u64), usize> = BTreeMap::new();
        Ok(chosen
            .filter(|&k| {
                let next = groups.len();
                let group = *groups.entry(items[k].group()).or_insert(next);
                self.shard.is_none_or(|(i, n)| group % n == i)
            })
            .collect())
    }
}

impl SweepConfig {
    /// Every item of the sweep, in the order they run and the results list them: for each
    /// seed, each scheme followed by the items that use its checkpoint (RoPE's scalings at
    /// inference, the fine-tunes of the seeds that have them), the fine-tunes of schemes the
    /// sweep does not train from scratch (each trains its base when it is missing), then the
    /// budget control. A run interrupted after a seed's model and before its dependants then
    /// loses little even where that checkpoint is not kept (seeds after the first): resuming
    /// retrains it before the items that need it.
    pub fn items(&self) -> Vec<Item> {
        let finetunes = self.finetunes();
        let mut items = Vec::new();
        for &seed in &self.seeds {
            let tuned = self.finetune.seeds.contains(&seed);
            let dependants = |scheme: Scheme| {
                let inference = (scheme == Scheme::Rope)
                    .then_some(&self.rope_inference)
                    .into_iter()
                    .flatten()
                    .map(move |&k| Item::Inference(k, seed));
                let tunes = finetunes
                    .iter()
                    .filter(move |f| tuned && f.0 == scheme)
                    .map(move |&(scheme, scaling, factor)| Item::Finetune {
                        scheme,
                        scaling,
                        factor,
                        seed,
                    });
                inference.chain(tunes)
            };
            for &scheme in &self.schemes {
                items.push(Item::Base(scheme, seed));
                items.extend(dependants(scheme));
            }
            let mut orphans: Vec<Scheme> = Vec::new();
            for &(scheme, ..) in &finetunes {
                if !self.schemes.contains(&scheme) && !orphans.contains(&scheme) {
                    orphans.push(scheme);
                }
            }
            for scheme in orphans {
                items.extend(dependants(scheme).filter(|i| matches!(i, Item::Finetune { .. })));
            }
            if self.budget_control.seeds.contains(&seed) {
                let m = self.budget_control.multiple;
                items.extend(
                    self.budget_control
                        .schemes
                        .iter()
                        .map(|&s| Item::Budget(s, m, seed)),
                );
            }
        }
        items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(items: &[Item]) -> Vec<String> {
        items.iter().map(Item::name).collect()
    }

    #[test]
    fn names_variants_and_models() {
        let yarn4 = Item::Finetune {
            scheme: Scheme::Rope,
            scaling: Some(ScalingKind::Yarn),
            factor: 4,
            seed: 0,
        };
        let alibi16 = Item::Finetune {
            scheme: Scheme::Alibi,
            scaling: None,
            factor: 16,
            seed: 2,
        };
        let budget = Item::Budget(Scheme::Nope, 2, 1);
        let table = [
            (Item::Base(Scheme::T5, 3), "t5/seed3", "base", "t5", None),
            (
                Item::Inference(InferenceMethod::scaling(ScalingKind::Llama3), 1),
                "rope/llama3/seed1",
                "llama3",
                "rope",
                Some(Scheme::Rope),
            ),
            (
                yarn4,
                "rope-ft-yarn-x4/seed0",
                "ft-yarn-x4",
                "rope-ft-yarn-x4",
                Some(Scheme::Rope),
            ),
            (
                alibi16,
                "alibi-ft-x16/seed2",
                "ft-x16",
                "alibi-ft-x16",
                Some(Scheme::Alibi),
            ),
            (
                budget,
                "nope-budget-x2/seed1",
                "budget-x2",
                "nope-budget-x2",
                None,
            ),
        ];
        for (item, name, variant, model, needs) in table {
            assert_eq!(
                (
                    item.name().as_str(),
                    item.variant().as_str(),
                    item.model().as_str(),
                    item.needs()
                ),
                (name, variant, model, needs)
            );
        }
        assert_eq!(yarn4.stem(), "rope-ft-yarn-x4-seed0");
        assert_eq!((alibi16.scheme(), alibi16.seed()), (Scheme::Alibi, 2));
        // every fine-tune is a fine-tune to the results, the budget control a model of its own
        use crate::results::ModelKey;
        assert!(ModelKey::new(Scheme::Rope, yarn4.variant()).is_finetune());
        assert!(ModelKey::new(Scheme::Alibi, alibi16.variant()).is_finetune());
        assert!(!ModelKey::new(Scheme::Nope, budget.variant()).is_finetune());
    }

    /// A small sweep: 2 schemes, 3 seeds, fine-tunes and budget control on 2 of them.
    fn small() -> SweepConfig {
        serde_json::from_str(
            r#"{"schemes": ["rope", "alibi"], "rope_inference": ["ntk"], "seeds": [0, 1, 2],
                "finetune": {"kinds": ["yarn"], "factors": [2, 4],
                             "controls": [{"scheme": "alibi", "factors": [4]},
                                          {"scheme": "t5", "factors": [2]}],
                             "seeds": [0, 2]},
                "budget_control": {"schemes": ["alibi"], "seeds": [0]}}"#,
        )
        .unwrap()
    }

    #[test]
    fn items_follow_their_base_and_seeds_say_which_run() {
        let c = small();
        c.validate().unwrap();
        let seed0 = [
            "rope/seed0",
            "rope/ntk/seed0",
            "rope-ft-yarn-x2/seed0",
            "rope-ft-yarn-x4/seed0",
            "alibi/seed0",
            "alibi-ft-x4/seed0",
            "t5-ft-x2/seed0",
            "alibi-budget-x2/seed0",
        ];
        let seed1 = ["rope/seed1", "rope/ntk/seed1", "alibi/seed1"];
        let want: Vec<String> = seed0
            .iter()
            .chain(&seed1)
            .map(|s| s.to_string())
            .chain(seed0[..7].iter().map(|s| s.replace("seed0", "seed2")))
            .collect();
        assert_eq!(names(&c.items()), want);
    }

    #[test]
    fn shards_keep_each_model_with_its_dependants() {
        let c = small();
        let items = c.items();
        let shard = |i, n| {
            let s = Selection {
                shard: Some((i, n)),
                ..Selection::default()
            };
            names(
                &s.choose(&items)
                    .unwrap()
                    .iter()
                    .map(|&k| items[k])
                    .collect::<Vec<_>>(),
            )
        };
        // groups in order: rope/0, alibi/0, t5/0, alibi-budget-x2/0, rope/1, alibi/1, ...
        assert_eq!(
            shard(1, 4),
            ["alibi/seed0", "alibi-ft-x4/seed0", "alibi/seed1"]
        );
        assert_eq!(
            shard(2, 4),
            [
                "t5-ft-x2/seed0",
                "rope/seed2",
                "rope/ntk/seed2",
                "rope-ft-yarn-x2/seed2",
                "rope-ft-yarn-x4/seed2"
            ]
        );
        let mut all: Vec<String> = (0..3).flat_map(|i| shard(i, 3)).collect();
        all.sort();
        let mut every = names(&items);
        every.sort();
        assert_eq!(all, every, "the shards are a partition");
        // shards split what is chosen: without the first two groups, shard 0 of 4 takes the
        // third and the seventh
        let left = Selection {
            shard: Some((0, 4)),
            left_out: vec![
                "rope/seed0".into(),
                "rope/ntk/seed0".into(),
                "rope-ft-yarn-x2/seed0".into(),
                "rope-ft-yarn-x4/seed0".into(),
                "alibi/seed0".into(),
                "alibi-ft-x4/seed0".into(),
            ],
            ..Selection::default()
        };
        let chosen: Vec<Item> = left
            .choose(&items)
            .unwrap()
            .iter()
            .map(|&k| items[k])
            .collect();
        // groups now: t5-ft-x2/0, alibi-budget-x2/0, rope/1, alibi/1, rope/2, alibi/2, ...
        assert_eq!(
            names(&chosen),
            [
                "t5-ft-x2/seed0",
                "rope/seed2",
                "rope/ntk/seed2",
                "rope-ft-yarn-x2/seed2",
                "rope-ft-yarn-x4/seed2"
            ]
        );
        let bad = Selection {
            only: vec!["rope-ft-yarn/seed0".into()],
            ..Selection::default()
        };
        assert!(bad
            .choose(&items)
            .unwrap_err()
            .to_string()
            .contains("--only"));
    }

    #[test]
    fn the_default_sweep() {
        let c = SweepConfig::default();
        let items = c.items();
        let count = |f: fn(&Item) -> bool| items.iter().filter(|i| f(i)).count();
        // 20 schemes x 5 seeds; (6 scalings + 10 dynamic YaRN, ReRoPE, Self-Extend and
        // temperature methods) x 5 seeds; (2 kinds x 4 factors + ALiBi x 4 + T5 x 1) x 3 seeds;
        // 5 schemes x 3 seeds
        assert_eq!(count(|i| matches!(i, Item::Base(..))), 100);
        assert_eq!(count(|i| matches!(i, Item::Inference(..))), 80);
        assert_eq!(count(|i| matches!(i, Item::Finetune { .. })), 39);
        assert_eq!(count(|i| matches!(i, Item::Budget(..))), 15);
        let mut unique = names(&items);
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), items.len(), "names are unique");
        // RoPE's checkpoint of seed 0 followed by every extension at inference, the scalings
        // first (as before ReRoPE), then ReRoPE, Leaky ReRoPE, Self-Extend and log-n, then
        // dynamic YaRN and floor-log
        let rope0 = names(&items)
            .iter()
            .position(|n| n == "rope/seed0")
            .unwrap();
        let methods = [
            "linear",
            "ntk",
            "dynamic",
            "ntk-by-parts",
            "yarn",
            "llama3",
            "rerope",
            "leaky-rerope",
            "self-extend",
            "log-n",
            "ntk+log-n",
            "yarn+log-n",
            "rerope+log-n",
            "dynamic-yarn",
            "floor-log",
            "yarn+floor-log",
        ];
        let want: Vec<String> = methods.iter().map(|m| format!("rope/{m}/seed0")).collect();
        assert_eq!(names(&items[rope0 + 1..rope0 + 17]), want);
        assert_eq!(
            items[rope0 + 8].variant(),
            "leaky-rerope",
            "the variant of the results rows"
        );
    }
}
