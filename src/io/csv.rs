//! The one CSV writer and reader of the crate: rows of any serde record as text with a header of
//! the field names ([`csv_bytes`]) and back ([`read_csv`]). Results, per-window and
//! per-position losses, training curves and exports are all written through them, so a
//! record's field order is its column order and text is quoted where it must be.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Error, Result};

/// Rows of any serialisable record as CSV text: a header of the field names, then one line per
/// row (written by the `csv` crate through serde, so text is quoted where it must be).
///
/// # Errors
/// [`Error::Format`] when a row cannot be written as CSV.
///
/// # Examples
/// ```
/// #[derive(serde::Serialize)]
/// struct Row { label: &'static str, x: f64 }
/// let text = posenc::io::csv::csv_bytes(&[Row { label: "a,b", x: 1.5 }])?;
/// assert_eq!(String::from_utf8(text).unwrap(), "label,x\n\"a,b\",1.5\n");
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn csv_bytes<T: Serialize>(rows: &[T]) -> Result<Vec<u8>> {
    let format = |e: &dyn std::fmt::Display| Error::Format {
        path: "CSV".into(),
        message: e.to_string(),
    };
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row).map_err(|e| format(&e))?;
    }
    writer.into_inner().map_err(|e| format(&e))
}

/// Reads rows of any deserialisable record from a CSV file with a header of its field names
/// (what [`csv_bytes`] writes). A field marked `#[serde(default)]` may be missing from the
/// header (older tables without a later column).
///
/// # Errors
/// An unreadable file, or a row that does not fit the record ([`Error::Format`] naming the
/// file).
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let format = |e: ::csv::Error| Error::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut reader = ::csv::Reader::from_path(path).map_err(format)?;
    reader
        .deserialize()
        .collect::<std::result::Result<Vec<T>, _>>()
        .map_err(format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        name: String,
        x: f64,
        #[serde(default)]
        extra: Option<f64>,
    }

    #[test]
    fn rows_round_trip_and_text_is_quoted_where_it_must_be() {
        let rows = vec![
            Row {
                name: "a,b".into(),
                x: 1.5,
                extra: Some(2.0),
            },
            Row {
                name: "c".into(),
                x: -0.25,
                extra: None,
            },
        ];
        let text = String::from_utf8(csv_bytes(&rows).unwrap()).unwrap();
        assert_eq!(text, "name,x,extra\n\"a,b\",1.5,2.0\nc,-0.25,\n");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join("rows.csv");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_csv::<Row>(&path).unwrap(), rows);
        // a column marked default may be missing
        std::fs::write(&path, "name,x\nc,1\n").unwrap();
        let back: Vec<Row> = read_csv(&path).unwrap();
        assert_eq!(back[0].extra, None);
        // a row that does not fit, and a missing file, name the file
        std::fs::write(&path, "name\nc\n").unwrap();
        let e = read_csv::<Row>(&path).unwrap_err().to_string();
        assert!(e.contains("rows.csv"), "{e}");
        let e = read_csv::<Row>(&dir.join("missing.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.csv"), "{e}");
    }
}
