//! The naive attention the tests of [`super::forward`] and [`super::backward`] compare with:
//! loops over batch, head, query and key in `f64`, every input contiguous `[B, H, L, D]`, and
//! every position term written out pair by pair from its definition in [`super::terms`].

use super::super::heads::{AttentionDims, Heads};
use super::super::testing::values;
use super::{Bias, Contextual, DistanceKeys, Gathered, Piecewise, RelativeValues, Terms, Untied};

/// The bias of a problem.
pub enum NaiveBias {
    None,
    /// $\beta$, `[H, L]`.
    Distance(Vec<f32>),
    /// $\psi$ `[L]`, $\nu$ `[L]`, breakpoints `[P-1]`, intercepts and slopes `[H, P]`.
    Piecewise([Vec<f32>; 5]),
}

/// A gathered table `[B, H, L, R]`, its `R` and its index over distance `[L]`.
pub type Table = (Vec<f32>, usize, Vec<usize>);

/// One attention problem: seeded inputs and terms.
pub struct Case {
    pub dims: AttentionDims,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub bias: NaiveBias,
    pub query_table: Option<Table>,
    pub key_table: Option<Table>,
    /// Relative queries $\hat q$ `[B, H, L, D]` (with `rho`).
    pub qhat: Option<Vec<f32>>,
    /// Relative keys $\rho$ `[H, L, D]`.
    pub rho: Vec<f32>,
    /// $p^Q$, $p^K$ `[H, L, D]`.
    pub untied: Option<(Vec<f32>, Vec<f32>)>,
    /// Relative values: the table `[R, D]`, `R`, and the index over distance `[L]`.
    pub values: Option<(Vec<f32>, usize, Vec<usize>)>,
    /// CoPE's embeddings $e$ `[P, D]` and $P$.
    pub cope: Option<(Vec<f32>, usize)>,
    pub scale: f32,
    /// What the case holds, for messages.
    pub label: &'static str,
}

/// The expected gradients: $q, k, v, \hat q, \rho, p^Q, p^K, g, g', a^V, e$ in that order
/// (empty where absent), then the bias's (or intercepts'), the slopes', and a piecewise bias's
/// feature's $\partial\psi$ and $\partial\nu$ (summed over batch and heads).
pub struct Want {
    pub inputs: [Vec<f64>; 11],
    pub bias: Vec<f64>,
    pub slopes: Vec<f64>,
    pub feature: Vec<f64>,
    pub row_scale: Vec<f64>,
}

/// $\text{index}(d) = k - \min(d, k)$ with $k = 4$ (Shaw's clipped index seen from the past):
/// 9 rows, 4 of them never used.
fn clipped(l: usize) -> (usize, Vec<usize>) {
    (9, (0..l).map(|d| 4 - d.min(4)).collect())
}

/// $\text{index}(d) = \lfloor\sqrt d\rfloor + 3$ clipped to 9 (a log-like bucket): 16 rows,
/// 6 of them never used. Short runs of one column, then one from $d = 36$ on (long at
/// $L = 64, 70$: the kernels then read the table transposed).
fn root(l: usize) -> (usize, Vec<usize>) {
    (
        16,
        (0..l)
            .map(|d| ((d as f64).sqrt() as usize + 3).min(9))
            .collect(),
    )
}

impl Case {
    /// The problem `label` of `dims`: which terms it holds.
    pub fn new([b, h, l, d]: [usize; 4], label: &'static str) -> Self {
        let dims = AttentionDims {
            batch: b,
            heads: h,
            len: l,
            dim: d,
        };
        let n = b * h * l * d;
        let has = |term: &str| label.split('+').any(|t| t == term);
        let table = |(rows, index): (usize, Vec<usize>), seed| {
            (values(b * h * l * rows, seed, 1.0), rows, index)
        };
        let pieces = 6;
        let bias = if has("distance") {
            NaiveBias::Distance(values(h * l, 8, 2.0))
        } else if has("piecewise") {
            // x = ln(1 + 0.1 d) / ln(1 + 0.1 max(20, i)) in [0, 1]; breakpoints inside and
            // outside that range, two of them equal
            let feature = (0..l).map(|d| (0.1 * d as f64).ln_1p() as f32).collect();
            let row_scale = (0..l)
                .map(|i| (1.0 / (0.1 * i.max(20) as f64).ln_1p()) as f32)
                .collect();
            NaiveBias::Piecewise([
                feature,
                row_scale,
                vec![-0.5, 0.15, 0.4, 0.4, 0.75],
                values(h * pieces, 9, 1.0),
                values(h * pieces, 10, 2.0),
            ])
        } else {
            NaiveBias::None
        };
        Self {
            dims,
            q: values(n, 1, 1.0),
            k: values(n, 2, 1.0),
            v: values(n, 3, 1.0),
            bias,
            query_table: has("query").then(|| table(clipped(l), 11)),
            key_table: has("key").then(|| table(root(l), 12)),
            qhat: has("rho").then(|| values(n, 13, 1.0)),
            rho: if has("rho") {
                values(h * l * d, 14, 1.0)
            } else {
                Vec::new()
            },
            untied: has("untied").then(|| (values(h * l * d, 15, 1.0), values(h * l * d, 16, 1.0))),
            values: has("values").then(|| {
                let (rows, index) = clipped(l);
                (values(rows * d, 6, 1.0), rows, index)
            }),
            // P = 8: the counts (about half a row's keys) clamp in rows past 14 only
            cope: has("cope").then(|| (values(8 * d, 17, 1.0), 8)),
            scale: 1.0 / (d as f32).sqrt(),
            label,
        }
    }

