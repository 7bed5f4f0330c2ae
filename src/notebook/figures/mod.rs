//! The figures the notebooks draw again and again, with named options in the spirit of plotly
//! express, one file per family: [`heatmap`] (`heatmap(&z).title("..").x("..").y("..")`),
//! [`panels`] (one heatmap per head, side by side on one scale) and [`lines`]
//! (`lines(&x, &series).log_y()`, `lines_xy`, `lines_with_bands`, and
//! `lines_df(&df, "x column", "y column", Some("colour column"))`).
//!
//! A builder ([`Heatmap`], [`Lines`]) displays itself when a cell ends in it; [`Heatmap::figure`]
//! and [`Lines::figure`] validate the data and give the [`Figure`] (a [`plotly::Plot`]) for
//! anything the options do not cover. Data comes as anything that converts to `f64`
//! ([`ToF64`]: floats and integers), in slices, vectors, arrays or `ndarray` views ([`Values`]).
//! A line may carry a shaded band ([`Lines::band`]: a mean with its spread over seeds); the
//! names of a model's lines come from [`crate::results`] ([`crate::results::ModelKey::label`],
//! [`crate::results::with_seed_count`], [`crate::results::SeedCurve::band`]), never from here.
//! What every figure shares, its title, axis titles and height, is one [`Labels`] builder.

mod heatmap;
mod lines;
mod panels;

pub use heatmap::{heatmap, Heatmap};
pub use lines::{lines, lines_df, lines_with_bands, lines_xy, BandSeries, Lines, PALETTE};
pub use panels::{panels, Panels, MAX_PANELS};

use ndarray::{ArrayBase, Data, Ix1};
use plotly::color::NamedColor;
use plotly::common::Title;
use plotly::layout::{Axis, Layout};

use super::display::{Figure, Show};
use crate::Result;

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
pub(crate) struct Labels {
    pub(crate) title: String,
    pub(crate) x: String,
    pub(crate) y: String,
    pub(crate) height: Option<usize>,
}

/// The label setters every figure builder has (`title`, `x`, `y`, `height`), written once:
/// `labelled!(Builder, "what x labels", "what y labels")` inside the figures module, for a
/// builder with a `labels: Labels` field.
macro_rules! labelled {
    ($builder:ty, $x:literal, $y:literal) => {
        impl $builder {
            /// The figure's title.
            pub fn title(mut self, title: impl Into<String>) -> Self {
                self.labels.title = title.into();
                self
            }

            #[doc = concat!("The x axis title", $x, ".")]
            pub fn x(mut self, label: impl Into<String>) -> Self {
                self.labels.x = label.into();
                self
            }

            #[doc = concat!("The y axis title", $y, ".")]
            pub fn y(mut self, label: impl Into<String>) -> Self {
                self.labels.y = label.into();
                self
            }

            /// The figure's height in pixels (default 460).
            pub fn height(mut self, px: usize) -> Self {
                self.labels.height = Some(px);
                self
            }
        }
    };
}
pub(crate) use labelled;

impl Labels {
    /// The common layout: a title, two axes with light grey grid lines, a white background.
    pub(crate) fn layout(&self, x_axis: Axis, y_axis: Axis) -> Layout {
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
pub(crate) fn bundle_or_error(figure: Result<Figure>) -> Vec<(&'static str, String)> {
    match figure {
        Ok(figure) => figure.mime_bundle(),
        Err(e) => {
            eprintln!("error: {e}");
            vec![("text/plain", format!("error: {e}"))]
        }
    }
}

/// A figure's JSON, parsed, for the tests of every family.
#[cfg(test)]
fn json(fig: &Figure) -> serde_json::Value {
    serde_json::from_str(&fig.to_json()).unwrap()
}
