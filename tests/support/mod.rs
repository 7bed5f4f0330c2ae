//! What the integration tests share: seeded inputs from one generator, the golden fixtures,
//! temporary folders, and, with their features, the `posenc` binary ([`cli`]) and tiny models
//! ([`model`]).
//!
//! Every test crate includes this module as `pub mod support` (`#[path = "../support/mod.rs"]`)
//! and uses a part of it: public, the parts one crate leaves unused are not dead code there.

use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand::{Rng, SeedableRng};
use posenc::encodings::init::Seeded;
use serde_json::Value;
use tempfile::TempDir;

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "train")]
pub mod model;

/// `[rows, cols]` entries $\sim \mathcal N(0, 1)$ from `seed`: the crate's own seeded draws
/// (`StdRng`, row-major), so `normal(3 * n, c, s)` is three `[n, c]` draws of one generator.
pub use posenc::encodings::init::seeded_normal as normal;

/// `n` values $\sim \mathcal U(-\text{scale}, \text{scale})$ from `seed` (the same generator).
pub fn uniform(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    Seeded::new(seed)
        .uniform_vec(n, scale)
        .expect("a finite, non-negative scale")
        .to_vec()
}

/// `n` bytes of a text drawn from 20 letters, a space and a newline by the same generator.
pub fn text(n: usize, seed: u64) -> Vec<u8> {
    const BYTES: &[u8] = b"abcdefgh ijklmnop\nqrst";
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| BYTES[rng.random_range(0..BYTES.len())])
        .collect()
}

/// The golden fixture `tests/golden/<name>`, parsed.
pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Fails unless the page `path` (from the repository root: `docs/build.md`, `README.md`)
/// says `phrase`, reading every run of spaces and line breaks as one space: a figure a page
/// quotes is checked where the test computes it.
pub fn page_says(path: &str, phrase: &str) {
    let file = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat(&text).contains(&flat(phrase)),
        "{path} does not say \"{phrase}\": update the page to the figure the test computes"
    );
}

/// `n` with a comma between each group of three digits, as the pages write counts: 3,606.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A new empty folder under the system's temporary folder, removed with its contents when
/// dropped, also when the test panics.
pub fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("posenc-test-")
        .tempdir()
        .expect("a temporary folder")
}
