//! The model configuration, saved with every checkpoint.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::encodings::rope::RopeScaling;
use crate::error::{ensure, invalid, Result};

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
}

impl Scheme {
    /// All schemes, in the order of the results table.
    pub const ALL: [Scheme; 13] = [
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
    ];

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
        }
    }

    /// Parses a command-line name.
    ///
    /// # Errors
    /// An unknown name; the message lists the known ones.
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let known: Vec<_> = Self::ALL.iter().map(|s| s.name()).collect();
                invalid("scheme", name, known.join(", "))
            })
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Model hyper-parameters. Defaults: the sweep's ~1M-parameter model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelConfig {
    /// Position scheme; default RoPE.
    pub scheme: Scheme,
    /// Vocabulary: 256 bytes.
    pub vocab: usize,
    /// Number of blocks; default 4.
    pub layers: usize,
    /// Model width $d$; default 128.
    pub d_model: usize,
    /// Attention heads; default 4 (head width 32).
    pub heads: usize,
    /// FFN hidden width; default 512.
    pub d_ff: usize,
    /// Training length; default 128.
    pub train_len: usize,
    /// Rows of the learned absolute and TUPE tables; default 128 (the training length).
    /// Positions past the table reuse its last row.
    pub max_positions: usize,
    /// Shaw clipping distance $k$; default 32.
    pub shaw_max_relative: usize,
    /// T5 (and TUPE) buckets; default 32 (causal: 16 exact, 16 logarithmic).
    pub t5_num_buckets: usize,
    /// T5 distance where the last bucket starts; default 128.
    pub t5_max_distance: usize,
    /// DeBERTa `position_buckets` (the span $s$); default 64.
    pub deberta_bucket_size: usize,
    /// DeBERTa `max_relative_positions`; default 128.
    pub deberta_max_position: usize,
    /// RoPE base; default 10000.
    pub rope_base: f64,
    /// RoPE context-extension scaling the model was trained (fine-tuned) with; default none.
    pub rope_scaling: RopeScaling,
    /// xPos scale base $B$; default 512.
    pub xpos_scale_base: f64,
    /// FIRE MLP width; default 32.
    pub fire_hidden: usize,
    /// FIRE $c$; default 0.1.
    pub fire_c: f32,
    /// FIRE threshold $L$; default 128 (the training length).
    pub fire_threshold: f32,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            scheme: Scheme::Rope,
            vocab: 256,
            layers: 4,
            d_model: 128,
            heads: 4,
            d_ff: 512,
            train_len: 128,
            max_positions: 128,
            shaw_max_relative: 32,
            t5_num_buckets: 32,
            t5_max_distance: 128,
            deberta_bucket_size: 64,
            deberta_max_position: 128,
            rope_base: 10_000.0,
            rope_scaling: RopeScaling::None,
            xpos_scale_base: 512.0,
            fire_hidden: 32,
            fire_c: 0.1,
            fire_threshold: 128.0,
        }
    }
}

impl ModelConfig {
    /// Head width $d / H$.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads.max(1)
    }

    /// The scale of content scores: $1/\sqrt{d_h}$, DeBERTa $1/\sqrt{3 d_h}$ (three terms),
    /// TUPE $1/\sqrt{2 d_h}$ (two terms), as the reference schemes' `score_scale`.
    pub fn score_scale(&self) -> f32 {
        let dh = self.head_dim() as f32;
        match self.scheme {
            Scheme::Deberta => 1.0 / (3.0 * dh).sqrt(),
            Scheme::Tupe => 1.0 / (2.0 * dh).sqrt(),
            _ => 1.0 / dh.sqrt(),
        }
    }

    /// Checks every field.
    ///
    /// # Errors
    /// A zero size, a width not divisible by the heads, an odd head width, a vocabulary other
    /// than 256.
    pub fn validate(&self) -> Result<()> {
        ensure(self.vocab == 256, "vocab", self.vocab, "256 (bytes)")?;
        ensure(self.layers >= 1, "layers", self.layers, ">= 1")?;
        ensure(self.heads >= 1, "heads", self.heads, ">= 1")?;
        ensure(
            self.d_model % self.heads == 0 && self.head_dim() % 2 == 0 && self.d_model > 0,
            "d_model",
            self.d_model,
            &format!("a multiple of 2 x heads = {}", 2 * self.heads),
        )?;
        ensure(self.d_ff >= 1, "d_ff", self.d_ff, ">= 1")?;
        ensure(self.train_len >= 2, "train_len", self.train_len, ">= 2")?;
        ensure(
            self.max_positions >= 1,
            "max_positions",
            self.max_positions,
            ">= 1",
        )?;
        ensure(
            self.shaw_max_relative >= 1,
            "shaw_max_relative",
            self.shaw_max_relative,
            ">= 1",
        )?;
        ensure(
            self.fire_hidden >= 1,
            "fire_hidden",
            self.fire_hidden,
            ">= 1",
        )?;
        self.rope_scaling.validate()
    }
}

impl fmt::Display for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} | {} layers, d={}, {} heads, ffn {}, train length {}",
            self.scheme, self.layers, self.d_model, self.heads, self.d_ff, self.train_len
        )
    }
}
