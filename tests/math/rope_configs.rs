//! Real configurations (`tests/golden/configs`) read by [`ModelRope`] against the values the
//! models' own classes in transformers compute from them (`tests/golden/rope_configs.json`),
//! and every v4 block against its v5 form written by transformers.

use std::path::PathBuf;

use posenc::encodings::rope::{ModelRope, RopeSummary};
use serde_json::Value;

use crate::support::fixture;

fn config_path(name: &str, v5: bool) -> PathBuf {
    let dir = format!("{}/tests/golden/configs", env!("CARGO_MANIFEST_DIR"));
    let sub = if v5 { "v5/" } else { "" };
    PathBuf::from(format!("{dir}/{sub}{name}.json"))
}

/// |ours / reference - 1|, or the absolute difference for a zero reference.
fn rel(ours: f64, reference: f64) -> f64 {
    if reference == 0.0 {
        ours.abs()
    } else {
        (ours / reference - 1.0).abs()
    }
}

fn summary(case: &Value, v5: bool) -> (ModelRope, RopeSummary) {
    let name = case["name"].as_str().unwrap();
    let model = ModelRope::read(&config_path(name, v5)).unwrap_or_else(|e| panic!("{e}"));
    let seq_len = case["seq_len"].as_u64().map(|s| s as usize);
    let s = model
        .summary(case["layer_type"].as_str(), seq_len)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (model, s)
}

#[test]
fn every_configuration_reads_to_the_values_of_transformers() {
    let golden = fixture("rope_configs.json");
    let mut worst_by_block: Vec<(String, f64)> = Vec::new();
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (model, s) = summary(case, false);
        assert_eq!(s.rope_type, case["rope_type"].as_str().unwrap(), "{name}");
        assert_eq!(
            model.rotary_dim as u64,
            case["rotary_dim"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            model.qk_width as u64,
            case["qk_width"].as_u64().unwrap(),
            "{name}"
        );
        let reference: Vec<f64> = case["inv_freq"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(s.inv_freq.len(), reference.len(), "{name}");
        let mut worst = 0f64;
        for (i, (&a, &b)) in s.inv_freq.iter().zip(&reference).enumerate() {
            let ulps = (a.to_bits() as i64 - (b as f32).to_bits() as i64).abs();
            assert!(
                ulps <= 1,
                "{name} inv_freq[{i}]: ours {a:e}, transformers {b:e}"
            );
            worst = worst.max(rel(f64::from(a), b));
        }
        for (key, ours) in [
            ("attention_factor", s.attention_factor),
            ("softmax_multiplier", s.softmax_multiplier),
            ("logit_multiplier", s.logit_multiplier),
        ] {
            let e = rel(ours, case[key].as_f64().unwrap());
            assert!(
                e < 1e-12,
                "{name} {key}: ours {ours}, transformers {}",
                case[key]
            );
            worst = worst.max(e);
        }
        if let Some(positions) = case["temperature_positions"].as_array() {
            let t = model.temperature.expect("Ministral 3 has a temperature");
            for (p, tau) in positions
                .iter()
                .zip(case["temperature"].as_array().unwrap())
            {
                let (p, tau) = (p.as_u64().unwrap() as usize, tau.as_f64().unwrap());
                // transformers computes it in f32
                let e = rel(t.scale(p), tau);
                assert!(
                    e < 1e-6,
                    "{name} temperature at {p}: ours {}, transformers {tau}",
                    t.scale(p)
                );
                worst = worst.max(e);
            }
        }
        checked += s.inv_freq.len() + 3;
        let label = format!(
            "{name}{}",
            case["layer_type"]
                .as_str()
                .map_or(String::new(), |l| format!(" ({l})"))
        );
        match worst_by_block.iter_mut().find(|(n, _)| *n == label) {
            Some(entry) => entry.1 = entry.1.max(worst),
            None => worst_by_block.push((label, worst)),
        }
    }
    assert_eq!(worst_by_block.len(), 11);
    for (block, worst) in &worst_by_block {
        println!("{block}: max relative error {worst:.2e}");
    }
    println!("rope configs: {checked} golden values");
}

#[test]
fn a_v4_block_reads_the_same_as_its_v5_form() {
    let golden = fixture("rope_configs.json");
    for case in golden["cases"].as_array().unwrap() {
        let (v4, s4) = summary(case, false);
        let (v5, s5) = summary(case, true);
        let name = case["name"].as_str().unwrap();
        assert_eq!(s4, s5, "{name}");
        assert_eq!(
            (
                v4.layout,
                v4.head_dim,
                v4.rotary_dim,
                v4.qk_width,
                v4.max_position,
                &v4.layers,
                v4.temperature
            ),
            (
                v5.layout,
                v5.head_dim,
                v5.rotary_dim,
                v5.qk_width,
                v5.max_position,
                &v5.layers,
                v5.temperature
            ),
            "{name}"
        );
    }
}
