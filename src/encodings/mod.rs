//! Position-only objects, one module per family: they depend on positions and
//! hyper-parameters, never on content. Each type also implements [`PositionScheme`], its
//! application to attention, which [`crate::attention::attention`] composes; the encodings
//! import nothing above them.
//!
//! | module | scheme | application |
//! |---|---|---|
//! | [`sinusoidal`] | Vaswani et al. 2017, sinusoidal absolute | added to the input |
//! | [`learned`] | learned absolute (BERT, GPT-2) | added to the input |
//! | [`shaw`] | Shaw et al. 2018, clipped relative keys and values | relative vectors |
//! | [`xl`] | Transformer-XL / XLNet, $u$, $v$, `rel_shift` | relative vectors |
//! | [`t5`] | T5 bucketed bias | score bias |
//! | [`deberta`] | DeBERTa c2p + p2c, log buckets | relative vectors |
//! | [`tupe`] | TUPE, untied positional term | score term + bias |
//! | [`rope`] | RoPE, both layouts, PI / NTK / dynamic / NTK-by-parts / YaRN / Llama3 / LongRoPE; a model's configuration read ([`rope::ModelRope`]); Self-Extend; ReRoPE and Leaky ReRoPE ([`rope::ReRope`]) | rotate q, k |
//! | [`alibi`] | ALiBi | score bias |
//! | [`xpos`] | xPos | rotate and scale q, k |
//! | [`kerple`] | Kerple (log, power) | score bias |
//! | [`fire`] | FIRE | score bias |
//! | [`dpb`] | dynamic position bias (CrossFormer; x-transformers) | score bias |
//! | [`cope`] | CoPE, contextual positions (Golovneva et al. 2024) | score term from the logits |
//! | [`dd_alibi`] | data-dependent ALiBi, the forgetting gate (Forgetting Transformer) | score bias from the input |
//! | [`nope`] | NoPE | nothing |
//! | [`temperature`] | log-$n$ and floor-log query scales | scale q |

pub mod alibi;
pub mod cope;
pub mod dd_alibi;
pub mod deberta;
pub mod dpb;
pub mod fire;
pub mod init;
pub mod kerple;
pub mod learned;
pub mod nope;
pub mod rope;
mod scheme;
pub mod shaw;
pub mod sinusoidal;
pub mod t5;
pub mod temperature;
pub mod tupe;
pub mod xl;
pub mod xpos;

pub(crate) use scheme::ensure_queries_fit;
pub use scheme::{query_position, PositionScheme};
