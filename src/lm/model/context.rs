//! Everything about positions that depends on neither content nor trained weights, for one
//! sequence length: built once per length from the encodings, moved to the device, and read
//! by every layer of a forward pass.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::schemes;
use super::schemes::RopeInference;
use crate::encodings::rope::RopeScaling;
use crate::error::{Error, Result};
use crate::lm::config::{ModelConfig, Scheme};

/// The position-only data of a sequence of `len` positions $0..L$ (queries and keys alike):
/// the positions clamped to the absolute tables and the objects of one scheme
/// ([`super::schemes`]).
#[derive(Clone)]
pub struct PositionContext {
    /// $L$.
    pub len: usize,
    /// Positions $0..L$ clamped to the absolute tables' last row, `[L]`.
    pub clamped_positions: Tensor<1, Int>,
    /// The scheme the objects belong to.
    scheme: Scheme,
    /// The scheme's objects (its `Objects` type).
    objects: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for PositionContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PositionContext")
            .field("len", &self.len)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl PositionContext {
    /// The objects of `c`'s scheme for `len` positions. `rope_scaling` replaces plain RoPE's
    /// frequencies at inference (PI, NTK, dynamic NTK, YaRN, Llama3; dynamic NTK looks at
    /// `len`).
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn new(
        c: &ModelConfig,
        len: usize,
        rope_scaling: RopeScaling,
        device: &Device,
    ) -> Result<Self> {
        Self::at_inference(c, len, rope_scaling, &RopeInference::default(), device)
    }

    /// [`PositionContext::new`] with RoPE's positions at inference changed by `inference`
    /// (ReRoPE's window, log-$n$).
    ///
    /// # Errors
    /// When the encodings reject the configuration; `inference` on a model that is not RoPE.
    pub fn at_inference(
        c: &ModelConfig,
        len: usize,
        rope_scaling: RopeScaling,
        inference: &RopeInference,
        device: &Device,
    ) -> Result<Self> {
        let clamped: Vec<i64> = (0..len)
            .map(|p| p.min(c.max_positions.saturating_sub(1)) as i64)
            .collect();
        Ok(Self {
            len,
            clamped_positions: Tensor::from_data(TensorData::new(clamped, [len]), device),
            scheme: c.scheme,
            objects: schemes::objects(c, len, rope_scaling, inference, device)?,
        })
    }

    /// The device the objects live on.
    pub fn device(&self) -> Device {
        self.clamped_positions.device()
    }

    /// The scheme's objects, as the type its trained form reads.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the context was built for another scheme.
    pub fn objects<T: Any>(&self) -> Result<&T> {
        self.objects.downcast_ref::<T>().ok_or_else(|| {
            Error::Conflict(format!(
                "a position context built for scheme {} used with a model of another scheme",
                self.scheme
            ))
        })
    }

    /// Whether the objects depend on the length itself (dynamic NTK, randomized RoPE's sampled
    /// evaluation positions), so that a length-$L$ prefix of a longer window is not scored as a
    /// window of length $L$ (each scheme's trained form says which, in `schemes`).
    pub fn is_dynamic(c: &ModelConfig, rope_scaling: &RopeScaling) -> bool {
        schemes::depend_on_length(c, rope_scaling)
    }

    /// The context of training step `step` of a run seeded by `seed` with `batch` sequences:
    /// this one, or, for a scheme that draws its positions per step (randomized RoPE), one
    /// with that step's objects (built by the scheme's trained form in `schemes`).
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn for_step(
        &self,
        c: &ModelConfig,
        batch: usize,
        seed: u64,
        step: u64,
    ) -> Result<Cow<'_, Self>> {
        let device = self.device();
        Ok(
            match schemes::step_objects(c, (batch, self.len), seed, step, &device)? {
                Some(objects) => Cow::Owned(Self {
                    objects,
                    ..self.clone()
                }),
                None => Cow::Borrowed(self),
            },
        )
    }
}
