//! # Kerple — kernelized relative positional bias
//!
//! Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation"
//! (<https://arxiv.org/abs/2205.09921>).
//!
//! ALiBi adds $-r|i-j|$ to the scores: a penalty that grows linearly with distance. Kerple asks
//! which distance penalties are legitimate in general and answers with conditionally positive
//! definite kernels: the negative of such a kernel, shifted by a constant that softmax ignores,
//! is a valid bias. Two families come out, each with two learnable positive parameters per head:
//! a **power** penalty $r_1|i-j|^{r_2}$ ($r_2 = 1$ is ALiBi) and a **logarithmic** penalty
//! $r_1\ln(1 + r_2|i-j|)$, which flattens at long range and extrapolated best in the paper.
//!
//! ```math
//! b^{\log}_{ij} = -r_1 \ln\big(1 + r_2\ |i-j|\big), \quad r_1, r_2 > 0; \qquad
//! b^{\text{power}}_{ij} = -r_1\ |i-j|^{r_2}, \quad r_1 > 0,\  0 < r_2 \le 2.
//! ```
//!
//! Derived step by step, checked and plotted in `notebooks/09_alibi_and_beyond.ipynb`.

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_positive, invalid, Result};

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
