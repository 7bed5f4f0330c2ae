//! The plan of a sweep: its items ([`Item`]), in the order they run and the results list
//! them, and which of them a run takes ([`Selection`]: `--only`, `--shard`; `--list` prints
//! the names).

use crate::error::{ensure, invalid, Result};
use crate::lm::config::SweepConfig;
use crate::lm::eval::ScalingKind;
use crate::lm::model::Scheme;

/// One unit of work of the sweep, for one training seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item {
    /// Train (or reuse) a scheme and evaluate it.
    Base(Scheme, u64),
    /// Evaluate the RoPE checkpoint with a scaling applied at inference.
    Inference(ScalingKind, u64),
    /// Fine-tune the RoPE checkpoint at a longer length with a scaling, and evaluate it with
    /// its training factor and with the factor that matches each length.
    Finetune(ScalingKind, u64),
}

impl Item {
    /// `scheme/seedK`, `rope/KIND/seedK` or `rope-ft-KIND/seedK`: what `--list` prints and
    /// `--only` takes.
    pub fn name(&self) -> String {
        match self {
            Item::Base(s, seed) => format!("{}/seed{seed}", s.name()),
            Item::Inference(k, seed) => format!("rope/{}/seed{seed}", k.name()),
            Item::Finetune(k, seed) => format!("rope-ft-{}/seed{seed}", k.name()),
        }
    }

    /// The item's name as a file stem (`/` replaced by `-`).
    pub(super) fn stem(&self) -> String {
        self.name().replace('/', "-")
    }

    /// The training seed.
    pub(super) fn seed(&self) -> u64 {
        match *self {
            Item::Base(_, seed) | Item::Inference(_, seed) | Item::Finetune(_, seed) => seed,
        }
    }

    /// Whether the item reads the RoPE checkpoint of its seed.
    pub(super) fn needs_rope(&self) -> bool {
        !matches!(self, Item::Base(..))
    }
}

/// Which items of the sweep to run: all, those named (`--only`), or a share (`--shard I/N`,
/// 0-based): the items form groups (a seed's RoPE model with the items that use its
/// checkpoint; every other model alone), and shard `I` takes groups `I, I + N, ...`, so no
/// shard needs another's checkpoint. The results of every item done so far, by any run, are
/// merged into one CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Item names ([`Item::name`]); empty for all.
    pub only: Vec<String>,
    /// `(i, n)`: groups `i, i + n, i + 2n, ...` of the list.
    pub shard: Option<(usize, usize)>,
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
        // group of each item: a new group starts at every base model
        let mut group = Vec::with_capacity(items.len());
        let mut g = 0usize;
        for (k, item) in items.iter().enumerate() {
            if k > 0 && matches!(item, Item::Base(..)) {
                g += 1;
            }
            group.push(g);
        }
        Ok((0..items.len())
            .filter(|&k| self.only.is_empty() || self.only.contains(&names[k]))
            .filter(|&k| self.shard.is_none_or(|(i, n)| group[k] % n == i))
            .collect())
    }
}

impl SweepConfig {
    /// Every item of the sweep, in the order they run and the results list them: for each
    /// seed, RoPE, the items that use its checkpoint (scalings at inference, fine-tunes), then
    /// the other schemes. A run interrupted after a seed's RoPE model and before its
    /// dependants then loses little even where that checkpoint is not kept (seeds after the
    /// first): resuming retrains it before the items that need it.
    pub fn items(&self) -> Vec<Item> {
        let mut items = Vec::new();
        for &seed in &self.seeds {
            if self.schemes.contains(&Scheme::Rope) {
                items.push(Item::Base(Scheme::Rope, seed));
                items.extend(
                    self.rope_inference
                        .iter()
                        .map(|&k| Item::Inference(k, seed)),
                );
            }
            items.extend(self.finetune.kinds.iter().map(|&k| Item::Finetune(k, seed)));
            items.extend(
                self.schemes
                    .iter()
                    .filter(|&&s| s != Scheme::Rope)
                    .map(|&s| Item::Base(s, seed)),
            );
        }
        items
    }
}
