//! The Neural Spectral Block of the Latent Spectral Model (Wu et al. 2023, "Solving
//! High-Dimensional PDEs with Latent Spectral Models"), as the Neural-Solver-Library implements
//! it (`layers/Neural_Spectral_Block.py`, `NeuralSpectralBlock{1,2,3}D`, thuml/Neural-Solver-Library
//! `db942b7`). The grid is cut into patches; in each patch a few latent tokens attend to the
//! patch's cells, pass through a learned sum of sines and cosines of themselves, and the cells
//! attend back to them.
//!
//! ```text
//! patchify:   (B, C, n_1, …, n_D) → (B', C, p_1, …, p_D), B' = B·Π n_j/p_j, L = Π p_j cells
//! encoder:    k, v = encoder_attn(x) (1×…×1 conv C → 2C, channel (head·d + i)·2 + {0: k, 1: v})
//!             tok = softmax(latent · kᵀ) · v + latent          latent (H, T, d), no 1/√d
//! transition: tok = Σ_m w[c, m] · [sin(μ_m π tok), cos(μ_m π tok)] + tok,  μ_m = m / M, m < M
//! decoder:    q = decoder_attn(x) (1×…×1 conv C → C)
//!             x = softmax(q · tokᵀ) · tok + x                  tokens are keys and values
//! de-patchify back to (B, C, n_1, …, n_D)
//! ```
//!
//! d = C/H. Variables under the reference names: `weights` (C, 2M), `latent` (H, T, d),
//! `encoder_attn.{weight,bias}`, `decoder_attn.{weight,bias}`. The reference builds the
//! frequencies μ with `.cuda()`, so it cannot be constructed without a GPU; here they are made in
//! the input's kind and device at each forward (float32: float32(1/M)·m, as the reference's).
//!
//! The patch size is an argument of [`NeuralSpectralBlock::forward`], not of the block: the
//! reference fixes it at construction from the grid (`args.shapelist`), while here the grid comes
//! with each input.

use std::f64::consts::PI;

use tch::nn::{Init, Path};
use tch::Tensor;

use crate::conv::{Conv, ConvConfig};
use crate::precision::matmul;
use crate::{Error, Result};

/// Settings of [`NeuralSpectralBlock`]: NSL's `NeuralSpectralBlock{dims}D(width, num_basis,
/// patch_size, num_token, n_heads)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeuralSpectralBlockConfig {
    /// Spatial dimensions, 1 ..= 3.
    pub dims: usize,
    /// Channels C.
    pub width: i64,
    /// Frequencies M of the transition (NSL's LSM: 12): 2M basis functions.
    pub num_basis: i64,
    /// Latent tokens T per head (NSL's LSM: 4).
    pub num_tokens: i64,
    /// Heads H; must divide `width`.
    pub n_heads: i64,
}

