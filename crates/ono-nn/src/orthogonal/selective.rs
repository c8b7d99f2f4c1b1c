//! Selective recomputation of an orthogonal block: keep the matrix products' outputs, recompute
//! the cheap element-wise operations (LayerNorm, GELU, softmax, the scaled eigenfunctions) in
//! the backward pass.
//!
//! tch has no custom autograd functions, so the backward pass is written by hand: the products
//! (`y = a Wᵀ + b`: ∂a = ∂y W, ∂W = ∂yᵀ a), GELU (`gelu_backward`), the softmaxes of the linear
//! transformer (`_softmax_backward_data`) and ONO's kernel product. Where libtorch has no
//! backward kernel exposed (LayerNorm) or the graph is small (the whitening of ψ: a k×k
//! Cholesky), autograd runs on a local graph and receives the incoming gradient through the
//! surrogate ⟨output, ∂output⟩ (its gradient with respect to the output is ∂output). Parameter
//! gradients are added to `.grad` in the same way, so the optimizer sees what a plain
//! `backward` would have left there.
//!
//! What a block keeps (U = one (B, N, h) tensor): its two inputs (shared with the previous
//! block's outputs), q, k, v (3U), the attention residual x₁, the FFN's and the head's hidden
//! pre-activations (ratio·U each), ψ and ψ̃ (k/h·U each) and ψ̃ᵀfx (k×h per sample) — about
//! 4U + 2·ratio·U of its own against about 16U in autograd's graph. An attention other than the
//! linear transformer is recomputed in the backward pass from the block input, except Nyström's
//! pseudo-inverse, whose small Newton–Schulz graph is kept.

use tch::Tensor;

use super::{Head, KernelWeights, OrthogonalBlock};
use crate::attention::MultiHeadAttention;
use crate::linear::Linear;
use crate::mlp::gelu;
use crate::precision::{matmul, to_compute};
use crate::{Error, Result};
use ono_kernels::attention::moore_penrose_pinv;

/// What [`OrthogonalBlock::backward_saved`] needs of one block's forward pass.
pub struct SavedBlock {
    x: Tensor,
    attention: SavedAttention,
    x1: Tensor,
    /// The FFN's hidden layer before GELU.
    h: Tensor,
    /// The block's eigenfunction-stream output (the input of `proj`).
    x2: Tensor,
    /// ψ as a leaf and ψ̃ with the normalization's graph back to it.
    psi: Tensor,
    psi_tilde: Tensor,
    fx: Tensor,
    /// ψ̃ᵀ fx, (B, k, h); with ψ̃ and fx it gives fx₁ again for one small product.
    coeff: Tensor,
    /// The points' weights in ψ̃ᵀ fx (padding, mean scale).
    weights: KernelWeights,
    /// The padding mask, (B, N).
    mask: Option<Tensor>,
    /// The head MLP's hidden layer before GELU (None for the last block's linear head).
    h2: Option<Tensor>,
}

enum SavedAttention {
    /// The linear transformer: q, k, v as one (B, N, 3·H·d) tensor and ctx = k̂ᵀv per head.
    Linear { qkv: Tensor, ctx: Tensor },
    /// Any other attention: recomputed from x in the backward pass, except Nyström's
    /// pseudo-inverses (one per sequence that takes landmarks: the batch, or each sample of a
    /// padded one), whose Newton–Schulz graphs (from a leaf copy of the landmark attention to
    /// its result) are kept: (B, H, m, m) matrices, small beside the (B, H, N, m) attentions that
    /// are recomputed.
    Recompute { pinv: Vec<(Tensor, Tensor)> },
    /// The "no NN block" ablation: x₁ = x.
    None,
}

/// (parameter, gradient) pairs added to `.grad` at the end of a block's backward pass.
#[derive(Default)]
struct Grads(Vec<(Tensor, Tensor)>);

impl Grads {
    /// Gradients of a 16-bit product reach the float32 parameter in its kind, as through
    /// autograd's cast.
    fn push(&mut self, param: &Tensor, grad: Tensor) -> Result<()> {
        let grad = grad.f_to_kind(param.kind())?;
        self.0.push((param.shallow_clone(), grad));
        Ok(())
    }

