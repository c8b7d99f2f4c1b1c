//! ONO with outputs at query points Y different from the input points X: the cross-attention
//! variant of the paper's Appendix A, eq. (20). The reference's `ONO3` is not used (it is defective,
//! docs/reference-implementations.md#ono3-cross-attention); this implements the equations. Design
//! and rationale: `docs/ono.md`.
//!
//! ```text
//! x(P)  = preprocess_x(pos_P)          eigenfunction stream, a function of position only, so it can
//!                                      be evaluated at X and at any Y (+ time_fc(T) when configured)
//! h(X)  = preprocess_f([pos_X, f])     solution stream at the inputs
//! layer 1:  x(Y) ← NNBlock(x(Y) | context x(X));  x(X) ← NNBlock(x(X))
//!           h(Y) = mlp2(LN₃((ψ̃(Y) ⊙ softplus μ) ψ̃(X)ᵀ h(X)))         no residual (eq. 20, l = 1)
//!           ψ̃(X), ψ̃(Y) whitened by their own EMA buffers feature_cov, feature_cov_q
//! layers 2…L: ordinary ONO blocks at Y (self-attention, residual kernel)
//! ```
//! With Y = X the two evaluations of every eigenfunction coincide, so a model trained at one
//! resolution is queried at any other with the same weights.

use ono_kernels::health;
use tch::nn::Path;
use tch::Tensor;

use super::config::{NnBlock, OnoConfig};
use crate::arch::ArchConfig;
use crate::{Error, Result};
use ono_nn::mlp::{Mlp, MlpConfig};
use ono_nn::orthogonal::{OrthogonalBlock, Orthogonalization};
use ono_nn::time_embedding::TimeMlp;

/// See the module documentation.
#[derive(Debug)]
pub struct OnoCross {
    cfg: OnoConfig,
    preprocess_x: Mlp,
    preprocess_f: Mlp,
    time_fc: Option<TimeMlp>,
    blocks: Vec<OrthogonalBlock>,
}

impl OnoConfig {
    /// Builds the cross-attention variant. Its NN block must have a cross form (not Nyström) and
    /// its orthogonalization must be pointwise or whitening (not BatchNorm).
    pub fn init_cross(&self, path: &Path) -> Result<OnoCross> {
        self.validate()?;
        if self.nn_block == NnBlock::Nystrom {
            return Err(Error::Config(
                "the cross-attention ONO needs an NN block with a cross form \
                 (linear_transformer, galerkin, softmax or none), not nystrom"
                    .into(),
            ));
        }
        if self.orthogonalization == Orthogonalization::BatchNorm {
            return Err(Error::Config(
                "the cross-attention ONO does not support batch_norm orthogonalization".into(),
            ));
        }
        let h = self.n_hidden;
        let blocks = (0..self.n_layers)
            .map(|i| {
                let mut cfg = self.block_config(i + 1 == self.n_layers);
                cfg.query_covariance = i == 0;
                cfg.init(&(path / "blocks" / i))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(OnoCross {
            cfg: *self,
            preprocess_x: MlpConfig::new(self.space_dim, 2 * h, h).init(&(path / "preprocess_x")),
            preprocess_f: MlpConfig::new(self.space_dim + self.fun_dim, 2 * h, h)
                .init(&(path / "preprocess_f")),
            time_fc: self
                .time_input
                .then(|| TimeMlp::new(&(path / "time_fc"), h)),
            blocks,
        })
    }
}

impl OnoCross {
    pub fn config(&self) -> &OnoConfig {
        &self.cfg
    }

    pub fn blocks(&self) -> &[OrthogonalBlock] {
        &self.blocks
    }

    /// The eigenfunction stream's encoding of positions (plus the time embedding).
    ///
    /// # Shapes
    /// - `pos`: (B, P, space_dim); `t`: (B, 1) or None
    /// - returns: (B, P, h)
    pub fn encode_positions(&self, pos: &Tensor, t: Option<&Tensor>) -> Result<Tensor> {
        let mut x = self
            .preprocess_x
            .forward(&pos.f_to_kind(self.preprocess_x.kind())?)?;
        if let (Some(time_fc), Some(t)) = (&self.time_fc, t) {
            x = x.f_add(&time_fc.forward(&t.f_reshape([pos.size()[0], 1])?)?)?;
        }
        Ok(x)
    }

    /// The solution stream's encoding at the input points.
    ///
    /// # Shapes
    /// - `pos`: (B, N, space_dim), `fx`: (B, N, fun_dim)
    /// - returns: (B, N, h)
    pub fn encode_function(&self, pos: &Tensor, fx: &Tensor) -> Result<Tensor> {
        let input = Tensor::f_cat(&[pos, fx], -1)?.f_to_kind(self.preprocess_f.kind())?;
        Ok(self.preprocess_f.forward(&input)?)
    }

    /// Predicts the output function at `pos_query` from the input function sampled at `pos`.
    /// `train` uses batch covariances (updating both EMA buffers of the first block); eval uses the
    /// buffers, so a trained model can be queried on any mesh. `mask` and `query_mask` mark the
    /// real input and query points of a padded batch.
    ///
    /// # Shapes
    /// - `pos`: (B, N, space_dim), `fx`: (B, N, fun_dim), `mask`: (B, N)
    /// - `pos_query`: (B, M, space_dim), `query_mask`: (B, M)
    /// - `t`: (B, 1), exactly when `time_input`
    /// - returns: (B, M, out_dim), zero at padded query points
    pub fn forward(
        &self,
        (pos, fx, mask): (&Tensor, &Tensor, Option<&Tensor>),
        (pos_query, query_mask): (&Tensor, Option<&Tensor>),
        t: Option<&Tensor>,
        train: bool,
    ) -> Result<Tensor> {
        let [b, n] = self.cfg.check_inputs(pos, fx, t)?;
        OnoConfig::check_mask("OnoCross::forward", mask, [b, n])?;
        match pos_query.size()[..] {
            [qb, m, s] if qb == b && m > 0 && s == self.cfg.space_dim => {}
            _ => {
                return Err(Error::Shape {
                    op: "OnoCross::forward",
                    expected: format!("pos_query ({b}, M, {}) with M > 0", self.cfg.space_dim),
                    got: pos_query.size(),
                })
            }
        }
        health::require_finite("OnoCross::forward: pos_query", pos_query, || {
            Error::NonFinite {
                op: "OnoCross::forward",
                what: "pos_query",
            }
        })?;
        let m = pos_query.size()[1];
        OnoConfig::check_mask("OnoCross::forward (query)", query_mask, [b, m])?;
        let x = self.encode_positions(pos, t)?;
        let x_query = self.encode_positions(pos_query, t)?;
        let h = self.encode_function(pos, fx)?;
        let (mut x_query, mut h_query) =
            self.blocks[0].forward_cross((&x, &h, mask), (&x_query, query_mask), train)?;
        for block in &self.blocks[1..] {
            (x_query, h_query) = block.forward(&x_query, &h_query, query_mask, train)?;
        }
        Ok(ono_nn::padding::zero_padding(&h_query, query_mask)?)
    }
}
