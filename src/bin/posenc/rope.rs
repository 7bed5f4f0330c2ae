//! `posenc rope --config config.json`: what a model's RoPE configuration means
//! ([`ModelRope`]): the frequencies, each pair's wavelength against the original and the
//! extended length, the cos/sin scale, the softmax multiplier and the logit multiplier, as text
//! or (`--json`) as one JSON object.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Value};

use posenc::encodings::rope::{ModelRope, RopeLayout, RopeSummary};

use crate::dump::f32_json;

/// `posenc rope`'s arguments.
#[derive(Args)]
pub struct RopeArgs {
    /// A model's config.json, or the part of it about RoPE.
    #[arg(long)]
    pub config: PathBuf,
    /// The layer type to show (e.g. sliding_attention); default: full attention.
    #[arg(long)]
    pub layer_type: Option<String>,
    /// Frequencies for a forward pass over this many positions (dynamic NTK and LongRoPE
    /// depend on it); default: as initialised.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `posenc rope`.
pub fn run(args: &RopeArgs) -> Result<String, String> {
    let model = ModelRope::read(&args.config).map_err(|e| e.to_string())?;
    let s = model
        .summary(args.layer_type.as_deref(), args.seq_len)
        .map_err(|e| e.to_string())?;
    Ok(if args.json {
        to_json(&model, &s).to_string()
    } else {
        to_text(&args.config, &model, &s)
    })
}

fn layout_name(layout: RopeLayout) -> &'static str {
    match layout {
        RopeLayout::Interleaved => "interleaved pairs (x_2i, x_2i+1)",
        RopeLayout::Half => "half pairs (x_i, x_i+d/2)",
    }
}

fn to_json(model: &ModelRope, s: &RopeSummary) -> Value {
    let over = |len: usize| -> Vec<f64> { s.wavelength.iter().map(|w| w / len as f64).collect() };
    json!({
        "model_type": model.model_type,
        "layout": match model.layout { RopeLayout::Interleaved => "interleaved", RopeLayout::Half => "half" },
        "head_dim": model.head_dim,
        "rotary_dim": model.rotary_dim,
        "qk_width": model.qk_width,
        "max_position_embeddings": model.max_position,
        "layer_types": model.layer_types(),
        "layer_type": s.layer_type,
        "rope_type": s.rope_type,
        "rope_theta": s.rope_theta,
        "seq_len": s.seq_len,
        "inv_freq": s.inv_freq.iter().map(|&x| f32_json(x)).collect::<Vec<_>>(),
        "wavelength": s.wavelength,
        "original_len": s.original_len,
        "extended_len": s.extended_len,
        "wavelength_over_original": over(s.original_len),
        "wavelength_over_extended": over(s.extended_len),
        "boundaries": s.boundaries.iter().map(|(n, w)| json!({"name": n, "wavelength": w})).collect::<Vec<_>>(),
        "attention_factor": s.attention_factor,
        "softmax_multiplier": s.softmax_multiplier,
        "logit_multiplier": s.logit_multiplier,
        "temperature": model.temperature,
        "defaults": model.defaults,
    })
}

fn to_text(path: &std::path::Path, model: &ModelRope, s: &RopeSummary) -> String {
    let mut out = String::new();
    let d = model.qk_width;
    let rotated = if model.rotary_dim == d {
        "all channels".to_string()
    } else {
        format!("{} of the {d} channels of q.k", model.rotary_dim)
    };
    let _ = writeln!(out, "configuration   {}", path.display());
    let _ = writeln!(
        out,
        "model           {}, {}; rotary_dim {} ({rotated})",
        model
            .model_type
            .as_deref()
            .unwrap_or("(no model_type: generic)"),
        layout_name(model.layout),
        model.rotary_dim,
    );
    let _ = writeln!(
        out,
        "layer type      {} (of: {})",
        s.layer_type.as_deref().unwrap_or("all"),
        model.layer_types().join(", ")
    );
    let at = s.seq_len.map_or("as initialised".to_string(), |l| {
        format!("for {l} positions")
    });
    let _ = writeln!(
        out,
        "rope            {}, rope_theta {}, {at}",
        s.rope_type, s.rope_theta
    );
    let _ = writeln!(
        out,
        "lengths         original {}, extended {}",
        s.original_len, s.extended_len
    );
    let _ = writeln!(out, "cos/sin scale   a = {:.6}", s.attention_factor);
    let _ = writeln!(
        out,
        "softmax scale   mu = {:.6} times 1/sqrt({d})",
        s.softmax_multiplier
    );
    let _ = writeln!(
        out,
        "logit scale     a^2 mu = {:.6} times q.k/sqrt({d}) on rotated channels",
        s.logit_multiplier
    );
    if let Some(t) = model.temperature {
        let last = model.max_position.saturating_sub(1);
        let _ = writeln!(
            out,
            "temperature     queries times {}: {:.6} at position {last}",
            t.name(),
            t.scale(last)
        );
    }
    for (name, w) in &s.boundaries {
        let _ = writeln!(out, "boundary        wavelength {name} = {w:.1}");
    }
    for default in &model.defaults {
        let _ = writeln!(out, "default         {default}");
    }
    let _ = writeln!(
        out,
        "{:>5} {:>14} {:>14} {:>12} {:>12}",
        "pair", "inv_freq", "wavelength", "/original", "/extended"
    );
    for (i, (&theta, &w)) in s.inv_freq.iter().zip(&s.wavelength).enumerate() {
        let _ = writeln!(
            out,
            "{i:>5} {theta:>14.6e} {w:>14.1} {:>12.3e} {:>12.3e}",
            w / s.original_len as f64,
            w / s.extended_len as f64
        );
    }
    out.trim_end().to_string()
}
