//! What a configuration leaves to the model's code: for each `model_type` this reader knows,
//! the pair layout, the defaults the Hugging Face configuration class fills in for a missing
//! key (a GLM config without `partial_rotary_factor` rotates half of each head, a GPT-NeoX one
//! a quarter), and where the attention's softmax scale differs from $1/\sqrt{d}$. Each row was
//! read from the `configuration_*.py` and `modeling_*.py` files of transformers 5.23.

use super::super::RopeLayout;

/// How a model family scales the softmax beyond the plain $1/\sqrt{d}$ of the q·k width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Softmax {
    /// $1/\sqrt{d}$.
    Plain,
    /// DeepSeek-V2/V3 (`yarn_apply_mscale`): times $m^2$, $m = 0.1\,\mathtt{mscale\_all\_dim}
    /// \ln s + 1$, for any scaled `rope_type` with a non-zero `mscale_all_dim`.
    DeepSeekMscale,
    /// Gemma 2/3: $\mathtt{query\_pre\_attn\_scalar}^{-1/2}$ instead (default given).
    QueryPreAttnScalar(f64),
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Family {
    /// `model_type` values.
    pub names: &'static [&'static str],
    /// Pair layout of the model's rotation.
    pub layout: RopeLayout,
    /// `partial_rotary_factor` when the configuration has none.
    pub partial_rotary_factor: f64,
    /// `rope_theta` when the configuration has none (for every layer, or the full-attention
    /// layers of a family with `local_theta`).
    pub theta: f64,
    /// Per-layer RoPE (Gemma 3): the sliding layers' base when `rope_local_base_freq` is absent.
    pub local_theta: Option<f64>,
    /// `head_dim` when the configuration has none (`None`: hidden size / heads).
    pub head_dim: Option<usize>,
    /// `max_position_embeddings` when the configuration has none.
    pub max_position: usize,
    /// The softmax scale.
    pub softmax: Softmax,
    /// Old `rope_type` names the family's configuration class renames.
    pub rope_type_aliases: &'static [(&'static str, &'static str)],
    /// DeepSeek's q·k width: `qk_nope_head_dim + qk_rope_head_dim`, rotary dim `qk_rope_head_dim`.
    pub deepseek_heads: bool,
    /// Reads `llama_4_scaling_beta` (Ministral 3's position-dependent query scale).
    pub floor_log_temperature: bool,
}

const fn family(names: &'static [&'static str], max_position: usize) -> Family {
    Family {
        names,
        layout: RopeLayout::Half,
        partial_rotary_factor: 1.0,
        theta: 10_000.0,
        local_theta: None,
        head_dim: None,
        max_position,
        softmax: Softmax::Plain,
        rope_type_aliases: &[],
        deepseek_heads: false,
        floor_log_temperature: false,
    }
}

const fn partial(mut f: Family, factor: f64) -> Family {
    f.partial_rotary_factor = factor;
    f
}

const fn head(mut f: Family, head_dim: usize) -> Family {
    f.head_dim = Some(head_dim);
    f
}

const fn interleaved(mut f: Family) -> Family {
    f.layout = RopeLayout::Interleaved;
    f
}

const fn theta(mut f: Family, theta: f64) -> Family {
    f.theta = theta;
    f
}

const GEMMA_SCALAR: Softmax = Softmax::QueryPreAttnScalar(256.0);

const fn gemma(mut f: Family) -> Family {
    f.softmax = GEMMA_SCALAR;
    f
}

const fn deepseek(mut f: Family) -> Family {
    f.layout = RopeLayout::Interleaved;
    f.softmax = Softmax::DeepSeekMscale;
    f.deepseek_heads = true;
    f
}

