//! How a trained RoPE checkpoint is extended at inference ([`InferenceMethod`], the entries of
//! the sweep's `rope_inference` and the variants of their results rows): a scaling of its
//! frequencies ([`ScalingKind`]), dynamic YaRN as a key cache keeps it, ReRoPE or Leaky ReRoPE
//! ([`crate::encodings::rope::ReRope`], two passes merged at a window), Self-Extend
//! ([`crate::encodings::rope::SelfExtend`], the same two passes with grouped positions), or
//! none of them, each optionally with a query temperature
//! ([`crate::encodings::temperature::Temperature`]: log-$n$ or the floor-log form).
//!
//! Names: the scaling's own (`yarn`), `dynamic-yarn`, `rerope`, `leaky-rerope`, `self-extend`,
//! then `+log-n` or `+floor-log` after any of them (`yarn+log-n`, `yarn+floor-log`); `log-n`
//! and `floor-log` alone are plain RoPE's frequencies with that temperature.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::encodings::rope::ScalingKind;
use crate::encodings::temperature::Temperature;
use crate::error::{invalid, Error, Result};
use crate::named::Named;

/// What replaces RoPE's positions at inference, before the temperature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extension {
    /// The trained frequencies, unchanged (with a temperature only).
    Plain,
    /// A scaling of the frequencies, one for the whole input.
    Scaling(ScalingKind),
    /// Dynamic YaRN as an engine with a key cache runs it: position $m$ is rotated with YaRN at
    /// $s_m = \max(1, (m+1)/L)$, the factor of the step that wrote it to the cache, so a
    /// query and an older key are rotated with different frequencies.
    DynamicYarn,
    /// ReRoPE: relative positions clipped at the window $w$.
    ReRope,
    /// Leaky ReRoPE: beyond $w$, relative positions grow with slope $1/k$.
    LeakyReRope,
    /// Self-Extend: beyond $w$, positions grouped by $G$.
    SelfExtend,
}

/// A factor on each query that depends on its position
/// ([`crate::encodings::temperature::Temperature`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TemperatureKind {
    /// None.
    #[default]
    None,
    /// Log-$n$: $\tau_m = \max(1, \ln(m+1) / \ln L)$.
    LogN,
    /// Floor-log: $\tau_m = 1 + \beta \ln(1 + \lfloor m / L \rfloor)$ (Ministral 3's form, the
    /// floor at the training length).
    FloorLog,
}

/// Floor-log's default $\beta$: 0.1, Llama 4's `attn_scale` and the `llama_4_scaling_beta` of
/// Ministral 3's configurations.
pub const DEFAULT_FLOOR_LOG_BETA: f64 = 0.1;

impl TemperatureKind {
    /// The temperature for a model trained at `train_len`: log-$n$ from `train_len`, or
    /// floor-log with $\beta$ = `floor_log_beta` and the floor at `train_len`, offset 0
    /// (Ministral 3's form: $\tau_m = 1 + \beta \ln(1 + \lfloor m / L \rfloor)$).
    pub fn at(self, train_len: usize, floor_log_beta: f64) -> Option<Temperature> {
        match self {
            TemperatureKind::None => None,
            TemperatureKind::LogN => Some(Temperature::LogN { train_len }),
            TemperatureKind::FloorLog => Some(Temperature::FloorLog {
                beta: floor_log_beta,
                floor: train_len,
                offset: 0,
            }),
        }
    }

    /// The name's suffix (`+log-n`), and the name alone (`log-n`) after `+`.
    fn suffix(self) -> &'static str {
        match self {
            TemperatureKind::None => "",
            TemperatureKind::LogN => "+log-n",
            TemperatureKind::FloorLog => "+floor-log",
        }
    }
}

/// A RoPE checkpoint's extension at inference and the temperature on its queries.
///
/// # Examples
/// ```
/// use posenc::lm::config::{Extension, InferenceMethod, TemperatureKind};
/// let m: InferenceMethod = "leaky-rerope+log-n".parse()?;
/// assert_eq!((m.extension, m.temperature), (Extension::LeakyReRope, TemperatureKind::LogN));
/// assert_eq!(m.to_string(), "leaky-rerope+log-n");
/// assert_eq!("floor-log".parse::<InferenceMethod>()?.extension, Extension::Plain);
/// assert!("rerope+log".parse::<InferenceMethod>().is_err());
/// # Ok::<(), posenc::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InferenceMethod {
    /// The positions' change.
    pub extension: Extension,
    /// The queries' temperature.
    pub temperature: TemperatureKind,
}

/// The temperatures that can follow a name.
const TEMPERATURES: [TemperatureKind; 2] = [TemperatureKind::LogN, TemperatureKind::FloorLog];

impl InferenceMethod {
    /// A scaling alone (the entries the sweep had before ReRoPE and log-$n$).
    pub fn scaling(kind: ScalingKind) -> Self {
        Self::of(Extension::Scaling(kind))
    }

    /// `extension` alone.
    pub fn of(extension: Extension) -> Self {
        Self {
            extension,
            temperature: TemperatureKind::None,
        }
    }

    /// `extension` with log-$n$.
    pub fn with_log_n(extension: Extension) -> Self {
        Self::tempered(extension, TemperatureKind::LogN)
    }

