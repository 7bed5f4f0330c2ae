//! A checkpoint: one folder holding the whole on-disk format, written as one atomic unit.
//!
//! * `config.json`: [`CheckpointInfo`] (model and training configuration, steps done, the
//!   digests of the weights, of the training text and of the checkpoint fine-tuned from);
//! * `model.safetensors`: the weights, f32 or f16, named by their path in the model
//!   (`blocks.0.attn.query.weight`);
//! * `state.json`: [`TrainState`], the loss curve and the parameter ids the optimizer refers to;
//! * `optimizer.bpk`: AdamW's moments (burnpack), only needed to resume.
//!
//! **Atomicity.** [`save`] writes the four files into a fresh sibling folder `.NAME.new`, syncs
//! every file and the folder, then moves an existing checkpoint aside (`.NAME.old`), renames
//! the new folder into place and only then deletes the old one, syncing the parent folder after
//! each rename. A kill at any point leaves `NAME` whole (old or new), or `NAME` missing beside a
//! whole `.NAME.new` and `.NAME.old`; [`recover`] (called by every reader and by the next save)
//! then puts the new one in place if it is complete, else the old one. Weights that are not
//! finite are never written, and `config.json` records the digest of the weights it belongs
//! with, so a reader never pairs one save's weights with another's configuration.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::ModuleOptimizer;
use burn::tensor::{Device, Tensor, TensorData};
use safetensors::tensor::{Dtype, SafeTensors, View};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
pub(crate) use crate::lm::config::checkpoint::{format_error, io_error};
pub use crate::lm::config::{read_json, CheckpointInfo, WeightDtype};

use crate::lm::model::Lm;

/// The configuration file of a checkpoint.
pub const CONFIG_FILE: &str = "config.json";
/// The weights file of a checkpoint.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The training-state file of a checkpoint.
pub const STATE_FILE: &str = "state.json";
/// The optimizer file of a checkpoint.
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";
/// Every file a checkpoint folder may hold.
pub const FILES: [&str; 4] = [CONFIG_FILE, WEIGHTS_FILE, STATE_FILE, OPTIMIZER_FILE];

/// `state.json` of a checkpoint. Unknown keys are an error when it is read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainState {
    /// Training loss of every step, nats per byte.
    pub losses: Vec<f64>,
    /// The validation loss measured during training ([`crate::lm::config::TrainConfig::valid_every`]).
    #[serde(default)]
    pub valid: Vec<ValidLoss>,
    /// Parameter ids by name (the optimizer state is keyed by them).
    pub param_ids: BTreeMap<String, u64>,
}

/// One measurement of the validation loss during training.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidLoss {
    /// Steps done when it was measured.
    pub step: usize,
    /// Mean loss over the scored bytes, nats per byte.
    pub loss: f64,
}

/// The SHA-256 digest of `bytes` as `sha256:` and 64 hex digits.
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The [`digest`] of a file's content.
///
/// # Errors
/// An unreadable file.
pub fn file_digest(path: &Path) -> Result<String> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    Ok(digest(&bytes))
}

/// Pretty JSON with a final newline.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// Writes `bytes` to `path` through a synced temporary file in the same folder and a rename,
/// so a reader never sees a half-written file.
///
/// # Errors
/// When the folder cannot be created or the file written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_of(path);
    fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_error(&tmp, e));
    }
    fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
    sync_dir(&dir)
}

/// The folder holding `path` (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks, before any work, that a file can be written at `path`: it is not a folder, its
/// folder exists or can be created, and a file can be created there (a probe file, removed at
/// once).
///
/// # Errors
/// [`Error::Io`] saying why not.
pub fn ensure_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(Error::Io(format!(
            "{}: is a folder, not a file that can be written",
            path.display()
        )));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    probe_folder(&parent_of(path), name)
}

/// Checks that a folder can be created (or written) at `dir` (its parent is where a checkpoint
/// is written and renamed).
///
/// # Errors
/// [`Error::Io`] saying why not.
pub fn ensure_dir_writable(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Io(format!(
            "{}: exists and is not a folder",
            dir.display()
        )));
    }
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    probe_folder(&parent_of(dir), name)
}

