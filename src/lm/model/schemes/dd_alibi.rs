//! Data-dependent ALiBi (the forgetting gate) in the byte LM: per layer, a linear map from the
//! attention's input to one log gate per token and head, $f_{h,t} = \ln\sigma(w_h \cdot x_t +
//! b_h)$, and the bias $b_{ij} = C_{h,i} - C_{h,j}$ of their running sum
//! ([`crate::encodings::dd_alibi`]).
//!
//! The bias is per sequence, but it separates into a number per query row and one per key
//! column, so attention receives it as two one-column tables `[B, H, L, 1]` read in the
//! query's row ($C_i / c$) and in the key's row ($-C_j / c$), the fused attention's gathered
//! terms (scaled by $c$ with the content scores, so divided by it here): nothing of size
//! $L \times L$ in training or evaluation. The gradient returns to $C$ through those tables
//! and to $w, b$ by burn's autograd (the cumulative sum, the log-sigmoid, the product).

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::activation::log_sigmoid;
use burn::tensor::{Device, Tensor};

use super::LayerInput;
use crate::encodings::dd_alibi::DataDependentAlibi;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param1, param2};
use crate::lm::ops::{DistanceIndex, Gathered, ScoreTerms};

/// The forgetting gate of one layer.
#[derive(Module, Debug)]
pub struct DdAlibiParams {
    /// $w$, `[d_model, heads]`.
    pub gate_weight: Param<Tensor<2>>,
    /// $b$, `[heads]`.
    pub gate_bias: Param<Tensor<1>>,
}

/// The one-column tables' index for $L$ positions: column 0 at every distance.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\text{index}(d) = 0$, $d = 0..L$.
    pub index: DistanceIndex,
}

impl Objects {
    /// The index for `len` positions.
    pub fn new(len: usize) -> Self {
        Self {
            index: Arc::from(vec![0; len]),
        }
    }
}

impl DdAlibiParams {
    /// The gate of [`DataDependentAlibi::new`] (`dd_alibi_gate_bias` as its bias).
    ///
    /// # Errors
    /// When the encodings reject the sizes or the bias.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let gate = DataDependentAlibi::new(c.d_model, c.heads, c.dd_alibi_gate_bias, seed)?;
        Ok(Self {
            gate_weight: param2(&gate.weight, device),
            gate_bias: param1(&gate.bias.to_vec(), device),
        })
    }

    /// $C_{h,i} = \sum_{t \le i} \ln\sigma(w_h \cdot x_t + b_h)$ of the attention's input
    /// `x [B, L, d_model]`, `[B, H, L]`.
    pub fn cumulative(&self, x: &Tensor<3>, input: &LayerInput) -> Tensor<3> {
        // x w + b, [B, L, H]
        let z = input.ops.product(x.clone(), self.gate_weight.val())
            + self.gate_bias.val().unsqueeze::<3>();
        // f = ln sigma(z), running sum over t, [B, H, L]
        log_sigmoid(z).swap_dims(1, 2).cumsum(2)
    }

    /// $b_{ij} = C_{h,i} - C_{h,j}$ as $c\,(C_i / c - C_j / c)$: tables in the query's and in
    /// the key's row.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        let scale = input.config.score_scale();
        // C / c, [B, H, L, 1]
        let table = self
            .cumulative(input.x, input)
            .div_scalar(scale)
            .unsqueeze_dim::<4>(3);
        let gathered = |table: Tensor<4>| Gathered {
            table,
            index: o.index.clone(),
        };
        ScoreTerms {
            query_table: Some(gathered(table.clone())),
            key_table: Some(gathered(table.neg())),
            ..ScoreTerms::default()
        }
    }
}
