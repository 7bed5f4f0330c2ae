//! Two tables across the schemes of notebooks 01–09: which sign each one gives the relative
//! position ([`sign_conventions`], every value computed by the crate's own index functions) and
//! what each one changes, learns and does past the distances it was trained on
//! ([`scheme_summary`], with parameter counts read off the crate's objects).

use super::results::frame;
use ndarray::{array, Array2};
use polars::prelude::{Column, DataFrame, NamedFrom, Series};

use crate::encodings::alibi::{alibi_bias, alibi_slopes};
use crate::encodings::cope::Cope;
use crate::encodings::dd_alibi::{DataDependentAlibi, GATE_BIAS_INIT};
use crate::encodings::deberta::{deberta_relative_positions, DebertaRelative};
use crate::encodings::dpb::DynamicPositionBias;
use crate::encodings::fire::Fire;
use crate::encodings::init::Seeded;
use crate::encodings::kerple::{Kerple, KerpleKind};
use crate::encodings::learned::LearnedAbsolute;
use crate::encodings::rope::{rope_cos_sin, rope_interleaved, RopeConfig};
use crate::encodings::shaw::{relative_index_matrix, ShawRelative};
use crate::encodings::t5::{T5Bias, T5Buckets};
use crate::encodings::tupe::Tupe;
use crate::encodings::xl::{TransformerXl, XlDirection};
use crate::error::invalid;
use crate::Result;

/// The query and key of the sign table: a key two positions before its query.
const QUERY: usize = 5;
const KEY: usize = 3;

/// One row per scheme with a relative position: how the paper or its reference code writes it,
/// and the value the crate gives a key 2 positions *before* its query (query 5, key 3), read
/// off the crate's own index function, matrix or rotation (not typed in): $-2$ for key − query,
/// $+2$ for query − key.
///
/// Columns: `scheme`, `relative position`, `reference code`, `query 5, key 3` (an integer),
/// `read off`.
///
/// # Errors
/// When a scheme's computation fails, or a computed sign contradicts the convention its row
/// states (the table cannot print a wrong sign).
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let table = sign_conventions()?;
/// assert_eq!(table.height(), 6);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn sign_conventions() -> Result<DataFrame> {
    let rows: [(&str, &str, &str, i64, &str); 6] = [
        (
            "Shaw et al. (notebook 03)",
            "j − i (key − query), clipped to ±k",
            "tensor2tensor _generate_relative_positions_matrix: range[None, :] − range[:, None]",
            shaw_sign()?,
            "relative_index_matrix − k",
        ),
        (
            "Transformer-XL, XLNet (notebook 04)",
            "i − j (query − key), in R_{i−j}",
            "transformer-xl: pos_seq = arange(klen − 1, −1, −1), the distances i − j",
            xl_sign()?,
            "term (b) of terms_direct matched to q_i · R_δ W_R",
        ),
        (
            "T5 (notebook 05)",
            "j − i (key − query), bucketed",
            "Hugging Face T5: memory_position − context_position",
            t5_sign()?,
            "T5Buckets::matrix matched to bucket(δ)",
        ),
        (
            "DeBERTa (notebook 06)",
            "i − j (query − key), log-bucketed",
            "Hugging Face DeBERTa-v2: q_ids[:, None] − k_ids[None, :]",
            deberta_relative_positions(QUERY + 1, QUERY + 1, None)[[QUERY, KEY]],
            "deberta_relative_positions",
        ),
        (
            "RoPE (notebook 07)",
            "m − n (query − key), in the angle (m − n)θ",
            "RoFormer: q_m · k_n = Re[q k̄ e^{i(m−n)θ}]",
            rope_sign()?,
            "angle from the rotated key to the rotated query, θ = 1",
        ),
        (
            "ALiBi (notebook 09)",
            "|i − j| (no sign: the mask keeps the past)",
            "ofirpress/attention_with_linear_biases, Bloom build_alibi_tensor",
            alibi_distance()?,
            "alibi_bias / (−slope)",
        ),
    ];
    for (scheme, convention, _, value, _) in &rows {
        let query_minus_key = convention.starts_with("i − j") || convention.starts_with("m − n");
        let expected = if convention.starts_with('|') || query_minus_key {
            2
        } else {
            -2
        };
        if *value != expected {
            return Err(invalid(
                "sign table",
                format!("{scheme}: {value}"),
                format!("{expected}, the value its convention {convention:?} gives"),
            ));
        }
    }
    frame(vec![
        text("scheme", rows.iter().map(|r| r.0)),
        text("relative position", rows.iter().map(|r| r.1)),
        text("reference code", rows.iter().map(|r| r.2)),
        Series::new(
            "query 5, key 3".into(),
            rows.iter().map(|r| r.3).collect::<Vec<i64>>(),
        )
        .into(),
        text("read off", rows.iter().map(|r| r.4)),
    ])
}

