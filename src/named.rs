//! Enums chosen by name, in configurations and on the command line: every value has one name
//! (plus aliases), parsing lists the names it accepts, and `Display` prints the name back.
//! The command line builds its value parsers from [`Named`]; the library itself knows no
//! argument parser.

use crate::error::{invalid, Result};

/// A closed set of values, each with a name.
pub trait Named: Copy + 'static {
    /// What the name selects, as error messages say it (`scheme`).
    const WHAT: &'static str;

    /// Every value, in the order of help texts and tables.
    fn all() -> &'static [Self];

    /// The name of `self`.
    fn label(self) -> &'static str;

    /// One line on what `self` is, for help texts.
    fn summary(self) -> &'static str;

    /// Other names accepted for a value (`pi` for `linear`).
    fn aliases() -> &'static [(&'static str, Self)] {
        &[]
    }

    /// The value named `name` (or one of its aliases).
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] naming [`Named::WHAT`] and listing the names.
    fn from_name(name: &str) -> Result<Self> {
        let named = Self::all().iter().copied().find(|v| v.label() == name);
        let alias = || {
            Self::aliases()
                .iter()
                .find(|(a, _)| *a == name)
                .map(|&(_, v)| v)
        };
        named.or_else(alias).ok_or_else(|| {
            let known: Vec<&str> = Self::all().iter().map(|v| v.label()).collect();
            invalid(Self::WHAT, name, known.join(", "))
        })
    }
}

/// `Named`, `Display` and `FromStr` for an enum with an inherent `ALL` array and `name()`.
macro_rules! named {
    ($t:ty, $what:literal $(, $alias:literal => $value:expr)*) => {
        impl $crate::named::Named for $t {
            const WHAT: &'static str = $what;
            fn all() -> &'static [Self] {
                &Self::ALL
            }
            fn label(self) -> &'static str {
                self.name()
            }
            fn summary(self) -> &'static str {
                Self::summary(&self)
            }
            fn aliases() -> &'static [(&'static str, Self)] {
                &[$(($alias, $value)),*]
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
        impl std::str::FromStr for $t {
            type Err = $crate::Error;
            fn from_str(name: &str) -> $crate::Result<Self> {
                <Self as $crate::named::Named>::from_name(name)
            }
        }
    };
}
pub(crate) use named;

#[cfg(test)]
mod tests {
    use super::Named;
    use crate::encodings::rope::ScalingKind;
    use crate::lm::config::{Mode, Scheme};

    #[test]
    fn every_name_parses_back_and_unknown_names_list_the_known_ones() {
        for s in Scheme::all() {
            assert_eq!(s.to_string().parse::<Scheme>().unwrap(), *s);
        }
        for m in Mode::all() {
            assert_eq!(m.to_string().parse::<Mode>().unwrap(), *m);
        }
        assert_eq!("pi".parse::<ScalingKind>().unwrap(), ScalingKind::Linear);
        let e = "ropee".parse::<Scheme>().unwrap_err().to_string();
        assert!(
            e.contains("scheme") && e.contains("ropee") && e.contains("alibi"),
            "{e}"
        );
    }
}
