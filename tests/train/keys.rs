//! The keys that make a model ([`MODEL_KEYS`] and [`Scheme::position_keys`]) are all a scheme
//! reads: every other key, changed, leaves its initial weights, its training step's loss and
//! gradients and its loss past the training length unchanged, bit for bit; and each of those
//! changed values does change the schemes that claim the key (so the first check can fail).

use burn::tensor::Device;
use posenc::lm::checkpoint::weights_bytes;
use posenc::lm::config::{WeightDtype, MODEL_KEYS};
use posenc::lm::model::{int_tensor, to_vec, Lm, ModelConfig, Ops, PositionContext, Scheme};
use serde_json::{json, Map, Value};

use crate::support::model::params;
use crate::support::text;

/// Another valid value of every key a scheme may claim, for [`ModelConfig::tiny`] (training
/// length 12, 1 layer, head width 8; evaluated below at 24).
fn other_values() -> Map<String, Value> {
    let Value::Object(map) = json!({
        "shaw_max_relative": 5,
        "t5_num_buckets": 6,
        "t5_max_distance": 20,
        "deberta_bucket_size": 4,
        "deberta_max_position": 20,
        "rope_base": 500.0,
        "xpos_scale_base": 64.0,
        "fire_hidden": 6,
        "fire_c": 0.3,
        "fire_threshold": 3.0,
        "dpb_hidden": 6,
        "dpb_depth": 1,
        "dpb_log_distance": false,
        "dpb_norm": true,
        "partial_rotary_factor": 0.5,
        "p_rope_kept": 0.5,
        "nope_every": 1,
        "random_positions_max": 64,
        "random_positions_eval": "contiguous",
        "dd_alibi_gate_bias": 1.0,
        "cope_max_pos": 4,
    }) else {
        unreachable!("a JSON object literal")
    };
    map
}

/// `c` with the keys `which` accepts taken from [`other_values`].
fn with_other(c: &ModelConfig, which: impl Fn(&str) -> bool) -> ModelConfig {
    let Value::Object(mut map) = serde_json::to_value(c).unwrap() else {
        unreachable!("a configuration is an object")
    };
    for (key, value) in other_values() {
        if which(&key) {
            map.insert(key, value);
        }
    }
    let changed: ModelConfig = serde_json::from_value(Value::Object(map)).unwrap();
    changed.validate().unwrap();
    changed
}

/// What a configuration makes: the initial weights' bytes, a training step's loss and
/// gradients at the training length, and the loss at twice it.
fn behaviour(c: &ModelConfig) -> (Vec<u8>, Vec<f32>, Vec<Vec<f32>>, Vec<f32>) {
    let device = Device::flex().autodiff();
    let lm = Lm::new(c, 3, &device).unwrap();
    let (weights, _) = weights_bytes(&lm, WeightDtype::F32).unwrap();
    let loss_at = |l: usize, step: Option<u64>| {
        let base = PositionContext::new(c, l, c.rope_scaling, &device).unwrap();
        let ctx = match step {
            Some(step) => base.for_step(c, 2, 3, step).unwrap().into_owned(),
            None => base,
        };
        let bytes = |seed| text(2 * l, seed).into_iter().map(i64::from).collect();
        lm.loss(
            c,
            &ctx,
            Ops::new(Default::default(), &device),
            int_tensor(bytes(1), [2, l], &device),
            int_tensor(bytes(2), [2, l], &device),
        )
        .unwrap()
    };
    let train = loss_at(c.train_len, Some(1));
    let grads = train.clone().backward();
    let grads = params(&lm, Some(&grads))
        .into_iter()
        .map(|p| p.grad.unwrap_or_default())
        .collect();
    let long = loss_at(2 * c.train_len, None);
    (weights, to_vec(train), grads, to_vec(long))
}

#[test]
fn a_key_outside_a_schemes_list_never_changes_its_model() {
    for scheme in Scheme::ALL {
        let c = ModelConfig::tiny(scheme);
        let own = |key: &str| MODEL_KEYS.contains(&key) || scheme.position_keys().contains(&key);
        let others = with_other(&c, |key| !own(key));
        assert_eq!(c.differing_key(&others), None, "{scheme}");
        assert!(
            behaviour(&c) == behaviour(&others),
            "{scheme} reads a key that is not in its position_keys"
        );
    }
}

#[test]
fn each_other_value_changes_a_scheme_that_claims_its_key() {
    for key in other_values().keys() {
        let claimed_by = Scheme::ALL
            .into_iter()
            .filter(|s| s.position_keys().contains(&key.as_str()));
        let changes_one = claimed_by.into_iter().any(|scheme| {
            let c = ModelConfig::tiny(scheme);
            let changed = with_other(&c, |k| k == key);
            assert_eq!(c.differing_key(&changed), Some(key.as_str()));
            behaviour(&c) != behaviour(&changed)
        });
        assert!(
            changes_one,
            "another {key} changes no scheme that claims it"
        );
    }
}
