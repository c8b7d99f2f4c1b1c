//! A process group: torch's TCPStore rendezvous and one c10d backend, with the collectives data
//! parallel training needs.

use crate::error::{DistError, Result};
use crate::ffi;
use crate::launch::Launch;
use std::ffi::CString;
use std::fmt;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;
use std::time::Duration;
use tch::{Kind, Tensor};

/// The c10d backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// ProcessGroupGloo: CPU tensors (and CUDA tensors, staged through the host). Built with the
    /// `c10d` feature.
    Gloo,
    /// ProcessGroupNCCL: CUDA tensors on this rank's device (`cuda:{local_rank}`). Built only when
    /// the build found NCCL's and CUDA's headers (see [`Backend::available`]).
    Nccl,
}

impl Backend {
    /// Whether this build can create the backend; for NCCL the error says why the build left it
    /// out.
    pub fn available(self) -> Result<()> {
        if !cfg!(feature = "c10d") {
            return Err(DistError::C10dNotBuilt);
        }
        match self {
            Backend::Gloo => Ok(()),
            Backend::Nccl if cfg!(ono_nccl) => Ok(()),
            Backend::Nccl => Err(DistError::NcclUnavailable {
                why: option_env!("ONO_DIST_NO_NCCL_WHY").unwrap_or("built without it"),
            }),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        })
    }
}

/// One rank's membership of a process group.
///
/// Every rank must call the same collectives, in the same order, with tensors of the same shapes
/// and kinds; c10d matches them by order alone. Each call returns when its collective has
/// completed on this rank, or with an error once the group's timeout has passed (a peer that died
/// or never called): the error, not a hang, is what a caller sees.
///
/// `Send` but not `Sync`: the group may move to another thread (c10d backends are not tied to the
/// thread that made them: Gloo runs collectives on its own worker threads and NCCL takes the
/// device from the tensors and the bound device), but two threads issuing collectives on one
/// group would order them differently on different ranks, which mismatches or deadlocks the
/// group. Without `Sync`, a `&ProcessGroup` cannot reach a second thread.
pub struct ProcessGroup {
    handle: NonNull<c_void>,
    rank: usize,
    world: usize,
    backend: Backend,
    timeout: Duration,
}

// SAFETY: the handle is owned by this value alone (see the type's documentation for why moving
// it between threads is sound and sharing it is not).
unsafe impl Send for ProcessGroup {}

impl fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("backend", &self.backend)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ProcessGroup {
    /// Joins the group `launch` describes: connects to the TCPStore at
    /// `master_addr:master_port` (rank 0 hosts it, or every rank is a client of torchrun's agent
    /// store), then creates the backend, which connects the ranks through the store.
    ///
    /// `timeout` bounds the rendezvous (connecting to the store, waiting for the other ranks) and
    /// every later collective. With the agent store, keys live under
    /// `ono/attempt_{restart_count}`, so a restarted worker group never reads a previous attempt's
    /// keys even from a store that outlived it. For NCCL the device is `cuda:{local_rank}`.
    pub fn new(launch: &Launch, backend: Backend, timeout: Duration) -> Result<Self> {
        const OP: &str = "ProcessGroup::new";
        let invalid = |why: String| DistError::InvalidArgument { op: OP, why };
        backend.available()?;
        if launch.world == 0 || launch.rank >= launch.world {
            return Err(invalid(format!(
                "rank {} of a world of {}",
                launch.rank, launch.world
            )));
        }
        let world = c_int::try_from(launch.world)
            .map_err(|_| invalid(format!("a world of {} ranks", launch.world)))?;
        let rank = launch.rank as c_int; // below world, so it fits
                                         // c10::DeviceIndex is an i8.
        let device = match backend {
            Backend::Nccl if launch.local_rank > i8::MAX as usize => {
                return Err(invalid(format!(
                    "local rank {} is no CUDA device index",
                    launch.local_rank
                )))
            }
            Backend::Nccl => launch.local_rank as c_int,
            Backend::Gloo => -1,
        };
        let timeout_ms = i64::try_from(timeout.as_millis())
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or_else(|| invalid(format!("a timeout of {timeout:?} (at least 1 ms)")))?;
        let addr = CString::new(launch.master_addr.as_str())
            .ok()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| invalid(format!("master address {:?}", launch.master_addr)))?;
        let prefix = launch.agent_store.then(|| {
            CString::new(format!("ono/attempt_{}", launch.restart_count))
                .expect("digits and ASCII have no NUL")
        });
        let is_server = !launch.agent_store && launch.rank == 0;

