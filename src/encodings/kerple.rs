//! # Kerple — kernelized relative positional bias
//!
//! Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation"
//! (<https://arxiv.org/abs/2205.09921>).
//!
//! ALiBi adds $-r|i-j|$ to the scores: a penalty that grows linearly with distance. Kerple asks
//! which distance penalties are legitimate in general and answers with conditionally positive
//! definite kernels: such a kernel (e.g. $-r_1|i-j|^{r_2}$), which a constant that softmax
//! ignores makes positive definite, is a valid bias. Two families come out, each with two learnable positive parameters per head:
//! a **power** penalty $r_1|i-j|^{r_2}$ ($r_2 = 1$ is ALiBi) and a **logarithmic** penalty
//! $r_1\ln(1 + r_2|i-j|)$, which flattens at long range and extrapolated best in the paper.
//!
//! ```math
//! b^{\log}_{ij} = -r_1 \ln\big(1 + r_2\ |i-j|\big), \quad r_1, r_2 > 0; \qquad
//! b^{\text{power}}_{ij} = -r_1\ |i-j|^{r_2}, \quad r_1 > 0,\  0 < r_2 \le 2.
//! ```
//!
//! **Conditional positive definiteness** is a property of the matrix: $B$ is CPD when
//! $c^\top B c \ge 0$ for every $c$ with $\sum_i c_i = 0$, i.e. when $PBP$ with
//! $P = I - \mathbf 1 \mathbf 1^\top / n$ (the projection onto zero-sum vectors) has no negative
//! eigenvalue. [`cpd_spectrum`] computes that spectrum (Jacobi's method, in `f64`).
//!
//! Derived step by step, checked and plotted in `notebooks/09_alibi_and_beyond.ipynb`.

use ndarray::{Array1, Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_positive, ensure_shape, invalid, Result};

/// Which kernel Kerple derives its bias from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum KerpleKind {
    /// $b_{ij} = -r_1\ln(1 + r_2|i-j|)$, $r_1, r_2 > 0$ (the paper's best extrapolator).
    #[default]
    Log,
    /// $b_{ij} = -r_1|i-j|^{r_2}$, $r_1 > 0$, $0 < r_2 \le 2$.
    Power,
}

/// Kerple bias with per-head parameters $r_1^{(h)}, r_2^{(h)}$ (learned in the paper; given here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kerple {
    /// Kernel family.
    pub kind: KerpleKind,
    /// Per-head amplitude $r_1 > 0$, one entry per head.
    pub r1: Vec<f32>,
    /// Per-head shape $r_2$: $> 0$ (log) or in $(0, 2]$ (power), one entry per head.
    pub r2: Vec<f32>,
}

