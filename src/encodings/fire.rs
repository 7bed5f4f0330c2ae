//! # FIRE — functional interpolation for relative positions
//!
//! Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
//! Transformers" (<https://arxiv.org/abs/2310.04418>).
//!
//! T5, ALiBi and Kerple each fix the *shape* of the bias as a function of distance; FIRE learns
//! it with a tiny MLP $f_\theta$ from one scalar to one bias per head. The trick is the input:
//! not the raw distance $i-j$, which would run past anything seen in training, but the distance
//! *relative to the query's own position*, $(i-j)/i$, always in $[0, 1]$ ("progressive
//! interpolation"). A log transform $\psi$ spends more resolution on nearby keys, and a learned
//! threshold $L$ keeps short contexts from being stretched: below $L$ the normaliser is fixed.
//!
//! ```math
//! b_h(i, j) = f_\theta\left(\frac{\psi(i-j)}{\psi(\max(L, i))}\right)_h, \qquad
//! \psi(x) = \ln(c\ x + 1), \qquad
//! f_\theta(x) = W_2^\top \operatorname{ReLU}(w_1 x + b_1) + b_2
//! ```
//!
//! for causal $j \le i$, with $c > 0$ and $L > 0$ learned along with the MLP. The paper's
//! reference PyTorch listing (its appendix; `init_c = 0.1`, `init_L = 512`, `mlp_width = 32`)
//! learns $c$ as it is, used as $|c|$, and $L$ as a multiplier $m$ of its initial value
//! $L_0$, $L = |m L_0|$ with $m$ starting at 1 ([`FireTransform`]): an optimiser's step in $m$
//! moves $L$ in proportion to $L_0$. Its $L_0 = 512$ is a quarter of the paper's training length,
//! 2,048 (the length its introduction and experiments train at). The listing also adds
//! $\varepsilon = 10^{-6}$ to the normaliser; here $|c|$ and $L$ are floored instead
//! ([`MIN_C`], [`MIN_THRESHOLD`]), which leaves every value at $|c| \ge 10^{-6}$, $L \ge 1$
//! unchanged.
//!
//! Derived step by step, checked and plotted in `notebooks/09_alibi_and_beyond.ipynb`.

use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, invalid, Result};

/// The paper's initial $c$ in $\psi(x) = \ln(cx + 1)$, 0.1.
pub const DEFAULT_C: f32 = 0.1;
/// The paper's initial threshold $L$, 512 (a quarter of its training length, 2,048).
pub const DEFAULT_THRESHOLD: f32 = 512.0;
/// The paper's MLP width, 32.
pub const DEFAULT_HIDDEN: usize = 32;
/// The smallest $|c|$ FIRE uses, $10^{-6}$: at $c = 0$ the feature would be $0/0$.
pub const MIN_C: f32 = 1e-6;
/// The smallest threshold FIRE uses, 1: below it only query 0 would change its normaliser, and
/// that query's one key is at distance 0 (feature 0 for any threshold); at $L = 0$ it would be
/// $0/0$.
pub const MIN_THRESHOLD: f32 = 1.0;

/// The paper's initial threshold for a model trained at `train_len`: a quarter of it, as its
/// 512 of 2,048 (at least [`MIN_THRESHOLD`]).
///
/// # Examples
/// ```
/// use posenc::encodings::fire::initial_threshold;
/// assert_eq!(initial_threshold(2048), 512.0);
/// assert_eq!(initial_threshold(128), 32.0);
/// assert_eq!(initial_threshold(2), 1.0);
/// ```
pub fn initial_threshold(train_len: usize) -> f32 {
    (train_len as f32 / 4.0).max(MIN_THRESHOLD)
}

/// FIRE's two learned scalars as the paper's listing holds them: $c$, used as $|c|$, and the
/// multiplier $m$ of the initial threshold $L_0$, so that $L = |m L_0|$ (with the floors
/// [`MIN_C`] and [`MIN_THRESHOLD`]). At initialisation $m = 1$, $L = L_0$.
///
/// # Examples
/// ```
/// use posenc::encodings::fire::{fire_factors, FireTransform};
/// let mut t = FireTransform::new(0.1, 32.0)?;
/// assert_eq!(t.factors(200), fire_factors(200, 0.1, 32.0));
/// // learned values: c = -0.2 acts as 0.2, m = 1.5 moves L to 48
/// (t.c, t.threshold_scale) = (-0.2, 1.5);
/// assert_eq!((t.c_value(), t.threshold()), (0.2, 48.0));
/// # Ok::<(), posenc::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FireTransform {
    /// $c$ as learned; $\psi$ uses $\max(|c|, 10^{-6})$.
    pub c: f32,
    /// $m$ as learned; 1 at initialisation.
    pub threshold_scale: f32,
    /// $L_0$, the threshold at $m = 1$ (fixed).
    pub init_threshold: f32,
}