        let mut stage: c_int = 0;
        let mut err = ffi::err_buf();
        // SAFETY: the strings outlive the call; `stage` and `err` are valid for writes of the
        // sizes given; the shim catches every C++ exception.
        let handle = unsafe {
            ffi::ono_dist_create(
                addr.as_ptr(),
                launch.master_port,
                rank,
                world,
                is_server as c_int,
                prefix.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
                match backend {
                    Backend::Gloo => ffi::GLOO,
                    Backend::Nccl => ffi::NCCL,
                },
                device,
                timeout_ms,
                &mut stage,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        let Some(handle) = NonNull::new(handle) else {
            let message = ffi::message(&err);
            return Err(if stage == ffi::STAGE_STORE {
                DistError::Rendezvous {
                    addr: launch.master_addr.clone(),
                    port: launch.master_port,
                    message,
                }
            } else {
                DistError::Backend { backend, message }
            });
        };
        Ok(ProcessGroup {
            handle,
            rank: launch.rank,
            world: launch.world,
            backend,
            timeout,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> usize {
        self.world
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The rendezvous and collective timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Replaces each tensor, in place, by its sum over all ranks. Each tensor is reduced on its
    /// own (not into the others); all must be contiguous, which c10d needs to send them as they
    /// lie in memory. An empty slice does nothing (and sends nothing).
    pub fn all_reduce_sum(&self, tensors: &[Tensor]) -> Result<()> {
        self.all_reduce("all_reduce_sum", ffi::SUM, tensors)
    }

    /// Overwrites each tensor, in place, with rank `root`'s. Contiguous tensors only; an empty
    /// slice does nothing.
    pub fn broadcast(&self, tensors: &[Tensor], root: usize) -> Result<()> {
        const OP: &str = "broadcast";
        if root >= self.world {
            return Err(DistError::InvalidArgument {
                op: OP,
                why: format!("root {root} of a world of {}", self.world),
            });
        }
        let ptrs = tensor_ptrs(OP, tensors)?;
        if ptrs.is_empty() {
            return Ok(());
        }
        self.call(OP, |h, err, len| {
            // SAFETY: as in all_reduce_sum; root < world fits a c_int.
            unsafe {
                ffi::ono_dist_broadcast(
                    h,
                    ptrs.as_ptr(),
                    ptrs.len() as c_int,
                    root as c_int,
                    err,
                    len,
                )
            }
        })
    }

    /// The sum over all ranks of `x`, as a new contiguous tensor of its shape, kind and device,
    /// the same on every rank, and **differentiable**: its backward sums the ranks' incoming
    /// gradients. That is the exact gradient of a sum whose terms the ranks hold: each rank's
    /// gradient at the replicated sum is its share (from its own computations downstream), and
    /// the term's gradient is the whole. `x` may be non-contiguous (it is copied). Every rank
    /// must call it with the same shape, and every rank must then run the backward.
    pub fn all_reduce_sum_grad(&self, x: &Tensor) -> Result<Tensor> {
        const OP: &str = "all_reduce_sum_grad";
        if !x.defined() || x.is_sparse() || x.is_mkldnn() {
            return Err(DistError::InvalidArgument {
                op: OP,
                why: "needs a defined, dense strided tensor".into(),
            });
        }
        let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
        self.call(OP, |h, err, len| {
            // SAFETY: `x` is live for the call; `out` is written by the shim before it returns 0.
            unsafe { ffi::ono_dist_all_reduce_sum_grad(h, x.as_ptr(), &mut out, err, len) }
        })?;
        if out.is_null() {
            return Err(DistError::Collective {
                op: OP,
                message: "the shim returned no tensor".into(),
            });
        }
        // SAFETY: the shim allocated a new at::Tensor for us to own.
        Ok(unsafe { Tensor::from_ptr(out) })
    }

    /// Replaces each tensor, in place, by its elementwise maximum over all ranks (no gradient).
    /// Contiguous tensors only; an empty slice does nothing.
    pub fn all_reduce_max(&self, tensors: &[Tensor]) -> Result<()> {
        self.all_reduce("all_reduce_max", ffi::MAX, tensors)
    }

    /// Reduces each tensor in place by `code` (`ffi::SUM`, `ffi::MAX`).
    fn all_reduce(&self, op: &'static str, code: c_int, tensors: &[Tensor]) -> Result<()> {
        let ptrs = tensor_ptrs(op, tensors)?;
        if ptrs.is_empty() {
            return Ok(());
        }
        self.call(op, |h, err, len| {
            // SAFETY: `ptrs` point at live tensors for the call's duration.
            unsafe {
                ffi::ono_dist_all_reduce(h, ptrs.as_ptr(), ptrs.len() as c_int, code, err, len)
            }
        })
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<()> {
        // SAFETY: the handle is live; the shim catches every exception.
        self.call("barrier", |h, err, len| unsafe {
            ffi::ono_dist_barrier(h, err, len)
        })
    }

    /// Every rank's `local`, stacked in rank order: shape `(world, ...local's shape)`, on
    /// `local`'s device and of its kind.
    ///
    /// Meant for small metadata (an int64 fingerprint of each rank's configuration, a count): it
    /// is a zero-padded [`all_reduce_sum`](Self::all_reduce_sum), which is exact because each
    /// element is its rank's value plus zeros (only the sign of a `-0.0` is lost). Before the
    /// data, the ranks exchange their tensors' kinds, layouts and shapes, so ranks that disagree
    /// all get [`DistError::Mismatch`] instead of a garbled result or a timeout. Any tensor goes
    /// (it is copied); every rank must call with the same kind and shape.
    pub fn all_gather_rows(&self, local: &Tensor) -> Result<Tensor> {
        const OP: &str = "all_gather_rows";
        /// Dimensions compared exactly; beyond them the element count is compared.
        const DIMS: usize = 8;
        if !local.defined() {
            return Err(DistError::InvalidArgument {
                op: OP,
                why: "an undefined tensor".to_owned(),
            });
        }
        let tch = |source| DistError::Tensor { op: OP, source };
        let (kind, device, shape) = (local.kind(), local.device(), local.size());

        // [kind, strided, ndim, numel, first DIMS sizes], one row per rank. A sparse tensor is
        // refused only after the exchange, on every rank alike, so no rank is left waiting.
        let strided = !(local.is_sparse() || local.is_mkldnn());
        let mut header = vec![
            scalar_type(kind),
            strided as i64,
            shape.len() as i64,
            local.numel() as i64,
        ];
        header.extend(shape.iter().copied().chain(std::iter::repeat(0)).take(DIMS));
        let width = header.len() as i64;
        let headers =
            Tensor::f_zeros([self.world as i64, width], (Kind::Int64, device)).map_err(tch)?;
        headers
            .f_select(0, self.rank as i64)
            .and_then(|mut row| row.f_copy_(&Tensor::f_from_slice(&header)?.f_to(device)?))
            .map_err(tch)?;
        self.all_reduce_sum(std::slice::from_ref(&headers))?;
        let rows = headers
            .f_to(tch::Device::Cpu)
            .and_then(|h| Vec::<Vec<i64>>::try_from(&h))
            .map_err(tch)?;
        if rows.iter().any(|r| *r != rows[0]) {
            let detail = rows
                .iter()
                .enumerate()
                .map(|(r, h)| {
                    format!(
                        "rank {r}: scalar type {}, {}, shape {:?}",
                        h[0],
                        if h[1] == 1 { "strided" } else { "sparse" },
                        &h[4..4 + (h[2] as usize).min(DIMS)]
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(DistError::Mismatch { op: OP, detail });
        }
        if !strided {
            return Err(DistError::InvalidArgument {
                op: OP,
                why: "a sparse (not strided) tensor on every rank".to_owned(),
            });
        }

        self.stack_rows(local)
    }

    /// [`all_gather_rows`](Self::all_gather_rows) without the exchange of kinds and shapes
    /// that comes first there (a collective and a read back to the host): for a hot path whose
    /// ranks hold the same kind and shape by construction, such as a training step's exchange.
    /// Ranks that disagree get a garbled result or a timeout, not [`DistError::Mismatch`].
    pub fn stack_rows(&self, local: &Tensor) -> Result<Tensor> {
        let tch = |source| DistError::Tensor {
            op: "stack_rows",
            source,
        };
        let mut out_shape = vec![self.world as i64];
        out_shape.extend(local.size());
        let out = Tensor::f_zeros(out_shape, (local.kind(), local.device())).map_err(tch)?;
        out.f_select(0, self.rank as i64)
            .and_then(|mut row| row.f_copy_(local))
            .map_err(tch)?;
        self.all_reduce_sum(std::slice::from_ref(&out))?;
        Ok(out)
    }

    /// Runs one shim call and turns its failure into [`DistError::Collective`].
    fn call(
        &self,
        op: &'static str,
        f: impl FnOnce(*mut c_void, *mut std::os::raw::c_char, usize) -> c_int,
    ) -> Result<()> {
        let mut err = ffi::err_buf();
        match f(self.handle.as_ptr(), err.as_mut_ptr(), err.len()) {
            0 => Ok(()),
            _ => Err(DistError::Collective {
                op,
                message: ffi::message(&err),
            }),
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: the handle came from ono_dist_create and is freed once, here.
        unsafe { ffi::ono_dist_destroy(self.handle.as_ptr()) }
    }
}

/// The C++ tensors behind `tensors`, after checking what c10d would otherwise refuse less
/// clearly (or at all).
fn tensor_ptrs(op: &'static str, tensors: &[Tensor]) -> Result<Vec<*const torch_sys::C_tensor>> {
    if c_int::try_from(tensors.len()).is_err() {
        return Err(DistError::InvalidArgument {
            op,
            why: format!("{} tensors in one call", tensors.len()),
        });
    }
    tensors
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if !t.defined() {
                Err(format!("tensor {i} is undefined"))
            } else if t.is_sparse() || t.is_mkldnn() {
                // Not strided: asking whether they are contiguous would throw (a panic in tch).
                Err(format!("tensor {i} is not a dense strided tensor"))
            } else if !t.is_contiguous() {
                Err(format!(
                    "tensor {i} (shape {:?}, strides {:?}) is not contiguous; pass .contiguous()",
                    t.size(),
                    t.stride()
                ))
            } else {
                Ok(t.as_ptr())
            }
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(|why| DistError::InvalidArgument { op, why })
}

/// c10's ScalarType number of `kind` (c10/core/ScalarType.h), to compare kinds across ranks.
fn scalar_type(kind: Kind) -> i64 {
    match kind {
        Kind::Uint8 => 0,
        Kind::Int8 => 1,
        Kind::Int16 => 2,
        Kind::Int => 3,
        Kind::Int64 => 4,
        Kind::Half => 5,
        Kind::Float => 6,
        Kind::Double => 7,
        Kind::ComplexHalf => 8,
        Kind::ComplexFloat => 9,
        Kind::ComplexDouble => 10,
        Kind::Bool => 11,
        Kind::QInt8 => 12,
        Kind::QUInt8 => 13,
        Kind::QInt32 => 14,
        Kind::BFloat16 => 15,
        Kind::Float8e5m2 => 23,
        Kind::Float8e4m3fn => 24,
        Kind::Float8e5m2fnuz => 25,
        Kind::Float8e4m3fnuz => 26,
    }
}
