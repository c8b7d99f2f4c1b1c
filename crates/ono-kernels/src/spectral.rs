//! The spectral multiply of FNO layers (`SpectralConv{1,2,3}d` of the FNO reference).
//!
//! rfft over the last D spatial dims, multiply the retained low-frequency modes by complex weights,
//! zero the rest, irfft back. The weights are real tensors with a trailing 2 (re, im) viewed as
//! complex: tch's optimizers and safetensors both mishandle complex parameters
//! (docs/tch-notes.md#complex-parameters).

use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Number of weight tensors (corners) for `d` spatial dims: 2^(d−1). The last dim is halved by the
/// rfft; each other dim keeps its lowest and its highest (negative-frequency) `m` modes.
pub fn corner_count(d: usize) -> usize {
    1 << (d.saturating_sub(1))
}

/// FNO spectral convolution over the last `modes.len()` ∈ {1, 2, 3} dims.
///
/// Corner `c` of the weights covers, in spatial dim j < D−1, the low modes `[0, m_j)` when bit j of
/// `c` is clear and the high modes `[n_j − m_j, n_j)` when it is set; the last dim always covers
/// `[0, m_D)`. That is the reference order: 2-D `weights1 = [:m1, :m2]`, `weights2 = [-m1:, :m2]`;
/// 3-D `weights1..4 = [:,:], [-,:], [:,-], [-,-]` over the first two dims. Where corners overlap
/// (2m_j > n_j) the later one wins, as the reference's sequential slice assignment does.
/// `norm` is the FFT normalisation: "backward" (FNO) or "ortho" (Galerkin Transformer's decoder).
///
/// # Shapes
/// - `x`: (B, Ci, n_1, …, n_D)
/// - `weights`: 2^(D−1) tensors of (Ci, Co, m_1, …, m_D, 2)
/// - returns: (B, Co, n_1, …, n_D)
pub fn spectral_conv(x: &Tensor, weights: &[&Tensor], modes: &[i64], norm: &str) -> Result<Tensor> {
    const OP: &str = "spectral_conv";
    let d = modes.len();
    let size = x.size();
    if !(1..=3).contains(&d) || size.len() != d + 2 {
        return Err(Error::Shape {
            op: OP,
            expected: format!(
                "x of shape (B, Ci, n_1..n_D) with D = modes.len() ∈ 1..=3 (D = {d})"
            ),
            got: size,
        });
    }
    if !matches!(norm, "backward" | "ortho" | "forward") {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!("unknown FFT norm {norm:?} (backward, ortho or forward)"),
        });
    }
    if weights.len() != corner_count(d) {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "{d}-D needs {} weight tensors, got {}",
                corner_count(d),
                weights.len()
            ),
        });
    }
    let (b, ci) = (size[0], size[1]);
    let spatial = &size[2..];
    let last_kept = spatial[d - 1] / 2 + 1;
    for (j, (&m, &n)) in modes.iter().zip(spatial).enumerate() {
        let cap = if j + 1 == d { last_kept } else { n };
        if m <= 0 || m > cap {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("modes[{j}] = {m} must lie in 1..={cap} for a dim of size {n}"),
            });
        }
    }
    let co = match weights[0].size().get(1) {
        Some(&co) => co,
        None => 0,
    };
    for w in weights {
        let mut want = vec![ci, co];
        want.extend_from_slice(modes);
        want.push(2);
        if w.size() != want {
            return Err(Error::Shape {
                op: OP,
                expected: format!("weights of shape {want:?}"),
                got: w.size(),
            });
        }
    }

    let dims: Vec<i64> = (0..d as i64).map(|j| j - d as i64).collect();
    let xf = x.f_fft_rfftn(None::<&[i64]>, Some(&dims[..]), norm)?;
    let complex = xf.kind();
    let mut out_shape = vec![b, co];
    out_shape.extend_from_slice(&spatial[..d - 1]);
    out_shape.push(last_kept);
    let out_ft = Tensor::f_zeros(&out_shape[..], (complex, x.device()))?;

    let letters = &"xyz"[..d];
    let equation = format!("bi{letters},io{letters}->bo{letters}");
    for (c, w) in weights.iter().enumerate() {
        let w = w
            .f_to_kind(real_kind(complex))?
            .f_contiguous()?
            .f_view_as_complex()?;
        let mut src = xf.shallow_clone();
        let mut dst = out_ft.shallow_clone();
        for (j, &m) in modes.iter().enumerate() {
            let high = j + 1 < d && (c >> j) & 1 == 1;
            let start = if high { spatial[j] - m } else { 0 };
            src = src.f_narrow(2 + j as i64, start, m)?;
            dst = dst.f_narrow(2 + j as i64, start, m)?;
        }
        let prod = Tensor::f_einsum(&equation, &[src, w], None::<&[i64]>)?;
        dst.f_copy_(&prod)?;
    }
    Ok(out_ft.f_fft_irfftn(Some(spatial), Some(&dims[..]), norm)?)
}

fn real_kind(complex: Kind) -> Kind {
    match complex {
        Kind::ComplexDouble => Kind::Double,
        Kind::ComplexHalf => Kind::Half,
        _ => Kind::Float,
    }
}
