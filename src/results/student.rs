//! Student's $t$ distribution, for verdicts over a few training seeds: with $S$ seeds a mean
//! over seeds has $\nu = S - 1$ degrees of freedom, and at $\nu = 2$ a two-sided 95 % test
//! needs $|t| > 4.303$, not the normal 1.96.
//!
//! The distribution function goes through the regularised incomplete beta function,
//! $$F_\nu(t) = 1 - \tfrac12 I_{x}\!\left(\tfrac{\nu}{2}, \tfrac12\right), \quad
//! x = \frac{\nu}{\nu + t^2}, \quad t \ge 0,$$
//! and $F_\nu(-t) = 1 - F_\nu(t)$; the two-sided $p$-value of $t$ is $I_x(\nu/2, 1/2)$ itself.
//! $I_x(a, b)$ is evaluated by its continued fraction (modified Lentz), $\ln\Gamma$ by the
//! Lanczos approximation ($g = 7$, 9 terms, about 15 digits), and the quantile
//! $t_{p,\nu} = F_\nu^{-1}(p)$ by bisection to the last bit. The tests check closed forms
//! ($\nu = 1$: $F = \tfrac12 + \arctan(t)/\pi$; $\nu = 2$: $F = \tfrac12 + t / (2\sqrt{2 + t^2})$)
//! and tabulated quantiles.

use std::f64::consts::PI;

use crate::error::ensure;
use crate::Result;