fn probe_folder(dir: &Path, name: &str) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| io_error(dir, format!("cannot create the folder: {e}")))?;
    let probe = dir.join(format!(".{name}.probe-{}", std::process::id()));
    fs::File::create(&probe)
        .map_err(|e| io_error(dir, format!("cannot write in this folder: {e}")))?;
    fs::remove_file(&probe).map_err(|e| io_error(&probe, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    // directories are synced through a read-only handle (Unix); elsewhere this is a no-op
    #[cfg(unix)]
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

fn sync_file(path: &Path) -> Result<()> {
    fs::OpenOptions::new()
        .read(true)
        .open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_error(path, e))
}

/// `.NAME.new` or `.NAME.old` beside the checkpoint folder `dir`.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy().into_owned());
    parent_of(dir).join(format!(".{name}.{suffix}"))
}

/// Whether a folder holds a complete checkpoint: a readable, valid `config.json` and weights
/// whose digest is the one it records.
fn is_complete(dir: &Path) -> bool {
    read_info_here(dir)
        .and_then(|info| verify_weights(dir, &info).map(|_| ()))
        .is_ok()
}

/// Brings a checkpoint whose save was interrupted back to a whole state: when `dir` is missing
/// but `.NAME.new` or `.NAME.old` is there, the new one goes into place if it is complete, else
/// the old one. A present `dir` is left alone (leftovers beside it are removed by the next
/// save).
///
/// # Errors
/// A failed rename.
pub fn recover(dir: &Path) -> Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let (new, old) = (sibling(dir, "new"), sibling(dir, "old"));
    let pick = if new.is_dir() && is_complete(&new) {
        new
    } else if old.is_dir() {
        old
    } else {
        return Ok(());
    };
    fs::rename(&pick, dir).map_err(|e| io_error(&pick, e))?;
    sync_dir(&parent_of(dir))
}

/// A step of [`save`], after which a test can stop it as a kill would.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveStep {
    /// Only the weights written into `.NAME.new` (a kill while writing).
    WeightsWritten,
    /// Every file of `.NAME.new` written and synced.
    NewSynced,
    /// The existing checkpoint renamed to `.NAME.old`.
    OldMovedAside,
    /// `.NAME.new` renamed to `NAME`, `.NAME.old` not yet removed.
    NewMovedIn,
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

/// A parameter's module path as its name in `model.safetensors`: the field and index names
/// joined by dots, where a scheme's variant ([`super::model::LayerPositions`],
/// [`super::model::AbsolutePositions`]) prefixes the field after it, or names the parameter
/// it holds: `blocks.0.attn.positions.shaw_keys`, `positions.learned`. TUPE's bucket bias
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

/// Writes a checkpoint into `dir` as one atomic unit (see the module documentation): the
/// weights of `model`, the optimizer's state (when given), `state` (its parameter ids are
/// filled in) and `info` (its weights digest is filled in).
///
/// # Errors
/// [`Error::NonFinite`] when a weight is not finite (nothing is written), or a failed write
/// (the previous checkpoint, if any, stays whole).
pub fn save(
    dir: &Path,
    model: &Lm,
    optimizer: Option<&ModuleOptimizer>,
    info: &mut CheckpointInfo,
    state: &mut TrainState,
) -> Result<()> {
    save_until(dir, model, optimizer, info, state, None)
}

