//! Line plots ([`lines`], [`lines_xy`], [`lines_df`]) and lines with shaded bands
//! ([`lines_with_bands`], [`Lines::band`]): a curve per named series.

use plotly::common::{Fill, HoverInfo, Line, Marker, Mode};
use plotly::layout::{Axis, AxisType};
use plotly::{Plot, Scatter};
use polars::prelude::DataFrame;

use super::{bundle_or_error, labelled, Labels, Values};
use crate::error::{ensure, invalid};
use crate::notebook::display::{Figure, Show};
use crate::notebook::results::column_f64;
use crate::{Error, Result};

/// Line plots, built by [`lines`] or [`lines_df`]: one named line per series, each with its
/// own x values.
#[derive(Clone, Debug, PartialEq)]
pub struct Lines {
    series: Vec<(String, Vec<f64>, Vec<f64>)>,
    /// `(series name, lower, upper)`: a shaded band over the x values of that series.
    bands: Vec<(String, Vec<f64>, Vec<f64>)>,
    labels: Labels,
    log_x: bool,
    log_y: bool,
    markers: bool,
    /// Where the x axis has its ticks and labels (plotly's choice when `None`).
    x_ticks: Option<Vec<f64>>,
    /// `(from, to, name)`: a shaded range of x values behind the lines.
    regions: Vec<(f64, f64, String)>,
}

/// One line per named series, all over the same `x`; names may be `&str` or `String`, values
/// any [`Values`] (a `Vec<f64>`, a slice, an `ndarray` column, ...).
///
/// Nothing is checked until the figure is built ([`Lines::figure`], or the display of a cell
/// that ends in the plot), so the options chain without `?`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let x = [1.0, 2.0, 4.0, 8.0];
/// let fig = lines(&x, &[("x^2", vec![1.0, 4.0, 16.0, 64.0])])
///     .line("x", &x)
///     .title("Powers").x("x").y("y").log_x().log_y()
///     .figure()?;
/// assert!(fig.to_json().contains(r#""type":"log""#));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn lines<X, S, V>(x: &X, series: &[(S, V)]) -> Lines
where
    X: Values + ?Sized,
    S: AsRef<str>,
    V: Values,
{
    let x = x.to_f64_vec();
    Lines {
        series: series
            .iter()
            .map(|(name, y)| (name.as_ref().to_string(), x.clone(), y.to_f64_vec()))
            .collect(),
        bands: Vec::new(),
        labels: Labels::default(),
        log_x: false,
        log_y: false,
        markers: false,
        x_ticks: None,
        regions: Vec::new(),
    }
}

/// One line per named series, each with its own x values: `[(name, x, y)]`, as
/// [`Lines::line_xy`] adds them one at a time.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let series = [("heads 1..8", vec![1, 2, 3], vec![0.5, 0.25, 0.125]), ("head 9", vec![9], vec![0.7])];
/// let fig = lines_xy(&series).markers().title("ALiBi slopes").x("head").y("slope").figure()?;
/// assert!(fig.to_json().contains("head 9"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn lines_xy<S, X, Y>(series: &[(S, X, Y)]) -> Lines
where
    S: AsRef<str>,
    X: Values,
    Y: Values,
{
    Lines {
        series: series
            .iter()
            .map(|(name, x, y)| (name.as_ref().to_string(), x.to_f64_vec(), y.to_f64_vec()))
            .collect(),
        bands: Vec::new(),
        labels: Labels::default(),
        log_x: false,
        log_y: false,
        markers: false,
        x_ticks: None,
        regions: Vec::new(),
    }
}

