//! The interpolation-CNN down- and upsamplers of the Galerkin Transformer's 2-D model
//! (`Interp2dEncoder`, `Interp2dUpsample` of scaomath/galerkin-transformer `libs/layers.py` @
//! f9e7d6a, built with `residual = False` by `DownScaler`/`UpScaler` in `libs/model.py`):
//! bias-free 3×3 convolutions around bilinear interpolations with `align_corners = True` to
//! explicit sizes.

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::conv::{Conv, ConvConfig};
use crate::{Error, Result};

/// The activation of a scaler (`downscaler_activation`, `upscaler_activation`; SiLU unless
/// `relu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScalerActivation {
    Relu,
    #[default]
    Silu,
}

impl ScalerActivation {
    fn apply(self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Relu => x.f_relu()?,
            Self::Silu => x.f_silu()?,
        })
    }
}

/// `Conv2dResBlock(residual = False)`: `conv.0` (3×3, padding 1, no bias) → dropout → activation.
#[derive(Debug)]
struct ConvBlock {
    conv: Conv,
}

impl ConvBlock {
    fn new(path: &Path, cin: i64, cout: i64) -> Result<Self> {
        let conv = ConvConfig {
            dims: 2,
            in_channels: cin,
            out_channels: cout,
            kernel: 3,
            padding: 1,
            bias: false,
        }
        .init(&(path / "conv" / 0))?;
        Ok(Self { conv })
    }

    fn forward(&self, x: &Tensor, act: ScalerActivation, p: f64, train: bool) -> Result<Tensor> {
        let y = self.conv.forward(x)?;
        act.apply(&y.f_dropout(p, train && p > 0.0)?)
    }
}

fn interpolate(x: &Tensor, size: [i64; 2]) -> Result<Tensor> {
    Ok(x.f_upsample_bilinear2d(size, true, None, None)?)
}

fn check(op: &'static str, x: &Tensor, channels: i64) -> Result<()> {
    let size = x.size();
    if size.len() != 4 || size[1] != channels || size[2] < 1 || size[3] < 1 {
        return Err(Error::Shape {
            op,
            expected: format!("(B, {channels}, H, W)"),
            got: size,
        });
    }
    Ok(())
}

/// `Interp2dEncoder`: `conv0` (in → d), interpolate to `sizes[0]`, activation; `conv1` (d → d/3),
/// `conv2` (→ d/3), `conv3` (→ d − 2·(d/3)) chained, their outputs concatenated; interpolate to
/// `sizes[1]`, activation.
#[derive(Debug)]
pub struct InterpDownscaler {
    convs: [ConvBlock; 4],
    in_channels: i64,
    sizes: [[i64; 2]; 2],
    act: ScalerActivation,
    dropout: f64,
}

impl InterpDownscaler {
    /// Registers `conv{0,1,2,3}.conv.0.weight` on `path` (the reference's `downscaler.downsample`).
    pub fn new(
        path: &Path,
        in_channels: i64,
        out_channels: i64,
        sizes: [[i64; 2]; 2],
        act: ScalerActivation,
        dropout: f64,
    ) -> Result<Self> {
        let (c0, c1) = (out_channels / 3, out_channels / 3);
        let c2 = out_channels - c0 - c1;
        if in_channels < 1 || c0 < 1 || sizes.iter().flatten().any(|&s| s < 1) {
            return Err(Error::Config(format!(
                "interpolation downscaler: {in_channels} → {out_channels} channels (at least 3), \
                 sizes {sizes:?}"
            )));
        }
        Ok(Self {
            convs: [
                ConvBlock::new(&(path / "conv0"), in_channels, out_channels)?,
                ConvBlock::new(&(path / "conv1"), out_channels, c0)?,
                ConvBlock::new(&(path / "conv2"), c0, c1)?,
                ConvBlock::new(&(path / "conv3"), c1, c2)?,
            ],
            in_channels,
            sizes,
            act,
            dropout,
        })
    }

    /// # Shapes
    /// - `x`: (B, in, H, W)
    /// - returns: (B, out, sizes[1])
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        check("InterpDownscaler::forward", x, self.in_channels)?;
        let (a, p) = (self.act, self.dropout);
        let x = self.convs[0].forward(x, a, p, train)?;
        let x = a.apply(&interpolate(&x, self.sizes[0])?)?;
        let x1 = self.convs[1].forward(&x, a, p, train)?;
        let x2 = self.convs[2].forward(&x1, a, p, train)?;
        let x3 = self.convs[3].forward(&x2, a, p, train)?;
        let out = Tensor::f_cat(&[x1, x2, x3], 1)?;
        a.apply(&interpolate(&out, self.sizes[1])?)
    }
}

/// `Interp2dUpsample`: interpolate to `sizes[0]`; `conv.0` (3×3, d → d) block, dropout and the
/// activation again (the block's own, then the Sequential's: two in a row); interpolate to
/// `sizes[1]`.
#[derive(Debug)]
pub struct InterpUpscaler {
    block: ConvBlock,
    channels: i64,
    sizes: [[i64; 2]; 2],
    act: ScalerActivation,
    dropout: f64,
}

impl InterpUpscaler {
    /// Registers `conv.0.conv.0.weight` on `path` (the reference's `upscaler.upsample`).
    pub fn new(
        path: &Path,
        channels: i64,
        sizes: [[i64; 2]; 2],
        act: ScalerActivation,
        dropout: f64,
    ) -> Result<Self> {
        if channels < 1 || sizes.iter().flatten().any(|&s| s < 1) {
            return Err(Error::Config(format!(
                "interpolation upscaler: {channels} channels, sizes {sizes:?}"
            )));
        }
        Ok(Self {
            block: ConvBlock::new(&(path / "conv" / 0), channels, channels)?,
            channels,
            sizes,
            act,
            dropout,
        })
    }

    /// # Shapes
    /// - `x`: (B, d, H, W)
    /// - returns: (B, d, sizes[1])
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        check("InterpUpscaler::forward", x, self.channels)?;
        let (a, p) = (self.act, self.dropout);
        let x = interpolate(x, self.sizes[0])?;
        let x = self.block.forward(&x, a, p, train)?;
        let x = a.apply(&x.f_dropout(p, train && p > 0.0)?)?;
        interpolate(&x, self.sizes[1])
    }
}