/// The derivatives of [`FireTransform::factors`] in the learned scalars, each `[len]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FireTangents {
    /// $\partial\psi(d)/\partial c = \operatorname{sgn}(c)\, d/(1 + |c| d)$.
    pub feature_c: Vec<f32>,
    /// $\partial\nu_i/\partial c = -\nu_i^2 \operatorname{sgn}(c)\, n_i/(1 + |c| n_i)$ with
    /// $n_i = \max(L, i)$.
    pub row_scale_c: Vec<f32>,
    /// $\partial\nu_i/\partial m = -\nu_i^2\, |c|/(1 + |c| L)\, \operatorname{sgn}(m) L_0$ for
    /// the queries whose normaliser is the threshold ($i \le L$, a tie counted as the
    /// threshold's), 0 for the others.
    pub row_scale_m: Vec<f32>,
}

impl FireTransform {
    /// The scalars at initialisation: $c$ and $L_0$ given, $m = 1$.
    ///
    /// # Errors
    /// When `c` or `threshold` is not a finite number > 0.
    pub fn new(c: f32, threshold: f32) -> Result<Self> {
        ensure(c.is_finite() && c > 0.0, "c", c, "a finite number > 0")?;
        let t = Self {
            c,
            threshold_scale: 1.0,
            init_threshold: threshold,
        };
        t.validate()?;
        Ok(t)
    }

    /// Checks that $c$ and $m$ are finite and $L_0$ a finite number > 0 (fields are public).
    ///
    /// # Errors
    /// When one is not.
    pub fn validate(&self) -> Result<()> {
        ensure(self.c.is_finite(), "c", self.c, "a finite number")?;
        ensure(
            self.threshold_scale.is_finite(),
            "threshold_scale",
            self.threshold_scale,
            "a finite number",
        )?;
        ensure(
            self.init_threshold.is_finite() && self.init_threshold > 0.0,
            "threshold",
            self.init_threshold,
            "a finite number > 0",
        )
    }

    /// $\max(|c|, 10^{-6})$, the $c$ of $\psi$.
    pub fn c_value(&self) -> f32 {
        self.c.abs().max(MIN_C)
    }

    /// $\max(|m L_0|, 1)$, the threshold $L$.
    pub fn threshold(&self) -> f32 {
        (self.threshold_scale * self.init_threshold)
            .abs()
            .max(MIN_THRESHOLD)
    }

    /// $\psi(|i-j|)/\psi(\max(L, i))$ at these scalars ([`fire_feature`]).
    pub fn feature(&self, i: usize, j: usize) -> f32 {
        fire_feature(i, j, self.c_value(), self.threshold())
    }

    /// $\psi(d)$ and $\nu_i = 1/\psi(\max(L, i))$ for `len` positions at these scalars
    /// ([`fire_factors`]).
    pub fn factors(&self, len: usize) -> (Vec<f32>, Vec<f32>) {
        fire_factors(len, self.c_value(), self.threshold())
    }

    /// The derivatives of [`FireTransform::factors`] in $c$ and $m$ ([`FireTangents`]), in
    /// `f64` and rounded once; 0 in a scalar held at its floor.
    pub fn tangents(&self, len: usize) -> FireTangents {
        let c = f64::from(self.c_value());
        let threshold = f64::from(self.threshold());
        // d|c|/dc and d|m L0|/dm, 0 at a floor
        let dc = if self.c.abs() > MIN_C {
            f64::from(self.c.signum())
        } else {
            0.0
        };
        let dl = if (self.threshold_scale * self.init_threshold).abs() > MIN_THRESHOLD {
            f64::from(self.threshold_scale.signum() * self.init_threshold)
        } else {
            0.0
        };
        // d psi(x) / d|c| = x / (1 + |c| x)
        let dpsi = |x: f64| x / (1.0 + c * x);
        let feature_c = (0..len).map(|d| (dc * dpsi(d as f64)) as f32).collect();
        let (mut row_scale_c, mut row_scale_m) = (Vec::with_capacity(len), Vec::with_capacity(len));
        for i in 0..len {
            // n_i = max(L, i); nu_i = 1 / psi(n_i)
            let n = threshold.max(i as f64);
            let nu = 1.0 / fire_psi(n, self.c_value());
            // d nu = -nu^2 d psi(n), d psi(n) / dn = |c| / (1 + |c| n)
            row_scale_c.push((-nu * nu * dc * dpsi(n)) as f32);
            let on_threshold = i as f64 <= threshold;
            let dn = if on_threshold { dl } else { 0.0 };
            row_scale_m.push((-nu * nu * c / (1.0 + c * n) * dn) as f32);
        }
        FireTangents {
            feature_c,
            row_scale_c,
            row_scale_m,
        }
    }
}

