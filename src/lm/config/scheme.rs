//! [`Scheme`]: every position scheme of the crate, chosen by name in configurations and on the
//! command line.

use serde::{Deserialize, Serialize};

/// Every position scheme of the crate, as selected on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// NoPE: no position information at all (causal masking alone).
    Nope,
    /// Sinusoidal absolute table added to the input.
    Sinusoidal,
    /// Learned absolute table added to the input.
    Learned,
    /// Shaw et al.: clipped relative key and value vectors.
    Shaw,
    /// Transformer-XL: $u$, $v$, $W_R$ and sinusoidal relative embeddings.
    Xl,
    /// T5: a learned scalar per bucket and head.
    T5,
    /// DeBERTa: content-to-position and position-to-content terms with log buckets.
    Deberta,
    /// TUPE: untied absolute position term plus a T5 bias.
    Tupe,
    /// RoPE (half layout).
    Rope,
    /// ALiBi: fixed per-head linear distance penalties.
    Alibi,
    /// xPos: RoPE with an exponential decay.
    Xpos,
    /// Kerple (log variant) with learned $r_1, r_2$.
    Kerple,
    /// FIRE: an MLP of the normalised log distance.
    Fire,
    /// Dynamic position bias: an MLP of the signed log distance per layer.
    Dpb,
    /// Partial RoPE: the first `partial_rotary_factor` of each head's channels rotated.
    #[serde(rename = "partial_rope")]
    PartialRope,
    /// p-RoPE: the lowest frequencies of RoPE dropped (`p_rope_kept` of the pairs rotate).
    #[serde(rename = "p_rope")]
    PRope,
    /// RoPE with a global NoPE layer every `nope_every` layers.
    #[serde(rename = "rope_nope")]
    RopeNope,
    /// RoPE trained at random ordered positions from `[0, random_positions_max)`.
    #[serde(rename = "random_rope")]
    RandomRope,
    /// Data-dependent ALiBi (the forgetting gate): a bias summing the log gates of the tokens
    /// between key and query.
    #[serde(rename = "dd_alibi")]
    DdAlibi,
    /// CoPE: positions counted by gates from the query's own logits, embeddings interpolated.
    Cope,
}

impl Scheme {
    /// All schemes, in the order of the results table.
    pub const ALL: [Scheme; 20] = [
        Scheme::Nope,
        Scheme::Sinusoidal,
        Scheme::Learned,
        Scheme::Shaw,
        Scheme::Xl,
        Scheme::T5,
        Scheme::Deberta,
        Scheme::Tupe,
        Scheme::Rope,
        Scheme::Alibi,
        Scheme::Xpos,
        Scheme::Kerple,
        Scheme::Fire,
        Scheme::Dpb,
        Scheme::PartialRope,
        Scheme::PRope,
        Scheme::RopeNope,
        Scheme::RandomRope,
        Scheme::DdAlibi,
        Scheme::Cope,
    ];

    /// One line on the scheme, for help texts.
    pub fn summary(&self) -> &'static str {
        match self {
            Scheme::Nope => "NoPE: no position information at all (causal masking alone)",
            Scheme::Sinusoidal => "Sinusoidal absolute table added to the input",
            Scheme::Learned => "Learned absolute table added to the input",
            Scheme::Shaw => "Shaw et al.: clipped relative key and value vectors",
            Scheme::Xl => "Transformer-XL: u, v, W_R and sinusoidal relative embeddings",
            Scheme::T5 => "T5: a learned scalar per bucket and head",
            Scheme::Deberta => {
                "DeBERTa: content-to-position and position-to-content terms with log buckets"
            }
            Scheme::Tupe => "TUPE: untied absolute position term plus a T5 bias",
            Scheme::Rope => "RoPE (half layout)",
            Scheme::Alibi => "ALiBi: fixed per-head linear distance penalties",
            Scheme::Xpos => "xPos: RoPE with an exponential decay",
            Scheme::Kerple => "Kerple (log variant) with learned r1, r2",
            Scheme::Fire => "FIRE: an MLP of the normalised log distance",
            Scheme::Dpb => "Dynamic position bias: an MLP of the signed log distance per layer",
            Scheme::PartialRope => "Partial RoPE: the first part of each head's channels rotated",
            Scheme::PRope => "p-RoPE: RoPE with its slowest pairs left unrotated",
            Scheme::RopeNope => "RoPE layers with a global NoPE layer every few layers",
            Scheme::RandomRope => "RoPE trained at random ordered positions from a wider range",
            Scheme::DdAlibi => {
                "Data-dependent ALiBi: a forget gate per token and head sums to the bias"
            }
            Scheme::Cope => {
                "CoPE: contextual positions, counts of sigmoid gates of the query's logits"
            }
        }
    }

    /// The command-line name: `nope`, `sinusoidal`, ..., `fire`.
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::Nope => "nope",
            Scheme::Sinusoidal => "sinusoidal",
            Scheme::Learned => "learned",
            Scheme::Shaw => "shaw",
            Scheme::Xl => "xl",
            Scheme::T5 => "t5",
            Scheme::Deberta => "deberta",
            Scheme::Tupe => "tupe",
            Scheme::Rope => "rope",
            Scheme::Alibi => "alibi",
            Scheme::Xpos => "xpos",
            Scheme::Kerple => "kerple",
            Scheme::Fire => "fire",
            Scheme::Dpb => "dpb",
            Scheme::PartialRope => "partial_rope",
            Scheme::PRope => "p_rope",
            Scheme::RopeNope => "rope_nope",
            Scheme::RandomRope => "random_rope",
            Scheme::DdAlibi => "dd_alibi",
            Scheme::Cope => "cope",
        }
    }
}

crate::named::named!(Scheme, "scheme");