/// One series of [`lines_with_bands`]: `(name, x, y, lower, upper)`.
pub type BandSeries<S = String> = (S, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

/// One line per named series, each with its own x values and a shaded band around it:
/// `[(name, x, y, lower, upper)]`, as [`Lines::line_xy`] and [`Lines::band`] add them one at a
/// time (a mean over seeds with its spread, for instance).
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let series = vec![
///     ("rope".to_string(), vec![128.0, 2048.0], vec![1.5, 3.5], vec![1.4, 3.2], vec![1.6, 3.8]),
///     ("alibi".to_string(), vec![128.0, 2048.0], vec![1.6, 1.6], vec![1.6, 1.6], vec![1.6, 1.6]),
/// ];
/// let fig = lines_with_bands(&series).log_x().title("mean ± sd").x("length").y("loss").figure()?;
/// assert_eq!(fig.to_json().matches("toself").count(), 2);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn lines_with_bands<S: AsRef<str>>(series: &[BandSeries<S>]) -> Lines {
    let mut lines = lines_xy::<&str, Vec<f64>, Vec<f64>>(&[]);
    for (name, x, y, lower, upper) in series {
        lines = lines
            .line_xy(name.as_ref(), x, y)
            .band(name.as_ref(), lower, upper);
    }
    lines
}

/// A line plot straight from a DataFrame, as plotly express draws `px.line(df, x=, y=,
/// color=)`: column `x` against column `y`, one line per distinct value of the `color` column
/// (in order of first appearance; rows keep their order within a line), or a single line
/// when `color` is `None`. The axis titles default to the column names.
///
/// # Errors
/// [`Error::Io`] naming the column when a column is missing, `x` or `y` is not numeric or has
/// a missing value, or `color` is not text or integers.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let df = df!(
///     "length" => [128u32, 256, 128, 256],
///     "perplexity" => [3.1, 3.4, 3.0, 9.5],
///     "scheme" => ["alibi", "alibi", "rope", "rope"],
/// )?;
/// let fig = lines_df(&df, "length", "perplexity", Some("scheme"))?.log_y().figure()?;
/// let json: serde_json::Value = serde_json::from_str(&fig.to_json()).unwrap();
/// assert_eq!(json["data"][1]["name"], "rope");
/// assert_eq!(json["data"][1]["y"][1], 9.5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lines_df(df: &DataFrame, x: &str, y: &str, color: Option<&str>) -> Result<Lines> {
    let xs = column_f64(df, x)?;
    let ys = column_f64(df, y)?;
    let mut series: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    match color {
        None => series.push((y.to_string(), xs, ys)),
        Some(color) => {
            // the colour column as text, whatever its type: "rope", or 4 as "4"
            let names: Vec<String> = df
                .column(color)
                .and_then(|c| c.cast(&polars::prelude::DataType::String))
                .and_then(|c| {
                    Ok(c.str()?
                        .iter()
                        .map(|v| v.unwrap_or("null").to_string())
                        .collect())
                })
                .map_err(|e| Error::Io(format!("column {color}: {e}")))?;
            for ((name, xv), yv) in names.into_iter().zip(xs).zip(ys) {
                match series.iter_mut().find(|(n, _, _)| *n == name) {
                    Some((_, sx, sy)) => {
                        sx.push(xv);
                        sy.push(yv);
                    }
                    None => series.push((name, vec![xv], vec![yv])),
                }
            }
        }
    }
    Ok(Lines {
        series,
        bands: Vec::new(),
        labels: Labels {
            x: x.to_string(),
            y: y.to_string(),
            ..Labels::default()
        },
        log_x: false,
        log_y: false,
        markers: false,
        x_ticks: None,
        regions: Vec::new(),
    })
}

labelled!(Lines, "", "");

impl Lines {
    /// Adds one more named line over the x values of the first series.
    ///
    /// With no series yet, the line is drawn over `0, 1, ...`.
    pub fn line(mut self, name: impl Into<String>, y: &(impl Values + ?Sized)) -> Self {
        let y = y.to_f64_vec();
        let x = match self.series.first() {
            Some((_, x, _)) => x.clone(),
            None => (0..y.len()).map(|i| i as f64).collect(),
        };
        self.series.push((name.into(), x, y));
        self
    }