/// The normalised distance $\psi(|i-j|)\ /\ \psi(\max(L, i))$ with $\psi(x) = \ln(cx + 1)$ for a
/// query at position `i` and a key at `j`; in $[0, 1]$ for $j \le i$, 0 on the diagonal, and
/// exactly 1 at $j = 0$ once $i \ge L$. Future keys ($j > i$) use $|i-j|$, as the paper's code.
///
/// Expects $c > 0$ and $L > 0$ (as [`Fire::new`] checks); other values give NaN or values
/// outside $[0, 1]$, never a panic.
///
/// # Examples
/// ```
/// use posenc::encodings::fire::fire_feature;
/// // c = 1, L = 4: query 6, key 2 -> ln 5 / ln 7
/// assert!((fire_feature(6, 2, 1.0, 4.0) - 5f32.ln() / 7f32.ln()).abs() < 1e-6);
/// // the farthest key of a query beyond L is exactly 1
/// assert_eq!(fire_feature(600, 0, 0.1, 512.0), 1.0);
/// ```
pub fn fire_feature(i: usize, j: usize, c: f32, threshold: f32) -> f32 {
    // max(L, i)
    let normaliser = (threshold as f64).max(i as f64);
    (fire_psi(i.abs_diff(j) as f64, c) / fire_psi(normaliser, c)) as f32
}

/// $\psi(x) = \ln(c\,x + 1)$, in `f64`.
pub fn fire_psi(x: f64, c: f32) -> f64 {
    (c as f64 * x).ln_1p()
}

/// The feature of [`fire_feature`] as a product of a factor per distance and a factor per
/// query, for causal attention over `len` positions: $\psi(d)$ for $d = 0..L$ and
/// $1/\psi(\max(L, i))$ for $i = 0..L$, each rounded to `f32` once, so that
/// $x_{ij} = \psi(i - j) \cdot \nu_i$ needs no `[L, L]` table. The `f32` product is
/// [`fire_feature`] to within two roundings.
///
/// # Examples
/// ```
/// use posenc::encodings::fire::{fire_factors, fire_feature};
/// let (psi, nu) = fire_factors(700, 0.1, 512.0);
/// let x = psi[600 - 3] * nu[600];
/// assert!((x - fire_feature(600, 3, 0.1, 512.0)).abs() < 1e-6);
/// ```
pub fn fire_factors(len: usize, c: f32, threshold: f32) -> (Vec<f32>, Vec<f32>) {
    let psi = (0..len).map(|d| fire_psi(d as f64, c) as f32).collect();
    let nu = (0..len)
        .map(|i| (1.0 / fire_psi((threshold as f64).max(i as f64), c)) as f32)
        .collect();
    (psi, nu)
}

/// The first layer of FIRE's MLP, $\operatorname{ReLU}(w_1 x + b_1)$, as a piecewise-linear
/// function of its one input: between two consecutive breakpoints $t_k = -b_{1k}/w_{1k}$ the
/// set of active units is fixed, so on piece $p = \#\{k : t_k < x\}$
///
/// ```math
/// \operatorname{ReLU}(w_1 x + b_1) = m_p \odot (w_1 x + b_1), \qquad
/// f_\theta(x) = \underbrace{b_2 + W_2^\top (m_p \odot b_1)}_{a_p}
///   + \underbrace{W_2^\top (m_p \odot w_1)}_{s_p}\, x,
/// ```
///
/// the whole MLP one intercept and one slope per piece and head: the form the fused
/// attention evaluates inside its tiles (and differentiates, $a_p$ and $s_p$ being linear in
/// the weights).
#[derive(Debug, Clone, PartialEq)]
pub struct ReluPieces {
    /// $t_1 \le \dots \le t_{P-1}$: where a unit with $w_{1k} \ne 0$ turns on or off.
    pub breakpoints: Vec<f32>,
    /// $m_{pk} \in \{0, 1\}$: whether unit $k$ is active on piece $p$, `[P, hidden]`.
    pub active: Array2<f32>,
}

