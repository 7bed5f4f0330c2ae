//! Learned absolute positions in the byte LM: a table of `max_positions` rows added to the
//! input ([`crate::encodings::learned`]); positions past the table reuse its last row.

use burn::module::Param;
use burn::tensor::{Device, Tensor};

use crate::encodings::learned::LearnedAbsolute;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::param2;

/// The learned table's position objects: none (the table is a parameter).
#[derive(Debug, Clone, Copy)]
pub struct Objects;

/// The table $P$, `[max_positions, d_model]`, from [`LearnedAbsolute::new`]
/// ($\mathcal N(0, 0.02^2)$, seed `seed + 7`).
///
/// # Errors
/// When the encodings reject the sizes.
pub fn table(c: &ModelConfig, seed: u64, device: &Device) -> Result<Param<Tensor<2>>> {
    let table = LearnedAbsolute::new(c.max_positions, c.d_model, seed + 7, 0.02)?;
    Ok(param2(&table.table, device))
}