    /// Adds one more named line with its own x values.
    pub fn line_xy(
        mut self,
        name: impl Into<String>,
        x: &(impl Values + ?Sized),
        y: &(impl Values + ?Sized),
    ) -> Self {
        self.series
            .push((name.into(), x.to_f64_vec(), y.to_f64_vec()));
        self
    }

    /// A shaded band from `lower` to `upper` around the series named `name` (over its x
    /// values, in its colour, without a legend entry of its own: clicking the series' legend
    /// entry hides both). For a mean over seeds with its min-max range, or mean ± sd.
    ///
    /// With any band in the figure, every series gets its colour from a fixed palette of 24
    /// ([`PALETTE`], in order, cycling), so that band and line match.
    ///
    /// # Examples
    /// ```
    /// use posenc::notebook::prelude::*;
    /// let fig = lines(&[1, 2, 3], &[("mean", vec![2.0, 3.0, 4.0])])
    ///     .band("mean", &[1.5, 2.5, 3.0], &[2.5, 3.5, 5.0])
    ///     .title("A mean and its range").x("x").y("y")
    ///     .figure()?;
    /// assert!(fig.to_json().contains("toself"));
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn band(
        mut self,
        name: impl Into<String>,
        lower: &(impl Values + ?Sized),
        upper: &(impl Values + ?Sized),
    ) -> Self {
        self.bands
            .push((name.into(), lower.to_f64_vec(), upper.to_f64_vec()));
        self
    }

    /// A grey shaded range of x values, `from` to `to`, behind the lines and as high as they
    /// reach, with a legend entry `name`: the lengths a model was trained on, say.
    ///
    /// # Examples
    /// ```
    /// use posenc::notebook::prelude::*;
    /// let fig = lines(&[1, 10, 100], &[("loss", vec![2.0, 1.5, 4.0])])
    ///     .region(1.0, 10.0, "trained lengths")
    ///     .log_x().title("Loss by length").x("length").y("loss")
    ///     .figure()?;
    /// assert!(fig.to_json().contains("trained lengths"));
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn region(mut self, from: f64, to: f64, name: impl Into<String>) -> Self {
        self.regions.push((from, to, name.into()));
        self
    }

    /// A logarithmic x axis (every x must be > 0).
    pub fn log_x(mut self) -> Self {
        self.log_x = true;
        self
    }

    /// Ticks, with their labels, at exactly these x values (the evaluated lengths on a log
    /// axis, say, instead of plotly's 2, 5, 1000, 2).
    pub fn x_ticks(mut self, x: &(impl Values + ?Sized)) -> Self {
        self.x_ticks = Some(x.to_f64_vec());
        self
    }

    /// A logarithmic y axis (every y must be > 0).
    pub fn log_y(mut self) -> Self {
        self.log_y = true;
        self
    }

    /// A marker at each point as well as the line.
    pub fn markers(mut self) -> Self {
        self.markers = true;
        self
    }

