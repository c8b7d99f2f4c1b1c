//! `IPHI`, Geo-FNO's learned deformation x ↦ ξ from the physical points to the computational
//! (latent-grid) coordinates (`elasticity/elas_geofno.py` of neuraloperator/Geo-FNO `d499bde`,
//! copied unchanged into NSL's `layers/GeoFNO_Projection.py`).
//!
//! ```text
//! xd = (x0, x1, atan2(x1 − c, x0 − c), ‖x − c‖₂),  c = (1e-4, 1e-4)
//! h  = [fc0(xd), sin(B_k·xd_d), cos(B_k·xd_d)],  B_k = π·2^k, k < width/4   (3·width)
//! with a code: h = [fc_code(code), h]   without: h = fc_no_code(h)            (4·width)
//! δ  = fc4(tanh(fc3(tanh(fc2(tanh(fc1(h)))))));  ξ = x + x ⊙ δ
//! ```
//!
//! Both `fc_code` (`Linear(42, width)`: the 42 is hard-coded, the size of the elasticity
//! geometry code) and `fc_no_code` always exist; each forward uses one of them, so the other
//! gets no gradient, as in the reference.

use tch::nn::Path;
use tch::{Kind, Tensor};

use crate::linear::torch_linear;
use crate::linear::Linear;
use crate::{Error, Result};

/// Entries of the geometry code (`nn.Linear(42, width)` in the reference).
pub const CODE_DIM: i64 = 42;

/// The centre of the polar features, (1e-4, 1e-4), taken in the parameters' precision.
const CENTER: f64 = 0.0001;

/// Settings of [`Iphi`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IphiConfig {
    /// `width` (32 in every script): a multiple of 4.
    pub width: i64,
}

impl Default for IphiConfig {
    fn default() -> Self {
        Self { width: 32 }
    }
}

impl IphiConfig {
    /// Registers `fc0`, `fc_code`, `fc_no_code`, `fc1` … `fc4` in the reference's order, with
    /// PyTorch's default initialisation.
    pub fn init(&self, path: &Path) -> Result<Iphi> {
        let w = self.width;
        if w < 4 || w % 4 != 0 {
            return Err(Error::Config(format!(
                "IPHI width {w} must be a positive multiple of 4"
            )));
        }
        Ok(Iphi {
            fc0: torch_linear(&(path / "fc0"), 4, w, true),
            fc_code: torch_linear(&(path / "fc_code"), CODE_DIM, w, true),
            fc_no_code: torch_linear(&(path / "fc_no_code"), 3 * w, 4 * w, true),
            fc1: torch_linear(&(path / "fc1"), 4 * w, 4 * w, true),
            fc2: torch_linear(&(path / "fc2"), 4 * w, 4 * w, true),
            fc3: torch_linear(&(path / "fc3"), 4 * w, 4 * w, true),
            fc4: torch_linear(&(path / "fc4"), 4 * w, 2, true),
            width: w,
        })
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Iphi {
    fc0: Linear,
    fc_code: Linear,
    fc_no_code: Linear,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
    fc4: Linear,
    width: i64,
}

impl Iphi {
    pub fn width(&self) -> i64 {
        self.width
    }

    /// The NeRF frequencies B_k = π·2^k: π rounded to the parameters' precision times an exact
    /// power of two (the reference's `np.pi * torch.pow(2, arange(float32))`).
    ///
    /// Made on the device: 2^k doubles exactly from 1 (a cumulative product of twos), and an
    /// upload per forward would wait for the queued work and cannot be captured in a CUDA graph.
    fn frequencies(&self, kind: Kind, device: tch::Device) -> Result<Tensor> {
        let n = self.width / 4;
        let twos = Tensor::f_full([n], 2.0, (kind, device))?.f_index_fill(
            0,
            &Tensor::f_zeros([1], (Kind::Int64, device))?,
            1.0,
        )?;
        Ok(twos
            .f_cumprod(0, kind)?
            .f_mul_scalar(std::f64::consts::PI)?)
    }

    /// ξ = IPHI(x, code).
    ///
    /// # Shapes
    /// - `x`: (B, N, 2) physical coordinates
    /// - `code`: (B, 42) geometry code, or `None`
    /// - returns: (B, N, 2) computational coordinates ξ
    pub fn forward(&self, x: &Tensor, code: Option<&Tensor>) -> Result<Tensor> {
        const OP: &str = "Iphi::forward";
        let size = x.size();
        let (b, n) = match size[..] {
            [b, n, 2] => (b, n),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: "x (B, N, 2)".into(),
                    got: size,
                })
            }
        };
        let kind = self.fc0.weight.kind();
        let x = x.f_to_kind(kind)?;
        let (x0, x1) = (x.f_select(-1, 0)?, x.f_select(-1, 1)?);
        let angle = x1
            .f_sub_scalar(CENTER)?
            .f_atan2(&x0.f_sub_scalar(CENTER)?)?;
        // `torch.norm(·, p=2, dim=-1)` is `linalg.vector_norm`, as `linalg_norm` on one dim.
        let radius =
            x.f_sub_scalar(CENTER)?
                .f_linalg_norm(2, Some(&[-1i64][..]), false, None::<Kind>)?;
        let xd = Tensor::f_stack(&[&x0, &x1, &angle, &radius], -1)?; // (B, N, 4)
        let freqs = self.frequencies(kind, x.device())?;
        let phase = freqs
            .f_mul(&xd.f_unsqueeze(-1)?)?
            .f_reshape([b, n, self.width])?;
        let h = Tensor::f_cat(
            &[self.fc0.forward(&xd)?, phase.f_sin()?, phase.f_cos()?],
            -1,
        )?;
        let h = match code {
            Some(code) => {
                if code.size() != [b, CODE_DIM] {
                    return Err(Error::Shape {
                        op: OP,
                        expected: format!("code ({b}, {CODE_DIM})"),
                        got: code.size(),
                    });
                }
                let cd = self
                    .fc_code
                    .forward(&code.f_to_kind(kind)?)?
                    .f_unsqueeze(1)?
                    .f_expand([b, n, self.width], false)?;
                Tensor::f_cat(&[cd, h], -1)?
            }
            None => self.fc_no_code.forward(&h)?,
        };
        let h = self.fc1.forward(&h)?.f_tanh()?;
        let h = self.fc2.forward(&h)?.f_tanh()?;
        let h = self.fc3.forward(&h)?.f_tanh()?;
        let delta = self.fc4.forward(&h)?;
        Ok(x.f_add(&x.f_mul(&delta)?)?)
    }
}
