//! Vectorisable elementwise functions and the CPU feature dispatch the fused kernels use.
//!
//! The functions are written as plain scalar code without branches that depend on the value,
//! so that the compiler turns a loop over them into AVX2 + FMA instructions when the loop is
//! compiled inside a `multiversion!` function (runtime detection, with a portable fallback).

/// `log2(e)`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` split in a part exact in f32 and the rest (Cody and Waite).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// $1.5 \cdot 2^{23}$: adding it rounds an f32 of magnitude below $2^{22}$ to an integer,
/// which then sits in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// $e^x$ with a relative error below $2 \cdot 10^{-7}$ on $[-87, 88]$ (Cephes' `expf`
/// polynomial on $r = x - n \ln 2$, $|r| \le \ln 2 / 2$, scaled by $2^n$ through the exponent
/// bits). Inputs below $-87.3$ give about $10^{-38}$, above $88.7$ give about $3 \cdot 10^{38}$.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.7);
    // n = round(x / ln 2), as a float and as the integer in the low bits of t
    let t = x.mul_add(LOG2E, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    // r = x - n ln 2
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let mut p: f32 = 1.987_569_1e-4;
    p = p.mul_add(r, 1.398_2e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 0.5);
    // e^r = 1 + r + r^2 p(r)
    let er = (p * r).mul_add(r, r) + 1.0;
    // 2^n from the exponent bits: (n + 127) << 23
    let scale = f32::from_bits(
        t.to_bits()
            .wrapping_sub(ROUND_MAGIC.to_bits())
            .wrapping_add(127)
            << 23,
    );
    er * scale
}

/// The standard normal CDF $\Phi(x) = \tfrac12\big(1 + \operatorname{erf}(x/\sqrt2)\big)$,
/// absolute error below $3.5 \cdot 10^{-7}$ for every $x$ (the formula's own is
/// $7 \cdot 10^{-8}$; the rest is f32 rounding and [`exp`]), from Abramowitz and Stegun's
/// 7.1.26 ($|\varepsilon(\operatorname{erf})| \le 1.5 \cdot 10^{-7}$): with $z = |x| / \sqrt2$ and
/// $t = 1 / (1 + p z)$,
///
/// ```math
/// \operatorname{erfc}(z) \approx t\,(a_1 + t(a_2 + t(a_3 + t(a_4 + t a_5))))\, e^{-z^2},
/// \qquad \Phi(x) = 1 - \tfrac12 \operatorname{erfc}(z) \ (x \ge 0), \quad
/// \tfrac12 \operatorname{erfc}(z) \ (x < 0).
/// ```
///
/// One exponential per value ($e^{-x^2/2}$, the same factor as the density's), where a
/// relative accuracy in the far tail would need two: $x\Phi(x)$ there is below $10^{-6}$ in
/// magnitude.
#[inline(always)]
pub fn normal_cdf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_7;
    const A4: f32 = -1.453_152;
    const A5: f32 = 1.061_405_4;
    let z = x.abs() * FRAC_1_SQRT_2;
    let t = 1.0 / P.mul_add(z, 1.0);
    let mut poly = A5;
    poly = poly.mul_add(t, A4);
    poly = poly.mul_add(t, A3);
    poly = poly.mul_add(t, A2);
    poly = poly.mul_add(t, A1);
    // erfc(z) / 2
    let half_tail = 0.5 * t * poly * exp(-0.5 * x * x);
    if x >= 0.0 {
        1.0 - half_tail
    } else {
        half_tail
    }
}

/// Independent partial sums the reductions below keep: a loop over lanes of a fixed-size
/// array vectorises (one running sum per lane), where one running sum cannot (floating-point
/// addition is not associative, so the compiler keeps the order).
pub const LANES: usize = 16;

/// Folds the lanes of a reduction pairwise into one value.
#[inline(always)]
fn fold_lanes(mut acc: [f32; LANES], op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for i in 0..width {
            acc[i] = op(acc[i], acc[i + width]);
        }
        width /= 2;
    }
    acc[0]
}

