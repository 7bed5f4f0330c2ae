//! The golden files of `tests/golden/` (values generated from the reference implementations)
//! read from a notebook. The files keep one case per line, so a case is found by a text
//! search for a marker on its line; the crate's own tests parse the same files with
//! `serde_json`.

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
