//! Checks for notebook cells: the largest difference between two computations, compared with a
//! tolerance.
//!
//! A notebook states a claim in its prose and proves it in the next cell by comparing **two
//! independent computations** (the crate against a formula written out beside it, a golden
//! value, another algorithm), or one computation against a reference value:
//!
//! ```
//! use posenc::notebook::prelude::*;
//! let pe = sinusoidal_table(3, 4)?;
//! // PE(2) = (sin 2, cos 2, sin 0.02, cos 0.02)
//! let by_hand = array![2f64.sin(), 2f64.cos(), 0.02f64.sin(), 0.02f64.cos()];
//! check("PE(2) by the formula", max_err(&pe.row(2), &by_hand)?, 1e-6);
//! # Ok::<(), posenc::Error>(())
//! ```

use std::fmt;

use ndarray::{ArrayBase, Data, Dimension};
use ndarray_rand::rand::{rngs::StdRng, SeedableRng};
use ndarray_rand::rand_distr::StandardNormal;
use ndarray_rand::RandomExt;

use super::figures::ToF64;
use crate::{Error, Result};

/// A claim that did not hold: what was checked, the largest error and the tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckFailed {
    /// The claim, as the notebook states it.
    pub what: String,
    /// The largest error that was measured (NaN if a value was NaN).
    pub err: f64,
    /// The largest error allowed.
    pub tol: f64,
}

impl fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CHECK FAILED: {}: largest error {:.3e} > tolerance {:.2e}",
            self.what, self.err, self.tol
        )
    }
}

impl std::error::Error for CheckFailed {}

/// Whether `err <= tol`, as a `Result`: `Ok(err)` when the claim holds, [`CheckFailed`]
/// otherwise (also when `err` or `tol` is NaN). Prints nothing; [`check`] is the version that
/// stops the notebook.
///
/// # Errors
/// [`CheckFailed`] when `err > tol` or either is NaN.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// assert_eq!(try_check("1 + 1 = 2", (1.0f64 + 1.0 - 2.0).abs(), 0.0), Ok(0.0));
/// let failed = try_check("pi = 3", (std::f64::consts::PI - 3.0).abs(), 1e-3).unwrap_err();
/// assert!(failed.to_string().starts_with("CHECK FAILED: pi = 3"));
/// ```
pub fn try_check(what: &str, err: f64, tol: f64) -> Result<f64, CheckFailed> {
    // `err <= tol` is false when either is NaN: a NaN never passes
    if err <= tol {
        Ok(err)
    } else {
        Err(CheckFailed {
            what: what.to_string(),
            err,
            tol,
        })
    }
}

/// Stops the notebook unless `err <= tol`; otherwise prints `ok  <what>  [largest error ...]`.
///
/// # Panics
/// When `err > tol` or either is NaN, with the message of [`CheckFailed`]. This and
/// [`check_that`] are the crate's only deliberate panics, meant for notebook cells only: a panic is what
/// stops JupyterLab's *Run All* at the false claim (an `Err` returned through `?` is printed
/// and *Run All* goes on), and it fails the notebook under `make test`. Library code and
/// tests that want to handle the outcome use [`try_check`].
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let slopes = alibi_slopes(8)?;
/// // s_1 = 2^(-8/8) = 1/2
/// check("first ALiBi slope of 8 heads is 1/2", (slopes[0] as f64 - 0.5).abs(), 0.0);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn check(what: &str, err: f64, tol: f64) {
    match try_check(what, err, tol) {
        Ok(err) => println!("ok  {what}  [largest error {err:.2e} <= {tol:.2e}]"),
        Err(failed) => panic!("{failed}"),
    }
}

/// Stops the notebook unless `holds`; otherwise prints `ok  <what>  [<detail>]`.
///
/// For a claim that is an inequality or a property of measured numbers rather than the
/// agreement of two computations: a loss that grows by more than a margin, a ranking, every
/// model trained with the same configuration. `detail` says what was compared, with the numbers.
/// Where the claim is that two computations agree, [`check`] with [`max_err`] is the stronger
/// form: it prints the error itself.
///
/// # Panics
/// When `holds` is false, with `CHECK FAILED: <what>: <detail>`, for the reasons given at
/// [`check`].
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let slopes = alibi_slopes(8)?;
/// check_that("ALiBi slopes fall from head to head", slopes[0] > slopes[7], "s_1 > s_8");
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn check_that(what: &str, holds: bool, detail: &str) {
    assert!(holds, "CHECK FAILED: {what}: {detail}");
    println!("ok  {what}  [{detail}]");
}

