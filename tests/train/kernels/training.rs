//! 20 training steps of every scheme on the fused and on the reference path.

use std::path::Path;

use burn::tensor::Device;
use posenc::lm::model::{ModelConfig, Scheme};
use posenc::lm::ops::Kernels;
use posenc::lm::train::{train, TrainConfig, TrainRun};

use crate::support::model::corpus;
use crate::support::temp_dir;

/// 20 steps of `c` with the given kernels on `corpus`: the loss of every step.
fn losses(c: &ModelConfig, kernels: Kernels, corpus: &Path) -> Vec<f64> {
    let out = temp_dir();
    let run = TrainRun {
        model: c.clone(),
        train: TrainConfig {
            batch: 4,
            steps: 20,
            warmup: 5,
            ..TrainConfig::default()
        },
        out: out.path().join("checkpoint"),
        resume: false,
        overwrite: false,
        init: None,
        stop_after: None,
        save_every: 0,
        log_every: 0,
        progress: false,
        dtype: posenc::lm::checkpoint::WeightDtype::F32,
        corpus: corpus.to_path_buf(),
        device: Device::flex(),
        kernels,
    };
    let (_, state) = train(&run).unwrap();
    state.losses
}

#[test]
fn every_scheme_trains_along_the_same_loss_curve_on_both_paths() {
    let corpus = corpus();
    let mut report = Vec::new();
    for scheme in Scheme::ALL {
        let c = ModelConfig {
            train_len: 40,
            max_positions: 40,
            fire_threshold: 40.0,
            ..ModelConfig::tiny(scheme)
        };
        let fused = losses(&c, Kernels::Fused, corpus.path());
        let reference = losses(&c, Kernels::Reference, corpus.path());
        assert_eq!(fused.len(), 20);
        let worst = fused
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        report.push(format!(
            "{:<10} loss {:.4} -> {:.4}, max |fused - reference| over 20 steps {worst:.1e}",
            scheme.name(),
            reference[0],
            reference[19]
        ));
        // the two paths round differently; after 20 AdamW steps the curves agree to 1e-3
        assert!(
            worst <= 1e-3,
            "{scheme}: fused and reference losses differ by {worst:.2e}\nfused {fused:?}\nreference {reference:?}"
        );
    }
    println!("{}", report.join("\n"));
}
