//! A model with the normalizer that decodes its outputs, as prediction and evaluation use it, and
//! the inputs of one forward pass.

use ono_data::dataset::{Batch, FunctionBatch};
use ono_data::normalizer::Normalizer;
use ono_models::{InputFunction, Model, ModelInput};
use tch::Tensor;

use crate::{Error, Result};

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

/// The inputs of one forward pass (normalized), as a batch holds them.
#[derive(Clone, Copy)]
pub(crate) struct Points<'a> {
    /// (B, N, d)
    pub pos: &'a Tensor,
    /// (B, N, Cf)
    pub fx: &'a Tensor,
    /// (B, M, d): output points other than `pos`.
    pub query: Option<&'a Tensor>,
    /// (B, N) bool: the real points of a ragged batch.
    pub mask: Option<&'a Tensor>,
    /// (B, n_θ): global parameters.
    pub theta: Option<&'a Tensor>,
    /// Input functions on their own points.
    pub functions: &'a [FunctionBatch],
}

impl<'a> Points<'a> {
    /// Points and the function on them, nothing else.
    pub fn plain(pos: &'a Tensor, fx: &'a Tensor) -> Self {
        Self {
            pos,
            fx,
            query: None,
            mask: None,
            theta: None,
            functions: &[],
        }
    }

    /// The inputs of a batch.
    pub fn of(batch: &'a Batch) -> Self {
        Self {
            pos: &batch.pos,
            fx: &batch.fx,
            query: batch.query.as_ref(),
            mask: batch.mask.as_ref(),
            theta: batch.theta.as_ref(),
            functions: &batch.functions,
        }
    }

    /// Refuses what only the steady regime feeds (query points, ragged samples, θ, input
    /// functions on their own points).
    pub fn steady_only(&self) -> Result<()> {
        if self.query.is_some()
            || self.mask.is_some()
            || self.theta.is_some()
            || !self.functions.is_empty()
        {
            return Err(Error::Data(
                "query points, samples of different sizes, θ and input functions on their own points need the steady regime".into(),
            ));
        }
        Ok(())
    }

    /// Runs `f` on the [`ModelInput`] of these points. θ is appended to `fx` at every point:
    /// GNOT's trunk takes cat(x, θ broadcast), which is cat(pos, fx) of its input, and every other
    /// architecture gets θ as input channels.
    pub fn with_input<R>(
        &self,
        grid: Option<&[i64]>,
        time: Option<&Tensor>,
        f: impl FnOnce(&ModelInput<'_>) -> Result<R>,
    ) -> Result<R> {
        let fx = match self.theta {
            Some(t) => {
                let (b, n) = (self.fx.size()[0], self.fx.size()[1]);
                let at_points = t.f_unsqueeze(1)?.f_expand([b, n, -1], false)?;
                Tensor::f_cat(&[self.fx, &at_points], 2)?
            }
            None => self.fx.shallow_clone(),
        };
        let functions: Vec<InputFunction<'_>> = self
            .functions
            .iter()
            .map(|f| InputFunction {
                values: &f.values,
                mask: f.mask.as_ref(),
            })
            .collect();
        let input = ModelInput::new(self.pos, &fx)
            .with_time(time)
            .with_grid(grid)
            .with_query(self.query, None)
            .with_mask(self.mask)
            .with_functions(&functions);
        f(&input)
    }
}

impl Decoder<'_> {
    /// The decoded output of one forward pass, at the query points when given.
    pub(crate) fn forward(
        &self,
        points: &Points<'_>,
        time: Option<&Tensor>,
        train: bool,
    ) -> Result<Tensor> {
        let out = points.with_input(self.grid, time, |input| {
            Ok(self.model.forward(input, train)?)
        })?;
        Ok(self.y_norm.decode(&out)?)
    }
}