/// The largest `|a - b|` over two arrays of the same shape, in `f64`; any element type that
/// converts to `f64` (`f32`, `f64`, integers), owned arrays or views.
///
/// Two equal values give 0, infinities included (a masked score `-inf` against `-inf`); a NaN
/// on either side gives NaN, which no [`check`] accepts. Two empty arrays give 0.
///
/// # Errors
/// [`Error::ShapeMismatch`] if the shapes differ.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let a = array![[1.0f32, 2.0], [3.0, f32::NEG_INFINITY]];
/// let b = array![[1.0f64, 2.5], [3.0, f64::NEG_INFINITY]];
/// assert_eq!(max_err(&a, &b.view())?, 0.5);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn max_err<S1, S2, A, B, D>(a: &ArrayBase<S1, D>, b: &ArrayBase<S2, D>) -> Result<f64>
where
    S1: Data<Elem = A>,
    S2: Data<Elem = B>,
    A: ToF64 + Copy,
    B: ToF64 + Copy,
    D: Dimension,
{
    if a.shape() != b.shape() {
        return Err(Error::ShapeMismatch {
            context: "max_err: two arrays of the same shape",
            expected: format!("{:?}", a.shape()),
            found: format!("{:?}", b.shape()),
        });
    }
    Ok(largest(a.iter().zip(b.iter()), |x, y| (x - y).abs()))
}

/// The largest `error(x, y)` over pairs converted to `f64`: equal values (infinities too) give 0
/// without calling `error`, and a NaN anywhere gives NaN.
fn largest<'a, A, B>(
    pairs: impl Iterator<Item = (&'a A, &'a B)>,
    error: impl Fn(f64, f64) -> f64,
) -> f64
where
    A: ToF64 + Copy + 'a,
    B: ToF64 + Copy + 'a,
{
    pairs.fold(0.0, |worst, (&x, &y)| {
        let (x, y) = (x.to_f64(), y.to_f64());
        let err = if x == y { 0.0 } else { error(x, y) };
        if err.is_nan() || worst.is_nan() {
            f64::NAN
        } else {
            worst.max(err)
        }
    })
}

/// The largest relative error `|a_i / b_i - 1| = |a_i - b_i| / |b_i|` of the values `ours`
/// against a `reference` of the same length, in `f64`; any element type that converts to `f64`.
///
/// Two equal values give 0 (a reference 0 matched exactly too); a reference 0 against anything
/// else gives infinity, and a NaN on either side NaN, which no [`check`] accepts. Two empty
/// slices give 0.
///
/// # Errors
/// [`Error::ShapeMismatch`] if the lengths differ.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let ours = [1.01f32, 2.0, 0.0];
/// let reference = vec![1.0f64, 2.0, 0.0];
/// assert!((max_rel_err(&ours, &reference)? - 0.01).abs() < 1e-6);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn max_rel_err<A, B>(ours: &[A], reference: &[B]) -> Result<f64>
where
    A: ToF64 + Copy,
    B: ToF64 + Copy,
{
    if ours.len() != reference.len() {
        return Err(Error::ShapeMismatch {
            context: "max_rel_err: two lists of the same length",
            expected: reference.len().to_string(),
            found: ours.len().to_string(),
        });
    }
    Ok(largest(ours.iter().zip(reference), |x, y| {
        (x - y).abs() / y.abs()
    }))
}

