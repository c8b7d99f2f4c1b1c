//! The Orthogonal Neural Operator (`ONO2` of the reference, `ONOmodel2.py` L405–470).
//!
//! ```text
//! [pos…, f…] → Linear(in → 2h) → GELU → Linear(2h → 2h) → chunk → x (eigenfunctions), fx (solution)
//! x += time_fc(embed(T))                                  (Plasticity only, once)
//! n × OrthogonalBlock(x, fx); the last block's mlp2 is the head Linear(h → out)
//! ```
//!
//! A padded batch of samples of different sizes runs with a mask of the real points: every real
//! point gets what the batch of the same samples without padding would give (the covariance is
//! pooled over the batch's real points, see [`ono_nn::orthogonal`]), and padded output rows are
//! zero.

mod config;
mod cross;
pub mod presets;
mod recompute;
pub mod reference;

pub use config::{NnBlock, OnoConfig};
pub use cross::OnoCross;
pub use presets::OnoPreset;

use tch::nn::{Path, VarStore};
use tch::{Kind, Tensor};

use crate::arch::ArchConfig;
use crate::operator::{
    plain_forward_backward, unsupported_recompute, InputPart, LossFn, ModelInput, NeuralOperator,
};
use crate::Recompute;
use crate::{Error, Result};
use ono_nn::mlp::{Mlp, MlpConfig};
use ono_nn::orthogonal::OrthogonalBlock;
use ono_nn::time_embedding::TimeMlp;
use ono_nn::weights::NamedTensors;

