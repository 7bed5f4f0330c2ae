//! What a trained checkpoint learned about positions, as CSV for the notebooks (`posenc
//! export`): the T5 bias of every layer and head as a function of the relative position, and
//! attention maps at a long length, pooled into blocks so that a 2048 x 2048 map fits a plot.
//!
//! Attention map pooling, for blocks of $p$ queries and $p$ keys:
//!
//! ```math
//! A_{QK} = \frac{1}{p} \sum_{i \in Q} \sum_{j \in K} \alpha_{ij},
//! ```
//!
//! the mean (over the block's queries) attention mass that falls on the key block, so every
//! row of blocks sums to 1, like a row of $\alpha$.

use std::path::PathBuf;

use burn::tensor::Device;
use serde::Serialize;

use crate::encodings::t5::T5Buckets;
use crate::error::MAX_ROWS;
use crate::error::{ensure, invalid, Result};
use crate::io::csv::csv_bytes;
use crate::lm::checkpoint::CheckpointInfo;
use crate::lm::config::MAX_LEN;
use crate::lm::data::read_split;
use crate::lm::model::{int_tensor, to_vec, Kernels, Lm, Ops, PositionContext, Scheme};

/// One value of a learned T5 bias table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct T5BiasRow {
    /// Layer, from 0.
    pub layer: usize,
    /// Head, from 0.
    pub head: usize,
    /// Key − query (the HF convention; $\le 0$ for the keys a causal query sees).
    pub relative_position: i64,
    /// $\text{bucket}(j - i)$.
    pub bucket: usize,
    /// $B[\text{bucket}, h]$, added to the score.
    pub bias: f32,
}

/// The learned bias $B[\text{bucket}(j - i), h]$ of every layer and head of a T5 (or TUPE)
/// model, for relative positions `min..=max`.
///
/// # Errors
/// A model of another scheme, `min > max`, or more than [`MAX_ROWS`] rows.
pub fn t5_bias(model: &Lm, info: &CheckpointInfo, min: i64, max: i64) -> Result<Vec<T5BiasRow>> {
    let c = &info.model;
    ensure(
        matches!(c.scheme, Scheme::T5 | Scheme::Tupe),
        "--checkpoint",
        c.scheme,
        "a t5 or tupe checkpoint (the schemes with a learned bucket table)",
    )?;
    ensure(min <= max, "--min", min, &format!("at most --max = {max}"))?;
    // (max - min + 1) rows per layer and head, in i128: no overflow for any i64 pair
    let rows = (i128::from(max) - i128::from(min) + 1) * (c.layers * c.heads) as i128;
    ensure(
        rows <= MAX_ROWS as i128,
        "--max - --min + 1",
        format!(
            "{} ({rows} rows for {} layers x {} heads)",
            i128::from(max) - i128::from(min) + 1,
            c.layers,
            c.heads
        ),
        &format!("at most {MAX_ROWS} rows in all"),
    )?;
    let buckets = T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false)?;
    let h = c.heads;
    let mut rows = Vec::new();
    for (layer, block) in model.blocks.iter().enumerate() {
        let Some(table) = block.attn.positions.bucket_table() else {
            continue;
        };
        // B, [num_buckets, H] row-major
        let table = to_vec(table.val());
        for head in 0..h {
            for relative_position in min..=max {
                let bucket = buckets.bucket(relative_position);
                rows.push(T5BiasRow {
                    layer,
                    head,
                    relative_position,
                    bucket,
                    bias: table[bucket * h + head],
                });
            }
        }
    }
    Ok(rows)
}

/// Options of [`attention_map`].
#[derive(Debug, Clone)]
pub struct AttentionOptions {
    /// Window length $L$ (queries and keys).
    pub length: usize,
    /// Block size $p$; must divide `length`.
    pub pool: usize,
    /// Windows averaged, consecutive, starting at `offset`.
    pub windows: usize,
    /// First byte of the first window.
    pub offset: usize,
    /// `valid` or `test`.
    pub split: String,
    /// The corpus folder.
    pub corpus: PathBuf,
}