    /// The figure.
    ///
    /// # Errors
    /// - [`Error::InvalidParameter`] if there is no series, a series has no point, or a log
    ///   axis gets a value that is not > 0;
    /// - [`Error::ShapeMismatch`] if a series does not have one y per x.
    pub fn figure(&self) -> Result<Figure> {
        ensure(
            !self.series.is_empty(),
            "series",
            "[]",
            "at least one series",
        )?;
        for (name, x, y) in &self.series {
            if x.is_empty() {
                return Err(invalid(
                    "x",
                    format!("[] in series {name:?}"),
                    "at least one point",
                ));
            }
            if y.len() != x.len() {
                return Err(Error::ShapeMismatch {
                    context: "lines: one y per x",
                    expected: format!("{} values", x.len()),
                    found: format!("{} values in series {name:?}", y.len()),
                });
            }
            if self.log_x {
                if let Some(bad) = x.iter().find(|v| **v <= 0.0) {
                    return Err(invalid("x", bad, "values > 0 on a log x axis"));
                }
            }
            if self.log_y {
                if let Some(bad) = y.iter().find(|v| **v <= 0.0) {
                    return Err(invalid("y", bad, "values > 0 on a log y axis"));
                }
            }
        }
        for (name, lower, upper) in &self.bands {
            let Some((_, x, _)) = self.series.iter().find(|(n, _, _)| n == name) else {
                return Err(invalid(
                    "band",
                    format!("{name:?}"),
                    "the name of a series of the figure",
                ));
            };
            for side in [lower, upper] {
                if side.len() != x.len() {
                    return Err(Error::ShapeMismatch {
                        context: "lines: a band has one lower and one upper value per x",
                        expected: format!("{} values", x.len()),
                        found: format!("{} values in the band of {name:?}", side.len()),
                    });
                }
            }
            if let Some((lo, hi)) = lower
                .iter()
                .zip(upper)
                .find(|(lo, hi)| lo.is_nan() || hi.is_nan() || lo > hi)
            {
                return Err(invalid(
                    "band",
                    format!("{lo} above {hi} in the band of {name:?}"),
                    "lower <= upper at every x",
                ));
            }
            if self.log_y {
                if let Some(bad) = lower.iter().find(|v| **v <= 0.0) {
                    return Err(invalid("y", bad, "values > 0 on a log y axis"));
                }
            }
        }
        for (from, to, name) in &self.regions {
            if !(from.is_finite() && to.is_finite() && from < to) || (self.log_x && *from <= 0.0) {
                return Err(invalid(
                    "region",
                    format!("{from}..{to} ({name:?})"),
                    "finite from < to (and from > 0 on a log x axis)",
                ));
            }
        }
        let mode = if self.markers {
            Mode::LinesMarkers
        } else {
            Mode::Lines
        };
        let colour = |i: usize| PALETTE[i % PALETTE.len()];
        let mut plot = Plot::new();
        // the regions first, as high as the lines reach
        let ys = || {
            self.series
                .iter()
                .flat_map(|(_, _, y)| y.iter().copied())
                .filter(|v| v.is_finite())
        };
        let (bottom, top) = (
            ys().fold(f64::INFINITY, f64::min),
            ys().fold(f64::NEG_INFINITY, f64::max),
        );
        for (from, to, name) in &self.regions {
            plot.add_trace(
                Scatter::new(
                    vec![*from, *to, *to, *from, *from],
                    vec![bottom, bottom, top, top, bottom],
                )
                .name(name)
                .mode(Mode::Lines)
                .fill(Fill::ToSelf)
                .fill_color("rgba(128,128,128,0.15)")
                .line(Line::new().width(0.0))
                .hover_info(HoverInfo::Skip),
            );
        }
        // the bands next, under every line
        for (name, lower, upper) in &self.bands {
            let i = self
                .series
                .iter()
                .position(|(n, _, _)| n == name)
                .unwrap_or(0);
            let x = &self.series[i].1;
            let xs: Vec<f64> = x.iter().chain(x.iter().rev()).copied().collect();
            let ys: Vec<f64> = upper.iter().chain(lower.iter().rev()).copied().collect();
            plot.add_trace(
                Scatter::new(xs, ys)
                    .name(name)
                    .mode(Mode::Lines)
                    .fill(Fill::ToSelf)
                    .fill_color(translucent(colour(i), 0.2))
                    .line(Line::new().width(0.0))
                    .legend_group(name)
                    .show_legend(false)
                    .hover_info(HoverInfo::Skip),
            );
        }
        for (i, (name, x, y)) in self.series.iter().enumerate() {
            let mut trace = Scatter::new(x.clone(), y.clone())
                .name(name)
                .mode(mode.clone());
            if !self.bands.is_empty() {
                trace = trace
                    .line(Line::new().color(colour(i)))
                    .marker(Marker::new().color(colour(i)))
                    .legend_group(name);
            }
            plot.add_trace(trace);
        }
        let axis_type = |log: bool| if log { AxisType::Log } else { AxisType::Linear };
        plot.set_layout(
            self.labels.layout(
                match &self.x_ticks {
                    Some(ticks) => Axis::new()
                        .type_(axis_type(self.log_x))
                        .tick_values(ticks.clone()),
                    None => Axis::new().type_(axis_type(self.log_x)),
                },
                Axis::new().type_(axis_type(self.log_y)),
            ),
        );
        Ok(Figure::new(plot))
    }
}

