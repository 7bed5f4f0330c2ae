//! Heatmaps of matrices ([`heatmap`]): a sinusoidal table, a bias or bucket matrix, an
//! attention map.

use ndarray::{Array2, ArrayBase, Data, Ix2};
use plotly::common::{ColorBar, ColorScale, ColorScalePalette};
use plotly::layout::{Annotation, Axis};
use plotly::{HeatMap, Plot};

use super::{bundle_or_error, labelled, Labels, ToF64, Values};
use crate::error::ensure;
use crate::notebook::display::{Figure, Show};
use crate::{Error, Result};

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
    /// A text per cell, written on it.
    cell_text: Option<Vec<Vec<String>>>,
    /// Row 0 at the top, one tick per row and column, as a matrix is printed.
    top_down: bool,
}

/// A heatmap of `z` (any element type that converts to `f64`, an owned array or a view).
///
/// Nothing is checked until the figure is built ([`Heatmap::figure`], or the display of a cell
/// that ends in the heatmap), so the options chain without `?`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
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
        cell_text: None,
        top_down: false,
    }
}

labelled!(Heatmap, " (the columns of `z`)", " (the rows of `z`)");

impl Heatmap {
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

    /// A text written on each cell (`text[i][j]` on row `i`, column `j`): what a small matrix
    /// holds, with the colour for something else (the row it came from, say).
    ///
    /// # Examples
    /// ```
    /// use posenc::notebook::prelude::*;
    /// let labels = Array2::from_shape_fn((2, 3), |(i, j)| format!("q{i}·r{j}"));
    /// let fig = heatmap(&Array2::from_shape_fn((2, 3), |(i, _)| i)).cell_text(&labels).top_down().figure()?;
    /// assert!(fig.to_json().contains("q1·r2"));
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn cell_text(mut self, text: &Array2<String>) -> Self {
        self.cell_text = Some(text.rows().into_iter().map(|r| r.to_vec()).collect());
        self
    }

    /// Row 0 at the top and a tick on every row and column, as a matrix is printed (plotly
    /// puts row 0 at the bottom).
    pub fn top_down(mut self) -> Self {
        self.top_down = true;
        self
    }

    /// The figure.
    ///
    /// # Errors
    /// - [`Error::InvalidParameter`] if `z` has no element;
    /// - [`Error::ShapeMismatch`] if the x values are not one per column or the y values not
    ///   one per row, or the cell texts are not one per cell.
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
        let (x, y) = (x.as_slice(), y.as_slice());
        let finite = || self.z.iter().flatten().copied().filter(|v| v.is_finite());
        let min = finite().fold(f64::INFINITY, f64::min);
        let max = finite().fold(f64::NEG_INFINITY, f64::max);
        let mut trace = HeatMap::new(x.to_vec(), y.to_vec(), self.z.clone())
            .color_bar(ColorBar::new().title(self.colorbar.as_str()));
        if min < 0.0 && max > 0.0 {
            trace = trace
                .color_scale(ColorScale::Palette(ColorScalePalette::RdBu))
                .reverse_scale(true)
                .zmid(0.0);
        }
        let mut plot = Plot::new();
        plot.add_trace(trace);
        let (x_axis, y_axis) = if self.top_down {
            let top = vec![
                y.iter().copied().fold(f64::NEG_INFINITY, f64::max) + 0.5,
                y[0] - 0.5,
            ];
            (Axis::new().dtick(1.0), Axis::new().dtick(1.0).range(top))
        } else {
            (Axis::new(), Axis::new())
        };
        let mut layout = self.labels.layout(x_axis, y_axis);
        if let Some(text) = &self.cell_text {
            if text.len() != rows || text.iter().any(|r| r.len() != cols) {
                return Err(Error::ShapeMismatch {
                    context: "heatmap: one cell text per cell",
                    expected: format!("{rows}x{cols}"),
                    found: format!("{} rows", text.len()),
                });
            }
            let notes = (0..rows).flat_map(|i| (0..cols).map(move |j| (i, j)));
            layout = layout.annotations(
                notes
                    .map(|(i, j)| {
                        Annotation::new()
                            .x(x[j])
                            .y(y[i])
                            .text(text[i][j].as_str())
                            .show_arrow(false)
                    })
                    .collect(),
            );
        }
        plot.set_layout(layout);
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

#[cfg(test)]
mod tests {
    use super::super::json;
    use super::*;
    use ndarray::{array, Array2};

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
    fn cell_text_and_top_down_draw_a_printed_matrix() {
        let z = array![[0.0f32, 1.0], [1.0, 2.0], [2.0, 3.0]];
        let text = Array2::from_shape_fn((3, 2), |(i, j)| format!("{i},{j}"));
        let fig = json(&heatmap(&z).cell_text(&text).top_down().figure().unwrap());
        let notes = fig["layout"]["annotations"].as_array().unwrap();
        assert_eq!(notes.len(), 6);
        assert_eq!(
            (
                notes[5]["text"].as_str(),
                notes[5]["x"].as_f64(),
                notes[5]["y"].as_f64()
            ),
            (Some("2,1"), Some(1.0), Some(2.0))
        );
        assert_eq!(fig["layout"]["yaxis"]["range"][0], 2.5, "row 0 on top");
        let wrong = Array2::from_elem((2, 2), String::new());
        assert!(heatmap(&z).cell_text(&wrong).figure().is_err());
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
}
