//! Reading a configuration's JSON into [`ModelRope`]: every key is either read, known not to
//! touch RoPE ([`NOT_ROPE_KEYS`]), or an error; aliases that say the same thing twice must
//! agree. Errors are one line naming the key, with its path (`text_config.rope_scaling.factor`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::block::{read_blocks, Block};
use super::family::{family_of, known_model_types, Softmax, NOT_ROPE_KEYS, WRAPPERS};
use super::keys::{agree, Keys, Read};
use super::{LayerRope, LayerScaling, ModelRope};
use crate::encodings::rope::scaling::{yarn_mscale, YARN_BETA_FAST, YARN_BETA_SLOW};
use crate::encodings::rope::{LongRope, RopeConfig, RopeLayout, RopeScaling};
use crate::encodings::temperature::Temperature;

/// `text_config` of a multimodal wrapper, or the model itself.
pub(super) fn read(value: &Value) -> Read<ModelRope> {
    let map = value
        .as_object()
        .ok_or_else(|| "a configuration is a JSON object".to_string())?;
    if let Some(text) = map.get("text_config") {
        let mut k = Keys::new(map, "");
        let wrapper = k.str("model_type")?;
        let text_type = match wrapper {
            Some(w) => Some(
                WRAPPERS
                    .iter()
                    .find(|(name, _)| *name == w)
                    .map(|(_, t)| *t)
                    .ok_or_else(|| {
                        format!("`model_type` = \"{w}\" with a `text_config`: not a wrapper this reader knows (gemma3, mistral3)")
                    })?,
            ),
            None => None,
        };
        k.get("text_config");
        k.finish(
            NOT_ROPE_KEYS,
            "RoPE keys of a wrapper belong in `text_config`",
        )?;
        let text = text
            .as_object()
            .ok_or_else(|| "`text_config`: expected an object".to_string())?;
        return read_model(text, "text_config", text_type);
    }
    read_model(map, "", None)
}

