//! Mixed precision: the parameters stay float32 (so do their gradients and the optimizer's state)
//! while the matrix products run in a 16-bit kind.
//!
//! tch 0.24 binds only CUDA autocast (`tch::autocast` toggles `at::autocast::set_enabled`, which
//! has no CPU counterpart in its API), so the layers cast explicitly. [`scope`] sets a
//! thread-local compute kind for the duration of a closure, as `torch.autocast` does for a
//! block; the layers read it:
//!
//! | what | kind under `bf16` / `f16` | why |
//! |---|---|---|
//! | linear layers, convolutions, attention and ONO's kernel products ([`to_compute`], [`matmul`]) | the compute kind | autocast's lower-precision list: the FLOPs, with float32 accumulation inside the GEMM |
//! | LayerNorm, BatchNorm, InstanceNorm ([`widened`]) | float32 inside, the input's kind out | statistics over up to thousands of values; the output feeds a product that rounds it anyway |
//! | softmax, GELU | the input's kind | libtorch's CPU kernels for bfloat16 compute in float32 and round the result (checked: bit-equal to float32-then-rounded on torch 2.11), CUDA's accumulate in float32 |
//! | second moment, Cholesky, whitening, FFTs, Nyström's pseudo-inverse | float32 ([`ono_kernels::precision`]) | small eigenvalues, complex FFTs, iterative inverses |
//! | residual streams | type promotion | `a + b` is float32 when either side is (autocast's semantics) |
//! | the model's output, the loss | float32 (`ono_models::Model`) | |
//!
//! Outside a scope (or in a [`Precision::F32`] scope) every helper is the identity: float32 and
//! float64 models compute exactly as before.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

pub use ono_kernels::precision::{is_reduced, widen};

/// The kind the matrix products of a model run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// The parameters' own kind throughout (float32, or float64 for a float64 model).
    #[default]
    F32,
    /// bfloat16 products: float32's range, 8 significant bits; needs no loss scaling.
    Bf16,
    /// float16 products: 11 significant bits but a range up to 65504 and down to 6e-8, so the
    /// trainer scales the loss (and skips steps whose gradients overflow).
    F16,
}

impl Precision {
    /// Every precision, in the order of their names.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::Bf16, Precision::F16];

    /// The 16-bit kind of the products, `None` for [`Precision::F32`].
    pub fn compute_kind(self) -> Option<Kind> {
        match self {
            Precision::F32 => None,
            Precision::Bf16 => Some(Kind::BFloat16),
            Precision::F16 => Some(Kind::Half),
        }
    }

    /// The configuration name: `f32`, `bf16` or `f16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }

    /// Whether training needs dynamic loss scaling (float16's gradients underflow without it).
    pub fn needs_loss_scaling(self) -> bool {
        self == Precision::F16
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| Error::Config(format!("precision `{s}` is not f32, bf16 or f16")))
    }
}

thread_local! {
    static CURRENT: Cell<Precision> = const { Cell::new(Precision::F32) };
}

/// Runs `f` with `precision` as this thread's compute precision and restores the previous one
/// afterwards (also when `f` panics). Scopes nest. Only the forward pass reads it: the backward
/// follows the kinds recorded in the graph, so gradients reach the float32 parameters as float32
/// through the casts' backward.
pub fn scope<T>(precision: Precision, f: impl FnOnce() -> T) -> T {
    struct Restore(Precision);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(precision)));
    f()
}

/// This thread's compute precision ([`Precision::F32`] outside any [`scope`]).
pub fn current() -> Precision {
    CURRENT.with(Cell::get)
}

/// The 16-bit kind products run in now, `None` when they run in the parameters' kind.
pub fn compute_kind() -> Option<Kind> {
    current().compute_kind()
}

/// `t` in the compute kind when one is set and `t` is real floating point; otherwise unchanged
/// (integer and complex tensors, and everything outside a reduced-precision scope).
pub fn to_compute(t: &Tensor) -> Result<Tensor> {
    match compute_kind() {
        Some(kind)
            if t.kind() != kind
                && matches!(
                    t.kind(),
                    Kind::Float | Kind::Double | Kind::Half | Kind::BFloat16
                ) =>
        {
            Ok(t.f_to_kind(kind)?)
        }
        _ => Ok(t.shallow_clone()),
    }
}

