//! The figures the notebooks draw again and again, built in one call.

use ndarray::Array2;
use plotly::color::NamedColor;
use plotly::common::{ColorBar, ColorScale, ColorScalePalette, Mode, Title};
use plotly::layout::{Axis, AxisType, Layout};
use plotly::{HeatMap, Plot, Scatter};

use super::display::Figure;
use crate::error::{ensure, invalid};
use crate::{Error, Result};

/// A heatmap of a matrix: row `i`, column `j` of `z` is drawn at `y = i`, `x = j`.
///
/// Signed data (a sinusoidal table, a bias matrix) gets a diverging red-blue scale centred on
/// zero; non-negative data gets plotly's default sequential scale. NaN cells stay blank.
///
/// # Errors
/// [`Error::InvalidParameter`] if `z` has no element.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let pe = sinusoidal_table(32, 16)?;
/// let fig = heatmap(&pe, "Sinusoidal table", "dimension i", "position m", "value")?;
/// assert!(fig.to_json().contains("heatmap"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn heatmap(
    z: &Array2<f32>,
    title: &str,
    x_label: &str,
    y_label: &str,
    colorbar_title: &str,
) -> Result<Figure> {
    let (rows, cols) = z.dim();
    ensure(
        rows > 0 && cols > 0,
        "z",
        format!("a {rows}x{cols} matrix"),
        "a matrix with at least one row and one column",
    )?;
    let finite = || z.iter().copied().filter(|v| v.is_finite());
    let min = finite().fold(f32::INFINITY, f32::min);
    let max = finite().fold(f32::NEG_INFINITY, f32::max);
    // z[i][j] -> (x = j, y = i), [rows][cols]
    let values: Vec<Vec<f32>> = z.rows().into_iter().map(|row| row.to_vec()).collect();
    let x: Vec<usize> = (0..cols).collect();
    let y: Vec<usize> = (0..rows).collect();
    let mut trace = HeatMap::new(x, y, values).color_bar(ColorBar::new().title(colorbar_title));
    if min < 0.0 && max > 0.0 {
        trace = trace
            .color_scale(ColorScale::Palette(ColorScalePalette::RdBu))
            .reverse_scale(true)
            .zmid(0.0);
    }
    let mut plot = Plot::new();
    plot.add_trace(trace);
    plot.set_layout(layout(title, axis(x_label), axis(y_label)));
    Ok(Figure::new(plot))
}

/// Options of [`lines_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineOptions {
    /// Logarithmic x axis (every x must be > 0). Default: linear.
    pub log_x: bool,
    /// Logarithmic y axis (every y must be > 0). Default: linear.
    pub log_y: bool,
    /// Draw a marker at each point as well as the line. Default: line only.
    pub markers: bool,
}

/// One line per named series, all over the same `x`; names may be `&str` or `String`.
///
/// Same as [`lines_with`] with [`LineOptions::default`] (linear axes, no markers).
///
/// # Errors
/// See [`lines_with`].
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let x = [0.0, 1.0, 2.0];
/// let fig = lines(&x, &[("x^2", vec![0.0, 1.0, 4.0]), ("x", x.to_vec())], "Powers", "x", "y")?;
/// assert!(fig.to_json().contains("x^2"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn lines<S: AsRef<str>>(
    x: &[f64],
    series: &[(S, Vec<f64>)],
    title: &str,
    x_label: &str,
    y_label: &str,
) -> Result<Figure> {
    lines_with(x, series, title, x_label, y_label, LineOptions::default())
}

/// One line per named series, all over the same `x`, with log axes or markers on request.
///
/// # Errors
/// - [`Error::InvalidParameter`] if `x` or `series` is empty, or a log axis gets a value
///   that is not > 0;
/// - [`Error::ShapeMismatch`] if a series does not have one value per `x`.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let x: Vec<f64> = (1..=4).map(|p| 2f64.powi(p)).collect();
/// let y = x.iter().map(|v| 1.0 / v).collect();
/// let options = LineOptions { log_x: true, log_y: true, ..Default::default() };
/// let fig = lines_with(&x, &[("1/x", y)], "Log-log", "x", "y", options)?;
/// assert!(fig.to_json().contains(r#""type":"log""#));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn lines_with<S: AsRef<str>>(
    x: &[f64],
    series: &[(S, Vec<f64>)],
    title: &str,
    x_label: &str,
    y_label: &str,
    options: LineOptions,
) -> Result<Figure> {
    ensure(!x.is_empty(), "x", "[]", "at least one point")?;
    ensure(!series.is_empty(), "series", "[]", "at least one series")?;
    for (name, y) in series {
        let name = name.as_ref();
        if y.len() != x.len() {
            return Err(Error::ShapeMismatch {
                context: "lines: one y per x",
                expected: format!("{} values", x.len()),
                found: format!("{} values in series {name:?}", y.len()),
            });
        }
        if options.log_y {
            if let Some(bad) = y.iter().find(|v| **v <= 0.0) {
                return Err(invalid("y", bad, "values > 0 on a log y axis"));
            }
        }
    }
    if options.log_x {
        if let Some(bad) = x.iter().find(|v| **v <= 0.0) {
            return Err(invalid("x", bad, "values > 0 on a log x axis"));
        }
    }
    let mode = if options.markers {
        Mode::LinesMarkers
    } else {
        Mode::Lines
    };
    let mut plot = Plot::new();
    for (name, y) in series {
        plot.add_trace(
            Scatter::new(x.to_vec(), y.clone())
                .name(name.as_ref())
                .mode(mode.clone()),
        );
    }
    let axis_type = |log: bool| if log { AxisType::Log } else { AxisType::Linear };
    plot.set_layout(layout(
        title,
        axis(x_label).type_(axis_type(options.log_x)),
        axis(y_label).type_(axis_type(options.log_y)),
    ));
    Ok(Figure::new(plot))
}

