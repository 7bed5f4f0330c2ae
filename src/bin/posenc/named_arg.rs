//! Command-line values of the library's named enums ([`posenc::named::Named`]): `--help`
//! lists every name, aliases are accepted, and a parsed name is the library's own value.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use posenc::named::Named;

/// The value parser of a [`Named`] enum.
pub fn named<T: Named + Clone + Send + Sync>() -> impl TypedValueParser<Value = T> {
    let values = T::all().iter().map(|&v| {
        let aliases = T::aliases()
            .iter()
            .filter(move |(_, a)| a.label() == v.label())
            .map(|(alias, _)| *alias);
        PossibleValue::new(v.label())
            .help(v.summary())
            .aliases(aliases)
    });
    PossibleValuesParser::new(values).try_map(|name| T::from_name(&name))
}