    /// ∂W and ∂b of `y = a Wᵀ + b` from ∂y; returns ∂a.
    fn linear(&mut self, lin: &Linear, a: &Tensor, gy: &Tensor) -> Result<Tensor> {
        let (din, dout) = (lin.in_dim(), lin.out_dim());
        // The products in the compute kind, as `Linear::forward` ran them.
        let a2 = to_compute(&a.f_reshape([-1, din])?)?;
        let g2 = to_compute(&gy.f_reshape([-1, dout])?)?;
        self.push(&lin.weight, g2.f_tr()?.f_mm(&a2)?)?;
        if let Some(b) = &lin.bias {
            self.push(b, g2.f_sum_dim_intlist(0, false, b.kind())?)?;
        }
        matmul(gy, &lin.weight)
    }

    /// Adds every gradient to its parameter's `.grad` with one backward call.
    fn flush(self) -> Result<()> {
        let mut total: Option<Tensor> = None;
        for (p, g) in &self.0 {
            let term = tch::with_grad(|| p.f_reshape([-1])?.f_dot(&g.f_reshape([-1])?))?;
            total = Some(match total {
                None => term,
                Some(t) => tch::with_grad(|| t.f_add(&term))?,
            });
        }
        if let Some(t) = total {
            t.f_backward()?;
        }
        Ok(())
    }
}

/// ∂input of `out = f(leaf)` for a local autograd graph, given ∂out; parameters on the graph
/// get their gradients added to `.grad`.
fn pull_back(out: &Tensor, grad_out: &Tensor, leaf: &Tensor) -> Result<Tensor> {
    tch::with_grad(|| -> Result<()> {
        out.f_reshape([-1])?
            .f_dot(&grad_out.f_to_kind(out.kind())?.f_reshape([-1])?)?
            .f_backward()?;
        Ok(())
    })?;
    let g = leaf.grad();
    if !g.defined() {
        return Err(Error::Config(
            "selective recomputation: a local graph did not reach its input".into(),
        ));
    }
    Ok(g)
}

fn two_layers_needed() -> Error {
    Error::Config("selective recomputation needs two-layer MLPs in the orthogonal block".into())
}

/// A saved state handed to a block of another structure.
fn mismatch() -> Error {
    Error::Config("selective recomputation: the saved state is not this block's".into())
}

fn leaf(t: &Tensor) -> Result<Tensor> {
    Ok(t.f_detach()?.f_set_requires_grad(true)?)
}

/// The linear transformer's q̂ = softmax(q)·d^-½ (over features) and k̂ = softmax(k) (over the
/// real points of `mask`) and v (zero at padded points), from (B, N, 3·H·d), in (B, N, H, d)
/// layout.
fn lt_softmaxes(
    qkv: &Tensor,
    heads: i64,
    mask: Option<&Tensor>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let [b, n, c3] = dims(qkv)?;
    let inner = c3 / 3;
    let d = inner / heads;
    let part = |i: i64| -> Result<Tensor> {
        Ok(qkv
            .f_narrow(-1, i * inner, inner)?
            .f_view([b, n, heads, d])?)
    };
    let q = part(0)?.f_softmax(-1, qkv.kind())?;
    let (k, v) = match mask {
        None => (part(1)?, part(2)?),
        Some(m) => {
            // As the kernel's key mask: −max logits and zero values at padded points.
            let drop = m
                .f_to_kind(tch::Kind::Bool)?
                .f_logical_not()?
                .f_view([b, n, 1, 1])?;
            let lowest = ono_kernels::attention::lowest_value(qkv.kind());
            (
                part(1)?.f_masked_fill(&drop, lowest)?,
                part(2)?.f_masked_fill(&drop, 0.0)?,
            )
        }
    };
    Ok((q, k.f_softmax(1, qkv.kind())?, v))
}

fn dims(t: &Tensor) -> Result<[i64; 3]> {
    match t.size()[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => Err(Error::Shape {
            op: "OrthogonalBlock::forward_saving",
            expected: "(B, N, C)".into(),
            got: t.size(),
        }),
    }
}

