//! `model.safetensors`: the weights of a model, f32 or f16, each named by its path in the model
//! ([`ParamPath`]: `blocks.0.attn.query.weight`, `blocks.0.attn.positions.shaw_keys`), with
//! the parameter ids the optimizer state refers to. Weights that are not finite are never
//! written; a file is read back only into a model with the same tensors and shapes, or into
//! the form an older version of the model had: a FIRE file without FIRE's learned $c$ and $L$
//! (`fire_c`, `fire_threshold_scale`, written before they were learned) is read into a model
//! that keeps them fixed at its configuration's values ([`Lm::with_fixed_fire_transform`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::Path;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::{Tensor, TensorData};
use safetensors::tensor::{Dtype, SafeTensors, View};

use super::format::{WeightDtype, WEIGHTS_FILE};
use crate::error::{Error, Result};
use crate::io::{format_error, io_error, write_atomic};
use crate::lm::model::schemes::fire::LEARNED_SCALARS;
use crate::lm::model::Lm;

struct Entry {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &Entry {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// A parameter's module path as its name in `model.safetensors`: the field and index names
/// joined by dots, where a scheme's variant (an enum of the model's position parameters)
/// prefixes the field after it, or names the parameter it holds: `blocks.0.attn.positions.shaw_keys`, `positions.learned`. TUPE's bucket bias
/// keeps the name of T5's, whose table it is (`tupe_table` is stored as `t5_table`).
#[derive(Debug, Default, Clone)]
pub struct ParamPath {
    /// `(name, is an enum variant)` from the model down.
    parts: Vec<(String, bool)>,
}

impl ParamPath {
    /// Enters a module named `name` in a container of type `container` (burn's
    /// `ModuleVisitor::enter_module` arguments).
    pub fn enter(&mut self, name: &str, container: &str) {
        self.parts
            .push((name.to_string(), container.starts_with("Enum:")));
    }

    /// Leaves the last module entered.
    pub fn exit(&mut self) {
        self.parts.pop();
    }

    /// The name of a parameter at the current path.
    pub fn name(&self) -> String {
        let mut names: Vec<String> = Vec::new();
        let mut variant: Option<String> = None;
        for (name, is_variant) in &self.parts {
            if *is_variant {
                variant = Some(name.to_lowercase());
            } else if let Some(v) = variant.take() {
                names.push(format!("{v}_{name}"));
            } else {
                names.push(name.clone());
            }
        }
        names.extend(variant);
        let name = names.join(".");
        match name.strip_suffix("tupe_table") {
            Some(prefix) => format!("{prefix}t5_table"),
            None => name,
        }
    }
}

#[derive(Default)]
struct Collector {
    path: ParamPath,
    dtype: WeightDtype,
    entries: BTreeMap<String, Entry>,
    ids: BTreeMap<String, u64>,
    /// The first tensor with a value that is not finite in the stored precision.
    non_finite: Option<String>,
}

impl ModuleVisitor for Collector {
    fn enter_module(&mut self, name: &str, container: &str) {
        self.path.enter(name, container);
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.exit();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let name = self.path.name();
        let tensor = param.val();
        let shape = tensor.dims().to_vec();
        let values = crate::lm::model::to_vec(tensor);
        let finite = match self.dtype {
            WeightDtype::F32 => values.iter().all(|v| v.is_finite()),
            WeightDtype::F16 => values
                .iter()
                .all(|&v| burn::tensor::f16::from_f32(v).is_finite()),
        };
        if !finite && self.non_finite.is_none() {
            self.non_finite = Some(name.clone());
        }
        let (dtype, bytes) = match self.dtype {
            WeightDtype::F32 => (
                Dtype::F32,
                values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            WeightDtype::F16 => (
                Dtype::F16,
                values
                    .iter()
                    .flat_map(|&v| burn::tensor::f16::from_f32(v).to_le_bytes())
                    .collect(),
            ),
        };
        self.ids.insert(name.clone(), param.id.val());
        self.entries.insert(
            name,
            Entry {
                dtype,
                shape,
                bytes,
            },
        );
    }
}

/// The model's weights as safetensors bytes in `dtype` and their parameter ids by name.
///
/// # Errors
/// [`Error::NonFinite`] naming the first tensor with a value that is not finite (in `dtype`:
/// an f32 above 65504 is infinite in f16), or a serialisation failure.
pub fn weights_bytes(model: &Lm, dtype: WeightDtype) -> Result<(Vec<u8>, BTreeMap<String, u64>)> {
    let mut c = Collector {
        dtype,
        ..Default::default()
    };
    model.visit(&mut c);
    if let Some(name) = c.non_finite {
        return Err(Error::NonFinite(format!(
            "the weights of {name} are not finite{}; nothing was saved (lower --lr or raise --warmup)",
            if dtype == WeightDtype::F16 { " in f16" } else { "" }
        )));
    }
    let mut info = HashMap::new();
    info.insert("format".to_string(), "posenc byte LM".to_string());
    let bytes = safetensors::tensor::serialize(c.entries.iter(), Some(info)).map_err(|e| {
        Error::Format {
            path: WEIGHTS_FILE.into(),
            message: e.to_string(),
        }
    })?;
    Ok((bytes, c.ids))
}

/// The model's weights as a safetensors file in `dtype` (written atomically); returns the
/// parameter ids by name (the optimizer state refers to them).
///
/// # Errors
/// As [`weights_bytes`], or a failed write.
pub fn save_weights(model: &Lm, path: &Path, dtype: WeightDtype) -> Result<BTreeMap<String, u64>> {
    let (bytes, ids) = weights_bytes(model, dtype)?;
    write_atomic(path, &bytes)?;
    Ok(ids)
}

struct Loader<'a> {
    path: ParamPath,
    tensors: SafeTensors<'a>,
    ids: Option<&'a BTreeMap<String, u64>>,
    error: Option<Error>,
    seen: usize,
    file: String,
}

impl Loader<'_> {
    fn values(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let view = self.tensors.tensor(name).map_err(|e| Error::Format {
            path: WEIGHTS_FILE.into(),
            message: format!("no tensor {name}: {e}"),
        })?;
        if view.shape() != shape {
            return Err(Error::ShapeMismatch {
                context: "checkpoint tensor",
                expected: format!("{name} {shape:?}"),
                found: format!("{:?}", view.shape()),
            });
        }
        let data = view.data();
        Ok(match view.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| burn::tensor::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(Error::Format {
                    path: WEIGHTS_FILE.into(),
                    message: format!("{name}: unsupported dtype {other:?}"),
                })
            }
        })
    }
}

