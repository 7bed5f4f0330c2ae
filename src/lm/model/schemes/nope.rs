//! NoPE in the byte LM: no position information at all; the causal mask alone tells a token
//! how many tokens precede it ([`crate::encodings::nope`]).

/// NoPE's position objects: none.
#[derive(Debug, Clone, Copy)]
pub struct Objects;