impl Kerple {
    /// Kerple with one head per entry of `r1` and `r2`.
    ///
    /// # Errors
    /// When `r1` and `r2` differ in length or are empty, or any value is not finite or out of
    /// its range (see [`KerpleKind`]).
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let kerple = Kerple::new(KerpleKind::Log, vec![2.0], vec![0.5])?;
    /// let b = kerple.bias(0, 3, 3)?;
    /// // query 2, key 0: -2 ln(1 + 0.5 * 2) = -2 ln 2
    /// assert!((b[[2, 0]] + 2.0 * 2f32.ln()).abs() < 1e-6);
    /// assert_eq!(b[[1, 1]], 0.0);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(kind: KerpleKind, r1: Vec<f32>, r2: Vec<f32>) -> Result<Self> {
        let kerple = Self { kind, r1, r2 };
        kerple.validate()?;
        Ok(kerple)
    }

    /// Checks the parameters (fields are public, e.g. for deserialisation).
    ///
    /// # Errors
    /// As [`Kerple::new`].
    pub fn validate(&self) -> Result<()> {
        ensure(
            !self.r1.is_empty(),
            "heads",
            self.r1.len(),
            ">= 1 (one r1 and one r2 per head)",
        )?;
        ensure(
            self.r1.len() == self.r2.len(),
            "r2 length",
            self.r2.len(),
            &format!("{} (the length of r1)", self.r1.len()),
        )?;
        for &r1 in &self.r1 {
            ensure_positive("r1", r1)?;
        }
        for &r2 in &self.r2 {
            match self.kind {
                KerpleKind::Log => ensure_positive("r2", r2)?,
                KerpleKind::Power => ensure(r2 > 0.0 && r2 <= 2.0, "r2", r2, "a number in (0, 2]")?,
            }
        }
        Ok(())
    }

    /// Number of heads.
    pub fn heads(&self) -> usize {
        self.r1.len()
    }

    /// The penalty $b(\delta)$ of head `head` at distance $\delta = |i-j|$.
    ///
    /// # Errors
    /// When `head` is out of range or the parameters are invalid.
    pub fn bias_at(&self, head: usize, distance: usize) -> Result<f32> {
        self.validate()?;
        let (r1, r2) = match (self.r1.get(head), self.r2.get(head)) {
            (Some(&r1), Some(&r2)) => (r1 as f64, r2 as f64),
            _ => return Err(invalid("head", head, format!("0..{}", self.heads()))),
        };
        Ok(kernel(self.kind, r1, r2, distance as f64) as f32)
    }

    /// The bias $b_{ij}$ of head `head`, `[lq, lk]`, queries at $L_k - L_q + i$ and keys at $j$
    /// (the convention of [`query_position`]).
    ///
    /// # Errors
    /// When `head` is out of range, `lq > lk`, or the parameters are invalid.
    pub fn bias(&self, head: usize, lq: usize, lk: usize) -> Result<Array2<f32>> {
        self.bias_at(head, 0)?;
        ensure_queries_fit(lq, lk)?;
        let (r1, r2) = (self.r1[head] as f64, self.r2[head] as f64);
        // penalty per distance |i - j| in 0..lk, computed once
        let by_distance: Vec<f32> = (0..lk)
            .map(|d| kernel(self.kind, r1, r2, d as f64) as f32)
            .collect();
        // b_ij = b(|pos_i - j|), [Lq, Lk]
        Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
            by_distance[query_position(i, lq, lk).abs_diff(j)]
        }))
    }
}

/// $-r_1\ln(1 + r_2\delta)$ or $-r_1\delta^{r_2}$.
fn kernel(kind: KerpleKind, r1: f64, r2: f64, distance: f64) -> f64 {
    match kind {
        KerpleKind::Log => -r1 * (r2 * distance).ln_1p(),
        KerpleKind::Power => -r1 * distance.powf(r2),
    }
}

/// The eigenvalues of $PBP$, $P = I - \mathbf 1\mathbf 1^\top/n$, in ascending order, with
/// their unit eigenvectors as the columns of the second array (`[n, n]`).
///
/// $P\mathbf 1 = 0$, so the constant vector is always an eigenvector with eigenvalue 0; every
/// other eigenvector is orthogonal to it, i.e. sums to zero, and for such a $c$,
/// $c^\top PBP\,c = c^\top B c$. Hence $B$ is conditionally positive definite exactly when the
/// smallest eigenvalue is not negative, and when it is, its eigenvector is a zero-sum $c$ with
/// $c^\top B c < 0$: a witness.
///
/// # Errors
/// When `b` is not square, is empty, is not symmetric (up to $10^{-6}$ relative) or holds a
/// value that is not finite.
///
/// # Examples
/// ```
/// use posenc::encodings::kerple::cpd_spectrum;
/// // -|i - j| (ALiBi with slope 1) is CPD; -|i - j|^3 is not
/// let alibi = ndarray::Array2::from_shape_fn((6, 6), |(i, j)| -(i as f32 - j as f32).abs());
/// let cubic = alibi.mapv(|b| -b.abs().powi(3));
/// assert!(cpd_spectrum(alibi.view())?.0[0] > -1e-9);
/// assert!(cpd_spectrum(cubic.view())?.0[0] < -1.0);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn cpd_spectrum(b: ArrayView2<f32>) -> Result<(Array1<f64>, Array2<f64>)> {
    let n = b.nrows();
    ensure(
        n >= 1,
        "B",
        format!("{:?}", b.dim()),
        "a square matrix of size >= 1",
    )?;
    ensure_shape("cpd_spectrum: B", &[n, n], b.shape())?;
    let b = b.mapv(f64::from);
    ensure(
        b.iter().all(|v| v.is_finite()),
        "B",
        "a non-finite value",
        "finite values",
    )?;
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let asymmetry = b
        .indexed_iter()
        .fold(0.0f64, |m, ((i, j), v)| m.max((v - b[[j, i]]).abs()));
    ensure(
        asymmetry <= 1e-6 * scale.max(f64::MIN_POSITIVE),
        "B",
        format!("asymmetric by {asymmetry:.3e}"),
        "a symmetric matrix",
    )?;
    // P = I - 1 1^T / n, [n, n]
    let p = Array2::<f64>::eye(n) - 1.0 / n as f64;
    symmetric_eigen(p.dot(&b).dot(&p))
}

