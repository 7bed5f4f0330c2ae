//! Reading a configuration's JSON into [`ModelRope`]: every key is either read, known not to
//! touch RoPE ([`NOT_ROPE_KEYS`]), or an error; aliases that say the same thing twice must
//! agree. Errors are one line naming the key, with its path (`text_config.rope_scaling.factor`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::family::{family_of, known_model_types, Family, Softmax, NOT_ROPE_KEYS, WRAPPERS};
use super::{LayerRope, LayerScaling, ModelRope};
use crate::encodings::rope::scaling::{yarn_mscale, YARN_BETA_FAST, YARN_BETA_SLOW};
use crate::encodings::rope::{LongRope, RopeConfig, RopeLayout, RopeScaling};
use crate::encodings::temperature::Temperature;

type Read<T> = std::result::Result<T, String>;

/// The keys of one JSON object, marked as they are read.
struct Keys<'a> {
    map: &'a Map<String, Value>,
    at: String,
    used: BTreeSet<&'a str>,
}

impl<'a> Keys<'a> {
    fn new(map: &'a Map<String, Value>, at: &str) -> Self {
        Self {
            map,
            at: at.to_string(),
            used: BTreeSet::new(),
        }
    }

    fn path(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    /// The value of `key`, marked as read; JSON `null` reads as absent.
    fn get(&mut self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.map.get_key_value(key)?;
        self.used.insert(k.as_str());
        (!v.is_null()).then_some(v)
    }

    fn typed<T>(
        &mut self,
        key: &str,
        what: &str,
        f: impl Fn(&'a Value) -> Option<T>,
    ) -> Read<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => f(v)
                .map(Some)
                .ok_or_else(|| format!("`{}` = {v}: expected {what}", self.path(key))),
        }
    }

    fn f64(&mut self, key: &str) -> Read<Option<f64>> {
        self.typed(key, "a number", Value::as_f64)
    }

    fn usize(&mut self, key: &str) -> Read<Option<usize>> {
        self.typed(key, "a whole number >= 0", |v| {
            v.as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|x| x.fract() == 0.0 && *x >= 0.0)
                        .map(|x| x as u64)
                })
                .and_then(|x| usize::try_from(x).ok())
        })
    }

    fn bool(&mut self, key: &str) -> Read<Option<bool>> {
        self.typed(key, "true or false", Value::as_bool)
    }

    fn str(&mut self, key: &str) -> Read<Option<&'a str>> {
        self.typed(key, "a string", Value::as_str)
    }

    fn object(&mut self, key: &str) -> Read<Option<&'a Map<String, Value>>> {
        self.typed(key, "an object", Value::as_object)
    }

    fn f64_list(&mut self, key: &str) -> Read<Option<Vec<f64>>> {
        self.typed(key, "a list of numbers", |v| {
            v.as_array()?.iter().map(Value::as_f64).collect()
        })
    }

    fn str_list(&mut self, key: &str) -> Read<Option<Vec<String>>> {
        self.typed(key, "a list of strings", |v| {
            v.as_array()?
                .iter()
                .map(|x| x.as_str().map(String::from))
                .collect()
        })
    }

    /// Fails on the first key neither read nor in `known`.
    fn finish(&self, known: &[&str], what: &str) -> Read<()> {
        match self
            .map
            .keys()
            .find(|k| !self.used.contains(k.as_str()) && !known.contains(&k.as_str()))
        {
            Some(k) => Err(format!("unknown key `{}`: {what}", self.path(k))),
            None => Ok(()),
        }
    }
}

/// The first of `values` that is given; two given values that differ are an error naming the
/// first key.
fn agree<T: PartialEq + std::fmt::Display + Copy>(
    values: &[(String, Option<T>)],
) -> Read<Option<T>> {
    let given: Vec<(&String, T)> = values
        .iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    if let Some(((k1, v1), rest)) = given.split_first() {
        if let Some((k2, v2)) = rest.iter().find(|(_, v)| v != v1) {
            return Err(format!("`{k1}` = {v1} disagrees with `{k2}` = {v2}"));
        }
        return Ok(Some(*v1));
    }
    Ok(None)
}

/// One RoPE block (`rope_scaling`, `rope_parameters` or one of its layer types), read.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    path: String,
    rope_type: String,
    theta: Option<f64>,
    partial: Option<f64>,
    factor: Option<f64>,
    original: Option<usize>,
    max_position: Option<usize>,
    attention_factor: Option<f64>,
    beta_fast: Option<f64>,
    beta_slow: Option<f64>,
    mscale: Option<f64>,
    mscale_all_dim: Option<f64>,
    truncate: Option<bool>,
    low_freq_factor: Option<f64>,
    high_freq_factor: Option<f64>,
    short_factor: Option<Vec<f64>>,
    long_factor: Option<Vec<f64>>,
    llama4_beta: Option<f64>,
}

impl Block {
    /// A block of `rope_type` at `path` with no parameter given.
    fn plain(path: &str, rope_type: String) -> Self {
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
fn read_blocks(
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
            return Err(format!(
                "`{path}`: a nested RoPE block for a layer type the configuration does not have \
                 ({})",
                layer_names.join(", ")
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
        let rope = k.usize("qk_rope_head_dim")?.unwrap_or(64);
        let nope = k.usize("qk_nope_head_dim")?.unwrap_or(128);
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
                ("default", _) | (_, None) => 1.0,
                (_, Some(m)) if m == 0.0 => 1.0,
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
