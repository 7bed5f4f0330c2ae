//! Evaluation and checkpoints: the one-pass shortcut equals one pass per length for every
//! static scheme (and is refused for dynamic NTK, where it would differ); a resumed run follows
//! the same loss curve; f16 weights evaluate within 0.01 nats/byte of f32.

use burn::tensor::Device;
use posenc::encodings::rope::RampBounds;
use posenc::lm::checkpoint::WeightDtype;
use posenc::lm::eval::{
    evaluate, evaluate_windows, EvalOptions, EvalPlan, InferenceScaling, Mode, RopeInference,
    ScalingKind,
};
use posenc::lm::model::{
    int_tensor, to_vec, Kernels, LayerPositions, Lm, ModelConfig, Ops, PositionContext, Scheme,
};
use posenc::lm::train::{load_model, train, CheckpointInfo, TrainConfig, TrainRun};

use crate::support::model::{array2, corpus};

fn info(c: &ModelConfig) -> CheckpointInfo {
    CheckpointInfo::new(c.clone(), TrainConfig::default(), 0, WeightDtype::F32)
}

fn options(dir: &std::path::Path, lengths: Vec<usize>) -> EvalOptions {
    EvalOptions {
        lengths,
        mode: Mode::Nonoverlap,
        max_bytes: Some(400),
        segment_bytes: 64,
        split: "valid".into(),
        scaling: None,
        rope: RopeInference::default(),
        force_separate: false,
        per_position: None,
        progress: false,
        corpus: dir.to_path_buf(),
        kernels: Kernels::Fused,
    }
}

#[test]
fn one_pass_equals_one_pass_per_length_for_static_schemes() {
    let tmp = corpus();
    let dir = tmp.path();
    let device = Device::flex();
    for scheme in Scheme::ALL {
        let c = ModelConfig::tiny(scheme);
        let lm = Lm::new(&c, 4, &device).unwrap();
        let opts = options(dir, vec![12, 24, 48]);
        // randomized RoPE's sampled evaluation positions depend on the length: a pass each
        let static_objects = !PositionContext::is_dynamic(&c, &c.rope_scaling);
        assert_eq!(scheme == Scheme::RandomRope, !static_objects);
        assert_eq!(EvalPlan::new(&c, &opts).unwrap().one_pass, static_objects);
        if !static_objects {
            continue;
        }
        let fast = evaluate(&lm, &info(&c), "base", &opts, &device).unwrap();
        let slow = evaluate(
            &lm,
            &info(&c),
            "base",
            &EvalOptions {
                force_separate: true,
                ..opts
            },
            &device,
        )
        .unwrap();
        for (f, s) in fast.iter().zip(&slow) {
            assert_eq!(f.tokens_scored, s.tokens_scored);
            assert!(
                (f.nats_per_byte - s.nats_per_byte).abs() < 1e-6,
                "{scheme} L={}: one pass {} vs separate {}",
                f.eval_len,
                f.nats_per_byte,
                s.nats_per_byte
            );
        }
    }
}

