//! The columns of a DataFrame with one row per item of a slice, and the three columns every
//! tested quantity shows: its standard error over seeds, its Holm-adjusted $p$ and its verdict.

use polars::prelude::{Column, NamedFrom, Series};

use crate::results::Tested;

/// Column builders over `rows`: column $c$ of row $r$ is $f(\mathrm{rows}_r)$.
pub(crate) struct Columns<'a, T>(pub &'a [T]);

impl<T> Columns<'_, T> {
    /// A column of any type polars takes (numbers, strings, booleans, and their `Option`s
    /// for missing values).
    pub(crate) fn column<V>(&self, name: &str, f: impl Fn(&T) -> V) -> Column
    where
        Series: NamedFrom<Vec<V>, [V]>,
    {
        Series::new(name.into(), self.0.iter().map(f).collect::<Vec<V>>()).into()
    }

    /// A column of strings.
    pub(crate) fn text(&self, name: &str, f: impl Fn(&T) -> String) -> Column {
        self.column(name, f)
    }

    /// A column of `f64`.
    pub(crate) fn number(&self, name: &str, f: impl Fn(&T) -> f64) -> Column {
        self.column(name, f)
    }

    /// A column of counts, as `u64`.
    pub(crate) fn count(&self, name: &str, f: impl Fn(&T) -> usize) -> Column {
        self.column(name, |r| f(r) as u64)
    }

    /// `se seeds`: the standard error over seeds of the tested quantity, NaN with one seed.
    pub(crate) fn seed_se(&self, tested: impl Fn(&T) -> &Tested) -> Column {
        self.number("se seeds", |r| {
            tested(r).comparison.seed_se().unwrap_or(f64::NAN)
        })
    }

    /// `p Holm`: the Holm-adjusted $p$ of the tested quantity, NaN with one seed.
    pub(crate) fn p_holm(&self, tested: impl Fn(&T) -> &Tested) -> Column {
        self.number("p Holm", |r| tested(r).p_holm.unwrap_or(f64::NAN))
    }

    /// The verdict of the tested quantity in words ([`Tested::verdict_words`]): `above` or
    /// `below` for a detected direction, `not detected`, `one seed` without a test.
    pub(crate) fn verdict(
        &self,
        name: &str,
        tested: impl Fn(&T) -> &Tested,
        [above, below]: [&str; 2],
    ) -> Column {
        self.text(name, |r| {
            tested(r)
                .verdict_words(above, below, "one seed")
                .to_string()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::results::{column_f64, column_str, frame};
    use crate::results::{Comparison, TextUncertainty};

    fn tested(mean: f64, n_seeds: usize, p_holm: Option<f64>) -> Tested {
        let comparison = Comparison {
            mean,
            per_seed: Vec::new(),
            se_seeds: 0.25,
            df: n_seeds - 1,
            t: mean / 0.25,
            p: p_holm,
            text: TextUncertainty {
                se: 0.02,
                interval: (0.0, 0.0),
                resamples: 2000,
            },
            n_windows: 63,
            n_seeds,
        };
        Tested { comparison, p_holm }
    }

    #[test]
    fn tested_columns_read_each_row() {
        let rows = [
            tested(0.5, 5, Some(0.001)),
            tested(-0.5, 5, Some(0.01)),
            tested(0.1, 5, Some(0.5)),
            tested(0.1, 1, None),
        ];
        let c = Columns(&rows);
        let df = frame(vec![
            c.number("mean", |t| t.comparison.mean),
            c.count("seeds", |t| t.comparison.n_seeds),
            c.column("p or missing", |t| t.p_holm),
            c.seed_se(|t| t),
            c.p_holm(|t| t),
            c.verdict("verdict", |t| t, ["up", "down"]),
        ])
        .unwrap();
        assert_eq!(df.height(), 4);
        assert_eq!(df.column("p or missing").unwrap().null_count(), 1);
        assert_eq!(
            df.column("seeds").unwrap().dtype(),
            &polars::prelude::DataType::UInt64
        );
        assert_eq!(column_f64(&df, "mean").unwrap(), [0.5, -0.5, 0.1, 0.1]);
        let se = column_f64(&df, "se seeds").unwrap();
        assert_eq!(se[..3], [0.25; 3]);
        assert!(se[3].is_nan());
        let p = column_f64(&df, "p Holm").unwrap();
        assert_eq!(p[..3], [0.001, 0.01, 0.5]);
        assert!(p[3].is_nan());
        assert_eq!(
            column_str(&df, "verdict").unwrap(),
            ["up", "down", "not detected", "one seed"]
        );
    }
}
