//! Attention, fused against the composed reference, for every position term the schemes hand
//! over: a bias per distance, a piecewise-linear bias, tables read in the query's and in the
//! key's row, relative keys per distance, untied absolute terms, relative values per
//! distance, the content bias, CoPE's contextual positions, and the schemes' combinations;
//! values and the gradients of $q, k, v$ and of every term's own compact tensors (a piecewise
//! bias's feature factors $\psi$ and $\nu$ included), at lengths across the 32-row tile; then
//! central finite differences of each term's gradient on the fused path.

use std::sync::Arc;

use burn::tensor::{Device, Gradients, Tensor, TensorData};
use posenc::lm::model::to_vec;
use posenc::lm::ops::{
    fused, reference, Contextual, DistanceKeys, Gathered, PiecewiseBias, PositionBias,
    RelativeValues, ScoreTerms, Untied,
};

use super::{assert_close, check_finite_differences, check_finite_differences_at, weighted_sum};
use crate::support::uniform;

/// A tensor of any rank that records its gradient.
#[derive(Clone)]
enum Leaf {
    T1(Tensor<1>),
    T2(Tensor<2>),
    T3(Tensor<3>),
    T4(Tensor<4>),
}

impl Leaf {
    fn grad(&self, g: &Gradients) -> Vec<f32> {
        match self {
            Leaf::T1(t) => to_vec(t.grad(g).expect("a gradient")),
            Leaf::T2(t) => to_vec(t.grad(g).expect("a gradient")),
            Leaf::T3(t) => to_vec(t.grad(g).expect("a gradient")),
            Leaf::T4(t) => to_vec(t.grad(g).expect("a gradient")),
        }
    }
}