/// Eigenvalues (ascending) and unit eigenvectors (columns) of a symmetric matrix, by cyclic
/// Jacobi rotations until the off-diagonal part is negligible.
fn symmetric_eigen(mut a: Array2<f64>) -> Result<(Array1<f64>, Array2<f64>)> {
    let n = a.nrows();
    let mut v = Array2::<f64>::eye(n);
    let norm2: f64 = a.iter().map(|x| x * x).sum();
    for _sweep in 0..100 {
        let off2: f64 = a
            .indexed_iter()
            .filter(|((i, j), _)| i != j)
            .map(|(_, x)| x * x)
            .sum();
        if off2 <= 1e-26 * norm2 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[[p, q]] == 0.0 {
                    continue;
                }
                // the rotation (c, s) that zeroes a_pq: cot 2phi = (a_qq - a_pp) / (2 a_pq)
                let theta = (a[[q, q]] - a[[p, p]]) / (2.0 * a[[p, q]]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                // A <- J^T A J and V <- V J, J the rotation in the (p, q) plane
                for k in 0..n {
                    let (akp, akq) = (a[[k, p]], a[[k, q]]);
                    a[[k, p]] = c * akp - s * akq;
                    a[[k, q]] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[[p, k]], a[[q, k]]);
                    a[[p, k]] = c * apk - s * aqk;
                    a[[q, k]] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[[k, p]], v[[k, q]]);
                    v[[k, p]] = c * vkp - s * vkq;
                    v[[k, q]] = s * vkp + c * vkq;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| a[[x, x]].total_cmp(&a[[y, y]]));
    let values = order.iter().map(|&i| a[[i, i]]).collect();
    let vectors = Array2::from_shape_fn((n, n), |(k, i)| v[[k, order[i]]]);
    Ok((values, vectors))
}

