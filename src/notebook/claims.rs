//! The position math behind notebook 10's five claims on why relative encodings extrapolate:
//!
//! - [`claim_schemes`]: the schemes of notebooks 01-09 with seeded parameters, each marked
//!   relative by design or not;
//! - [`shift_table`]: claim 1, the largest change of any logit when the same tokens sit
//!   `shift` positions later, per scheme;
//! - [`append_changes`]: claim 2 (a), the largest change of the first tokens' logits when
//!   more tokens follow them;
//! - [`last_query_entropy`]: claim 2 (b), the entropy of one query's attention over more and
//!   more keys, and [`entropy_curves`] of it for six schemes.

use ndarray::{concatenate, s, Array2, ArrayView2, Axis};
use polars::prelude::{DataFrame, NamedFrom, Series};

use super::check::randn;
use super::results::frame;
use crate::attention::{attention, PositionScheme};
use crate::encodings::alibi::Alibi;
use crate::encodings::deberta::DebertaRelative;
use crate::encodings::fire::Fire;
use crate::encodings::kerple::{Kerple, KerpleKind};
use crate::encodings::learned::LearnedAbsolute;
use crate::encodings::nope::NoPe;
use crate::encodings::rope::{Rope, RopeConfig, RopeLayout, RopeScaling};
use crate::encodings::shaw::ShawRelative;
use crate::encodings::sinusoidal::SinusoidalAbsolute;
use crate::encodings::t5::T5Bias;
use crate::encodings::temperature::attention_entropy;
use crate::encodings::tupe::Tupe;
use crate::encodings::xl::{TransformerXl, XlDirection};
use crate::encodings::xpos::XPos;
use crate::error::{ensure, Result};
use crate::Error;

/// One scheme of the claims.
pub struct ClaimScheme {
    /// Its name in the tables, with the parameters that matter (`Shaw (k = 16)`).
    pub name: String,
    /// Whether the scheme is meant to be relative (its logits a function of $i - j$).
    pub relative: bool,
    /// The scheme, head 0 of which the claims use.
    pub scheme: Box<dyn PositionScheme>,
}

/// Every scheme of notebooks 01-09 for heads of width `d` (even, at least 2), one head each,
/// with seeded random parameters (trained values would change the numbers, not which ones are
/// equal): sinusoidal and learned absolute (512 positions), Shaw ($k = 16$), Transformer-XL,
/// T5's bias, DeBERTa (span 64), TUPE without its bias, RoPE, RoPE with dynamic NTK
/// ($L = 128$), ALiBi, xPos, Kerple (log), FIRE ($L = 64$) and NoPE.
///
/// # Errors
/// When an encoding rejects `d`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let schemes = claim_schemes(32)?;
/// assert_eq!(schemes.len(), 14);
/// assert_eq!(schemes.iter().filter(|s| s.relative).count(), 11);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn claim_schemes(d: usize) -> Result<Vec<ClaimScheme>> {
    let dynamic = RopeScaling::Dynamic {
        factor: 2.0,
        original_max: 128,
    };
    let entries: Vec<(&str, bool, Box<dyn PositionScheme>)> = vec![
        (
            "sinusoidal absolute",
            false,
            Box::new(SinusoidalAbsolute::new(d)?),
        ),
        (
            "learned absolute (512)",
            false,
            Box::new(LearnedAbsolute::new(512, d, 1, 0.5)?),
        ),
        (
            "Shaw (k = 16)",
            true,
            Box::new(ShawRelative::new(16, d, 0.5, 2)?),
        ),
        (
            "Transformer-XL",
            true,
            Box::new(TransformerXl::new(d, d, XlDirection::Causal, 3)?),
        ),
        (
            "T5 bias",
            true,
            Box::new(T5Bias::new(32, 128, false, 1, 4)?),
        ),
        (
            "DeBERTa (span 64)",
            true,
            Box::new(DebertaRelative::new(None, 64, d, 5)?),
        ),
        (
            "TUPE (no bias)",
            false,
            Box::new(Tupe::new(512, 2 * d, d, 6, None)?),
        ),
        (
            "RoPE",
            true,
            Box::new(Rope::new(RopeConfig::new(d, 10_000.0)?, RopeLayout::Half)),
        ),
        (
            "RoPE + dynamic NTK (L = 128)",
            true,
            Box::new(Rope::new(
                RopeConfig::with_scaling(d, 10_000.0, dynamic)?,
                RopeLayout::Half,
            )),
        ),
        ("ALiBi", true, Box::new(Alibi::new(1)?)),
        ("xPos", true, Box::new(XPos::new(d, 10_000.0, 512.0)?)),
        (
            "Kerple (log)",
            true,
            Box::new(Kerple::new(KerpleKind::Log, vec![1.0], vec![0.5])?),
        ),
        (
            "FIRE (L = 64)",
            true,
            Box::new(Fire::new(1, 32, 0.1, 64.0, 7)?),
        ),
        ("NoPE", true, Box::new(NoPe)),
    ];
    Ok(entries
        .into_iter()
        .map(|(name, relative, scheme)| ClaimScheme {
            name: name.to_string(),
            relative,
            scheme,
        })
        .collect())
}

