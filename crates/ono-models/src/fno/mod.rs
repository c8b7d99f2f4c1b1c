//! The Fourier Neural Operator on a regular grid, as the original scripts (`fourier_1d.py`,
//! `fourier_2d.py`, `fourier_2d_time.py`, `fourier_3d.py` of zongyi-li/fourier_neural_operator)
//! and Geo-FNO's structured-mesh scripts (`naca_geofno.py`, `pipe.py`, `plasticity_3d.py`), which
//! are the same network with the mesh coordinates as input. One type for 1, 2 and 3 dimensions:
//! `arch = "fno1d" | "fno2d" | "fno3d"`.
//!
//! ```text
//! [pos], fx, index grid → fc0 → pad → n_layers × (SpectralConv + 1×1 conv w, GELU but after the last)
//!   → crop → fc1 → GELU → fc2
//! ```
//!
//! The index grid is `linspace(0, 1, n)` per axis computed in float64 and cast (as numpy builds
//! it), so the model evaluates at any resolution (zero-shot super-resolution). Fixtures:
//! `fixtures/fno`, `fixtures/geofno` (`airfoil_geofno_small`, `plasticity_geofno_small`).

mod config;
pub mod presets;
mod recompute;
mod reference;

pub use config::{FnoConfig, FnoSettings};

use ono_kernels::health;
use tch::nn::Path;
use tch::Tensor;

use crate::arch::ArchConfig;
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::conv::{Conv, ConvConfig};
use ono_nn::grid::{crop, grid_to_points, index_grid, pad_end, points_to_grid};
use ono_nn::linear::torch_linear;
use ono_nn::mlp::gelu;
use ono_nn::norm::BatchNorm;
use ono_nn::spectral_conv::{SpectralConv, SpectralConvConfig};
use ono_nn::Linear;

/// See the module documentation. Variables under the reference names: `fc0`,
/// `conv{l}.weights{k}` (complex weights as (…, 2) real pairs), `w{l}`, `fc1`, `fc2`, and the
/// unused `bn{l}`.
#[derive(Debug)]
pub struct Fno<const D: usize> {
    cfg: FnoConfig<D>,
    fc0: Linear,
    convs: Vec<SpectralConv>,
    ws: Vec<Conv>,
    fc1: Linear,
    fc2: Linear,
    batchnorms: Vec<BatchNorm>,
}

