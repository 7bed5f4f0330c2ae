//! RoPE angles held in low precision. An angle $m\theta_i$ stored in a format with $p$ mantissa
//! bits is off by up to half a unit in the last place, $2^{\lfloor \log_2 m\theta_i \rfloor - p -
//! 1}$: the fastest pair ($\theta_0 = 1$) at position $m$ loses about $m\,2^{-p-1}$ radians. In
//! bf16 ($p = 7$) that is a quarter turn by position 800 and the phase is noise from a few
//! thousand on; fp16 ($p = 10$) keeps it to about $m/2^{11}$ and overflows above 65504; f32
//! ($p = 23$) keeps $10^{-1}$ rad up to about $10^6$.
//!
//! [`AnglePrecision::round`] rounds to nearest, ties to even, as a cast does; the phase error
//! of a position is the largest wrapped difference over the pairs.

use serde::{Deserialize, Serialize};

/// A floating-point format angles may be held in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AnglePrecision {
    /// IEEE single: 23 mantissa bits.
    F32,
    /// IEEE half: 10 mantissa bits, largest finite 65504.
    F16,
    /// bfloat16: 7 mantissa bits, the exponent range of f32.
    Bf16,
}

impl AnglePrecision {
    /// All three, coarsest last.
    pub const ALL: [AnglePrecision; 3] = [
        AnglePrecision::F32,
        AnglePrecision::F16,
        AnglePrecision::Bf16,
    ];

    /// `f32`, `fp16`, `bf16`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "fp16",
            Self::Bf16 => "bf16",
        }
    }

    /// (mantissa bits, smallest normal exponent, largest finite value).
    fn format(&self) -> (i32, i32, f64) {
        match self {
            Self::F32 => (23, -126, f64::from(f32::MAX)),
            Self::F16 => (10, -14, 65_504.0),
            Self::Bf16 => (7, -126, 3.389_531_389_251_535e38),
        }
    }

    /// `x` rounded to the nearest value of the format (ties to even); $\pm\infty$ beyond its
    /// range.
    pub fn round(&self, x: f64) -> f64 {
        if !x.is_finite() || x == 0.0 {
            return x;
        }
        let (mantissa, min_exp, max) = self.format();
        // exponent of |x| from its bits (exact, unlike log2)
        let exp = (((x.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp);
        // spacing of the format's values around x: 2^(e - p)
        let spacing = 2f64.powi(exp - mantissa);
        let rounded = (x / spacing).round_ties_even() * spacing;
        if rounded.abs() > max {
            f64::INFINITY.copysign(x)
        } else {
            rounded
        }
    }
}

/// $\min(|a - b| \bmod 2\pi,\ 2\pi - |a - b| \bmod 2\pi)$: the distance of two angles on the
/// circle, in $[0, \pi]$; $\pi$ (the phase is lost) when either is not finite.
pub fn wrapped_difference(a: f64, b: f64) -> f64 {
    if !(a.is_finite() && b.is_finite()) {
        return std::f64::consts::PI;
    }
    let d = (a - b).rem_euclid(std::f64::consts::TAU);
    d.min(std::f64::consts::TAU - d)
}

/// The largest phase error over the pairs at `position`: the angle $m\theta_i$ held in
/// `precision` against the exact product (radians, at most $\pi$).
pub fn phase_error(position: f64, inv_freq: &[f32], precision: AnglePrecision) -> f64 {
    inv_freq
        .iter()
        .map(|&theta| {
            let exact = position * f64::from(theta);
            wrapped_difference(precision.round(exact), exact)
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// bf16 by its definition: the upper 16 bits of the f32, rounded to nearest even.
    fn bf16_from_bits(x: f32) -> f32 {
        let b = x.to_bits();
        let lsb = (b >> 16) & 1;
        f32::from_bits(b.wrapping_add(0x7fff + lsb) & 0xffff_0000)
    }

    #[test]
    fn half_precision_values_and_overflow() {
        let h = AnglePrecision::F16;
        assert_eq!(h.round(2049.0), 2048.0); // tie to even
        assert_eq!(h.round(2051.0), 2052.0);
        assert_eq!(h.round(65_504.0), 65_504.0);
        assert_eq!(h.round(65_519.0), 65_504.0);
        assert_eq!(h.round(65_520.0), f64::INFINITY);
        assert_eq!(h.round(1.0 / 3.0), 0.333_251_953_125);
        assert_eq!(h.round(1e-8), 0.0); // below half the smallest subnormal 2^-24
        assert_eq!(wrapped_difference(f64::INFINITY, 1.0), std::f64::consts::PI);
    }

    proptest! {
        #[test]
        fn f32_and_bf16_rounding_equal_the_casts(x in -1e30f64..1e30) {
            prop_assert_eq!(AnglePrecision::F32.round(x), f64::from(x as f32));
            let f = x as f32;
            // from an f32 input, rounding to bf16 is the bit rounding
            prop_assert_eq!(AnglePrecision::Bf16.round(f64::from(f)), f64::from(bf16_from_bits(f)));
        }

        #[test]
        fn the_error_is_at_most_half_a_unit_in_the_last_place(x in 1e-3f64..6e4) {
            for (p, bits) in [(AnglePrecision::F16, 10), (AnglePrecision::Bf16, 7)] {
                let ulp = 2f64.powi(x.log2().floor() as i32 - bits);
                prop_assert!((p.round(x) - x).abs() <= ulp / 2.0 * (1.0 + 1e-12));
            }
        }
    }

    #[test]
    fn the_fastest_pair_loses_its_phase_first_in_bf16() {
        let inv_freq = [1.0f32, 0.1, 0.01];
        let e = |m: f64, p| phase_error(m, &inv_freq, p);
        assert!(e(1e6, AnglePrecision::F32) < 0.04);
        assert!(e(5000.0, AnglePrecision::F16) < 2.0f64.powi(12 - 11));
        assert!(e(5000.0, AnglePrecision::Bf16) > 1.0);
        assert_eq!(e(70_000.0, AnglePrecision::F16), std::f64::consts::PI);
    }
}
