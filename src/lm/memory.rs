//! How much memory an evaluation pass takes, and how much the machine has: checked before an
//! evaluation starts, so that a length that will not fit is refused with a message instead of
//! the process being killed.
//!
//! With the fused kernels nothing grows faster than $L$. Per window and position, the peak is
//! the largest of three phases of a block: the feed-forward network (the residual stream and
//! its normalised copy, $2d$, and GELU's input, output and $\Phi$, $3 d_{ff}$), attention
//! ($q, k, v$ and its output beside the same two, $6d$, and the scheme's compact position
//! terms $t$), and the logits ($2d + 2V$); per thread, one tile of scores `TILE x L` and two
//! more of the same size (the relative keys' products, or CoPE's gates and counts). The
//! composed reference kernels add a few `[B, H, L, L]` tensors (scores, mask, weights and
//! the schemes' dense terms).
//!
//! ```math
//! \text{bytes} \approx M_0 + 8P + 4\,B L\,\big(\max(2d + 3 d_{ff},\ 6d + t,\ 2d + 2V) + d\big)
//!   + 4 \cdot 3\, T\, n_{\text{threads}} L \;\big[+\ 4\,(3 + n_t)\, B H L^2\big].
//! ```
//!
//! Measured peaks are 75 to 100% of the estimate (`bench/long.sh` prints both).

use std::fmt;

use crate::lm::config::{ModelConfig, Scheme};
use crate::lm::ops::fused::attention::TILE;
use crate::lm::ops::Kernels;

/// The fixed part: the binary, burn's pools and the corpus split.
const BASE_BYTES: u64 = 16 << 20;

/// `f32` values per window and position that the scheme's position terms hold during
/// attention (the fused kernels): tables read at the column of the distance, relative queries
/// and keys per distance, untied rows.
fn term_values(c: &ModelConfig) -> u64 {
    let (h, d) = (c.heads as u64, c.d_model as u64);
    match c.scheme {
        Scheme::Nope
        | Scheme::Sinusoidal
        | Scheme::Learned
        | Scheme::Rope
        | Scheme::Xpos
        | Scheme::Alibi
        | Scheme::T5
        | Scheme::Kerple
        | Scheme::Dpb
        | Scheme::PartialRope
        | Scheme::PRope
        | Scheme::RopeNope
        | Scheme::RandomRope
        | Scheme::Cope => h,
        // x w + b, its log gates and running sum [H]; the running sum over c in the query's
        // and the key's row [H] each
        Scheme::DdAlibi => 5 * h,
        // the row's bias [H]; per call, the first rows' bias and slopes x feature [H] each,
        // every row's pieces (at most hidden + 1, three u32 each) and where they start
        Scheme::Fire => 3 * h + 3 * (c.fire_hidden as u64 + 1) + 2,
        // q w^K^T [H, 2k+1]
        Scheme::Shaw => h * (2 * c.shaw_max_relative as u64 + 1),
        // q K^r^T and k Q^r^T [H, 2s] each, one head's copy transposed
        Scheme::Deberta => 3 * h * 2 * c.deberta_bucket_size as u64,
        // q + v, R_delta [d], r_delta and its reversed copy
        Scheme::Xl => 4 * d,
        // p, p U^Q, p U^K
        Scheme::Tupe => 3 * d,
    }
}

/// The `[B, H, L, L]` tensors a scheme's terms add on the composed reference path (its
/// expansions and gathers), beside the three of every attention (scores, mask, weights).
fn dense_terms(c: &ModelConfig) -> u64 {
    match c.scheme {
        Scheme::Shaw | Scheme::Xl => 3,
        // two gathers of a one-column table, as DeBERTa's
        Scheme::Deberta | Scheme::DdAlibi => 4,
        // gates, their total and running sum, p, its floor, ceiling and fraction, the two
        // gathers and z
        Scheme::Cope => 10,
        Scheme::Nope
        | Scheme::Sinusoidal
        | Scheme::Learned
        | Scheme::Rope
        | Scheme::Xpos
        | Scheme::Alibi
        | Scheme::T5
        | Scheme::Kerple
        | Scheme::Fire
        | Scheme::Tupe
        | Scheme::Dpb
        | Scheme::PartialRope
        | Scheme::PRope
        | Scheme::RopeNope
        | Scheme::RandomRope => 0,
    }
}

