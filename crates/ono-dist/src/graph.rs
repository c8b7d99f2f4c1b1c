//! CUDA graphs: a stretch of work queued on a CUDA device recorded once ([`CudaGraph::capture`])
//! and launched again as one graph ([`CudaGraph::replay`]), through libtorch's own
//! `at::cuda::CUDAGraph` (`cpp/cuda_graph_shim.cpp`).
//!
//! The contract a caller keeps, as with `torch.cuda.graph`: a replay reruns the recorded
//! kernels on the recorded memory. Inputs must therefore be copied into tensors that existed
//! before the capture (static buffers), everything that changes from one replay to the next
//! must be device data read by the kernels (not a number passed to a kernel at capture), and
//! the tensors made during the capture (outputs included) are overwritten by every replay.
//! Host code inside the captured body runs once, at capture: its effects on host state are the
//! caller's to repeat. torch's default CUDA generator is registered with every graph, so a
//! generator reseeded before a replay draws what the eager work would draw.

use std::os::raw::{c_char, c_void};
use std::ptr::NonNull;

use crate::ffi::{err_buf, message};
use crate::{DistError, Result};

#[cfg(ono_cuda_graphs)]
extern "C" {
    fn ono_graph_device_count() -> std::os::raw::c_int;
    fn ono_graph_new(err: *mut c_char, errlen: usize) -> *mut c_void;
    fn ono_graph_capture_begin(
        h: *mut c_void,
        device: std::os::raw::c_int,
        err: *mut c_char,
        errlen: usize,
    ) -> std::os::raw::c_int;
    fn ono_graph_capture_end(
        h: *mut c_void,
        err: *mut c_char,
        errlen: usize,
    ) -> std::os::raw::c_int;
    fn ono_graph_replay(h: *mut c_void, err: *mut c_char, errlen: usize) -> std::os::raw::c_int;
    fn ono_graph_free(h: *mut c_void);
}

/// Whether graphs can be captured on CUDA device `device` in this build and process; the
/// reason when not.
pub fn available(device: usize) -> Result<()> {
    #[cfg(ono_cuda_graphs)]
    {
        // SAFETY: no arguments; the shim catches every exception.
        let count = unsafe { ono_graph_device_count() };
        if device < count.max(0) as usize {
            Ok(())
        } else {
            Err(DistError::GraphsUnavailable {
                why: format!("cuda:{device} does not exist ({count} CUDA devices)"),
            })
        }
    }
    #[cfg(not(ono_cuda_graphs))]
    {
        let _ = device;
        Err(DistError::GraphsUnavailable {
            why: option_env!("ONO_DIST_NO_CUDA_GRAPHS_WHY")
                .unwrap_or("ono-dist was built without its c10d feature (and so without the shim)")
                .to_owned(),
        })
    }
}

/// A captured CUDA graph. Dropping it frees the graph and its memory pool.
pub struct CudaGraph {
    handle: NonNull<c_void>,
}

impl std::fmt::Debug for CudaGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaGraph").finish_non_exhaustive()
    }
}

impl CudaGraph {
    /// Records what `body` queues on CUDA device `device` from this thread (nothing runs: the
    /// work runs at each [`replay`](Self::replay), the first included). A failing body still
    /// ends the capture; its error is returned and the graph dropped.
    pub fn capture<T, E: From<DistError>>(
        device: usize,
        body: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<(Self, T), E> {
        available(device)?;
        let graph = Self::new()?;
        graph.call("capture", |h, err, len| {
            #[cfg(ono_cuda_graphs)]
            // SAFETY: a live handle; `err` holds `len` bytes.
            return unsafe { ono_graph_capture_begin(h, device as _, err, len) };
            #[cfg(not(ono_cuda_graphs))]
            {
                let _ = (h, err, len);
                -1
            }
        })?;
        let out = body();
        let ended = graph.call("capture", |h, err, len| {
            #[cfg(ono_cuda_graphs)]
            // SAFETY: a live handle; `err` holds `len` bytes.
            return unsafe { ono_graph_capture_end(h, err, len) };
            #[cfg(not(ono_cuda_graphs))]
            {
                let _ = (h, err, len);
                -1
            }
        });
        let out = out?;
        ended?;
        Ok((graph, out))
    }

    /// Launches the captured work on the current stream.
    pub fn replay(&self) -> Result<()> {
        self.call("replay", |h, err, len| {
            #[cfg(ono_cuda_graphs)]
            // SAFETY: a live handle; `err` holds `len` bytes.
            return unsafe { ono_graph_replay(h, err, len) };
            #[cfg(not(ono_cuda_graphs))]
            {
                let _ = (h, err, len);
                -1
            }
        })
    }

    fn new() -> Result<Self> {
        #[cfg(ono_cuda_graphs)]
        {
            let mut err = err_buf();
            // SAFETY: `err` holds ERR_LEN bytes.
            let h = unsafe { ono_graph_new(err.as_mut_ptr(), err.len()) };
            NonNull::new(h)
                .map(|handle| Self { handle })
                .ok_or_else(|| DistError::Graph {
                    op: "creation",
                    message: message(&err),
                })
        }
        #[cfg(not(ono_cuda_graphs))]
        Err(available(0).expect_err("no shim"))
    }

    fn call(
        &self,
        op: &'static str,
        f: impl FnOnce(*mut c_void, *mut c_char, usize) -> std::os::raw::c_int,
    ) -> Result<()> {
        let mut err = err_buf();
        match f(self.handle.as_ptr(), err.as_mut_ptr(), err.len()) {
            0 => Ok(()),
            _ => Err(DistError::Graph {
                op,
                message: message(&err),
            }),
        }
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        #[cfg(ono_cuda_graphs)]
        // SAFETY: the handle is live and dropped once.
        unsafe {
            ono_graph_free(self.handle.as_ptr())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a CUDA device (this machine's tests), asking for graphs is an error with a
    /// reason, never a crash.
    #[test]
    fn without_a_device_capture_is_refused_with_a_reason() {
        if tch::Cuda::is_available() {
            return;
        }
        let e = available(0).unwrap_err();
        assert!(matches!(e, DistError::GraphsUnavailable { .. }), "{e}");
        let r = CudaGraph::capture(0, || Ok::<_, DistError>(()));
        assert!(r.is_err());
    }
}