/// Matched mode scores the same target bytes at every length, in segments with the same
/// starts at every length and for every model; each target's loss is the one a single window
/// gives it, the window found here from the definition (the chunk of ceil(L/2) targets from
/// T0 holding the target, the window ending at the chunk's end), run alone.
#[test]
fn matched_mode_scores_the_same_targets_at_every_length() {
    let tmp = corpus();
    let dir = tmp.path();
    let device = Device::flex();
    let text = std::fs::read(dir.join("test.txt")).unwrap();
    let lengths = vec![6, 12, 24];
    // targets from byte 24 in segments of 100: 600 bytes budget -> 5 segments, 24..524
    let opts = EvalOptions {
        mode: Mode::Matched,
        max_bytes: Some(600),
        segment_bytes: 100,
        split: "test".into(),
        ..options(dir, lengths.clone())
    };
    let mut starts_of_every_model = Vec::new();
    for scheme in [Scheme::Alibi, Scheme::Rope, Scheme::Learned] {
        let c = ModelConfig::tiny(scheme);
        let lm = Lm::new(&c, 4, &device).unwrap();
        let (rows, windows) = evaluate_windows(&lm, &info(&c), "base", &opts, &device).unwrap();
        assert_eq!(rows.len(), 3);
        for (r, &l) in rows.iter().zip(&lengths) {
            assert_eq!(
                (r.eval_len, r.mode, r.tokens_scored),
                (l, Mode::Matched, 500)
            );
            let segments: Vec<_> = windows.iter().filter(|w| w.eval_len == l).collect();
            let starts: Vec<usize> = segments.iter().map(|w| w.start).collect();
            assert_eq!(starts, [24, 124, 224, 324, 424], "{scheme} L={l}");
            assert!(segments.iter().all(|w| w.bytes == 100));
            let mean = segments.iter().map(|w| w.nats_per_byte).sum::<f64>() / 5.0;
            assert!((mean - r.nats_per_byte).abs() < 1e-9);
            starts_of_every_model.push(starts);
            // the oracle for the targets of segment 2 (224..324)
            let h = l.div_ceil(2);
            let ctx = PositionContext::new(&c, l, c.rope_scaling, &device).unwrap();
            let ops = Ops::new(Kernels::Fused, &device);
            let mut total = 0.0;
            for t in 224..324usize {
                let c0 = 24 + (t - 24) / h * h;
                let c1 = (c0 + h).min(524);
                let s = c1 - 1 - l;
                let x: Vec<i64> = text[s..s + l].iter().map(|&b| b as i64).collect();
                let y: Vec<i64> = text[s + 1..s + l + 1].iter().map(|&b| b as i64).collect();
                let nll = lm
                    .nll(
                        &c,
                        &ctx,
                        ops,
                        int_tensor(x, [1, l], &device),
                        int_tensor(y, [1, l], &device),
                    )
                    .unwrap();
                // target t is position t - s - 1, with t - s bytes of context
                assert!(t - s > l / 2 && t - s <= l);
                total += f64::from(to_vec(nll)[t - s - 1]);
            }
            let oracle = total / 100.0;
            assert!(
                (oracle - segments[2].nats_per_byte).abs() < 1e-5,
                "{scheme} L={l}: matched {} vs one window at a time {oracle}",
                segments[2].nats_per_byte
            );
        }
    }
    assert!(starts_of_every_model.windows(2).all(|w| w[0] == w[1]));
    // too short a budget for one segment after the longest length: the numbers are named
    let short = EvalOptions {
        max_bytes: Some(120),
        ..opts
    };
    let c = ModelConfig::tiny(Scheme::Alibi);
    let lm = Lm::new(&c, 4, &device).unwrap();
    let e = evaluate(&lm, &info(&c), "base", &short, &device)
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 124 bytes"), "{e}");
}

