//! The wavelength spectrum of RoPE: every pair's wavelength $\lambda_i = 2\pi/\theta_i$ against
//! the lengths a model is trained and run at, the picture behind every context-extension method
//! (`notebooks/07_rope.ipynb`, `notebooks/08_rope_scaling.ipynb`).

use std::f64::consts::TAU;

use super::figures::{lines_xy, Lines};
use crate::encodings::rope::RopeFrequencies;

/// Each pair's wavelength $\lambda_i = 2\pi/\theta_i$ (in tokens) against its index $i$, one line
/// per set of frequencies, and a horizontal line at each named length: a pair above a length
/// does not complete one turn within it, so a model trained at that length has seen only part
/// of its circle. A pair at frequency 0 (partial RoPE's and p-RoPE's unrotated pairs) never
/// turns and has no point. Log y axis, axes labelled; the caller adds the title.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let plain = RopeConfig::new(64, 10_000.0)?.frequencies(None)?;
/// let pi = RopeConfig::with_scaling(64, 10_000.0, RopeScaling::Linear { factor: 4.0 })?.frequencies(None)?;
/// let fig = wavelengths(&[("RoPE", &plain), ("PI, s = 4", &pi)], &[("training length L", 2048.0)])
///     .title("Wavelengths").figure()?;
/// assert!(fig.to_json().contains("training length L"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn wavelengths<S: AsRef<str>, T: AsRef<str>>(
    freqs: &[(S, &RopeFrequencies)],
    lengths: &[(T, f64)],
) -> Lines {
    let pairs = freqs
        .iter()
        .map(|(_, f)| f.inv_freq.len())
        .max()
        .unwrap_or(0);
    let mut series: Vec<(String, Vec<f64>, Vec<f64>)> = freqs
        .iter()
        .map(|(name, f)| {
            // lambda_i = 2 pi / theta_i, for the pairs that turn (theta_i > 0)
            let (index, lambda) = f
                .inv_freq
                .iter()
                .enumerate()
                .filter(|(_, &t)| t > 0.0)
                .map(|(i, &t)| (i as f64, TAU / f64::from(t)))
                .unzip();
            (name.as_ref().to_string(), index, lambda)
        })
        .collect();
    let last = pairs.saturating_sub(1) as f64;
    series.extend(
        lengths
            .iter()
            .map(|(name, len)| (name.as_ref().to_string(), vec![0.0, last], vec![*len; 2])),
    );
    lines_xy(&series)
        .x("pair index i (0 = fastest)")
        .y("wavelength 2π/θ_i (tokens, log scale)")
        .log_y()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_frequency_set_and_per_length() {
        let f = RopeFrequencies {
            inv_freq: vec![1.0, 0.01],
            attention_factor: 1.0,
        };
        let fig = wavelengths(&[("rope", &f)], &[("L", 100.0)])
            .figure()
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&fig.to_json()).unwrap();
        let data = json["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        let lambda = data[0]["y"].as_array().unwrap();
        assert!((lambda[0].as_f64().unwrap() - TAU).abs() < 1e-12);
        assert!((lambda[1].as_f64().unwrap() - TAU / f64::from(0.01f32)).abs() < 1e-9);
        assert_eq!(data[1]["name"], "L");
        assert_eq!(data[1]["x"][1], 1.0);
        assert_eq!(json["layout"]["yaxis"]["type"], "log");
    }

    /// Pairs at frequency 0 are left out, the others keep their index.
    #[test]
    fn pairs_that_never_turn_have_no_point() {
        let f = RopeFrequencies {
            inv_freq: vec![1.0, 0.0, 0.01, 0.0],
            attention_factor: 1.0,
        };
        let fig = wavelengths(&[("p-rope", &f)], &[] as &[(&str, f64)])
            .figure()
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&fig.to_json()).unwrap();
        let trace = &json["data"][0];
        assert_eq!(trace["x"], serde_json::json!([0.0, 2.0]));
        assert_eq!(trace["y"].as_array().unwrap().len(), 2);
    }
}