/// A seeded `[rows, cols]` matrix of `f32` with independent N(0, 1) entries: the same seed
/// gives the same matrix, so a notebook's random inputs are the same on every run.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// assert_eq!(randn(3, 4, 7), randn(3, 4, 7));
/// assert_ne!(randn(3, 4, 7), randn(3, 4, 8));
/// ```
pub fn randn(rows: usize, cols: usize, seed: u64) -> ndarray::Array2<f32> {
    ndarray::Array2::random_using(
        (rows, cols),
        StandardNormal,
        &mut StdRng::seed_from_u64(seed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array2};

    #[test]
    fn try_check_passes_at_the_tolerance_and_fails_above() {
        assert_eq!(try_check("a", 1e-6, 1e-6), Ok(1e-6));
        let failed = try_check("a claim", 2e-6, 1e-6).unwrap_err();
        assert_eq!(failed.what, "a claim");
        assert_eq!(
            failed.to_string(),
            "CHECK FAILED: a claim: largest error 2.000e-6 > tolerance 1.00e-6"
        );
    }

    #[test]
    fn nan_never_passes() {
        assert!(try_check("nan error", f64::NAN, 1.0).is_err());
        assert!(try_check("nan tolerance", 0.0, f64::NAN).is_err());
    }

    #[test]
    fn check_returns_when_the_claim_holds() {
        check("zero error", 0.0, 0.0);
    }

    #[test]
    #[should_panic(expected = "CHECK FAILED: a false claim: largest error 1.000e0")]
    fn check_panics_on_a_false_claim() {
        check("a false claim", 1.0, 0.5);
    }

    #[test]
    fn check_that_returns_when_the_claim_holds() {
        check_that("two is more than one", 2 > 1, "2 > 1");
    }

    #[test]
    #[should_panic(expected = "CHECK FAILED: one is more than two: 1 > 2")]
    fn check_that_panics_on_a_false_claim() {
        check_that("one is more than two", 1 > 2, "1 > 2");
    }

    #[test]
    fn max_err_mixes_element_types_and_views() {
        let a = array![[1.0f32, 2.0], [3.0, 4.0]];
        let b = array![[1i32, 2], [3, 6]];
        assert_eq!(max_err(&a, &b).unwrap(), 2.0);
        assert_eq!(max_err(&a.row(0), &array![1.0f64, 2.25]).unwrap(), 0.25);
        assert_eq!(max_err(&a.t(), &a.t()).unwrap(), 0.0);
    }

    #[test]
    fn max_err_infinities_and_nan() {
        let a = array![f32::NEG_INFINITY, 1.0];
        assert_eq!(max_err(&a, &a).unwrap(), 0.0);
        let b = array![f32::INFINITY, 1.0];
        assert_eq!(max_err(&a, &b).unwrap(), f64::INFINITY);
        let c = array![f32::NAN, 1.0];
        assert!(max_err(&a, &c).unwrap().is_nan());
        // NaN is not hidden by a later, larger difference
        let d = array![f32::NAN, 100.0];
        assert!(max_err(&c, &d).unwrap().is_nan());
    }

    #[test]
    fn max_rel_err_is_relative_to_the_reference() {
        assert_eq!(max_rel_err(&[3.0f64, 1.0], &[2.0f64, 1.0]).unwrap(), 0.5);
        assert_eq!(max_rel_err(&[-3.0f64], &[-2.0f64]).unwrap(), 0.5);
        assert_eq!(max_rel_err(&[0u32, 5], &[0.0f32, 5.0]).unwrap(), 0.0);
        assert_eq!(max_rel_err(&[1.0f64], &[0.0f64]).unwrap(), f64::INFINITY);
        assert!(max_rel_err(&[f64::NAN, 1.0], &[1.0f64, 1.0])
            .unwrap()
            .is_nan());
        assert!(max_rel_err(&[1.0, 1.0], &[1.0f64, f64::NAN])
            .unwrap()
            .is_nan());
        assert_eq!(max_rel_err::<f32, f64>(&[], &[]).unwrap(), 0.0);
        assert!(matches!(
            max_rel_err(&[1.0f32], &[1.0f32, 2.0]),
            Err(Error::ShapeMismatch { .. })
        ));
    }

    #[test]
    fn max_err_rejects_different_shapes() {
        let err = max_err(&Array2::<f32>::zeros((2, 3)), &Array2::<f32>::zeros((3, 2)));
        assert!(matches!(err, Err(Error::ShapeMismatch { .. })));
        assert!(err.unwrap_err().to_string().contains("[2, 3]"));
    }

    #[test]
    fn randn_is_seeded_and_standard() {
        let a = randn(200, 50, 1);
        assert_eq!(a, randn(200, 50, 1));
        let n = a.len() as f64;
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(
            mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }
}
