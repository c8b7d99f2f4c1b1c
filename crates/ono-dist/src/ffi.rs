//! The extern "C" functions of `cpp/c10d_shim.cpp`. Every one catches all C++ exceptions and
//! reports them through `err` (a NUL-terminated message of at most `errlen` bytes).

use std::os::raw::{c_char, c_int, c_void};
use torch_sys::C_tensor;

/// Backend codes of `ono_dist_create`.
pub const GLOO: c_int = 0;
pub const NCCL: c_int = 1;

/// Reduction codes of `ono_dist_all_reduce`.
pub const SUM: c_int = 0;
pub const MAX: c_int = 1;

/// `*stage` after a failed `ono_dist_create`: the TCPStore (the rendezvous) failed.
pub const STAGE_STORE: c_int = 1;

#[cfg(feature = "c10d")]
extern "C" {
    #[allow(clippy::too_many_arguments)]
    pub fn ono_dist_create(
        addr: *const c_char,
        port: u16,
        rank: c_int,
        world: c_int,
        is_server: c_int,
        prefix: *const c_char,
        backend: c_int,
        device: c_int,
        timeout_ms: i64,
        stage: *mut c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> *mut c_void;

    pub fn ono_dist_all_reduce(
        h: *mut c_void,
        ts: *const *const C_tensor,
        n: c_int,
        op: c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;

    pub fn ono_dist_broadcast(
        h: *mut c_void,
        ts: *const *const C_tensor,
        n: c_int,
        root: c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;

    pub fn ono_dist_barrier(h: *mut c_void, err: *mut c_char, errlen: usize) -> c_int;

    pub fn ono_dist_all_reduce_sum_grad(
        h: *mut c_void,
        x: *const C_tensor,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;

    pub fn ono_dist_destroy(h: *mut c_void);
}

/// Without the `c10d` feature there is no shim to link: these stand-ins keep the safe layer
/// compiling. None is reached ([`crate::Backend::available`] refuses first, so no
/// [`crate::ProcessGroup`] exists); each fails as the shim fails, with a message, should one be.
#[cfg(not(feature = "c10d"))]
mod absent {
    use super::{c_char, c_int, c_void, C_tensor};

    const WHY: &[u8] = b"ono-dist was built without its c10d feature";

    /// Writes [`WHY`] into `err`, NUL-terminated, as the shim writes torch's message.
    ///
    /// # Safety
    /// `err` is valid for writes of `errlen` bytes.
    unsafe fn refuse(err: *mut c_char, errlen: usize) -> c_int {
        let n = WHY.len().min(errlen.saturating_sub(1));
        if errlen > 0 {
            // SAFETY: n + 1 <= errlen bytes, as the caller promises.
            unsafe {
                std::ptr::copy_nonoverlapping(WHY.as_ptr().cast(), err, n);
                *err.add(n) = 0;
            }
        }
        1
    }

    /// # Safety
    /// As the shim's: `stage` and `err` valid for writes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn ono_dist_create(
        _addr: *const c_char,
        _port: u16,
        _rank: c_int,
        _world: c_int,
        _is_server: c_int,
        _prefix: *const c_char,
        _backend: c_int,
        _device: c_int,
        _timeout_ms: i64,
        stage: *mut c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> *mut c_void {
        // SAFETY: as the caller promises.
        unsafe {
            *stage = 0;
            refuse(err, errlen);
        }
        std::ptr::null_mut()
    }

    /// # Safety
    /// `err` valid for writes of `errlen` bytes.
    pub unsafe fn ono_dist_all_reduce(
        _h: *mut c_void,
        _ts: *const *const C_tensor,
        _n: c_int,
        _op: c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int {
        // SAFETY: as the caller promises.
        unsafe { refuse(err, errlen) }
    }

    /// # Safety
    /// `err` valid for writes of `errlen` bytes.
    pub unsafe fn ono_dist_broadcast(
        _h: *mut c_void,
        _ts: *const *const C_tensor,
        _n: c_int,
        _root: c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int {
        // SAFETY: as the caller promises.
        unsafe { refuse(err, errlen) }
    }

    /// # Safety
    /// `err` valid for writes of `errlen` bytes.
    pub unsafe fn ono_dist_barrier(_h: *mut c_void, err: *mut c_char, errlen: usize) -> c_int {
        // SAFETY: as the caller promises.
        unsafe { refuse(err, errlen) }
    }

    /// # Safety
    /// `out` and `err` valid for writes.
    pub unsafe fn ono_dist_all_reduce_sum_grad(
        _h: *mut c_void,
        _x: *const C_tensor,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int {
        // SAFETY: as the caller promises.
        unsafe {
            *out = std::ptr::null_mut();
            refuse(err, errlen)
        }
    }

    /// # Safety
    /// Nothing to free: no handle is ever made.
    pub unsafe fn ono_dist_destroy(_h: *mut c_void) {}
}
#[cfg(not(feature = "c10d"))]
pub use absent::*;

/// Room for torch's messages (they can quote a whole store key list).
pub const ERR_LEN: usize = 4096;

/// An error buffer for one call.
pub fn err_buf() -> Vec<c_char> {
    vec![0; ERR_LEN]
}

/// The message the shim wrote into `buf`.
pub fn message(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let msg = String::from_utf8_lossy(&bytes).trim().to_owned();
    if msg.is_empty() {
        "(no message)".to_owned()
    } else {
        msg
    }
}
