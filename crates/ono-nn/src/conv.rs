//! Convolutions (`nn.Conv1d/2d/3d`) with PyTorch's default initialisation, which the FNO family
//! relies on for every `nn.Conv*d` it does not initialise itself (its `nn.Linear` counterpart is
//! [`crate::linear::torch_linear`]).

use tch::nn::{Init, Path};
use tch::Tensor;

use crate::linear::default_bound;
use crate::precision::{to_compute, to_compute_opt};
use crate::{Error, Result};

/// Settings of [`Conv`]: `nn.Conv{dims}d(in, out, kernel, padding = padding, bias = bias)`,
/// stride 1, no dilation, zero padding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvConfig {
    /// Spatial dimensions, 1 ..= 3.
    pub dims: usize,
    pub in_channels: i64,
    pub out_channels: i64,
    /// The same kernel size along every spatial dimension.
    pub kernel: i64,
    /// The same zero padding on both sides of every spatial dimension.
    pub padding: i64,
    pub bias: bool,
}

impl ConvConfig {
    /// A 1×…×1 convolution with bias: the pointwise channel mixing `w` of FNO layers.
    pub fn pointwise(dims: usize, in_channels: i64, out_channels: i64) -> Self {
        Self {
            dims,
            in_channels,
            out_channels,
            kernel: 1,
            padding: 0,
            bias: true,
        }
    }

    /// Registers `weight` (out, in, k, …, k) and `bias` (out) with PyTorch's default init.
    pub fn init(&self, path: &Path) -> Result<Conv> {
        if !(1..=3).contains(&self.dims) || self.kernel < 1 || self.padding < 0 {
            return Err(Error::Config(format!("convolution {self:?}")));
        }
        let mut shape = vec![self.out_channels, self.in_channels];
        shape.extend(std::iter::repeat_n(self.kernel, self.dims));
        let fan_in = self.in_channels * self.kernel.pow(self.dims as u32);
        let b = default_bound(fan_in);
        let init = Init::Uniform { lo: -b, up: b };
        Ok(Conv {
            weight: path.var("weight", &shape, init),
            bias: self
                .bias
                .then(|| path.var("bias", &[self.out_channels], init)),
            cfg: *self,
        })
    }
}

/// See [`ConvConfig`].
#[derive(Debug)]
pub struct Conv {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    cfg: ConvConfig,
}

impl Conv {
    /// In the compute kind of a mixed-precision scope, like [`crate::Linear`].
    ///
    /// # Shapes
    /// - `x`: (B, in, n_1, …, n_dims)
    /// - returns: (B, out, n_1 + 2p − k + 1, …)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let c = &self.cfg;
        if c.kernel > 1 {
            ono_kernels::points::refuse(
                "a convolution over the grid",
                "it reads each point's neighbours",
            )?;
        }
        let size = x.size();
        if size.len() != c.dims + 2 || size[1] != c.in_channels {
            return Err(Error::Shape {
                op: "Conv",
                expected: format!("(B, {}, {} spatial dims)", c.in_channels, c.dims),
                got: size,
            });
        }
        let ones = vec![1i64; c.dims];
        let zeros = vec![0i64; c.dims];
        let padding = vec![c.padding; c.dims];
        let bias = to_compute_opt(self.bias.as_ref())?;
        Ok(to_compute(x)?.f_convolution(
            &to_compute(&self.weight)?,
            bias.as_ref(),
            &ones,
            &padding,
            &ones,
            false,
            &zeros,
            1,
        )?)
    }
}