fn read_model(map: &Map<String, Value>, at: &str, inherited_type: Option<&str>) -> Read<ModelRope> {
    let mut k = Keys::new(map, at);
    let model_type = k.str("model_type")?.or(inherited_type);
    let family = match model_type {
        Some(t) => Some(family_of(t).ok_or_else(|| {
            format!(
                "`{}` = \"{t}\": not a model type this reader knows ({}); its layout and defaults \
                 would be guesses",
                k.path("model_type"),
                known_model_types()
            )
        })?),
        None => None,
    };
    let mut defaults = Vec::new();
    let mut default = |key: &str, value: String| {
        defaults.push(format!(
            "{key} = {value} (default of model_type {})",
            model_type.unwrap_or("-")
        ));
    };
    let layer_types = k.str_list("layer_types")?;
    k.usize("sliding_window_pattern")?;
    let v4 = k.object("rope_scaling")?;
    let v5 = k.object("rope_parameters")?;
    if let (Some(a), Some(b)) = (v4, v5) {
        if a != b {
            return Err(format!(
                "`{}` and `{}` disagree: give one (v4 or v5)",
                k.path("rope_scaling"),
                k.path("rope_parameters")
            ));
        }
    }
    let per_layer = family.is_some_and(|f| f.local_theta.is_some());
    let layer_names: Vec<String> = match (&layer_types, per_layer) {
        (Some(t), _) => t
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        (None, true) => vec!["full_attention".into(), "sliding_attention".into()],
        (None, false) => Vec::new(),
    };
    let block_at = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    let mut blocks = match (v4, v5) {
        (Some(m), _) => read_blocks(m, &block_at("rope_scaling"), &layer_names, family)?,
        (None, Some(m)) => read_blocks(m, &block_at("rope_parameters"), &layer_names, family)?,
        (None, None) => Vec::new(),
    };
    if per_layer {
        if blocks.iter().all(|(name, _)| name.is_none()) {
            // v4 (Gemma 3): the one block is the full-attention layers'
            let full = blocks.pop().map(|(_, b)| b);
            blocks.extend(full.map(|b| (Some("full_attention".to_string()), b)));
        }
        // a layer type without a block is plain RoPE (Gemma3TextConfig fills it in)
        for name in ["full_attention", "sliding_attention"] {
            if !blocks.iter().any(|(n, _)| n.as_deref() == Some(name)) {
                let path = block_at(&format!("rope_parameters.{name}"));
                blocks.push((Some(name.into()), Block::plain(&path, "default".into())));
            }
        }
        blocks.sort_by(|a, b| a.0.cmp(&b.0));
    } else if blocks.is_empty() {
        blocks.push((
            None,
            Block::plain(&block_at("rope_parameters"), "default".into()),
        ));
    }
    let theta_top = agree(&[
        (k.path("rope_theta"), k.f64("rope_theta")?),
        (k.path("rotary_emb_base"), k.f64("rotary_emb_base")?),
    ])?;
    let local_theta = k.f64("rope_local_base_freq")?;
    if local_theta.is_some() && !per_layer {
        return Err(format!(
            "`{}`: read only by models with RoPE per layer type (gemma3_text)",
            k.path("rope_local_base_freq")
        ));
    }
    let max_position = match k.usize("max_position_embeddings")? {
        Some(m) => m,
        None => {
            let f = family
                .ok_or_else(|| format!("`{}`: missing", k.path("max_position_embeddings")))?;
            default("max_position_embeddings", f.max_position.to_string());
            f.max_position
        }
    };
    let top_original = k.usize("original_max_position_embeddings")?;
    let initial_context = k.usize("initial_context_length")?;
    // head widths
    let hidden = k.usize("hidden_size")?;
    let heads = k.usize("num_attention_heads")?;
    let head_key = k.usize("head_dim")?;
    let (head_dim, qk_width, deepseek) = if family.is_some_and(|f| f.deepseek_heads) {
        // DeepseekV2Config / V3Config defaults
        let mut width = |key: &str, d: usize| -> Read<usize> {
            Ok(k.usize(key)?.unwrap_or_else(|| {
                default(key, d.to_string());
                d
            }))
        };
        let (rope, nope) = (
            width("qk_rope_head_dim", 64)?,
            width("qk_nope_head_dim", 128)?,
        );
        agree(&[
            (k.path("qk_rope_head_dim"), Some(rope)),
            (k.path("head_dim"), head_key),
        ])?;
        (rope, rope + nope, true)
    } else {
        let head = match (head_key, family.and_then(|f| f.head_dim), hidden, heads) {
            (Some(h), ..) => h,
            (None, Some(h), ..) => {
                default("head_dim", h.to_string());
                h
            }
            (None, None, Some(d), Some(n)) if n > 0 && d % n == 0 => d / n,
            _ => {
                return Err(format!(
                    "`{}`: missing (give head_dim, or hidden_size and num_attention_heads with \
                     one dividing the other)",
                    k.path("head_dim")
                ))
            }
        };
        (head, head, false)
    };
    // rotary width
    let prf_top = agree(&[
        (
            k.path("partial_rotary_factor"),
            k.f64("partial_rotary_factor")?,
        ),
        (k.path("rotary_pct"), k.f64("rotary_pct")?),
    ])?;
    let mut partial_sources = vec![(k.path("partial_rotary_factor"), prf_top)];
    partial_sources.extend(
        blocks
            .iter()
            .map(|(_, b)| (format!("{}.partial_rotary_factor", b.path), b.partial)),
    );
    let prf = agree(&partial_sources)?;
    let rotary_key = k.usize("rotary_dim")?;
    let rotary_dim = if deepseek {
        if let Some(p) = prf.filter(|&p| p != 1.0) {
            return Err(format!(
                "`partial_rotary_factor` = {p}: DeepSeek rotates qk_rope_head_dim"
            ));
        }
        head_dim
    } else {
        let prf = prf.unwrap_or_else(|| {
            let p = family.map_or(1.0, |f| f.partial_rotary_factor);
            if rotary_key.is_none() && p != 1.0 {
                default("partial_rotary_factor", p.to_string());
            }
            p
        });
        // HF: int(head_dim * partial_rotary_factor)
        let from_factor = (head_dim as f64 * prf) as usize;
        match rotary_key {
            Some(r) if prf_top.is_some() && r != from_factor => {
                return Err(format!(
                    "`{}` = {r} disagrees with `partial_rotary_factor` x head_dim = {from_factor}",
                    k.path("rotary_dim")
                ))
            }
            Some(r) => r,
            None => from_factor,
        }
    };
    if rotary_dim < 2 || rotary_dim % 2 != 0 || rotary_dim > head_dim {
        return Err(format!(
            "rotary dimension {rotary_dim} (head_dim {head_dim}): expected an even number from 2 to head_dim"
        ));
    }
    // layout and softmax keys
    let interleave = k.bool("rope_interleave")?;
    let mut layout = family.map_or(RopeLayout::Half, |f| f.layout);
    if let Some(i) = interleave {
        if model_type != Some("deepseek_v3") {
            return Err(format!(
                "`{}`: read only by deepseek_v3",
                k.path("rope_interleave")
            ));
        }
        layout = if i {
            RopeLayout::Interleaved
        } else {
            RopeLayout::Half
        };
    }
    let qpas = k.f64("query_pre_attn_scalar")?;
    let softmax = family.map_or(Softmax::Plain, |f| f.softmax);
    let qpas = match (softmax, qpas) {
        (Softmax::QueryPreAttnScalar(_), Some(q)) => Some(q),
        (Softmax::QueryPreAttnScalar(d), None) => {
            default("query_pre_attn_scalar", d.to_string());
            Some(d)
        }
        (_, Some(_)) => {
            return Err(format!(
                "`{}`: read only by Gemma 2 and 3",
                k.path("query_pre_attn_scalar")
            ))
        }
        _ => None,
    };
    k.finish(
        NOT_ROPE_KEYS,
        "not a RoPE key this reader knows, nor a known key that does not touch RoPE",
    )?;

    let mut layers = Vec::new();
    let mut temperature = None;
    for (layer_type, b) in &blocks {
        let sliding = layer_type.as_deref() == Some("sliding_attention") && per_layer;
        let (top, top_key) = if sliding {
            (local_theta, k.path("rope_local_base_freq"))
        } else {
            (theta_top, k.path("rope_theta"))
        };
        let base = match agree(&[(format!("{}.rope_theta", b.path), b.theta), (top_key, top)])? {
            Some(t) => t,
            None => {
                let t = family.map_or(10_000.0, |f| {
                    if sliding {
                        f.local_theta.unwrap_or(f.theta)
                    } else {
                        f.theta
                    }
                });
                if model_type.is_some() {
                    default(
                        if sliding {
                            "rope_local_base_freq"
                        } else {
                            "rope_theta"
                        },
                        t.to_string(),
                    );
                }
                t
            }
        };
        agree(&[
            (
                format!("{}.max_position_embeddings", b.path),
                b.max_position,
            ),
            (k.path("max_position_embeddings"), Some(max_position)),
        ])?;
        let original = match agree(&[
            (k.path("original_max_position_embeddings"), top_original),
            (
                format!("{}.original_max_position_embeddings", b.path),
                b.original,
            ),
        ])? {
            Some(o) => o,
            None => max_position,
        };
        let scaling = layer_scaling(b, base, original, max_position, rotary_dim)?;
        if matches!(b.rope_type.as_str(), "yarn" | "llama3" | "longrope") {
            agree(&[
                (k.path("initial_context_length"), initial_context),
                (
                    format!("{}.original_max_position_embeddings", b.path),
                    Some(original),
                ),
            ])?;
        }
        let softmax_multiplier = match softmax {
            Softmax::Plain => 1.0,
            Softmax::QueryPreAttnScalar(_) => {
                (qk_width as f64 / qpas.unwrap_or(qk_width as f64)).sqrt()
            }
            Softmax::DeepSeekMscale => match (b.rope_type.as_str(), b.mscale_all_dim) {
                // HF: `if mscale_all_dim:` (missing or zero: no multiplier)
                ("default", _) | (_, None | Some(0.0)) => 1.0,
                (_, Some(m)) => {
                    let s =
                        yarn_mscale(b.factor.unwrap_or(max_position as f64 / original as f64), m);
                    s * s
                }
            },
        };
        if let Some(beta) = b.llama4_beta {
            let t = Temperature::ministral3(beta, original);
            t.validate()
                .map_err(|e| format!("`{}.llama_4_scaling_beta`: {e}", b.path))?;
            temperature = Some(t);
        }
        layers.push(LayerRope {
            layer_type: layer_type.clone(),
            rope_type: b.rope_type.clone(),
            base,
            scaling,
            softmax_multiplier,
        });
    }
    Ok(ModelRope {
        model_type: model_type.map(String::from),
        layout,
        head_dim,
        rotary_dim,
        qk_width,
        max_position,
        layers,
        temperature,
        defaults,
    })
}