impl OnoConfig {
    /// Builds the model on `path` under the reference's parameter names (`preprocess.*`,
    /// `time_fc.*`, `blocks.<i>.*`), initialised as the reference (trunc-normal 0.02 linears, zero
    /// biases, unit norms, μ = 0).
    pub fn init(&self, path: &Path) -> Result<Ono> {
        self.validate()?;
        let h = self.n_hidden;
        let blocks = (0..self.n_layers)
            .map(|i| {
                self.block_config(i + 1 == self.n_layers)
                    .init(&(path / "blocks" / i))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Ono {
            cfg: *self,
            preprocess: MlpConfig::new(self.space_dim + self.fun_dim, 2 * h, 2 * h)
                .init(&(path / "preprocess")),
            time_fc: self
                .time_input
                .then(|| TimeMlp::new(&(path / "time_fc"), h)),
            blocks,
        })
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Ono {
    cfg: OnoConfig,
    preprocess: Mlp,
    time_fc: Option<TimeMlp>,
    blocks: Vec<OrthogonalBlock>,
}

impl Ono {
    pub fn config(&self) -> &OnoConfig {
        &self.cfg
    }

    pub fn blocks(&self) -> &[OrthogonalBlock] {
        &self.blocks
    }

    /// Forgets every block's running statistics (as a freshly built model).
    pub fn reset_statistics(&self) -> Result<()> {
        for block in &self.blocks {
            block.reset_statistics()?;
        }
        Ok(())
    }

    /// Forward pass. `train` uses each block's batch covariance and updates its EMA buffer (or the
    /// BatchNorm statistics); eval uses the buffers (the identity before any training step).
    /// `mask` marks the real points of a padded batch (each sample's first).
    ///
    /// # Shapes
    /// - `pos`: (B, N, space_dim), `fx`: (B, N, fun_dim), `mask`: (B, N)
    /// - `t`: (B, 1), required exactly when `time_input`
    /// - returns: (B, N, out_dim), zero at padded points
    pub fn forward(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        mask: Option<&Tensor>,
        t: Option<&Tensor>,
        train: bool,
    ) -> Result<Tensor> {
        let (mut x, mut fx) = self.encode(pos, fx, mask, t)?;
        for block in &self.blocks {
            (x, fx) = block.forward(&x, &fx, mask, train)?;
        }
        Ok(ono_nn::padding::zero_padding(&fx, mask)?)
    }

    /// Validates the inputs (and the padding mask), then the encoder and the time embedding: the
    /// two streams.
    ///
    /// # Shapes
    /// - returns: `x` and `fx`, each (B, N, h)
    pub fn encode(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        mask: Option<&Tensor>,
        t: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        let [b, n] = self.cfg.check_inputs(pos, fx, t)?;
        OnoConfig::check_mask("Ono::forward", mask, [b, n])?;
        let input = Tensor::f_cat(&[pos, fx], -1)?.f_to_kind(self.kind())?;
        let enc = self.preprocess.forward(&input)?;
        let halves = enc.f_chunk(2, -1)?;
        let (mut x, fx) = (halves[0].shallow_clone(), halves[1].shallow_clone());
        if let (Some(time_fc), Some(t)) = (&self.time_fc, t) {
            // (B, 1, h), broadcast over the points like the reference's repeat(1, N, 1).
            x = x.f_add(&time_fc.forward(&t.f_reshape([b, 1])?)?)?;
        }
        Ok((x, fx))
    }

    /// The floating kind of the parameters (inputs are cast to it).
    pub fn kind(&self) -> Kind {
        self.preprocess.kind()
    }

    /// What `recompute = "auto"` runs for a batch of `points` points in all (B·N) on `device`:
    /// see [`NeuralOperator::default_recompute`] and [`SELECTIVE_FROM_STREAM_BYTES`].
    pub fn auto_recompute(&self, device: tch::Device, points: i64) -> Recompute {
        let stream_bytes = points as f64
            * self.cfg.n_hidden as f64
            * self.cfg.n_layers as f64
            * self.kind().elt_size_in_bytes() as f64;
        if device == tch::Device::Cpu
            && stream_bytes >= SELECTIVE_FROM_STREAM_BYTES
            && self.supports_selective()
        {
            Recompute::Selective
        } else {
            Recompute::None
        }
    }
}

/// The size of the blocks' streams, one (B, N, h) tensor per block, from which `auto` recomputes
/// on the CPU. The plain step keeps about 25 times that (4.4 GB of peak RSS at the NS2d preset,
/// whose streams hold 128 MiB), so from here on it would hold gigabytes; below it, recomputation
/// saves memory nobody misses and costs time: at the quick profile's Darcy cell (16 × 256 points,
/// width 64, 3 blocks: 3 MiB) the plain step trains an epoch in about 0.8 of the selective one's
/// time (docs/benchmarks.md, "Selective recomputation").
pub const SELECTIVE_FROM_STREAM_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

impl NeuralOperator for Ono {
    fn arch(&self) -> &'static str {
        OnoConfig::ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let fx = input_function(input, self.cfg.fun_dim)?;
        Ono::forward(self, input.pos, &fx, input.mask, input.time, train)
    }

    fn forward_backward(
        &self,
        input: &ModelInput<'_>,
        loss: &mut LossFn<'_>,
        recompute: Recompute,
    ) -> Result<Tensor> {
        let mode = match recompute {
            Recompute::Auto => self.default_recompute(input),
            other => other,
        };
        if matches!(mode, Recompute::None | Recompute::Auto) {
            return plain_forward_backward(self, input, loss);
        }
        let fx = input_function(input, self.cfg.fun_dim)?;
        let loss = |out: &Tensor| loss(out).map_err(Error::Loss);
        match mode {
            Recompute::None | Recompute::Auto => unreachable!("returned above"),
            Recompute::Blocks => {
                self.forward_backward_recompute(input.pos, &fx, input.mask, input.time, loss)
            }
            Recompute::Selective => {
                if !self.supports_selective() {
                    return Err(Error::Unsupported {
                        arch: OnoConfig::ARCH,
                        what: unsupported_recompute(mode),
                    });
                }
                self.forward_backward_selective(input.pos, &fx, input.mask, input.time, loss)
            }
        }
    }

    fn supports_recompute(&self, mode: Recompute) -> bool {
        mode != Recompute::Selective || self.supports_selective()
    }

    /// On the CPU, selective recomputation where every block supports it and the step is large
    /// enough for its memory to matter (0.59× PyTorch's memory for 9 % more time at NS2d); the
    /// plain step below [`SELECTIVE_FROM_STREAM_BYTES`] and on CUDA. On CUDA selective costs
    /// 1.3–2.5× the plain step's time, and the plain step already beats PyTorch's time at no more
    /// memory (H100, NS2d, Darcy and Elasticity presets; docs/benchmarks.md).
    fn default_recompute(&self, input: &ModelInput<'_>) -> Recompute {
        let size = input.pos.size();
        self.auto_recompute(input.pos.device(), size.iter().rev().skip(1).product())
    }

    fn reset_statistics(&self) -> Result<()> {
        Ono::reset_statistics(self)
    }

    fn ema_statistics(&self) -> Vec<&ono_kernels::ema::EmaCovariance> {
        self.blocks
            .iter()
            .flat_map(|b| [b.covariance(), b.query_covariance()])
            .flatten()
            .collect()
    }

    fn reference_name<'n>(&self, ours: &'n str) -> Option<&'n str> {
        reference::reference_name(ours)
    }

    fn import_reference(
        &self,
        vs: &VarStore,
        tensors: &NamedTensors,
        prefix: &str,
        origin: &std::path::Path,
    ) -> Result<()> {
        reference::import_reference(vs, tensors, prefix, origin)
    }

    fn export_reference(&self, vs: &VarStore) -> Result<NamedTensors> {
        reference::export_reference(vs)
    }
}

/// `input.fx`, or an empty (B, N, 0) function for a model without input channels; refuses the
/// input parts ONO cannot take (it evaluates at its input points, the cross-attention variant
/// [`OnoCross`] at others, with one input function).
fn input_function(input: &ModelInput<'_>, fun_dim: i64) -> Result<Tensor> {
    input.refuse(OnoConfig::ARCH, &[InputPart::Functions, InputPart::Query])?;
    match input.fx {
        Some(fx) => Ok(fx.shallow_clone()),
        None if fun_dim == 0 => {
            let s = input.pos.size();
            let (b, n) = (
                s.first().copied().unwrap_or(0),
                s.get(1).copied().unwrap_or(0),
            );
            Ok(Tensor::f_zeros(
                [b, n, 0],
                (input.pos.kind(), input.pos.device()),
            )?)
        }
        None => Err(Error::Config(format!(
            "Ono::forward: the model takes an input function of {fun_dim} channels; none was given"
        ))),
    }
}
