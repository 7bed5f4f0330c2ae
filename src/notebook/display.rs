//! Sending values to the notebook: evcxr's display protocol, the offline plotly figure, and
//! the [`Show`] trait that ties them together.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use plotly::Plot;
use polars::prelude::DataFrame;

use super::table::df_to_html;

/// The mime type of a plotly figure as JSON, drawn by JupyterLab's plotly renderer.
pub const PLOTLY_JSON_MIME: &str = "application/vnd.plotly.v1+json";

/// Height of a figure's `<div>` in pixels when the layout does not set one.
const DEFAULT_HEIGHT_PX: usize = 460;

/// Set in the process environment once plotly.js has been sent to the notebook.
///
/// Not a Rust `static`: evcxr links the crate into every cell's library anew, so each cell
/// would see a fresh copy of a static; the environment is one per kernel process.
const PLOTLY_JS_SENT_VAR: &str = "POSENC_NOTEBOOK_PLOTLY_JS_SENT";

/// Whether plotly.js still has to be sent, and from now on not any more.
fn take_plotly_js_turn() -> bool {
    if std::env::var_os(PLOTLY_JS_SENT_VAR).is_some() {
        return false;
    }
    std::env::set_var(PLOTLY_JS_SENT_VAR, "1");
    true
}

/// A `<div id>` unique within the page: process, time and a counter, since a per-cell copy of
/// a counter alone would repeat from cell to cell (see [`PLOTLY_JS_SENT_VAR`]).
fn new_div_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "posenc-figure-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A value the notebook can display: its representations, one per mime type.
///
/// [`show`] sends them; the front-end picks the richest one it can draw (JupyterLab draws a
/// figure from its plotly JSON, HTML export uses `text/html`, a terminal `text/plain`).
pub trait Show {
    /// `(mime type, content)` pairs, richest first.
    fn mime_bundle(&self) -> Vec<(&'static str, String)>;
}

/// Displays `item` as the output of the current cell.
///
/// All displays of one cell merge by mime type, so a second `show` in the same cell
/// replaces the first: put each figure or table in its own cell.
///
/// # Examples
/// ```no_run
/// use posenc::notebook::prelude::*;
/// let fig = lines(&[0.0, 1.0, 2.0], &[("y = x", [0.0, 1.0, 2.0])]).title("A line").x("x").y("y");
/// show(&fig);
/// ```
pub fn show<T: Show + ?Sized>(item: &T) {
    let out: String = item
        .mime_bundle()
        .iter()
        .map(|(mime, content)| evcxr_block(mime, content))
        .collect();
    print!("{out}");
}

/// One display block of evcxr's protocol: `content` tagged with its mime type.
///
/// evcxr turns every block a cell prints to standard output into an entry of that cell's
/// output data.
pub fn evcxr_block(mime: &str, content: &str) -> String {
    format!("EVCXR_BEGIN_CONTENT {mime}\n{content}\nEVCXR_END_CONTENT\n")
}

/// Lets a cell end in a value and have it displayed by [`show`]: evcxr calls
/// `.evcxr_display()` on a cell's final expression, and this trait (in the prelude) provides
/// it for every [`Show`] type that has no such method of its own (a
/// [`DataFrame`], an [`Html`] snippet). [`plotly::Plot`] has its own, which sends only the
/// plotly JSON: wrap a plot in a [`Figure`] or call [`show`] for the offline HTML as well.
pub trait NotebookDisplay {
    /// Displays `self` as the cell's output.
    fn evcxr_display(&self);
}

impl<T: Show + ?Sized> NotebookDisplay for T {
    fn evcxr_display(&self) {
        show(self);
    }
}

/// An HTML snippet to display as is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Html(pub String);

impl Show for Html {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        vec![("text/html", self.0.clone())]
    }
}

impl Show for DataFrame {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        vec![
            ("text/html", df_to_html(self)),
            ("text/plain", format!("{self}")),
        ]
    }
}

