//! # posenc — positional encodings for Transformers
//!
//! Every position scheme of the Transformer literature written once, on [`ndarray`], exact to
//! the reference implementations (Hugging Face transformers, the papers' code) and checked
//! against golden values generated from them.
//!
//! Almost every scheme splits into
//! 1. a **position-only object** that depends on positions and hyper-parameters, never on
//!    content ([`encodings`]): a sinusoidal table, a clipped relative-index matrix, T5 or
//!    DeBERTa buckets, RoPE frequencies, ALiBi slopes, Kerple and FIRE distance features;
//! 2. an **application** to attention ([`attention`]): add to the input (absolute), add a
//!    bias to the scores (T5, ALiBi, Kerple, FIRE), rotate q and k (RoPE, xPos), or dot q and
//!    k with relative vectors (Shaw, Transformer-XL, DeBERTa, TUPE).
//!
//! The [`prelude`] brings the common names into scope for notebooks:
//!
//! ```
//! use posenc::prelude::*;
//! let pe = sinusoidal_table(4, 6)?;
//! assert_eq!(pe.dim(), (4, 6));
//! # Ok::<(), posenc::Error>(())
//! ```

pub mod attention;
pub mod encodings;
pub mod error;
pub mod io;
pub mod lm;
pub mod named;
#[cfg(feature = "notebook")]
pub mod notebook;
pub mod results;

pub use error::{Error, Result};

/// The library example of `docs/usage.md`, compiled and run with the doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/usage.md")]
pub struct UsagePage;

/// The math API in one import, `use posenc::prelude::*;`: every encoding, the reference
/// attention, the error type and the ndarray names they take. Notebooks use
/// `posenc::notebook::prelude` (feature `notebook`) instead, which adds the figures, checks
/// and tables.
pub mod prelude {
    pub use crate::attention::{attention, AttentionOutput, PositionScheme};
    pub use crate::encodings::alibi::{alibi_bias, alibi_slopes, Alibi};
    pub use crate::encodings::cope::Cope;
    pub use crate::encodings::dd_alibi::{DataDependentAlibi, ForgetBias};
    pub use crate::encodings::deberta::{
        deberta_relative_positions, make_log_bucket_position, DebertaRelative, LogBuckets,
    };
    pub use crate::encodings::dpb::{dpb_feature, DynamicPositionBias};
    pub use crate::encodings::fire::Fire;
    pub use crate::encodings::kerple::{cpd_spectrum, Kerple, KerpleKind};
    pub use crate::encodings::learned::LearnedAbsolute;
    pub use crate::encodings::nope::{is_nope_layer, NoPe};
    pub use crate::encodings::rope::{
        apply_rope, apply_rope_partial, phase_error, query_weights, rope_cos_sin, rope_half,
        rope_interleaved, self_extend_distance, stale_cache_error, AnglePrecision, DynamicNtkRope,
        LayerScaling, LongRope, Misreading, ModelRope, ReRope, Rope, RopeConfig, RopeFrequencies,
        RopeLayout, RopeScaling, SelfExtend,
    };
    pub use crate::encodings::rope::{
        neox_to_half, p_rope_inv_freq, p_rope_pairs, partial_inv_freq, partial_rotary_dim,
        sample_positions, PairRope, RandomEval, RandomPositions, RandomRope,
    };
    pub use crate::encodings::shaw::{relative_index_matrix, ShawRelative};
    pub use crate::encodings::sinusoidal::{
        sinusoidal_embedding, sinusoidal_table, SinusoidalAbsolute, SinusoidalLayout,
    };
    pub use crate::encodings::t5::{relative_position_bucket, T5Bias, T5Buckets};
    pub use crate::encodings::temperature::{attention_entropy, Temperature, Tempered};
    pub use crate::encodings::tupe::Tupe;
    pub use crate::encodings::xl::{rel_shift, TransformerXl};
    pub use crate::encodings::xpos::XPos;
    pub use crate::{Error, Result};
    pub use ndarray::{array, s, Array1, Array2, Array3, ArrayView1, ArrayView2, Axis};
}
