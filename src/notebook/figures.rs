//! The figures the notebooks draw again and again, with named options in the spirit of plotly
//! express: `heatmap(&z).title("..").x("..").y("..")`, `lines(&x, &series).log_y()`, and
//! `lines_df(&df, "x column", "y column", Some("colour column"))`.
//!
//! A builder ([`Heatmap`], [`Lines`]) displays itself when a cell ends in it; [`Heatmap::figure`]
//! and [`Lines::figure`] validate the data and give the [`Figure`] (a [`plotly::Plot`]) for
//! anything the options do not cover. Data comes as anything that converts to `f64`
//! ([`ToF64`]: floats and integers), in slices, vectors, arrays or `ndarray` views ([`Values`]).
//! A line may carry a shaded band ([`Lines::band`]: a mean with its spread over seeds).

use ndarray::{ArrayBase, Data, Ix1, Ix2};
use plotly::color::NamedColor;
use plotly::common::{
    ColorBar, ColorScale, ColorScalePalette, Fill, HoverInfo, Line, Marker, Mode, Title,
};
use plotly::layout::{Axis, AxisType, Layout};
use plotly::{HeatMap, Plot, Scatter};
use polars::prelude::DataFrame;

use super::display::{Figure, Show};
use super::results::column_f64;
use crate::error::{ensure, invalid};
use crate::{Error, Result};

/// A number that converts to `f64` for plotting and comparing: every float and integer type
/// (`usize` bucket indices as well as `f32` scores), and references to them.
pub trait ToF64 {
    /// The value as `f64` (integers above 2^53 round to the nearest `f64`).
    fn to_f64(self) -> f64;
}