/// [`ReluPieces`] of the first layer $w_1, b_1$ (`[hidden]` each). Unit $k$ with
/// $w_{1k} > 0$ is active above its breakpoint, with $w_{1k} < 0$ below it, with
/// $w_{1k} = 0$ everywhere when $b_{1k} > 0$ (never otherwise). At a breakpoint itself the
/// unit's value is 0 on either side.
pub fn relu_pieces(w1: &[f32], b1: &[f32]) -> ReluPieces {
    let hidden = w1.len().min(b1.len());
    let t = |k: usize| -b1[k] / w1[k];
    // the units that turn on or off, by their breakpoint
    let mut order: Vec<usize> = (0..hidden).filter(|&k| w1[k] != 0.0).collect();
    order.sort_by(|&a, &b| t(a).total_cmp(&t(b)));
    let mut rank = vec![0; hidden];
    for (r, &k) in order.iter().enumerate() {
        rank[k] = r;
    }
    // piece p holds the x above exactly the first p breakpoints
    let active = Array2::from_shape_fn((order.len() + 1, hidden), |(p, k)| {
        let on = if w1[k] > 0.0 {
            p > rank[k]
        } else if w1[k] < 0.0 {
            p <= rank[k]
        } else {
            b1[k] > 0.0
        };
        f32::from(u8::from(on))
    });
    ReluPieces {
        breakpoints: order.iter().map(|&k| t(k)).collect(),
        active,
    }
}

/// FIRE bias: the feature of [`fire_feature`] fed to a 1 → hidden → heads ReLU MLP
/// $f_\theta(x) = W_2^\top \operatorname{ReLU}(w_1 x + b_1) + b_2$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fire {
    /// $c$ in $\psi(x) = \ln(cx + 1)$ and the threshold $L$ below which the normaliser stays
    /// $\psi(L)$, as learned; initially 0.1 and 512.
    pub transform: FireTransform,
    /// First-layer weights $w_1$, `[hidden]` (the input is one scalar).
    pub w1: Array1<f32>,
    /// First-layer bias $b_1$, `[hidden]`.
    pub b1: Array1<f32>,
    /// Second-layer weights $W_2$, `[hidden, heads]`.
    pub w2: Array2<f32>,
    /// Second-layer bias $b_2$, `[heads]`.
    pub b2: Array1<f32>,
}

impl Fire {
    /// FIRE with `heads` outputs and `hidden` units, weights initialised like PyTorch's
    /// `nn.Linear`: $\mathcal U(-1/\sqrt{\text{fan\_in}}, 1/\sqrt{\text{fan\_in}})$ (fan-in 1, then
    /// `hidden`), from a ChaCha RNG seeded by `seed`.
    ///
    /// `c` and `threshold` are the initial $c$ and $L_0$ ([`FireTransform::new`]).
    ///
    /// # Errors
    /// When `heads` or `hidden` is zero, or `c` or `threshold` is not a finite number > 0.
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let fire = Fire::new(4, 32, 0.1, 512.0, 0)?;
    /// let b = fire.bias(1, 5, 5)?;
    /// assert_eq!(b.dim(), (5, 5));
    /// assert_eq!(b[[0, 1]], 0.0); // future keys get no bias (the causal mask hides them)
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(heads: usize, hidden: usize, c: f32, threshold: f32, seed: u64) -> Result<Self> {
        ensure(heads >= 1, "heads", heads, ">= 1")?;
        ensure(hidden >= 1, "hidden", hidden, ">= 1")?;
        let mut init = Seeded::new(seed);
        // fan-in 1: U(-1, 1)
        let w1 = init.uniform_vec(hidden, 1.0)?;
        let b1 = init.uniform_vec(hidden, 1.0)?;
        // fan-in hidden: U(-1/sqrt(hidden), 1/sqrt(hidden))
        let second = 1.0 / (hidden as f32).sqrt();
        let w2 = init.uniform((hidden, heads), second)?;
        let b2 = init.uniform_vec(heads, second)?;
        Self::from_weights(w1, b1, w2, b2, FireTransform::new(c, threshold)?)
    }

    /// FIRE with given (e.g. trained) weights and scalars.
    ///
    /// # Errors
    /// When the shapes do not fit (`w1`, `b1`: `[hidden]`; `w2`: `[hidden, heads]`; `b2`:
    /// `[heads]`, with `hidden, heads >= 1`), a weight is not finite, or the scalars are
    /// invalid ([`FireTransform::validate`]).
    pub fn from_weights(
        w1: Array1<f32>,
        b1: Array1<f32>,
        w2: Array2<f32>,
        b2: Array1<f32>,
        transform: FireTransform,
    ) -> Result<Self> {
        let fire = Self {
            transform,
            w1,
            b1,
            w2,
            b2,
        };
        fire.validate()?;
        Ok(fire)
    }

