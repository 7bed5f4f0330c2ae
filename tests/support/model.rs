//! Tiny models, a small corpus, tensors to and from ndarray, and the float parameters of a
//! module by their checkpoint names (feature `train`).

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Device, Gradients, Tensor, TensorData};
use ndarray::Array2;
use posenc::lm::checkpoint::ParamPath;
use posenc::lm::model::to_vec;
use tempfile::TempDir;

/// A temporary corpus folder with the three splits of [`super::text`] (20,000, 3,000 and
/// 3,000 bytes), removed when dropped.
pub fn corpus() -> TempDir {
    let dir = super::temp_dir();
    let split = |name: &str, n: usize, seed: u64| {
        std::fs::write(dir.path().join(name), super::text(n, seed)).unwrap();
    };
    split("train.txt", 20_000, 1);
    split("valid.txt", 3_000, 2);
    split("test.txt", 3_000, 3);
    dir
}

/// A tensor back to an ndarray `[rows, cols]`.
pub fn array2(t: Tensor<2>) -> Array2<f32> {
    let [r, c] = t.dims();
    Array2::from_shape_vec((r, c), to_vec(t)).unwrap()
}

/// An ndarray `[rows, cols]` as a tensor.
pub fn tensor2(a: &Array2<f32>, device: &Device) -> Tensor<2> {
    let a = a.as_standard_layout();
    let data = TensorData::new(a.iter().copied().collect(), [a.nrows(), a.ncols()]);
    Tensor::from_data(data, device)
}

/// A float parameter of a module: its checkpoint name ([`ParamPath`], as
/// `blocks.0.attn.query.weight`), its number of entries and, when gradients were given, its
/// gradient, flattened (`None` where it has none).
#[derive(Debug)]
pub struct NamedParam {
    pub name: String,
    pub len: usize,
    pub grad: Option<Vec<f32>>,
}

/// Every float parameter of `module`, in the order burn visits them.
pub fn params<M: Module>(module: &M, grads: Option<&Gradients>) -> Vec<NamedParam> {
    struct Visit<'a> {
        path: ParamPath,
        grads: Option<&'a Gradients>,
        found: Vec<NamedParam>,
    }
    impl ModuleVisitor for Visit<'_> {
        fn enter_module(&mut self, name: &str, container: &str) {
            self.path.enter(name, container);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.exit();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let t = param.val();
            self.found.push(NamedParam {
                name: self.path.name(),
                len: t.dims().iter().product(),
                grad: self.grads.and_then(|g| t.grad(g)).map(to_vec),
            });
        }
    }
    let mut visit = Visit {
        path: ParamPath::default(),
        grads,
        found: Vec::new(),
    };
    module.visit(&mut visit);
    visit.found
}

/// `module` with `edit` applied to the entries (flattened) of the parameter named `target`.
pub fn map_param<M: Module>(module: M, target: &str, edit: impl FnMut(&mut [f32])) -> M {
    struct Edit<'a, F> {
        path: ParamPath,
        target: &'a str,
        edit: F,
    }
    impl<F: FnMut(&mut [f32])> ModuleMapper for Edit<'_, F> {
        fn enter_module(&mut self, name: &str, container: &str) {
            self.path.enter(name, container);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.exit();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            if self.path.name() != self.target {
                return param;
            }
            param.map(|t| {
                let shape = t.dims();
                let device = t.device();
                // a parameter of a model being trained stays one
                let tracked = t.is_require_grad();
                let mut values = to_vec(t);
                (self.edit)(&mut values);
                Tensor::from_data(TensorData::new(values, shape.to_vec()), &device)
                    .set_require_grad(tracked)
            })
        }
    }
    module.map(&mut Edit {
        path: ParamPath::default(),
        target,
        edit,
    })
}