/// The colours of the series of a figure with bands ([`Lines::band`]), in order: plotly
/// express's `Dark24`, dark enough for a line and, at 20 % opacity, for its band.
pub const PALETTE: [&str; 24] = [
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86",
    "#EB663B", "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE",
    "#862A16", "#A777F1", "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63", "#AF0038",
];

/// `#RRGGBB` as `rgba(r,g,b,alpha)`.
fn translucent(hex: &str, alpha: f64) -> String {
    let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0);
    format!("rgba({},{},{},{alpha})", channel(1), channel(3), channel(5))
}

impl Show for Lines {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        bundle_or_error(self.figure())
    }
}

#[cfg(test)]
mod tests {
    use super::super::json;
    use super::*;
    use ndarray::array;
    use polars::prelude::df;

    #[test]
    fn lines_takes_owned_names_and_any_values() {
        let series: Vec<(String, Vec<f64>)> =
            (0..3).map(|k| (format!("k={k}"), vec![k as f64])).collect();
        let fig = json(&lines(&[0.0], &series).figure().unwrap());
        assert_eq!(fig["data"][2]["name"], "k=2");
        let pe = array![[1.0f32, 2.0], [3.0, 4.0]];
        let fig = lines(&array![0usize, 1], &[("column 1", pe.column(1))])
            .line("column 0", &pe.column(0))
            .figure()
            .unwrap();
        let fig = json(&fig);
        assert_eq!(fig["data"][0]["y"][1], 4.0);
        assert_eq!(fig["data"][1]["name"], "column 0");
        assert_eq!(fig["data"][1]["x"][1], 1.0);
    }

    #[test]
    fn lines_draws_one_trace_per_series() {
        let x = [1.0, 2.0, 3.0];
        let fig = lines(
            &x,
            &[("a", vec![1.0, 2.0, 3.0]), ("b", vec![3.0, 2.0, 1.0])],
        )
        .title("title")
        .x("x")
        .y("y");
        let fig = json(&fig.figure().unwrap());
        let data = fig["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[1]["name"], "b");
        assert_eq!(data[1]["y"][0], 3.0);
        assert_eq!(data[0]["mode"], "lines");
        assert_eq!(fig["layout"]["title"]["text"], "title");
        assert_eq!(fig["layout"]["xaxis"]["type"], "linear");
        assert_eq!(fig["layout"]["yaxis"]["title"]["text"], "y");
    }

    #[test]
    fn lines_with_log_axes_and_markers() {
        let fig = lines(&[1.0, 10.0], &[("a", vec![1.0, 0.1])])
            .line_xy("b", &[2.0], &[5.0])
            .log_x()
            .log_y()
            .markers()
            .x("x");
        let fig = json(&fig.figure().unwrap());
        assert_eq!(fig["layout"]["xaxis"]["type"], "log");
        assert_eq!(fig["layout"]["yaxis"]["type"], "log");
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "x");
        assert_eq!(fig["data"][0]["mode"], "lines+markers");
        assert_eq!(fig["data"][1]["x"][0], 2.0);
    }

    #[test]
    fn lines_rejects_bad_input() {
        let short = lines(&[1.0, 2.0], &[("a", vec![1.0])])
            .figure()
            .unwrap_err();
        assert!(matches!(short, Error::ShapeMismatch { .. }));
        assert!(short.to_string().contains("\"a\""));
        let empty: [f64; 0] = [];
        assert!(lines(&empty, &[("a", empty)]).figure().is_err());
        let no_series: &[(&str, Vec<f64>)] = &[];
        assert!(lines(&[1.0], no_series).figure().is_err());
        let zero = lines(&[0.0, 1.0], &[("a", vec![1.0, 1.0])])
            .log_x()
            .figure();
        assert!(matches!(
            zero,
            Err(Error::InvalidParameter { name: "x", .. })
        ));
        let negative = lines(&[1.0], &[("a", vec![-1.0])]).log_y().figure();
        assert!(matches!(
            negative,
            Err(Error::InvalidParameter { name: "y", .. })
        ));
    }

