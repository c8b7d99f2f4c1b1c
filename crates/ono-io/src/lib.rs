//! Files, one of each: the one atomic writer ([`atomic`]), the one lock ([`lock`]), the one
//! story of format versions and migrations ([`format`]), the one
//! safetensors writer ([`safetensors`]) and the one reader of `torch.save` archives
//! ([`torch_save`]) with its pickle machine ([`pickle`]). Every crate that writes or reads these
//! files goes through here, so durability and the hardening against hostile input are written
//! and tested once.
//!
//! This crate sits below ono-nn and ono-data and depends on neither.

pub mod atomic;
mod error;
pub mod format;
pub mod lock;
pub mod pickle;
pub mod safetensors;
pub mod torch_save;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
