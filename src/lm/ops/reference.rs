//! Every operation of the model composed of burn's own operations: the specification that
//! [`super::fused`] is tested against (values, gradients, finite differences), and what runs on
//! any device that is not Flex.

use burn::nn::{LayerNorm, Linear};
use burn::tensor::activation::{gelu as burn_gelu, log_softmax, sigmoid, softmax};
use burn::tensor::{Bool, Device, IndexingUpdateOp, Int, Tensor, TensorData};

use super::{
    piece_at, to_vec, AttentionParts, Contextual, DistanceKeys, Gathered, PositionBias, Rotations,
    ScoreTerms,
};

/// $xW + b$ (`linear.forward`).
pub fn linear<const D: usize>(linear: &Linear, x: Tensor<D>) -> Tensor<D> {
    linear.forward(x)
}

/// $xW$ of `x [..., n_in]` and `w [n_in, n_out]`.
pub fn product(x: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
    x.matmul(w.unsqueeze::<3>())
}

/// Exact GELU $x\Phi(x)$.
pub fn gelu(x: Tensor<3>) -> Tensor<3> {
    burn_gelu(x)
}

/// LayerNorm (`ln.forward`).
pub fn layer_norm(ln: &LayerNorm, x: Tensor<3>) -> Tensor<3> {
    ln.forward(x)
}