    #[test]
    fn bands_shade_around_their_series_in_its_colour() {
        let fig = lines(&[1.0, 2.0, 4.0], &[("a", vec![2.0, 3.0, 4.0])])
            .line_xy("b", &[8.0, 16.0], &[1.0, 1.5])
            .band("b", &[0.5, 1.0], &[1.5, 2.0])
            .log_x()
            .markers();
        let fig = json(&fig.figure().unwrap());
        let data = fig["data"].as_array().unwrap();
        // the band first (under the lines): x forth and back, upper forth, lower back
        assert_eq!(data.len(), 3);
        assert_eq!(data[0]["fill"], "toself");
        assert_eq!(data[0]["x"], serde_json::json!([8.0, 16.0, 16.0, 8.0]));
        assert_eq!(data[0]["y"], serde_json::json!([1.5, 2.0, 1.0, 0.5]));
        assert_eq!(data[0]["showlegend"], false);
        assert_eq!(data[0]["legendgroup"], "b");
        // b is the second series: the palette's second colour, for the line and the band
        assert_eq!(data[2]["name"], "b");
        assert_eq!(data[2]["line"]["color"], PALETTE[1]);
        assert_eq!(data[0]["fillcolor"], "rgba(225,95,153,0.2)");
        assert_eq!(data[1]["line"]["color"], PALETTE[0]);
        assert_eq!(data[2]["mode"], "lines+markers");
        // ticks where asked
        let ticks = lines(&[128, 2048], &[("a", vec![1.0, 2.0])]).x_ticks(&[128, 256, 2048]);
        let ticks = json(&ticks.log_x().figure().unwrap());
        assert_eq!(
            ticks["layout"]["xaxis"]["tickvals"],
            serde_json::json!([128.0, 256.0, 2048.0])
        );
        assert_eq!(ticks["layout"]["xaxis"]["type"], "log");
        // without bands, no colour is imposed
        let plain = json(&lines(&[1.0], &[("a", vec![1.0])]).figure().unwrap());
        assert!(plain["data"][0].get("line").is_none());
    }

    #[test]
    fn lines_with_bands_draws_a_band_under_each_line() {
        let series = [
            (
                "a",
                vec![1.0, 2.0],
                vec![2.0, 3.0],
                vec![1.0, 2.5],
                vec![2.5, 3.5],
            ),
            ("b", vec![4.0], vec![1.0], vec![1.0], vec![1.0]),
        ];
        let fig = json(&lines_with_bands(&series).figure().unwrap());
        let data = fig["data"].as_array().unwrap();
        let names: Vec<&str> = data.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b", "a", "b"]);
        assert_eq!(data[0]["y"], serde_json::json!([2.5, 3.5, 2.5, 1.0]));
        assert_eq!(data[3]["x"], serde_json::json!([4.0]));
        assert_eq!(data[3]["line"]["color"], PALETTE[1]);
        let wrong = [("a", vec![1.0], vec![2.0], vec![3.0], vec![1.0])];
        assert!(lines_with_bands(&wrong).figure().is_err());
    }