    /// Checks shapes and values (fields are public, e.g. for deserialisation).
    ///
    /// # Errors
    /// As [`Fire::from_weights`].
    pub fn validate(&self) -> Result<()> {
        self.transform.validate()?;
        let (hidden, heads) = (self.w1.len(), self.b2.len());
        ensure(hidden >= 1, "hidden", hidden, ">= 1")?;
        ensure(heads >= 1, "heads", heads, ">= 1")?;
        ensure_shape("fire: b1", &[hidden], self.b1.shape())?;
        ensure_shape("fire: w2", &[hidden, heads], self.w2.shape())?;
        let finite = self
            .w1
            .iter()
            .chain(&self.b1)
            .chain(&self.w2)
            .chain(&self.b2)
            .all(|w| w.is_finite());
        ensure(
            finite,
            "fire weights",
            "a non-finite value",
            "finite numbers",
        )
    }

    /// Number of heads (MLP outputs).
    pub fn heads(&self) -> usize {
        self.b2.len()
    }

    /// The normalised distances $\psi(i-j)/\psi(\max(L, i))$, `[lq, lk]`, queries at
    /// $L_k - L_q + r$ (the convention of [`query_position`]); future entries are 0.
    ///
    /// # Errors
    /// When `lq > lk` or the configuration is invalid.
    pub fn features(&self, lq: usize, lk: usize) -> Result<Array2<f32>> {
        self.validate()?;
        ensure_queries_fit(lq, lk)?;
        Ok(Array2::from_shape_fn((lq, lk), |(r, j)| {
            let i = query_position(r, lq, lk);
            if j > i {
                0.0
            } else {
                self.transform.feature(i, j)
            }
        }))
    }

    /// The MLP's first layer as pieces ([`relu_pieces`]).
    pub fn pieces(&self) -> ReluPieces {
        relu_pieces(
            self.w1.as_slice().unwrap_or(&self.w1.to_vec()),
            self.b1.as_slice().unwrap_or(&self.b1.to_vec()),
        )
    }

    /// $f_\theta(x)$ for one feature, `[heads]`.
    ///
    /// # Errors
    /// When the configuration is invalid.
    pub fn mlp(&self, x: f32) -> Result<Array1<f32>> {
        self.validate()?;
        // ReLU(w1 x + b1), [hidden]
        let h = (&self.w1 * x + &self.b1).mapv(|v| v.max(0.0));
        // W2^T h + b2, [heads]
        Ok(h.dot(&self.w2) + &self.b2)
    }

    /// The bias $b_h(i, j)$ of head `head`, `[lq, lk]`; entries with $j > i$ (future keys,
    /// masked by causal attention) are 0.
    ///
    /// # Errors
    /// When `head` is out of range, `lq > lk`, or the configuration is invalid.
    pub fn bias(&self, head: usize, lq: usize, lk: usize) -> Result<Array2<f32>> {
        let features = self.features(lq, lk)?;
        let heads = self.heads();
        ensure(head < heads, "head", head, &format!("0..{heads}"))?;
        let (w2, b2) = (self.w2.column(head), self.b2[head]);
        // ReLU(x w1^T + b1), [Lq * Lk, hidden]
        let x = features.flatten();
        let h = Array2::from_shape_fn((x.len(), self.w1.len()), |(e, u)| {
            (x[e] * self.w1[u] + self.b1[u]).max(0.0)
        });
        // h W2[:, head] + b2[head], [Lq * Lk] -> [Lq, Lk]
        let flat = h.dot(&w2) + b2;
        let mut bias = Array2::from_shape_vec((lq, lk), flat.to_vec())
            .map_err(|e| invalid("fire bias shape", format!("[{lq}, {lk}]"), e.to_string()))?;
        for ((r, j), b) in bias.indexed_iter_mut() {
            if j > query_position(r, lq, lk) {
                *b = 0.0;
            }
        }
        Ok(bias)
    }
}