#[test]
fn dynamic_ntk_needs_a_pass_per_length() {
    let tmp = corpus();
    let dir = tmp.path();
    let device = Device::flex();
    let c = ModelConfig::tiny(Scheme::Rope);
    let lm = Lm::new(&c, 4, &device).unwrap();
    let dynamic = InferenceScaling {
        kind: ScalingKind::Dynamic,
        factor: Some(4.0),
        bounds: RampBounds::default(),
    };
    let mut opts = options(dir, vec![12, 48]);
    opts.scaling = Some(dynamic);
    assert!(!EvalPlan::new(&c, &opts).unwrap().one_pass);
    let per_length = evaluate(&lm, &info(&c), "dynamic", &opts, &device).unwrap();
    // the prefix of the 48-long pass, scored at 12, is not what a 12-long pass gives
    let mut prefix = options(dir, vec![12]);
    prefix.scaling = Some(dynamic);
    prefix.per_position = Some(dir.join("pp.csv"));
    let mut long = options(dir, vec![48]);
    long.scaling = Some(dynamic);
    long.per_position = Some(dir.join("pp48.csv"));
    evaluate(&lm, &info(&c), "dynamic", &long, &device).unwrap();
    let pp: Vec<f64> = std::fs::read_to_string(dir.join("pp48.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let prefix_mean = pp[..12].iter().sum::<f64>() / 12.0;
    // an untrained model barely uses positions, so the gap is small, but far above the f32
    // noise (< 1e-6) that separates one pass from separate passes for static schemes
    let gap = (prefix_mean - per_length[0].nats_per_byte).abs();
    println!("dynamic NTK: a 12-long prefix of the 48-long pass differs by {gap:.2e} nats/byte");
    assert!(gap > 1e-5, "{gap}");
    // static scalings keep the shortcut
    let mut fixed = options(dir, vec![12, 48]);
    fixed.scaling = Some(InferenceScaling {
        kind: ScalingKind::Yarn,
        factor: Some(4.0),
        bounds: RampBounds::default(),
    });
    assert!(EvalPlan::new(&c, &fixed).unwrap().one_pass);
    // per-length factors do not
    fixed.scaling = Some(InferenceScaling {
        kind: ScalingKind::Linear,
        factor: None,
        bounds: RampBounds::default(),
    });
    assert!(!EvalPlan::new(&c, &fixed).unwrap().one_pass);
}

fn run(
    dir: &std::path::Path,
    out: &str,
    resume: bool,
    stop_after: Option<usize>,
    dtype: WeightDtype,
) -> TrainRun {
    run_scheme(Scheme::T5, dir, out, resume, stop_after, dtype)
}

pub(crate) fn run_scheme(
    scheme: Scheme,
    dir: &std::path::Path,
    out: &str,
    resume: bool,
    stop_after: Option<usize>,
    dtype: WeightDtype,
) -> TrainRun {
    TrainRun {
        model: ModelConfig::tiny(scheme),
        train: TrainConfig {
            batch: 4,
            steps: 6,
            warmup: 2,
            ..TrainConfig::default()
        },
        out: dir.join(out),
        resume,
        overwrite: false,
        init: None,
        stop_after,
        save_every: 0,
        snapshot_every: 0,
        log_every: 0,
        progress: false,
        dtype,
        corpus: dir.to_path_buf(),
        device: Device::flex(),
        kernels: Kernels::Fused,
    }
}

/// A run stopped after 3 steps and resumed follows the straight run's loss curve: T5, and
/// randomized RoPE, whose positions of a step are drawn from the run's seed and the step (the
/// same bits, resumed or not).
#[test]
fn resume_follows_the_same_loss_curve() {
    let tmp = corpus();
    let dir = tmp.path();
    for scheme in [Scheme::T5, Scheme::RandomRope] {
        let run = |out: &str, resume, stop| {
            run_scheme(
                scheme,
                dir,
                &format!("{scheme}-{out}"),
                resume,
                stop,
                WeightDtype::F32,
            )
        };
        let (_, straight) = train(&run("a", false, None)).unwrap();
        let (half, _) = train(&run("b", false, Some(3))).unwrap();
        assert_eq!(half.step, 3);
        let (done, resumed) = train(&run("b", true, None)).unwrap();
        assert_eq!(done.step, 6);
        assert_eq!(straight.losses.len(), 6);
        for (a, b) in straight.losses.iter().zip(&resumed.losses) {
            assert!(
                (a - b).abs() < 1e-5,
                "{scheme}: straight {:?} vs resumed {:?}",
                straight.losses,
                resumed.losses
            );
        }
        // a second straight run draws the same positions: the same losses, bit for bit
        let (_, again) = train(&run("c", false, None)).unwrap();
        assert_eq!(again.losses, straight.losses, "{scheme}");
    }
}

#[test]
fn f16_checkpoints_evaluate_like_f32() {
    let tmp = corpus();
    let dir = tmp.path();
    train(&run(dir, "f32", false, None, WeightDtype::F32)).unwrap();
    train(&run(dir, "f16", false, None, WeightDtype::F16)).unwrap();
    let device = Device::flex();
    let opts = options(dir, vec![12, 48]);
    let (m32, i32_) = load_model(&dir.join("f32"), &device).unwrap();
    let (m16, i16_) = load_model(&dir.join("f16"), &device).unwrap();
    let a = evaluate(&m32, &i32_, "base", &opts, &device).unwrap();
    let b = evaluate(&m16, &i16_, "base", &opts, &device).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!((x.nats_per_byte - y.nats_per_byte).abs() < 0.01);
    }
    // a checkpoint of another scheme is refused with a clear message
    let other = Lm::new(&ModelConfig::tiny(Scheme::Alibi), 0, &device).unwrap();
    let e = posenc::lm::checkpoint::load_weights(other, &dir.join("f32/model.safetensors"), None)
        .unwrap_err();
    assert!(e.to_string().contains("tensors"), "{e}");
}

#[test]
fn exported_t5_bias_is_the_table_at_each_bucket() {
    let device = Device::flex();
    let c = ModelConfig::tiny(Scheme::T5);
    let lm = Lm::new(&c, 3, &device).unwrap();
    let rows = posenc::lm::export::t5_bias(&lm, &info(&c), -40, 0).unwrap();
    assert_eq!(rows.len(), c.layers * c.heads * 41);
    let LayerPositions::T5(p) = &lm.blocks[0].attn.positions else {
        panic!("T5 parameters expected")
    };
    let table = array2(p.table.val());
    let buckets =
        posenc::encodings::t5::T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false).unwrap();
    for r in &rows {
        assert_eq!(r.bucket, buckets.bucket(r.relative_position));
        assert_eq!(r.bias, table[[r.bucket, r.head]]);
    }
    // beyond max_distance every key falls in the last bucket: the bias is flat
    let far: Vec<f32> = rows
        .iter()
        .filter(|r| r.head == 0 && r.relative_position <= -10)
        .map(|r| r.bias)
        .collect();
    assert!(far.windows(2).all(|w| w[0] == w[1]));
    // other schemes, and an empty range, are refused
    let alibi = ModelConfig::tiny(Scheme::Alibi);
    let e =
        posenc::lm::export::t5_bias(&Lm::new(&alibi, 3, &device).unwrap(), &info(&alibi), -4, 0)
            .unwrap_err();
    assert!(e.to_string().contains("t5 or tupe"), "{e}");
    assert!(posenc::lm::export::t5_bias(&lm, &info(&c), 1, 0).is_err());
}

