//! A trained model with its normalizers, ready to predict: what `ono eval` and `ono predict`
//! load from a training checkpoint.

use std::path::Path;

use ono_data::normalizer::Normalizer;
use ono_models::Model;
use tch::{Device, Kind, Tensor};

use crate::checkpoint::{Checkpoint, TrainState};
use crate::decoder::Decoder;
use crate::regime::Regime;
use crate::Result;

/// See the module documentation.
pub struct Predictor {
    /// The model (any architecture).
    pub model: Model,
    /// Input normalizer.
    pub x_norm: Normalizer,
    /// Target normalizer.
    pub y_norm: Normalizer,
    /// Steady, autoregressive or per time step.
    pub regime: Regime,
    /// The training data's grid shape, when its points were a grid.
    pub grid: Option<Vec<i64>>,
    /// The grid of the training targets' query points, when they had their own.
    pub query_grid: Option<Vec<i64>>,
}

impl Predictor {
    /// Loads the model and normalizers of a training checkpoint onto `device`.
    pub fn from_checkpoint(path: &Path, device: Device) -> Result<(Self, TrainState)> {
        let ckpt = Checkpoint::load(path)?;
        let st = &ckpt.state;
        let model = Model::from_tensors(&st.model, &ckpt.section("model."), device, path)?;
        let x_norm = Normalizer::from_tensors(st.normalize_x, "norm.x.", &ckpt.tensors)?;
        let y_norm = Normalizer::from_tensors(st.normalize_y, "norm.y.", &ckpt.tensors)?;
        Ok((
            Self {
                model,
                x_norm,
                y_norm,
                // The resolved regime (the configuration may leave it to the benchmark recipe).
                regime: st.regime,
                grid: st.grid.clone(),
                query_grid: st.query_grid.clone(),
            },
            ckpt.state,
        ))
    }

    /// The input and target normalizers for inputs on `grid` and targets on `query_grid` (or
    /// `grid` without a query; see [`Normalizer::regridded`]): unchanged when the training data
    /// had no grid or the same one.
    pub fn normalizers_for(
        &self,
        grid: Option<&[i64]>,
        query_grid: Option<&[i64]>,
    ) -> Result<(Normalizer, Normalizer)> {
        let pair = |from: Option<&[i64]>, to: Option<&[i64]>| match (from, to) {
            (Some(from), Some(to)) => (from.to_vec(), to.to_vec()),
            _ => (Vec::new(), Vec::new()),
        };
        let (xf, xt) = pair(self.grid.as_deref(), grid);
        let (yf, yt) = pair(
            self.query_grid.as_deref().or(self.grid.as_deref()),
            query_grid.or(grid),
        );
        Ok((
            self.x_norm.regridded(&xf, &xt)?,
            self.y_norm.regridded(&yf, &yt)?,
        ))
    }

    /// The floating kind of the model.
    pub fn kind(&self) -> Kind {
        self.model.kind()
    }

    /// Predictions for raw (un-normalized) inputs, in evaluation mode and without gradients.
    /// `grid` is the inputs' grid shape (e.g. another resolution than the training data's);
    /// `query` the output points of a model trained with query points, on `query_grid`.
    ///
    /// # Shapes
    /// - `pos`: (B, N, d), `fx`: (B, N, Cf), `query`: (B, M, d)
    /// - returns: steady (B, N, C) or (B, M, C); time series (B, N, C, T) for `t_out` steps
    pub fn predict(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        t_out: i64,
        grid: Option<&[i64]>,
        query: Option<(&Tensor, Option<&[i64]>)>,
    ) -> Result<Tensor> {
        let _g = tch::no_grad_guard();
        let (x_norm, y_norm) = self.normalizers_for(grid, query.and_then(|q| q.1))?;
        let fx = x_norm.encode(fx)?;
        let d = Decoder {
            model: &self.model,
            y_norm: &y_norm,
            grid,
        };
        self.regime
            .ops()
            .predict(d, pos, &fx, query.map(|q| q.0), t_out)
    }
}