/// Shaw: the table row of (query 5, key 3) minus the shift k.
fn shaw_sign() -> Result<i64> {
    let k = 10;
    Ok(relative_index_matrix(QUERY + 1, QUERY + 1, k)?[[QUERY, KEY]] as i64 - k as i64)
}

/// Transformer-XL: which of $R_{\pm 2}$ the crate's term (b) at (query 5, key 3) uses.
fn xl_sign() -> Result<i64> {
    let xl = TransformerXl::new(8, 4, XlDirection::Bidirectional, 0)?;
    let mut init = Seeded::new(1);
    let (q, k) = (
        init.normal((QUERY + 1, 4), 1.0)?,
        init.normal((QUERY + 1, 4), 1.0)?,
    );
    let term_b = xl.terms_direct(q.view(), k.view())?[1][[QUERY, KEY]];
    matching([2, -2], |delta| {
        let r = xl.relative_embeddings(&[delta as f64])?;
        Ok((q.row(QUERY).dot(&r.row(0)) - term_b).abs() < 1e-5)
    })
}

/// T5: which relative position's bucket the crate's bucket matrix holds at (query 5, key 3).
fn t5_sign() -> Result<i64> {
    let buckets = T5Buckets::new(32, 128, true)?;
    let at = buckets.matrix(QUERY + 1, QUERY + 1)?[[QUERY, KEY]];
    matching([2, -2], |delta| Ok(buckets.bucket(delta) == at))
}

/// RoPE with one pair and $\theta = 1$: the angle from the rotated key (at 3) to the rotated
/// query (at 5), both $[1, 0]$ before the rotation.
fn rope_sign() -> Result<i64> {
    let freqs = RopeConfig::new(2, 10_000.0)?.frequencies(None)?;
    let (cos, sin) = rope_cos_sin(&[QUERY as f64, KEY as f64], &freqs);
    let rotated = rope_interleaved(array![[1.0f32, 0.0], [1.0, 0.0]].view(), &cos, &sin)?;
    let (q, k) = (rotated.row(0), rotated.row(1));
    // atan2(k x q, k . q): the signed angle from k to q
    let angle = (k[0] * q[1] - k[1] * q[0]).atan2(k.dot(&q));
    Ok(angle.round() as i64)
}

/// ALiBi: the distance in the bias of (query 5, key 3), $b / (-m)$.
fn alibi_distance() -> Result<i64> {
    let slope = alibi_slopes(1)?[0];
    let bias = alibi_bias(1, QUERY + 1, QUERY + 1)?[[0, QUERY, KEY]];
    Ok((bias / -slope).round() as i64)
}

/// The one candidate for which `test` holds.
fn matching(candidates: [i64; 2], mut test: impl FnMut(i64) -> Result<bool>) -> Result<i64> {
    let mut found = Vec::new();
    for c in candidates {
        if test(c)? {
            found.push(c);
        }
    }
    match found[..] {
        [one] => Ok(one),
        _ => Err(invalid(
            "sign table",
            format!("{found:?}"),
            "exactly one matching sign",
        )),
    }
}

/// The configuration the parameter counts of [`scheme_summary`] are for.
pub const SUMMARY_CONFIG: &str =
    "d_model 64, 4 heads of width d_h = 16, 512 positions, k = s = 16, \
     32 buckets, FIRE and DPB 32 hidden units (DPB: two layers), CoPE P = 16";

