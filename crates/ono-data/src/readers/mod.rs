//! Readers of the benchmark file formats. Each returns [`crate::array::NamedArray`]s (logical
//! shape, row-major data, stored element type) and refuses what it cannot read with a typed error.

pub mod mat_v5;
pub mod npy;
