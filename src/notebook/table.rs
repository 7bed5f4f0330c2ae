//! A polars DataFrame as an HTML table, so notebooks show tables as tables.

use std::fmt::Write;

use polars::prelude::{AnyValue, DataFrame};

/// Options of [`df_to_html_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Most rows shown; a longer frame shows its first and last rows around a `…` row.
    /// Default: 20.
    pub max_rows: usize,
    /// Digits after the decimal point for floats; `None` prints the shortest exact form.
    /// Default: `Some(4)`.
    pub float_digits: Option<usize>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            max_rows: 20,
            float_digits: Some(4),
        }
    }
}

/// `df` as an HTML `<table>` with [`TableOptions::default`]: a header of column names and
/// types, at most 20 rows, floats to 4 decimals, and the frame's shape below.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let df = df!("scheme" => ["rope", "alibi"], "ppl" => [3.25, 3.5]).unwrap();
/// let html = df_to_html(&df);
/// assert!(html.contains("<td>alibi</td>") && html.contains("<td>3.2500</td>"));
/// ```
pub fn df_to_html(df: &DataFrame) -> String {
    df_to_html_with(df, TableOptions::default())
}

/// `df` as an HTML `<table>`, with the row limit and float format of `options`.
pub fn df_to_html_with(df: &DataFrame, options: TableOptions) -> String {
    let (height, width) = df.shape();
    let columns = df.columns();
    let mut html = String::from("<table class=\"dataframe posenc-table\">\n<thead>\n<tr>");
    for column in columns {
        let _ = write!(
            html,
            "<th>{}<br><span style=\"font-weight:normal;opacity:0.6\">{}</span></th>",
            escape(column.name().as_str()),
            escape(&column.dtype().to_string())
        );
    }
    html.push_str("</tr>\n</thead>\n<tbody>\n");
    let rows: Vec<Option<usize>> = if height <= options.max_rows {
        (0..height).map(Some).collect()
    } else {
        // First ceil(max/2) rows, a gap, the last floor(max/2) rows.
        let head = options.max_rows.div_ceil(2);
        let tail = options.max_rows / 2;
        (0..head)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((height - tail..height).map(Some))
            .collect()
    };
    for row in rows {
        html.push_str("<tr>");
        for column in columns {
            let cell = match row {
                Some(i) => column
                    .get(i)
                    .map(|v| format_value(&v, options.float_digits))
                    .unwrap_or_else(|_| "?".to_string()),
                None => "…".to_string(),
            };
            let _ = write!(html, "<td>{}</td>", escape(&cell));
        }
        html.push_str("</tr>\n");
    }
    let _ = write!(
        html,
        "</tbody>\n</table>\n<p style=\"opacity:0.6\">shape: ({height}, {width})</p>"
    );
    html
}

/// One cell as text: strings without quotes, floats with `float_digits` decimals.
fn format_value(value: &AnyValue, float_digits: Option<usize>) -> String {
    match (value, float_digits) {
        (AnyValue::Null, _) => "null".to_string(),
        (AnyValue::String(s), _) => (*s).to_string(),
        (AnyValue::StringOwned(s), _) => s.to_string(),
        (AnyValue::Float32(v), Some(d)) => format!("{v:.d$}"),
        (AnyValue::Float64(v), Some(d)) => format!("{v:.d$}"),
        (AnyValue::Float32(v), None) => format!("{v}"),
        (AnyValue::Float64(v), None) => format!("{v}"),
        (other, _) => other.to_string(),
    }
}

/// Escapes the five characters that HTML gives a meaning.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use polars::prelude::{df, Column};

    #[test]
    fn table_has_header_cells_and_shape() {
        let df = df!(
            "position" => [0i64, 1, 2],
            "sin" => [0.0f64, 0.841_470_98, 0.909_297_4],
            "scheme" => ["a", "b", "c"],
        )
        .unwrap();
        let html = df_to_html(&df);
        assert!(html.starts_with("<table"));
        assert!(html.contains("<th>position<br>"));
        assert!(html.contains("i64"));
        assert!(html.contains("<td>0.8415</td>"));
        assert!(html.contains("<td>c</td>"), "strings without quotes");
        assert_eq!(html.matches("<tr>").count(), 1 + 3);
        assert!(html.contains("shape: (3, 3)"));
    }

    #[test]
    fn long_tables_are_cut_in_the_middle() {
        let df = DataFrame::new_infer_height(vec![Column::new(
            "n".into(),
            (0..100i32).collect::<Vec<_>>(),
        )])
        .unwrap();
        let options = TableOptions {
            max_rows: 4,
            float_digits: None,
        };
        let html = df_to_html_with(&df, options);
        assert_eq!(html.matches("<tr>").count(), 1 + 2 + 1 + 2);
        for shown in [
            "<td>0</td>",
            "<td>1</td>",
            "<td>…</td>",
            "<td>98</td>",
            "<td>99</td>",
        ] {
            assert!(html.contains(shown), "{shown}");
        }
        assert!(!html.contains("<td>50</td>"));
        assert!(html.contains("shape: (100, 1)"));
    }

    #[test]
    fn cells_and_names_are_escaped_and_nulls_shown() {
        let df = df!("<b>" => [Some("x < y & z"), None]).unwrap();
        let html = df_to_html(&df);
        assert!(html.contains("<th>&lt;b&gt;<br>"));
        assert!(html.contains("<td>x &lt; y &amp; z</td>"));
        assert!(html.contains("<td>null</td>"));
    }

    #[test]
    fn floats_use_the_requested_digits() {
        let v = AnyValue::Float64(1.0 / 3.0);
        assert_eq!(format_value(&v, Some(2)), "0.33");
        assert_eq!(format_value(&v, None), "0.3333333333333333");
        assert_eq!(format_value(&AnyValue::Int32(-7), Some(2)), "-7");
    }

    #[test]
    fn empty_frame_is_an_empty_table() {
        let html = df_to_html(&DataFrame::empty());
        assert!(html.contains("shape: (0, 0)"));
        assert_eq!(html.matches("<td>").count(), 0);
    }
}