impl<const D: usize> Fno<D> {
    /// Builds the layers in the reference's construction order, with its initialisation
    /// (PyTorch defaults; spectral weights `U[0, 1/(width²))`).
    pub fn new(path: &Path, cfg: &FnoConfig<D>) -> Result<Self> {
        cfg.validate()?;
        let w = cfg.width;
        let fc0 = torch_linear(&(path / "fc0"), cfg.in_channels(), w, true);
        let convs = (0..cfg.n_layers)
            .map(|l| {
                SpectralConvConfig {
                    in_channels: w,
                    out_channels: w,
                    modes: cfg.modes.clone(),
                }
                .init(&(path / format!("conv{l}")))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let ws = (0..cfg.n_layers)
            .map(|l| ConvConfig::pointwise(D, w, w).init(&(path / format!("w{l}"))))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let batchnorms = if cfg.unused_batchnorms {
            (0..cfg.n_layers)
                .map(|l| BatchNorm::new(&(path / format!("bn{l}")), w))
                .collect()
        } else {
            Vec::new()
        };
        let fc1 = torch_linear(&(path / "fc1"), w, cfg.proj_hidden, true);
        let fc2 = torch_linear(&(path / "fc2"), cfg.proj_hidden, cfg.out_dim, true);
        Ok(Self {
            cfg: cfg.clone(),
            fc0,
            convs,
            ws,
            fc1,
            fc2,
            batchnorms,
        })
    }

    pub fn config(&self) -> &FnoConfig<D> {
        &self.cfg
    }

    /// The grid shape of an input: `input.grid`, or the N points as one axis in 1-D.
    fn grid_shape(&self, input: &ModelInput<'_>, n: i64) -> Result<Vec<i64>> {
        let shape = match input.grid {
            Some(g) => g.to_vec(),
            None if D == 1 => vec![n],
            None => {
                return Err(Error::Config(format!(
                    "{}: the points must be a regular grid; pass its shape (ModelInput::with_grid)",
                    FnoConfig::<D>::ARCH
                )))
            }
        };
        if shape.len() != D || shape.iter().product::<i64>() != n {
            return Err(Error::Shape {
                op: FnoConfig::<D>::ARCH,
                expected: format!("a {D}-D grid of the {n} points"),
                got: shape,
            });
        }
        // Each retained mode must exist on the (padded) grid; the last axis is halved.
        for (j, (&m, (&s, &p))) in self
            .cfg
            .modes
            .iter()
            .zip(shape.iter().zip(&self.cfg.padding))
            .enumerate()
        {
            let size = s + p;
            let cap = if j + 1 == D { size / 2 + 1 } else { size };
            if m > cap {
                return Err(Error::Shape {
                    op: FnoConfig::<D>::ARCH,
                    expected: format!(
                        "a grid with at least {} cells along axis {j} for {m} modes (padding {p})",
                        if j + 1 == D { 2 * (m - 1) - p } else { m - p }
                    ),
                    got: shape.clone(),
                });
            }
        }
        Ok(shape)
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim), read only with `pos_input`; `input.fx`: (B, N, fun_dim)
    ///   (absent when fun_dim = 0); `input.grid`: the grid shape [n_1, …, n_D] (optional in 1-D)
    /// - returns: (B, N, out_dim), row-major over the grid
    pub fn forward(&self, input: &ModelInput<'_>) -> Result<Tensor> {
        ono_kernels::points::refuse(
            "the FNO's spectral layers",
            "a Fourier transform over the whole grid",
        )?;
        let (mut h, shape) = self.lift(input)?;
        for l in 0..self.convs.len() {
            h = self.layer(l, &h)?;
        }
        self.head(&self.to_points(&h, &shape)?)
    }

    /// Fourier layer `l`: K_l(h) + W_l(h), GELU but after the last layer.
    ///
    /// # Shapes
    /// - `h`: (B, width, padded grid…); returns the same
    fn layer(&self, l: usize, h: &Tensor) -> Result<Tensor> {
        let out = self.convs[l].forward(h)?.f_add(&self.ws[l].forward(h)?)?;
        if l + 1 < self.convs.len() {
            Ok(gelu(&out)?)
        } else {
            Ok(out)
        }
    }

    /// The padding cropped, back to points: (B, width, padded grid…) → (B, N, width).
    fn to_points(&self, h: &Tensor, shape: &[i64]) -> Result<Tensor> {
        Ok(grid_to_points(&crop(h, shape)?)?)
    }

    /// The pointwise projection `fc2(GELU(fc1(h)))`: (B, N, width) → (B, N, out_dim).
    fn head(&self, h: &Tensor) -> Result<Tensor> {
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(h)?)?)?)
    }

    /// Checks the input; the lifted, padded grid (B, width, padded grid…) and the grid shape.
    fn lift(&self, input: &ModelInput<'_>) -> Result<(Tensor, Vec<i64>)> {
        const OP: &str = "Fno::forward";
        input.refuse(
            FnoConfig::<D>::ARCH,
            &[
                InputPart::Mask,
                InputPart::Functions,
                InputPart::Query,
                InputPart::Time,
            ],
        )?;
        let c = &self.cfg;
        let ps = input.pos.size();
        let (b, n) = match ps[..] {
            [b, n, _] if b > 0 && n > 0 => (b, n),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: "pos (B, N, space_dim) with B, N > 0".into(),
                    got: ps,
                })
            }
        };
        let shape = self.grid_shape(input, n)?;
        let kind = self.fc0.weight.kind();
        let mut features = Vec::with_capacity(3);
        if c.pos_input {
            if ps[2] != c.space_dim {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos ({b}, {n}, {})", c.space_dim),
                    got: ps,
                });
            }
            features.push(input.pos.f_to_kind(kind)?);
        }
        match (input.fx, c.fun_dim) {
            (Some(fx), _) if fx.size() == [b, n, c.fun_dim] => features.push(fx.f_to_kind(kind)?),
            (None, 0) => {}
            (fx, _) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("fx ({b}, {n}, {})", c.fun_dim),
                    got: fx.map(Tensor::size).unwrap_or_default(),
                })
            }
        }
        features.push(
            index_grid(&shape, kind, self.fc0.weight.device())?
                .f_unsqueeze(0)?
                .f_expand([b, n, D as i64], false)?,
        );
        let x = Tensor::f_cat(&features, -1)?;
        health::require_finite("Fno::forward: input", &x, || Error::NonFinite {
            op: OP,
            what: "the input (pos or fx)",
        })?;
        let h = points_to_grid(&self.fc0.forward(&x)?, &shape)?;
        Ok((pad_end(&h, &c.padding)?, shape))
    }
}

impl<const D: usize> NeuralOperator for Fno<D> {
    fn arch(&self) -> &'static str {
        FnoConfig::<D>::ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, _train: bool) -> Result<Tensor> {
        Fno::forward(self, input)
    }

    fn forward_backward(
        &self,
        input: &ModelInput<'_>,
        loss: &mut crate::operator::LossFn<'_>,
        recompute: crate::Recompute,
    ) -> Result<Tensor> {
        use crate::Recompute;
        match recompute {
            Recompute::Blocks => self.forward_backward_recompute(input, loss),
            Recompute::None | Recompute::Auto => {
                crate::operator::plain_forward_backward(self, input, loss)
            }
            Recompute::Selective => Err(crate::Error::Unsupported {
                arch: self.arch(),
                what: crate::operator::unsupported_recompute(recompute),
            }),
        }
    }

    fn supports_recompute(&self, mode: crate::Recompute) -> bool {
        mode != crate::Recompute::Selective
    }

    /// The unused BatchNorms are never called; there is nothing to reset, but their buffers are
    /// reset anyway so a model is as freshly built.
    fn reset_statistics(&self) -> Result<()> {
        for bn in &self.batchnorms {
            bn.reset_running_stats()?;
        }
        Ok(())
    }

    fn reference_forward(
        &self,
        inputs: &ono_nn::weights::NamedTensors,
        train: bool,
    ) -> Result<Tensor> {
        reference::forward(self, inputs, train)
    }
}
