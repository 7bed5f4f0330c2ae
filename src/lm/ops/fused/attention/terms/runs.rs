//! An index over distance as the rows read it. Row $i$ reads $\text{index}(i-j)$ for its keys
//! $j = 0..=i$, i.e. the index reversed from position $L-1-i$ on: a row is a window of one
//! reversed index. Where the index keeps one column for many distances (Shaw's clipped
//! distances, DeBERTa's far buckets) the row adds one value to a range of keys, or sums the
//! range, in one pass; where it changes every few distances (the distances below the clip,
//! DeBERTa's near buckets) the row reads the index key by key.

use super::reversed;
use crate::lm::ops::fused::simd::{multiversion, sum};

/// Runs of one column shorter than this are read key by key: below it, the cost of a run
/// (finding it, a loop of a few keys) exceeds that of reading the index.
const MIN_RUN: usize = 16;

/// Positions `start..end` of the reversed index (distances $L-1-\text{start}$ down to
/// $L-\text{end}$): one `column` for all of them, or `None` (read the index key by key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    start: usize,
    end: usize,
    column: Option<usize>,
}

/// How the keys of one run of a row read the index.
#[derive(Debug, Clone, Copy)]
enum Read<'a> {
    /// All at one column.
    Column(usize),
    /// Each at its own: the index of the run's keys in order.
    Keys(&'a [usize]),
}

/// An index over distance `[L]` as the rows read it: reversed, cut into runs.
#[derive(Debug, Default)]
pub(in super::super) struct DistanceRuns {
    /// The index reversed: position $L-1-d$ holds $\text{index}(d)$.
    index: Vec<usize>,
    runs: Vec<Run>,
    /// One more than the largest column (0 for an empty index).
    columns: usize,
}

/// Where entry (column $c$, key $j$) of a table over keys lies: $c\,\text{column} +
/// j\,\text{key}$ (`[R, L]`: `column` $= L$, `key` $= 1$; `[L, R]`: 1 and $R$).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in super::super) struct Layout {
    pub(in super::super) column: usize,
    pub(in super::super) key: usize,
}

impl Layout {
    /// Whether a table of `len` values holds every cell of columns `0..columns` and keys
    /// `0..keys`.
    #[inline]
    fn fits(&self, len: usize, columns: usize, keys: usize) -> bool {
        columns == 0 || keys == 0 || (columns - 1) * self.column + (keys - 1) * self.key < len
    }
}

impl DistanceRuns {
    /// The runs of `index` `[L]`: maximal runs of one column, those shorter than
    /// [`MIN_RUN`] merged into runs read key by key.
    pub(super) fn new(index: &[usize]) -> Self {
        let index = reversed(index, 1);
        let mut runs: Vec<Run> = Vec::new();
        let mut k = 0;
        while k < index.len() {
            let column = index[k];
            let end = k + index[k..].iter().take_while(|&&c| c == column).count();
            match runs.last_mut() {
                _ if end - k >= MIN_RUN => runs.push(Run {
                    start: k,
                    end,
                    column: Some(column),
                }),
                Some(r) if r.column.is_none() => r.end = end,
                _ => runs.push(Run {
                    start: k,
                    end,
                    column: None,
                }),
            }
            k = end;
        }
        let columns = index.iter().max().map_or(0, |&c| c + 1);
        Self {
            index,
            runs,
            columns,
        }
    }

    /// Whether some run has one column (a table read by columns is then best transposed,
    /// `[R, L]`, so that the run reads a contiguous range).
    pub(in super::super) fn has_columns(&self) -> bool {
        self.runs.iter().any(|r| r.column.is_some())
    }

