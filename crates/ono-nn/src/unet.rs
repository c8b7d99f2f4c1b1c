//! The U-Net of the Neural-Solver-Library (`layers/UNet_Blocks.py`, the `multiscale` path of
//! `models/U_Net.py`), in its `bilinear = True` form: four max-pool levels down, four
//! (bi/tri)linear upsampling levels up with skip connections, a 1×1 output convolution. U-FNO
//! adds it as a third branch of its last two Fourier layers.
//!
//! ```text
//! x1 = inc(x)          DoubleConv c → c
//! x2 = down1(x1)       MaxPool(2), DoubleConv c → 2c
//! x3 = down2(x2)       2c → 4c
//! x4 = down3(x3)       4c → 8c
//! x5 = down4(x4)       8c → 8c
//! h  = up1(x5, x4)     upsample ×2, cat [skip, up], DoubleConv 16c → 4c (mid 8c)
//! h  = up2(h, x3)      8c → 2c (mid 4c)
//! h  = up3(h, x2)      4c → c (mid 2c)
//! h  = up4(h, x1)      2c → c (mid c)
//! out = outc(h)        Conv 1×1 c → c, with bias
//! ```
//!
//! Every convolution but `outc` is 3×…×3 with zero padding 1 and no bias, followed by the norm
//! and ReLU. Variables under the reference names: `inc.double_conv.{0,1,3,4}.*`,
//! `down{k}.maxpool_conv.1.double_conv.*`, `up{k}.conv.double_conv.*`, `outc.conv.*`.

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::conv::{Conv, ConvConfig};
use crate::norm::{BatchNorm, InstanceNorm};
use crate::{Error, Result};

/// The norm of every DoubleConv: NSL's `normtype`, "bn" for steady tasks and "in" (for
/// stability) for the time-dependent ones (`models/U_Net.py`, `models/LSM.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UNetNorm {
    /// `BatchNorm{D}d`: batch statistics and a running update in training, the running ones in
    /// evaluation.
    Batch,
    /// `InstanceNorm{D}d(affine = True)`: per sample and channel, the same in both modes.
    Instance,
}

impl UNetNorm {
    /// NSL's choice from `args.task`: `normtype = 'bn' if args.task == 'steady' else 'in'`.
    pub fn of_task(task: Option<&str>) -> Self {
        if task == Some("steady") {
            Self::Batch
        } else {
            Self::Instance
        }
    }
}

/// One norm of a DoubleConv.
#[derive(Debug)]
pub enum Norm {
    Batch(BatchNorm),
    Instance(InstanceNorm),
}

impl Norm {
    fn new(path: &Path, kind: UNetNorm, channels: i64) -> Self {
        match kind {
            UNetNorm::Batch => Norm::Batch(BatchNorm::new(path, channels)),
            UNetNorm::Instance => Norm::Instance(InstanceNorm::new(path, channels)),
        }
    }

    /// # Shapes
    /// - `x`: (B, C, n_1, …)
    /// - returns: the shape of `x`
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        match self {
            Norm::Batch(bn) => bn.forward(x, train),
            Norm::Instance(inorm) => inorm.forward(x),
        }
    }

    fn reset_statistics(&self) -> Result<()> {
        match self {
            Norm::Batch(bn) => bn.reset_running_stats(),
            Norm::Instance(_) => Ok(()),
        }
    }
}

/// Settings of [`DoubleConv`]: `(conv 3 → norm → ReLU) × 2`, in → mid → out channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoubleConvConfig {
    /// Spatial dimensions, 1 ..= 3.
    pub dims: usize,
    pub in_channels: i64,
    pub mid_channels: i64,
    pub out_channels: i64,
    pub norm: UNetNorm,
}

