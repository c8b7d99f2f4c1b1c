//! Transolver as the Neural-Solver-Library builds it (`models/Transolver.py` with
//! `layers/Physics_Attention.py`, thuml/Neural-Solver-Library `db942b7`): `arch = "transolver"`.
//! Wu, Luo, Wang, Wang, Long, *Transolver: A Fast Transformer Solver for PDEs on General
//! Geometries*, ICML 2024.
//!
//! ```text
//! h = preprocess([unified pos | pos], fx) + placeholder [+ time_fc(emb(t))]     (B, N, C)
//! n_layers × pre-norm block:  h ← Attn(ln_1 h) + h;  h ← mlp(ln_2 h) + h
//! the last block returns mlp2(ln_3 h)                                           (B, N, out)
//! ```
//!
//! `Attn` is Physics-Attention ([`ono_nn::attention::physics`]): convolutional projections on
//! structured grids (with the temperature clamped), linear ones on point clouds. The model stays
//! at the points: no padding, no latent grid, no Geo-FNO projection; the lift is NSL's
//! ([`ono_nn::nsl_frame::NslLift`]). Every `nn.Linear` is trunc-normal(0.02) with zero bias,
//! LayerNorms 1/0, the grid convolutions PyTorch's default, temperatures 0.5, `placeholder`
//! U[0, 1/C). Fixtures: `fixtures/transolver`.

mod config;
pub mod presets;
mod reference;

pub use config::TransolverConfig;

use tch::nn::{Init, Path};
use tch::Tensor;

use crate::arch::ArchConfig;
use crate::operator::{InputPart, ModelInput};
use crate::Result;
use ono_nn::attention::physics::{PhysicsAttention, PhysicsAttentionConfig};
use ono_nn::grid::Geometry;
use ono_nn::linear::{LinearConfig, LinearInit};
use ono_nn::mlp::{Mlp, MlpConfig};
use ono_nn::norm::LayerNorm;
use ono_nn::nsl_frame::{FrameInput, NslLift};
use ono_nn::Linear;

/// `Transolver_block`: pre-norm Physics-Attention and MLP, and in the last block the head.
#[derive(Debug)]
struct Block {
    ln_1: LayerNorm,
    attn: PhysicsAttention,
    ln_2: LayerNorm,
    mlp: Mlp,
    /// `ln_3`, `mlp2` (C → out) of the last block.
    head: Option<(LayerNorm, Linear)>,
}

impl Block {
    fn new(path: &Path, cfg: &TransolverConfig, last: bool) -> Result<Self> {
        let c = cfg.n_hidden;
        let attn = PhysicsAttentionConfig {
            dim: c,
            heads: cfg.n_heads,
            dim_head: cfg.dim_head(),
            slice_num: cfg.slice_num,
            geometry: cfg.geometry(),
        }
        .init(&(path / "Attn"))?;
        Ok(Self {
            ln_1: LayerNorm::new(&(path / "ln_1"), c),
            attn,
            ln_2: LayerNorm::new(&(path / "ln_2"), c),
            // NSL's MLP(C, C·mlp_ratio, C, n_layers=0, res=False).
            mlp: MlpConfig {
                residual: false,
                ..MlpConfig::new(c, c * cfg.mlp_ratio, c)
            }
            .init(&(path / "mlp")),
            head: last.then(|| {
                (
                    LayerNorm::new(&(path / "ln_3"), c),
                    LinearConfig::default().init(&(path / "mlp2"), c, cfg.out_dim),
                )
            }),
        })
    }

    /// # Shapes
    /// - `h`: (B, N, C); `grid`: the grid shape (structured); `mask`: (B, N) (point clouds)
    /// - returns: (B, N, C), or (B, N, out_dim) from the last block
    fn forward(&self, h: &Tensor, grid: Option<&[i64]>, mask: Option<&Tensor>) -> Result<Tensor> {
        let h = self
            .attn
            .forward(&self.ln_1.forward(h)?, grid, mask)?
            .f_add(h)?;
        let h = self.mlp.forward(&self.ln_2.forward(&h)?)?.f_add(&h)?;
        Ok(match &self.head {
            Some((ln_3, mlp2)) => mlp2.forward(&ln_3.forward(&h)?)?,
            None => h,
        })
    }
}

/// See the module documentation. Variables under NSL's names: `preprocess.*`, `time_fc.*` (with
/// a time input), `placeholder`, `blocks.{l}.{ln_1, Attn, ln_2, mlp}.*` and the last block's
/// `ln_3`, `mlp2`.
#[derive(Debug)]
pub struct Transolver {
    cfg: TransolverConfig,
    lift: NslLift,
    placeholder: Tensor,
    blocks: Vec<Block>,
}

impl Transolver {
    /// Builds the layers with NSL's initialisation (module documentation).
    pub fn new(path: &Path, cfg: &TransolverConfig) -> Result<Self> {
        cfg.check()?;
        let lift = cfg.frame().init_lift(path, LinearInit::TruncNormal)?;
        let blocks = (0..cfg.n_layers)
            .map(|l| Block::new(&(path / "blocks" / l), cfg, l + 1 == cfg.n_layers))
            .collect::<Result<Vec<_>>>()?;
        let c = cfg.n_hidden;
        let placeholder = path.var(
            "placeholder",
            &[c],
            Init::Uniform {
                lo: 0.0,
                up: 1.0 / c as f64,
            },
        );
        Ok(Self {
            cfg: cfg.clone(),
            lift,
            placeholder,
            blocks,
        })
    }

    pub fn config(&self) -> &TransolverConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim) (structured with `unified_pos`: only B, N are read);
    ///   `input.fx`: (B, N, fun_dim) (absent when fun_dim = 0); `input.time`: (B, 1) with
    ///   `time_input`; `input.grid`: the grid shape (structured; optional in 1-D; not read on
    ///   point clouds)
    /// - returns: (B, N, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>) -> Result<Tensor> {
        let mut refused = vec![InputPart::Functions, InputPart::Query];
        if self.cfg.geometry() != Geometry::Unstructured {
            refused.push(InputPart::Mask);
        }
        if !self.cfg.time_input {
            refused.push(InputPart::Time);
        }
        input.refuse(TransolverConfig::ARCH, &refused)?;
        let (mut h, grid) = self.lift.forward(
            &FrameInput {
                pos: input.pos,
                fx: input.fx,
                time: input.time,
                grid: input.grid,
            },
            Some(&self.placeholder),
        )?;
        for block in &self.blocks {
            h = block.forward(&h, grid.as_deref(), input.mask)?;
        }
        Ok(ono_nn::padding::zero_padding(&h, input.mask)?)
    }
}

crate::nsl::nsl_arch!(
    TransolverConfig,
    Transolver,
    "transolver",
    "models.Transolver.Model"
);

impl crate::nsl::NslPort for Transolver {
    fn port_forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let _ = train;
        Transolver::forward(self, input)
    }

    fn structured_dims(&self) -> Option<usize> {
        self.cfg.structured_dims()
    }
}