/// One row per scheme of the crate: where position enters attention, the relative position it
/// uses, what it learns (counted on the crate's objects for [`SUMMARY_CONFIG`], one layer),
/// what happens past the longest distance seen in training, and the notebook.
///
/// Columns: `scheme`, `enters attention as`, `position`, `learned`, `parameters`,
/// `past the trained distances`, `notebook`.
///
/// # Errors
/// When building one of the objects fails (it does not for the fixed configuration).
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let table = scheme_summary()?;
/// assert_eq!(table.height(), 22);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn scheme_summary() -> Result<DataFrame> {
    let (d_model, heads, head_dim, positions, span) = (64, 4, 16, 512, 16);
    let t5 = || T5Bias::new(32, 128, false, heads, 0);
    let size = |a: &Array2<f32>| a.len();
    let shaw = ShawRelative::new(span, head_dim, 1.0, 0)?;
    let xl = TransformerXl::new(d_model, head_dim, XlDirection::Causal, 0)?;
    let deberta = DebertaRelative::new(None, span, head_dim, 0)?;
    let tupe = Tupe::new(positions, d_model, head_dim, 0, Some(t5()?))?;
    let kerple = Kerple::new(KerpleKind::Log, vec![1.0; heads], vec![1.0; heads])?;
    let fire = Fire::new(heads, 32, 0.1, 512.0, 0)?;
    let dpb = DynamicPositionBias::new(heads, 32, 2, true, false, 0)?;
    let dd_alibi = DataDependentAlibi::new(d_model, heads, GATE_BIAS_INIT, 0)?;
    let cope = Cope::new(span, head_dim)?;
    let rows: Vec<(&str, &str, &str, &str, usize, &str, &str)> = vec![
        (
            "sinusoidal",
            "added to the input",
            "absolute p",
            "nothing",
            0,
            "positions never seen, values still in [−1, 1]",
            "01",
        ),
        (
            "learned absolute",
            "added to the input",
            "absolute p",
            "a P × d_model table",
            size(&LearnedAbsolute::new(positions, d_model, 0, 0.02)?.table),
            "no row: an error",
            "01",
        ),
        (
            "Shaw et al.",
            "relative vectors (keys and values)",
            "clip(j − i, ±k)",
            "w^K, w^V: (2k + 1) × d_h",
            size(&shaw.keys) + size(&shaw.values),
            "treated as distance k",
            "03",
        ),
        (
            "Transformer-XL",
            "relative vectors (scores)",
            "i − j",
            "W_R, u, v",
            size(&xl.w_r) + xl.u.len() + xl.v.len(),
            "sinusoid phases never seen, through W_R",
            "04",
        ),
        (
            "T5",
            "score bias",
            "bucket(j − i)",
            "one scalar per bucket and head",
            size(&t5()?.table),
            "the last bucket's bias, the same for every far key",
            "05",
        ),
        (
            "DeBERTa",
            "relative vectors (scores)",
            "clip(i − j, ±s), log buckets",
            "K^r, Q^r: 2s × d_h",
            size(&deberta.pos_key) + size(&deberta.pos_query),
            "treated as distance s (the last row)",
            "06",
        ),
        (
            "TUPE",
            "score term + score bias",
            "absolute p, and bucket(j − i)",
            "p, U_q, U_k, T5 bias",
            size(&tupe.positions) + size(&tupe.u_q) + size(&tupe.u_k) + size(&t5()?.table),
            "no position row; the last bucket",
            "06",
        ),
        (
            "RoPE",
            "rotates q and k",
            "m − n, in the angle",
            "nothing",
            0,
            "angles never seen by the slow pairs",
            "07",
        ),
        (
            "ALiBi",
            "score bias",
            "|i − j|",
            "nothing (fixed slopes)",
            0,
            "the penalty keeps growing linearly",
            "09",
        ),
        (
            "xPos",
            "rotates and scales q and k",
            "m − n",
            "nothing",
            0,
            "the decay keeps shrinking far scores",
            "09",
        ),
        (
            "Kerple (log)",
            "score bias",
            "|i − j|",
            "r1, r2 per head",
            kerple.r1.len() + kerple.r2.len(),
            "the penalty keeps growing, logarithmically",
            "09",
        ),
        (
            "FIRE",
            "score bias",
            "ψ(i − j) / ψ(max(L, i))",
            "an MLP (and c, L)",
            fire.w1.len() + fire.b1.len() + fire.w2.len() + fire.b2.len() + 2,
            "inputs stay in [0, 1]; a fixed distance drifts past L",
            "09",
        ),
        (
            "NoPE",
            "nothing",
            "none",
            "nothing",
            0,
            "nothing to extrapolate",
            "09",
        ),
        (
            "DPB",
            "score bias",
            "sign(i − j) log(1 + |i − j|)",
            "an MLP over distance",
            dpb.num_params(),
            "the MLP's values past the largest log distance trained",
            "14",
        ),
        (
            "partial RoPE",
            "rotates a fraction of the pairs of q and k",
            "m − n, in the rotated pairs",
            "nothing",
            0,
            "the rotated pairs as RoPE's; the others carry no position",
            "14",
        ),
        (
            "p-RoPE",
            "rotates q and k, the slowest pairs left out",
            "m − n",
            "nothing",
            0,
            "no slow pair to take angles never seen",
            "14",
        ),
        (
            "RoPE/NoPE hybrid",
            "RoPE layers, and a NoPE layer every few",
            "m − n; none in the NoPE layers",
            "nothing",
            0,
            "RoPE's in the RoPE layers; the NoPE layers see every key alike",
            "14",
        ),
        (
            "randomized RoPE",
            "rotates q and k at sorted random positions",
            "m − n, drawn from a range N ≫ L",
            "nothing",
            0,
            "distances up to N were seen in training",
            "14",
        ),
        (
            "data-dependent ALiBi",
            "score bias from the tokens between",
            "Σ log σ(w·x_t + b) over j < t ≤ i",
            "w, b per head",
            dd_alibi.weight.len() + dd_alibi.bias.len(),
            "a decay set by the tokens, not by the distance",
            "14",
        ),
        (
            "CoPE",
            "score term q · e(p)",
            "p = Σ σ(q_i · k_t) over j ≤ t ≤ i",
            "e: P × d_h, shared by the heads",
            cope.pos_emb.len(),
            "counts clamp at P − 1",
            "15",
        ),
        (
            "ReRoPE (at inference)",
            "rotates q and k, two passes",
            "min(i − j, w)",
            "nothing",
            0,
            "no distance past the window w",
            "13",
        ),
        (
            "Self-Extend (at inference)",
            "rotates q and k, two passes",
            "i − j below w, grouped by G beyond",
            "nothing",
            0,
            "grouped distances stay inside L up to (L − w) G + w",
            "12",
        ),
    ];
    frame(vec![
        text("scheme", rows.iter().map(|r| r.0)),
        text("enters attention as", rows.iter().map(|r| r.1)),
        text("position", rows.iter().map(|r| r.2)),
        text("learned", rows.iter().map(|r| r.3)),
        Series::new(
            "parameters".into(),
            rows.iter().map(|r| r.4 as u64).collect::<Vec<u64>>(),
        )
        .into(),
        text("past the trained distances", rows.iter().map(|r| r.5)),
        text("notebook", rows.iter().map(|r| r.6)),
    ])
}

