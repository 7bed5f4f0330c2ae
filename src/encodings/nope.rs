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
//!
//! **RoPE/NoPE hybrids.** Recent long-context models interleave the two: Llama 4's iRoPE
//! (`no_rope_layer_interval` 4) and Cohere's Command A (`sliding_window_pattern` 4) leave every
//! $n$-th layer without position encoding, global, and give the others RoPE (in both, local:
//! chunked or sliding-window attention). Counting layers from 0, layer $\ell$ is NoPE when
//! $(\ell + 1) \bmod n = 0$ ([`is_nope_layer`]): the last of every $n$. Llama 4 also scales the
//! NoPE layers' queries by $1 + 0.1 \ln(1 + \lfloor (m + 1)/8192 \rfloor)$
//! (`attn_temperature_tuning`, [`super::temperature::Temperature::llama4`]), 1 at every
//! position below 8191; Command A does not. The hybrid's layers, against Llama 4's and Command
//! A's, in `notebooks/14_schemes_since_2023.ipynb`.

use super::PositionScheme;

/// Whether layer `layer` (from 0) of a RoPE/NoPE hybrid with a NoPE layer every `every` layers
/// has no position encoding: $(\ell + 1) \bmod n = 0$, as Llama 4's `no_rope_layers` and
/// Cohere 2's `layer_types` place them. `every` 0 means no NoPE layer.
///
/// # Examples
/// ```
/// use posenc::encodings::nope::is_nope_layer;
/// let nope: Vec<usize> = (0..8).filter(|&l| is_nope_layer(l, 4)).collect();
/// assert_eq!(nope, vec![3, 7]);
/// assert!(!(0..8).any(|l| is_nope_layer(l, 0)));
/// ```
pub fn is_nope_layer(layer: usize, every: usize) -> bool {
    every > 0 && (layer + 1).is_multiple_of(every)
}

/// No position encoding: attention sees content only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoPe;

impl PositionScheme for NoPe {
    fn name(&self) -> String {
        "nope".into()
    }
}