macro_rules! to_f64_as {
    ($($t:ty),*) => {$(
        impl ToF64 for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
to_f64_as!(f32, f64, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl<T: ToF64 + Copy> ToF64 for &T {
    fn to_f64(self) -> f64 {
        (*self).to_f64()
    }
}

/// A sequence of numbers for one axis or one series: a slice, a `Vec`, an array `[T; N]` or a
/// one-dimensional `ndarray` (owned or a view, e.g. `pe.column(3)`), of any [`ToF64`] type.
pub trait Values {
    /// The numbers as `f64`, in order.
    fn to_f64_vec(&self) -> Vec<f64>;
}

impl<T: ToF64 + Copy> Values for [T] {
    fn to_f64_vec(&self) -> Vec<f64> {
        self.iter().map(|v| v.to_f64()).collect()
    }
}

impl<T: ToF64 + Copy> Values for Vec<T> {
    fn to_f64_vec(&self) -> Vec<f64> {
        self.as_slice().to_f64_vec()
    }
}

impl<T: ToF64 + Copy, const N: usize> Values for [T; N] {
    fn to_f64_vec(&self) -> Vec<f64> {
        self.as_slice().to_f64_vec()
    }
}

impl<S, T> Values for ArrayBase<S, Ix1>
where
    S: Data<Elem = T>,
    T: ToF64 + Copy,
{
    fn to_f64_vec(&self) -> Vec<f64> {
        self.iter().map(|v| v.to_f64()).collect()
    }
}

impl<V: Values + ?Sized> Values for &V {
    fn to_f64_vec(&self) -> Vec<f64> {
        (**self).to_f64_vec()
    }
}

/// The labels every figure has: a title, the two axis titles and an optional height.
#[derive(Clone, Debug, Default, PartialEq)]
struct Labels {
    title: String,
    x: String,
    y: String,
    height: Option<usize>,
}

impl Labels {
    /// The common layout: a title, two axes with light grey grid lines, a white background.
    fn layout(&self, x_axis: Axis, y_axis: Axis) -> Layout {
        let grid = |axis: Axis, label: &str| {
            axis.title(Title::with_text(label))
                .grid_color(NamedColor::LightGray)
        };
        let layout = Layout::new()
            .title(Title::with_text(&self.title))
            .x_axis(grid(x_axis, &self.x))
            .y_axis(grid(y_axis, &self.y))
            .plot_background_color(NamedColor::White);
        match self.height {
            Some(px) => layout.height(px),
            None => layout,
        }
    }
}

/// Sends a builder's figure, or, when its data is invalid, the error: printed to standard
/// error (which fails the notebook under `make test`) and shown as the cell's text.
fn bundle_or_error(figure: Result<Figure>) -> Vec<(&'static str, String)> {
    match figure {
        Ok(figure) => figure.mime_bundle(),
        Err(e) => {
            eprintln!("error: {e}");
            vec![("text/plain", format!("error: {e}"))]
        }
    }
}

/// A heatmap of a matrix, built by [`heatmap`]: row `i`, column `j` of `z` is drawn at
/// `y = i`, `x = j` (or at the given [`Heatmap::x_values`] and [`Heatmap::y_values`]).
///
/// Signed data (a sinusoidal table, a bias matrix) gets a diverging red-blue scale centred on
/// zero; non-negative data gets plotly's default sequential scale. NaN cells stay blank.
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    z: Vec<Vec<f64>>,
    cols: usize,
    x_values: Option<Vec<f64>>,
    y_values: Option<Vec<f64>>,
    labels: Labels,
    colorbar: String,
}

/// A heatmap of `z` (any element type that converts to `f64`, an owned array or a view).
///
/// Nothing is checked until the figure is built ([`Heatmap::figure`], or the display of a cell
/// that ends in the heatmap), so the options chain without `?`.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let pe = sinusoidal_table(32, 16)?;
/// let fig = heatmap(&pe).title("Sinusoidal table").x("dimension i").y("position m")
///     .colorbar("value")
///     .figure()?;
/// assert!(fig.to_json().contains("heatmap"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn heatmap<S, A>(z: &ArrayBase<S, Ix2>) -> Heatmap
where
    S: Data<Elem = A>,
    A: ToF64 + Copy,
{
    Heatmap {
        // z[i][j] -> (x = j, y = i), [rows][cols]
        z: z.rows().into_iter().map(|row| row.to_f64_vec()).collect(),
        cols: z.ncols(),
        x_values: None,
        y_values: None,
        labels: Labels::default(),
        colorbar: String::new(),
    }
}

impl Heatmap {
    /// The figure's title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.labels.title = title.into();
        self
    }

    /// The x axis title (the columns of `z`).
    pub fn x(mut self, label: impl Into<String>) -> Self {
        self.labels.x = label.into();
        self
    }

    /// The y axis title (the rows of `z`).
    pub fn y(mut self, label: impl Into<String>) -> Self {
        self.labels.y = label.into();
        self
    }

    /// The colour bar's title (what a cell's value means, with its unit).
    pub fn colorbar(mut self, label: impl Into<String>) -> Self {
        self.colorbar = label.into();
        self
    }

    /// The x coordinate of each column (default `0, 1, ...`), e.g. relative positions.
    pub fn x_values(mut self, x: &(impl Values + ?Sized)) -> Self {
        self.x_values = Some(x.to_f64_vec());
        self
    }

    /// The y coordinate of each row (default `0, 1, ...`).
    pub fn y_values(mut self, y: &(impl Values + ?Sized)) -> Self {
        self.y_values = Some(y.to_f64_vec());
        self
    }

    /// The figure's height in pixels (default 460).
    pub fn height(mut self, px: usize) -> Self {
        self.labels.height = Some(px);
        self
    }

    /// The figure.
    ///
    /// # Errors
    /// - [`Error::InvalidParameter`] if `z` has no element;
    /// - [`Error::ShapeMismatch`] if the x values are not one per column or the y values not
    ///   one per row.
    pub fn figure(&self) -> Result<Figure> {
        let (rows, cols) = (self.z.len(), self.cols);
        ensure(
            rows > 0 && cols > 0,
            "z",
            format!("a {rows}x{cols} matrix"),
            "a matrix with at least one row and one column",
        )?;
        let x = coordinates(&self.x_values, cols, "heatmap: one x value per column")?;
        let y = coordinates(&self.y_values, rows, "heatmap: one y value per row")?;
        let finite = || self.z.iter().flatten().copied().filter(|v| v.is_finite());
        let min = finite().fold(f64::INFINITY, f64::min);
        let max = finite().fold(f64::NEG_INFINITY, f64::max);
        let mut trace = HeatMap::new(x, y, self.z.clone())
            .color_bar(ColorBar::new().title(self.colorbar.as_str()));
        if min < 0.0 && max > 0.0 {
            trace = trace
                .color_scale(ColorScale::Palette(ColorScalePalette::RdBu))
                .reverse_scale(true)
                .zmid(0.0);
        }
        let mut plot = Plot::new();
        plot.add_trace(trace);
        plot.set_layout(self.labels.layout(Axis::new(), Axis::new()));
        Ok(Figure::new(plot))
    }
}

/// The given coordinates, checked to be `n`, or `0, 1, ..., n - 1`.
fn coordinates(values: &Option<Vec<f64>>, n: usize, context: &'static str) -> Result<Vec<f64>> {
    match values {
        None => Ok((0..n).map(|i| i as f64).collect()),
        Some(v) if v.len() == n => Ok(v.clone()),
        Some(v) => Err(Error::ShapeMismatch {
            context,
            expected: format!("{n} values"),
            found: format!("{} values", v.len()),
        }),
    }
}

impl Show for Heatmap {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        bundle_or_error(self.figure())
    }
}

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
}

