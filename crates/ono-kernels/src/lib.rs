//! Batched kernels of ono on libtorch: Cholesky orthonormalization, EMA statistics, the attention
//! kernels of ONO and its baselines, the spectral multiply of FNO layers, and the float32 islands of
//! mixed precision ([`precision`]). Stateless functions on `tch::Tensor`s (the EMA buffer aside);
//! every one documents its shapes in a `# Shapes` section. [`points`] completes their sums over
//! points when a sample's points are split across processes.

pub mod attention;
pub mod ema;
mod error;
pub mod health;
pub mod host;
pub mod orthonormal;
pub mod points;
pub mod precision;
pub mod spectral;

pub use error::{Error, Result};