/// A text column.
fn text<'a>(name: &str, values: impl Iterator<Item = &'a str>) -> Column {
    Series::new(name.into(), values.collect::<Vec<&str>>()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::results::{column_f64, column_str};

    #[test]
    fn signs_follow_each_convention() {
        let table = sign_conventions().unwrap();
        let values = column_f64(&table, "query 5, key 3").unwrap();
        assert_eq!(values, vec![-2.0, 2.0, -2.0, 2.0, 2.0, 2.0]);
        assert_eq!(shaw_sign().unwrap(), -2);
        assert_eq!(rope_sign().unwrap(), 2);
        assert!(matching([2, -2], |_| Ok(true)).is_err());
        assert!(matching([2, -2], |_| Ok(false)).is_err());
    }

    #[test]
    fn summary_counts_the_parameters_of_each_scheme() {
        let table = scheme_summary().unwrap();
        let schemes = column_str(&table, "scheme").unwrap();
        let params = column_f64(&table, "parameters").unwrap();
        let count = |name: &str| params[schemes.iter().position(|s| s == name).unwrap()];
        assert_eq!(count("learned absolute"), (512 * 64) as f64);
        assert_eq!(count("Shaw et al."), (2 * 33 * 16) as f64);
        assert_eq!(count("Transformer-XL"), (64 * 16 + 2 * 16) as f64);
        assert_eq!(count("T5"), (32 * 4) as f64);
        assert_eq!(count("DeBERTa"), (2 * 32 * 16) as f64);
        assert_eq!(count("TUPE"), (512 * 64 + 2 * 64 * 16 + 32 * 4) as f64);
        assert_eq!(count("FIRE"), (32 + 32 + 32 * 4 + 4 + 2) as f64);
        assert_eq!(count("RoPE"), 0.0);
        // DPB: 1 -> 32 -> 32 -> 4, weights and biases
        assert_eq!(count("DPB"), (32 + 32 + 32 * 32 + 32 + 32 * 4 + 4) as f64);
        assert_eq!(count("data-dependent ALiBi"), (64 * 4 + 4) as f64);
        assert_eq!(count("CoPE"), (16 * 16) as f64);
        // each row names the notebook that derives the scheme
        let notebooks = column_str(&table, "notebook").unwrap();
        let notebook =
            |name: &str| notebooks[schemes.iter().position(|s| s == name).unwrap()].clone();
        assert_eq!(notebook("Self-Extend (at inference)"), "12");
        assert_eq!(notebook("ReRoPE (at inference)"), "13");
        // every trained scheme of the language model has its row
        assert_eq!(schemes.len(), 22);
        assert_eq!(table.width(), 7);
    }
}