impl DoubleConvConfig {
    /// Registers `double_conv.0` (conv), `.1` (norm), `.3` (conv), `.4` (norm) under `path`
    /// (`.2` and `.5` are the parameterless ReLUs of the reference's `nn.Sequential`).
    pub fn init(&self, path: &Path) -> Result<DoubleConv> {
        let seq = path / "double_conv";
        let conv = |i: i64, o: i64, name: &str| {
            ConvConfig {
                dims: self.dims,
                in_channels: i,
                out_channels: o,
                kernel: 3,
                padding: 1,
                bias: false,
            }
            .init(&(&seq / name))
        };
        Ok(DoubleConv {
            conv1: conv(self.in_channels, self.mid_channels, "0")?,
            norm1: Norm::new(&(&seq / "1"), self.norm, self.mid_channels),
            conv2: conv(self.mid_channels, self.out_channels, "3")?,
            norm2: Norm::new(&(&seq / "4"), self.norm, self.out_channels),
        })
    }
}

/// See [`DoubleConvConfig`].
#[derive(Debug)]
pub struct DoubleConv {
    pub conv1: Conv,
    pub norm1: Norm,
    pub conv2: Conv,
    pub norm2: Norm,
}

impl DoubleConv {
    /// # Shapes
    /// - `x`: (B, in, n_1, …, n_D)
    /// - returns: (B, out, n_1, …, n_D)
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let h = self
            .norm1
            .forward(&self.conv1.forward(x)?, train)?
            .f_relu()?;
        Ok(self
            .norm2
            .forward(&self.conv2.forward(&h)?, train)?
            .f_relu()?)
    }

    fn reset_statistics(&self) -> Result<()> {
        self.norm1.reset_statistics()?;
        self.norm2.reset_statistics()
    }
}

/// `MaxPool{D}d(2)`: kernel 2, stride 2, no padding, floor mode.
///
/// # Shapes
/// - `x`: (B, C, n_1, …, n_D), D ∈ 1..=3
/// - returns: (B, C, ⌊n_1/2⌋, …, ⌊n_D/2⌋)
pub fn max_pool2(x: &Tensor) -> Result<Tensor> {
    let size = x.size();
    let d = size.len().saturating_sub(2);
    if !(1..=3).contains(&d) || size[2..].iter().any(|&n| n < 2) {
        return Err(Error::Shape {
            op: "max_pool2",
            expected: "(B, C, n_1, …, n_D) with 1 ≤ D ≤ 3 and every n_j ≥ 2".into(),
            got: size,
        });
    }
    let (two, zero, one) = (vec![2i64; d], vec![0i64; d], vec![1i64; d]);
    Ok(match d {
        1 => x.f_max_pool1d(&two, &two, &zero, &one, false)?,
        2 => x.f_max_pool2d(&two, &two, &zero, &one, false)?,
        _ => x.f_max_pool3d(&two, &two, &zero, &one, false)?,
    })
}

/// `nn.Upsample(scale_factor = 2, mode = linear | bilinear | trilinear, align_corners = True)`:
/// output cell i of an axis of n input cells samples the input at i·(n − 1)/(2n − 1) (the
/// corners of input and output coincide), linearly interpolated along every axis.
///
/// # Shapes
/// - `x`: (B, C, n_1, …, n_D), D ∈ 1..=3
/// - returns: (B, C, 2n_1, …, 2n_D)
pub fn upsample2_align_corners(x: &Tensor) -> Result<Tensor> {
    let size = x.size();
    let d = size.len().saturating_sub(2);
    if !(1..=3).contains(&d) {
        return Err(Error::Shape {
            op: "upsample2_align_corners",
            expected: "(B, C, n_1, …, n_D) with 1 ≤ D ≤ 3".into(),
            got: size,
        });
    }
    let out: Vec<i64> = size[2..].iter().map(|n| 2 * n).collect();
    // With align_corners the scale is (n − 1)/(2n − 1) whatever scale factor is passed.
    Ok(match d {
        1 => x.f_upsample_linear1d(&out, true, None)?,
        2 => x.f_upsample_bilinear2d(&out, true, None, None)?,
        _ => x.f_upsample_trilinear3d(&out, true, None, None, None)?,
    })
}