    /// The case in messages.
    pub fn name(&self) -> String {
        format!("{:?} {}", self.dims, self.label)
    }

    /// The terms as the kernels take them, the relative queries as stored by the test.
    pub fn terms<'a>(&'a self, qhat: Option<Heads<'a>>) -> Terms<'a> {
        let gathered = |t: &'a Option<Table>| {
            t.as_ref().map(|(table, rows, index)| Gathered {
                table,
                rows: *rows,
                index,
            })
        };
        Terms {
            bias: match &self.bias {
                NaiveBias::None => Bias::None,
                NaiveBias::Distance(b) => Bias::Distance(b),
                NaiveBias::Piecewise([feature, row_scale, breakpoints, intercepts, slopes]) => {
                    Bias::Piecewise(Piecewise {
                        feature,
                        row_scale,
                        breakpoints,
                        intercepts,
                        slopes,
                    })
                }
            },
            query_table: gathered(&self.query_table),
            key_table: gathered(&self.key_table),
            distance: qhat.map(|queries| DistanceKeys {
                queries,
                keys: &self.rho,
            }),
            untied: self
                .untied
                .as_ref()
                .map(|(queries, keys)| Untied { queries, keys }),
            values: self
                .values
                .as_ref()
                .map(|(table, rows, index)| RelativeValues {
                    table,
                    rows: *rows,
                    index,
                }),
            window: None,
            contextual: self
                .cope
                .as_ref()
                .map(|(embeddings, positions)| Contextual {
                    embeddings,
                    positions: *positions,
                }),
        }
    }

    /// Entry `(bh, i, c)` of a contiguous `[B, H, L, D]` tensor.
    fn at(&self, t: &[f32], bh: usize, i: usize, c: usize) -> f64 {
        let (l, d) = (self.dims.len, self.dims.dim);
        f64::from(t[(bh * l + i) * d + c])
    }

    /// The piece and $x$ of a piecewise bias at query `i`, key `j` (in `f32`, as the kernel).
    fn piece(&self, i: usize, j: usize) -> Option<(usize, f32)> {
        match &self.bias {
            NaiveBias::Piecewise([feature, row_scale, breakpoints, ..]) => {
                let x = feature[i - j] * row_scale[i];
                Some((breakpoints.iter().filter(|&&t| t < x).count(), x))
            }
            _ => None,
        }
    }

    /// $b_{ij}$ of head `h`.
    fn b(&self, h: usize, i: usize, j: usize) -> f64 {
        let l = self.dims.len;
        match &self.bias {
            NaiveBias::None => 0.0,
            NaiveBias::Distance(t) => f64::from(t[h * l + i - j]),
            NaiveBias::Piecewise([_, _, breakpoints, a, s]) => {
                let (p, x) = self.piece(i, j).unwrap_or_default();
                let pieces = breakpoints.len() + 1;
                f64::from(a[h * pieces + p]) + f64::from(s[h * pieces + p]) * f64::from(x)
            }
        }
    }

    /// $t_{ij}$ (before the scale) of head `bh`.
    fn t(&self, bh: usize, i: usize, j: usize) -> f64 {
        let (h, l, d) = (bh % self.dims.heads, self.dims.len, self.dims.dim);
        let dotted = |a: &[f32], ai: usize, b: &[f32], bi: usize| -> f64 {
            (0..d)
                .map(|c| f64::from(a[ai * d + c]) * f64::from(b[bi * d + c]))
                .sum()
        };
        let mut t = dotted(&self.q, bh * l + i, &self.k, bh * l + j);
        if let Some((pq, pk)) = &self.untied {
            t += dotted(pq, h * l + i, pk, h * l + j);
        }
        if let Some(qhat) = &self.qhat {
            t += dotted(qhat, bh * l + i, &self.rho, h * l + i - j);
        }
        if let Some((g, rows, index)) = &self.query_table {
            t += f64::from(g[(bh * l + i) * rows + index[i - j]]);
        }
        if let Some((g, rows, index)) = &self.key_table {
            t += f64::from(g[(bh * l + j) * rows + index[i - j]]);
        }
        t
    }

    /// The relative value row of pair `(i, j)`.
    fn value_row(&self, i: usize, j: usize) -> Option<usize> {
        self.values.as_ref().map(|(_, _, index)| index[i - j])
    }

    /// $v_j + a^V_{\text{index}}$, coordinate `c`, of head `bh`.
    fn value(&self, bh: usize, i: usize, j: usize, c: usize) -> f64 {
        let d = self.dims.dim;
        let rel = match (&self.values, self.value_row(i, j)) {
            (Some((t, ..)), Some(r)) => f64::from(t[r * d + c]),
            _ => 0.0,
        };
        self.at(&self.v, bh, j, c) + rel
    }

    /// $a_{ij} = c\,(q_i \cdot k_j + t_{ij}) + b_{ij}$ of row `i` of head `bh`, keys $0..=i$.
    fn scores(&self, bh: usize, i: usize) -> Vec<f64> {
        let h = bh % self.dims.heads;
        (0..=i)
            .map(|j| f64::from(self.scale) * self.t(bh, i, j) + self.b(h, i, j))
            .collect()
    }

    /// CoPE's parts of row `i` of head `bh` from its scores `a` (`None` without CoPE), each
    /// written from its definition: $T_n = q_i \cdot e_n$, $g_j = \sigma(a_j)$,
    /// $r_j = \sum_{t=j}^{i} g_t$ (each sum on its own), and $z_j$.
    fn cope_row(&self, bh: usize, i: usize, a: &[f64]) -> Option<CopeRow> {
        let (e, positions) = self.cope.as_ref()?;
        let d = self.dims.dim;
        let t: Vec<f64> = (0..*positions)
            .map(|n| {
                (0..d)
                    .map(|c| self.at(&self.q, bh, i, c) * f64::from(e[n * d + c]))
                    .sum()
            })
            .collect();
        let g: Vec<f64> = a.iter().map(|&a| 1.0 / (1.0 + (-a).exp())).collect();
        let r: Vec<f64> = (0..a.len()).map(|j| g[j..].iter().sum()).collect();
        let top = (positions - 1) as f64;
        let z = r
            .iter()
            .map(|&r| {
                let p = r.min(top);
                let w = p - p.floor();
                (1.0 - w) * t[p.floor() as usize] + w * t[p.ceil() as usize]
            })
            .collect();
        Some(CopeRow { t, g, r, z })
    }

    /// The logits of row `i` of head `bh`: $a_{ij}$, plus $z_{ij}$ with CoPE.
    fn logits(&self, bh: usize, i: usize) -> Vec<f64> {
        let a = self.scores(bh, i);
        match self.cope_row(bh, i, &a) {
            None => a,
            Some(cope) => a.iter().zip(&cope.z).map(|(a, z)| a + z).collect(),
        }
    }

    /// $\alpha_{ij}$ `[B, H, L, L]` (zeros above the diagonal), $o$ `[B, H, L, D]` and
    /// $\log\sum_{j \le i} e^{s_{ij}}$ `[B, H, L]`.
    pub fn forward(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let AttentionDims {
            batch,
            heads,
            len: l,
            dim: d,
        } = self.dims;
        let mut p = vec![0.0; batch * heads * l * l];
        let mut o = vec![0.0; batch * heads * l * d];
        let mut lse = vec![0.0; batch * heads * l];
        for b in 0..batch {
            for h in 0..heads {
                let bh = b * heads + h;
                for i in 0..l {
                    // s_ij = c (q_i . k_j + t_ij) + b_ij (+ z_ij), j <= i
                    let s = self.logits(bh, i);
                    let z = s.iter().map(|s| s.exp()).sum::<f64>();
                    lse[bh * l + i] = z.ln();
                    for (j, s) in s.iter().enumerate() {
                        let pij = s.exp() / z;
                        p[(bh * l + i) * l + j] = pij;
                        for c in 0..d {
                            o[(bh * l + i) * d + c] += pij * self.value(bh, i, j, c);
                        }
                    }
                }
            }
        }
        (p, o, lse)
    }

    /// Every gradient from $\partial o$ `[B, H, L, D]` ([`Want`]).
    pub fn backward(&self, dout: &[f32]) -> Want {
        let AttentionDims {
            batch,
            heads,
            len: l,
            dim: d,
        } = self.dims;
        let (p, _, _) = self.forward();
        let n = batch * heads * l * d;
        let zeros = |on: bool, n: usize| vec![0.0; if on { n } else { 0 }];
        let (mut dq, mut dk, mut dv) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let mut dqhat = zeros(self.qhat.is_some(), n);
        let mut drho = zeros(self.qhat.is_some(), heads * l * d);
        let mut dpq = zeros(self.untied.is_some(), heads * l * d);
        let mut dpk = zeros(self.untied.is_some(), heads * l * d);
        let table_len = |t: &Option<Table>| t.as_ref().map_or(0, |t| batch * heads * l * t.1);
        let mut dg = vec![0.0; table_len(&self.query_table)];
        let mut dg2 = vec![0.0; table_len(&self.key_table)];
        let mut dtable = vec![0.0; self.values.as_ref().map_or(0, |v| v.0.len())];
        let mut de = vec![0.0; self.cope.as_ref().map_or(0, |e| e.0.len())];
        let (mut dbias, mut dslopes) = match &self.bias {
            NaiveBias::None => (Vec::new(), Vec::new()),
            NaiveBias::Distance(t) => (vec![0.0; t.len()], Vec::new()),
            NaiveBias::Piecewise([.., a, s]) => (vec![0.0; a.len()], vec![0.0; s.len()]),
        };
        let piecewise = matches!(self.bias, NaiveBias::Piecewise(_));
        let (mut dfeature, mut drow_scale) = (zeros(piecewise, l), zeros(piecewise, l));
        let c = f64::from(self.scale);
        let x = |t: &[f32], bh: usize, i: usize, e: usize| self.at(t, bh, i, e);
        for b in 0..batch {
            for h in 0..heads {
                let bh = b * heads + h;
                for i in 0..l {
                    let pij = |j: usize| p[(bh * l + i) * l + j];
                    // dp_ij = do_i . (v_j + a^V_ij); delta_i = sum_j p_ij dp_ij
                    let dp: Vec<f64> = (0..=i)
                        .map(|j| {
                            (0..d)
                                .map(|e| x(dout, bh, i, e) * self.value(bh, i, j, e))
                                .sum()
                        })
                        .collect();
                    let delta: f64 = (0..=i).map(|j| pij(j) * dp[j]).sum();
                    // ds_ij = d(a_ij + z_ij), then the logit's own gradient with CoPE
                    let mut ds: Vec<f64> = (0..=i).map(|j| pij(j) * (dp[j] - delta)).collect();
                    if let Some(cope) = self.cope_row(bh, i, &self.scores(bh, i)) {
                        ds = self.cope_grads(bh, i, &cope, &ds, (&mut dq, &mut de));
                    }
                    for (j, &ds) in ds.iter().enumerate() {
                        for e in 0..d {
                            dq[(bh * l + i) * d + e] += c * ds * x(&self.k, bh, j, e);
                            dk[(bh * l + j) * d + e] += c * ds * x(&self.q, bh, i, e);
                            dv[(bh * l + j) * d + e] += pij(j) * x(dout, bh, i, e);
                            if let Some(qhat) = &self.qhat {
                                let rho = |dd: usize| f64::from(self.rho[(h * l + dd) * d + e]);
                                dqhat[(bh * l + i) * d + e] += c * ds * rho(i - j);
                                drho[(h * l + i - j) * d + e] += c * ds * x(qhat, bh, i, e);
                            }
                            if let Some((pq, pk)) = &self.untied {
                                let at = |t: &[f32], r: usize| f64::from(t[(h * l + r) * d + e]);
                                dpq[(h * l + i) * d + e] += c * ds * at(pk, j);
                                dpk[(h * l + j) * d + e] += c * ds * at(pq, i);
                            }
                            if let Some(r) = self.value_row(i, j) {
                                dtable[r * d + e] += pij(j) * x(dout, bh, i, e);
                            }
                        }
                        if let Some((_, rows, index)) = &self.query_table {
                            dg[(bh * l + i) * rows + index[i - j]] += c * ds;
                        }
                        if let Some((_, rows, index)) = &self.key_table {
                            dg2[(bh * l + j) * rows + index[i - j]] += c * ds;
                        }
                        match &self.bias {
                            NaiveBias::None => {}
                            NaiveBias::Distance(_) => dbias[h * l + i - j] += ds,
                            NaiveBias::Piecewise([feature, row_scale, breakpoints, _, s]) => {
                                let (piece, xx) = self.piece(i, j).unwrap_or_default();
                                let at = h * (breakpoints.len() + 1) + piece;
                                dbias[at] += ds;
                                dslopes[at] += ds * f64::from(xx);
                                // b = a_p + s_p psi_{i-j} nu_i
                                let dx = ds * f64::from(s[at]);
                                dfeature[i - j] += dx * f64::from(row_scale[i]);
                                drow_scale[i] += dx * f64::from(feature[i - j]);
                            }
                        }
                    }
                }
            }
        }
        Want {
            inputs: [dq, dk, dv, dqhat, drho, dpq, dpk, dg, dg2, dtable, de],
            bias: dbias,
            slopes: dslopes,
            feature: dfeature,
            row_scale: drow_scale,
        }
    }
}

