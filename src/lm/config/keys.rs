//! Which keys of a [`ModelConfig`] make a model what it is: the [`MODEL_KEYS`] every scheme
//! reads, and each scheme's own ([`Scheme::position_keys`]). Two configurations that agree on
//! these train the same model from the same seed, whatever their other schemes' keys say, so
//! a sweep keeps a checkpoint when only another scheme's key changed
//! ([`ModelConfig::differing_key`]).

use serde_json::Value;

use super::{ModelConfig, Scheme};

/// The keys every scheme reads: the model apart from its position encoding, the rows of the
/// positions' tables (`max_positions`, which clamps every scheme's absolute positions) and the
/// RoPE scaling a model was fine-tuned with (held by every fine-tuned checkpoint).
pub const MODEL_KEYS: [&str; 9] = [
    "scheme",
    "vocab",
    "layers",
    "d_model",
    "heads",
    "d_ff",
    "train_len",
    "max_positions",
    "rope_scaling",
];

impl Scheme {
    /// The keys of [`ModelConfig`] that configure this scheme's positions, beside
    /// [`MODEL_KEYS`]. A key read by no scheme's trained form here is ignored by that scheme:
    /// the test `tests/train` `keys::a_key_outside_a_schemes_list_never_changes_its_model`
    /// changes every other key and compares the weights and the losses.
    pub fn position_keys(&self) -> &'static [&'static str] {
        match self {
            Scheme::Nope | Scheme::Sinusoidal | Scheme::Learned | Scheme::Alibi => &[],
            Scheme::Xl | Scheme::Kerple => &[],
            Scheme::Shaw => &["shaw_max_relative"],
            Scheme::T5 | Scheme::Tupe => &["t5_num_buckets", "t5_max_distance"],
            Scheme::Deberta => &["deberta_bucket_size", "deberta_max_position"],
            Scheme::Rope => &["rope_base"],
            Scheme::Xpos => &["rope_base", "xpos_scale_base"],
            Scheme::Fire => &["fire_hidden", "fire_c", "fire_threshold"],
            Scheme::Dpb => &["dpb_hidden", "dpb_depth", "dpb_log_distance", "dpb_norm"],
            Scheme::PartialRope => &["rope_base", "partial_rotary_factor"],
            Scheme::PRope => &["rope_base", "p_rope_kept"],
            Scheme::RopeNope => &["rope_base", "nope_every"],
            Scheme::RandomRope => &["rope_base", "random_positions_max", "random_positions_eval"],
            Scheme::DdAlibi => &["dd_alibi_gate_bias"],
            Scheme::Cope => &["cope_max_pos"],
        }
    }
}

impl ModelConfig {
    /// The first key of [`MODEL_KEYS`] and of this scheme's [`Scheme::position_keys`] whose
    /// value differs in `other`, or `None` when the two configure the same model (keys of
    /// other schemes may differ).
    ///
    /// # Examples
    /// ```
    /// use posenc::lm::model::{ModelConfig, Scheme};
    /// let rope = ModelConfig::default();
    /// let other_fire = ModelConfig { fire_threshold: 128.0, ..rope.clone() };
    /// assert_eq!(rope.differing_key(&other_fire), None);
    /// let other_base = ModelConfig { rope_base: 500_000.0, ..rope.clone() };
    /// assert_eq!(rope.differing_key(&other_base), Some("rope_base"));
    /// let alibi = ModelConfig { scheme: Scheme::Alibi, ..rope.clone() };
    /// assert_eq!(rope.differing_key(&alibi), Some("scheme"));
    /// ```
    pub fn differing_key(&self, other: &ModelConfig) -> Option<&'static str> {
        let (a, b) = (keyed(self), keyed(other));
        MODEL_KEYS
            .iter()
            .chain(self.scheme.position_keys())
            .find(|&&key| a.get(key) != b.get(key))
            .copied()
    }
}

/// The configuration as a JSON object (every key present: serde writes each field).
fn keyed(c: &ModelConfig) -> serde_json::Map<String, Value> {
    match serde_json::to_value(c) {
        Ok(Value::Object(map)) => map,
        // a struct of plain fields always serialises to an object
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of the configuration is either the model's or claimed by a scheme, and every
    /// key a scheme claims exists: a new key must say which schemes read it.
    #[test]
    fn every_key_is_the_models_or_a_schemes() {
        let keys: Vec<String> = keyed(&ModelConfig::default()).keys().cloned().collect();
        for key in &keys {
            let claimed = MODEL_KEYS.contains(&key.as_str())
                || Scheme::ALL
                    .iter()
                    .any(|s| s.position_keys().contains(&key.as_str()));
            assert!(claimed, "{key} is read by no scheme and is not a model key");
        }
        for s in Scheme::ALL {
            for key in MODEL_KEYS.iter().chain(s.position_keys()) {
                assert!(keys.iter().any(|k| k == key), "{}: no key {key}", s.name());
            }
        }
    }

    #[test]
    fn the_key_named_is_the_first_that_differs() {
        let fire = ModelConfig::tiny(Scheme::Fire);
        let mut other = fire.clone();
        other.shaw_max_relative += 1;
        other.rope_base *= 2.0;
        assert_eq!(fire.differing_key(&other), None);
        other.fire_c = 0.5;
        assert_eq!(fire.differing_key(&other), Some("fire_c"));
        other.layers = 2;
        assert_eq!(fire.differing_key(&other), Some("layers"));
    }
}