impl NeuralSpectralBlockConfig {
    /// Registers the variables at `path` with the reference's initialisation: `weights` and
    /// `latent` uniform in [0, 1/C), the 1×…×1 convolutions PyTorch's default.
    pub fn init(&self, path: &Path) -> Result<NeuralSpectralBlock> {
        let c = self.width;
        if !(1..=3).contains(&self.dims)
            || c < 1
            || self.num_basis < 1
            || self.num_tokens < 1
            || self.n_heads < 1
            || c % self.n_heads != 0
        {
            return Err(Error::Config(format!(
                "neural spectral block {self:?}: positive sizes, 1 to 3 axes, and heads dividing \
                 the width"
            )));
        }
        let init = Init::Uniform {
            lo: 0.0,
            up: 1.0 / c as f64,
        };
        Ok(NeuralSpectralBlock {
            cfg: *self,
            weights: path.var("weights", &[c, 2 * self.num_basis], init),
            latent: path.var(
                "latent",
                &[self.n_heads, self.num_tokens, c / self.n_heads],
                init,
            ),
            encoder_attn: ConvConfig::pointwise(self.dims, c, 2 * c)
                .init(&(path / "encoder_attn"))?,
            decoder_attn: ConvConfig::pointwise(self.dims, c, c).init(&(path / "decoder_attn"))?,
        })
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct NeuralSpectralBlock {
    cfg: NeuralSpectralBlockConfig,
    /// (C, 2M): the transition's coefficients, sines first.
    pub weights: Tensor,
    /// (H, T, C/H): the latent tokens every patch starts from.
    pub latent: Tensor,
    pub encoder_attn: Conv,
    pub decoder_attn: Conv,
}

/// softmax(q · kᵀ) · v over the last axis of the scores, without the 1/√d scale (the reference's
/// `self_attn`).
///
/// # Shapes
/// - `q`: (…, Lq, d), `k`: (…, Lk, d), `v`: (…, Lk, dv)
/// - returns: (…, Lq, dv)
fn unscaled_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let scores = matmul(q, &k.f_transpose(-2, -1)?)?;
    matmul(&scores.f_softmax(-1, scores.kind())?, v)
}

impl NeuralSpectralBlock {
    pub fn config(&self) -> &NeuralSpectralBlockConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `x`: (B, C, n_1, …, n_D) with every n_j divisible by `patch[j]`
    /// - `patch`: the patch size (p_1, …, p_D)
    /// - returns: (B, C, n_1, …, n_D)
    pub fn forward(&self, x: &Tensor, patch: &[i64]) -> Result<Tensor> {
        let cfg = &self.cfg;
        let (c, d, h, t) = (cfg.width, cfg.dims, cfg.n_heads, cfg.num_tokens);
        let size = x.size();
        if size.len() != d + 2
            || size[1] != c
            || patch.len() != d
            || patch.iter().any(|&p| p < 1)
            || size[2..].iter().zip(patch).any(|(&n, &p)| n % p != 0)
        {
            return Err(Error::Shape {
                op: "NeuralSpectralBlock",
                expected: format!(
                    "(B, {c}, n_1, …, n_{d}) with every n_j divisible by the patch size {patch:?}"
                ),
                got: size,
            });
        }
        let b = size[0];
        let counts: Vec<i64> = size[2..].iter().zip(patch).map(|(&n, &p)| n / p).collect();
        let patches = b * counts.iter().product::<i64>();
        let cells: i64 = patch.iter().product();

        // Patchify: (B, C, n_1/p_1, p_1, …) → (B·Π n_j/p_j, C, p_1, …), the patch index running
        // over (b, i_1, …, i_D) row-major.
        let mut split = vec![b, c];
        for (&m, &p) in counts.iter().zip(patch) {
            split.extend([m, p]);
        }
        let mut order = vec![0i64];
        order.extend((0..d as i64).map(|j| 2 + 2 * j));
        order.push(1);
        order.extend((0..d as i64).map(|j| 3 + 2 * j));
        let mut patched = vec![patches, c];
        patched.extend_from_slice(patch);
        let xp = x
            .f_reshape(&split)?
            .f_permute(&order)?
            .f_reshape(&patched)?;

        // Encoder: the latent tokens attend to the patch's cells.
        let kv = self
            .encoder_attn
            .forward(&xp)?
            .f_reshape([patches, 2 * c, cells])?
            .f_permute([0, 2, 1])?
            .f_reshape([patches, cells, h, c / h, 2])?
            .f_permute([4, 0, 2, 1, 3])?; // (2, B', H, L, d)
        let latent = self.latent.f_unsqueeze(0)?;
        let tok = unscaled_attention(&latent, &kv.f_select(0, 0)?, &kv.f_select(0, 1)?)?
            .f_add(&latent)?
            .f_permute([0, 1, 3, 2])?
            .f_reshape([patches, c, t])?;

        // Transition: a learned series of sines and cosines of each token value.
        let modes = Tensor::f_arange(cfg.num_basis, (x.kind(), x.device()))?
            .f_mul_scalar(1.0 / cfg.num_basis as f64)?;
        let arg = tok.f_unsqueeze(-1)?.f_mul(&modes)?.f_mul_scalar(PI)?;
        let basis = Tensor::f_cat(&[arg.f_sin()?, arg.f_cos()?], -1)?; // (B', C, T, 2M)
        let tok = matmul(&basis, &self.weights.f_unsqueeze(-1)?)?
            .f_squeeze_dim(-1)?
            .f_add(&tok)?;

        // Decoder: the cells attend to the tokens (keys and values both), plus the cells.
        let q = self
            .decoder_attn
            .forward(&xp)?
            .f_reshape([patches, c, cells])?
            .f_permute([0, 2, 1])?
            .f_reshape([patches, cells, h, c / h])?
            .f_permute([0, 2, 1, 3])?; // (B', H, L, d)
        let tok = tok
            .f_reshape([patches, h, c / h, t])?
            .f_permute([0, 1, 3, 2])?;
        let out = unscaled_attention(&q, &tok, &tok)?
            .f_permute([0, 1, 3, 2])?
            .f_reshape(&patched)?
            .f_add(&xp)?;

        // De-patchify: (B, n_1/p_1, …, C, p_1, …) → (B, C, n_1/p_1, p_1, …) → (B, C, n_1, …).
        let mut grouped = vec![b];
        grouped.extend_from_slice(&counts);
        grouped.push(c);
        grouped.extend_from_slice(patch);
        let mut back = vec![0i64, d as i64 + 1];
        for j in 0..d as i64 {
            back.extend([1 + j, d as i64 + 2 + j]);
        }
        Ok(out
            .f_reshape(&grouped)?
            .f_permute(&back)?
            .f_reshape(&size)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    fn block(dims: usize, width: i64, heads: i64) -> (VarStore, NeuralSpectralBlock) {
        let mut vs = VarStore::new(Device::Cpu);
        vs.set_kind(Kind::Double);
        let b = NeuralSpectralBlockConfig {
            dims,
            width,
            num_basis: 3,
            num_tokens: 2,
            n_heads: heads,
        }
        .init(&vs.root())
        .unwrap();
        (vs, b)
    }

    fn softmax(v: &[f64]) -> Vec<f64> {
        let m = v.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = v.iter().map(|x| (x - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    }

    /// The whole block in scalar f64 arithmetic, cell by cell, from the module documentation,
    /// for a 2-D grid: patch p = (p0, p1), channel (head·d + i) of the key/value conv at
    /// 2·(head·d + i) + {0, 1}.
    fn oracle(blk: &NeuralSpectralBlock, x: &Tensor, p: [i64; 2]) -> Vec<f64> {
        let s = x.size();
        let (b, c, n0, n1) = (s[0], s[1], s[2], s[3]);
        let (h, t, m) = (blk.cfg.n_heads, blk.cfg.num_tokens, blk.cfg.num_basis);
        let dh = c / h;
        let val = |w: &Tensor, idx: &[i64]| w.double_value(idx);
        let conv = |conv: &Conv, o: i64, bb: i64, i: i64, j: i64| {
            let mut acc = conv.bias.as_ref().unwrap().double_value(&[o]);
            for ci in 0..c {
                acc += val(&conv.weight, &[o, ci, 0, 0]) * val(x, &[bb, ci, i, j]);
            }
            acc
        };
        let mut out = vec![0.0; (b * c * n0 * n1) as usize];
        for bb in 0..b {
            for pi in 0..n0 / p[0] {
                for pj in 0..n1 / p[1] {
                    let cells: Vec<(i64, i64)> = (0..p[0])
                        .flat_map(|a| (0..p[1]).map(move |e| (pi * p[0] + a, pj * p[1] + e)))
                        .collect();
                    // tokens[head][token][i]
                    let mut tok = vec![vec![vec![0.0; dh as usize]; t as usize]; h as usize];
                    for hh in 0..h {
                        let key = |l: usize, i: i64| {
                            let (r, q) = cells[l];
                            conv(&blk.encoder_attn, 2 * (hh * dh + i), bb, r, q)
                        };
                        let value = |l: usize, i: i64| {
                            let (r, q) = cells[l];
                            conv(&blk.encoder_attn, 2 * (hh * dh + i) + 1, bb, r, q)
                        };
                        for tt in 0..t {
                            let lat = |i: i64| val(&blk.latent, &[hh, tt, i]);
                            let scores: Vec<f64> = (0..cells.len())
                                .map(|l| (0..dh).map(|i| lat(i) * key(l, i)).sum())
                                .collect();
                            let a = softmax(&scores);
                            for i in 0..dh {
                                let mut v = lat(i);
                                for (l, al) in a.iter().enumerate() {
                                    v += al * value(l, i);
                                }
                                // Transition on channel hh·dh + i.
                                let ch = hh * dh + i;
                                let mut tr = v;
                                for mm in 0..m {
                                    let mu = mm as f64 / m as f64;
                                    tr += val(&blk.weights, &[ch, mm]) * (mu * v * PI).sin()
                                        + val(&blk.weights, &[ch, m + mm]) * (mu * v * PI).cos();
                                }
                                tok[hh as usize][tt as usize][i as usize] = tr;
                            }
                        }
                    }
                    for &(r, q) in &cells {
                        for hh in 0..h {
                            let qv: Vec<f64> = (0..dh)
                                .map(|i| conv(&blk.decoder_attn, hh * dh + i, bb, r, q))
                                .collect();
                            let scores: Vec<f64> = (0..t as usize)
                                .map(|tt| {
                                    (0..dh as usize)
                                        .map(|i| qv[i] * tok[hh as usize][tt][i])
                                        .sum()
                                })
                                .collect();
                            let a = softmax(&scores);
                            for i in 0..dh {
                                let ch = hh * dh + i;
                                let mut o = val(x, &[bb, ch, r, q]);
                                for (tt, at) in a.iter().enumerate() {
                                    o += at * tok[hh as usize][tt][i as usize];
                                }
                                out[(((bb * c + ch) * n0 + r) * n1 + q) as usize] = o;
                            }
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_a_scalar_oracle_in_2d() {
        tch::manual_seed(3);
        let (_vs, blk) = block(2, 4, 2);
        let x = Tensor::randn([2, 4, 4, 6], (Kind::Double, Device::Cpu));
        let got = Vec::<f64>::try_from(blk.forward(&x, &[2, 3]).unwrap().reshape([-1])).unwrap();
        let want = oracle(&blk, &x, [2, 3]);
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(err < 1e-12, "{err}");
    }

    /// Patches are independent: a 1-D or 3-D block on a grid of several patches equals the
    /// block on each patch alone, and the patch layout is the one of the 2-D oracle (a grid of
    /// one patch along the extra axes).
    #[test]
    fn patches_are_independent_in_1d_and_3d() {
        tch::manual_seed(4);
        let (_vs, blk) = block(1, 4, 2);
        let x = Tensor::randn([2, 4, 9], (Kind::Double, Device::Cpu));
        let whole = blk.forward(&x, &[3]).unwrap();
        for k in 0..3 {
            let part = blk.forward(&x.narrow(2, 3 * k, 3), &[3]).unwrap();
            let e = (whole.narrow(2, 3 * k, 3) - part)
                .abs()
                .max()
                .double_value(&[]);
            assert!(e < 1e-14, "{e}");
        }
        let (_vs, blk3) = block(3, 2, 1);
        let x = Tensor::randn([1, 2, 4, 2, 6], (Kind::Double, Device::Cpu));
        let whole = blk3.forward(&x, &[2, 2, 3]).unwrap();
        let part = blk3
            .forward(&x.narrow(2, 2, 2).narrow(4, 3, 3), &[2, 2, 3])
            .unwrap();
        let e = (whole.narrow(2, 2, 2).narrow(4, 3, 3) - part)
            .abs()
            .max()
            .double_value(&[]);
        assert!(e < 1e-14, "{e}");
    }

    #[test]
    fn refuses_bad_shapes_and_settings() {
        let (_vs, blk) = block(2, 4, 2);
        let x = Tensor::zeros([1, 4, 4, 6], (Kind::Double, Device::Cpu));
        assert!(blk.forward(&x, &[3, 3]).is_err());
        assert!(blk.forward(&x, &[2]).is_err());
        assert!(blk.forward(&x.narrow(1, 0, 3), &[2, 3]).is_err());
        let vs = VarStore::new(Device::Cpu);
        let bad = NeuralSpectralBlockConfig {
            dims: 2,
            width: 6,
            num_basis: 12,
            num_tokens: 4,
            n_heads: 4,
        };
        assert!(matches!(bad.init(&vs.root()), Err(Error::Config(_))));
    }

    #[test]
    fn has_the_reference_variables() {
        let (vs, _) = block(2, 4, 2);
        let mut names: Vec<(String, Vec<i64>)> = vs
            .variables()
            .into_iter()
            .map(|(k, v)| (k, v.size()))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ("decoder_attn.bias".to_string(), vec![4]),
                ("decoder_attn.weight".to_string(), vec![4, 4, 1, 1]),
                ("encoder_attn.bias".to_string(), vec![8]),
                ("encoder_attn.weight".to_string(), vec![8, 4, 1, 1]),
                ("latent".to_string(), vec![2, 2, 2]),
                ("weights".to_string(), vec![4, 6]),
            ]
        );
    }
}
