//! The byte-level language model (feature `train`): for every scheme the burn attention equals
//! the ndarray reference ([`equivalence`]), gradients equal finite differences and causality
//! holds ([`gradients`]), evaluation, checkpoints and export ([`eval`]), the fused kernels
//! against the composed reference ([`kernels`]), RoPE extended at inference (ReRoPE, Leaky
//! ReRoPE, log-$n$: [`rerope`]), a training continued from its snapshot after a kill
//! ([`snapshot`]), and the `train`, `eval`, `sweep` and `export` commands of the
//! binary ([`cli`]).

#[path = "../support/mod.rs"]
pub mod support;

mod cli;
mod equivalence;
mod eval;
mod gradients;
mod kernels;
mod keys;
mod rerope;
mod snapshot;