/// The largest $|a - b|$ over the entries finite in both (a causal mask's $-\infty$ left
/// out), in `f64`.
///
/// # Errors
/// When the shapes differ.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let a = array![[1.0f32, f32::NEG_INFINITY], [2.0, 3.0]];
/// let b = array![[1.5f32, 7.0], [2.0, 3.25]];
/// assert_eq!(max_err_finite(a.view(), b.view())?, 0.5);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn max_err_finite(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<f64> {
    if a.dim() != b.dim() {
        return Err(Error::ShapeMismatch {
            context: "max_err_finite: two matrices of the same shape",
            expected: format!("{:?}", a.dim()),
            found: format!("{:?}", b.dim()),
        });
    }
    Ok(a.iter()
        .zip(b)
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max))
}

/// Claim 1 for every scheme of [`claim_schemes`]: `len` random queries and keys (width `d`,
/// causal, head 0) scored alone, then with `shift` other random keys before them, so that the
/// same tokens sit `shift` positions later; the largest change of any logit between the two
/// (the queries' own keys). A change below `1e-4` counts as shift invariant.
///
/// Columns: `scheme`, `relative by design`, `largest change of a logit after the shift`,
/// `shift invariant`.
///
/// # Errors
/// A length or shift of 0, or an encoding that rejects `d` or the positions (the learned
/// table ends at 512).
pub fn shift_table(d: usize, len: usize, shift: usize) -> Result<DataFrame> {
    ensure(
        len > 0 && shift > 0,
        "length and shift",
        len.min(shift),
        "at least 1",
    )?;
    let (q, k) = (randn(len, d, 10), randn(len, d, 11));
    // keys: `shift` other tokens, then the same `len`; the queries sit at the last positions
    let k_long = concatenate(Axis(0), &[randn(shift, d, 13).view(), k.view()])
        .map_err(|e| Error::Io(e.to_string()))?;
    let mut columns: (Vec<String>, Vec<bool>, Vec<f64>, Vec<bool>) = Default::default();
    for s in claim_schemes(d)? {
        let short = attention(q.view(), k.view(), k.view(), s.scheme.as_ref(), 0, true)?;
        let long = attention(
            q.view(),
            k_long.view(),
            k_long.view(),
            s.scheme.as_ref(),
            0,
            true,
        )?;
        let change = max_err_finite(long.scores.slice(s![.., shift..]), short.scores.view())?;
        columns.0.push(s.name);
        columns.1.push(s.relative);
        columns.2.push(change);
        columns.3.push(change < 1e-4);
    }
    frame(vec![
        Series::new("scheme".into(), columns.0).into(),
        Series::new("relative by design".into(), columns.1).into(),
        Series::new(
            "largest change of a logit after the shift".into(),
            columns.2,
        )
        .into(),
        Series::new("shift invariant".into(), columns.3).into(),
    ])
}

/// Claim 2 (a) for every scheme of [`claim_schemes`] but the ones whose tables end at 512
/// positions (learned absolute, TUPE): the largest change of the logits among the first
/// `len` tokens when `extra` more tokens follow them, `(name, change)`.
///
/// # Errors
/// A length of 0, or an encoding that rejects `d`.
pub fn append_changes(d: usize, len: usize, extra: usize) -> Result<Vec<(String, f64)>> {
    ensure(len > 0, "length", len, "at least 1")?;
    let (q, k) = (randn(len + extra, d, 20), randn(len + extra, d, 21));
    let (q_head, k_head) = (q.slice(s![..len, ..]), k.slice(s![..len, ..]));
    let mut changes = Vec::new();
    for s in claim_schemes(d)? {
        if s.name.starts_with("learned") || s.name.starts_with("TUPE") {
            continue;
        }
        let full = attention(q.view(), k.view(), k.view(), s.scheme.as_ref(), 0, true)?;
        let head = attention(q_head, k_head, k_head, s.scheme.as_ref(), 0, true)?;
        let change = max_err_finite(full.scores.slice(s![..len, ..len]), head.scores.view())?;
        changes.push((s.name, change));
    }
    Ok(changes)
}

/// The entropy (nats) of the attention weights of the query `q` (one row, at the last
/// position) over the last `n` rows of `keys`: the nearest keys are the same for every `n`.
///
/// # Errors
/// `q` not one row, `n` of 0 or more than the keys, or a scheme that rejects the positions.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// // no position term and keys equal to 0: uniform weights, entropy ln n
/// let (q, keys) = (randn(1, 8, 1), Array2::zeros((64, 8)));
/// assert!((last_query_entropy(&NoPe, &q, &keys, 64)? - 64f64.ln()).abs() < 1e-5);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn last_query_entropy(
    scheme: &dyn PositionScheme,
    q: &Array2<f32>,
    keys: &Array2<f32>,
    n: usize,
) -> Result<f64> {
    ensure(q.nrows() == 1, "query rows", q.nrows(), "1")?;
    ensure(
        (1..=keys.nrows()).contains(&n),
        "number of keys",
        n,
        &format!("1 to {}", keys.nrows()),
    )?;
    let k = keys.slice(s![keys.nrows() - n.., ..]);
    let out = attention(q.view(), k, k, scheme, 0, true)?;
    Ok(attention_entropy(out.probs.view())?[0])
}

