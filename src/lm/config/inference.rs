//! How a trained RoPE checkpoint is extended at inference ([`InferenceMethod`], the entries of
//! the sweep's `rope_inference` and the variants of their results rows): a scaling of its
//! frequencies ([`ScalingKind`]), ReRoPE or Leaky ReRoPE
//! ([`crate::encodings::rope::ReRope`], two passes merged at a window), Self-Extend
//! ([`crate::encodings::rope::SelfExtend`], the same two passes with grouped positions), or
//! neither, each
//! optionally with log-$n$ query scaling ([`crate::encodings::temperature::Temperature::LogN`]).
//!
//! Names: the scaling's own (`yarn`), `rerope`, `leaky-rerope`, `self-extend`, and `+log-n`
//! after any of them
//! (`yarn+log-n`); `log-n` alone is plain RoPE's frequencies with log-$n$.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::encodings::rope::ScalingKind;
use crate::error::{invalid, Error, Result};
use crate::named::Named;

/// What replaces RoPE's positions at inference, before log-$n$.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extension {
    /// The trained frequencies, unchanged (with log-$n$ only).
    Plain,
    /// A scaling of the frequencies.
    Scaling(ScalingKind),
    /// ReRoPE: relative positions clipped at the window $w$.
    ReRope,
    /// Leaky ReRoPE: beyond $w$, relative positions grow with slope $1/k$.
    LeakyReRope,
    /// Self-Extend: beyond $w$, positions grouped by $G$.
    SelfExtend,
}

/// A RoPE checkpoint's extension at inference and whether log-$n$ scales its queries.
///
/// # Examples
/// ```
/// use posenc::lm::config::{Extension, InferenceMethod};
/// let m: InferenceMethod = "leaky-rerope+log-n".parse()?;
/// assert_eq!((m.extension, m.log_n), (Extension::LeakyReRope, true));
/// assert_eq!(m.to_string(), "leaky-rerope+log-n");
/// assert!("rerope+log".parse::<InferenceMethod>().is_err());
/// # Ok::<(), posenc::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InferenceMethod {
    /// The positions' change.
    pub extension: Extension,
    /// Queries scaled by $\max(1, \ln(m+1) / \ln L_{train})$.
    pub log_n: bool,
}

/// The suffix that adds log-$n$.
const LOG_N: &str = "+log-n";

impl InferenceMethod {
    /// A scaling alone (the entries the sweep had before ReRoPE and log-$n$).
    pub fn scaling(kind: ScalingKind) -> Self {
        Self {
            extension: Extension::Scaling(kind),
            log_n: false,
        }
    }

    /// `extension` with log-$n$.
    pub fn with_log_n(extension: Extension) -> Self {
        Self {
            extension,
            log_n: true,
        }
    }

    /// The scaling of the frequencies, if any.
    pub fn scaling_kind(&self) -> Option<ScalingKind> {
        match self.extension {
            Extension::Scaling(kind) => Some(kind),
            Extension::Plain
            | Extension::ReRope
            | Extension::LeakyReRope
            | Extension::SelfExtend => None,
        }
    }

    /// The name (`ntk`, `rerope`, `log-n`, `yarn+log-n`): the variant of its results rows
    /// and the middle of its items' names (`rope/yarn+log-n/seed0`).
    pub fn name(&self) -> String {
        let base = match self.extension {
            Extension::Plain => return if self.log_n { "log-n" } else { "plain" }.to_string(),
            Extension::Scaling(kind) => kind.name(),
            Extension::ReRope => "rerope",
            Extension::LeakyReRope => "leaky-rerope",
            Extension::SelfExtend => "self-extend",
        };
        if self.log_n {
            format!("{base}{LOG_N}")
        } else {
            base.to_string()
        }
    }
}

impl fmt::Display for InferenceMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for InferenceMethod {
    type Err = Error;

    /// A scaling's name (or alias), `rerope`, `leaky-rerope`, each with `+log-n`, or `log-n`.
    fn from_str(name: &str) -> Result<Self> {
        if name == "log-n" {
            return Ok(Self::with_log_n(Extension::Plain));
        }
        let (base, log_n) = match name.strip_suffix(LOG_N) {
            Some(base) => (base, true),
            None => (name, false),
        };
        let extension = match base {
            "rerope" => Extension::ReRope,
            "leaky-rerope" => Extension::LeakyReRope,
            "self-extend" => Extension::SelfExtend,
            _ => Extension::Scaling(ScalingKind::from_name(base).map_err(|_| {
                let scalings: Vec<&str> = ScalingKind::ALL.iter().map(|k| k.name()).collect();
                invalid(
                    "rope_inference",
                    name,
                    format!(
                        "{}, rerope, leaky-rerope or self-extend, each optionally followed by \
                         {LOG_N}, or log-n",
                        scalings.join(", ")
                    ),
                )
            })?),
        };
        Ok(Self { extension, log_n })
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
        let mut all = vec![InferenceMethod::with_log_n(Extension::Plain)];
        for extension in ScalingKind::ALL
            .iter()
            .map(|&k| Extension::Scaling(k))
            .chain([
                Extension::ReRope,
                Extension::LeakyReRope,
                Extension::SelfExtend,
            ])
        {
            for log_n in [false, true] {
                all.push(InferenceMethod { extension, log_n });
            }
        }
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
        ] {
            let err = bad.parse::<InferenceMethod>().unwrap_err().to_string();
            assert!(err.contains("leaky-rerope"), "{bad}: {err}");
        }
        assert!(serde_json::from_str::<InferenceMethod>("\"bogus\"").is_err());
    }
}