/// [`save`], stopped after `stop` as a kill would stop it (for the tests of [`recover`]).
#[doc(hidden)]
pub(crate) fn save_until(
    dir: &Path,
    model: &Lm,
    optimizer: Option<&ModuleOptimizer>,
    info: &mut CheckpointInfo,
    state: &mut TrainState,
    stop: Option<SaveStep>,
) -> Result<()> {
    let (weights, ids) = weights_bytes(model, info.dtype)?;
    state.param_ids = ids;
    info.weights_digest = Some(digest(&weights));
    let parent = parent_of(dir);
    fs::create_dir_all(&parent).map_err(|e| io_error(&parent, e))?;
    recover(dir)?;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Io(format!(
            "{}: exists and is not a folder",
            dir.display()
        )));
    }
    let (new, old) = (sibling(dir, "new"), sibling(dir, "old"));
    for leftover in [&new, &old] {
        if leftover.exists() {
            fs::remove_dir_all(leftover).map_err(|e| io_error(leftover, e))?;
        }
    }
    fs::create_dir(&new).map_err(|e| io_error(&new, e))?;
    let stopped = || Err(Error::Io(format!("save of {} stopped", dir.display())));
    let write = |name: &str, bytes: &[u8]| {
        let path = new.join(name);
        fs::write(&path, bytes).map_err(|e| io_error(&path, e))
    };
    write(WEIGHTS_FILE, &weights)?;
    if stop == Some(SaveStep::WeightsWritten) {
        return stopped();
    }
    if let Some(optim) = optimizer {
        let path = new.join(OPTIMIZER_FILE);
        optim
            .save(&path)
            .map_err(|e| io_error(&path, format!("{e:?}")))?;
    }
    write(STATE_FILE, to_json(state).as_bytes())?;
    // config.json last: a folder whose config.json parses has every other file
    write(CONFIG_FILE, to_json(info).as_bytes())?;
    for name in FILES {
        let path = new.join(name);
        if path.exists() {
            sync_file(&path)?;
        }
    }
    sync_dir(&new)?;
    if stop == Some(SaveStep::NewSynced) {
        return stopped();
    }
    if dir.exists() {
        fs::rename(dir, &old).map_err(|e| io_error(dir, e))?;
        sync_dir(&parent)?;
    }
    if stop == Some(SaveStep::OldMovedAside) {
        return stopped();
    }
    if let Err(e) = fs::rename(&new, dir) {
        // a reader's `recover` may have put this very folder in place between the renames
        let ours = read_info_here(dir).is_ok_and(|i| i.weights_digest == info.weights_digest);
        if !ours {
            return Err(io_error(&new, e));
        }
    }
    sync_dir(&parent)?;
    if stop == Some(SaveStep::NewMovedIn) {
        return stopped();
    }
    if old.exists() {
        fs::remove_dir_all(&old).map_err(|e| io_error(&old, e))?;
        sync_dir(&parent)?;
    }
    Ok(())
}

/// `config.json` of `dir` itself, validated, without recovery.
fn read_info_here(dir: &Path) -> Result<CheckpointInfo> {
    let path = dir.join(CONFIG_FILE);
    let info: CheckpointInfo = read_json(&path)?;
    info.validate().map_err(|e| format_error(&path, e))?;
    Ok(info)
}

/// Reads and validates `config.json` of a checkpoint folder (after [`recover`]).
///
/// # Errors
/// A missing or unreadable file ([`Error::Io`]), unknown keys or invalid values
/// ([`Error::Format`], naming the key).
pub fn read_info(dir: &Path) -> Result<CheckpointInfo> {
    recover(dir)?;
    read_info_here(dir)
}

/// Reads `state.json` of a checkpoint folder.
///
/// # Errors
/// A missing, unreadable or malformed file.
pub fn read_state(dir: &Path) -> Result<TrainState> {
    read_json(&dir.join(STATE_FILE))
}

/// The weights file's bytes, checked against the digest `info` records (when it records one).
fn verify_weights(dir: &Path, info: &CheckpointInfo) -> Result<Vec<u8>> {
    let path = dir.join(WEIGHTS_FILE);
    let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
    if let Some(expected) = &info.weights_digest {
        if &digest(&bytes) != expected {
            return Err(format_error(
                &path,
                format!(
                    "its digest is not the one {CONFIG_FILE} records ({expected}): the weights belong to another save"
                ),
            ));
        }
    }
    Ok(bytes)
}

/// Loads a checkpoint's model on `device` (no autodiff unless the device has it), with
/// `ids` the saved parameter ids (for resuming with the optimizer state).
///
/// # Errors
/// As [`read_info`] and [`load_weights`]; weights whose digest differs from the recorded one.
pub fn load(
    dir: &Path,
    device: &Device,
    ids: Option<&BTreeMap<String, u64>>,
) -> Result<(Lm, CheckpointInfo)> {
    let info = read_info(dir)?;
    let bytes = verify_weights(dir, &info)?;
    let model = Lm::new(&info.model, info.train.seed, device)?;
    let model = weights_from_bytes(model, &bytes, &dir.join(WEIGHTS_FILE), ids)?;
    Ok((model, info))
}

/// Loads the weights of the checkpoint in `dir` into `model` (of the same shapes; a fine-tune
/// may differ in length or RoPE scaling); returns it and the digest of the weights.
///
/// # Errors
/// As [`load`].
pub fn load_into(model: Lm, dir: &Path) -> Result<(Lm, String)> {
    let info = read_info(dir)?;
    let bytes = verify_weights(dir, &info)?;
    let model = weights_from_bytes(model, &bytes, &dir.join(WEIGHTS_FILE), None)?;
    Ok((model, digest(&bytes)))
}

