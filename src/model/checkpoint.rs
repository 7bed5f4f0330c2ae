//! Weights as safetensors (f32 or f16), named by their path in the model
//! (`blocks.0.attn.query.weight`), written atomically.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::{Tensor, TensorData};
use safetensors::tensor::{Dtype, SafeTensors, View};
use serde::{Deserialize, Serialize};

use super::Lm;
use crate::error::{Error, Result};

/// Storage precision of checkpoint weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// 32-bit floats.
    #[default]
    F32,
    /// IEEE half precision (what the shipped checkpoints use).
    F16,
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a
/// reader never sees a half-written file.
///
/// # Errors
/// When the folder cannot be created or the file written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_error(path, e))
}

pub(crate) fn io_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

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

#[derive(Default)]
struct Collector {
    path: Vec<String>,
    dtype: WeightDtype,
    entries: BTreeMap<String, Entry>,
    ids: BTreeMap<String, u64>,
}

impl ModuleVisitor for Collector {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let name = self.path.join(".");
        let tensor = param.val();
        let shape = tensor.dims().to_vec();
        let values = super::to_vec(tensor);
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

/// The model's weights as a safetensors file in `dtype`; returns the parameter ids by name
/// (the optimizer state refers to them).
///
/// # Errors
/// When serialisation or writing fails.
pub fn save_weights(model: &Lm, path: &Path, dtype: WeightDtype) -> Result<BTreeMap<String, u64>> {
    let mut c = Collector {
        dtype,
        ..Default::default()
    };
    model.visit(&mut c);
    let mut info = HashMap::new();
    info.insert("format".to_string(), "posenc byte LM".to_string());
    let bytes = safetensors::tensor::serialize(c.entries.iter(), Some(info))
        .map_err(|e| io_error(path, e))?;
    write_atomic(path, &bytes)?;
    Ok(c.ids)
}

struct Loader<'a> {
    path: Vec<String>,
    tensors: SafeTensors<'a>,
    ids: Option<&'a BTreeMap<String, u64>>,
    error: Option<Error>,
    seen: usize,
}

impl Loader<'_> {
    fn values(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let view = self
            .tensors
            .tensor(name)
            .map_err(|e| Error::Io(format!("checkpoint has no tensor {name}: {e}")))?;
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
            other => return Err(Error::Io(format!("{name}: unsupported dtype {other:?}"))),
        })
    }
}

impl ModuleMapper for Loader<'_> {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let name = self.path.join(".");
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
                self.error.get_or_insert(e);
                param
            }
        }
    }
}

/// Loads weights saved by [`save_weights`] into `model` (whose shapes must match); with `ids`,
/// the parameters get back their saved ids (for resuming with the optimizer state).
///
/// # Errors
/// A missing file, a missing tensor, a shape mismatch, or extra tensors in the file.
pub fn load_weights(model: Lm, path: &Path, ids: Option<&BTreeMap<String, u64>>) -> Result<Lm> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    let tensors = SafeTensors::deserialize(&bytes).map_err(|e| io_error(path, e))?;
    let total = tensors.len();
    let mut loader = Loader {
        path: Vec::new(),
        tensors,
        ids,
        error: None,
        seen: 0,
    };
    let model = model.map(&mut loader);
    if let Some(e) = loader.error {
        return Err(e);
    }
    if loader.seen != total {
        return Err(Error::Io(format!(
            "{}: {total} tensors in the file, {} in the model (another scheme or size?)",
            path.display(),
            loader.seen
        )));
    }
    Ok(model)
}
