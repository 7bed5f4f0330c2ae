//! The position math without features: our position objects against the reference code's
//! values ([`golden`]) and every scheme through the one reference attention ([`schemes`]).

#[path = "../support/mod.rs"]
pub mod support;

mod golden;
mod rope_configs;
mod rope_properties;
mod schemes;