/// Loads a checkpoint's model on `device`.
///
/// # Errors
/// As [`load`].
pub fn load_model(dir: &Path, device: &Device) -> Result<(Lm, CheckpointInfo)> {
    load(dir, device, None)
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

/// Loads weights saved by [`save_weights`] into `model` (whose shapes must match); with `ids`,
/// the parameters get back their saved ids (for resuming with the optimizer state).
///
/// # Errors
/// A missing file, a missing tensor, a shape mismatch, or extra tensors in the file.
pub fn load_weights(model: Lm, path: &Path, ids: Option<&BTreeMap<String, u64>>) -> Result<Lm> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    weights_from_bytes(model, &bytes, path, ids)
}

fn weights_from_bytes(
    model: Lm,
    bytes: &[u8],
    path: &Path,
    ids: Option<&BTreeMap<String, u64>>,
) -> Result<Lm> {
    let tensors = SafeTensors::deserialize(bytes).map_err(|e| format_error(path, e))?;
    let total = tensors.len();
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
    use crate::lm::config::{ModelConfig, Scheme, TrainConfig};

    fn tiny() -> ModelConfig {
        ModelConfig {
            scheme: Scheme::Alibi,
            layers: 1,
            d_model: 16,
            heads: 2,
            d_ff: 32,
            train_len: 12,
            max_positions: 12,
            ..ModelConfig::default()
        }
    }

    fn folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("posenc-checkpoint-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A model (weights seeded by `seed`) saved as step `step`, or stopped at `stop`.
    fn save_model(dir: &Path, seed: u64, step: usize, stop: Option<SaveStep>) -> Result<Lm> {
        let model = Lm::new(&tiny(), seed, &Device::flex()).unwrap();
        let train = TrainConfig {
            steps: 10,
            ..TrainConfig::default()
        };
        let mut info = CheckpointInfo::new(tiny(), train, 0, WeightDtype::F32);
        info.step = step;
        let optim = burn::optim::AdamWConfig::new().init();
        save_until(
            dir,
            &model,
            Some(&optim),
            &mut info,
            &mut TrainState::default(),
            stop,
        )
        .map(|()| model)
    }

    fn embedding(model: &Lm) -> Vec<f32> {
        crate::lm::model::to_vec(model.embedding.val())
    }

    #[test]
    fn a_save_stopped_at_any_step_leaves_the_old_or_the_new_checkpoint_whole() {
        let root = folder("kill");
        let device = Device::flex();
        for stop in [
            SaveStep::WeightsWritten,
            SaveStep::NewSynced,
            SaveStep::OldMovedAside,
            SaveStep::NewMovedIn,
        ] {
            let dir = root.join(format!("{stop:?}"));
            let old = save_model(&dir, 1, 1, None).unwrap();
            let err = save_model(&dir, 2, 2, Some(stop)).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("stopped"), "{err}");
            let new = Lm::new(&tiny(), 2, &device).unwrap();
            // a reader recovers a whole checkpoint: weights and config.json of one save
            let (loaded, info) = load_model(&dir, &device).unwrap();
            let expected = match info.step {
                1 => &old,
                2 => &new,
                s => panic!("{stop:?}: step {s}"),
            };
            assert_eq!(embedding(&loaded), embedding(expected), "{stop:?}");
            // the new save is the one kept once its folder is complete and the old one moved
            let want_new = matches!(stop, SaveStep::OldMovedAside | SaveStep::NewMovedIn);
            assert_eq!(info.step, if want_new { 2 } else { 1 }, "{stop:?}");
            // the next save completes and leaves no leftovers
            save_model(&dir, 3, 3, None).unwrap();
            assert_eq!(read_info(&dir).unwrap().step, 3);
            for suffix in ["new", "old"] {
                assert!(!sibling(&dir, suffix).exists(), "{stop:?}: .{suffix} left");
            }
        }
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_first_save_stopped_early_leaves_no_checkpoint_and_a_late_stop_a_whole_one() {
        let root = folder("first");
        let device = Device::flex();
        for (stop, whole) in [
            (SaveStep::WeightsWritten, false),
            (SaveStep::NewSynced, true),
            (SaveStep::OldMovedAside, true),
        ] {
            let dir = root.join(format!("{stop:?}"));
            assert!(save_model(&dir, 1, 1, Some(stop)).is_err());
            match load_model(&dir, &device) {
                Ok((_, info)) => assert!(whole && info.step == 1, "{stop:?}"),
                Err(e) => assert!(!whole, "{stop:?}: {e}"),
            }
        }
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn weights_of_another_save_are_refused() {
        let root = folder("mixed");
        let (a, b) = (root.join("a"), root.join("b"));
        save_model(&a, 1, 1, None).unwrap();
        save_model(&b, 2, 2, None).unwrap();
        fs::copy(b.join(WEIGHTS_FILE), a.join(WEIGHTS_FILE)).unwrap();
        let e = load_model(&a, &Device::flex()).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e:?}");
        assert!(e.to_string().contains("another save"), "{e}");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn non_finite_weights_are_never_saved() {
        struct Poison;
        impl ModuleMapper for Poison {
            fn map_float<const D: usize>(&mut self, p: Param<Tensor<D>>) -> Param<Tensor<D>> {
                p.map(|t| t.mul_scalar(f32::NAN))
            }
        }
        let root = folder("nan");
        let dir = root.join("c");
        let good = save_model(&dir, 1, 1, None).unwrap();
        let bad = good.clone().map(&mut Poison);
        let mut info = read_info(&dir).unwrap();
        info.step = 2;
        let e = save(&dir, &bad, None, &mut info, &mut TrainState::default()).unwrap_err();
        assert!(matches!(e, Error::NonFinite(_)), "{e:?}");
        assert!(e.to_string().contains("not finite"), "{e}");
        // the good checkpoint is untouched and nothing was written beside it
        let (loaded, info) = load_model(&dir, &Device::flex()).unwrap();
        assert_eq!(info.step, 1);
        assert_eq!(embedding(&loaded), embedding(&good));
        assert!(!sibling(&dir, "new").exists());
        // f32 weights too large for f16 are not finite in f16
        let huge = good.map(&mut {
            struct Scale;
            impl ModuleMapper for Scale {
                fn map_float<const D: usize>(&mut self, p: Param<Tensor<D>>) -> Param<Tensor<D>> {
                    p.map(|t| t.mul_scalar(1e9))
                }
            }
            Scale
        });
        let e = weights_bytes(&huge, WeightDtype::F16).unwrap_err();
        assert!(e.to_string().contains("in f16"), "{e}");
        assert!(weights_bytes(&huge, WeightDtype::F32).is_ok());
        let _ = fs::remove_dir_all(&root);
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
        let tupe = Lm::new(
            &ModelConfig {
                scheme: Scheme::Tupe,
                ..tiny()
            },
            0,
            &device,
        )
        .unwrap();
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

    #[test]
    fn unknown_keys_in_config_json_are_format_errors_naming_the_key() {
        let root = folder("keys");
        let dir = root.join("c");
        save_model(&dir, 1, 1, None).unwrap();
        let path = dir.join(CONFIG_FILE);
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.replace("\"rope_scaling\"", "\"rope_scalin\"")).unwrap();
        let e = read_info(&dir).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e:?}");
        assert!(e.to_string().contains("rope_scalin"), "{e}");
        // an out-of-range value names its key too
        fs::write(&path, text.replace("\"lr\": 0.003", "\"lr\": null")).unwrap();
        assert!(read_info(&dir).unwrap_err().to_string().contains("lr"));
        fs::write(&path, text.replace("\"batch\": 32", "\"batch\": 0")).unwrap();
        let e = read_info(&dir).unwrap_err().to_string();
        assert!(e.contains("invalid batch = 0"), "{e}");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn output_paths_are_checked_before_work() {
        let root = folder("writable");
        let file = root.join("a-file");
        fs::write(&file, "x").unwrap();
        // a folder under a regular file cannot be created
        let e = ensure_dir_writable(&file.join("ckpt")).unwrap_err();
        assert!(
            matches!(e, Error::Io(_)) && e.to_string().contains("a-file"),
            "{e}"
        );
        assert!(ensure_writable(&file.join("out.csv")).is_err());
        assert!(ensure_writable(&root)
            .unwrap_err()
            .to_string()
            .contains("folder"));
        ensure_writable(&root.join("new/sub/out.csv")).unwrap();
        ensure_dir_writable(&root.join("ckpt")).unwrap();
        let _ = fs::remove_dir_all(&root);
    }
}