/// The estimated peak memory, in bytes, of one evaluation pass over `batch` windows of
/// length `len` with `kernels`, on `threads` threads; `second_pass` where RoPE is extended
/// with ReRoPE or Self-Extend at inference (the second rotation's copies of $q$ and $k$, $2d$
/// more per position in the attention phase).
pub fn eval_bytes(
    c: &ModelConfig,
    len: usize,
    batch: usize,
    kernels: Kernels,
    (threads, second_pass): (usize, bool),
) -> u64 {
    let (l, b) = (len as u64, batch as u64);
    let (d, ff, v) = (c.d_model as u64, c.d_ff as u64, c.vocab as u64);
    let params = c.layers as u64 * (4 * d * d + 2 * d * ff) + v * d;
    let second = if second_pass { 2 * d } else { 0 };
    // the largest phase of a block, per window and position, and the allocator's slack
    let per_position = (2 * d + 3 * ff)
        .max(6 * d + second + term_values(c))
        .max(2 * d + 2 * v)
        + d;
    let activations = 4 * b * l * per_position;
    let tiles = 4 * 3 * (TILE as u64) * threads.max(1) as u64 * l;
    let dense = match kernels {
        Kernels::Reference => 4 * (3 + dense_terms(c)) * b * c.heads as u64 * l * l,
        Kernels::Fused => 0,
    };
    BASE_BYTES + 2 * 4 * params + activations + tiles + dense
}

/// The memory the system can still give a process, in bytes: `MemAvailable` of
/// `/proc/meminfo` (`None` where there is no such file, as outside Linux).
pub fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    // "MemAvailable:   12345678 kB"
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Bytes as the largest unit that keeps a number of at least 1: `1.5 GiB`, `340 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut x = bytes as f64;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 || x >= 100.0 {
        format!("{x:.0} {}", UNITS[unit])
    } else {
        format!("{x:.1} {}", UNITS[unit])
    }
}

/// The memory one evaluation pass will take, against what the machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPlan {
    /// The length of the largest pass.
    pub len: usize,
    /// Windows per pass at that length.
    pub batch: usize,
    /// Its estimated peak ([`eval_bytes`]).
    pub bytes: u64,
    /// What the system has ([`available_bytes`]), where known.
    pub available: Option<u64>,
}

impl MemoryPlan {
    /// Whether the pass fits (it does where the available memory is unknown).
    pub fn fits(&self) -> bool {
        self.available.is_none_or(|a| self.bytes <= a)
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "length {} ({} window{} a pass) needs about {} of memory",
            self.len,
            self.batch,
            if self.batch == 1 { "" } else { "s" },
            human(self.bytes)
        )?;
        match self.available {
            Some(a) => write!(f, ", {} available (MemAvailable, /proc/meminfo)", human(a)),
            None => write!(f, " (available memory unknown)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate grows linearly in $L$ with the fused kernels and quadratically with the
    /// reference; a scheme's tables add to it; the units read as people write them.
    #[test]
    fn estimate_grows_as_the_kernels_do() {
        let c = ModelConfig::default();
        let fused = |l| eval_bytes(&c, l, 1, Kernels::Fused, (2, false)) - BASE_BYTES;
        let reference = |l| eval_bytes(&c, l, 1, Kernels::Reference, (2, false)) - BASE_BYTES;
        let params = fused(0);
        assert_eq!((fused(2000) - params) * 2, fused(4000) - params);
        assert!(reference(4000) - params > 3 * (reference(2000) - params));
        let deberta = ModelConfig {
            scheme: Scheme::Deberta,
            ..c.clone()
        };
        assert!(
            eval_bytes(&deberta, 4096, 1, Kernels::Fused, (2, false)) > fused(4096) + BASE_BYTES
        );
        // a second rotation adds 2d values a position where attention is the largest phase
        // (a narrow feed-forward network), and nothing where the feed-forward phase is
        let narrow = ModelConfig {
            d_ff: c.d_model,
            ..c.clone()
        };
        let two = |c: &ModelConfig, second| eval_bytes(c, 1000, 1, Kernels::Fused, (2, second));
        assert_eq!(
            two(&narrow, true) - two(&narrow, false),
            1000 * 4 * 2 * c.d_model as u64
        );
        assert_eq!(two(&c, true), two(&c, false));
        // CoPE's fused attention counts along the tiles' rows: linear in L
        let cope = ModelConfig {
            scheme: Scheme::Cope,
            ..c.clone()
        };
        let cope = |l| eval_bytes(&cope, l, 1, Kernels::Fused, (2, false)) - BASE_BYTES;
        assert_eq!((cope(2000) - cope(0)) * 2, cope(4000) - cope(0));
        // the feed-forward phase is the peak of a plain model: (2d + 3 d_ff + d) f32 values
        let per_position = 4 * (3 * c.d_model + 3 * c.d_ff) as u64;
        assert_eq!(
            fused(1000) - fused(0),
            1000 * (per_position + 4 * 3 * TILE as u64 * 2)
        );
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(340 << 20), "340 MiB");
    }

    /// A plan fits where the memory is unknown or enough, and says both numbers.
    #[test]
    fn plan_fits_and_reads() {
        let plan = MemoryPlan {
            len: 65_536,
            batch: 1,
            bytes: 3 << 30,
            available: Some(2 << 30),
        };
        assert!(!plan.fits());
        assert_eq!(
            plan.to_string(),
            "length 65536 (1 window a pass) needs about 3.0 GiB of memory, 2.0 GiB available \
             (MemAvailable, /proc/meminfo)"
        );
        assert!(MemoryPlan {
            available: None,
            ..plan
        }
        .fits());
        assert!(available_bytes().is_none_or(|a| a > 0));
    }
}