#[test]
fn pooled_attention_rows_sum_to_one_and_respect_causality() {
    let tmp = corpus();
    let dir = tmp.path();
    let device = Device::flex();
    for scheme in [Scheme::Rope, Scheme::Alibi, Scheme::Nope] {
        let c = ModelConfig::tiny(scheme);
        let lm = Lm::new(&c, 5, &device).unwrap();
        let opts = posenc::lm::export::AttentionOptions {
            length: 48,
            pool: 8,
            windows: 2,
            offset: 10,
            split: "valid".into(),
            corpus: dir.to_path_buf(),
        };
        let cells = posenc::lm::export::attention_map(&lm, &info(&c), &opts, &device).unwrap();
        let nb = 6;
        assert_eq!(cells.len(), c.layers * c.heads * nb * nb);
        for layer in 0..c.layers {
            for head in 0..c.heads {
                for q in 0..nb {
                    let row: Vec<_> = cells
                        .iter()
                        .filter(|a| a.layer == layer && a.head == head && a.query_block == q)
                        .collect();
                    let total: f32 = row.iter().map(|a| a.weight).sum();
                    assert!(
                        (total - 1.0).abs() < 1e-4,
                        "{scheme} row {q} sums to {total}"
                    );
                    // no mass on key blocks after the query block
                    assert!(row
                        .iter()
                        .filter(|a| a.key_block > q)
                        .all(|a| a.weight == 0.0));
                }
            }
        }
        // a block size that does not divide the length, or windows past the text, are refused
        let bad = posenc::lm::export::AttentionOptions {
            pool: 7,
            ..opts.clone()
        };
        assert!(posenc::lm::export::attention_map(&lm, &info(&c), &bad, &device).is_err());
        let far = posenc::lm::export::AttentionOptions {
            offset: 2_990,
            ..opts
        };
        let e = posenc::lm::export::attention_map(&lm, &info(&c), &far, &device).unwrap_err();
        assert!(e.to_string().contains("--offset"), "{e}");
    }
}