/// One problem: $q, k, v$, the terms, and every leaf ($q, k, v$ first) with its name.
struct Case {
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    terms: ScoreTerms,
    leaves: Vec<(&'static str, Leaf, Vec<f32>)>,
    scale: f32,
}

/// The leaves' values come from seeds, so that two builds of one problem are equal; `set`
/// replaces the values of leaf `n` (for finite differences).
struct Builder<'a> {
    device: &'a Device,
    leaves: Vec<(&'static str, Leaf, Vec<f32>)>,
    set: Option<(usize, &'a [f32])>,
}

impl Builder<'_> {
    fn values(&mut self, n: usize, seed: u64, scale: f32) -> Vec<f32> {
        match self.set {
            Some((at, v)) if at == self.leaves.len() => v.to_vec(),
            _ => uniform(n, seed, scale),
        }
    }

    /// A leaf of the given values (unless `set` replaces them).
    fn given(&mut self, name: &'static str, values: Vec<f32>) -> Tensor<1> {
        let v = match self.set {
            Some((at, v)) if at == self.leaves.len() => v.to_vec(),
            _ => values,
        };
        let t =
            Tensor::from_data(TensorData::new(v.clone(), [v.len()]), self.device).require_grad();
        self.leaves.push((name, Leaf::T1(t.clone()), v));
        t
    }

    fn t2(&mut self, name: &'static str, shape: [usize; 2], seed: u64, scale: f32) -> Tensor<2> {
        let v = self.values(shape.iter().product(), seed, scale);
        let t = Tensor::from_data(TensorData::new(v.clone(), shape), self.device).require_grad();
        self.leaves.push((name, Leaf::T2(t.clone()), v));
        t
    }

    fn t3(&mut self, name: &'static str, shape: [usize; 3], seed: u64, scale: f32) -> Tensor<3> {
        let v = self.values(shape.iter().product(), seed, scale);
        let t = Tensor::from_data(TensorData::new(v.clone(), shape), self.device).require_grad();
        self.leaves.push((name, Leaf::T3(t.clone()), v));
        t
    }

    fn t4(&mut self, name: &'static str, shape: [usize; 4], seed: u64, scale: f32) -> Tensor<4> {
        let v = self.values(shape.iter().product(), seed, scale);
        let t = Tensor::from_data(TensorData::new(v.clone(), shape), self.device).require_grad();
        self.leaves.push((name, Leaf::T4(t.clone()), v));
        t
    }
}

/// $\text{index}(d) = k - \min(d, k)$, $k = 5$ (Shaw's clipped index from the past): 11 rows.
fn clipped(l: usize) -> (usize, Arc<[usize]>) {
    (11, (0..l).map(|d| 5 - d.min(5)).collect())
}

/// $\lfloor\sqrt d\rfloor + 2$ clipped to 9 (a log-like bucket): 10 rows.
fn root(l: usize) -> (usize, Arc<[usize]>) {
    (
        10,
        (0..l)
            .map(|d| ((d as f64).sqrt() as usize + 2).min(9))
            .collect(),
    )
}

/// The piecewise bias's breakpoints.
const BREAKPOINTS: [f32; 5] = [0.1, 0.3, 0.3, 0.55, 0.8];

/// $\psi_d = \ln(1 + 0.1 d)$ and $\nu_i = 1/\ln(1 + 0.1 \max(16, i))$, `[L]` each: FIRE's
/// factors at $c = 0.1$, threshold 16.
fn fire_factors(l: usize) -> (Vec<f32>, Vec<f32>) {
    (
        (0..l).map(|d| (0.1 * d as f64).ln_1p() as f32).collect(),
        (0..l)
            .map(|i| (1.0 / (0.1 * i.max(16) as f64).ln_1p()) as f32)
            .collect(),
    )
}

/// The entries of $\psi$ (or, with `rows`, of $\nu$) whose change by $\pm\varepsilon$ moves no
/// $x_{ij} = \psi_{i-j}\nu_i$ across a breakpoint: where the piecewise bias is differentiable.
fn away_from_breakpoints(l: usize, rows: bool, eps: f32) -> Vec<usize> {
    let (psi, nu) = fire_factors(l);
    let crosses = |x0: f32, x1: f32| BREAKPOINTS.iter().any(|&t| (x0 - t) * (x1 - t) <= 0.0);
    (0..l)
        .filter(|&k| {
            !(0..l)
                .flat_map(|i| (0..=i).map(move |j| (i, j)))
                .any(|(i, j)| {
                    let (d, moved) = (i - j, if rows { i == k } else { i - j == k });
                    let x = |dp: f32, dn: f32| (psi[d] + dp) * (nu[i] + dn);
                    let (lo, hi) = if rows {
                        (x(0.0, -eps), x(0.0, eps))
                    } else {
                        (x(-eps, 0.0), x(eps, 0.0))
                    };
                    moved && crosses(lo, hi)
                })
        })
        .collect()
}

/// The problem `label` (terms joined by `+`) of `[B, H, L, D]`.
fn case(
    label: &str,
    [b, h, l, d]: [usize; 4],
    device: &Device,
    set: Option<(usize, &[f32])>,
) -> Case {
    let has = |term: &str| label.split('+').any(|t| t == term);
    let mut x = Builder {
        device,
        leaves: Vec::new(),
        set,
    };
    let q = x.t4("q", [b, h, l, d], 1, 1.0);
    let k = x.t4("k", [b, h, l, d], 2, 1.0);
    let v = x.t4("v", [b, h, l, d], 3, 1.0);
    let mut terms = ScoreTerms::default();
    if has("u") {
        terms.content_bias = Some(x.t2("u", [h, d], 4, 0.5));
    }
    if has("distance") {
        terms.bias = Some(PositionBias::Distance(x.t2("beta", [h, l], 5, 2.0)));
    }
    if has("piecewise") {
        // x = ln(1 + 0.1 d) / ln(1 + 0.1 max(16, i)); breakpoints inside [0, 1], two equal
        let (feature, row_scale) = fire_factors(l);
        let breakpoints: Arc<[f32]> = BREAKPOINTS.into();
        let p = breakpoints.len() + 1;
        terms.bias = Some(PositionBias::Piecewise(PiecewiseBias {
            intercepts: x.t2("intercepts", [h, p], 6, 1.0),
            slopes: x.t2("slopes", [h, p], 7, 2.0),
            feature: x.given("feature", feature),
            row_scale: x.given("row scale", row_scale),
            breakpoints,
        }));
    }
    if has("query") {
        let (rows, index) = clipped(l);
        terms.query_table = Some(Gathered {
            table: x.t4("query table", [b, h, l, rows], 8, 1.0),
            index,
        });
    }
    if has("key") {
        let (rows, index) = root(l);
        terms.key_table = Some(Gathered {
            table: x.t4("key table", [b, h, l, rows], 9, 1.0),
            index,
        });
    }
    if has("rho") {
        terms.distance_keys = Some(DistanceKeys {
            queries: x.t4("relative queries", [b, h, l, d], 10, 1.0),
            keys: x.t3("relative keys", [h, l, d], 11, 1.0),
        });
    }
    if has("untied") {
        terms.untied = Some(Untied {
            queries: x.t3("untied queries", [h, l, d], 12, 1.0),
            keys: x.t3("untied keys", [h, l, d], 13, 1.0),
        });
    }
    if has("values") {
        let (rows, index) = clipped(l);
        terms.values = Some(RelativeValues {
            table: x.t2("value table", [rows, d], 14, 1.0),
            index,
        });
    }
    if has("cope") {
        // P = 8: the counts (about half a row's keys) clamp in the rows past 14 only
        terms.contextual = Some(Contextual {
            embeddings: x.t2("cope embeddings", [8, d], 15, 1.0),
        });
    }
    Case {
        q,
        k,
        v,
        terms,
        leaves: x.leaves,
        scale: 1.0 / (d as f32).sqrt(),
    }
}

impl Case {
    /// The attention output on one path.
    fn output(&self, fused: bool) -> Tensor<4> {
        let (q, k, v, terms) = (
            self.q.clone(),
            self.k.clone(),
            self.v.clone(),
            self.terms.clone(),
        );
        if fused {
            fused::attention(q, k, v, terms, self.scale)
        } else {
            reference::attention_parts(q, k, v, terms, self.scale).output
        }
    }