impl PositionScheme for Kerple {
    fn name(&self) -> String {
        match self.kind {
            KerpleKind::Log => "kerple (log)".into(),
            KerpleKind::Power => "kerple (power)".into(),
        }
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.bias(head, lq, lk).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_finds_the_eigenpairs_of_a_symmetric_matrix() {
        // [[2, 1], [1, 2]]: eigenvalues 1 and 3
        let (values, _) = symmetric_eigen(ndarray::array![[2.0, 1.0], [1.0, 2.0]]).unwrap();
        assert!((values[0] - 1.0).abs() < 1e-12 && (values[1] - 3.0).abs() < 1e-12);
        // a seeded symmetric 9 x 9: A V = V diag(values), V orthonormal
        let r = crate::encodings::init::Seeded::new(3)
            .normal((9, 9), 1.0)
            .unwrap();
        let a = (&r + &r.t()).mapv(f64::from);
        let (values, vectors) = symmetric_eigen(a.clone()).unwrap();
        let residual = &a.dot(&vectors) - &(&vectors * &values);
        assert!(residual.iter().all(|x| x.abs() < 1e-9), "{residual}");
        let gram = vectors.t().dot(&vectors) - Array2::<f64>::eye(9);
        assert!(gram.iter().all(|x| x.abs() < 1e-12));
        assert!(values.windows(2).into_iter().all(|w| w[0] <= w[1]));
    }

    #[test]
    fn cpd_spectrum_separates_allowed_and_forbidden_penalties() {
        let n = 32;
        for (kind, r2) in [
            (KerpleKind::Log, 0.5),
            (KerpleKind::Power, 0.5),
            (KerpleKind::Power, 2.0),
        ] {
            let b = Kerple::new(kind, vec![1.0], vec![r2])
                .unwrap()
                .bias(0, n, n)
                .unwrap();
            let (values, vectors) = cpd_spectrum(b.view()).unwrap();
            assert!(values[0] > -1e-6, "{kind:?} r2 = {r2}: {}", values[0]);
            // the constant vector lies in the eigenspace of 0 (-(i - j)^2 has more zeros)
            let constant = Array1::from_elem(n, 1.0 / (n as f64).sqrt());
            let in_null_space: f64 = (0..n)
                .filter(|&i| values[i].abs() < 1e-6)
                .map(|i| vectors.column(i).dot(&constant).powi(2))
                .sum();
            assert!((in_null_space - 1.0).abs() < 1e-9, "{kind:?} r2 = {r2}");
        }
        // r2 = 3 is outside (0, 2]: a zero-sum c with c^T B c < 0
        let cubic = Array2::from_shape_fn((n, n), |(i, j)| -(i as f32 - j as f32).abs().powi(3));
        let (values, vectors) = cpd_spectrum(cubic.view()).unwrap();
        let c = vectors.column(0);
        let quad = c.dot(&cubic.mapv(f64::from).dot(&c));
        assert!(values[0] < -1.0 && (quad - values[0]).abs() < 1e-6 * values[0].abs());
        assert!(c.sum().abs() < 1e-9);
    }

    #[test]
    fn cpd_spectrum_refuses_what_is_not_a_symmetric_matrix() {
        assert!(cpd_spectrum(Array2::<f32>::zeros((2, 3)).view()).is_err());
        assert!(cpd_spectrum(Array2::<f32>::zeros((0, 0)).view()).is_err());
        assert!(cpd_spectrum(ndarray::array![[0.0f32, 1.0], [0.0, 0.0]].view()).is_err());
        assert!(cpd_spectrum(ndarray::array![[f32::NAN]].view()).is_err());
    }
    use proptest::prelude::*;

    /// Oracle: the formula entry by entry.
    fn naive_bias(kind: KerpleKind, r1: f32, r2: f32, lq: usize, lk: usize) -> Array2<f32> {
        let mut b = Array2::zeros((lq, lk));
        for i in 0..lq {
            for j in 0..lk {
                let d = ((lk - lq + i) as f32 - j as f32).abs();
                b[[i, j]] = match kind {
                    KerpleKind::Log => -r1 * (1.0 + r2 * d).ln(),
                    KerpleKind::Power => -r1 * d.powf(r2),
                };
            }
        }
        b
    }

    #[test]
    fn hand_computed_values() {
        let log = Kerple::new(KerpleKind::Log, vec![1.0, 0.5], vec![1.0, 3.0]).unwrap();
        // head 1, distance 3: -0.5 ln(1 + 9) = -0.5 ln 10
        assert!((log.bias_at(1, 3).unwrap() + 0.5 * 10f32.ln()).abs() < 1e-6);
        // head 0, distance 1: -ln 2
        assert!((log.bias_at(0, 1).unwrap() + 2f32.ln()).abs() < 1e-6);
        let power = Kerple::new(KerpleKind::Power, vec![0.25], vec![2.0]).unwrap();
        // -0.25 * 4^2 = -4
        assert!((power.bias_at(0, 4).unwrap() + 4.0).abs() < 1e-6);
        let half = Kerple::new(KerpleKind::Power, vec![2.0], vec![0.5]).unwrap();
        // -2 * sqrt(9) = -6
        assert!((half.bias_at(0, 9).unwrap() + 6.0).abs() < 1e-6);
    }

    #[test]
    fn bias_matches_the_loop_and_aligns_queries_to_the_end() {
        for kind in [KerpleKind::Log, KerpleKind::Power] {
            let k = Kerple::new(kind, vec![0.7, 1.3], vec![1.5, 0.4]).unwrap();
            for (lq, lk) in [(5, 5), (2, 6), (1, 1)] {
                let b = k.bias(1, lq, lk).unwrap();
                let n = naive_bias(kind, 1.3, 0.4, lq, lk);
                for (x, y) in b.iter().zip(n.iter()) {
                    assert!((x - y).abs() < 1e-5, "{kind:?} {lq}x{lk}: {x} vs {y}");
                }
            }
            // 2 queries, 6 keys: query 0 sits at position 4, its diagonal entry is column 4
            assert_eq!(k.bias(0, 2, 6).unwrap()[[0, 4]], 0.0);
        }
    }

    #[test]
    fn power_one_is_alibi() {
        let k = Kerple::new(KerpleKind::Power, vec![0.25], vec![1.0]).unwrap();
        let b = k.bias(0, 6, 6).unwrap();
        for ((i, j), &v) in b.indexed_iter() {
            assert!((v + 0.25 * (i as f32 - j as f32).abs()).abs() < 1e-6);
        }
    }

    #[test]
    fn scheme_supplies_the_bias() {
        let k = Kerple::new(KerpleKind::Log, vec![1.0], vec![1.0]).unwrap();
        assert_eq!(
            k.score_bias(0, 3, 4).unwrap(),
            Some(k.bias(0, 3, 4).unwrap())
        );
        assert_eq!(k.name(), "kerple (log)");
    }

    #[test]
    fn invalid_parameters_are_errors() {
        use KerpleKind::{Log, Power};
        assert!(Kerple::new(Log, vec![], vec![]).is_err());
        assert!(Kerple::new(Log, vec![1.0, 1.0], vec![1.0]).is_err());
        assert!(Kerple::new(Log, vec![0.0], vec![1.0]).is_err());
        assert!(Kerple::new(Log, vec![-1.0], vec![1.0]).is_err());
        assert!(Kerple::new(Log, vec![f32::INFINITY], vec![1.0]).is_err());
        assert!(Kerple::new(Log, vec![1.0], vec![0.0]).is_err());
        assert!(Kerple::new(Log, vec![1.0], vec![f32::NAN]).is_err());
        assert!(Kerple::new(Power, vec![1.0], vec![0.0]).is_err());
        assert!(Kerple::new(Power, vec![1.0], vec![2.5]).is_err());
        assert!(Kerple::new(Power, vec![1.0], vec![f32::NAN]).is_err());
        assert!(Kerple::new(Power, vec![1.0], vec![2.0]).is_ok());
        let k = Kerple::new(Log, vec![1.0, 2.0], vec![1.0, 1.0]).unwrap();
        let e = k.bias(2, 3, 3).unwrap_err();
        assert_eq!(e.to_string(), "invalid head = 2: allowed is 0..2");
        assert!(k.bias(0, 4, 3).is_err());
        let broken = Kerple {
            kind: Log,
            r1: vec![1.0],
            r2: vec![],
        };
        assert!(broken.bias(0, 2, 2).is_err());
    }

    proptest! {
        #[test]
        fn zero_on_the_diagonal_symmetric_and_non_increasing_in_distance(
            power in any::<bool>(), r1 in 0.01f32..10.0, r2 in 0.01f32..2.0, d in 0usize..5000,
        ) {
            let kind = if power { KerpleKind::Power } else { KerpleKind::Log };
            let k = Kerple::new(kind, vec![r1], vec![r2]).unwrap();
            prop_assert_eq!(k.bias_at(0, 0).unwrap(), 0.0);
            prop_assert!(k.bias_at(0, d + 1).unwrap() <= k.bias_at(0, d).unwrap());
            // symmetric in i - j: bias(i, j) = bias(j, i) on a square matrix
            let b = k.bias(0, 12, 12).unwrap();
            prop_assert_eq!(&b, &b.t());
        }
    }
}
