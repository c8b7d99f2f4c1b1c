//! The extern "C" functions of `cpp/c10d_shim.cpp`. Every one catches all C++ exceptions and
//! reports them through `err` (a NUL-terminated message of at most `errlen` bytes).

use std::os::raw::{c_char, c_int, c_void};
use torch_sys::C_tensor;

/// Backend codes of `ono_dist_create`.
pub const GLOO: c_int = 0;
pub const NCCL: c_int = 1;

/// `*stage` after a failed `ono_dist_create`: the TCPStore (the rendezvous) failed.
pub const STAGE_STORE: c_int = 1;

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

    pub fn ono_dist_all_reduce_sum(
        h: *mut c_void,
        ts: *const *const C_tensor,
        n: c_int,
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

    pub fn ono_dist_destroy(h: *mut c_void);
}

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
