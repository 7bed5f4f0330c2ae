//! JSON files: configurations, checkpoint records and sweep records, read into types that
//! reject unknown keys (`#[serde(deny_unknown_fields)]`) and written pretty with a final
//! newline.

use std::fs;
use std::path::Path;

use serde::Serialize;

use super::{format_error, io_error, write_atomic};
use crate::error::Result;

/// Reads a JSON file into `T` (whose unknown keys are errors).
///
/// # Errors
/// [`Error::Io`](crate::Error::Io) for an unreadable file,
/// [`Error::Format`](crate::Error::Format) naming the key or the line for bad content.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        // serde names unknown keys itself; for a value of the wrong type, show its line
        let line = text
            .lines()
            .nth(e.line().saturating_sub(1))
            .map(str::trim)
            .filter(|l| e.line() > 0 && !l.is_empty());
        match line {
            Some(l) if e.is_data() => format_error(path, format!("{e}: `{l}`")),
            _ => format_error(path, e),
        }
    })
}

/// Pretty JSON with a final newline.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// Writes `value` as pretty JSON with a final newline, atomically ([`write_atomic`]).
///
/// # Errors
/// As [`write_atomic`].
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, to_json(value).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Example {
        steps: usize,
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_format_errors_naming_the_key_or_line() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join("example.json");
        write_json(&path, &Example { steps: 3 }).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"steps\": 3\n}\n");
        assert_eq!(read_json::<Example>(&path).unwrap(), Example { steps: 3 });
        fs::write(&path, "{\"stpes\": 3}").unwrap();
        let e = read_json::<Example>(&path).unwrap_err();
        assert!(
            matches!(e, Error::Format { .. }) && e.to_string().contains("stpes"),
            "{e}"
        );
        fs::write(&path, "{\n  \"steps\": -1\n}\n").unwrap();
        let e = read_json::<Example>(&path).unwrap_err().to_string();
        assert!(e.contains("`\"steps\": -1`"), "{e}");
        let e = read_json::<Example>(&dir.join("missing.json")).unwrap_err();
        assert!(
            matches!(e, Error::Io(_)) && e.to_string().contains("missing.json"),
            "{e}"
        );
    }
}
