//! Heatmaps side by side on one colour scale ([`panels`]): the bias of each head of a scheme,
//! so that heads compare at a glance.

use ndarray::{ArrayBase, Data, Ix3};
use plotly::common::{ColorBar, ColorScale, ColorScalePalette, Title};
use plotly::layout::{Axis, GridPattern, LayoutGrid};
use plotly::{HeatMap, Plot};

use super::{bundle_or_error, labelled, Labels, ToF64};
use crate::error::ensure;
use crate::notebook::display::{Figure, Show};
use crate::Result;

/// At most this many panels fit side by side.
pub const MAX_PANELS: usize = 4;

/// Heatmaps side by side, built by [`panels`]: panel `h` draws `z[h]` (row `i` at `y = i`,
/// column `j` at `x = j`), all on one colour scale, symmetric around zero.
#[derive(Clone, Debug, PartialEq)]
pub struct Panels {
    /// `[panel][row][column]`.
    z: Vec<Vec<Vec<f64>>>,
    names: Vec<String>,
    labels: Labels,
    colorbar: String,
}

/// One heatmap per entry of axis 0 of `z` (`[panels, rows, columns]`, at most [`MAX_PANELS`]),
/// side by side on a shared red-blue scale centred on zero; NaN cells stay blank.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let bias = alibi_bias(3, 16, 16)?; // [H, L, L]
/// let fig = panels(&bias).names(&["head 1", "head 2", "head 3"])
///     .title("ALiBi bias per head").x("key j").y("query i").colorbar("bias")
///     .figure()?;
/// assert!(fig.to_json().contains("xaxis3"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn panels<S, A>(z: &ArrayBase<S, Ix3>) -> Panels
where
    S: Data<Elem = A>,
    A: ToF64 + Copy,
{
    let z: Vec<Vec<Vec<f64>>> = z
        .outer_iter()
        .map(|m| {
            m.rows()
                .into_iter()
                .map(|r| r.iter().map(|v| v.to_f64()).collect())
                .collect()
        })
        .collect();
    let names = (1..=z.len()).map(|h| format!("panel {h}")).collect();
    Panels {
        z,
        names,
        labels: Labels::default(),
        colorbar: String::new(),
    }
}

labelled!(Panels, " (under every panel)", " (of the first panel)");

impl Panels {
    /// The name of each panel, written under its x axis (default `panel 1`, `panel 2`, ...).
    pub fn names<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.names = names.iter().map(|n| n.as_ref().to_string()).collect();
        self
    }

    /// The colour bar's title (what a cell's value means, with its unit).
    pub fn colorbar(mut self, label: impl Into<String>) -> Self {
        self.colorbar = label.into();
        self
    }

    /// The figure.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] with no panel or more than [`MAX_PANELS`], an empty
    /// panel, or not one name per panel.
    pub fn figure(&self) -> Result<Figure> {
        let n = self.z.len();
        ensure(
            (1..=MAX_PANELS).contains(&n),
            "panels",
            n,
            &format!("1 to {MAX_PANELS} panels"),
        )?;
        ensure(
            self.z[0].first().is_some_and(|r| !r.is_empty()),
            "panels",
            "an empty matrix",
            "matrices with at least one row and one column",
        )?;
        ensure(
            self.names.len() == n,
            "names",
            self.names.len(),
            &format!("one name per panel ({n})"),
        )?;
        let limit = self
            .z
            .iter()
            .flatten()
            .flatten()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        let mut plot = Plot::new();
        let mut layout = self.labels.layout(Axis::new(), Axis::new()).grid(
            LayoutGrid::new()
                .rows(1)
                .columns(n)
                .pattern(GridPattern::Independent),
        );
        for (h, z) in self.z.iter().enumerate() {
            // panel h uses the axes x, y (h = 0) or x{h+1}, y{h+1}
            let id = if h == 0 {
                String::new()
            } else {
                (h + 1).to_string()
            };
            let (rows, cols) = (z.len(), z[0].len());
            plot.add_trace(
                HeatMap::new((0..cols).collect(), (0..rows).collect(), z.clone())
                    .name(self.names[h].as_str())
                    .x_axis(format!("x{id}"))
                    .y_axis(format!("y{id}"))
                    .color_scale(ColorScale::Palette(ColorScalePalette::RdBu))
                    .reverse_scale(true)
                    .zmin(-limit)
                    .zmax(limit)
                    .show_scale(h == n - 1)
                    .color_bar(ColorBar::new().title(self.colorbar.as_str())),
            );
            let title = if self.labels.x.is_empty() {
                self.names[h].clone()
            } else {
                format!("{} ({})", self.labels.x, self.names[h])
            };
            let axis = Axis::new().title(Title::with_text(title));
            layout = match h {
                0 => layout.x_axis(axis),
                1 => layout.x_axis2(axis),
                2 => layout.x_axis3(axis),
                _ => layout.x_axis4(axis),
            };
        }
        plot.set_layout(layout);
        Ok(Figure::new(plot))
    }
}

impl Show for Panels {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        bundle_or_error(self.figure())
    }
}

#[cfg(test)]
mod tests {
    use super::super::json;
    use super::*;
    use ndarray::Array3;

    #[test]
    fn panels_share_one_symmetric_scale() {
        let z = Array3::from_shape_fn((2, 3, 4), |(h, i, j)| {
            (h as f32 + 1.0) * (i as f32 - j as f32)
        });
        let fig = json(
            &panels(&z)
                .names(&["a", "b"])
                .x("key")
                .y("query")
                .figure()
                .unwrap(),
        );
        let data = fig["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[1]["xaxis"], "x2");
        assert_eq!(data[0]["zmax"], 6.0);
        assert_eq!(data[1]["zmin"], -6.0);
        assert_eq!(data[0]["showscale"], false);
        assert_eq!(fig["layout"]["xaxis2"]["title"]["text"], "key (b)");
        assert_eq!(fig["layout"]["grid"]["columns"], 2);
    }

    #[test]
    fn panels_refuse_what_they_cannot_lay_out() {
        assert!(panels(&Array3::<f32>::zeros((5, 2, 2))).figure().is_err());
        assert!(panels(&Array3::<f32>::zeros((0, 2, 2))).figure().is_err());
        assert!(panels(&Array3::<f32>::zeros((1, 0, 2))).figure().is_err());
        assert!(panels(&Array3::<f32>::zeros((2, 2, 2)))
            .names(&["one"])
            .figure()
            .is_err());
    }
}