/// `Up2D`'s zero padding of the upsampled map to the skip's size: ⌊diff/2⌋ cells before and
/// the rest after, along each of the two axes (`F.pad(x1, [diffX // 2, diffX − diffX // 2,
/// diffY // 2, diffY − diffY // 2])`).
///
/// # Shapes
/// - `x`: (B, C, h, w), `target`: [H, W] with H ≥ h, W ≥ w
/// - returns: (B, C, H, W)
pub fn pad_to(x: &Tensor, target: &[i64]) -> Result<Tensor> {
    let size = x.size();
    if size.len() != 4 || target.len() != 2 || target[0] < size[2] || target[1] < size[3] {
        return Err(Error::Shape {
            op: "pad_to",
            expected: format!(
                "(B, C, h, w) with h ≤ {:?}, w ≤ {:?}",
                target.first(),
                target.get(1)
            ),
            got: size,
        });
    }
    let (dy, dx) = (target[0] - size[2], target[1] - size[3]);
    if dy == 0 && dx == 0 {
        return Ok(x.shallow_clone());
    }
    Ok(x.f_constant_pad_nd([dx / 2, dx - dx / 2, dy / 2, dy - dy / 2])?)
}

/// Settings of [`UNet`]: NSL's `U_Net` multiscale modules at width `channels` (`n_hidden`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UNetConfig {
    /// Spatial dimensions, 1 ..= 3.
    pub dims: usize,
    pub channels: i64,
    pub norm: UNetNorm,
}

