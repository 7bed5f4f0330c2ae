//! The position math without features: our position objects against the reference code's
//! values ([`golden`]), every scheme through the one reference attention ([`schemes`]), and the
//! schemes applied to a trained RoPE model at inference as limits of one another
//! ([`inference_extension`]); the trained schemes of the byte LM that have a reference package,
//! against it ([`trained_schemes`]).

#[path = "../support/mod.rs"]
pub mod support;

mod golden;
mod inference_extension;
mod rope_configs;
mod rope_properties;
mod schemes;
mod trained_schemes;
