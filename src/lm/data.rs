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

/// The target bytes of matched evaluation ([`crate::lm::config::Mode::Matched`]): the bytes
/// `first..end` of the split, in `segments` segments of `segment` bytes each, scored at every
/// length. A byte's index in the split is its offset; the input of a window starting at $s$ is
/// bytes $s..s+L$ and its targets are $s+1..s+L+1$, so position $p$ predicts byte $s+p+1$
/// from the $p+1$ bytes before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetRegion {
    /// The first target byte, $T_0$: the longest length, so that every target has a full
    /// context at every length.
    pub first: usize,
    /// Bytes per segment.
    pub segment: usize,
    /// Segments.
    pub segments: usize,
}

/// One window of matched evaluation at one length: its first input byte and how many of its
/// last positions are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedWindow {
    /// First input byte.
    pub start: usize,
    /// Positions scored, the window's last ones.
    pub scored: usize,
}

impl TargetRegion {
    /// The region of a text of `text_len` bytes (its first `max_bytes` when given) for
    /// lengths up to `longest`: targets from byte $T_0 = $ `longest`, as many whole segments
    /// of `segment` bytes as fit.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] when not one segment fits after the first `longest`
    /// bytes (naming the bytes needed and those available), or for a segment or length of 0.
    pub fn new(
        text_len: usize,
        longest: usize,
        segment: usize,
        max_bytes: Option<usize>,
    ) -> Result<Self> {
        crate::error::ensure(
            segment > 0 && longest > 0,
            "segment and longest length",
            format!("{segment} and {longest}"),
            "at least 1 each",
        )?;
        let usable = max_bytes.map_or(text_len, |m| m.min(text_len));
        let segments = usable.saturating_sub(longest) / segment;
        if segments == 0 {
            return Err(crate::error::invalid(
                "matched target region",
                format!(
                    "{usable} bytes available ({text_len} in the split, budget {})",
                    max_bytes.map_or("none".to_string(), |m| m.to_string())
                ),
                format!(
                    "at least {} bytes: the longest length {longest} as context, then one \
                     segment of {segment} target bytes",
                    longest + segment
                ),
            ));
        }
        Ok(Self {
            first: longest,
            segment,
            segments,
        })
    }

    /// One past the last target byte, $T_1 = T_0 + n \cdot$ `segment`.
    pub fn end(&self) -> usize {
        self.first + self.segments * self.segment
    }

    /// Target bytes, $T_1 - T_0$.
    pub fn len(&self) -> usize {
        self.segments * self.segment
    }

    /// Whether the region has no target (never, for a region [`TargetRegion::new`] built).
    pub fn is_empty(&self) -> bool {
        self.segments == 0
    }

    /// The first target byte of each segment: the segments' identity at every length.
    pub fn segment_starts(&self) -> Vec<usize> {
        (0..self.segments)
            .map(|k| self.first + k * self.segment)
            .collect()
    }

    /// The windows of length `l` that score every target once: the targets cut into chunks
    /// of $h = \lceil l/2 \rceil$ bytes from $T_0$ (the last one shorter when $h$ does not
    /// divide $T_1 - T_0$), each chunk $[c_0, c_1)$ scored by the window ending at it, which
    /// starts at $s = c_1 - 1 - l$ and scores its last $c_1 - c_0$ positions. Target $t$ of
    /// the chunk then has $t - s \ge l - h + 1 = \lfloor l/2 \rfloor + 1$ bytes of context, at
    /// most $l$. Requires $l \le T_0$ (so $s \ge 0$).
    pub fn windows(&self, l: usize) -> Vec<MatchedWindow> {
        let h = l.div_ceil(2).max(1);
        let end = self.end();
        (self.first..end)
            .step_by(h)
            .map(|c0| {
                let c1 = (c0 + h).min(end);
                MatchedWindow {
                    start: c1 - 1 - l,
                    scored: c1 - c0,
                }
            })
            .collect()
    }
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

    /// Every length scores every target of the region exactly once, with between
    /// floor(l/2) + 1 and l bytes of context, and the windows lie inside the text.
    #[test]
    fn matched_windows_score_every_target_once_at_every_length() {
        // 100 bytes, longest 16, segments of 10: targets 16..96 (8 segments; 96..100 unused)
        let region = TargetRegion::new(100, 16, 10, None).unwrap();
        assert_eq!((region.first, region.segments, region.end()), (16, 8, 96));
        assert_eq!(region.len(), 80);
        assert_eq!(region.segment_starts()[..3], [16, 26, 36]);
        for l in [1, 2, 3, 5, 8, 16] {
            let mut scored = vec![0; 100];
            for w in region.windows(l) {
                assert!(w.start + l < 100, "l={l} {w:?}");
                // position p predicts byte start + p + 1 from p + 1 bytes
                for p in l - w.scored..l {
                    let target = w.start + p + 1;
                    scored[target] += 1;
                    let context = p + 1;
                    assert!(context > l / 2 && context <= l, "l={l} {w:?}");
                }
            }
            assert!(scored[..16].iter().all(|&n| n == 0), "l={l}");
            assert!(scored[16..96].iter().all(|&n| n == 1), "l={l}");
            assert!(scored[96..].iter().all(|&n| n == 0), "l={l}");
        }
        // by hand, l = 8: chunks of 4 from 16; the first window ends at target 19: start 11
        let w = region.windows(8);
        assert_eq!(w.len(), 20);
        assert_eq!(
            w[0],
            MatchedWindow {
                start: 11,
                scored: 4
            }
        );
        // l = 16 (h = 8): 80 targets, 10 windows; l = 3 (h = 2): 40 windows
        assert_eq!(region.windows(16).len(), 10);
        assert_eq!(region.windows(16)[0].start, 7);
        assert_eq!(region.windows(3).len(), 40);
        // h = 3 does not divide 80: the last chunk has 2 targets (94, 95), its window starts at 96 - 1 - 6 = 89
        let last = *region.windows(6).last().unwrap();
        assert_eq!((last.start, last.scored), (89, 2));
        // a budget caps the region; too short a text is an error naming the numbers
        assert_eq!(
            TargetRegion::new(100, 16, 10, Some(50)).unwrap().segments,
            3
        );
        let e = TargetRegion::new(100, 16, 10, Some(25))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("25 bytes available (100 in the split, budget 25)"),
            "{e}"
        );
        assert!(e.contains("at least 26 bytes"), "{e}");
        assert!(TargetRegion::new(100, 16, 0, None).is_err());
    }

    #[test]
    fn windows_fit_inside_the_budget() {
        assert_eq!(window_starts(100, 10, 10, None).len(), 9);
        assert_eq!(window_starts(100, 10, 10, Some(31)), vec![0, 10, 20]);
        assert!(window_starts(5, 10, 10, None).is_empty());
    }
}
