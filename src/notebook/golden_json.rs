//! Golden cases that hold matrices (x-transformers' DPB weights and bias, its data-dependent
//! ALiBi gate, input and bias, transformers' rotated rows), read from a notebook: the case on the line that holds a marker, parsed as
//! one JSON object (the files keep one case per line).

use ndarray::{Array1, Array2, Array3};
use serde_json::Value;

use crate::encodings::dd_alibi::DataDependentAlibi;
use crate::encodings::dpb::{DpbLayer, DpbNorm, DynamicPositionBias};
use crate::{Error, Result};

/// The JSON value of the first line of `text` that holds `marker`: one case of a golden file
/// (a JSON object on its own line, a trailing comma allowed).
fn case_value(text: &str, marker: &str) -> Result<Value> {
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .ok_or_else(|| Error::Io(format!("golden: no case contains {marker:?}")))?;
    serde_json::from_str(line.trim().trim_end_matches(',')).map_err(|e| {
        Error::Io(format!(
            "golden: the case of {marker:?} is not one JSON object: {e}"
        ))
    })
}

/// The numbers of a JSON array, or an error naming `field`.
fn numbers(v: &Value, field: &str) -> Result<Vec<f32>> {
    let bad = || Error::Io(format!("golden: {field:?} is not an array of numbers"));
    v.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|x| x.as_f64().map(|x| x as f32).ok_or_else(bad))
        .collect()
}

/// A `[rows][cols]` JSON matrix, transposed: torch's `nn.Linear` weight `[out, in]` as the
/// crate's `[in, out]`.
fn transposed(v: &Value, field: &str) -> Result<Array2<f32>> {
    let rows = v
        .as_array()
        .ok_or_else(|| Error::Io(format!("golden: {field:?} is not a matrix")))?
        .iter()
        .map(|r| numbers(r, field))
        .collect::<Result<Vec<_>>>()?;
    let cols = rows.first().map_or(0, Vec::len);
    let m = Array2::from_shape_vec((rows.len(), cols), rows.concat())
        .map_err(|e| Error::Io(format!("golden: {field:?} is not rectangular: {e}")))?;
    Ok(m.reversed_axes())
}

/// The JSON matrix `"field": [[...], ...]` of the case on the first line of `text` that holds
/// `marker`, `[rows, cols]`.
///
/// # Errors
/// [`Error::Io`] when no line holds the marker, the case has no such field, or it is not a
/// rectangular matrix of numbers.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let text = "{\"name\": \"a\", \"x\": [[1.0, 2.0], [3.0, 4.5]]},";
/// assert_eq!(golden_matrix(text, "\"name\": \"a\"", "x")?, array![[1.0f32, 2.0], [3.0, 4.5]]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn golden_matrix(text: &str, marker: &str, field: &str) -> Result<Array2<f32>> {
    let case = case_value(text, marker)?;
    let v = case
        .get(field)
        .ok_or_else(|| Error::Io(format!("golden: no field {field:?} in {marker:?}")))?;
    Ok(transposed(v, field)?.reversed_axes())
}