/// The reduction of `x` by `step` over [`LANES`] independent running values, each starting at
/// `init` (one per lane, so the loop vectorises), then the lanes joined pairwise by `join`
/// and the elements past the last full group of lanes stepped in one by one.
#[inline(always)]
fn lane_fold(
    x: &[f32],
    init: f32,
    step: impl Fn(f32, f32) -> f32,
    join: impl Fn(f32, f32) -> f32,
) -> f32 {
    let mut acc = [init; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for ch in chunks {
        for (a, &v) in acc.iter_mut().zip(ch) {
            *a = step(*a, v);
        }
    }
    rest.iter().fold(fold_lanes(acc, join), |a, &v| step(a, v))
}

/// $\sum_i x_i$ over [`LANES`] independent partial sums.
#[inline(always)]
pub fn sum(x: &[f32]) -> f32 {
    lane_fold(x, 0.0, |a, v| a + v, |a, b| a + b)
}

/// $\max_i x_i$ ($-\infty$ for an empty slice).
#[inline(always)]
pub fn max(x: &[f32]) -> f32 {
    lane_fold(x, f32::NEG_INFINITY, f32::max, f32::max)
}

/// $\sum_i a_i b_i$ over [`LANES`] independent partial sums (fused multiply-adds).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            *s = x.mul_add(y, *s);
        }
    }
    ra.iter()
        .zip(rb)
        .fold(fold_lanes(acc, |a, b| a + b), |s, (&x, &y)| x.mul_add(y, s))
}

/// $\sum_i (x_i - c)^2$.
#[inline(always)]
pub fn sum_squared_deviations(x: &[f32], c: f32) -> f32 {
    lane_fold(
        x,
        0.0,
        |a, v| {
            let d = v - c;
            d.mul_add(d, a)
        },
        |a, b| a + b,
    )
}

/// $x_i \leftarrow e^{x_i - c}$ in place; returns $\sum_i e^{x_i - c}$.
#[inline(always)]
pub fn exp_shifted_in_place(x: &mut [f32], c: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = x.chunks_exact_mut(LANES);
    for ch in &mut chunks {
        for (a, v) in acc.iter_mut().zip(ch.iter_mut()) {
            *v = exp(*v - c);
            *a += *v;
        }
    }
    let mut s = fold_lanes(acc, |a, b| a + b);
    for v in chunks.into_remainder() {
        *v = exp(*v - c);
        s += *v;
    }
    s
}

/// $\sum_i e^{x_i - c}$.
#[inline(always)]
pub fn exp_shifted_sum(x: &[f32], c: f32) -> f32 {
    lane_fold(x, 0.0, |a, v| a + exp(v - c), |a, b| a + b)
}