    #[test]
    fn bands_reject_unknown_series_wrong_lengths_and_inverted_sides() {
        let base = || lines(&[1.0, 2.0], &[("a", vec![2.0, 3.0])]);
        let e = base()
            .band("z", &[1.0, 1.0], &[2.0, 2.0])
            .figure()
            .unwrap_err();
        assert!(e.to_string().contains("\"z\""), "{e}");
        let e = base().band("a", &[1.0], &[2.0, 2.0]).figure().unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        let e = base()
            .band("a", &[1.0, 3.0], &[2.0, 2.0])
            .figure()
            .unwrap_err();
        assert!(e.to_string().contains("3 above 2"), "{e}");
        let e = base().band("a", &[0.0, 1.0], &[2.0, 2.0]).log_y().figure();
        assert!(matches!(e, Err(Error::InvalidParameter { name: "y", .. })));
        let nan = base().band("a", &[f64::NAN, 1.0], &[2.0, 2.0]).figure();
        assert!(nan.is_err());
    }

    #[test]
    fn a_region_is_shaded_under_the_lines_as_high_as_they_reach() {
        let fig = lines(&[1.0, 10.0, 100.0], &[("a", vec![0.5, 2.0, 8.0])])
            .region(1.0, 10.0, "trained")
            .log_x()
            .figure()
            .unwrap();
        let fig = json(&fig);
        let region = &fig["data"][0];
        assert_eq!(region["name"], "trained");
        assert_eq!(region["fill"], "toself");
        assert_eq!(region["x"][1], 10.0);
        assert_eq!(
            (region["y"][0].as_f64(), region["y"][2].as_f64()),
            (Some(0.5), Some(8.0))
        );
        assert_eq!(fig["data"][1]["name"], "a");
        let base = || lines(&[1.0, 2.0], &[("a", vec![2.0, 3.0])]);
        assert!(base().region(2.0, 1.0, "inverted").figure().is_err());
        assert!(base().region(0.0, 1.0, "at 0").log_x().figure().is_err());
        assert!(base().region(f64::NAN, 1.0, "nan").figure().is_err());
    }

    #[test]
    fn lines_xy_keeps_each_series_x() {
        let series = vec![
            ("a".to_string(), vec![1.0, 2.0], vec![3.0, 4.0]),
            ("b".to_string(), vec![5.0], vec![6.0]),
        ];
        let fig = json(&lines_xy(&series).figure().unwrap());
        assert_eq!(fig["data"][1]["x"][0], 5.0);
        let bad = [("c", vec![1.0], vec![1.0, 2.0])];
        assert!(matches!(
            lines_xy(&bad).figure(),
            Err(Error::ShapeMismatch { .. })
        ));
    }

    #[test]
    fn lines_df_draws_one_line_per_colour() {
        let frame = df!(
            "length" => [128u32, 256, 128, 256, 512],
            "ppl" => [3.0, 3.5, 3.1, 9.0, 4.0],
            "scheme" => ["rope", "rope", "alibi", "alibi", "rope"],
        )
        .unwrap();
        let fig = json(
            &lines_df(&frame, "length", "ppl", Some("scheme"))
                .unwrap()
                .figure()
                .unwrap(),
        );
        let data = fig["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[0]["name"], "rope");
        assert_eq!(data[0]["x"], serde_json::json!([128.0, 256.0, 512.0]));
        assert_eq!(data[1]["y"], serde_json::json!([3.1, 9.0]));
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "length");
        assert_eq!(fig["layout"]["yaxis"]["title"]["text"], "ppl");
        let single = lines_df(&frame, "length", "ppl", None).unwrap();
        assert_eq!(
            json(&single.figure().unwrap())["data"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn lines_df_colours_by_integers_and_names_missing_columns() {
        let frame =
            df!("x" => [1.0, 2.0, 1.0], "y" => [1.0, 2.0, 3.0], "head" => [0i32, 0, 1]).unwrap();
        let fig = json(
            &lines_df(&frame, "x", "y", Some("head"))
                .unwrap()
                .figure()
                .unwrap(),
        );
        assert_eq!(fig["data"][1]["name"], "1");
        for (x, y, c) in [
            ("nope", "y", None),
            ("x", "nope", None),
            ("x", "y", Some("nope")),
        ] {
            let err = lines_df(&frame, x, y, c).unwrap_err();
            assert!(err.to_string().contains("nope"), "{err}");
        }
    }
}