/// $\ln\Gamma(x)$ for $x > 0$ (Lanczos, $g = 7$; reflection below $\tfrac12$).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Gamma(x) Gamma(1 - x) = pi / sin(pi x)
        return (PI / (PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let a = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |acc, (i, c)| acc + c / (x + i as f64 + 1.0));
    let t = x + G + 0.5;
    0.5 * (2.0 * PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of $I_x(a, b)$ (modified Lentz), converging for
/// $x < (a + 1) / (a + b + 2)$.
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=500 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        // even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        // odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// The regularised incomplete beta function $I_x(a, b)$, $a, b > 0$, $x$ clamped to
/// $[0, 1]$.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    // x^a (1 - x)^b / B(a, b)
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// Checks a number of degrees of freedom.
fn check_df(df: usize) -> Result<f64> {
    ensure(
        df >= 1,
        "degrees of freedom",
        df,
        "at least 1 (two or more seeds)",
    )?;
    Ok(df as f64)
}

/// The two-sided $p$-value of $t$ under Student's $t$ with `df` degrees of freedom,
/// $P(|T| \ge |t|) = I_{\nu/(\nu + t^2)}(\nu/2, 1/2)$: 1 at $t = 0$, 0 at $|t| = \infty$.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for `df` 0 or a `t` that is NaN.
///
/// # Examples
/// ```
/// // nu = 2: p = 1 - |t| / sqrt(2 + t^2), which is 0.05 at t = 0.95 / sqrt(0.04875) = 4.303
/// let p = posenc::results::two_sided_p(0.95 / 0.04875f64.sqrt(), 2)?;
/// assert!((p - 0.05).abs() < 1e-12);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn two_sided_p(t: f64, df: usize) -> Result<f64> {
    let nu = check_df(df)?;
    ensure(!t.is_nan(), "t", t, "a number")?;
    if t.is_infinite() {
        return Ok(0.0);
    }
    Ok(incomplete_beta(nu / 2.0, 0.5, nu / (nu + t * t)))
}

/// The distribution function $F_\nu(t) = P(T \le t)$ of Student's $t$ with `df` degrees of
/// freedom.
///
/// # Errors
/// As [`two_sided_p`].
pub fn t_cdf(t: f64, df: usize) -> Result<f64> {
    let tail = two_sided_p(t, df)? / 2.0;
    Ok(if t >= 0.0 { 1.0 - tail } else { tail })
}

/// The quantile $t_{p,\nu} = F_\nu^{-1}(p)$ of Student's $t$ with `df` degrees of freedom,
/// by bisection on [`t_cdf`]: $t_{0.975, 2} = 4.303$, $t_{0.975, 4} = 2.776$,
/// $t_{0.975, 9} = 2.262$.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for `df` 0 or `p` outside $(0, 1)$.
///
/// # Examples
/// ```
/// let t = posenc::results::t_quantile(0.975, 4)?;
/// assert_eq!(format!("{t:.3}"), "2.776");
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn t_quantile(p: f64, df: usize) -> Result<f64> {
    check_df(df)?;
    ensure(
        p > 0.0 && p < 1.0,
        "p",
        p,
        "a probability strictly between 0 and 1",
    )?;
    if p < 0.5 {
        return Ok(-t_quantile(1.0 - p, df)?);
    }
    // the upper tail 1 - p, to keep precision near 1
    let tail = 1.0 - p;
    let upper = |t: f64| two_sided_p(t, df).map(|q| q / 2.0);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while upper(hi)? > tail {
        lo = hi;
        hi *= 2.0;
        if hi > 1e300 {
            break;
        }
    }
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if upper(mid)? > tail {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64, tol: f64) -> bool {
        (x - y).abs() <= tol * y.abs().max(1.0)
    }

    #[test]
    fn ln_gamma_at_known_points() {
        // Gamma(1) = Gamma(2) = 1, Gamma(5) = 24, Gamma(1/2) = sqrt(pi), Gamma(3/2) = sqrt(pi)/2
        assert!(ln_gamma(1.0).abs() < 1e-14);
        assert!(ln_gamma(2.0).abs() < 1e-14);
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-14));
        assert!(close(ln_gamma(0.5), PI.sqrt().ln(), 1e-14));
        assert!(close(ln_gamma(1.5), (PI.sqrt() / 2.0).ln(), 1e-13));
        // Gamma(0.25) = 3.6256099082219083 (reflection branch)
        assert!(close(ln_gamma(0.25), 3.625_609_908_221_908_f64.ln(), 1e-13));
    }

    #[test]
    fn incomplete_beta_closed_forms() {
        for x in [0.01, 0.2, 0.5, 0.7, 0.99] {
            // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b
            assert!(close(incomplete_beta(1.0, 1.0, x), x, 1e-13), "{x}");
            assert!(close(incomplete_beta(3.0, 1.0, x), x.powi(3), 1e-13), "{x}");
            assert!(close(
                incomplete_beta(1.0, 2.5, x),
                1.0 - (1.0 - x).powf(2.5),
                1e-13
            ));
            // symmetry: I_x(a, b) = 1 - I_{1-x}(b, a)
            let (a, b) = (2.5, 0.5);
            assert!(close(
                incomplete_beta(a, b, x),
                1.0 - incomplete_beta(b, a, 1.0 - x),
                1e-13
            ));
        }
        assert!(close(incomplete_beta(4.0, 4.0, 0.5), 0.5, 1e-14));
        assert_eq!(incomplete_beta(2.0, 3.0, 0.0), 0.0);
        assert_eq!(incomplete_beta(2.0, 3.0, 1.0), 1.0);
    }

    #[test]
    fn t_cdf_matches_the_closed_forms_for_one_and_two_degrees_of_freedom() {
        for t in [
            -30.0, -4.0, -1.0, -0.3, 0.0, 0.5, 1.0, 2.0, 4.303, 12.0, 1e6,
        ] {
            // nu = 1 (Cauchy): 1/2 + atan(t)/pi
            let cauchy = 0.5 + f64::atan(t) / PI;
            assert!(close(t_cdf(t, 1).unwrap(), cauchy, 1e-12), "{t}");
            // nu = 2: 1/2 + t / (2 sqrt(2 + t^2))
            let two = 0.5 + t / (2.0 * (2.0 + t * t).sqrt());
            assert!(close(t_cdf(t, 2).unwrap(), two, 1e-12), "{t}");
        }
        assert_eq!(two_sided_p(0.0, 3).unwrap(), 1.0);
        assert_eq!(two_sided_p(f64::INFINITY, 3).unwrap(), 0.0);
        assert_eq!(two_sided_p(f64::NEG_INFINITY, 3).unwrap(), 0.0);
        // the two-sided p is symmetric in t
        assert_eq!(two_sided_p(-2.5, 4).unwrap(), two_sided_p(2.5, 4).unwrap());
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // tabulated two-sided 95 % critical values
        for (df, t) in [
            (1, 12.706),
            (2, 4.303),
            (3, 3.182),
            (4, 2.776),
            (9, 2.262),
            (29, 2.045),
        ] {
            assert_eq!(
                format!("{:.3}", t_quantile(0.975, df).unwrap()),
                format!("{t:.3}")
            );
        }
        // closed forms: nu = 1, tan(pi (p - 1/2)); nu = 2, (2p - 1) / sqrt(2 p (1 - p))
        for p in [0.6, 0.9, 0.975, 0.995, 0.9999] {
            assert!(close(
                t_quantile(p, 1).unwrap(),
                (PI * (p - 0.5)).tan(),
                1e-9
            ));
            let two = (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
            assert!(close(t_quantile(p, 2).unwrap(), two, 1e-10), "{p}");
        }
        // t_{0.975, 2} = 0.95 / sqrt(0.04875) = 4.30265...
        assert!(close(
            t_quantile(0.975, 2).unwrap(),
            0.95 / 0.04875f64.sqrt(),
            1e-13
        ));
        // symmetric, 0 at the median, the normal 1.95996 for many degrees of freedom
        assert_eq!(t_quantile(0.5, 3).unwrap(), 0.0);
        assert!(close(
            t_quantile(0.025, 4).unwrap(),
            -t_quantile(0.975, 4).unwrap(),
            1e-15
        ));
        assert!(close(t_quantile(0.975, 100_000).unwrap(), 1.959_98, 1e-4));
        // the quantile inverts the distribution function
        let t = t_quantile(0.99, 5).unwrap();
        assert!(close(t_cdf(t, 5).unwrap(), 0.99, 1e-14));
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(t_quantile(0.975, 0)
            .unwrap_err()
            .to_string()
            .contains("degrees of freedom"));
        assert!(t_quantile(1.0, 3)
            .unwrap_err()
            .to_string()
            .contains("invalid p = 1"));
        assert!(t_quantile(0.0, 3).is_err());
        assert!(t_quantile(f64::NAN, 3).is_err());
        assert!(two_sided_p(f64::NAN, 3).is_err());
        assert!(t_cdf(1.0, 0).is_err());
    }
}
