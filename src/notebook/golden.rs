//! The golden files of `tests/golden/` (values generated from the reference implementations)
//! read from a notebook. The files keep one case per line, so a case is found by a text
//! search for a marker on its line; the crate's own tests parse the same files with
//! `serde_json`.

use crate::encodings::rope::RopeFrequencies;
use crate::error::ensure;
use crate::{Error, Result};

/// The line of `text` that holds `marker` and the text after `"field": ` on it.
fn field_text<'a>(text: &'a str, marker: &str, field: &str) -> Result<&'a str> {
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .ok_or_else(|| Error::Io(format!("golden: no case contains {marker:?}")))?;
    let key = format!("\"{field}\": ");
    let start = line.find(&key).ok_or_else(|| {
        Error::Io(format!(
            "golden: no field {field:?} on the line of {marker:?}"
        ))
    })?;
    Ok(&line[start + key.len()..])
}

/// The numbers of the JSON array `"field": [...]` on the first line of `text` that contains
/// `marker`.
///
/// # Errors
/// [`Error::Io`] naming the marker or field when no line holds the marker, the line has no
/// such field, the array is not closed, or an entry is not a number.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let text = "{\"cases\": [\n{\"heads\": 2, \"slopes\": [0.0625, 0.00390625]},\n]}";
/// assert_eq!(golden_array(text, "\"heads\": 2,", "slopes")?, vec![0.0625, 0.00390625]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn golden_array(text: &str, marker: &str, field: &str) -> Result<Vec<f64>> {
    let rest = field_text(text, marker, field)?;
    let inner = rest
        .strip_prefix('[')
        .and_then(|r| r.find(']').map(|end| &r[..end]))
        .ok_or_else(|| Error::Io(format!("golden: {field:?} of {marker:?} is not an array")))?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    inner
        .split(',')
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .map_err(|e| Error::Io(format!("golden: {field:?} of {marker:?}: {v:?}: {e}")))
        })
        .collect()
}

/// The number after `"field": ` on the first line of `text` that contains `marker`.
///
/// # Errors
/// [`Error::Io`] naming the marker or field when no line holds the marker, the line has no
/// such field, or its value is not a number.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let text = "{\"name\": \"yarn\", \"attention_factor\": 1.1386},";
/// assert_eq!(golden_number(text, "\"name\": \"yarn\"", "attention_factor")?, 1.1386);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn golden_number(text: &str, marker: &str, field: &str) -> Result<f64> {
    let rest = field_text(text, marker, field)?;
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .map_err(|e| Error::Io(format!("golden: {field:?} of {marker:?}: {e}")))
}

/// The largest distance between `ours` and `golden` in units in the last place of `f32`
/// (the golden files write exact `f32` values as JSON numbers): 0 when they are the same
/// numbers, 1 when they are neighbours.
///
/// # Errors
/// When the lengths differ.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let next = f32::from_bits(0.5f32.to_bits() + 1);
/// assert_eq!(max_ulps(&[1.0, next], &[1.0, 0.5])?, 1);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn max_ulps(ours: &[f32], golden: &[f64]) -> Result<u32> {
    ensure(
        ours.len() == golden.len(),
        "values",
        ours.len(),
        &format!("as many as the golden values ({})", golden.len()),
    )?;
    Ok(ours
        .iter()
        .zip(golden)
        .map(|(a, b)| (i64::from(a.to_bits()) - i64::from((*b as f32).to_bits())).unsigned_abs())
        .max()
        .map_or(0, |u| u.min(u64::from(u32::MAX)) as u32))
}

/// How far `freqs` is from the case `name` of `tests/golden/rope.json` (the frequencies
/// Hugging Face transformers computes for it): the largest distance of an inverse frequency
/// in ulps of `f32` ([`max_ulps`]) and the absolute difference of the attention factors.
///
/// # Errors
/// [`Error::Io`] when the file has no case `name` (or it lacks a field), and an error when
/// the number of frequencies differs.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let text = "{\"name\": \"tiny\", \"inv_freq\": [1.0, 0.01], \"attention_factor\": 1.0},";
/// let ours = RopeConfig::new(4, 10_000.0)?.frequencies(None)?;
/// assert_eq!(rope_golden_distance(text, "tiny", &ours)?, (0, 0.0));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn rope_golden_distance(text: &str, name: &str, freqs: &RopeFrequencies) -> Result<(u32, f64)> {
    let marker = format!("\"name\": \"{name}\"");
    let inv_freq = golden_array(text, &marker, "inv_freq")?;
    let factor = golden_number(text, &marker, "attention_factor")?;
    Ok((
        max_ulps(&freqs.inv_freq, &inv_freq)?,
        (f64::from(freqs.attention_factor) - factor).abs(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "{\"cases\": [\n\
        {\"name\": \"a\", \"inv_freq\": [1.0, 0.5, 2.5e-1], \"attention_factor\": 1.0},\n\
        {\"name\": \"b\", \"inv_freq\": [], \"attention_factor\": 0.9}\n]}";

    #[test]
    fn reads_the_case_on_the_marker_line() {
        assert_eq!(
            golden_array(TEXT, "\"name\": \"a\"", "inv_freq").unwrap(),
            vec![1.0, 0.5, 0.25]
        );
        assert_eq!(
            golden_number(TEXT, "\"name\": \"b\"", "attention_factor").unwrap(),
            0.9
        );
        assert!(golden_array(TEXT, "\"name\": \"b\"", "inv_freq")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn ulps_count_the_f32_steps_between_values() {
        let up = |x: f32, n: u32| f32::from_bits(x.to_bits() + n);
        assert_eq!(max_ulps(&[0.25, up(0.5, 3)], &[0.25, 0.5]).unwrap(), 3);
        assert_eq!(max_ulps(&[], &[]).unwrap(), 0);
        assert!(max_ulps(&[1.0], &[1.0, 2.0]).is_err());
        let ours = RopeFrequencies {
            inv_freq: vec![1.0, up(0.5, 1), 0.25],
            attention_factor: 1.25,
        };
        assert_eq!(rope_golden_distance(TEXT, "a", &ours).unwrap(), (1, 0.25));
        assert!(rope_golden_distance(TEXT, "b", &ours).is_err());
        assert!(rope_golden_distance(TEXT, "c", &ours).is_err());
    }

    #[test]
    fn names_what_is_missing() {
        let no_case = golden_array(TEXT, "\"name\": \"c\"", "inv_freq").unwrap_err();
        assert!(no_case.to_string().contains("no case contains"));
        let no_field = golden_number(TEXT, "\"name\": \"a\"", "factor").unwrap_err();
        assert!(no_field.to_string().contains("no field \"factor\""));
        let not_array = golden_array(TEXT, "\"name\": \"a\"", "attention_factor").unwrap_err();
        assert!(not_array.to_string().contains("not an array"));
        let not_number = golden_number(TEXT, "\"name\": \"a\"", "name").unwrap_err();
        assert!(not_number.to_string().contains("\"name\""));
    }
}