    /// `extension` with `temperature`.
    pub fn tempered(extension: Extension, temperature: TemperatureKind) -> Self {
        Self {
            extension,
            temperature,
        }
    }

    /// The scaling of the frequencies, if any.
    pub fn scaling_kind(&self) -> Option<ScalingKind> {
        match self.extension {
            Extension::Scaling(kind) => Some(kind),
            Extension::Plain
            | Extension::DynamicYarn
            | Extension::ReRope
            | Extension::LeakyReRope
            | Extension::SelfExtend => None,
        }
    }

    /// The name (`ntk`, `rerope`, `log-n`, `yarn+floor-log`): the variant of its results rows
    /// and the middle of its items' names (`rope/yarn+log-n/seed0`).
    pub fn name(&self) -> String {
        let suffix = self.temperature.suffix();
        let base = match self.extension {
            Extension::Plain if suffix.is_empty() => return "plain".to_string(),
            // "log-n", "floor-log"
            Extension::Plain => return suffix[1..].to_string(),
            Extension::Scaling(kind) => kind.name(),
            Extension::DynamicYarn => "dynamic-yarn",
            Extension::ReRope => "rerope",
            Extension::LeakyReRope => "leaky-rerope",
            Extension::SelfExtend => "self-extend",
        };
        format!("{base}{suffix}")
    }
}

impl fmt::Display for InferenceMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for InferenceMethod {
    type Err = Error;

    /// A scaling's name (or alias), `dynamic-yarn`, `rerope`, `leaky-rerope`, `self-extend`,
    /// each optionally with `+log-n` or `+floor-log`, or `log-n` or `floor-log` alone.
    fn from_str(name: &str) -> Result<Self> {
        for t in TEMPERATURES {
            if name == &t.suffix()[1..] {
                return Ok(Self::tempered(Extension::Plain, t));
            }
        }
        let (base, temperature) = TEMPERATURES
            .iter()
            .find_map(|&t| name.strip_suffix(t.suffix()).map(|base| (base, t)))
            .unwrap_or((name, TemperatureKind::None));
        let extension = match base {
            "dynamic-yarn" => Extension::DynamicYarn,
            "rerope" => Extension::ReRope,
            "leaky-rerope" => Extension::LeakyReRope,
            "self-extend" => Extension::SelfExtend,
            _ => Extension::Scaling(ScalingKind::from_name(base).map_err(|_| {
                let scalings: Vec<&str> = ScalingKind::ALL.iter().map(|k| k.name()).collect();
                invalid(
                    "rope_inference",
                    name,
                    format!(
                        "{}, dynamic-yarn, rerope, leaky-rerope or self-extend, each optionally \
                         followed by +log-n or +floor-log, or log-n or floor-log alone",
                        scalings.join(", ")
                    ),
                )
            })?),
        };
        Ok(Self {
            extension,
            temperature,
        })
    }
}

impl TryFrom<String> for InferenceMethod {
    type Error = Error;

    fn try_from(name: String) -> Result<Self> {
        name.parse()
    }
}

impl From<InferenceMethod> for String {
    fn from(m: InferenceMethod) -> Self {
        m.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name parses back to itself; a scaling's alias parses to it; the scalings keep
    /// their own names (so the items and variants of the sweep before ReRoPE are unchanged).
    #[test]
    fn names_round_trip() {
        let mut all = vec![
            InferenceMethod::with_log_n(Extension::Plain),
            InferenceMethod::tempered(Extension::Plain, TemperatureKind::FloorLog),
        ];
        for extension in ScalingKind::ALL
            .iter()
            .map(|&k| Extension::Scaling(k))
            .chain([
                Extension::DynamicYarn,
                Extension::ReRope,
                Extension::LeakyReRope,
                Extension::SelfExtend,
            ])
        {
            for temperature in [
                TemperatureKind::None,
                TemperatureKind::LogN,
                TemperatureKind::FloorLog,
            ] {
                all.push(InferenceMethod::tempered(extension, temperature));
            }
        }
        let names: std::collections::HashSet<String> = all.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), all.len(), "every method has its own name");
        for m in &all {
            assert_eq!(m.name().parse::<InferenceMethod>().unwrap(), *m, "{m}");
        }
        for k in ScalingKind::ALL {
            assert_eq!(InferenceMethod::scaling(k).name(), k.name());
        }
        assert_eq!(
            "pi+log-n".parse::<InferenceMethod>().unwrap().name(),
            "linear+log-n"
        );
        let json = serde_json::to_string(&InferenceMethod::scaling(ScalingKind::Yarn)).unwrap();
        assert_eq!(json, "\"yarn\"");
    }

    #[test]
    fn unknown_names_are_errors_listing_the_known() {
        for bad in [
            "",
            "plain",
            "+log-n",
            "rerope+",
            "log-n+log-n",
            "yarn+logn",
            "rerope2",
            "floor-log+log-n",
            "dynamic-yarn+floor",
            "plain+floor-log",
        ] {
            let err = bad.parse::<InferenceMethod>().unwrap_err().to_string();
            assert!(err.contains("leaky-rerope"), "{bad}: {err}");
        }
        assert!(serde_json::from_str::<InferenceMethod>("\"bogus\"").is_err());
    }
}
