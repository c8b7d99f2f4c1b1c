//! The spectral multiply of FNO layers (`SpectralConv{1,2,3}d` of the FNO reference).
//!
//! rfft over the last D spatial dims, multiply the retained low-frequency modes by complex weights,
//! zero the rest, irfft back. The weights are real tensors with a trailing 2 (re, im) viewed as
//! complex: tch's optimizers and safetensors both mishandle complex parameters
//! (docs/tch-notes.md#complex-parameters).
//!
//! Two computations of the same map. [`spectral_conv_fft`] is the reference's literally: full
//! FFTs, a zero spectrum with the corners written in, the inverse FFT. [`spectral_conv`] uses it
//! on GPUs, on small grids and where corners overlap; otherwise it evaluates the transforms as
//! matrix products restricted to the kept modes (a pruned DFT: 2m_j of n_j frequencies per axis,
//! m_D of the halved last axis), which with FNO's few modes costs a fraction of the FFTs and of
//! their backward on the CPU (PyTorch differentiates `rfftn` with a full complex FFT), where the
//! padded sizes (85 + 9 = 94 = 2·47) are FFT-unfriendly. Both agree to rounding (tested in float64 to 1e-12).
//!
//! Both compute in float32 at least (16-bit input is widened, the output is float32): there is no
//! complex bfloat16 FFT, and the pruned DFT's sums of n phase-weighted terms would carry
//! bfloat16's 2⁻⁸ relative error on every kept mode.

use tch::{Device, Kind, Tensor};

use crate::precision::widen;
use crate::{points, Error, Result};

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
///
/// Computed as a pruned DFT ([`spectral_conv_pruned`]) on the CPU where the corners are disjoint
/// and the grid has more than [`FFT_UP_TO_POINTS`] points, else with the reference's FFTs
/// ([`spectral_conv_fft`]); the two agree to rounding. On CUDA the FFTs were as fast or faster at
/// 9 of the 10 measured shapes, 16² to 141² (one H100, `spectral_paths --device cuda`: pruned /
/// FFT 0.93–1.40, docs/benchmarks.md), so a GPU always takes them.
pub fn spectral_conv(x: &Tensor, weights: &[&Tensor], modes: &[i64], norm: &str) -> Result<Tensor> {
    check(x, weights, modes, norm)?;
    let spatial = &x.size()[2..];
    let points: i64 = spatial.iter().product();
    if x.device() == Device::Cpu && disjoint(modes, spatial) && points > FFT_UP_TO_POINTS {
        pruned_dft(&widen(x)?, weights, modes, norm)
    } else {
        spectral_conv_fft(x, weights, modes, norm)
    }
}

/// CPU grids up to this many points take the FFTs: there the pruned DFT's matrices are nearly full
/// DFTs (m/n ≥ 1/4 at the small grids FNOs are trained on) and its many small complex products
/// cost more than the transforms. Measured (`benches/src/bin/spectral_paths.rs`, 2 threads,
/// forward + backward, docs/benchmarks.md): pruned / FFT 1.27–1.37 at 16², 25² and 32² with 8
/// modes, 0.47 at 43², 0.86 at 52², 0.89 at 64², 0.21–0.24 at 94² with 12 modes.
pub const FFT_UP_TO_POINTS: i64 = 32 * 32;

/// No two corners overlap: 2 m_j ≤ n_j along every non-halved axis.
fn disjoint(modes: &[i64], spatial: &[i64]) -> bool {
    let d = modes.len();
    (0..d - 1).all(|j| 2 * modes[j] <= spatial[j])
}

/// [`spectral_conv`] by matrix products over the kept modes only, at any grid size; an error where
/// corners overlap (2 m_j > n_j along a non-halved axis).
pub fn spectral_conv_pruned(
    x: &Tensor,
    weights: &[&Tensor],
    modes: &[i64],
    norm: &str,
) -> Result<Tensor> {
    check(x, weights, modes, norm)?;
    let spatial = &x.size()[2..];
    if !disjoint(modes, spatial) {
        return Err(Error::InvalidArgument {
            op: "spectral_conv_pruned",
            msg: format!("the corners of modes {modes:?} overlap on a grid of {spatial:?}"),
        });
    }
    pruned_dft(&widen(x)?, weights, modes, norm)
}