/// $\log\sum_j e^{x_j} - x_t$ per position, `[B, L]`, of `targets [B, L]` under
/// `logits [B, L, V]`.
pub fn nll(logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<2> {
    let [b, l, _] = logits.dims();
    log_softmax(logits, 2)
        .gather(2, targets.reshape([b, l, 1]))
        .reshape([b, l])
        .neg()
}

/// $\text{rotate\_half}(x) = [-x_2, x_1]$ of `x [B, H, L, D]`.
fn rotate_half(x: &Tensor<4>) -> Tensor<4> {
    let d = x.dims()[3];
    let x1 = x.clone().narrow(3, 0, d / 2);
    let x2 = x.clone().narrow(3, d / 2, d / 2);
    Tensor::cat(vec![x2.neg(), x1], 3)
}

/// RoPE in the half layout: $x \cos + \text{rotate\_half}(x) \sin$, with
/// $\text{rotate\_half}(x) = [-x_2, x_1]$; `x [B, H, L, D]`, `cos`, `sin` `[L, D]`.
pub fn rope_half(x: Tensor<4>, cos: &Tensor<2>, sin: &Tensor<2>) -> Tensor<4> {
    let rotated = rotate_half(&x);
    x * cos.clone().unsqueeze::<4>() + rotated * sin.clone().unsqueeze::<4>()
}

/// [`rope_half`] with tables per sequence, `cos`, `sin` `[B, L, D]` (every head of sequence
/// $b$ rotated by its row $b$).
pub fn rope_half_sequences(x: Tensor<4>, cos: &Tensor<3>, sin: &Tensor<3>) -> Tensor<4> {
    let rotated = rotate_half(&x);
    // [B, L, D] -> [B, 1, L, D]
    x * cos.clone().unsqueeze_dim::<4>(1) + rotated * sin.clone().unsqueeze_dim::<4>(1)
}

/// Interleaved rotation with scaling (xPos): pairs $(x_{2i}, x_{2i+1}) \mapsto
/// (x_{2i} C - x_{2i+1} S,\ x_{2i+1} C + x_{2i} S)$ with $C = s\cos$, $S = s\sin$ `[L, D/2]`.
pub fn rotate_interleaved(x: Tensor<4>, c: &Tensor<2>, s: &Tensor<2>) -> Tensor<4> {
    let [b, h, l, d] = x.dims();
    // [B, H, L, d/2, 2]
    let pairs = x.reshape([b, h, l, d / 2, 2]);
    let x0 = pairs.clone().narrow(4, 0, 1);
    let x1 = pairs.narrow(4, 1, 1);
    // [L, d/2] -> [1, 1, L, d/2, 1]
    let c = c.clone().reshape([1, 1, l, d / 2, 1]);
    let s = s.clone().reshape([1, 1, l, d / 2, 1]);
    let y0 = x0.clone() * c.clone() - x1.clone() * s.clone();
    let y1 = x1 * c + x0 * s;
    Tensor::cat(vec![y0, y1], 4).reshape([b, h, l, d])
}

/// [`rotate_interleaved`] **written in the half layout** (first members, then second members):
/// the rotation followed by one fixed permutation of the head dimensions, which leaves
/// $q' \cdot k'$ unchanged when queries and keys both get it. The layout the fused rotation
/// writes ([`super::fused::rotate_pairs`]).
pub fn rotate_pairs(x: Tensor<4>, c: &Tensor<2>, s: &Tensor<2>) -> Tensor<4> {
    let [b, h, l, d] = x.dims();
    // [.., d/2, 2] -> [.., 2, d/2]: even dimensions first, then odd
    rotate_interleaved(x, c, s)
        .reshape([b, h, l, d / 2, 2])
        .swap_dims(3, 4)
        .reshape([b, h, l, d])
}

/// Transformer-XL's shift: `raw[.., i, r]` holds distance $L-1-r$; the result holds distance
/// $i - j$ at `[.., i, j]` for $j \le i$ (junk above the diagonal, masked later). Pad a zero
/// column in front, view `[L+1, L]`, drop the first row, view `[L, L]`.
pub fn rel_shift(raw: Tensor<4>) -> Tensor<4> {
    let [b, h, l, _] = raw.dims();
    let zeros = Tensor::<4>::zeros([b, h, l, 1], &raw.device());
    Tensor::cat(vec![zeros, raw], 3)
        .reshape([b, h, l + 1, l])
        .narrow(2, 1, l)
        .reshape([b, h, l, l])
}

/// `index [L, M]` broadcast to `[B, H, L, M]` for `gather` / `scatter` along the last axis.
fn expand_index(index: &Tensor<2, Int>, b: usize, h: usize) -> Tensor<4, Int> {
    let [l, m] = index.dims();
    index.clone().unsqueeze::<4>().expand([b, h, l, m])
}

/// The relative-position gather of `a [B, H, L, R]` by `index [L, L]` (entries below `R`),
/// `[B, H, L, L]`: $y_{ij} = a_{i,\,\text{index}_{ij}}$, or $a_{j,\,\text{index}_{ij}}$ when
/// `transposed` (DeBERTa's c2p and p2c, Transformer-XL's shift, Shaw's keys): burn's `gather`
/// of the broadcast index (and `swap_dims` when transposed).
pub fn relative_gather(a: Tensor<4>, index: &Tensor<2, Int>, transposed: bool) -> Tensor<4> {
    let [b, h, _, _] = a.dims();
    let idx = expand_index(index, b, h);
    if transposed {
        a.gather(3, idx.swap_dims(2, 3)).swap_dims(2, 3)
    } else {
        a.gather(3, idx)
    }
}

/// `true` above the diagonal (future keys, masked), broadcast to `[B, H, L, L]`.
fn causal_mask(b: usize, h: usize, l: usize, device: &Device) -> Tensor<4, Bool> {
    Tensor::<2, Bool>::tril_mask([l, l], 0, device)
        .unsqueeze::<4>()
        .expand([b, h, l, l])
}

/// $\operatorname{softmax}_j$ over keys $j \le i$ of scores `[B, H, L, L]`: the keys after
/// each query masked to $-\infty$, then burn's softmax.
pub fn causal_softmax(scores: Tensor<4>) -> Tensor<4> {
    let [b, h, l, _] = scores.dims();
    let mask = causal_mask(b, h, l, &scores.device());
    softmax(scores.mask_fill(mask, f32::NEG_INFINITY), 3)
}

/// $\sum_r \big(\sum_{j:\ \text{index}_{ij} = r} \alpha_{ij}\big)\, a^V_r$, `[B, H, L, D]`: the
/// weights scattered per table row, then one product with the table.
fn relative_value_term(probs: &Tensor<4>, table: Tensor<2>, index: &Tensor<2, Int>) -> Tensor<4> {
    let [b, h, l, _] = probs.dims();
    let rows = table.dims()[0];
    let per_row = Tensor::<4>::zeros([b, h, l, rows], &probs.device()).scatter(
        3,
        expand_index(index, b, h),
        probs.clone(),
        IndexingUpdateOp::Add,
    );
    per_row.matmul(table.unsqueeze::<4>())
}

/// `[L, L]` entries `f(max(i - j, 0))` of a function of the distance, for gathers and selects
/// (above the diagonal: distance 0, masked anyway).
fn of_distance(l: usize, f: impl Fn(usize) -> usize, device: &Device) -> Tensor<2, Int> {
    let values: Vec<i64> = (0..l * l)
        .map(|e| f((e / l).saturating_sub(e % l)) as i64)
        .collect();
    Tensor::from_data(TensorData::new(values, [l, l]), device)
}

/// `[L * L]` entries $i$ (the query's row) of every pair $(i, j)$.
fn of_row(l: usize, device: &Device) -> Tensor<1, Int> {
    let rows: Vec<i64> = (0..l * l).map(|e| (e / l) as i64).collect();
    Tensor::from_data(TensorData::new(rows, [l * l]), device)
}

/// A bias per distance or piecewise, as the `[H, L, L]` matrix it stands for:
/// $\beta_{h,\,i-j}$, or $a_{h,p} + s_{h,p}\,x_{ij}$ at the piece $p$ of
/// $x_{ij} = \psi_{i-j}\nu_i$ (selects of the compact objects, so the gradient flows back to
/// them: to $\beta$, or to $a$, $s$, $\psi$ and $\nu$; the pieces are read on the host).
pub fn position_bias(bias: PositionBias, l: usize) -> Tensor<3> {
    match bias {
        PositionBias::Distance(beta) => {
            let h = beta.dims()[0];
            let device = beta.device();
            beta.select(1, of_distance(l, |d| d, &device).reshape([l * l]))
                .reshape([h, l, l])
        }
        PositionBias::Piecewise(p) => {
            let h = p.intercepts.dims()[0];
            let device = p.intercepts.device();
            let (feature, row_scale) = (to_vec(p.feature.clone()), to_vec(p.row_scale.clone()));
            let piece: Vec<i64> = (0..l * l)
                .map(|e| piece_at(&feature, &row_scale, &p.breakpoints, (e / l, e % l)).1 as i64)
                .collect();
            let piece = Tensor::<1, Int>::from_data(TensorData::new(piece, [l * l]), &device);
            // x_ij = psi_{max(i-j, 0)} nu_i, [1, L*L]
            let x = p
                .feature
                .select(0, of_distance(l, |d| d, &device).reshape([l * l]))
                * p.row_scale.select(0, of_row(l, &device));
            let x = x.reshape([1, l * l]);
            // a_{h, p_ij} + s_{h, p_ij} x_ij, [H, L*L]
            (p.intercepts.select(1, piece.clone()) + p.slopes.select(1, piece) * x)
                .reshape([h, l, l])
        }
    }
}

/// A table read at the column of the distance, `[B, H, L, L]`: $g_{i,\,\text{index}(i-j)}$,
/// or $g_{j,\,\text{index}(i-j)}$ when `key_rows` ([`relative_gather`]).
pub fn gathered(g: Gathered, key_rows: bool) -> Tensor<4> {
    let l = g.table.dims()[2];
    let index = of_distance(l, |d| g.index[d], &g.table.device());
    relative_gather(g.table, &index, key_rows)
}

/// Relative keys per distance, `[B, H, L, L]`: $\hat q_i \cdot \rho_d$ for every distance
/// (a product), then gathered at $d = i - j$.
pub fn distance_keys(dk: DistanceKeys) -> Tensor<4> {
    let l = dk.queries.dims()[2];
    let device = dk.queries.device();
    // q^_i . rho_d, [B, H, L, L(d)]
    let raw = dk.queries.matmul(dk.keys.swap_dims(1, 2).unsqueeze::<4>());
    relative_gather(raw, &of_distance(l, |d| d, &device), false)
}

/// CoPE's term $z_{ij}$, `[B, H, L, L]`, of queries `q [B, H, L, d_h]` and the scaled,
/// biased logits `scores [B, H, L, L]` before the mask (entries above the diagonal ignored:
/// their gates are 0, as behind x-transformers' mask):
///
/// ```math
/// g_{ij} = \sigma(s_{ij})\,[j \le i], \quad
/// p_{ij} = \min\Big(\textstyle\sum_{t \ge j} g_{it},\ P - 1\Big), \quad
/// z_{ij} = (1 - w_{ij})\, (q e^\top)_{i,\lfloor p_{ij} \rfloor} + w_{ij}\, (q e^\top)_{i,\lceil p_{ij} \rceil},
/// ```
///
/// $w = p - \lfloor p \rfloor$. The gradient reaches $e$ and $q$ through the product and the
/// logits through $w$ (the integer parts are constants, as in x-transformers).
pub fn contextual_term(q: &Tensor<4>, scores: &Tensor<4>, cx: &Contextual) -> Tensor<4> {
    let [b, h, l, _] = scores.dims();
    let top = (cx.embeddings.dims()[0] - 1) as f32;
    let mask = causal_mask(b, h, l, &scores.device());
    // g_ij = sigma(s_ij), 0 for future keys, [B, H, L, L]
    let gates = sigmoid(scores.clone()).mask_fill(mask, 0.0);
    // p_ij = sum_{t >= j} g_it, the running sum from the row's end (as x-transformers:
    // flip, cumsum, flip; exactly 0 past the query), clamped at P - 1
    let p = gates.flip([3]).cumsum(3).flip([3]).clamp_max(top);
    let floor = p.clone().floor();
    let w = p.clone() - floor.clone();
    // q_i . e_n for every integer position n, [B, H, L, P]
    let logits = q
        .clone()
        .matmul(cx.embeddings.clone().transpose().unsqueeze::<4>());
    let at = |n: Tensor<4>| logits.clone().gather(3, n.int());
    let low = at(floor);
    let high = at(p.ceil());
    high * w.clone() + low * (w.neg() + 1.0)
}

/// `true` at the pairs $i - j \ge w$, `[B, H, L, L]`.
fn beyond_window(b: usize, h: usize, l: usize, w: usize, device: &Device) -> Tensor<4, Bool> {
    let far: Vec<bool> = (0..l * l).map(|p| p / l >= p % l + w).collect();
    Tensor::<2, Bool>::from_data(TensorData::new(far, [l, l]), device)
        .unsqueeze::<4>()
        .expand([b, h, l, l])
}

/// The model's causal attention with a scheme's terms ([`super::Ops::attention`]'s formula),
/// every intermediate kept: rotate, score, scale, bias, mask, softmax, weigh the values. The
/// compact terms are expanded to `[.., L, L]` first ([`position_bias`], [`gathered`],
/// [`distance_keys`], $p^Q P^{K\top}$).
pub fn attention_parts(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    terms: ScoreTerms,
    scale: f32,
) -> AttentionParts {
    let [b, h, l, dh] = q.dims();
    // the second pass rotates the unrotated q and k
    let second = terms
        .windowed
        .as_ref()
        .map(|w| (w.apply(q.clone(), k.clone(), rope_half), w.window));
    let (q, k) = match &terms.rotation {
        Some(rotation) => rotation.apply(
            q,
            k,
            Rotations {
                half: rope_half,
                pairs: rotate_interleaved,
                sequences: rope_half_sequences,
            },
        ),
        None => (q, k),
    };
    // tau_i R q_i + u, the content product's queries
    let q = ScoreTerms::scale_queries(terms.query_scale.as_ref(), q);
    let q = match terms.content_bias {
        Some(u) => q + u.reshape([1, h, 1, dh]),
        None => q,
    };
    // (tau_i R q_i + u) . R k_j, [B, H, L, L]
    let mut scores = q.clone().matmul(k.swap_dims(2, 3));
    // tau_i R2 q_i . R2 k_j where i - j >= w
    if let Some(((q2, k2), w)) = second {
        let q2 = ScoreTerms::scale_queries(terms.query_scale.as_ref(), q2);
        let far = beyond_window(b, h, l, w, &q2.device());
        scores = scores.mask_where(far, q2.matmul(k2.swap_dims(2, 3)));
    }
    // + t_ij + a_ij
    if let Some(g) = terms.query_table {
        scores = scores + gathered(g, false);
    }
    if let Some(g) = terms.key_table {
        scores = scores + gathered(g, true);
    }
    if let Some(dk) = terms.distance_keys {
        scores = scores + distance_keys(dk);
    }
    if let Some(u) = terms.untied {
        scores = scores + u.queries.matmul(u.keys.swap_dims(1, 2)).unsqueeze::<4>();
    }
    // c (...) + b_ij
    scores = scores.mul_scalar(scale);
    if let Some(bias) = terms.bias {
        scores = scores + position_bias(bias, l).unsqueeze::<4>();
    }
    // + z_ij (CoPE), its gates on the keys the mask keeps
    if let Some(cx) = &terms.contextual {
        scores = scores.clone() + contextual_term(&q, &scores, cx);
    }
    let scores = scores.mask_fill(causal_mask(b, h, l, &v.device()), f32::NEG_INFINITY);
    let probs = softmax(scores.clone(), 3);
    let mut output = probs.clone().matmul(v);
    if let Some(values) = terms.values {
        let index = of_distance(l, |d| values.index[d], &probs.device());
        output = output + relative_value_term(&probs, values.table, &index);
    }
    AttentionParts {
        scores,
        probs,
        output,
    }
}
