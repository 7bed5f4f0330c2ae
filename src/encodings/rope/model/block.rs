//! One RoPE block of a configuration (`rope_scaling`, `rope_parameters`, or one layer type of
//! a nested `rope_parameters`): its `rope_type` and the keys that type reads, nothing else.

use serde_json::{Map, Value};

use super::family::Family;
use super::keys::{agree, Keys, Read};

/// One RoPE block (`rope_scaling`, `rope_parameters` or one of its layer types), read.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Block {
    pub(super) path: String,
    pub(super) rope_type: String,
    pub(super) theta: Option<f64>,
    pub(super) partial: Option<f64>,
    pub(super) factor: Option<f64>,
    pub(super) original: Option<usize>,
    pub(super) max_position: Option<usize>,
    pub(super) attention_factor: Option<f64>,
    pub(super) beta_fast: Option<f64>,
    pub(super) beta_slow: Option<f64>,
    pub(super) mscale: Option<f64>,
    pub(super) mscale_all_dim: Option<f64>,
    pub(super) truncate: Option<bool>,
    pub(super) low_freq_factor: Option<f64>,
    pub(super) high_freq_factor: Option<f64>,
    pub(super) short_factor: Option<Vec<f64>>,
    pub(super) long_factor: Option<Vec<f64>>,
    pub(super) llama4_beta: Option<f64>,
}

impl Block {
    /// A block of `rope_type` at `path` with no parameter given.
    pub(super) fn plain(path: &str, rope_type: String) -> Self {
        Self {
            path: path.to_string(),
            rope_type,
            theta: None,
            partial: None,
            factor: None,
            original: None,
            max_position: None,
            attention_factor: None,
            beta_fast: None,
            beta_slow: None,
            mscale: None,
            mscale_all_dim: None,
            truncate: None,
            low_freq_factor: None,
            high_freq_factor: None,
            short_factor: None,
            long_factor: None,
            llama4_beta: None,
        }
    }
}

const ROPE_TYPES: &str = "default, linear, dynamic, yarn, longrope, llama3";

fn read_block(map: &Map<String, Value>, at: &str, family: Option<&Family>) -> Read<Block> {
    let mut k = Keys::new(map, at);
    let named = agree(&[
        (k.path("rope_type"), k.str("rope_type")?),
        (k.path("type"), k.str("type")?),
    ])?
    .unwrap_or("default");
    let aliases = family.map_or(&[][..], |f| f.rope_type_aliases);
    let rope_type = aliases
        .iter()
        .find(|(from, _)| *from == named)
        .map_or(named, |(_, to)| *to)
        .to_string();
    let mut b = Block::plain(at, rope_type);
    b.theta = k.f64("rope_theta")?;
    b.partial = k.f64("partial_rotary_factor")?;
    let required = |k: &Keys, key: &str, present: bool, ty: &str| -> Read<()> {
        if present || k.map.contains_key(key) {
            Ok(())
        } else {
            Err(format!(
                "`{}`: missing (a `{ty}` block needs it)",
                k.path(key)
            ))
        }
    };
    let ty = b.rope_type.clone();
    match ty.as_str() {
        "default" => {}
        "linear" | "dynamic" => {
            b.factor = k.f64("factor")?;
            required(&k, "factor", b.factor.is_some(), &ty)?;
        }
        "yarn" => {
            b.factor = k.f64("factor")?;
            // HF requires the key; its value may be null (then max / original)
            required(&k, "factor", b.factor.is_some(), &ty)?;
            b.original = k.usize("original_max_position_embeddings")?;
            b.attention_factor = k.f64("attention_factor")?;
            b.beta_fast = k.f64("beta_fast")?;
            b.beta_slow = k.f64("beta_slow")?;
            b.mscale = k.f64("mscale")?;
            b.mscale_all_dim = k.f64("mscale_all_dim")?;
            b.truncate = k.bool("truncate")?;
            if family.is_some_and(|f| f.floor_log_temperature) {
                b.llama4_beta = k.f64("llama_4_scaling_beta")?;
                b.max_position = k.usize("max_position_embeddings")?;
            }
        }
        "longrope" => {
            b.short_factor = k.f64_list("short_factor")?;
            b.long_factor = k.f64_list("long_factor")?;
            required(&k, "short_factor", b.short_factor.is_some(), &ty)?;
            required(&k, "long_factor", b.long_factor.is_some(), &ty)?;
            b.original = k.usize("original_max_position_embeddings")?;
            b.attention_factor = k.f64("attention_factor")?;
            b.factor = k.f64("factor")?;
        }
        "llama3" => {
            b.factor = k.f64("factor")?;
            b.original = k.usize("original_max_position_embeddings")?;
            b.low_freq_factor = k.f64("low_freq_factor")?;
            b.high_freq_factor = k.f64("high_freq_factor")?;
            for (key, v) in [
                ("factor", b.factor),
                ("low_freq_factor", b.low_freq_factor),
                ("high_freq_factor", b.high_freq_factor),
            ] {
                required(&k, key, v.is_some(), &ty)?;
            }
        }
        other => {
            return Err(format!(
                "`{}` = \"{other}\": not a rope_type this reader computes ({ROPE_TYPES})",
                k.path("rope_type")
            ))
        }
    }
    k.finish(&[], &format!("not a key of a `{ty}` block"))?;
    Ok(b)
}

/// The blocks of a configuration: one for all layers, or one per layer type.
pub(super) fn read_blocks(
    map: &Map<String, Value>,
    at: &str,
    layer_names: &[String],
    family: Option<&Family>,
) -> Read<Vec<(Option<String>, Block)>> {
    let nested = map.values().any(Value::is_object);
    if !nested {
        return Ok(vec![(None, read_block(map, at, family)?)]);
    }
    let mut blocks = Vec::new();
    for (name, v) in map {
        let path = format!("{at}.{name}");
        if !layer_names.contains(name) {
            let known = if layer_names.is_empty() {
                "it lists no layer_types".to_string()
            } else {
                format!("it has {}", layer_names.join(", "))
            };
            return Err(format!(
                "`{path}`: a nested RoPE block for a layer type the configuration does not have \
                 ({known})"
            ));
        }
        match v {
            Value::Object(m) => blocks.push((Some(name.clone()), read_block(m, &path, family)?)),
            Value::Null => {}
            other => return Err(format!("`{path}` = {other}: expected an object")),
        }
    }
    Ok(blocks)
}
