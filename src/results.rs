//! One row of the perplexity-versus-length results (`data/results/ppl_vs_length.csv`): written
//! by `posenc eval` and `posenc sweep` (feature `train`), read by the notebooks (feature
//! `notebook`).

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

    /// The CSV header.
    pub const HEADER: &'static str = "scheme,variant,train_len,eval_len,mode,nats_per_byte,std_error,bits_per_byte,perplexity,tokens_scored,steps,params,seed";

    /// One CSV line (no newline).
    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{},{},{},{}",
            self.scheme,
            self.variant,
            self.train_len,
            self.eval_len,
            self.mode,
            self.nats_per_byte,
            self.std_error,
            self.bits_per_byte,
            self.perplexity,
            self.tokens_scored,
            self.steps,
            self.params,
            self.seed
        )
    }
}