impl PositionScheme for Fire {
    fn name(&self) -> String {
        "fire".into()
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.bias(head, lq, lk).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use proptest::prelude::*;

    /// hidden = 2, heads = 1: f(x) = 0.1 + 2 ReLU(x) + 3 ReLU(0.5 - x).
    fn tiny() -> Fire {
        Fire::from_weights(
            array![1.0, -1.0],
            array![0.0, 0.5],
            array![[2.0], [3.0]],
            array![0.1],
            FireTransform::new(1.0, 1.0).unwrap(),
        )
        .unwrap()
    }

    /// Oracle: feature and MLP entry by entry.
    fn naive_bias(f: &Fire, head: usize, lq: usize, lk: usize) -> Array2<f32> {
        let mut b = Array2::zeros((lq, lk));
        for r in 0..lq {
            let i = lk - lq + r;
            for j in 0..=i {
                let t = &f.transform;
                let x = fire_feature(i, j, t.c_value(), t.threshold());
                let mut out = f.b2[head];
                for u in 0..f.w1.len() {
                    out += f.w2[[u, head]] * (f.w1[u] * x + f.b1[u]).max(0.0);
                }
                b[[r, j]] = out;
            }
        }
        b
    }

    #[test]
    fn feature_hand_computed_values() {
        assert_eq!(fire_feature(7, 7, 0.1, 512.0), 0.0);
        // c = 1, L = 4: i = 2 < L normalises by psi(4) = ln 5
        assert!((fire_feature(2, 1, 1.0, 4.0) - 2f32.ln() / 5f32.ln()).abs() < 1e-6);
        assert!((fire_feature(2, 0, 1.0, 4.0) - 3f32.ln() / 5f32.ln()).abs() < 1e-6);
        // i = 6 >= L normalises by psi(6) = ln 7
        assert!((fire_feature(6, 2, 1.0, 4.0) - 5f32.ln() / 7f32.ln()).abs() < 1e-6);
        // c = 0.1: psi(10) / psi(512) = ln 2 / ln 52.2
        assert!((fire_feature(10, 0, 0.1, 512.0) - 2f32.ln() / 52.2f32.ln()).abs() < 1e-6);
    }

    /// On every piece the MLP is $a_p + s_p x$: at many points, near every breakpoint
    /// included, for seeded networks with units active above, below and everywhere (and one
    /// with $w_1 = 0$), and the tiny network's two breakpoints at 0 and 0.5.
    #[test]
    fn pieces_reproduce_the_mlp() {
        let mut nets = vec![tiny()];
        for seed in 0..5 {
            nets.push(Fire::new(3, 16, 0.1, 64.0, seed).unwrap());
        }
        let mut flat = Fire::new(2, 4, 0.1, 64.0, 9).unwrap();
        flat.w1[1] = 0.0;
        flat.b1[1] = 0.3;
        nets.push(flat);
        assert_eq!(tiny().pieces().breakpoints, vec![0.0, 0.5]);
        for f in nets {
            let pieces = f.pieces();
            let mut xs: Vec<f32> = (0..=200).map(|i| -2.0 + i as f32 * 0.02).collect();
            for &t in &pieces.breakpoints {
                xs.extend([t - 1e-4, t, t + 1e-4]);
            }
            for x in xs {
                let p = pieces.breakpoints.iter().filter(|&&t| t < x).count();
                let m = pieces.active.row(p);
                // a_p + s_p x = b2 + W2^T (m (w1 x + b1))
                let got = (&m * &(&f.w1 * x + &f.b1)).dot(&f.w2) + &f.b2;
                let want = f.mlp(x).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "x = {x}: {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn mlp_matches_a_hand_computed_network() {
        let f = tiny();
        assert!((f.mlp(0.25).unwrap()[0] - 1.35).abs() < 1e-6); // 0.1 + 2 * 0.25 + 3 * 0.25
        assert!((f.mlp(1.0).unwrap()[0] - 2.1).abs() < 1e-6); // 0.1 + 2 * 1 + 0
        assert!((f.mlp(0.0).unwrap()[0] - 1.6).abs() < 1e-6); // 0.1 + 0 + 3 * 0.5
                                                              // c = 1, L = 1, three positions: query 2 sees features 1, ln 2 / ln 3, 0
        let b = f.bias(0, 3, 3).unwrap();
        let x = 2f32.ln() / 3f32.ln();
        let expected = [2.1, 0.1 + 2.0 * x, 1.6];
        for (j, e) in expected.iter().enumerate() {
            assert!(
                (b[[2, j]] - e).abs() < 1e-6,
                "key {j}: {} vs {e}",
                b[[2, j]]
            );
        }
        assert_eq!((b[[0, 1]], b[[0, 2]], b[[1, 2]]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn bias_matches_the_loop_for_every_head() {
        let f = Fire::new(3, 8, 0.5, 6.0, 11).unwrap();
        for head in 0..3 {
            for (lq, lk) in [(10, 10), (3, 12), (1, 1)] {
                let (b, n) = (f.bias(head, lq, lk).unwrap(), naive_bias(&f, head, lq, lk));
                for (x, y) in b.iter().zip(n.iter()) {
                    assert!((x - y).abs() < 1e-5, "head {head} {lq}x{lk}: {x} vs {y}");
                }
            }
        }
        assert_eq!(
            f.score_bias(2, 3, 12).unwrap(),
            Some(f.bias(2, 3, 12).unwrap())
        );
    }

    #[test]
    fn seeded_initialisation_is_reproducible_and_in_range() {
        let (a, b) = (
            Fire::new(2, 16, 0.1, 512.0, 5).unwrap(),
            Fire::new(2, 16, 0.1, 512.0, 5).unwrap(),
        );
        assert_eq!(a, b);
        assert_ne!(a, Fire::new(2, 16, 0.1, 512.0, 6).unwrap());
        assert!(a.w1.iter().all(|w| w.abs() <= 1.0));
        assert!(a.w2.iter().all(|w| w.abs() <= 0.25));
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(Fire::new(0, 4, 0.1, 512.0, 0).is_err());
        assert!(Fire::new(2, 0, 0.1, 512.0, 0).is_err());
        assert!(Fire::new(2, 4, 0.0, 512.0, 0).is_err());
        assert!(Fire::new(2, 4, f32::NAN, 512.0, 0).is_err());
        assert!(Fire::new(2, 4, 0.1, -1.0, 0).is_err());
        assert!(Fire::new(2, 4, 0.1, f32::INFINITY, 0).is_err());
        let (w1, b1, w2, b2) = (
            array![1.0f32, 2.0],
            array![0.0f32, 0.0],
            Array2::<f32>::zeros((2, 3)),
            Array1::<f32>::zeros(3),
        );
        let build = |w1: &Array1<f32>, b1: &Array1<f32>, w2: &Array2<f32>, b2: &Array1<f32>| {
            let t = FireTransform::new(0.1, 512.0).unwrap();
            Fire::from_weights(w1.clone(), b1.clone(), w2.clone(), b2.clone(), t)
        };
        assert!(build(&w1, &b1, &w2, &b2).is_ok());
        // b1 of another width, W2 of another height, b2 of another width, no hidden unit
        assert!(build(&w1, &array![0.0f32], &w2, &b2).is_err());
        assert!(build(&w1, &b1, &Array2::zeros((3, 3)), &b2).is_err());
        assert!(build(&w1, &b1, &w2, &Array1::zeros(2)).is_err());
        assert!(build(&array![], &array![], &Array2::zeros((0, 3)), &b2).is_err());
        assert!(build(&array![f32::NAN, 0.0], &b1, &w2, &b2).is_err());
        let f = tiny();
        assert_eq!(
            f.bias(1, 2, 2).unwrap_err().to_string(),
            "invalid head = 1: allowed is 0..1"
        );
        assert!(f.bias(0, 3, 2).is_err());
    }

    /// $c$ is used as $|c|$ and $L = |m L_0|$: a negative $c$ or $m$ gives the features of
    /// its absolute value; at $m = 1$ the features are those of $c$ and $L_0$; the floors keep
    /// $c = 0$ and $m = 0$ finite, and a threshold below 1 gives the features of 1.
    #[test]
    fn the_scalars_act_through_their_absolute_values_and_floors() {
        let t = FireTransform::new(0.3, 20.0).unwrap();
        let flipped = FireTransform {
            c: -0.3,
            threshold_scale: -1.0,
            ..t
        };
        let scaled = FireTransform {
            threshold_scale: 1.5,
            ..t
        };
        let below_one = FireTransform::new(0.3, 0.25).unwrap();
        let at_one = FireTransform::new(0.3, 1.0).unwrap();
        for i in 0..80 {
            for j in 0..=i {
                assert_eq!(t.feature(i, j), fire_feature(i, j, 0.3, 20.0));
                assert_eq!(flipped.feature(i, j), t.feature(i, j));
                assert_eq!(scaled.feature(i, j), fire_feature(i, j, 0.3, 30.0));
                assert_eq!(below_one.feature(i, j), at_one.feature(i, j));
            }
        }
        let zero = FireTransform {
            c: 0.0,
            threshold_scale: 0.0,
            ..t
        };
        assert_eq!((zero.c_value(), zero.threshold()), (MIN_C, MIN_THRESHOLD));
        let (psi, nu) = zero.factors(50);
        assert!(psi.iter().chain(&nu).all(|v| v.is_finite()));
        assert!(FireTransform::new(0.0, 8.0).is_err());
        assert!(FireTransform { c: f32::NAN, ..t }.validate().is_err());
        assert!(FireTransform {
            threshold_scale: f32::INFINITY,
            ..t
        }
        .validate()
        .is_err());
    }

    /// $\psi(d)$ and $\nu_i$ in `f64`, written out from the definitions with the scalars as
    /// learned: $\ln(1 + |c| d)$ and $1/\ln(1 + |c| \max(|m L_0|, i))$.
    fn factors_f64(c: f64, m: f64, l0: f64, len: usize) -> (Vec<f64>, Vec<f64>) {
        let psi = |x: f64| (c.abs() * x).ln_1p();
        let l = (m * l0).abs();
        (
            (0..len).map(|d| psi(d as f64)).collect(),
            (0..len).map(|i| 1.0 / psi(l.max(i as f64))).collect(),
        )
    }

    /// [`FireTransform::tangents`] against central differences of the factors written out in
    /// `f64`, for queries on both sides of $L$ (an integer $L$ and one between positions,
    /// negative scalars too): zero in $m$ past $L$, nonzero up to it; zero at a floor.
    #[test]
    fn tangents_match_finite_differences() {
        let len = 90;
        for (c, m, l0) in [
            (0.1f32, 1.0f32, 32.0f32),
            (0.37, 0.83, 41.0),
            (-0.2, -1.22, 25.0),
        ] {
            let t = FireTransform {
                c,
                threshold_scale: m,
                init_threshold: l0,
            };
            let g = t.tangents(len);
            let (c, m, l0) = (f64::from(c), f64::from(m), f64::from(l0));
            let h = 1e-6;
            let (psi_hi, nu_hi) = factors_f64(c + h, m, l0, len);
            let (psi_lo, nu_lo) = factors_f64(c - h, m, l0, len);
            let (_, nu_m_hi) = factors_f64(c, m + h, l0, len);
            let (_, nu_m_lo) = factors_f64(c, m - h, l0, len);
            let close = |what: &str, got: &[f32], hi: &[f64], lo: &[f64]| {
                for (k, (&g, (a, b))) in got.iter().zip(hi.iter().zip(lo)).enumerate() {
                    let fd = (a - b) / (2.0 * h);
                    let err = (f64::from(g) - fd).abs();
                    assert!(
                        err <= 1e-5 * fd.abs().max(1e-3),
                        "c {c} m {m} L0 {l0} {what}[{k}]: {g} vs {fd}"
                    );
                }
            };
            close("dpsi/dc", &g.feature_c, &psi_hi, &psi_lo);
            close("dnu/dc", &g.row_scale_c, &nu_hi, &nu_lo);
            // at a tie i = L the derivative is the threshold's: one-sided, from above
            let l = (m * l0).abs();
            let (_, nu_m) = factors_f64(c, m, l0, len);
            let nu_m_lo: Vec<f64> = (0..len)
                .map(|i| {
                    if i as f64 == l {
                        2.0 * nu_m[i] - nu_m_hi[i]
                    } else {
                        nu_m_lo[i]
                    }
                })
                .collect();
            close("dnu/dm", &g.row_scale_m, &nu_m_hi, &nu_m_lo);
            for (i, &d) in g.row_scale_m.iter().enumerate() {
                assert_eq!(d == 0.0, i as f64 > l, "query {i}, L = {l}: {d}");
            }
        }
        let floored = FireTransform {
            c: 0.0,
            threshold_scale: 0.0,
            init_threshold: 8.0,
        }
        .tangents(20);
        assert!(floored
            .feature_c
            .iter()
            .chain(&floored.row_scale_c)
            .chain(&floored.row_scale_m)
            .all(|&d| d == 0.0));
    }

    proptest! {
        #[test]
        fn feature_is_in_unit_interval_and_farthest_key_is_one_beyond_l(
            i in 0usize..5000, frac in 0.0f64..=1.0, c in 0.001f32..10.0, threshold in 0.5f32..1000.0,
        ) {
            let j = (i as f64 * frac) as usize;
            let x = fire_feature(i, j, c, threshold);
            prop_assert!((0.0..=1.0).contains(&x), "feature {}", x);
            if i as f32 >= threshold {
                // progressive interpolation: psi(i - 0) / psi(i) = 1 exactly
                prop_assert_eq!(fire_feature(i, 0, c, threshold), 1.0);
                let psi = |v: f64| (c as f64 * v).ln_1p();
                prop_assert!((x as f64 - psi((i - j) as f64) / psi(i as f64)).abs() < 1e-6);
            }
        }
    }
}