/// The arguments' checks, shared by both computations.
fn check(x: &Tensor, weights: &[&Tensor], modes: &[i64], norm: &str) -> Result<()> {
    const OP: &str = "spectral_conv";
    points::refuse(
        "the spectral convolution (FNO's Fourier layer)",
        "a Fourier transform over the whole grid",
    )?;
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
    let ci = size[1];
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
    Ok(())
}

/// [`spectral_conv`] computed as the reference does, with full FFTs (any modes, overlapping
/// corners included).
pub fn spectral_conv_fft(
    x: &Tensor,
    weights: &[&Tensor],
    modes: &[i64],
    norm: &str,
) -> Result<Tensor> {
    check(x, weights, modes, norm)?;
    let x = &widen(x)?;
    let d = modes.len();
    let size = x.size();
    let (b, spatial) = (size[0], &size[2..]);
    let last_kept = spatial[d - 1] / 2 + 1;
    let co = weights[0].size()[1];
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

/// Scale of the forward and of the inverse transform of `n` points in normalisation `norm`.
fn scales(norm: &str, n: f64) -> (f64, f64) {
    match norm {
        "ortho" => (1.0 / n.sqrt(), 1.0 / n.sqrt()),
        "forward" => (1.0 / n, 1.0),
        _ => (1.0, 1.0 / n),
    }
}

/// The phases 2π·(k·t mod n)/n of the frequencies `k` (Int64, on the device) at t = 0 … n−1, in
/// float64 (integer reduction first, so large k·t lose nothing). Built on the device from
/// `arange`s: no host data enters the forward.
fn phases(k: &Tensor, n: i64) -> Result<Tensor> {
    let t = Tensor::f_arange(n, (Kind::Int64, k.device()))?;
    Ok(k.f_unsqueeze(1)?
        .f_mul(&t.f_unsqueeze(0)?)?
        .f_remainder(n)?
        .f_to_kind(Kind::Double)?
        .f_mul_scalar(2.0 * std::f64::consts::PI / n as f64)?)
}

/// The kept frequencies of a non-halved axis: 0 … m−1, then n−m … n−1 (the reference's corner
/// order: low block, high block).
fn kept(m: i64, n: i64, device: tch::Device) -> Result<Tensor> {
    let opts = (Kind::Int64, device);
    Ok(Tensor::f_cat(
        &[
            Tensor::f_arange(m, opts)?,
            Tensor::f_arange_start(n - m, n, opts)?,
        ],
        0,
    )?)
}

/// [`spectral_conv`] by matrix products over the kept modes only (corners must not overlap).
fn pruned_dft(x: &Tensor, weights: &[&Tensor], modes: &[i64], norm: &str) -> Result<Tensor> {
    let d = modes.len();
    let size = x.size();
    let spatial = size[2..].to_vec();
    let (kind, dev) = (x.kind(), x.device());
    let complex = match kind {
        Kind::Double => Kind::ComplexDouble,
        _ => Kind::ComplexFloat,
    };
    let n_total: f64 = spatial.iter().product::<i64>() as f64;
    let (fwd_scale, inv_scale) = scales(norm, n_total);

    // Last axis, real input: X[k] = Σ_t x[t] e^{−2πikt/n} for k < m_D, as one real product
    // with the columns (cos, −sin) interleaved per k, whose result *is* the complex tensor
    // (`view_as_complex` of its trailing (m, 2)), with no copy.
    let (n_last, m_last) = (spatial[d - 1], modes[d - 1]);
    let ks = Tensor::f_arange(m_last, (Kind::Int64, dev))?;
    let ph = phases(&ks, n_last)?; // (m, n), also the synthesis' below
    let analysis = Tensor::f_stack(&[ph.f_cos()?, ph.f_sin()?.f_neg()?], 1)? // (m, 2, n)
        .f_reshape([2 * m_last, n_last])?
        .f_tr()?
        .f_to_kind(kind)?; // (n, 2m)
    let mut out_shape = size.clone();
    out_shape[d + 1] = m_last;
    out_shape.push(2);
    let mut h = x
        .f_matmul(&analysis)?
        .f_reshape(&out_shape[..])?
        .f_view_as_complex()?; // (B, Ci, n_1, …, n_{D−1}, m_D)

    // Every other axis: a complex DFT restricted to its 2m kept frequencies.
    let mut inverse_mats = Vec::with_capacity(d - 1);
    for j in 0..d - 1 {
        let ph = phases(&kept(modes[j], spatial[j], dev)?, spatial[j])?; // (2m, n)
        let fwd = Tensor::f_polar(&ph.f_ones_like()?, &ph.f_neg()?)?.f_to_kind(complex)?;
        let inv = Tensor::f_polar(&ph.f_ones_like()?, &ph)?
            .f_to_kind(complex)?
            .f_tr()?; // (n, 2m)
        let axis = 2 + j as i64;
        h = h
            .f_movedim(axis, -1)?
            .f_matmul(&fwd.f_tr()?)?
            .f_movedim(-1, axis)?;
        inverse_mats.push(inv);
    }
    if fwd_scale != 1.0 {
        h = h.f_mul_scalar(fwd_scale)?;
    }

    // All corners at once: the weights concatenated low | high along each non-halved axis, in
    // the reference's corner order (bit j of the corner index: high along axis j).
    let w: Vec<Tensor> = weights
        .iter()
        .map(|w| w.f_to_kind(kind)?.f_contiguous()?.f_view_as_complex())
        .collect::<std::result::Result<_, _>>()?;
    let mut blocks = w;
    for j in 0..d - 1 {
        let half = blocks.len() / 2;
        let merged: Vec<Tensor> = (0..half)
            .map(|i| Tensor::f_cat(&[&blocks[2 * i], &blocks[2 * i + 1]], 2 + j as i64))
            .collect::<std::result::Result<_, _>>()?;
        blocks = merged;
    }
    let weight = &blocks[0];
    let letters = &"xyz"[..d];
    let equation = format!("bi{letters},io{letters}->bo{letters}");
    let mut y = Tensor::f_einsum(&equation, &[&h, weight], None::<&[i64]>)?;

    // Inverse over the non-halved axes, complex.
    for (j, inv) in inverse_mats.iter().enumerate() {
        let axis = 2 + j as i64;
        y = y
            .f_movedim(axis, -1)?
            .f_matmul(&inv.f_tr()?)?
            .f_movedim(-1, axis)?;
    }
    // The halved axis, complex to real as irfft reads a half spectrum: bins 0 and n/2 once, the
    // others twice (their conjugate partners), imaginary parts of bins 0 and n/2 ignored; one real
    // product of the (re, im) pairs with the rows (cos, −sin) interleaved per k.
    let ends = ks
        .f_eq(0)?
        .f_logical_or(&ks.f_mul_scalar(2)?.f_eq(n_last)?)?
        .f_unsqueeze(1)?; // (m, 1): bins 0 and n/2
    let wk = Tensor::f_full([m_last, 1], 2.0, (Kind::Double, dev))?
        .f_masked_fill(&ends, 1.0)?
        .f_mul_scalar(inv_scale)?;
    // sin(π t) is not exactly 0 in floating point; irfft ignores those imaginary parts exactly.
    let sin = ph.f_sin()?.f_masked_fill(&ends, 0.0)?;
    let synthesis = Tensor::f_stack(&[ph.f_cos()?.f_mul(&wk)?, sin.f_mul(&wk)?.f_neg()?], 1)?
        .f_reshape([2 * m_last, n_last])?
        .f_to_kind(kind)?; // (2m, n)
    let mut pairs = y.f_view_as_real()?.f_flatten(-2, -1)?; // (…, 2m)
    if !pairs.is_contiguous() {
        pairs = pairs.f_contiguous()?;
    }
    Ok(pairs.f_matmul(&synthesis)?)
}

fn real_kind(complex: Kind) -> Kind {
    match complex {
        Kind::ComplexDouble => Kind::Double,
        Kind::ComplexHalf => Kind::Half,
        _ => Kind::Float,
    }
}
