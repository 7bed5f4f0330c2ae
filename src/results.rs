//! One row of the perplexity-versus-length results (`data/results/ppl_vs_length.csv`): written
//! by `posenc eval` and `posenc sweep` (feature `train`), read by the notebooks (feature
//! `notebook`) and by [`crate::summary`]; and the CSV writer and reader of both, in every build.

use serde::{Deserialize, Serialize};

/// One row of the results table: one model (scheme and variant) at one length in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Position scheme.
    pub scheme: String,
    /// `base`, an inference scaling (`linear`, `ntk`, ...), or a fine-tune (`ft-linear`).
    pub variant: String,
    /// Training length.
    pub train_len: usize,
    /// Evaluated length.
    pub eval_len: usize,
    /// `nonoverlap` or `sliding`.
    pub mode: String,
    /// Mean negative log-likelihood, nats per byte.
    pub nats_per_byte: f64,
    /// Standard error of `nats_per_byte` from the spread of the windows' means.
    pub std_error: f64,
    /// The same in bits.
    pub bits_per_byte: f64,
    /// $e^{\text{nats}}$, per byte.
    pub perplexity: f64,
    /// Bytes scored.
    pub tokens_scored: usize,
    /// Training steps of the checkpoint.
    pub steps: usize,
    /// Trainable parameters.
    pub params: usize,
    /// Training seed.
    pub seed: u64,
    /// The RoPE scaling factor $s$ in effect at this length (the inference scaling's, or the
    /// one the model was trained with); empty without a scaling.
    #[serde(default)]
    pub scaling_factor: Option<f64>,
}

/// The loss of one evaluation window: the windows behind a [`ResultRow`], for uncertainties
/// computed on paired windows (two lengths, or two models, scored on the same text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRow {
    /// Position scheme.
    pub scheme: String,
    /// As in [`ResultRow::variant`].
    pub variant: String,
    /// Training seed.
    pub seed: u64,
    /// `nonoverlap` or `sliding`.
    pub mode: String,
    /// Evaluated length.
    pub eval_len: usize,
    /// The window's first byte in the split (its identity across lengths in `nonoverlap`
    /// mode and across models in both modes).
    pub start: usize,
    /// Bytes of the window scored.
    pub bytes: usize,
    /// Mean negative log-likelihood of those bytes, nats per byte.
    pub nats_per_byte: f64,
}

#[cfg(test)]
impl ResultRow {
    /// A `nonoverlap` row of a model trained at 128 bytes, for tests: `nats` at `eval_len`.
    pub(crate) fn example(
        scheme: &str,
        variant: &str,
        eval_len: usize,
        seed: u64,
        nats: f64,
    ) -> Self {
        ResultRow {
            scheme: scheme.into(),
            variant: variant.into(),
            train_len: 128,
            eval_len,
            mode: "nonoverlap".into(),
            nats_per_byte: nats,
            std_error: 0.01,
            bits_per_byte: nats / std::f64::consts::LN_2,
            perplexity: nats.exp(),
            tokens_scored: 1000,
            steps: 10,
            params: 100,
            seed,
            scaling_factor: None,
        }
    }
}

impl ResultRow {
    /// `scheme` for base models, `scheme/variant` otherwise.
    pub fn label(&self) -> String {
        if self.variant == "base" {
            self.scheme.clone()
        } else {
            format!("{}/{}", self.scheme, self.variant)
        }
    }
}

/// Rows of any serialisable record as CSV text: a header of the field names, then one line per
/// row (written by the `csv` crate through serde, so text is quoted where it must be).
///
/// # Errors
/// [`crate::Error::Format`] when a row cannot be written as CSV.
pub fn csv_bytes<T: Serialize>(rows: &[T]) -> crate::Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row).map_err(|e| crate::Error::Format {
            path: "CSV".into(),
            message: e.to_string(),
        })?;
    }
    writer.into_inner().map_err(|e| crate::Error::Format {
        path: "CSV".into(),
        message: e.to_string(),
    })
}

/// Reads rows of any deserialisable record from a CSV file with a header of its field names
/// (what [`csv_bytes`] writes).
///
/// # Errors
/// An unreadable file, or a row that does not fit the record ([`crate::Error::Format`]).
pub fn read_csv<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> crate::Result<Vec<T>> {
    let format = |e: csv::Error| crate::Error::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut reader = csv::Reader::from_path(path).map_err(format)?;
    reader
        .deserialize()
        .collect::<Result<Vec<T>, _>>()
        .map_err(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_written_with_a_header_of_the_field_names() {
        let row = ResultRow {
            scheme: "rope".into(),
            variant: "ft-yarn".into(),
            train_len: 256,
            eval_len: 512,
            mode: "nonoverlap".into(),
            nats_per_byte: 1.25,
            std_error: 0.5,
            bits_per_byte: 1.25 / std::f64::consts::LN_2,
            perplexity: 1.25f64.exp(),
            tokens_scored: 100,
            steps: 600,
            params: 826_112,
            seed: 0,
            scaling_factor: Some(2.0),
        };
        let text = String::from_utf8(csv_bytes(&[row.clone(), row]).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "scheme,variant,train_len,eval_len,mode,nats_per_byte,std_error,bits_per_byte,perplexity,tokens_scored,steps,params,seed,scaling_factor"
        );
        assert!(
            lines[1].starts_with("rope,ft-yarn,256,512,nonoverlap,1.25,0.5,")
                && lines[1].ends_with(",0,2.0"),
            "{}",
            lines[1]
        );
        // read back as written, the scaling factor included; an empty factor reads as none
        let path = std::env::temp_dir().join(format!("posenc-rows-{}.csv", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let back: Vec<ResultRow> = read_csv(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].scaling_factor, Some(2.0));
        assert_eq!(back[0].eval_len, 512);
        std::fs::write(&path, text.replace(",0,2.0", ",0,")).unwrap();
        let back: Vec<ResultRow> = read_csv(&path).unwrap();
        assert_eq!(back[1].scaling_factor, None);
        let _ = std::fs::remove_file(&path);
        // text that needs quoting is quoted
        #[derive(Serialize)]
        struct Labelled {
            label: &'static str,
        }
        let text = csv_bytes(&[Labelled { label: "a,b" }]).unwrap();
        assert_eq!(String::from_utf8(text).unwrap(), "label\n\"a,b\"\n");
    }
}