/// The case of `tests/golden/dpb.json` on the line holding `marker`: x-transformers'
/// `DynamicPositionBias` with its weights loaded into the crate's
/// [`DynamicPositionBias`] (torch's `[out, in]` weights transposed), and the bias
/// $b^{(h)}_{ij} = f(i - j)_h$ that x-transformers computed with them, `[H, n, n]`.
///
/// # Errors
/// [`Error::Io`] when no line holds the marker or a field is missing or malformed; the
/// crate's validation error when the weights do not chain.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// // hidden 1, one head: f(d) = 2 SiLU(d) + 0.5 on the raw distance, n = 1
/// let text = "{\"seed\": 9, \"log_distance\": false, \"layers\": [{\"weight\": [[1.0]], \"bias\": [0.0]}], \
///             \"out_weight\": [[2.0]], \"out_bias\": [0.5], \"bias\": [[[0.5]]]},";
/// let (dpb, golden) = golden_dpb(text, "\"seed\": 9,")?;
/// assert_eq!(dpb.bias_matrix(1)?, golden);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn golden_dpb(text: &str, marker: &str) -> Result<(DynamicPositionBias, Array3<f32>)> {
    let case = case_value(text, marker)?;
    let missing = |field: &str| Error::Io(format!("golden: no field {field:?} in {marker:?}"));
    let field = |name: &str| case.get(name).ok_or_else(|| missing(name));
    let layers = field("layers")?
        .as_array()
        .ok_or_else(|| missing("layers"))?
        .iter()
        .map(|l| {
            let norm = match l.get("gamma") {
                Some(g) => Some(DpbNorm {
                    gamma: Array1::from(numbers(g, "gamma")?),
                    beta: l
                        .get("beta")
                        .map(|b| numbers(b, "beta"))
                        .transpose()?
                        .map(Array1::from),
                }),
                None => None,
            };
            Ok(DpbLayer {
                weight: transposed(l.get("weight").ok_or_else(|| missing("weight"))?, "weight")?,
                bias: Array1::from(numbers(
                    l.get("bias").ok_or_else(|| missing("bias"))?,
                    "bias",
                )?),
                norm,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let dpb = DynamicPositionBias::from_layers(
        field("log_distance")?
            .as_bool()
            .ok_or_else(|| missing("log_distance"))?,
        layers,
        transposed(field("out_weight")?, "out_weight")?,
        Array1::from(numbers(field("out_bias")?, "out_bias")?),
    )?;
    let bias = cube(field("bias")?, "bias", marker)?;
    Ok((dpb, bias))
}

/// A `[H][n][n]` JSON array as `[H, n, n]`.
fn cube(v: &Value, field: &str, marker: &str) -> Result<Array3<f32>> {
    let not_cube = || Error::Io(format!("golden: {field:?} of {marker:?} is not [H][n][n]"));
    let heads = v.as_array().ok_or_else(not_cube)?;
    let n = heads.first().and_then(Value::as_array).map_or(0, Vec::len);
    let mut values = Vec::with_capacity(heads.len() * n * n);
    for h in heads {
        for row in h.as_array().ok_or_else(not_cube)? {
            values.extend(numbers(row, field)?);
        }
    }
    Array3::from_shape_vec((heads.len(), n, n), values).map_err(|e| {
        Error::Io(format!(
            "golden: {field:?} of {marker:?} is not [H][n][n]: {e}"
        ))
    })
}

/// The case of `tests/golden/dd_alibi.json` on the line holding `marker`: x-transformers'
/// `DataDependentAlibi` gate loaded into the crate's [`DataDependentAlibi`] (torch's
/// `[heads, dim]` weight transposed), its input `x [n, dim]`, and the bias
/// $C_{h,i} - C_{h,j}$ x-transformers computed from it, `[H, n, n]` (future keys included).
///
/// # Errors
/// [`Error::Io`] when no line holds the marker or a field is missing or malformed; the
/// crate's validation error when the weight and bias do not match.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// // one head, dim 1, w = 0 and b = 0: every log gate is ln(1/2)
/// let text = "{\"seed\": 3, \"weight\": [[0.0]], \"bias\": [0.0], \"x\": [[1.0], [2.0]], \
///             \"attn_bias\": [[[0.0, 0.69314718], [-0.69314718, 0.0]]]},";
/// let (gate, x, want) = golden_dd_alibi(text, "\"seed\": 3,")?;
/// assert!(max_err(&gate.bias(x.view())?, &want)? < 1e-6);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn golden_dd_alibi(
    text: &str,
    marker: &str,
) -> Result<(DataDependentAlibi, Array2<f32>, Array3<f32>)> {
    let case = case_value(text, marker)?;
    let field = |name: &str| {
        case.get(name)
            .ok_or_else(|| Error::Io(format!("golden: no field {name:?} in {marker:?}")))
    };
    let gate = DataDependentAlibi::from_parts(
        transposed(field("weight")?, "weight")?,
        Array1::from(numbers(field("bias")?, "bias")?),
    )?;
    let x = transposed(field("x")?, "x")?.reversed_axes();
    Ok((gate, x, cube(field("attn_bias")?, "attn_bias", marker)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two heads, hidden 2, depth 1, raw distance: the bias by hand, torch's `[out, in]`
    /// weights transposed.
    #[test]
    fn reads_a_dpb_case() {
        // W = [[1, -1]] (torch [[1], [-1]]), W_o = [[2, 0], [-1, 1]] (torch [[2, -1], [0, 1]])
        let text = "{\"cases\": [\n\
            {\"seed\": 5, \"log_distance\": false, \"layers\": [{\"weight\": [[1.0], [-1.0]], \
             \"bias\": [0.0, 1.0]}], \"out_weight\": [[2.0, -1.0], [0.0, 1.0]], \
             \"out_bias\": [0.5, 0.0], \"bias\": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]},\n]}";
        let (dpb, bias) = golden_dpb(text, "\"seed\": 5,").unwrap();
        assert_eq!(dpb.layers[0].weight, ndarray::array![[1.0, -1.0]]);
        assert_eq!(dpb.out_weight, ndarray::array![[2.0, 0.0], [-1.0, 1.0]]);
        assert!(!dpb.log_distance && dpb.layers[0].norm.is_none());
        assert_eq!(bias.dim(), (2, 2, 2));
        assert_eq!(bias[[1, 0, 1]], 6.0);
        let silu = |z: f32| z / (1.0 + (-z).exp());
        // f(1) = [2 SiLU(1) - SiLU(0) + 0.5, SiLU(0)]
        let f1 = dpb.mlp(1);
        assert!((f1[0] - (2.0 * silu(1.0) + 0.5)).abs() < 1e-6 && f1[1].abs() < 1e-6);
        assert!(golden_dpb(text, "\"seed\": 6,").is_err());
        assert_eq!(
            golden_matrix(text, "\"seed\": 5,", "out_weight").unwrap(),
            ndarray::array![[2.0, -1.0], [0.0, 1.0]]
        );
        assert!(golden_matrix(text, "\"seed\": 5,", "bias").is_err());
        // the cube of a DPB case is read by the dd-ALiBi reader too; its fields are not there
        assert!(golden_dd_alibi(text, "\"seed\": 5,").is_err());
        assert!(golden_matrix(text, "\"seed\": 5,", "gamma").is_err());
        let broken = text.replace("\"out_bias\": [0.5, 0.0]", "\"out_bias\": [0.5]");
        assert!(golden_dpb(&broken, "\"seed\": 5,").is_err());
    }
}