impl ModuleMapper for Loader<'_> {
    fn enter_module(&mut self, name: &str, container: &str) {
        self.path.enter(name, container);
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.exit();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.path.name();
        let shape = param.lazy_shape().to_vec();
        match self.values(&name, &shape) {
            Ok(values) => {
                self.seen += 1;
                let device = param.lazy_device();
                let tensor = Tensor::<D>::from_data(TensorData::new(values, shape), &device);
                let id = self
                    .ids
                    .and_then(|ids| ids.get(&name))
                    .map(|&id| ParamId::from(id))
                    .unwrap_or(param.id);
                param.transform_for_load(tensor, id)
            }
            Err(e) => {
                self.error.get_or_insert(match e {
                    Error::Format { message, .. } => Error::Format {
                        path: self.file.clone(),
                        message,
                    },
                    other => other,
                });
                param
            }
        }
    }
}

/// The names of `model`'s tensors in `model.safetensors`.
pub fn tensor_names(model: &Lm) -> BTreeSet<String> {
    struct Names {
        path: ParamPath,
        names: BTreeSet<String>,
    }
    impl ModuleVisitor for Names {
        fn enter_module(&mut self, name: &str, container: &str) {
            self.path.enter(name, container);
        }
        fn exit_module(&mut self, _name: &str, _container: &str) {
            self.path.exit();
        }
        fn visit_float<const D: usize>(&mut self, _param: &Param<Tensor<D>>) {
            self.names.insert(self.path.name());
        }
    }
    let mut v = Names {
        path: ParamPath::default(),
        names: BTreeSet::new(),
    };
    model.visit(&mut v);
    v.names
}

/// `model` in the form of the weights named `stored`: with FIRE's $c$ and $L$ fixed when
/// every tensor the file lacks is one of them (a file from before they were learned).
pub fn in_stored_form(model: Lm, stored: &BTreeSet<String>) -> Lm {
    let names = tensor_names(&model);
    let mut missing = names.difference(stored).peekable();
    let learned_scalar = |name: &String| {
        let last = name.rsplit('.').next().unwrap_or_default();
        LEARNED_SCALARS.contains(&last)
    };
    if missing.peek().is_some() && missing.all(learned_scalar) {
        model.with_fixed_fire_transform()
    } else {
        model
    }
}

/// Loads weights saved by [`save_weights`] into `model` (whose shapes must match); with `ids`,
/// the parameters get back their saved ids (for resuming with the optimizer state).
///
/// # Errors
/// A missing file, a missing tensor, a shape mismatch, or extra tensors in the file.
pub fn load_weights(model: Lm, path: &Path, ids: Option<&BTreeMap<String, u64>>) -> Result<Lm> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    weights_from_bytes(model, &bytes, path, ids)
}