/// One line per named series, all over the same `x`; names may be `&str` or `String`, values
/// any [`Values`] (a `Vec<f64>`, a slice, an `ndarray` column, ...).
///
/// Nothing is checked until the figure is built ([`Lines::figure`], or the display of a cell
/// that ends in the plot), so the options chain without `?`.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
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
    }
}

/// One line per named series, each with its own x values: `[(name, x, y)]`, as
/// [`Lines::line_xy`] adds them one at a time.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
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
/// use posenc::prelude::*;
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
/// use posenc::prelude::*;
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
    })
}

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
    /// use posenc::prelude::*;
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

    /// The figure's title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.labels.title = title.into();
        self
    }

    /// The x axis title.
    pub fn x(mut self, label: impl Into<String>) -> Self {
        self.labels.x = label.into();
        self
    }

    /// The y axis title.
    pub fn y(mut self, label: impl Into<String>) -> Self {
        self.labels.y = label.into();
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

    /// The figure's height in pixels (default 460).
    pub fn height(mut self, px: usize) -> Self {
        self.labels.height = Some(px);
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
        let mode = if self.markers {
            Mode::LinesMarkers
        } else {
            Mode::Lines
        };
        let colour = |i: usize| PALETTE[i % PALETTE.len()];
        let mut plot = Plot::new();
        // the bands first, under every line
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
    use super::*;
    use ndarray::{array, Array2};
    use polars::prelude::df;
    use serde_json::Value;

    fn json(fig: &Figure) -> Value {
        serde_json::from_str(&fig.to_json()).unwrap()
    }

    #[test]
    fn heatmap_keeps_rows_as_y_and_names_its_axes() {
        let z = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let fig = heatmap(&z).title("t").x("col").y("row").colorbar("value");
        let fig = json(&fig.figure().unwrap());
        let trace = &fig["data"][0];
        assert_eq!(trace["type"], "heatmap");
        assert_eq!(trace["z"][1][2], 6.0);
        assert_eq!(trace["x"].as_array().unwrap().len(), 3);
        assert_eq!(trace["y"].as_array().unwrap().len(), 2);
        assert_eq!(trace["colorbar"]["title"]["text"], "value");
        assert_eq!(fig["layout"]["title"]["text"], "t");
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "col");
        assert_eq!(fig["layout"]["yaxis"]["title"]["text"], "row");
        assert!(
            trace.get("zmid").is_none(),
            "positive data keeps the default scale"
        );
    }

    #[test]
    fn heatmap_takes_views_integers_and_coordinates() {
        let buckets = array![[0usize, 17], [1, 0]];
        let fig = heatmap(&buckets.view())
            .x_values(&[-1i64, 0])
            .y_values(&array![10.0f64, 11.0])
            .height(300);
        let fig = json(&fig.figure().unwrap());
        assert_eq!(fig["data"][0]["z"][0][1], 17.0);
        assert_eq!(fig["data"][0]["x"][0], -1.0);
        assert_eq!(fig["data"][0]["y"][1], 11.0);
        assert_eq!(fig["layout"]["height"], 300);
        let wrong = heatmap(&buckets).x_values(&[1, 2, 3]).figure();
        assert!(matches!(wrong, Err(Error::ShapeMismatch { .. })));
    }

    #[test]
    fn signed_heatmap_is_centred_on_zero() {
        let z = array![[-1.0f32, 0.5], [f32::NAN, 1.0]];
        let fig = json(&heatmap(&z).figure().unwrap());
        assert_eq!(fig["data"][0]["zmid"], 0.0);
        assert!(fig["data"][0]["z"][1][0].is_null(), "NaN is a blank cell");
    }

    #[test]
    fn empty_heatmap_is_an_error_and_its_display_says_so() {
        let z = Array2::<f32>::zeros((0, 3));
        let err = heatmap(&z).figure().unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { name: "z", .. }));
        let bundle = heatmap(&z).mime_bundle();
        assert_eq!(bundle.len(), 1);
        assert!(bundle[0].1.starts_with("error: invalid z"));
    }

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