impl Show for Plot {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        // plotly.js goes with the first figure of the kernel, which is the first figure of
        // the notebook when it runs top to bottom (HTML export, CI).
        let include_js = take_plotly_js_turn();
        let traces = trace_count(self);
        vec![
            (PLOTLY_JSON_MIME, self.to_json()),
            ("text/html", figure_html(self, &new_div_id(), include_js)),
            (
                "text/plain",
                format!("<plotly figure with {traces} trace(s)>"),
            ),
        ]
    }
}

/// A [`plotly::Plot`] that displays itself offline: as the last expression of a cell, or
/// through [`show`], it sends both the plotly JSON and HTML drawn by embedded plotly.js.
///
/// It dereferences to the [`Plot`], so traces and layout can still be changed, e.g.
/// `fig.add_trace(...)`.
#[derive(Clone, Default)]
pub struct Figure {
    plot: Plot,
}

impl Figure {
    /// Wraps a plot.
    pub fn new(plot: Plot) -> Self {
        Figure { plot }
    }

    /// The wrapped plot.
    pub fn into_plot(self) -> Plot {
        self.plot
    }

    /// The figure as plotly JSON (`{"data": [...], "layout": {...}, ...}`).
    pub fn to_json(&self) -> String {
        self.plot.to_json()
    }

    /// Displays the figure; evcxr calls this when a cell ends in a `Figure`.
    pub fn evcxr_display(&self) {
        show(&self.plot);
    }
}

impl std::fmt::Debug for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Figure({} trace(s))", trace_count(&self.plot))
    }
}

impl From<Plot> for Figure {
    fn from(plot: Plot) -> Self {
        Figure::new(plot)
    }
}

impl Deref for Figure {
    type Target = Plot;
    fn deref(&self) -> &Plot {
        &self.plot
    }
}

impl DerefMut for Figure {
    fn deref_mut(&mut self) -> &mut Plot {
        &mut self.plot
    }
}

impl Show for Figure {
    fn mime_bundle(&self) -> Vec<(&'static str, String)> {
        self.plot.mime_bundle()
    }
}

/// The number of traces of a plot.
fn trace_count(plot: &Plot) -> usize {
    serde_json::to_value(plot)
        .ok()
        .and_then(|v| v.get("data").and_then(|d| d.as_array()).map(Vec::len))
        .unwrap_or(0)
}

/// The `<script>` element that defines `window.Plotly`: plotly.js as shipped inside the
/// `plotly` crate (its `plotly_embed_js` feature), so that figures draw without network.
pub fn plotly_js() -> &'static str {
    static JS: OnceLock<String> = OnceLock::new();
    JS.get_or_init(|| {
        // `offline_js_sources` holds plotly.js first, then MathJax, which figures don't need.
        let sources = Plot::offline_js_sources();
        match sources.find("</script>") {
            Some(end) => sources[..end + "</script>".len()].to_string(),
            None => sources,
        }
    })
}

