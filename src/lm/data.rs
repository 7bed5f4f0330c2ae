//! The byte corpus: splits read from `data/corpus/`, training batches drawn at random
//! offsets by a generator seeded with `(seed, step)` (so every scheme, and a resumed run, sees
//! the same bytes at the same step), and evaluation windows.

use std::fs;
use std::path::{Path, PathBuf};

use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand::{Rng, SeedableRng};

use crate::error::{Error, Result};

/// The folder holding `train.txt`, `valid.txt` and `test.txt`: `$POSENC_CORPUS`, else
/// `data/corpus` under the crate root.
pub fn default_corpus_dir() -> PathBuf {
    std::env::var_os("POSENC_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("data/corpus"))
}

/// Reads one split (`train`, `valid` or `test`) as bytes.
///
/// # Errors
/// An unknown split or an unreadable file (the message says how to regenerate it).
pub fn read_split(dir: &Path, split: &str) -> Result<Vec<u8>> {
    if !["train", "valid", "test"].contains(&split) {
        return Err(crate::error::invalid(
            "split",
            split,
            "train, valid or test",
        ));
    }
    let path = dir.join(format!("{split}.txt"));
    fs::read(&path).map_err(|e| {
        Error::Io(format!(
            "{}: {e} (the corpus ships in data/corpus/; see its README to regenerate it)",
            path.display()
        ))
    })
}

/// A batch of `batch` windows of `len + 1` bytes at random offsets, for step `step` of a run
/// seeded by `seed`: inputs are the first `len` bytes, targets the last `len`. Returns
/// `(inputs, targets)`, each `batch * len` bytes as `i64`, row-major.
///
/// # Errors
/// When the text is shorter than one window.
pub fn train_batch(
    text: &[u8],
    batch: usize,
    len: usize,
    seed: u64,
    step: u64,
) -> Result<(Vec<i64>, Vec<i64>)> {
    if text.len() <= len + 1 {
        return Err(crate::error::invalid(
            "corpus length",
            text.len(),
            format!("more than train_len + 1 = {}", len + 1),
        ));
    }
    // a generator per step: (seed, step) fixes the batch
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step);
    let mut inputs = Vec::with_capacity(batch * len);
    let mut targets = Vec::with_capacity(batch * len);
    for _ in 0..batch {
        let start = rng.random_range(0..text.len() - len - 1);
        let window = &text[start..start + len + 1];
        inputs.extend(window[..len].iter().map(|&b| b as i64));
        targets.extend(window[1..].iter().map(|&b| b as i64));
    }
    Ok((inputs, targets))
}

/// Start offsets of evaluation windows of `len + 1` bytes every `stride` bytes within the first
/// `max_bytes` bytes of `text` (all of it when `None`).
pub fn window_starts(
    text_len: usize,
    len: usize,
    stride: usize,
    max_bytes: Option<usize>,
) -> Vec<usize> {
    let usable = max_bytes.map_or(text_len, |m| m.min(text_len));
    if usable < len + 1 {
        return Vec::new();
    }
    (0..=usable - len - 1).step_by(stride.max(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_reproducible_and_shifted_by_one() {
        let text: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let (x, y) = train_batch(&text, 3, 16, 7, 42).unwrap();
        assert_eq!((x.len(), y.len()), (48, 48));
        assert_eq!(train_batch(&text, 3, 16, 7, 42).unwrap().0, x);
        assert_ne!(train_batch(&text, 3, 16, 7, 43).unwrap().0, x);
        // the target is the next byte
        for (a, b) in x.iter().zip(&y) {
            assert_eq!((a + 1) % 256, *b);
        }
    }

    #[test]
    fn windows_fit_inside_the_budget() {
        assert_eq!(window_starts(100, 10, 10, None).len(), 9);
        assert_eq!(window_starts(100, 10, 10, Some(31)), vec![0, 10, 20]);
        assert!(window_starts(5, 10, 10, None).is_empty());
    }
}