pub(super) fn weights_from_bytes(
    model: Lm,
    bytes: &[u8],
    path: &Path,
    ids: Option<&BTreeMap<String, u64>>,
) -> Result<Lm> {
    let tensors = SafeTensors::deserialize(bytes).map_err(|e| format_error(path, e))?;
    let total = tensors.len();
    let stored = tensors.names().into_iter().map(String::from).collect();
    let model = in_stored_form(model, &stored);
    let mut loader = Loader {
        path: ParamPath::default(),
        tensors,
        ids,
        error: None,
        seen: 0,
        file: path.display().to_string(),
    };
    let model = model.map(&mut loader);
    if let Some(e) = loader.error {
        return Err(e);
    }
    if loader.seen != total {
        return Err(format_error(
            path,
            format!(
                "{total} tensors in the file, {} in the model (another scheme or size?)",
                loader.seen
            ),
        ));
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::config::{ModelConfig, Scheme};
    use burn::tensor::Device;

    /// A FIRE file without `fire_c` and `fire_threshold_scale` (written before FIRE learned
    /// $c$ and $L$) loads into the fixed form, tensor for tensor; a file that lacks any other
    /// tensor is still refused; a current file loads with both learned.
    #[test]
    fn a_fire_file_from_before_c_and_l_were_learned_loads_with_them_fixed() {
        let device = Device::flex();
        let c = ModelConfig::tiny(Scheme::Fire);
        let learned = Lm::new(&c, 3, &device).unwrap();
        let (older, _) = weights_bytes(
            &learned.clone().with_fixed_fire_transform(),
            WeightDtype::F32,
        )
        .unwrap();
        let path = Path::new("model.safetensors");
        let fresh = || Lm::new(&c, 4, &device).unwrap();
        let loaded = weights_from_bytes(fresh(), &older, path, None).unwrap();
        let names = tensor_names(&loaded);
        assert!(names.iter().all(|n| !n.ends_with("fire_c")), "{names:?}");
        assert_eq!(weights_bytes(&loaded, WeightDtype::F32).unwrap().0, older);
        let (current, _) = weights_bytes(&learned, WeightDtype::F32).unwrap();
        let loaded = weights_from_bytes(fresh(), &current, path, None).unwrap();
        assert!(tensor_names(&loaded).contains("blocks.0.attn.positions.fire_threshold_scale"));
        // T5 weights without their table: refused
        let t5 = ModelConfig::tiny(Scheme::T5);
        let mut entries = BTreeMap::new();
        let tensors = SafeTensors::deserialize(
            &weights_bytes(&Lm::new(&t5, 0, &device).unwrap(), WeightDtype::F32)
                .unwrap()
                .0,
        )
        .unwrap()
        .tensors()
        .into_iter()
        .filter(|(n, _)| !n.ends_with("t5_table"))
        .map(|(n, v)| (n, (v.dtype(), v.shape().to_vec(), v.data().to_vec())))
        .collect::<Vec<_>>();
        for (n, (dtype, shape, bytes)) in tensors {
            entries.insert(
                n,
                Entry {
                    dtype,
                    shape,
                    bytes,
                },
            );
        }
        let partial = safetensors::tensor::serialize(entries.iter(), None).unwrap();
        assert!(
            weights_from_bytes(Lm::new(&t5, 0, &device).unwrap(), &partial, path, None).is_err()
        );
    }

    #[test]
    fn a_scheme_variant_joins_the_field_after_it_in_a_parameter_name() {
        let mut path = ParamPath::default();
        for (name, container) in [
            ("blocks", "Struct:Lm"),
            ("0", "Vec"),
            ("attn", "Struct:Block"),
            ("positions", "Struct:SelfAttention"),
            ("Shaw", "Enum:LayerPositions"),
            ("keys", "Struct:ShawParams"),
        ] {
            path.enter(name, container);
        }
        assert_eq!(path.name(), "blocks.0.attn.positions.shaw_keys");
        path.exit();
        path.exit();
        path.enter("Tupe", "Enum:LayerPositions");
        path.enter("table", "Struct:TupeParams");
        assert_eq!(path.name(), "blocks.0.attn.positions.t5_table");
        let mut model = ParamPath::default();
        model.enter("positions", "Struct:Lm");
        model.enter("Learned", "Enum:AbsolutePositions");
        assert_eq!(model.name(), "positions.learned");
        // and on a real model: the names of every parameter are those of the first format
        let device = Device::flex();
        let tupe = Lm::new(&ModelConfig::tiny(Scheme::Tupe), 0, &device).unwrap();
        let (_, ids) = weights_bytes(&tupe, WeightDtype::F32).unwrap();
        for name in [
            "positions.tupe",
            "blocks.0.attn.positions.tupe_u_q",
            "blocks.0.attn.positions.tupe_u_k",
            "blocks.0.attn.positions.t5_table",
        ] {
            assert!(ids.contains_key(name), "{name} in {:?}", ids.keys());
        }
    }
}