/// The crate's scaling of a block, validated (errors name the block's keys).
fn layer_scaling(
    b: &Block,
    base: f64,
    original: usize,
    max_position: usize,
    rotary_dim: usize,
) -> Read<LayerScaling> {
    let implicit = max_position as f64 / original.max(1) as f64;
    let factor = b.factor.unwrap_or(implicit);
    let scaling = match b.rope_type.as_str() {
        "longrope" => {
            let l = LongRope {
                short_factor: b.short_factor.clone().unwrap_or_default(),
                long_factor: b.long_factor.clone().unwrap_or_default(),
                factor,
                original_max: original,
                attention_factor: b.attention_factor,
            };
            l.frequencies(rotary_dim, base, None)
                .map_err(|e| format!("`{}`: {e}", b.path))?;
            return Ok(LayerScaling::LongRope(l));
        }
        "linear" => RopeScaling::Linear { factor },
        "dynamic" => RopeScaling::Dynamic {
            factor,
            original_max: max_position,
        },
        "yarn" => RopeScaling::Yarn {
            factor,
            original_max: original,
            // HF: `get("beta_fast") or 32`: a missing or zero beta is the default
            beta_fast: b.beta_fast.filter(|&x| x != 0.0).unwrap_or(YARN_BETA_FAST),
            beta_slow: b.beta_slow.filter(|&x| x != 0.0).unwrap_or(YARN_BETA_SLOW),
            mscale: b.mscale,
            mscale_all_dim: b.mscale_all_dim,
            attention_factor: b.attention_factor,
            truncate: b.truncate.unwrap_or(true),
        },
        "llama3" => RopeScaling::Llama3 {
            factor,
            original_max: original,
            low_freq_factor: b.low_freq_factor.unwrap_or_default(),
            high_freq_factor: b.high_freq_factor.unwrap_or_default(),
        },
        _ => RopeScaling::None,
    };
    RopeConfig::with_scaling(rotary_dim, base, scaling)
        .map_err(|e| format!("`{}`: {e}", b.path))?;
    Ok(LayerScaling::Rope(scaling))
}