impl UNetConfig {
    /// Registers `inc`, `down1` … `down4`, `up1` … `up4` and `outc` under `path`, with PyTorch's
    /// default initialisation (convolutions ±1/√fan_in, norms 1 and 0).
    pub fn init(&self, path: &Path) -> Result<UNet> {
        let c = self.channels;
        if !(1..=3).contains(&self.dims) || c < 1 {
            return Err(Error::Config(format!("U-Net {self:?}")));
        }
        let double = |p: &Path, i: i64, m: i64, o: i64| {
            DoubleConvConfig {
                dims: self.dims,
                in_channels: i,
                mid_channels: m,
                out_channels: o,
                norm: self.norm,
            }
            .init(p)
        };
        let inc = double(&(path / "inc"), c, c, c)?;
        // (in, out) of down1..4; with bilinear upsampling down4 keeps 8c (16c // factor 2).
        let downs = [(c, 2 * c), (2 * c, 4 * c), (4 * c, 8 * c), (8 * c, 8 * c)]
            .iter()
            .enumerate()
            .map(|(k, &(i, o))| {
                double(
                    &(path / format!("down{}", k + 1) / "maxpool_conv" / "1"),
                    i,
                    o,
                    o,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        // (in, out) of up1..4: Up2D(in, out // factor) with its DoubleConv's mid = in // 2.
        let ups = [(16 * c, 4 * c), (8 * c, 2 * c), (4 * c, c), (2 * c, c)]
            .iter()
            .enumerate()
            .map(|(k, &(i, o))| double(&(path / format!("up{}", k + 1) / "conv"), i, i / 2, o))
            .collect::<Result<Vec<_>>>()?;
        let outc = ConvConfig::pointwise(self.dims, c, c).init(&(path / "outc" / "conv"))?;
        Ok(UNet {
            cfg: *self,
            inc,
            downs,
            ups,
            outc,
        })
    }
}

/// See the module documentation and [`UNetConfig`].
#[derive(Debug)]
pub struct UNet {
    cfg: UNetConfig,
    pub inc: DoubleConv,
    /// `down1` … `down4` (the DoubleConv after each max-pool).
    pub downs: Vec<DoubleConv>,
    /// `up1` … `up4` (the DoubleConv after each upsampling and concatenation).
    pub ups: Vec<DoubleConv>,
    pub outc: Conv,
}

/// The smallest square grid side on which a U-Net normalizing with InstanceNorm (NSL's choice on
/// time-dependent tasks) has more than one cell at its coarsest level (⌊n/16⌋ per axis), and so
/// runs: [`UNet::forward`] refuses smaller ones, as the reference does.
pub const INSTANCE_NORM_MIN_SIDE: i64 = 32;

impl UNet {
    /// NSL's `U_Net.multiscale`. Four halvings: every axis needs at least 16 cells. The
    /// reference pads the upsampled map to the skip's size only in 2-D (`Up2D`); its `Up1D` and
    /// `Up3D` concatenate directly and fail on odd sizes, and so does this port. A coarsest level
    /// of one value per channel is refused as PyTorch's norms refuse it (below).
    ///
    /// # Shapes
    /// - `x`: (B, c, n_1, …, n_D) with every n_j ≥ 16
    /// - returns: (B, c, n_1, …, n_D)
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        self.forward_through(x, train, &mut |_, h| Ok(h.shallow_clone()))
    }

    /// [`forward`](Self::forward) with every level's output passed through `through(level, x)`
    /// where it enters the upward path (level 0: `inc`'s output, the last skip; 4: the
    /// bottleneck, `down4`'s); the downward path takes the untouched outputs. LSM's Neural
    /// Spectral Blocks sit there (`models/LSM.py`: `up1(process5(x5), process4(x4))`, …).
    ///
    /// # Shapes
    /// - `x`: (B, c, n_1, …, n_D) with every n_j ≥ 16
    /// - `through` keeps the shape of its input
    /// - returns: (B, c, n_1, …, n_D)
    pub fn forward_through(
        &self,
        x: &Tensor,
        train: bool,
        through: &mut dyn FnMut(usize, &Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let size = x.size();
        let d = self.cfg.dims;
        if size.len() != d + 2 || size[1] != self.cfg.channels || size[2..].iter().any(|&n| n < 16)
        {
            return Err(Error::Shape {
                op: "UNet",
                expected: format!(
                    "(B, {}, n_1, …, n_{d}) with every n_j ≥ 16 (four halvings)",
                    self.cfg.channels
                ),
                got: size,
            });
        }
        // The coarsest level has ⌊n_j/16⌋ cells per axis. PyTorch's Python norms refuse to
        // normalise a single value (BatchNorm in training: B·cells = 1, `_verify_batch_size`;
        // InstanceNorm always: cells = 1, `_verify_spatial_size`); libtorch does not check and
        // would return the bias. Refuse as the reference does.
        let cells: i64 = size[2..].iter().map(|n| n / 16).product();
        let single = match self.cfg.norm {
            UNetNorm::Batch => train && size[0] * cells == 1,
            UNetNorm::Instance => cells == 1,
        };
        if single {
            return Err(Error::Shape {
                op: "UNet",
                expected: format!(
                    "more than one value per channel at the coarsest level for {:?} norm \
                     (⌊n_j/16⌋ cells per axis{})",
                    self.cfg.norm,
                    if self.cfg.norm == UNetNorm::Batch {
                        " times the batch size, in training"
                    } else {
                        ""
                    }
                ),
                got: size,
            });
        }
        let mut skips = vec![self.inc.forward(x, train)?];
        for down in &self.downs {
            let h = max_pool2(skips.last().expect("inc is first"))?;
            skips.push(down.forward(&h, train)?);
        }
        let bottom = skips.pop().expect("five levels");
        let mut h = through(skips.len(), &bottom)?;
        for up in &self.ups {
            let skip = skips.pop().expect("one skip per level");
            let skip = through(skips.len(), &skip)?;
            let mut u = upsample2_align_corners(&h)?;
            let target = &skip.size()[2..];
            if d == 2 {
                u = pad_to(&u, target)?;
            } else if u.size()[2..] != *target {
                return Err(Error::Shape {
                    op: "UNet",
                    expected: format!(
                        "an upsampled map of the skip's size {target:?} (NSL pads only in 2-D; \
                         use grid sizes divisible by 16)"
                    ),
                    got: u.size(),
                });
            }
            h = up.forward(&Tensor::f_cat(&[skip, u], 1)?, train)?;
        }
        self.outc.forward(&h)
    }

    /// Every BatchNorm back to mean 0, variance 1, no batches tracked.
    pub fn reset_statistics(&self) -> Result<()> {
        self.inc.reset_statistics()?;
        for b in self.downs.iter().chain(&self.ups) {
            b.reset_statistics()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    fn cpu(kind: Kind) -> (Kind, Device) {
        (kind, Device::Cpu)
    }

    /// Bilinear interpolation reproduces a bilinear function exactly; with align_corners, output
    /// cell i of 2n sits at input coordinate i·(n − 1)/(2n − 1).
    #[test]
    fn bilinear_upsampling_aligns_corners() {
        let (h, w) = (2i64, 3i64);
        let f = |r: f64, c: f64| r * c + 2.0 * r - c + 0.5;
        let vals: Vec<f64> = (0..h)
            .flat_map(|r| (0..w).map(move |c| f(r as f64, c as f64)))
            .collect();
        let x = Tensor::from_slice(&vals).reshape([1, 1, h, w]);
        let out = upsample2_align_corners(&x).unwrap();
        assert_eq!(out.size(), [1, 1, 4, 6]);
        for i in 0..4 {
            for j in 0..6 {
                let r = i as f64 * (h - 1) as f64 / 3.0;
                let c = j as f64 * (w - 1) as f64 / 5.0;
                let got = out.double_value(&[0, 0, i, j]);
                assert!(
                    (got - f(r, c)).abs() < 1e-12,
                    "({i},{j}): {got} vs {}",
                    f(r, c)
                );
            }
        }
        // A single cell is copied (scale 0).
        let one = Tensor::from_slice(&[3.5f64]).reshape([1, 1, 1, 1]);
        let up = upsample2_align_corners(&one).unwrap();
        assert_eq!(up.size(), [1, 1, 2, 2]);
        assert_eq!(up.sum(Kind::Double).double_value(&[]), 14.0);
    }

    #[test]
    fn linear_and_trilinear_upsampling_align_corners() {
        let x = Tensor::from_slice(&[1.0f64, 4.0, -2.0]).reshape([1, 1, 3]);
        let out = upsample2_align_corners(&x).unwrap();
        // Output cell i of 6 at 0.4·i.
        let want = [1.0, 2.2, 3.4, 2.8, 0.4, -2.0];
        for (i, w) in want.iter().enumerate() {
            assert!((out.double_value(&[0, 0, i as i64]) - w).abs() < 1e-12);
        }
        let x3 = Tensor::arange(8, cpu(Kind::Double)).reshape([1, 1, 2, 2, 2]);
        let out3 = upsample2_align_corners(&x3).unwrap();
        // x3[a, b, c] = 4a + 2b + c is linear: the corners and centre sample it exactly.
        assert_eq!(out3.size(), [1, 1, 4, 4, 4]);
        let v = out3.double_value(&[0, 0, 1, 2, 3]);
        assert!((v - (4.0 / 3.0 + 4.0 / 3.0 + 1.0)).abs() < 1e-12, "{v}");
    }

    #[test]
    fn pad_to_puts_the_odd_cell_after() {
        let x = Tensor::ones([1, 1, 1, 1], cpu(Kind::Double));
        let p = pad_to(&x, &[4, 3]).unwrap();
        assert_eq!(p.size(), [1, 1, 4, 3]);
        // diffY = 3 → 1 before, 2 after; diffX = 2 → 1 and 1.
        assert_eq!(p.double_value(&[0, 0, 1, 1]), 1.0);
        assert_eq!(p.sum(Kind::Double).double_value(&[]), 1.0);
        assert!(pad_to(&x.expand([1, 1, 5, 1], false), &[4, 3]).is_err());
    }

    #[test]
    fn max_pool_halves_with_floor() {
        let x = Tensor::arange(15, cpu(Kind::Double)).reshape([1, 1, 3, 5]);
        let p = max_pool2(&x).unwrap();
        assert_eq!(p.size(), [1, 1, 1, 2]);
        assert_eq!(p.double_value(&[0, 0, 0, 0]), 6.0);
        assert_eq!(p.double_value(&[0, 0, 0, 1]), 8.0);
    }

    fn names(vs: &VarStore) -> Vec<String> {
        let mut n: Vec<String> = vs.variables().keys().cloned().collect();
        n.sort();
        n
    }

    /// The reference's state_dict names and sizes: c = 2, BatchNorm.
    #[test]
    fn unet_has_the_reference_variables() {
        let vs = VarStore::new(Device::Cpu);
        let unet = UNetConfig {
            dims: 2,
            channels: 2,
            norm: UNetNorm::Batch,
        }
        .init(&vs.root())
        .unwrap();
        let n = names(&vs);
        for want in [
            "inc.double_conv.0.weight",
            "inc.double_conv.1.running_var",
            "inc.double_conv.4.num_batches_tracked",
            "down4.maxpool_conv.1.double_conv.3.weight",
            "up1.conv.double_conv.0.weight",
            "up4.conv.double_conv.4.bias",
            "outc.conv.weight",
            "outc.conv.bias",
        ] {
            assert!(n.iter().any(|k| k == want), "{want} missing from {n:?}");
        }
        assert_eq!(unet.ups[0].conv1.weight.size(), [16, 32, 3, 3]);
        assert_eq!(unet.ups[0].conv2.weight.size(), [8, 16, 3, 3]);
        assert_eq!(unet.downs[3].conv2.weight.size(), [16, 16, 3, 3]);
        // Parameters (BatchNorm buffers excluded): conv weights + 2 per norm channel + outc.
        let params: i64 = vs
            .trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum();
        let c = 2i64;
        let dc = |i: i64, m: i64, o: i64| 9 * (i * m + m * o) + 2 * (m + o);
        let want = dc(c, c, c)
            + dc(c, 2 * c, 2 * c)
            + dc(2 * c, 4 * c, 4 * c)
            + dc(4 * c, 8 * c, 8 * c)
            + dc(8 * c, 8 * c, 8 * c)
            + dc(16 * c, 8 * c, 4 * c)
            + dc(8 * c, 4 * c, 2 * c)
            + dc(4 * c, 2 * c, c)
            + dc(2 * c, c, c)
            + c * c
            + c;
        assert_eq!(params, want);
    }

    /// One training pass moves every BatchNorm's running statistics by 0.1 of its batch
    /// statistics (unbiased variance); the first one is checked against the hand formula on
    /// the first convolution's output. Reset restores (0, 1, 0). Evaluation mode leaves them.
    #[test]
    fn batchnorm_statistics_update_and_reset() {
        tch::manual_seed(4);
        let vs = VarStore::new(Device::Cpu);
        let unet = UNetConfig {
            dims: 2,
            channels: 3,
            norm: UNetNorm::Batch,
        }
        .init(&vs.root())
        .unwrap();
        let x = Tensor::randn([2, 3, 16, 16], cpu(Kind::Float));
        let _ = unet.forward(&x, false).unwrap();
        let Norm::Batch(bn) = &unet.inc.norm1 else {
            panic!("BatchNorm expected")
        };
        assert_eq!(bn.num_batches_tracked.int64_value(&[]), 0);
        let out = unet.forward(&x, true).unwrap();
        assert_eq!(out.size(), [2, 3, 16, 16]);
        let h = unet.inc.conv1.forward(&x).unwrap();
        let dims = &[0i64, 2, 3][..];
        let mean = h.mean_dim(dims, false, Kind::Float) * 0.1;
        let var = h.var_dim(dims, true, false) * 0.1 + 0.9;
        let close = |a: &Tensor, b: &Tensor| {
            let e = (a - b).abs().max().double_value(&[]);
            assert!(e < 1e-6, "{e}");
        };
        close(&bn.running_mean, &mean);
        close(&bn.running_var, &var);
        assert_eq!(bn.num_batches_tracked.int64_value(&[]), 1);
        unet.reset_statistics().unwrap();
        for d in unet.downs.iter().chain(&unet.ups) {
            let Norm::Batch(bn) = &d.norm2 else {
                panic!("BatchNorm expected")
            };
            assert_eq!(
                bn.running_mean.abs().sum(Kind::Double).double_value(&[]),
                0.0
            );
            assert_eq!(bn.num_batches_tracked.int64_value(&[]), 0);
        }
    }

    /// InstanceNorm: each sample and channel normalised over its cells (biased variance), so
    /// training and evaluation agree and a sample's output does not depend on the batch.
    #[test]
    fn instance_norm_unet_is_per_sample() {
        tch::manual_seed(5);
        let mut vs = VarStore::new(Device::Cpu);
        vs.set_kind(Kind::Double);
        let unet = UNetConfig {
            dims: 2,
            channels: 2,
            norm: UNetNorm::Instance,
        }
        .init(&vs.root())
        .unwrap();
        assert!(!names(&vs).iter().any(|n| n.contains("running")));
        let x = Tensor::randn([2, 2, 16, 32], cpu(Kind::Double));
        let both = unet.forward(&x, true).unwrap();
        let first = unet.forward(&x.narrow(0, 0, 1), false).unwrap();
        let e = (both.narrow(0, 0, 1) - first).abs().max().double_value(&[]);
        assert!(e < 1e-12, "{e}");
        let Norm::Instance(inorm) = &unet.inc.norm1 else {
            panic!("InstanceNorm expected")
        };
        let h = unet.inc.conv1.forward(&x).unwrap();
        let dims = &[2i64, 3][..];
        let m = h.mean_dim(dims, true, Kind::Double);
        let v = h.var_dim(dims, false, true);
        let want = (&h - m) / (v + 1e-5).sqrt();
        let e = (inorm.forward(&h).unwrap() - want)
            .abs()
            .max()
            .double_value(&[]);
        assert!(e < 1e-12, "{e}");
    }

    #[test]
    fn unet_refuses_small_or_wrong_inputs() {
        let vs = VarStore::new(Device::Cpu);
        let unet = UNetConfig {
            dims: 2,
            channels: 2,
            norm: UNetNorm::Batch,
        }
        .init(&vs.root())
        .unwrap();
        let small = Tensor::zeros([1, 2, 8, 16], cpu(Kind::Float));
        assert!(matches!(
            unet.forward(&small, false),
            Err(Error::Shape { .. })
        ));
        let wrong = Tensor::zeros([1, 3, 16, 16], cpu(Kind::Float));
        assert!(matches!(
            unet.forward(&wrong, false),
            Err(Error::Shape { .. })
        ));
        // Odd sizes work in 2-D (padded to the skip), as Up2D.
        let odd = Tensor::randn([2, 2, 17, 19], cpu(Kind::Float));
        assert_eq!(unet.forward(&odd, true).unwrap().size(), [2, 2, 17, 19]);
        // One sample on a 1 × 1 coarsest level: BatchNorm cannot train on one value, as
        // PyTorch refuses; evaluation (running statistics) is fine.
        let one = Tensor::randn([1, 2, 16, 31], cpu(Kind::Float));
        assert!(matches!(unet.forward(&one, true), Err(Error::Shape { .. })));
        assert!(unet.forward(&one, false).is_ok());
        assert!(unet.forward(&one.repeat([2, 1, 1, 1]), true).is_ok());
        let vs = VarStore::new(Device::Cpu);
        let inst = UNetConfig {
            dims: 2,
            channels: 2,
            norm: UNetNorm::Instance,
        }
        .init(&vs.root())
        .unwrap();
        let two = one.repeat([2, 1, 1, 1]);
        assert!(matches!(
            inst.forward(&two, false),
            Err(Error::Shape { .. })
        ));
        assert!(inst.forward(&two.repeat([1, 1, 1, 2]), false).is_ok());
    }

    /// `INSTANCE_NORM_MIN_SIDE` (below which the reproduce plan leaves U-FNO's and LSM's NS2d
    /// cells out) is where the U-Net with InstanceNorm (the time-dependent tasks') refuses its
    /// input.
    #[test]
    fn instance_norm_min_side_is_where_the_u_net_refuses() {
        let vs = VarStore::new(Device::Cpu);
        let unet = UNetConfig {
            dims: 2,
            channels: 2,
            norm: UNetNorm::Instance,
        }
        .init(&vs.root())
        .unwrap();
        let run = |n: i64| unet.forward(&Tensor::randn([1, 2, n, n], cpu(Kind::Float)), true);
        assert!(run(INSTANCE_NORM_MIN_SIDE).is_ok());
        assert!(run(INSTANCE_NORM_MIN_SIDE - 1).is_err());
        assert!(run(16).is_err());
    }
}