    /// The runs of query `i` as ranges of its keys `a..b` (within `0..=i`) and how they read
    /// the index.
    #[inline(always)]
    fn row(&self, i: usize, l: usize) -> impl Iterator<Item = (usize, usize, Read<'_>)> + '_ {
        // key j reads reversed position o + j
        let o = l - 1 - i;
        let first = self.runs.partition_point(|r| r.end <= o);
        self.runs[first..].iter().map(move |r| {
            let (a, b) = (r.start.max(o) - o, r.end - o);
            let read = match r.column {
                Some(c) => Read::Column(c),
                None => Read::Keys(&self.index[o + a..o + b]),
            };
            (a, b, read)
        })
    }
}

multiversion! {
    /// $x_j \mathrel{+}= g_{\text{index}(i-j)}$ for the keys of query `i`.
    pub(in super::super) fn add_runs(x: &mut [f32], g: &[f32], runs: &DistanceRuns, i: usize, l: usize) {
        for (a, b, read) in runs.row(i, l) {
            match read {
                Read::Column(c) => {
                    let v = g[c];
                    for s in &mut x[a..b] {
                        *s += v;
                    }
                }
                Read::Keys(index) => {
                    assert!(g.len() >= runs.columns, "add_runs: a column past the table");
                    for (s, &c) in x[a..b].iter_mut().zip(index) {
                        // SAFETY: c < columns <= g.len() (just checked)
                        *s += unsafe { *g.get_unchecked(c) };
                    }
                }
            }
        }
    }
}

multiversion! {
    /// $y_{\text{index}(i-j)} \mathrel{+}= c\,x_j$ for the keys of query `i` (the adjoint of
    /// [`add_runs`]), one sum per run of one column.
    pub(in super::super) fn sum_runs(x: &[f32], y: &mut [f32], scale: f32, runs: &DistanceRuns, i: usize, l: usize) {
        for (a, b, read) in runs.row(i, l) {
            match read {
                Read::Column(c) => y[c] += scale * sum(&x[a..b]),
                Read::Keys(index) => {
                    assert!(y.len() >= runs.columns, "sum_runs: a column past the table");
                    for (&v, &c) in x[a..b].iter().zip(index) {
                        // SAFETY: c < columns <= y.len() (just checked)
                        let s = unsafe { y.get_unchecked_mut(c) };
                        *s = scale.mul_add(v, *s);
                    }
                }
            }
        }
    }
}

multiversion! {
    /// $x_j \mathrel{+}= t_{\text{index}(i-j),\,j}$ for the keys of query `i`, of a table over
    /// keys in `layout` (runs of one column need `[R, L]`: a contiguous range).
    pub(in super::super) fn add_run_columns(x: &mut [f32], t: &[f32], layout: Layout, runs: &DistanceRuns, i: usize, l: usize) {
        for (a, b, read) in runs.row(i, l) {
            match read {
                Read::Column(c) => {
                    let at = c * layout.column;
                    for (s, &v) in x[a..b].iter_mut().zip(&t[at + a..at + b]) {
                        *s += v;
                    }
                }
                Read::Keys(index) => {
                    assert!(layout.fits(t.len(), runs.columns, b), "add_run_columns: a cell past the table");
                    for ((s, j), &c) in x[a..b].iter_mut().zip(a..b).zip(index) {
                        // SAFETY: c < columns and j < b: within the table (just checked)
                        *s += unsafe { *t.get_unchecked(c * layout.column + j * layout.key) };
                    }
                }
            }
        }
    }
}

multiversion! {
    /// $t_{\text{index}(i-j),\,j} \mathrel{+}= c\,x_j$ (the adjoint of [`add_run_columns`]).
    pub(in super::super) fn scatter_run_columns(t: &mut [f32], x: &[f32], scale: f32, layout: Layout, runs: &DistanceRuns, i: usize, l: usize) {
        for (a, b, read) in runs.row(i, l) {
            match read {
                Read::Column(c) => {
                    let at = c * layout.column;
                    for (s, &v) in t[at + a..at + b].iter_mut().zip(&x[a..b]) {
                        *s = scale.mul_add(v, *s);
                    }
                }
                Read::Keys(index) => {
                    assert!(layout.fits(t.len(), runs.columns, b), "scatter_run_columns: a cell past the table");
                    for ((&v, j), &c) in x[a..b].iter().zip(a..b).zip(index) {
                        // SAFETY: c < columns and j < b: within the table (just checked)
                        let s = unsafe { t.get_unchecked_mut(c * layout.column + j * layout.key) };
                        *s = scale.mul_add(v, *s);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Indices with runs of every kind: one column throughout, a clipped distance (short
    /// runs, then one long), a root-like bucket (runs growing past [`MIN_RUN`]), a long run
    /// between short ones.
    fn indices() -> Vec<Vec<usize>> {
        let l = 70;
        vec![
            vec![2; l],
            (0..l).map(|d| 5 - d.min(5)).collect(),
            (0..l).map(|d| (d as f64).sqrt() as usize % 7).collect(),
            (0..l)
                .map(|d| if (20..45).contains(&d) { 3 } else { d % 4 })
                .collect(),
        ]
    }

    /// [`DistanceRuns::new`] keeps runs of [`MIN_RUN`] and more as columns and merges the
    /// others; [`DistanceRuns::row`] gives every key of every row once, with its column.
    #[test]
    fn runs_cover_every_key_with_its_column() {
        for index in indices() {
            let l = index.len();
            let r = DistanceRuns::new(&index);
            for w in r.runs.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(
                    w[0].column.is_some() || w[1].column.is_some(),
                    "{:?}",
                    r.runs
                );
            }
            assert!(r
                .runs
                .iter()
                .all(|x| x.column.is_none() || x.end - x.start >= MIN_RUN));
            for i in 0..l {
                let mut seen = vec![None; i + 1];
                for (a, b, read) in r.row(i, l) {
                    for (k, s) in seen[a..b].iter_mut().enumerate() {
                        assert!(s.is_none());
                        *s = Some(match read {
                            Read::Column(c) => c,
                            Read::Keys(index) => index[k],
                        });
                    }
                }
                for (j, s) in seen.iter().enumerate() {
                    assert_eq!(*s, Some(index[i - j]), "row {i}, key {j}");
                }
            }
        }
    }

    /// The four kernels against loops over the keys, for tables in both layouts.
    #[test]
    fn kernels_match_loops_over_keys() {
        let close = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
        };
        for index in indices() {
            let l = index.len();
            let rows = 7;
            let r = DistanceRuns::new(&index);
            let value = |k: usize| ((k * 37 % 101) as f32 - 50.0) / 25.0;
            let g: Vec<f32> = (0..rows).map(value).collect();
            let t: Vec<f32> = (0..rows * l).map(|k| value(k + 3)).collect();
            let x: Vec<f32> = (0..l).map(|k| value(k + 11)).collect();
            for layout in [
                Layout { column: l, key: 1 },
                Layout {
                    column: 1,
                    key: rows,
                },
            ] {
                for i in [0, 15, 16, 40, l - 1] {
                    let n = i + 1;
                    let at = |c: usize, j: usize| c * layout.column + j * layout.key;
                    let (mut got, mut want) = (x[..n].to_vec(), x[..n].to_vec());
                    add_runs(&mut got, &g, &r, i, l);
                    for (j, w) in want.iter_mut().enumerate() {
                        *w += g[index[i - j]];
                    }
                    assert!(close(&got, &want), "add_runs row {i}");
                    let (mut got, mut want) = (vec![0.5; rows], vec![0.5; rows]);
                    sum_runs(&x[..n], &mut got, 0.5, &r, i, l);
                    for j in 0..n {
                        want[index[i - j]] += 0.5 * x[j];
                    }
                    assert!(close(&got, &want), "sum_runs row {i}");
                    if layout.key == 1 || !r.has_columns() {
                        let (mut got, mut want) = (x[..n].to_vec(), x[..n].to_vec());
                        add_run_columns(&mut got, &t, layout, &r, i, l);
                        for (j, w) in want.iter_mut().enumerate() {
                            *w += t[at(index[i - j], j)];
                        }
                        assert!(close(&got, &want), "add_run_columns row {i} {layout:?}");
                        let (mut got, mut want) = (t.clone(), t.clone());
                        scatter_run_columns(&mut got, &x[..n], 2.0, layout, &r, i, l);
                        for j in 0..n {
                            want[at(index[i - j], j)] += 2.0 * x[j];
                        }
                        assert!(close(&got, &want), "scatter_run_columns row {i} {layout:?}");
                    }
                }
            }
        }
    }
}
