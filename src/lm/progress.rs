//! The one progress bar style of training and evaluation (hidden under `--quiet`).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps, `prefix [=====>    ] pos/len msg (eta)`, or a hidden one when not
/// `show`.
pub(crate) fn progress_bar(show: bool, len: u64, prefix: String, msg: &'static str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(prefix);
    bar.set_message(msg);
    bar
}
