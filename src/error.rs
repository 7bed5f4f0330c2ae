//! The one error type of the crate. Every public function validates its input and returns
//! [`Error`] instead of panicking; the message says what was wrong and what is allowed.

use std::fmt;

/// The most rows a table written by the crate (a dump, an export) may have, to keep a typo
/// from filling the disk.
pub const MAX_ROWS: usize = 10_000_000;

/// Everything that can go wrong when building or applying a position encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A hyper-parameter outside its allowed range, e.g. an odd RoPE dimension.
    InvalidParameter {
        /// The parameter's name as it appears in the config struct or on the command line.
        name: &'static str,
        /// The value that was given, formatted.
        value: String,
        /// What would have been accepted.
        allowed: String,
    },
    /// Arrays whose shapes do not fit together.
    ShapeMismatch {
        /// What was being computed.
        context: &'static str,
        /// The shape that was expected.
        expected: String,
        /// The shape that was found.
        found: String,
    },
    /// A position that a finite table does not cover (e.g. a learned table of 512 rows).
    PositionOutOfRange {
        /// What was being looked up.
        context: &'static str,
        /// The position asked for.
        position: usize,
        /// The number of positions the table covers (valid positions are `0..len`).
        len: usize,
    },
    /// Reading or writing a file failed (the message names the file and the system's reason).
    Io(String),
    /// A file was read but its content is not what it should be: JSON with an unknown key or a
    /// value of the wrong type, a truncated weights file, a checkpoint of another model.
    Format {
        /// The file (or folder) read.
        path: String,
        /// What is wrong with it, with the parser's own message.
        message: String,
    },
    /// Options that contradict each other or the state on disk (e.g. `--resume` with another
    /// scheme than the checkpoint's, or `--out` naming a checkpoint without `--force`).
    Conflict(String),
    /// Training or evaluation produced numbers that are not finite (a diverged run); nothing is
    /// saved from it.
    NonFinite(String),
    /// One step of a larger job failed: `context` names the step (`training t5`), `source` is
    /// the error itself, kept whole ([`std::error::Error::source`] returns it).
    Context {
        /// The step that failed.
        context: String,
        /// Why.
        source: Box<Error>,
    },
}

impl Error {
    /// Wraps `self` with the step of a larger job it happened in.
    #[must_use]
    pub fn context(self, context: impl Into<String>) -> Self {
        Error::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// The innermost error, past every [`Error::Context`].
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidParameter {
                name,
                value,
                allowed,
            } => write!(f, "invalid {name} = {value}: allowed is {allowed}"),
            Error::ShapeMismatch {
                context,
                expected,
                found,
            } => write!(f, "shape mismatch in {context}: expected {expected}, found {found}"),
            Error::PositionOutOfRange {
                context,
                position,
                len,
            } => write!(
                f,
                "position {position} is out of range for {context}: it covers positions 0..{len} (0 to {})",
                len.saturating_sub(1)
            ),
            Error::Io(message) | Error::Conflict(message) | Error::NonFinite(message) => {
                write!(f, "{message}")
            }
            Error::Format { path, message } => write!(f, "{path}: {message}"),
            Error::Context { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Context { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// `Result` with the crate's [`Error`] by default; a second parameter names another error
/// type, so `Result<T, MyError>` needs no `std::result::Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::InvalidParameter`].
pub fn invalid(name: &'static str, value: impl fmt::Display, allowed: impl Into<String>) -> Error {
    Error::InvalidParameter {
        name,
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

/// Fails with [`Error::InvalidParameter`] unless `ok`.
pub fn ensure(ok: bool, name: &'static str, value: impl fmt::Display, allowed: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(invalid(name, value, allowed))
    }
}

/// Fails with [`Error::InvalidParameter`] ("a finite number > 0") unless `value` is finite
/// and positive: a standard deviation, a scale, a base, a clipping norm.
pub fn ensure_positive<T: Copy + Into<f64> + fmt::Display>(
    name: &'static str,
    value: T,
) -> Result<()> {
    let x: f64 = value.into();
    ensure(x.is_finite() && x > 0.0, name, value, "a finite number > 0")
}

/// Fails with [`Error::InvalidParameter`] ("an even number >= 2") unless `value` is: a width
/// made of sine-cosine or rotation pairs.
pub fn ensure_even(name: &'static str, value: usize) -> Result<()> {
    ensure(
        value >= 2 && value.is_multiple_of(2),
        name,
        value,
        "an even number >= 2",
    )
}

/// Fails with [`Error::ShapeMismatch`] unless `expected == found`.
pub(crate) fn ensure_shape(
    context: &'static str,
    expected: &[usize],
    found: &[usize],
) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            context,
            expected: format!("{expected:?}"),
            found: format!("{found:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_is_allowed() {
        let e = invalid("dim", 7, "an even number >= 2");
        assert_eq!(
            e.to_string(),
            "invalid dim = 7: allowed is an even number >= 2"
        );
        let e = Error::PositionOutOfRange {
            context: "learned table",
            position: 600,
            len: 512,
        };
        assert!(e.to_string().contains("0 to 511"));
        assert!(ensure_shape("q", &[2, 3], &[2, 4])
            .unwrap_err()
            .to_string()
            .contains("[2, 4]"));
    }

    #[test]
    fn context_keeps_the_cause() {
        use std::error::Error as _;
        let inner = invalid("lengths", 0, "at least 1");
        let e = inner.clone().context("evaluating rope");
        assert_eq!(
            e.to_string(),
            "evaluating rope: invalid lengths = 0: allowed is at least 1"
        );
        assert_eq!(e.root(), &inner);
        assert_eq!(e.source().map(ToString::to_string), Some(inner.to_string()));
        assert!(inner.source().is_none());
    }
}
