//! The byte-level language model on burn that trains and measures every position scheme:
//! its configuration ([`config`], serde types usable without the `train` feature), and, with
//! `train`, the model ([`model`], one structure per scheme), its operations, composed and
//! fused ([`ops`]), the corpus ([`data`]), training ([`train`], continued after a kill from
//! its [`snapshot`]), evaluation ([`eval`]) and its memory check ([`memory`]), the sweep behind
//! the results table ([`sweep`]), exports of learned position objects ([`export`]) and the
//! on-disk checkpoint, written as one atomic unit ([`checkpoint`]).

// The links above name modules of the `train` feature: they resolve in its documentation.
#![cfg_attr(not(feature = "train"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "train")]
pub mod checkpoint;
pub mod config;
#[cfg(feature = "train")]
pub mod data;
#[cfg(feature = "train")]
pub mod eval;
#[cfg(feature = "train")]
pub mod export;
#[cfg(feature = "train")]
pub mod memory;
#[cfg(feature = "train")]
pub mod model;
#[cfg(feature = "train")]
pub mod ops;
#[cfg(feature = "train")]
mod progress;
#[cfg(feature = "train")]
pub mod snapshot;
#[cfg(feature = "train")]
pub mod sweep;
#[cfg(feature = "train")]
pub mod train;