    /// The output and the gradient of every leaf, on one path.
    fn run(&self, fused: bool) -> Vec<(String, Vec<f32>)> {
        let out = self.output(fused);
        let grads = weighted_sum(out.clone(), 20).backward();
        let mut all = vec![("output".to_string(), to_vec(out))];
        for (name, leaf, _) in &self.leaves {
            all.push((format!("d{name}"), leaf.grad(&grads)));
        }
        all
    }
}

/// The problems: each term alone, the schemes' combinations (Shaw: query table and values;
/// DeBERTa: both tables; Transformer-XL: content bias and relative keys; TUPE: untied terms
/// and a bias per distance), and every term at once; CoPE alone, with a bias (its gates read
/// the biased logits), with the content bias (its products take the same queries) and with
/// every other term.
const LABELS: [&str; 17] = [
    "none",
    "u",
    "distance",
    "piecewise",
    "query",
    "key",
    "rho",
    "untied",
    "values",
    "query+values",
    "query+key",
    "u+rho",
    "piecewise+query+key+rho+untied+values+u",
    "cope",
    "cope+distance",
    "cope+u",
    "cope+piecewise+query+key+rho+untied+values+u",
];

#[test]
fn fused_attention_matches_reference_values_and_gradients() {
    let device = Device::flex().autodiff();
    // lengths below, across and at multiples of the 32-row tile
    for dims in [[2, 3, 1, 8], [2, 2, 45, 8], [1, 2, 70, 16], [3, 1, 64, 4]] {
        for label in LABELS {
            let c = case(label, dims, &device, None);
            let (fused, reference) = (c.run(true), c.run(false));
            assert_eq!(fused.len(), reference.len());
            for ((name, a), (_, r)) in fused.iter().zip(&reference) {
                assert_close(&format!("attention {dims:?} {label} {name}"), a, r);
            }
        }
    }
}

/// Central differences of the fused loss at a few entries of every term's tensors (and of
/// $q$, $k$, $v$) against the fused gradient, at a length across the tile (the key table also
/// at one where its index has a run of one column: the transposed layout).
#[test]
fn fused_attention_gradients_match_finite_differences() {
    let device = Device::flex().autodiff();
    let dims = [1, 2, 37, 8];
    let label = "piecewise+query+key+rho+untied+values+u";
    let base = case(label, dims, &device, None);
    let analytic = base.run(true);
    for (n, (name, _, x)) in base.leaves.iter().enumerate() {
        let loss = |v: &[f32]| {
            let c = case(label, dims, &device, Some((n, v)));
            f64::from(to_vec(weighted_sum(c.output(true), 20))[0])
        };
        let grad = &analytic[n + 1].1;
        match *name {
            // the feature's factors: at entries whose step moves no pair across a
            // breakpoint (the random pieces do not join), queries below and above the
            // threshold (16) among them
            "feature" | "row scale" => {
                let eps = 4e-3;
                let at = away_from_breakpoints(dims[2], *name == "row scale", eps);
                assert!(at.len() >= 10 && at.iter().any(|&i| i < 16) && at.iter().any(|&i| i > 16));
                check_finite_differences_at(name, x, grad, loss, eps, &at);
            }
            _ => {
                check_finite_differences(name, x, grad, loss, 1e-2);
            }
        }
    }
    // a bias per distance, alone (the piecewise bias above takes the bias's place); the key
    // table at a length where its index has a run of one column (read transposed, where at
    // 37 it is read key by key); CoPE's embeddings with a bias, and the queries, which reach
    // the loss through the content product, the gates and the products with e
    for (label, dims, leaf) in [
        ("distance", dims, 3),
        ("key", [1, 2, 70, 8], 3),
        ("cope+distance", dims, 4),
        ("cope+distance", dims, 0),
    ] {
        let base = case(label, dims, &device, None);
        let analytic = base.run(true);
        let (name, _, x) = &base.leaves[leaf];
        let loss = |v: &[f32]| {
            let c = case(label, dims, &device, Some((leaf, v)));
            f64::from(to_vec(weighted_sum(c.output(true), 20))[0])
        };
        check_finite_differences(name, x, &analytic[leaf + 1].1, loss, 1e-2);
    }
}

/// Relative keys per distance as the attention reads them, $\hat q_i \cdot \rho_{i-j}$
/// ([`reference::distance_keys`]), equal Transformer-XL's own computation on and below the
/// diagonal (the part the causal mask keeps): the products with the distances in the paper's
/// order $L-1, \dots, 0$, then its pad-reshape-slice `rel_shift`.
#[test]
fn distance_keys_are_what_rel_shift_shifts() {
    use posenc::lm::ops::reference::rel_shift;
    let device = Device::flex();
    for l in [1, 7, 40] {
        let (b, h, d) = (2, 3, 4);
        let tensor3 = |shape: [usize; 3], seed| {
            Tensor::<3>::from_data(
                TensorData::new(uniform(shape.iter().product(), seed, 1.0), shape),
                &device,
            )
        };
        let queries = Tensor::<4>::from_data(
            TensorData::new(uniform(b * h * l * d, 51, 1.0), [b, h, l, d]),
            &device,
        );
        let keys = tensor3([h, l, d], 52);
        let expanded = to_vec(reference::distance_keys(DistanceKeys {
            queries: queries.clone(),
            keys: keys.clone(),
        }));
        // the paper: rho for distances L-1..0, products [B, H, L, L], shifted
        let reversed = keys.flip([1]);
        let shifted = to_vec(rel_shift(
            queries.matmul(reversed.swap_dims(1, 2).unsqueeze::<4>()),
        ));
        for bh in 0..b * h {
            for i in 0..l {
                for j in 0..=i {
                    let at = bh * l * l + i * l + j;
                    assert_eq!(expanded[at], shifted[at], "L={l} head {bh} ({i}, {j})");
                }
            }
        }
    }
}