/// One block of a pooled attention map.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionCell {
    /// Layer, from 0.
    pub layer: usize,
    /// Head, from 0.
    pub head: usize,
    /// Query block $Q$ (queries $Qp .. Qp + p - 1$).
    pub query_block: usize,
    /// Key block $K$.
    pub key_block: usize,
    /// $A_{QK}$, averaged over the windows.
    pub weight: f32,
}

/// The attention weights of every layer and head on windows of the corpus, pooled into
/// $p \times p$ blocks (see the module documentation) and averaged over the windows.
///
/// # Errors
/// A length above [`MAX_LEN`], a block size that does not divide it, no window, more than
/// [`MAX_ROWS`] cells, or windows past the end of the text.
pub fn attention_map(
    model: &Lm,
    info: &CheckpointInfo,
    opts: &AttentionOptions,
    device: &Device,
) -> Result<Vec<AttentionCell>> {
    let c = &info.model;
    let (l, p) = (opts.length, opts.pool);
    ensure(
        (1..=MAX_LEN).contains(&l),
        "--length",
        l,
        &format!("1 to {MAX_LEN}"),
    )?;
    ensure(
        p >= 1 && l % p == 0,
        "--pool",
        p,
        &format!("a divisor of --length = {l}"),
    )?;
    let cells = (l / p)
        .saturating_mul(l / p)
        .saturating_mul(c.layers * c.heads);
    ensure(
        cells <= MAX_ROWS,
        "--pool",
        p,
        &format!(
            "large enough for at most {MAX_ROWS} cells ((length / pool)^2 x {} layers x {} heads = {cells})",
            c.layers, c.heads
        ),
    )?;
    ensure(opts.windows >= 1, "--windows", opts.windows, ">= 1")?;
    let text = read_split(&opts.corpus, &opts.split)?;
    // offset + windows * length, checked: a huge offset must not wrap around
    let end = opts
        .windows
        .checked_mul(l)
        .and_then(|span| span.checked_add(opts.offset));
    if end.is_none_or(|end| end > text.len()) {
        return Err(invalid(
            "--offset",
            opts.offset,
            format!(
                "at most {} for {} windows of {l} bytes in the {} split ({} bytes)",
                text.len().saturating_sub(opts.windows.saturating_mul(l)),
                opts.windows,
                opts.split,
                text.len()
            ),
        ));
    }
    let (h, nb) = (c.heads, l / p);
    let ctx = PositionContext::new(c, l, c.rope_scaling, device)?;
    let ops = Ops::new(Kernels::Fused, device);
    // sum over windows of A, [layers][H * nb * nb]
    let mut sums = vec![vec![0.0f32; h * nb * nb]; c.layers];
    for w in 0..opts.windows {
        let start = opts.offset + w * l;
        let bytes = text[start..start + l].iter().map(|&b| b as i64).collect();
        let (_, probs) =
            model.forward_traced(c, &ctx, ops, int_tensor(bytes, [1, l], device), true)?;
        for (layer, alpha) in probs.into_iter().enumerate() {
            // [1, H, L, L] -> [H, nb, p, nb, p] -> sum over keys in a block, mean over queries
            let pooled = alpha
                .reshape([h, nb, p, nb, p])
                .sum_dim(4)
                .mean_dim(2)
                .reshape([h * nb * nb]);
            for (s, v) in sums[layer].iter_mut().zip(to_vec(pooled)) {
                *s += v;
            }
        }
    }
    let n = opts.windows as f32;
    let mut cells = Vec::with_capacity(c.layers * h * nb * nb);
    for (layer, sum) in sums.iter().enumerate() {
        for (e, &s) in sum.iter().enumerate() {
            cells.push(AttentionCell {
                layer,
                head: e / (nb * nb),
                query_block: (e / nb) % nb,
                key_block: e % nb,
                weight: s / n,
            });
        }
    }
    Ok(cells)
}

/// T5 bias rows as CSV (header `layer,head,relative_position,bucket,bias`).
///
/// # Errors
/// As [`csv_bytes`].
pub fn t5_bias_csv(rows: &[T5BiasRow]) -> Result<Vec<u8>> {
    csv_bytes(rows)
}

/// Attention cells as CSV (header `layer,head,query_block,key_block,weight`).
///
/// # Errors
/// As [`csv_bytes`].
pub fn attention_csv(cells: &[AttentionCell]) -> Result<Vec<u8>> {
    csv_bytes(cells)
}
