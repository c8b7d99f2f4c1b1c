//! Nyström attention exactly as lucidrains nystrom-attention 0.0.11 (`nystrom_attention.py`
//! L67–150), which ONO uses on Darcy, Elasticity, Pipe and Airfoil.
//!
//! The sequence is zero-padded **at the front** to a multiple of the landmark count m; landmarks are
//! means over l = ⌈n/m⌉ consecutive tokens; three softmaxes; the middle one is inverted by six
//! Newton–Schulz (Moore–Penrose) iterations started from Aᵀ / (max row-sum · max column-sum), the
//! maxima taken over the **whole batch** of matrices. The depthwise residual convolution on v is a
//! parameterised part of the nn layer, which pads v with [`nystrom_front_pad`] the same way.

use tch::{Kind, Tensor};

use super::linear::lowest_value;
use super::{check_qkv, key_weight};
use crate::precision::widen;
use crate::{points, Error, Result};

/// Settings of [`nystrom`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NystromConfig {
    /// Number of landmarks m (reference: 256).
    pub landmarks: i64,
    /// Newton–Schulz iterations of the pseudo-inverse (reference: 6).
    pub pinv_iterations: usize,
    /// Added to the landmark divisor in the masked path (reference: 1e-8).
    pub eps: f64,
    /// Mask the front zero padding. The reference leaves it unmasked when no mask is given (the
    /// padded tokens then take part in the landmark means and in the key softmaxes); that produced
    /// the published numbers, so it is the default.
    pub mask_padding: bool,
}

impl Default for NystromConfig {
    fn default() -> Self {
        Self {
            landmarks: 256,
            pinv_iterations: 6,
            eps: 1e-8,
            mask_padding: false,
        }
    }
}

/// Number of zero rows put in front of a length-`n` sequence: `(m − n mod m) mod m`.
pub fn front_padding(n: i64, landmarks: i64) -> i64 {
    (landmarks - n % landmarks) % landmarks
}

/// Pads (…, N, d) with zero rows at the front up to a multiple of `landmarks`.
///
/// # Shapes
/// - `t`: (..., N, d)
/// - returns: (..., N + front_padding(N, m), d)
pub fn nystrom_front_pad(t: &Tensor, landmarks: i64) -> Result<Tensor> {
    let size = t.size();
    if size.len() < 2 || landmarks <= 0 {
        return Err(Error::InvalidArgument {
            op: "nystrom_front_pad",
            msg: format!("needs (..., N, d) and m > 0; got {size:?}, m = {landmarks}"),
        });
    }
    let n = size[size.len() - 2];
    let pad = front_padding(n, landmarks);
    if pad == 0 {
        return Ok(t.shallow_clone());
    }
    Ok(t.f_constant_pad_nd([0, 0, pad, 0])?)
}

/// Nyström attention of the reference, without its projections and residual convolution.
///
/// q is scaled by d^-1/2 inside. `mask` (B, N) marks real points (1) and switches on the reference's
/// masked path (masked q/k/v rows, landmark means over real tokens only, −max logits); the front
/// padding is then masked as well. Without a mask, `cfg.mask_padding` chooses whether the padding is
/// masked (off by default, as the reference).
///
/// # Shapes
/// - `q`, `k`, `v`: (B, H, N, d) (self-attention: one sequence length)
/// - `mask`: (B, N), optional
/// - returns: (B, H, N, d)
pub fn nystrom(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cfg: &NystromConfig,
    mask: Option<&Tensor>,
) -> Result<Tensor> {
    nystrom_with_pinv(q, k, v, cfg, mask, &mut |a| {
        moore_penrose_pinv(a, cfg.pinv_iterations)
    })
}

