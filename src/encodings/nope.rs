//! # NoPE — no position encoding
//!
//! Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
//! Transformers" (<https://arxiv.org/abs/2305.19466>).
//!
//! A causal decoder without any position encoding still knows *where* it is: the causal mask
//! makes the attention of query $i$ average over exactly $i+1$ keys, so position leaks into
//! the hidden states (the first layer can count). Bidirectional attention without positions
//! is permutation-equivariant and cannot tell "I like apples" from "apples like I".
//!
//! ```math
//! s_{ij} = \frac{q_i \cdot k_j}{\sqrt d}
//! ```
//!
//! Derived step by step, checked and plotted in `notebooks/09_alibi_and_beyond.ipynb`.

use super::PositionScheme;

/// No position encoding: attention sees content only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoPe;

impl PositionScheme for NoPe {
    fn name(&self) -> String {
        "nope".into()
    }
}