/// fx₁ = (ψ̃ ⊙ softplus μ) coeff + fx, by the same operations as the plain kernel (so the
/// recomputation is bit-identical to the forward pass).
fn kernel_output(psi_tilde: &Tensor, mu: &Tensor, coeff: &Tensor, fx: &Tensor) -> Result<Tensor> {
    Ok(matmul(&psi_tilde.f_mul(&mu.f_softplus()?)?, coeff)?.f_add(fx)?)
}

/// (B, N, H, d) → (B, H, N, d) view.
fn heads_first(t: &Tensor) -> Result<Tensor> {
    Ok(t.f_permute([0, 2, 1, 3])?)
}

/// The linear transformer's output (B, N, H·e) from q̂ (B, N, H, d) and ctx (B, H, d, e).
fn lt_output(q_hat: &Tensor, ctx: &Tensor, scale: f64) -> Result<Tensor> {
    let [b, n, h, _] = q_hat.size()[..] else {
        return Err(Error::Shape {
            op: "selective recomputation",
            expected: "q̂ of shape (B, N, H, d)".into(),
            got: q_hat.size(),
        });
    };
    let e = ctx.size()[3];
    let out = heads_first(q_hat)?.f_mul_scalar(scale)?.f_matmul(ctx)?; // (B, H, N, e)
    Ok(out
        .f_permute([0, 2, 1, 3])?
        .f_contiguous()?
        .f_view([b, n, h * e])?)
}

impl OrthogonalBlock {
    /// Whether [`Self::forward_saving`] can run this block (everything but an FFN or head MLP
    /// with hidden layers, which ONO never builds).
    pub fn supports_selective(&self) -> bool {
        let (_, _, mlp) = self.nn_block.parts();
        let head_ok = match &self.mlp2 {
            Head::Mlp(m) => m.two_layers().is_some(),
            Head::Linear(_) => true,
        };
        mlp.two_layers().is_some() && head_ok
    }

    /// The training-mode forward pass of [`Self::forward`] (same values; statistics updated
    /// once), run without autograd's graph except for the small pieces, keeping what
    /// [`Self::backward_saved`] needs.
    ///
    /// # Shapes
    /// - `x`: (B, N, h), `fx`: (B, N, h), `mask`: (B, N)
    /// - returns: `x` (B, N, h), `fx` (B, N, h or out), and the saved state
    pub fn forward_saving(
        &self,
        x: &Tensor,
        fx: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor, SavedBlock)> {
        if !self.supports_selective() {
            return Err(two_layers_needed());
        }
        let (attn, ln_2, mlp) = self.nn_block.parts();
        let (x, fx) = (x.f_detach()?, fx.f_detach()?);
        let _guard = tch::no_grad_guard();

        let (x1, attention) = match attn {
            Some((ln_1, MultiHeadAttention::LinearTransformer(lt))) => {
                let ([to_q, to_k, to_v, to_out], heads) = lt.parts();
                let w = Tensor::f_cat(&[&to_q.weight, &to_k.weight, &to_v.weight], 0)?;
                let qkv = matmul(&ln_1.forward(&x)?, &w.f_tr()?)?;
                let (q_hat, k_hat, v) = lt_softmaxes(&qkv, heads, mask)?;
                let d = q_hat.size()[3];
                // ctx = k̂ᵀ v per head: (B, H, d, N) @ (B, H, N, e).
                let ctx = heads_first(&k_hat)?
                    .f_transpose(-2, -1)?
                    .f_matmul(&heads_first(&v)?)?;
                let o = lt_output(&q_hat, &ctx, (d as f64).powf(-0.5))?;
                let x1 = to_out.forward(&o)?.f_add(&x)?;
                (x1, SavedAttention::Linear { qkv, ctx })
            }
            Some((ln_1, other)) => {
                let a1 = ln_1.forward(&x)?;
                let mut kept = Vec::new();
                let out = match other {
                    MultiHeadAttention::Nystrom(ny) => {
                        let iterations = ny.pinv_iterations();
                        ny.forward_with_pinv(&a1, mask, &mut |attn2| {
                            let a2 = attn2.f_detach()?.f_set_requires_grad(true)?;
                            let z = tch::with_grad(|| moore_penrose_pinv(&a2, iterations))?;
                            let value = z.f_detach()?;
                            kept.push((a2, z));
                            Ok(value)
                        })?
                    }
                    other => other.forward(&a1, mask)?,
                };
                (out.f_add(&x)?, SavedAttention::Recompute { pinv: kept })
            }
            None => (x.shallow_clone(), SavedAttention::None),
        };
        let (w1, w2) = mlp.two_layers().ok_or_else(two_layers_needed)?;
        let h = w1.forward(&ln_2.forward(&x1)?)?;
        let x2 = w2.forward(&gelu(&h)?)?.f_add(&x1)?;

        let psi = leaf(&self.proj.forward(&x2)?)?;
        let psi_tilde = tch::with_grad(|| self.normalize(&psi, mask, true))?;

        let weights = self.kernel_weights(&psi_tilde, mask)?;
        let coeff = weights.coefficients(&psi_tilde, &fx)?;
        let fx1 = kernel_output(&psi_tilde, &self.mu, &coeff, &fx)?;
        let a3 = self.ln_3.forward(&fx1)?;
        let (fx2, h2) = match &self.mlp2 {
            Head::Mlp(m) => {
                let (w3, w4) = m.two_layers().ok_or_else(two_layers_needed)?;
                let h2 = w3.forward(&a3)?;
                (w4.forward(&gelu(&h2)?)?, Some(h2))
            }
            Head::Linear(l) => (l.forward(&a3)?, None),
        };
        let saved = SavedBlock {
            x,
            attention,
            // With another attention, x₁ carries the sub-layer's graph back to the leaf.
            x1,
            h,
            x2: x2.shallow_clone(),
            psi,
            psi_tilde,
            fx,
            coeff,
            weights,
            mask: mask.map(Tensor::shallow_clone),
            h2,
        };
        Ok((x2, fx2, saved))
    }