/// Claim 2 (b) for NoPE, RoPE, T5's bias (32 buckets, maximum distance 128), Kerple (log,
/// $r_1 = 1$, $r_2 = 0.5$) and ALiBi with slopes $1/16$ and $1/256$: the entropy
/// ([`last_query_entropy`]) of one random query of width `d` over the last $n$ of
/// $\max n$ random keys, for each $n$ of `lengths`, as `(scheme, entropies)`.
///
/// # Errors
/// An empty `lengths`, a length of 0, or an encoding that rejects `d`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let curves = entropy_curves(16, &[8, 64])?;
/// assert_eq!(curves.len(), 6);
/// // no position term: the entropy is at most ln n
/// assert!(curves[0].1[1] <= 64f64.ln() + 1e-9);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn entropy_curves(d: usize, lengths: &[usize]) -> Result<Vec<(String, Vec<f64>)>> {
    let most = lengths.iter().copied().max().unwrap_or(0);
    ensure(
        most > 0,
        "lengths",
        format!("{lengths:?}"),
        "one or more positive key counts",
    )?;
    let (q, keys) = (randn(1, d, 40), randn(most, d, 41));
    let schemes: Vec<(&str, Box<dyn PositionScheme>)> = vec![
        ("NoPE", Box::new(NoPe)),
        (
            "RoPE",
            Box::new(Rope::new(RopeConfig::new(d, 10_000.0)?, RopeLayout::Half)),
        ),
        ("T5 bias", Box::new(T5Bias::new(32, 128, false, 1, 4)?)),
        (
            "Kerple (log, r1 = 1, r2 = 0.5)",
            Box::new(Kerple::new(KerpleKind::Log, vec![1.0], vec![0.5])?),
        ),
        (
            "ALiBi, m = 1/16",
            Box::new(Alibi::from_slopes(vec![1.0 / 16.0])?),
        ),
        (
            "ALiBi, m = 1/256",
            Box::new(Alibi::from_slopes(vec![1.0 / 256.0])?),
        ),
    ];
    schemes
        .into_iter()
        .map(|(name, scheme)| {
            let e = lengths
                .iter()
                .map(|&n| last_query_entropy(scheme.as_ref(), &q, &keys, n))
                .collect::<Result<Vec<f64>>>()?;
            Ok((name.to_string(), e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::results::{column_bool, column_f64};

    /// The relative schemes with fixed parameters are shift invariant and the others are not:
    /// the absolute ones, TUPE's untied term, dynamic NTK (the length changed too) and FIRE
    /// past its threshold $L = 64$.
    #[test]
    fn shift_invariance_follows_the_design() {
        let table = shift_table(32, 32, 300).unwrap();
        assert_eq!(table.height(), 14);
        let names = table.column("scheme").unwrap().str().unwrap().clone();
        let relative = column_bool(&table, "relative by design").unwrap();
        let invariant = column_bool(&table, "shift invariant").unwrap();
        for i in 0..table.height() {
            let name = names.get(i).unwrap();
            let expected = relative[i] && !name.contains("dynamic") && !name.contains("FIRE");
            assert_eq!(invariant[i], expected, "{name}");
        }
        let changes = column_f64(&table, "largest change of a logit after the shift").unwrap();
        assert!(changes.iter().all(|c| c.is_finite() && *c >= 0.0));
        assert!(shift_table(32, 0, 3).is_err());
    }

    /// Only dynamic NTK changes earlier logits when tokens are appended.
    #[test]
    fn appending_changes_only_dynamic_ntk() {
        let changes = append_changes(32, 64, 128).unwrap();
        assert_eq!(changes.len(), 12);
        for (name, change) in changes {
            assert_eq!(change > 1e-4, name.contains("dynamic"), "{name}: {change}");
        }
    }

    /// The entropy against a hand computation on two keys, and bad inputs.
    #[test]
    fn entropy_of_the_last_query() {
        // q . k = 0 and ln 2 / ... : with NoPE, keys [0] and [c] give weights softmax(0, c/sqrt(d))
        let q = ndarray::array![[2.0f32, 0.0]];
        let keys = ndarray::array![[0.0f32, 0.0], [1.0, 0.0]];
        let z = 2.0f64 / 2f64.sqrt();
        let p1 = z.exp() / (1.0 + z.exp());
        let want = -(p1 * p1.ln() + (1.0 - p1) * (1.0 - p1).ln());
        let got = last_query_entropy(&NoPe, &q, &keys, 2).unwrap();
        assert!((got - want).abs() < 1e-6, "{got} {want}");
        assert!(last_query_entropy(&NoPe, &q, &keys, 3).is_err());
        assert!(last_query_entropy(&NoPe, &keys, &keys, 2).is_err());
        assert!(max_err_finite(q.view(), keys.view()).is_err());
    }
}