/// [`nystrom`] with the pseudo-inverse of the landmark attention (B, H, m, m) computed by
/// `pinv`: selective recomputation keeps the Newton–Schulz iterations' graph from the forward
/// pass and hands the stored result back when the rest is recomputed.
///
/// # Shapes
/// - as [`nystrom`]; `pinv` maps (B, H, m, m) to (B, H, m, m)
pub fn nystrom_with_pinv(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    cfg: &NystromConfig,
    mask: Option<&Tensor>,
    pinv: &mut dyn FnMut(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    const OP: &str = "nystrom";
    points::refuse(
        "Nyström attention",
        "its landmarks are means over segments of the whole sequence",
    )?;
    let s = check_qkv(OP, q, k, v)?;
    if s.nq != s.nk {
        return Err(Error::Shape {
            op: OP,
            expected: format!(
                "keys of the query length {} (Nyström is self-attention)",
                s.nq
            ),
            got: k.size(),
        });
    }
    if cfg.landmarks <= 0 {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!("landmarks must be positive, got {}", cfg.landmarks),
        });
    }
    let (n, m) = (s.nq, cfg.landmarks);
    let l = (n + m - 1) / m; // tokens per landmark, ceil(n / m)
    let pad = front_padding(n, m);
    let padded = n + pad;

    // The mask of real tokens over the padded sequence, if the masked path is taken: (B, 1, N').
    let mask = match (mask, cfg.mask_padding) {
        (Some(mask), _) => Some(key_weight(OP, mask, s, q)?.f_view([s.b, 1, n])?),
        (None, true) => Some(Tensor::f_ones([s.b, 1, n], (q.kind(), q.device()))?),
        (None, false) => None,
    };
    let mask = match mask {
        Some(mk) if pad > 0 => Some(mk.f_constant_pad_nd([pad, 0])?),
        other => other,
    };

    let (mut q, mut k, mut v) = (
        nystrom_front_pad(q, m)?,
        nystrom_front_pad(k, m)?,
        nystrom_front_pad(v, m)?,
    );
    if let Some(mk) = &mask {
        let w = mk.f_unsqueeze(-1)?;
        q = q.f_mul(&w)?;
        k = k.f_mul(&w)?;
        v = v.f_mul(&w)?;
    }
    let q = q.f_mul_scalar((s.d as f64).powf(-0.5))?;

    // Landmarks: sums over groups of l consecutive tokens, divided by l (or by the real-token count).
    let group = |t: &Tensor| -> Result<Tensor> {
        Ok(t.f_view([s.b, s.h, padded / l, l, s.d])?
            .f_sum_dim_intlist(&[3i64][..], false, t.kind())?)
    };
    let (mut q_lm, mut k_lm) = (group(&q)?, group(&k)?);
    let mut landmark_mask = None;
    match &mask {
        None => {
            q_lm = q_lm.f_div_scalar(l as f64)?;
            k_lm = k_lm.f_div_scalar(l as f64)?;
        }
        Some(mk) => {
            let counts = mk.f_view([s.b, 1, padded / l, l])?.f_sum_dim_intlist(
                &[3i64][..],
                false,
                mk.kind(),
            )?; // (B, 1, m)
            let divisor = counts.f_unsqueeze(-1)?.f_add_scalar(cfg.eps)?;
            q_lm = q_lm.f_div(&divisor)?;
            k_lm = k_lm.f_div(&divisor)?;
            landmark_mask = Some(counts.f_gt(0.0)?);
        }
    }

    let mut sim1 = q.f_matmul(&k_lm.f_transpose(-2, -1)?)?;
    let mut sim2 = q_lm.f_matmul(&k_lm.f_transpose(-2, -1)?)?;
    let mut sim3 = q_lm.f_matmul(&k.f_transpose(-2, -1)?)?;
    if let (Some(mk), Some(lm)) = (&mask, &landmark_mask) {
        let fill = lowest_value(q.kind());
        let tok = mk.f_to_kind(Kind::Bool)?; // (B, 1, N')
        let keep = |rows: &Tensor, cols: &Tensor| -> Result<Tensor> {
            Ok(rows
                .f_unsqueeze(-1)?
                .f_logical_and(&cols.f_unsqueeze(-2)?)?
                .f_logical_not()?)
        };
        sim1 = sim1.f_masked_fill(&keep(&tok, lm)?, fill)?;
        sim2 = sim2.f_masked_fill(&keep(lm, lm)?, fill)?;
        sim3 = sim3.f_masked_fill(&keep(lm, &tok)?, fill)?;
    }
    let attn1 = sim1.f_softmax(-1, q.kind())?;
    let attn2 = sim2.f_softmax(-1, q.kind())?;
    let attn3 = sim3.f_softmax(-1, q.kind())?;
    // The pseudo-inverse runs in float32 under mixed precision (see `moore_penrose_pinv`).
    let attn2_inv = pinv(&attn2)?.f_to_kind(attn2.kind())?;
    // attn1 (attn2⁺ (attn3 v)) instead of the reference's (attn1 attn2⁺)(attn3 v): the same
    // product, but N·m·d instead of N·m² multiply-adds (at N = 7225, m = 256, d = 16: 16× fewer).
    let out = attn1.f_matmul(&attn2_inv.f_matmul(&attn3.f_matmul(&v)?)?)?;
    Ok(out.f_narrow(2, pad, n)?)
}

/// Iterative Moore–Penrose pseudo-inverse of the reference (`moore_penrose_iter_pinv`):
/// z₀ = xᵀ / (max_i Σ_j |x_ij| · max_j Σ_i |x_ij|) with both maxima over the whole tensor, then
/// z ← ¼ z (13I − xz (15I − xz (7I − xz))).
///
/// In float32 for 16-bit `x` (returned in float32): like `torch.pinverse`, which autocast keeps in
/// float32, the iteration needs more than bfloat16's 8 significant bits to approach the inverse.
///
/// # Shapes
/// - `x`: (..., m, m)
/// - returns: (..., m, m)
pub fn moore_penrose_pinv(x: &Tensor, iterations: usize) -> Result<Tensor> {
    let shape = x.size();
    if shape.len() < 2 || shape[shape.len() - 1] != shape[shape.len() - 2] {
        return Err(Error::Shape {
            op: "moore_penrose_pinv",
            expected: "square matrices (..., m, m)".into(),
            got: shape,
        });
    }
    let x = &widen(x)?;
    let abs = x.f_abs()?;
    let row_sums = abs.f_sum_dim_intlist(&[-1i64][..], false, x.kind())?;
    let col_sums = abs.f_sum_dim_intlist(&[-2i64][..], false, x.kind())?;
    let scale = row_sums.f_max()?.f_mul(&col_sums.f_max()?)?;
    let m = shape[shape.len() - 1];
    let x = x.f_reshape([-1, m, m])?;
    let mut z = x.f_transpose(-2, -1)?.f_div(&scale)?;
    // The polynomial's identity terms are folded into the products (baddbmm: β·input + α·A B):
    //   xz (7I − xz)          = 7·xz − xz·xz
    //   xz (15I − t₁)         = 15·xz − xz·t₁
    //   ¼ z (13I − t₂)        = 3.25·z − ¼·z·t₂
    // the same mathematics with no element-wise pass between the products (and fewer tensors
    // kept for the backward pass); the rounding differs from the reference's at fp32 level.
    for _ in 0..iterations {
        let xz = x.f_bmm(&z)?;
        let t1 = xz.f_baddbmm(&xz, &xz, 7.0, -1.0)?;
        let t2 = xz.f_baddbmm(&xz, &t1, 15.0, -1.0)?;
        z = z.f_baddbmm(&z, &t2, 3.25, -0.25)?;
    }
    Ok(z.f_reshape(shape)?)
}
