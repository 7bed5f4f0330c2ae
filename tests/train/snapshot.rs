//! A training killed midway continues from its snapshot (`posenc::lm::snapshot`) and ends with
//! the same bits as a run never stopped; a snapshot of another run is not used.

use posenc::lm::checkpoint::{read_state, WeightDtype, STATE_FILE, WEIGHTS_FILE};
use posenc::lm::model::Scheme;
use posenc::lm::snapshot::snapshot_dir;
use posenc::lm::train::{read_info, train, TrainRun};

use crate::eval::run_scheme;
use crate::support::model::corpus;

/// A run of `scheme` into `out` that keeps a snapshot every 2 of its 6 steps.
fn with_snapshots(
    scheme: Scheme,
    dir: &std::path::Path,
    out: &str,
    dtype: WeightDtype,
) -> TrainRun {
    TrainRun {
        snapshot_every: 2,
        overwrite: true,
        ..run_scheme(scheme, dir, out, false, None, dtype)
    }
}

/// Marks the first loss of the snapshot of `out`: a run that continues from the snapshot keeps
/// it, a run that starts again does not.
fn mark_snapshot(out: &std::path::Path) {
    let path = snapshot_dir(out).join(STATE_FILE);
    let mut state = read_state(&snapshot_dir(out)).unwrap();
    state.losses[0] = 99.0;
    std::fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
}

#[test]
fn a_run_killed_midway_continues_from_its_snapshot_to_the_same_bits() {
    let tmp = corpus();
    let dir = tmp.path();
    // T5 written in f16 (the snapshot keeps f32), randomized RoPE (positions drawn per step)
    for (scheme, dtype) in [
        (Scheme::T5, WeightDtype::F16),
        (Scheme::RandomRope, WeightDtype::F32),
    ] {
        let straight_out = format!("{scheme}-straight");
        let (straight, straight_state) =
            train(&run_scheme(scheme, dir, &straight_out, false, None, dtype)).unwrap();

        // killed after step 3: the snapshot of step 2 is there, no checkpoint yet
        let out = format!("{scheme}-killed");
        let killed = TrainRun {
            stop_after: Some(3),
            ..with_snapshots(scheme, dir, &out, dtype)
        };
        train(&killed).unwrap();
        std::fs::remove_dir_all(dir.join(&out)).unwrap();
        let snap = read_info(&snapshot_dir(&dir.join(&out))).unwrap();
        assert_eq!((snap.step, snap.dtype), (2, WeightDtype::F32), "{scheme}");
        mark_snapshot(&dir.join(&out));

        let (continued, state) = train(&with_snapshots(scheme, dir, &out, dtype)).unwrap();
        assert_eq!(state.losses[0], 99.0, "{scheme}: it started again");
        assert_eq!(state.losses[1..], straight_state.losses[1..], "{scheme}");
        assert_eq!(continued.step, 6);
        assert_eq!(continued.dtype, dtype);
        assert_eq!(
            continued.weights_digest, straight.weights_digest,
            "{scheme}"
        );
        let weights = |o: &str| std::fs::read(dir.join(o).join(WEIGHTS_FILE)).unwrap();
        assert!(weights(&out) == weights(&straight_out), "{scheme}");
        assert!(
            !snapshot_dir(&dir.join(&out)).exists(),
            "{scheme}: left behind"
        );
    }
}

#[test]
fn a_snapshot_of_another_run_is_not_used() {
    let tmp = corpus();
    let dir = tmp.path();
    let scheme = Scheme::Alibi;
    let (straight, _) = train(&run_scheme(
        scheme,
        dir,
        "straight",
        false,
        None,
        WeightDtype::F32,
    ))
    .unwrap();
    // a snapshot left by a run of another seed
    let mut other = TrainRun {
        stop_after: Some(3),
        ..with_snapshots(scheme, dir, "out", WeightDtype::F32)
    };
    other.train.seed = 1;
    train(&other).unwrap();
    mark_snapshot(&dir.join("out"));
    let (trained, state) = train(&with_snapshots(scheme, dir, "out", WeightDtype::F32)).unwrap();
    assert!(
        state.losses[0] != 99.0,
        "it continued another run's snapshot"
    );
    assert_eq!(trained.weights_digest, straight.weights_digest);
    // an unreadable snapshot is not used either
    let mut broken = TrainRun {
        stop_after: Some(3),
        ..with_snapshots(scheme, dir, "broken", WeightDtype::F32)
    };
    train(&broken).unwrap();
    std::fs::write(
        snapshot_dir(&dir.join("broken")).join(WEIGHTS_FILE),
        b"torn",
    )
    .unwrap();
    broken.stop_after = None;
    let (trained, _) = train(&broken).unwrap();
    assert_eq!(trained.weights_digest, straight.weights_digest);
}