    /// The backward pass of [`Self::forward_saving`]: adds the parameters' gradients to their
    /// `.grad` and returns the gradients of the block's inputs.
    ///
    /// # Shapes
    /// - `grad_x`: (B, N, h) or None (the last block's x output feeds nothing);
    ///   `grad_fx`: like the fx output
    /// - returns: ∂x (B, N, h), ∂fx (B, N, h)
    pub fn backward_saved(
        &self,
        saved: SavedBlock,
        grad_x: Option<&Tensor>,
        grad_fx: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let (attn, ln_2, mlp) = self.nn_block.parts();
        let mut grads = Grads::default();
        let _guard = tch::no_grad_guard();

        // Head: fx₂ = mlp2(LN₃ fx₁).
        let fx1 = leaf(&kernel_output(
            &saved.psi_tilde,
            &self.mu,
            &saved.coeff,
            &saved.fx,
        )?)?;
        let a3 = tch::with_grad(|| self.ln_3.forward(&fx1))?;
        let ga3 = match (&self.mlp2, &saved.h2) {
            (Head::Mlp(m), Some(h2)) => {
                let (w3, w4) = m.two_layers().ok_or_else(two_layers_needed)?;
                let gg2 = grads.linear(w4, &gelu(h2)?, grad_fx)?;
                let gh2 = h2.f_gelu_backward(&gg2.f_to_kind(h2.kind())?, "none")?;
                grads.linear(w3, &a3.f_detach()?, &gh2)?
            }
            (Head::Linear(l), _) => grads.linear(l, &a3.f_detach()?, grad_fx)?,
            (Head::Mlp(_), None) => return Err(mismatch()),
        };
        let gfx1 = pull_back(&a3, &ga3, &fx1)?;
        drop(a3);

        // Kernel: fx₁ = (ψ̃ ⊙ s) coeff + fx, s = softplus(μ), coeff = c · (w ⊙ ψ̃)ᵀ fx.
        let psi_t = saved.psi_tilde.f_detach()?;
        let mu = leaf(&self.mu)?;
        let s = tch::with_grad(|| mu.f_softplus())?;
        let p = psi_t.f_mul(&s)?;
        let g_p = matmul(&gfx1, &saved.coeff.f_transpose(-2, -1)?)?; // (B, N, k)
                                                                     // The gradient of the unscaled sum (w ⊙ ψ̃)ᵀ fx.
        let g_coeff = saved
            .weights
            .scaled(matmul(&p.f_transpose(-2, -1)?, &gfx1)?)?; // (B, k, h)
        let gfx = matmul(&saved.weights.weighted(&psi_t)?, &g_coeff)?.f_add(&gfx1)?;
        let g_psi_t = g_p.f_mul(&s)?.f_add(
            &saved
                .weights
                .weighted(&matmul(&saved.fx, &g_coeff.f_transpose(-2, -1)?)?)?,
        )?;
        let g_ps = g_p.f_mul(&psi_t)?;
        let g_s = g_ps.f_sum_dim_intlist([0, 1].as_slice(), false, g_ps.kind())?;
        let g_mu = pull_back(&s, &g_s, &mu)?;
        grads.push(&self.mu, g_mu)?;
        drop((gfx1, p, g_p, g_coeff));

        // ψ̃ = normalize(ψ), ψ = proj(x₂).
        let g_psi = pull_back(&saved.psi_tilde, &g_psi_t, &saved.psi)?;
        let mut gx2 = grads.linear(&self.proj, &saved.x2, &g_psi)?;
        if let Some(g) = grad_x {
            gx2 = gx2.f_add(g)?;
        }

        // FFN: x₂ = x₁ + W₂ GELU(W₁ LN₂ x₁).
        let (w1, w2) = mlp.two_layers().ok_or_else(two_layers_needed)?;
        let gg = grads.linear(w2, &gelu(&saved.h)?, &gx2)?;
        let gh = saved
            .h
            .f_gelu_backward(&gg.f_to_kind(saved.h.kind())?, "none")?;
        drop(gg);
        let x1 = leaf(&saved.x1)?;
        let a2 = tch::with_grad(|| ln_2.forward(&x1))?;
        let ga2 = grads.linear(w1, &a2.f_detach()?, &gh)?;
        drop(gh);
        let gx1 = pull_back(&a2, &ga2, &x1)?.f_add(&gx2)?;
        drop((a2, ga2, gx2));

        // Attention sub-layer: x₁ = x + Attn(LN₁ x).
        let gx = match (saved.attention, attn) {
            (
                SavedAttention::Linear { qkv, ctx },
                Some((ln_1, MultiHeadAttention::LinearTransformer(lt))),
            ) => {
                let ([to_q, to_k, to_v, to_out], heads) = lt.parts();
                let (q_hat, k_hat, v) = lt_softmaxes(&qkv, heads, saved.mask.as_ref())?;
                let [b, n, _] = dims(&qkv)?;
                let d = q_hat.size()[3];
                let scale = (d as f64).powf(-0.5);
                let o = lt_output(&q_hat, &ctx, scale)?;
                let go = grads.linear(to_out, &o, &gx1)?;
                drop(o);
                let e = ctx.size()[3];
                let go = heads_first(&go.f_view([b, n, heads, e])?)?; // (B, H, N, e)
                let qs = heads_first(&q_hat)?.f_mul_scalar(scale)?;
                let g_ctx = qs.f_transpose(-2, -1)?.f_matmul(&go)?; // (B, H, d, e)
                drop(qs);
                let g_q_hat = go
                    .f_matmul(&ctx.f_transpose(-2, -1)?)?
                    .f_mul_scalar(scale)?;
                let vh = heads_first(&v)?;
                let g_k_hat = vh.f_matmul(&g_ctx.f_transpose(-2, -1)?)?; // (B, H, N, d)
                let g_v = heads_first(&k_hat)?.f_matmul(&g_ctx)?; // (B, H, N, e)
                let kind = qkv.kind();
                let g_q = Tensor::f_internal_softmax_backward_data(
                    &g_q_hat.f_permute([0, 2, 1, 3])?,
                    &q_hat,
                    -1,
                    kind,
                )?;
                let g_k = Tensor::f_internal_softmax_backward_data(
                    &g_k_hat.f_permute([0, 2, 1, 3])?,
                    &k_hat,
                    1,
                    kind,
                )?;
                drop((q_hat, k_hat, g_q_hat, g_k_hat));
                let inner = heads * d;
                let g_qkv = Tensor::f_cat(
                    &[
                        g_q.f_reshape([b, n, inner])?,
                        g_k.f_reshape([b, n, inner])?,
                        g_v.f_permute([0, 2, 1, 3])?.f_reshape([b, n, heads * e])?,
                    ],
                    -1,
                )?;
                drop((g_q, g_k, g_v));
                let x = leaf(&saved.x)?;
                let a1 = tch::with_grad(|| ln_1.forward(&x))?;
                let a1d = a1.f_detach()?;
                let g2 = g_qkv.f_reshape([-1, 3 * inner])?;
                let a2d = a1d.f_reshape([-1, a1d.size()[2]])?;
                let gw = g2.f_tr()?.f_mm(&to_compute(&a2d)?)?; // (3·inner, dim)
                for (i, lin) in [to_q, to_k, to_v].into_iter().enumerate() {
                    grads.push(&lin.weight, gw.f_narrow(0, i as i64 * inner, inner)?)?;
                }
                let w = Tensor::f_cat(&[&to_q.weight, &to_k.weight, &to_v.weight], 0)?;
                let ga1 = matmul(&g_qkv, &w)?;
                drop(g_qkv);
                pull_back(&a1, &ga1, &x)?.f_add(&gx1)?
            }
            (SavedAttention::Recompute { pinv }, Some((ln_1, attn))) => {
                let x = leaf(&saved.x)?;
                let mask = saved.mask.as_ref();
                let z_leaves = pinv
                    .iter()
                    .map(|(_, z)| leaf(z))
                    .collect::<Result<Vec<_>>>()?;
                let mut attn2 = Vec::new();
                let x1 = tch::with_grad(|| -> Result<Tensor> {
                    let a1 = ln_1.forward(&x)?;
                    let out = match attn {
                        MultiHeadAttention::Nystrom(ny) if !z_leaves.is_empty() => {
                            let mut kept = z_leaves.iter();
                            ny.forward_with_pinv(&a1, mask, &mut |a| {
                                attn2.push(a.shallow_clone());
                                kept.next().map(Tensor::shallow_clone).ok_or(
                                    ono_kernels::Error::InvalidArgument {
                                        op: "selective recomputation",
                                        msg: "more pseudo-inverses than the forward pass kept"
                                            .into(),
                                    },
                                )
                            })?
                        }
                        other => other.forward(&a1, mask)?,
                    };
                    Ok(out.f_add(&x)?)
                })?;
                let surrogate = tch::with_grad(|| {
                    x1.f_reshape([-1])?
                        .f_dot(&gx1.f_to_kind(x1.kind())?.f_reshape([-1])?)
                })?;
                drop(x1);
                if z_leaves.is_empty() {
                    surrogate.f_backward()?;
                } else {
                    if attn2.len() != z_leaves.len() {
                        return Err(mismatch());
                    }
                    // ∂z first (the graph kept for the second pass), then through each kept
                    // Newton–Schulz graph to ∂attn2, then everything in one pass.
                    let leaves: Vec<&Tensor> = z_leaves.iter().collect();
                    let gzs = Tensor::f_run_backward(&[&surrogate], &leaves, true, false)?;
                    let mut total = surrogate;
                    for (((a2_leaf, z), gz), a2) in pinv.iter().zip(&gzs).zip(&attn2) {
                        let g_a2 = pull_back(z, gz, a2_leaf)?;
                        total = tch::with_grad(|| -> Result<Tensor> {
                            let s2 = a2
                                .f_reshape([-1])?
                                .f_dot(&g_a2.f_to_kind(a2.kind())?.f_reshape([-1])?)?;
                            Ok(total.f_add(&s2)?)
                        })?;
                    }
                    tch::with_grad(|| total.f_backward())?;
                }
                let gx = x.grad();
                if !gx.defined() {
                    return Err(Error::Config(
                        "selective recomputation: the attention did not reach its input".into(),
                    ));
                }
                gx
            }
            (SavedAttention::None, None) => gx1,
            _ => return Err(mismatch()),
        };
        grads.flush()?;
        Ok((gx, gfx))
    }
}
