//! A trained model with its normalizers, ready to predict: what `ono eval` and `ono predict`
//! load from a training checkpoint.

use std::cell::RefCell;
use std::path::Path;

use ono_data::dataset::{Batch, Split};
use ono_models::Model;
use tch::{Device, Kind, Tensor};

use crate::checkpoint::{Checkpoint, TrainState};
use crate::decoder::{Decoder, Points};
use crate::evaluate::normalized;
use crate::graphs::{Graphs, InferenceGraphs};
use crate::normalizers::Normalizers;
use crate::regime::Regime;
use crate::{Error, Result};

/// See the module documentation.
pub struct Predictor {
    /// The model (any architecture).
    pub model: Model,
    /// The normalizers of the inputs and targets.
    pub normalizers: Normalizers,
    /// Steady, autoregressive or per time step.
    pub regime: Regime,
    /// The training data's grid shape, when its points were a grid.
    pub grid: Option<Vec<i64>>,
    /// The grid of the training targets' query points, when they had their own.
    pub query_grid: Option<Vec<i64>>,
    /// Forward passes as graphs ([`Predictor::set_graphs`]); none by default.
    graphs: RefCell<Option<InferenceGraphs>>,
}

impl Predictor {
    /// Loads the model and normalizers of a training checkpoint onto `device`; the model
    /// predicts in the precision it was trained in (`precision` of the run's configuration).
    pub fn from_checkpoint(path: &Path, device: Device) -> Result<(Self, TrainState)> {
        let ckpt = Checkpoint::load(path)?;
        let st = &ckpt.state;
        let mut model = Model::from_tensors(&st.model, &ckpt.section("model."), device, path)?;
        model
            .set_precision(st.config.precision)
            .map_err(|e| Error::invalid("precision", e))?;
        Ok((
            Self {
                model,
                normalizers: ckpt.normalizers()?,
                // The resolved regime (the configuration may leave it to the benchmark recipe).
                regime: st.regime,
                grid: st.grid.clone(),
                query_grid: st.query_grid.clone(),
                graphs: RefCell::new(None),
            },
            ckpt.state,
        ))
    }

    /// Runs later forward passes as graphs under `graphs` (`graphs.rs`): on CUDA, each input
    /// shape's second forward is captured and later ones replayed, so that a caller predicting
    /// many inputs of one shape pays the launches once. Returns what to say about it.
    pub fn set_graphs(&mut self, graphs: Graphs) -> Result<Option<String>> {
        let (engine, note) = crate::graphs::resolve(graphs, self.model.device(), 1)?;
        *self.graphs.get_mut() = engine.map(|e| InferenceGraphs::new(e, graphs == Graphs::Auto));
        Ok(note)
    }

    /// Input shapes the graphs hold (`None`: no graphs).
    pub fn graph_shapes(&self) -> Option<usize> {
        self.graphs.borrow().as_ref().map(InferenceGraphs::shapes)
    }

    /// `forward` of the slots `inputs`, through the graphs when set (their deferred checks
    /// read at once).
    fn forward(
        &self,
        inputs: &[Option<&Tensor>],
        forward: &mut dyn FnMut(&[Option<Tensor>]) -> Result<Tensor>,
    ) -> Result<Tensor> {
        match self.graphs.borrow_mut().as_mut() {
            Some(g) => {
                let out = g.run(inputs, forward)?;
                g.check()?;
                Ok(out)
            }
            None => {
                let owned: Vec<Option<Tensor>> = inputs
                    .iter()
                    .map(|t| t.map(Tensor::shallow_clone))
                    .collect();
                forward(&owned)
            }
        }
    }

    /// The normalizers for inputs on `grid` and targets on `query_grid` (or `grid` without a
    /// query; see [`ono_data::normalizer::Normalizer::regridded`]): unchanged when the training
    /// data had no grid or the same one.
    pub fn normalizers_for(
        &self,
        grid: Option<&[i64]>,
        query_grid: Option<&[i64]>,
    ) -> Result<Normalizers> {
        let pair = |from: Option<&[i64]>, to: Option<&[i64]>| match (from, to) {
            (Some(from), Some(to)) => (from.to_vec(), to.to_vec()),
            _ => (Vec::new(), Vec::new()),
        };
        let (xf, xt) = pair(self.grid.as_deref(), grid);
        let (yf, yt) = pair(
            self.query_grid.as_deref().or(self.grid.as_deref()),
            query_grid.or(grid),
        );
        // Positions and θ have per-channel statistics, which do not depend on the grid.
        let n = &self.normalizers;
        Ok(Normalizers {
            x: n.x.regridded(&xf, &xt)?,
            y: n.y.regridded(&yf, &yt)?,
            pos: n.pos.regridded(&[], &[])?,
            theta: n.theta.regridded(&[], &[])?,
        })
    }

