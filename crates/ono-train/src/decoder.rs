//! A model with the normalizer that decodes its outputs, as prediction and evaluation use it.

use ono_data::normalizer::Normalizer;
use ono_models::{Model, ModelInput};
use tch::Tensor;

use crate::Result;

/// A model with what is needed to decode its outputs.
#[derive(Clone, Copy)]
pub struct Decoder<'a> {
    /// The model.
    pub model: &'a Model,
    /// The target normalizer (outputs are decoded with it).
    pub y_norm: &'a Normalizer,
    /// The grid shape when the points are a grid.
    pub grid: Option<&'a [i64]>,
}

impl Decoder<'_> {
    /// The decoded output of one forward pass, at the `query` points when given.
    pub(crate) fn forward(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        query: Option<&Tensor>,
        time: Option<&Tensor>,
        train: bool,
    ) -> Result<Tensor> {
        let input = ModelInput::new(pos, fx)
            .with_time(time)
            .with_grid(self.grid)
            .with_query(query, None);
        Ok(self.y_norm.decode(&self.model.forward(&input, train)?)?)
    }
}