/// CoPE's parts of one row ([`Case::cope_row`]).
struct CopeRow {
    /// $T_n$, `[P]`.
    t: Vec<f64>,
    /// $g_j$.
    g: Vec<f64>,
    /// $r_j$.
    r: Vec<f64>,
    /// $z_j$.
    z: Vec<f64>,
}

impl Case {
    /// CoPE's chain rule for row `i` of head `bh`, pair by pair from $\partial s_j =
    /// \partial(a_j + z_j)$: $\partial T_n$ from every $z_j$ that reads column $n$,
    /// $\partial r_j = \partial s_j (T_{\lceil p \rceil} - T_{\lfloor p \rfloor})$ unless clamped
    /// ($r_j > P - 1$), $\partial g_t = \sum_{j \le t} \partial r_j$ (each sum on its own);
    /// adds $\partial T_n e_n$ to $\partial q_i$ and $\partial T_n q_i$ to $\partial e_n$, and
    /// returns $\partial a_t = \partial s_t + g_t (1 - g_t)\,\partial g_t$.
    fn cope_grads(
        &self,
        bh: usize,
        i: usize,
        cope: &CopeRow,
        ds: &[f64],
        (dq, de): (&mut [f64], &mut [f64]),
    ) -> Vec<f64> {
        let (l, d) = (self.dims.len, self.dims.dim);
        let positions = cope.t.len();
        let top = (positions - 1) as f64;
        let mut dt = vec![0.0; positions];
        let mut dr = vec![0.0; ds.len()];
        for (j, &r) in cope.r.iter().enumerate() {
            let p = r.min(top);
            let (lo, hi, w) = (p.floor() as usize, p.ceil() as usize, p - p.floor());
            dt[lo] += ds[j] * (1.0 - w);
            dt[hi] += ds[j] * w;
            if r <= top {
                dr[j] = ds[j] * (cope.t[hi] - cope.t[lo]);
            }
        }
        let Some((e, _)) = &self.cope else {
            return ds.to_vec();
        };
        for (n, &dt) in dt.iter().enumerate() {
            for c in 0..d {
                dq[(bh * l + i) * d + c] += dt * f64::from(e[n * d + c]);
                de[n * d + c] += dt * self.at(&self.q, bh, i, c);
            }
        }
        (0..ds.len())
            .map(|t| {
                let dg: f64 = dr[..=t].iter().sum();
                ds[t] + cope.g[t] * (1.0 - cope.g[t]) * dg
            })
            .collect()
    }
}

/// The problems the tests run: lengths of one query, across one tile boundary, exactly two
/// tiles and across two; odd head dimensions; each position term alone, and the
/// combinations the schemes use (Shaw: query table and values; DeBERTa: both tables; TUPE:
/// untied and a distance bias) and all of them at once; CoPE alone (its counts clamped in
/// the long rows, not in the short ones), with a bias (its gates read the biased logits) and
/// with every other term.
pub fn cases() -> impl Iterator<Item = Case> {
    [[2, 3, 1, 5], [1, 2, 33, 7], [1, 1, 64, 4], [2, 1, 70, 16]]
        .into_iter()
        .flat_map(|dims| {
            [
                "none",
                "distance",
                "piecewise",
                "query",
                "key",
                "rho",
                "untied",
                "query+values",
                "query+key",
                "untied+distance",
                "piecewise+query+key+rho+untied+values",
                "cope",
                "cope+distance",
                "cope+piecewise+query+key+rho+untied+values",
            ]
            .into_iter()
            .map(move |label| Case::new(dims, label))
        })
}