/// [`to_compute`] of an optional tensor (a layer's bias).
pub fn to_compute_opt(t: Option<&Tensor>) -> Result<Option<Tensor>> {
    t.map(to_compute).transpose()
}

/// `a @ b` in the compute kind (operands of different kinds are refused by libtorch, so any
/// product that may meet a float32 parameter or statistic goes through here).
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(to_compute(a)?.f_matmul(&to_compute(b)?)?)
}

/// A normalization `f` of a 16-bit `x` computed in `param_kind` (its weights' and statistics'
/// kind, float32) and returned in `x`'s kind; `f(x)` itself when `x` already has `param_kind`.
///
/// Why not libtorch's mixed-kind kernels (16-bit input, float32 weights): the CPU has them for
/// layer_norm and batch_norm, CUDA not for all norms; widening is the same arithmetic on every
/// device (float32 statistics, one rounding of the output), which is what CPU autocast's bfloat16
/// layer_norm gives and, once the following product has cast it, what CUDA autocast's float32
/// layer_norm gives.
pub fn widened(
    x: &Tensor,
    param_kind: Kind,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if x.kind() == param_kind || !is_reduced(x.kind()) {
        return f(x);
    }
    Ok(f(&x.f_to_kind(param_kind)?)?.f_to_kind(x.kind())?)
}

/// Refuses `precision` where its products do not run: a tiny product in the compute kind on
/// `device`, forward only (a CUDA device without bfloat16 GEMMs fails here, naming the device,
/// instead of in the first step).
pub fn check_supported(precision: Precision, device: Device) -> Result<()> {
    let Some(kind) = precision.compute_kind() else {
        return Ok(());
    };
    let probe = || -> std::result::Result<f64, tch::TchError> {
        let a = Tensor::f_ones([8, 8], (kind, device))?;
        ono_kernels::host::read_f64(&a.f_matmul(&a)?.f_sum(Kind::Float)?)
    };
    match probe() {
        Ok(512.0) => Ok(()),
        Ok(v) => Err(Error::Config(format!(
            "precision {precision}: an 8×8 {kind:?} product of ones on {device:?} sums to {v}, not 512"
        ))),
        Err(e) => Err(Error::Config(format!(
            "precision {precision}: {kind:?} matrix products do not run on {device:?}: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_restore_and_name_their_kinds() {
        assert_eq!(current(), Precision::F32);
        let inner = scope(Precision::Bf16, || {
            let inside = scope(Precision::F16, compute_kind);
            (compute_kind(), inside)
        });
        assert_eq!(inner, (Some(Kind::BFloat16), Some(Kind::Half)));
        assert_eq!(compute_kind(), None);
        let caught = std::panic::catch_unwind(|| scope(Precision::F16, || panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(current(), Precision::F32, "a panic must not leak the scope");
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>().unwrap(), p);
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.name())
            );
        }
        assert!("fp16".parse::<Precision>().is_err());
    }

    #[test]
    fn casts_only_real_floats_and_only_in_a_reduced_scope() {
        let x = Tensor::from_slice(&[1.0f32, 2.0]);
        let d = Tensor::from_slice(&[1.0f64]);
        let i = Tensor::from_slice(&[1i64]);
        assert_eq!(to_compute(&x).unwrap().kind(), Kind::Float);
        assert_eq!(to_compute(&d).unwrap().kind(), Kind::Double);
        scope(Precision::Bf16, || {
            assert_eq!(to_compute(&x).unwrap().kind(), Kind::BFloat16);
            assert_eq!(to_compute(&d).unwrap().kind(), Kind::BFloat16);
            assert_eq!(to_compute(&i).unwrap().kind(), Kind::Int64);
        });
        // A widened norm computes in float32 and answers in the input's kind.
        let h = x.to_kind(Kind::Half);
        let seen = std::cell::Cell::new(Kind::Int);
        let y = widened(&h, Kind::Float, |t| {
            seen.set(t.kind());
            Ok(t * 2.0)
        })
        .unwrap();
        assert_eq!((seen.get(), y.kind()), (Kind::Float, Kind::Half));
        check_supported(Precision::Bf16, Device::Cpu).unwrap();
    }
}