/// An axis with a title and light grey grid lines.
fn axis(label: &str) -> Axis {
    Axis::new()
        .title(Title::with_text(label))
        .grid_color(NamedColor::LightGray)
}

/// The common layout: a title, two axes, a white background.
fn layout(title: &str, x_axis: Axis, y_axis: Axis) -> Layout {
    Layout::new()
        .title(Title::with_text(title))
        .x_axis(x_axis)
        .y_axis(y_axis)
        .plot_background_color(NamedColor::White)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use serde_json::Value;

    fn json(fig: &Figure) -> Value {
        serde_json::from_str(&fig.to_json()).unwrap()
    }

    #[test]
    fn heatmap_keeps_rows_as_y() {
        let z = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let fig = json(&heatmap(&z, "t", "col", "row", "value").unwrap());
        let trace = &fig["data"][0];
        assert_eq!(trace["type"], "heatmap");
        assert_eq!(trace["z"][1][2], 6.0);
        assert_eq!(trace["x"].as_array().unwrap().len(), 3);
        assert_eq!(trace["y"].as_array().unwrap().len(), 2);
        assert_eq!(trace["colorbar"]["title"]["text"], "value");
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "col");
        assert_eq!(fig["layout"]["yaxis"]["title"]["text"], "row");
        assert!(
            trace.get("zmid").is_none(),
            "positive data keeps the default scale"
        );
    }

    #[test]
    fn signed_heatmap_is_centred_on_zero() {
        let z = array![[-1.0f32, 0.5], [f32::NAN, 1.0]];
        let fig = json(&heatmap(&z, "t", "x", "y", "v").unwrap());
        assert_eq!(fig["data"][0]["zmid"], 0.0);
        assert!(fig["data"][0]["z"][1][0].is_null(), "NaN is a blank cell");
    }

    #[test]
    fn empty_heatmap_is_an_error() {
        let z = Array2::<f32>::zeros((0, 3));
        let err = heatmap(&z, "t", "x", "y", "v").unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { name: "z", .. }));
    }

    #[test]
    fn lines_takes_owned_names() {
        let series: Vec<(String, Vec<f64>)> =
            (0..3).map(|k| (format!("k={k}"), vec![k as f64])).collect();
        let fig = json(&lines(&[0.0], &series, "t", "x", "y").unwrap());
        assert_eq!(fig["data"][2]["name"], "k=2");
    }

    #[test]
    fn lines_draws_one_trace_per_series() {
        let x = [1.0, 2.0, 3.0];
        let fig = lines(
            &x,
            &[("a", vec![1.0, 2.0, 3.0]), ("b", vec![3.0, 2.0, 1.0])],
            "title",
            "x",
            "y",
        )
        .unwrap();
        let fig = json(&fig);
        let data = fig["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[1]["name"], "b");
        assert_eq!(data[1]["y"][0], 3.0);
        assert_eq!(data[0]["mode"], "lines");
        assert_eq!(fig["layout"]["title"]["text"], "title");
        assert_eq!(fig["layout"]["xaxis"]["type"], "linear");
    }

    #[test]
    fn lines_with_log_axes_and_markers() {
        let options = LineOptions {
            log_x: true,
            log_y: true,
            markers: true,
        };
        let fig = lines_with(
            &[1.0, 10.0],
            &[("a", vec![1.0, 0.1])],
            "t",
            "x",
            "y",
            options,
        );
        let fig = json(&fig.unwrap());
        assert_eq!(fig["layout"]["xaxis"]["type"], "log");
        assert_eq!(fig["layout"]["yaxis"]["type"], "log");
        assert_eq!(fig["layout"]["xaxis"]["title"]["text"], "x");
        assert_eq!(fig["data"][0]["mode"], "lines+markers");
    }

    #[test]
    fn lines_rejects_bad_input() {
        let short = lines(&[1.0, 2.0], &[("a", vec![1.0])], "t", "x", "y").unwrap_err();
        assert!(matches!(short, Error::ShapeMismatch { .. }));
        assert!(short.to_string().contains("\"a\""));
        assert!(lines(&[], &[("a", vec![])], "t", "x", "y").is_err());
        let no_series: &[(&str, Vec<f64>)] = &[];
        assert!(lines(&[1.0], no_series, "t", "x", "y").is_err());
        let log_x = LineOptions {
            log_x: true,
            ..Default::default()
        };
        let zero = lines_with(&[0.0, 1.0], &[("a", vec![1.0, 1.0])], "t", "x", "y", log_x);
        assert!(matches!(
            zero,
            Err(Error::InvalidParameter { name: "x", .. })
        ));
    }
}
