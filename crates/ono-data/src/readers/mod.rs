//! Readers of the benchmark file formats. Each returns [`crate::array::NamedArray`]s (logical
//! shape, row-major data, stored element type) and refuses what it cannot read with a typed error.

pub mod any;
pub mod hdf5_mat;
pub mod mat_v5;
pub mod npy;
pub mod safetensors_file;
pub mod torch_pt;
pub mod vtk;

pub use any::read_any;