/// `1 / sqrt(2)`.
pub const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// `1 / sqrt(2 pi)`.
pub const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// Whether the CPU has AVX2 and FMA (detected once by the standard library, then cached).
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines `fn name(args) -> ret` whose body is compiled twice: for AVX2 + FMA, used when
/// [`has_avx2_fma`], and portable. The body's helpers must be `#[inline(always)]` so that they
/// are compiled into the AVX2 copy.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                if $crate::lm::ops::fused::simd::has_avx2_fma() {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn fast($($arg: $ty),*) $(-> $ret)? {
                        body($($arg),*)
                    }
                    // SAFETY: the CPU has AVX2 and FMA (checked just above).
                    return unsafe { fast($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::super::testing::erfc;
    use super::*;

    #[test]
    fn exp_matches_std_to_two_ulp_scale() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let ours = exp(x) as f64;
            let exact = (x as f64).exp();
            worst = worst.max(((ours - exact) / exact).abs());
            x += 0.0137;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
    }

    #[test]
    fn exp_of_zero_is_one_and_large_negative_is_tiny() {
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37);
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
    }

    /// $\Phi$ against $\tfrac12 \operatorname{erfc}(-x/\sqrt2)$ in f64, on a grid over
    /// $[-12, 12]$ and at the extremes.
    #[test]
    fn normal_cdf_matches_series_reference() {
        let mut worst = 0.0f64;
        let mut x = -12.0f32;
        while x < 12.0 {
            let ours = f64::from(normal_cdf(x));
            let exact = 0.5 * erfc(-f64::from(x) / std::f64::consts::SQRT_2);
            worst = worst.max((ours - exact).abs());
            x += 0.0037;
        }
        assert!(worst < 3.5e-7, "worst absolute error {worst}");
        assert_eq!(normal_cdf(f32::INFINITY), 1.0);
        assert_eq!(normal_cdf(f32::NEG_INFINITY), 0.0);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
    }

    /// The reductions against f64 sums of the same values, at lengths around the lane count
    /// (remainders of every size) and with the extreme at every position.
    #[test]
    fn reductions_match_f64_at_every_length() {
        for n in 0..70usize {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
                .collect();
            let y: Vec<f32> = (0..n)
                .map(|i| ((i * 11 % 17) as f32 - 8.0) * 0.21)
                .collect();
            let sum64: f64 = x.iter().map(|&v| f64::from(v)).sum();
            let dot64: f64 = x
                .iter()
                .zip(&y)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let c = 0.3f32;
            let dev64: f64 = x
                .iter()
                .map(|&v| (f64::from(v) - f64::from(c)).powi(2))
                .sum();
            let exp64: f64 = x.iter().map(|&v| (f64::from(v) - 1.0).exp()).sum();
            let tol = |exact: f64| 1e-5 * (1.0 + exact.abs());
            assert!(
                (f64::from(sum(&x)) - sum64).abs() <= tol(sum64),
                "sum, n = {n}"
            );
            assert!(
                (f64::from(dot(&x, &y)) - dot64).abs() <= tol(dot64),
                "dot, n = {n}"
            );
            let dev = f64::from(sum_squared_deviations(&x, c));
            assert!((dev - dev64).abs() <= tol(dev64), "deviations, n = {n}");
            assert!(
                (f64::from(exp_shifted_sum(&x, 1.0)) - exp64).abs() <= tol(exp64),
                "exp sum, n = {n}"
            );
            let mut e = x.clone();
            let s = exp_shifted_in_place(&mut e, 1.0);
            assert!(
                (f64::from(s) - exp64).abs() <= tol(exp64),
                "exp in place, n = {n}"
            );
            for (&v, &w) in x.iter().zip(&e) {
                assert!((f64::from(w) - (f64::from(v) - 1.0).exp()).abs() <= 1e-6 * f64::from(w));
            }
            for at in 0..n {
                let mut z = x.clone();
                z[at] = 100.0;
                assert_eq!(max(&z), 100.0, "max at {at} of {n}");
            }
        }
        assert_eq!(max(&[]), f32::NEG_INFINITY);
        assert_eq!(sum(&[]), 0.0);
    }

    multiversion! {
        fn cdf_times_exp(xs: &[f32], out: &mut [f32]) {
            for (o, &x) in out.iter_mut().zip(xs) {
                *o = normal_cdf(x) * exp(x / 4.0);
            }
        }
    }

    #[test]
    fn dispatched_and_portable_paths_agree() {
        let xs: Vec<f32> = (0..1000).map(|i| -20.0 + i as f32 * 0.04).collect();
        let portable: Vec<f32> = xs.iter().map(|&x| normal_cdf(x) * exp(x / 4.0)).collect();
        let mut fast = vec![0.0; xs.len()];
        cdf_times_exp(&xs, &mut fast);
        for (a, b) in portable.iter().zip(&fast) {
            assert!((a - b).abs() <= 1e-6 * a.abs().max(1e-30), "{a} vs {b}");
        }
    }
}