/// The HTML of one figure: a `<div>` plus the script that draws it with plotly.js.
///
/// With `include_js`, plotly.js itself comes first (about 4.6 MB); without it, the figure
/// waits for a plotly.js that an earlier output of the page loaded, so a page needs
/// plotly.js once, not once per figure.
pub fn figure_html(plot: &Plot, div_id: &str, include_js: bool) -> String {
    // `</` cannot occur in JSON outside strings, and `<\/` is the same JSON string, so this
    // keeps a title like "</script>" from ending the script element.
    let json = plot.to_json().replace("</", "<\\/");
    let height = plot
        .layout()
        .to_json()
        .parse::<serde_json::Value>()
        .ok()
        .and_then(|l| l.get("height").and_then(serde_json::Value::as_u64))
        .map_or(DEFAULT_HEIGHT_PX, |h| h as usize);
    let mut html = String::new();
    if include_js {
        html.push_str(plotly_js());
        html.push_str(
            "\n<script type=\"text/javascript\">\
             (window.posencPlotlyQueue || []).forEach(function (draw) { draw(); });\
             window.posencPlotlyQueue = [];</script>\n",
        );
    }
    html.push_str(&format!(
        r#"<div id="{div_id}" class="plotly-graph-div" style="height:{height}px; width:100%;"></div>
<script type="text/javascript">
(function () {{
  var figure = {json};
  var draw = function () {{ window.Plotly.newPlot("{div_id}", figure); }};
  if (window.Plotly) {{ draw(); }}
  else {{ (window.posencPlotlyQueue = window.posencPlotlyQueue || []).push(draw); }}
}})();
</script>"#
    ));
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotly::Scatter;

    fn one_trace_plot(name: &str) -> Plot {
        let mut plot = Plot::new();
        plot.add_trace(Scatter::new(vec![0.0, 1.0], vec![2.0, 3.0]).name(name));
        plot
    }

    #[test]
    fn block_follows_the_evcxr_protocol() {
        assert_eq!(
            evcxr_block("text/html", "<b>x</b>"),
            "EVCXR_BEGIN_CONTENT text/html\n<b>x</b>\nEVCXR_END_CONTENT\n"
        );
    }

    #[test]
    fn plotly_js_is_one_script_element_that_defines_plotly() {
        let js = plotly_js();
        assert!(js.starts_with("<script"));
        assert!(js.ends_with("</script>"));
        assert_eq!(js.matches("</script>").count(), 1);
        assert!(js.contains("plotly.js v"));
        assert!(js.len() > 1_000_000, "plotly.js is embedded, not linked");
        assert!(
            !js.contains("<script src="),
            "no script is loaded from elsewhere"
        );
    }

    #[test]
    fn figure_html_embeds_plotly_only_when_asked() {
        let plot = one_trace_plot("a");
        let first = figure_html(&plot, "fig-1", true);
        let later = figure_html(&plot, "fig-2", false);
        assert!(first.contains("plotly.js v") && !later.contains("plotly.js v"));
        assert!(later.contains(r#"<div id="fig-2""#));
        assert!(later.contains(r#"window.Plotly.newPlot("fig-2", figure)"#));
        assert!(later.len() < 10_000);
        assert!(
            !later.contains("http"),
            "nothing is fetched from the network"
        );
    }

    #[test]
    fn figure_html_cannot_close_its_script_early() {
        let plot = one_trace_plot("</script><b>");
        let html = figure_html(&plot, "x", false);
        assert_eq!(html.matches("</script>").count(), 1);
        assert!(html.contains(r#"<\/script><b>"#));
    }

    #[test]
    fn plot_bundle_has_json_html_and_text() {
        let bundle = one_trace_plot("series a").mime_bundle();
        let mimes: Vec<_> = bundle.iter().map(|(m, _)| *m).collect();
        assert_eq!(mimes, [PLOTLY_JSON_MIME, "text/html", "text/plain"]);
        let json: serde_json::Value = serde_json::from_str(&bundle[0].1).unwrap();
        assert_eq!(json["data"][0]["name"], "series a");
        assert_eq!(bundle[2].1, "<plotly figure with 1 trace(s)>");
    }

    #[test]
    fn plotly_js_is_sent_once_per_process() {
        let plot = one_trace_plot("a");
        let sent: usize = (0..3)
            .map(|_| {
                let bundle = plot.mime_bundle();
                usize::from(bundle[1].1.contains("plotly.js v"))
            })
            .sum();
        // Other tests may have sent it already; never more than once.
        assert!(sent <= 1);
        assert!(std::env::var_os(PLOTLY_JS_SENT_VAR).is_some());
        assert!(!take_plotly_js_turn());
    }

    #[test]
    fn div_ids_do_not_repeat() {
        let ids: std::collections::HashSet<_> = (0..100).map(|_| new_div_id()).collect();
        assert_eq!(ids.len(), 100);
    }

    #[test]
    fn figure_derefs_to_its_plot() {
        let mut fig = Figure::from(one_trace_plot("a"));
        fig.add_trace(Scatter::new(vec![0.0], vec![1.0]));
        let json: serde_json::Value = serde_json::from_str(&fig.to_json()).unwrap();
        assert_eq!(json["data"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn html_snippet_is_sent_as_html() {
        let bundle = Html("<i>hi</i>".into()).mime_bundle();
        assert_eq!(bundle, vec![("text/html", "<i>hi</i>".to_string())]);
    }
}