/// The families, by `model_type`.
pub(crate) const FAMILIES: &[Family] = &[
    family(&["llama"], 2048),
    family(&["mistral", "ministral"], 131_072),
    theta(family(&["mixtral"], 131_072), 1_000_000.0),
    family(&["qwen2", "qwen2_moe", "qwen3_moe"], 32_768),
    head(family(&["qwen3"], 32_768), 128),
    family(&["olmo", "olmo2"], 2048),
    family(&["starcoder2"], 4096),
    head(family(&["gemma"], 8192), 256),
    gemma(head(family(&["gemma2"], 8192), 256)),
    {
        let mut f = gemma(head(family(&["gemma3_text"], 131_072), 256));
        f.theta = 1_000_000.0;
        f.local_theta = Some(10_000.0);
        f
    },
    {
        let mut f = family(&["phi3"], 4096);
        // Phi3Config: old LongRoPE names
        f.rope_type_aliases = &[("su", "longrope"), ("yarn", "longrope")];
        f
    },
    partial(family(&["phi"], 2048), 0.5),
    partial(family(&["gpt_neox"], 2048), 0.25),
    partial(family(&["stablelm"], 4096), 0.25),
    theta(partial(family(&["persimmon"], 16_384), 0.5), 25_000.0),
    partial(family(&["nemotron"], 4096), 0.5),
    deepseek(family(&["deepseek_v2"], 2048)),
    head(deepseek(family(&["deepseek_v3"], 4096)), 64),
    head(theta(family(&["gpt_oss"], 131_072), 150_000.0), 64),
    interleaved(head(partial(family(&["glm", "glm4"], 131_072), 0.5), 128)),
    partial(family(&["glm4_moe"], 131_072), 0.5),
    interleaved(theta(family(&["cohere"], 8192), 500_000.0)),
    {
        let mut f = head(family(&["ministral3"], 262_144), 128);
        f.floor_log_temperature = true;
        f
    },
];

/// Multimodal wrappers whose RoPE is in `text_config`, with the text model type they default to.
pub(crate) const WRAPPERS: &[(&str, &str)] = &[("gemma3", "gemma3_text"), ("mistral3", "mistral")];

/// The family of `model_type`.
pub(crate) fn family_of(model_type: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.names.contains(&model_type))
}

/// Every `model_type` this reader knows, for error messages.
pub(crate) fn known_model_types() -> String {
    let mut names: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|f| f.names.iter().copied())
        .collect();
    names.extend(WRAPPERS.iter().map(|w| w.0));
    names.sort_unstable();
    names.join(", ")
}

/// Keys of a configuration that do not change RoPE or the attention scale: read past without
/// a word. Any other key the reader does not use is an error.
pub(crate) const NOT_ROPE_KEYS: &[&str] = &[
    "architectures",
    "attention_bias",
    "attention_chunk_size",
    "attention_dropout",
    "attn_logit_softcapping",
    "auto_map",
    "aux_loss_alpha",
    "boi_token_index",
    "bos_token_id",
    "cache_implementation",
    "classifier_dropout",
    "dtype",
    "embd_pdrop",
    "eoi_token_index",
    "eos_token_id",
    "ep_size",
    "experts_per_token",
    "final_logit_softcapping",
    "first_k_dense_replace",
    "hidden_act",
    "hidden_activation",
    "hidden_dropout",
    "image_token_index",
    "initializer_range",
    "intermediate_size",
    "kv_lora_rank",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "max_window_layers",
    "mlp_bias",
    "mm_tokens_per_image",
    "moe_intermediate_size",
    "moe_layer_freq",
    "multimodal_projector_bias",
    "n_group",
    "n_routed_experts",
    "n_shared_experts",
    "norm_topk_prob",
    "num_experts",
    "num_experts_per_tok",
    "num_hidden_layers",
    "num_key_value_heads",
    "num_local_experts",
    "output_router_logits",
    "pad_token_id",
    "pretraining_tp",
    "projector_hidden_act",
    "q_lora_rank",
    "quantization_config",
    "resid_pdrop",
    "rms_norm_eps",
    "routed_scaling_factor",
    "router_aux_loss_coef",
    "scoring_func",
    "seq_aux",
    "sliding_window",
    "spatial_merge_size",
    "swiglu_limit",
    "tie_word_embeddings",
    "topk_group",
    "topk_method",
    "torch_dtype",
    "transformers_version",
    "use_bidirectional_attention",
    "use_cache",
    "use_parallel_residual",
    "use_sliding_window",
    "v_head_dim",
    "vision_config",
    "vision_feature_layer",
    "vocab_size",
];