    /// [`predict`](Self::predict) of a steady model on this process's share `[start, start +
    /// len)` of `n` points, inside an `ono_kernels::points::scope` whose processes hold the
    /// other shares; `grid`: the whole samples' grid, for the normalizers (its pointwise
    /// statistics are cut to the share).
    ///
    /// # Shapes
    /// - `pos`, `fx`: (S, len, ·), raw; returns (S, len, C)
    pub fn predict_point_share(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        (start, len): (i64, i64),
        grid: Option<&[i64]>,
    ) -> Result<Tensor> {
        if self.regime != Regime::Steady {
            return Err(Error::Data(format!(
                "predicting on split points needs a steady model, not {:?}",
                self.regime
            )));
        }
        let _g = tch::no_grad_guard();
        let norms = self.normalizers_for(grid, None)?.point_share(start, len)?;
        let (fx, pos) = (norms.x.encode(fx)?, norms.pos.encode(pos)?);
        // The share is no grid: the model gets none (one that needs it is refused by name).
        let d = Decoder {
            model: &self.model,
            y_norm: &norms.y,
            grid: None,
        };
        self.regime.ops().predict(d, &Points::plain(&pos, &fx), 0)
    }

    /// Predictions for raw samples of a steady model that may differ in size and carry θ and
    /// input functions on their own points (GNOT's data), `batch` samples per forward pass in
    /// order. `split.y` is not read. Rows beyond a sample's length are zero.
    ///
    /// # Shapes
    /// - returns: (S, N, C), N the split's padded size
    pub fn predict_samples(&self, split: &Split, batch: i64) -> Result<Tensor> {
        let _g = tch::no_grad_guard();
        if self.regime != Regime::Steady {
            return Err(crate::Error::Data(
                "samples with lengths, θ or input functions need a steady model".into(),
            ));
        }
        let device = self.model.device();
        let split = normalized(split, &self.normalizers, device, self.kind())?;
        let d = Decoder {
            model: &self.model,
            y_norm: &self.normalizers.y,
            grid: None,
        };
        let n = split.fx.size()[1];
        let idx: Vec<i64> = (0..split.len()).collect();
        let mut out = Vec::new();
        for chunk in idx.chunks(batch.max(1) as usize) {
            let b = split.batch(chunk, device, self.kind())?;
            let pred = self.forward(&b.tensors(), &mut |slots| {
                let b = Batch::from_tensors(crate::graphs::shallow(slots))?;
                self.regime.ops().predict(d, &Points::of(&b), 0)
            })?;
            let pred = match b.mask {
                Some(m) => pred.f_mul(&m.f_to_kind(pred.kind())?.f_unsqueeze(2)?)?,
                None => pred,
            };
            let short = n - pred.size()[1];
            out.push(pred.f_constant_pad_nd([0, 0, 0, short])?);
        }
        Ok(Tensor::f_cat(&out, 0)?)
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
        let norms = self.normalizers_for(grid, query.and_then(|q| q.1))?;
        let (fx, pos) = (norms.x.encode(fx)?, norms.pos.encode(pos)?);
        let query = query.map(|q| norms.pos.encode(q.0)).transpose()?;
        let d = Decoder {
            model: &self.model,
            y_norm: &norms.y,
            grid,
        };
        self.forward(&[Some(&pos), Some(&fx), query.as_ref()], &mut |slots| {
            let (pos, fx) = (slots[0].as_ref(), slots[1].as_ref());
            let (Some(pos), Some(fx)) = (pos, fx) else {
                return Err(Error::Data("a forward without its points".into()));
            };
            let points = Points {
                query: slots[2].as_ref(),
                ..Points::plain(pos, fx)
            };
            self.regime.ops().predict(d, &points, t_out)
        })
    }
}
