//! Vectorisable elementwise functions and the CPU feature dispatch the fused kernels use.
//!
//! The functions are written as plain scalar code without branches that depend on the value,
//! so that the compiler turns a loop over them into AVX2 + FMA instructions when the loop is
//! compiled inside [`with_avx2`] (runtime detection, with a portable fallback).

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

/// $\operatorname{erfc}(z)$ for any real $z$, fractional error below $10^{-6}$ while the result
/// is a normal f32 ($|z| \lesssim 9$; the Chebyshev fit of Numerical Recipes, §6.2, is good to
/// $1.2 \cdot 10^{-7}$):
///
/// ```math
/// \operatorname{erfc}(|z|) \approx t \, e^{-z^2 - 1.26551223 + t(1.00002368 + \dots)}, \quad
/// t = \frac{1}{1 + |z|/2}, \qquad \operatorname{erfc}(-z) = 2 - \operatorname{erfc}(z).
/// ```
#[inline(always)]
pub fn erfc(z: f32) -> f32 {
    let a = z.abs();
    let t = 1.0 / (1.0 + 0.5 * a);
    let mut p: f32 = 0.170_872_77;
    p = p.mul_add(t, -0.822_152_23);
    p = p.mul_add(t, 1.488_515_9);
    p = p.mul_add(t, -1.135_204);
    p = p.mul_add(t, 0.278_868_07);
    p = p.mul_add(t, -0.186_288_06);
    p = p.mul_add(t, 0.096_784_18);
    p = p.mul_add(t, 0.374_091_96);
    p = p.mul_add(t, 1.000_023_7);
    p = p.mul_add(t, -1.265_512_2);
    // e^{-a^2 + p} as e^{-a2} e^{p - (a^2 - a2)}: a2 = fl(a^2) and its rounding error
    // (exact through an FMA) go to separate factors, so the exponent loses nothing to rounding
    let a2 = a * a;
    let a2_err = a.mul_add(a, -a2);
    let tail = t * exp(-a2) * exp(p - a2_err);
    if z >= 0.0 {
        tail
    } else {
        2.0 - tail
    }
}

/// `1 / sqrt(2)`.
pub const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// `1 / sqrt(2 pi)`.
pub const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// The standard normal CDF $\Phi(x) = \tfrac12 \operatorname{erfc}(-x/\sqrt2)$.
#[inline(always)]
pub fn normal_cdf(x: f32) -> f32 {
    0.5 * erfc(-x * FRAC_1_SQRT_2)
}

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
                if $crate::model::kernels::simd::has_avx2_fma() {
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

    /// erf from its Maclaurin series in f64 (converges fast for |z| <= 3), and erfc(z) for
    /// larger z from the continued fraction: an independent reference.
    fn erfc_reference(z: f64) -> f64 {
        if z.abs() <= 3.0 {
            let mut term = z;
            let mut sum = z;
            for n in 1..200 {
                term *= -z * z / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            1.0 - 2.0 / std::f64::consts::PI.sqrt() * sum
        } else if z > 0.0 {
            // Lentz-free continued fraction, evaluated backwards
            let mut f = 0.0;
            for k in (1..200).rev() {
                f = (k as f64 / 2.0) / (z + f);
            }
            (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + f)
        } else {
            2.0 - erfc_reference(-z)
        }
    }

    #[test]
    fn erfc_matches_series_reference() {
        let mut worst = 0.0f64;
        let mut z = -6.0f32;
        while z < 9.0 {
            let ours = erfc(z) as f64;
            let exact = erfc_reference(z as f64);
            worst = worst.max(((ours - exact) / exact).abs());
            z += 0.0071;
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
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
