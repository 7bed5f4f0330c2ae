use serde_json::json;

use super::*;

fn read(v: Value) -> Result<ModelRope> {
    ModelRope::from_json(&v)
}

fn error(v: Value) -> String {
    read(v).unwrap_err().to_string()
}

fn llama(extra: Value) -> Value {
    let mut v = json!({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
                       "max_position_embeddings": 4096, "rope_theta": 10000.0});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn a_v4_block_reads_as_its_v5_form() {
    let v4 = read(llama(
        json!({"rope_scaling": {"type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 1024}}),
    ))
    .unwrap();
    let mut v5 = llama(
        json!({"rope_parameters": {"rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 1024, "rope_theta": 10000.0}}),
    );
    v5.as_object_mut().unwrap().remove("rope_theta");
    assert_eq!(v4, read(v5).unwrap());
    assert_eq!(
        (v4.head_dim, v4.rotary_dim, v4.layout),
        (64, 64, RopeLayout::Half)
    );
    let s = v4.summary(None, None).unwrap();
    assert_eq!((s.original_len, s.extended_len), (1024, 4096));
    assert!((s.logit_multiplier - (0.1 * 4f64.ln() + 1.0).powi(2)).abs() < 1e-12);
}

#[test]
fn unknown_keys_are_errors_naming_them() {
    let e = error(llama(json!({"rope_thetta": 5.0})));
    assert!(e.contains("unknown key `rope_thetta`"), "{e}");
    let e = error(llama(
        json!({"rope_scaling": {"rope_type": "linear", "factr": 2.0}}),
    ));
    assert!(e.contains("`rope_scaling.factor`: missing"), "{e}");
    let e = error(llama(
        json!({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 3}}),
    ));
    assert!(e.contains("unknown key `rope_scaling.beta_fast`"), "{e}");
    let e = error(llama(
        json!({"rope_scaling": {"rope_type": "mrope", "factor": 2.0}}),
    ));
    assert!(e.contains("rope_type"), "{e}");
    let e =
        error(json!({"model_type": "not_a_model", "head_dim": 64, "max_position_embeddings": 8}));
    assert!(e.contains("`model_type` = \"not_a_model\""), "{e}");
    // a key that does not touch RoPE is read past
    assert!(read(llama(
        json!({"vocab_size": 32000, "num_key_value_heads": 8})
    ))
    .is_ok());
    assert!(!error(json!([1, 2])).is_empty());
}

#[test]
fn keys_that_disagree_are_errors_naming_them() {
    let e = error(llama(
        json!({"rope_scaling": {"rope_type": "yarn", "type": "linear", "factor": 2.0}}),
    ));
    assert!(
        e.contains("`rope_scaling.rope_type` = yarn disagrees with `rope_scaling.type` = linear"),
        "{e}"
    );
    let e = error(llama(json!({"rotary_emb_base": 500.0})));
    assert!(
        e.contains("`rope_theta` = 10000 disagrees with `rotary_emb_base` = 500"),
        "{e}"
    );
    let e = error(llama(
        json!({"partial_rotary_factor": 0.5, "rotary_pct": 0.25}),
    ));
    assert!(e.contains("rotary_pct"), "{e}");
    let e = error(llama(
        json!({"partial_rotary_factor": 0.5, "rotary_dim": 16}),
    ));
    assert!(e.contains("`rotary_dim` = 16 disagrees"), "{e}");
    let e = error(llama(
        json!({"rope_parameters": {"rope_type": "default", "rope_theta": 5.0}}),
    ));
    assert!(e.contains("rope_parameters.rope_theta"), "{e}");
    let e = error(llama(
        json!({"rope_scaling": {"rope_type": "linear", "factor": 2.0},
                               "rope_parameters": {"rope_type": "linear", "factor": 3.0}}),
    ));
    assert!(
        e.contains("`rope_scaling` and `rope_parameters` disagree"),
        "{e}"
    );
    let e = error(
        json!({"model_type": "deepseek_v3", "head_dim": 128, "qk_rope_head_dim": 64,
                         "max_position_embeddings": 8}),
    );
    assert!(e.contains("qk_rope_head_dim"), "{e}");
    let e = error(
        json!({"model_type": "gpt_oss", "initial_context_length": 2048,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}}),
    );
    assert!(e.contains("initial_context_length"), "{e}");
}

#[test]
fn missing_keys_take_the_model_types_defaults_and_say_so() {
    // GLM rotates half of each head (interleaved), GPT-NeoX a quarter
    let glm = read(json!({"model_type": "glm4", "max_position_embeddings": 8192})).unwrap();
    assert_eq!(
        (glm.head_dim, glm.rotary_dim, glm.layout),
        (128, 64, RopeLayout::Interleaved)
    );
    assert!(
        glm.defaults
            .iter()
            .any(|d| d.starts_with("partial_rotary_factor = 0.5")),
        "{:?}",
        glm.defaults
    );
    let neox =
        read(json!({"model_type": "gpt_neox", "hidden_size": 768, "num_attention_heads": 12}))
            .unwrap();
    assert_eq!((neox.head_dim, neox.rotary_dim), (64, 16));
    assert!(neox
        .defaults
        .iter()
        .any(|d| d.starts_with("max_position_embeddings = 2048")));
    // MistralConfig, MinistralConfig and MixtralConfig: 4096 * 32; PersimmonConfig: base 25000
    for model_type in ["mistral", "ministral", "mixtral"] {
        let m = read(json!({"model_type": model_type, "hidden_size": 256,
                            "num_attention_heads": 4, "rope_theta": 1e6}))
        .unwrap();
        assert!(
            m.defaults
                .iter()
                .any(|d| d.starts_with("max_position_embeddings = 131072")),
            "{model_type}: {:?}",
            m.defaults
        );
    }
    let persimmon = read(json!({"model_type": "persimmon", "hidden_size": 256,
                                "num_attention_heads": 4, "max_position_embeddings": 16384}))
    .unwrap();
    assert!(
        persimmon
            .defaults
            .iter()
            .any(|d| d.starts_with("rope_theta = 25000")),
        "{:?}",
        persimmon.defaults
    );
    // Phi-3's old name for LongRoPE
    let phi = read(
        json!({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 2,
        "max_position_embeddings": 8192, "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su", "short_factor": [], "long_factor": []}}),
    );
    assert!(phi.unwrap_err().to_string().contains("short_factor"));
    let phi = read(
        json!({"model_type": "phi3", "hidden_size": 8, "num_attention_heads": 2,
        "max_position_embeddings": 8192, "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su", "short_factor": [1.0, 1.0], "long_factor": [2.0, 4.0]}}),
    )
    .unwrap();
    assert_eq!(phi.layers[0].rope_type, "longrope");
    // factor = 8192 / 4096: a = sqrt(1 + ln 2 / ln 4096)
    let a = phi.layers[0].attention_factor();
    assert!((a - (1.0 + 2f64.ln() / 4096f64.ln()).sqrt()).abs() < 1e-15);
}

#[test]
fn gemma3_reads_rope_per_layer_type_and_its_softmax_scalar() {
    let v4 = read(
        json!({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
        "head_dim": 128, "query_pre_attn_scalar": 168, "rope_local_base_freq": 5000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}}}),
    )
    .unwrap();
    assert_eq!(v4.layer_types(), ["full_attention", "sliding_attention"]);
    let (full, sliding) = (
        v4.layer(None).unwrap(),
        v4.layer(Some("sliding_attention")).unwrap(),
    );
    assert_eq!((full.base, full.rope_type.as_str()), (1e6, "linear"));
    assert_eq!(
        (sliding.base, sliding.rope_type.as_str()),
        (5000.0, "default")
    );
    assert!((full.softmax_multiplier - (128f64 / 168.0).sqrt()).abs() < 1e-15);
    assert!(v4.layer(Some("chunked")).is_err());
    let e = error(
        json!({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"},
                         "rope_theta": 1.0}),
    );
    assert!(e.contains("unknown key `rope_theta`"), "{e}");
    let e = error(llama(json!({"query_pre_attn_scalar": 64})));
    assert!(e.contains("query_pre_attn_scalar"), "{e}");
}

#[test]
fn v5_blocks_nested_by_layer_type_need_those_layer_types() {
    let nested = json!({"full_attention": {"rope_type": "default", "rope_theta": 1e4}});
    let e = error(llama(json!({"rope_parameters": nested})));
    assert!(
        e.contains("`rope_parameters.full_attention`") && e.contains("no layer_types"),
        "{e}"
    );
    let ok = read(llama(
        json!({"layer_types": ["full_attention", "full_attention"],
        "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0}}}),
    ))
    .unwrap();
    assert_eq!(ok.layer_types(), ["full_attention"]);
    assert_eq!(ok.layer(None).unwrap().base, 1e4);
}
