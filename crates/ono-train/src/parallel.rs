//! Data parallelism: one process per device, launched as torch users launch them (`torchrun`,
//! Slurm's `srun`, `mpirun`; [`ono_dist::Launch`]), on torch's own collectives (c10d: Gloo on
//! the CPU, NCCL on CUDA; [`ono_dist::ProcessGroup`]).
//!
//! The rule that makes a run of W processes the run of one: an optimizer step's `batch_size`
//! samples (the same batches, in the same order, as a single process draws them) are cut into
//! W × `accumulate_steps` contiguous micro-batches, process r taking the r-th `accumulate_steps`
//! of them. Each micro-batch's loss is weighted by its share of the step's samples (for a
//! mean-reduced loss) and its gradients summed, over micro-batches and then over processes, so
//! the step's gradient is the one a single process accumulating the same micro-batches in the
//! same order computes; clipping then sees the global norm. ONO's EMA covariances are folded at
//! the step's end with every micro-batch's statistic in micro-batch order, on every process
//! alike ([`DataParallel::fold_statistics`]); other running statistics (BatchNorm's) are rank
//! 0's, broadcast after every step, as DDP's `broadcast_buffers`. Evaluation splits the test
//! batches over the processes and sums their error sums; rank 0 alone logs and writes.

use std::rc::Rc;
use std::time::Duration;

use ono_dist::{Backend, Launch, ProcessGroup};
use ono_kernels::ema::Captured;
use ono_kernels::points::PointGroup;
use ono_models::Model;
use tch::{Device, Kind, Tensor};

use crate::adamw::{AdamW, FlatGrads};
use crate::points::ProcessPoints;
use crate::{Error, Result};

/// The process group of a data-parallel run and what the steps exchange through it.
pub struct DataParallel {
    group: Rc<ProcessGroup>,
    launch: Launch,
    /// Non-trainable variables that are not EMA covariances (BatchNorm's running statistics):
    /// rank 0's are broadcast after every step.
    others: Vec<Tensor>,
}

/// How long a collective (and the rendezvous) may wait before the run stops with an error:
/// `ONO_DIST_TIMEOUT` seconds, else five minutes — long enough for a slow first step on a busy
/// machine, short enough that a dead process does not hold a cluster allocation for long.
pub fn timeout_from_env() -> Result<Duration> {
    match std::env::var("ONO_DIST_TIMEOUT") {
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                Error::config(
                    "ONO_DIST_TIMEOUT",
                    format!("expected a positive number of seconds, got `{v}`"),
                )
            }),
        Err(_) => Ok(Duration::from_secs(300)),
    }
}

impl DataParallel {
    /// Joins the process group the launcher set up, or `None` when no launcher started this
    /// process. The backend follows the device: NCCL on CUDA (device `cuda:LOCAL_RANK`, one
    /// process per GPU), Gloo on the CPU.
    pub fn from_env(device: Device, timeout: Duration) -> Result<Option<Self>> {
        let Some(launch) = Launch::from_env()? else {
            return Ok(None);
        };
        let backend = match device {
            Device::Cpu => Backend::Gloo,
            _ => Backend::Nccl,
        };
        let group = Rc::new(ProcessGroup::new(&launch, backend, timeout)?);
        Ok(Some(Self {
            group,
            launch,
            others: Vec::new(),
        }))
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    /// Processes in the run.
    pub fn world(&self) -> usize {
        self.group.world()
    }

    /// How the processes were launched.
    pub fn launch(&self) -> &Launch {
        &self.launch
    }

    /// The device a process of this launch trains on: `cuda:LOCAL_RANK` when the configured
    /// device is CUDA (the local rank, never the global one: ranks on the second node count
    /// from the first GPU again), else the configured one.
    pub fn device_for(launch: &Launch, configured: Device) -> Device {
        match configured {
            Device::Cpu => Device::Cpu,
            _ => Device::Cuda(launch.local_rank),
        }
    }

    /// The processes as the holders of a sample's point shares (`parallel = "points"`).
    fn point_group(&self) -> Rc<dyn PointGroup> {
        Rc::new(ProcessPoints::new(self.group.clone()))
    }

    /// Runs `f` with each sample's points split over the processes
    /// (`ono_kernels::points::scope` on [`point_group`](Self::point_group)).
    pub fn with_split_points<R>(&self, f: impl FnOnce() -> R) -> R {
        ono_kernels::points::scope(self.point_group(), f)
    }

    /// The whole samples from every process's share of their `n` points
    /// ([`ono_data::dataset::point_share`]), in rank order, on every process: the shares are
    /// zero-padded to the longest, gathered in one collective, and cut back.
    ///
    /// # Shapes
    /// - `share`: (S, len_r, ...) on process r; returns (S, n, ...)
    pub fn gather_point_shares(&self, share: &Tensor, n: i64) -> Result<Tensor> {
        let world = self.world();
        let shares: Vec<(i64, i64)> = (0..world)
            .map(|r| ono_data::dataset::point_share(n, r, world))
            .collect();
        let longest = shares.iter().map(|s| s.1).max().unwrap_or(0);
        let size = share.size();
        let own = shares[self.rank()].1;
        if size.len() < 2 || size[1] != own {
            return Err(Error::Parallel(format!(
                "gather_point_shares: this process holds {own} of the {n} points, got a share of \
                 shape {size:?}"
            )));
        }
        let mut padded_size = size.clone();
        padded_size[1] = longest;
        let padded = Tensor::f_zeros(padded_size.as_slice(), (share.kind(), share.device()))?;
        padded.f_narrow(1, 0, own)?.f_copy_(share)?;
        let rows = self.group.all_gather_rows(&padded.f_reshape([-1])?)?;
        let mut whole_rank = vec![world as i64];
        whole_rank.extend_from_slice(&padded_size);
        let rows = rows.f_reshape(whole_rank.as_slice())?;
        let parts = shares
            .iter()
            .enumerate()
            .map(|(r, &(_, len))| rows.f_select(0, r as i64)?.f_narrow(1, 0, len))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Tensor::f_cat(&parts, 1)?)
    }

    /// Sums `t` over the processes, in place.
    pub(crate) fn sum(&self, t: &Tensor) -> Result<()> {
        self.group.all_reduce_sum(std::slice::from_ref(t))?;
        Ok(())
    }

    /// Every process's `row` (the same length everywhere), rank after rank, read back as f64.
    pub(crate) fn gather_f64(&self, row: &Tensor) -> Result<Vec<f64>> {
        let rows = self.group.all_gather_rows(row)?;
        Ok(ono_kernels::host::to_vec_f64(&rows.f_reshape([-1])?)?)
    }

    /// Checks that every process describes the run alike: `items` are (what, hash) pairs; a
    /// difference names the first rank and items that differ from rank 0's.
    pub(crate) fn agree(&self, items: &[(&str, u64)], device: Device) -> Result<()> {
        let local: Vec<i64> = items.iter().map(|&(_, h)| h as i64).collect();
        let local = Tensor::f_from_slice(&local)?.f_to_device(device)?;
        let rows = self.group.all_gather_rows(&local)?;
        let all = ono_kernels::host::to_vec_i64(&rows.f_reshape([-1])?)?;
        let n = items.len();
        for r in 1..self.world() {
            let differ: Vec<&str> = (0..n)
                .filter(|&i| all[r * n + i] != all[i])
                .map(|i| items[i].0)
                .collect();
            if !differ.is_empty() {
                return Err(Error::Parallel(format!(
                    "rank {r} differs from rank 0 in its {}; every process must run the same \
                     binary on the same configuration and data (and, when resuming, read the \
                     same checkpoint: output_dir must be on a file system every process shares)",
                    differ.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Makes every process start from rank 0's variables (parameters and buffers), and records
    /// which buffers follow rank 0 after every step.
    pub(crate) fn share_model(&mut self, model: &Model) -> Result<()> {
        let emas: Vec<usize> = model
            .ema_statistics()
            .iter()
            .flat_map(|e| [e.id(), e.count_id()])
            .collect();
        let mut vars: Vec<(String, Tensor)> = model.var_store().variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let _guard = tch::no_grad_guard();
        for (_, v) in &vars {
            self.group.broadcast(std::slice::from_ref(v), 0)?;
        }
        self.others = vars
            .into_iter()
            .filter(|(_, v)| !v.requires_grad() && !emas.contains(&(v.data_ptr() as usize)))
            .map(|(_, v)| v)
            .collect();
        Ok(())
    }

    /// Sums the step's gradients over the processes ([`FlatGrads::sum_over`]).
    pub(crate) fn sum_gradients(&self, opt: &AdamW, grads: &mut FlatGrads) -> Result<()> {
        grads.sum_over(opt, |t| self.sum(t))
    }

    /// Ends a step's running statistics alike on every process: the EMA updates this process
    /// recorded (`records`) are exchanged, and every process folds every micro-batch's
    /// statistics into its buffers in the step's micro-batch order, as one process accumulating
    /// the same micro-batches would have; then rank 0's other buffers are broadcast.
    ///
    /// `shares[r]`: the micro-batches with samples that process r trained this step;
    /// `forwards`: training forwards per micro-batch (a rollout's frames, else 1). Each forward
    /// updates every buffer of [`Model::ema_statistics`] once, in that order; records that do
    /// not are refused rather than folded wrongly.
    pub(crate) fn fold_statistics(
        &self,
        model: &Model,
        records: Vec<Captured>,
        shares: &[usize],
        forwards: usize,
    ) -> Result<()> {
        let emas = model.ema_statistics();
        if !emas.is_empty() {
            let sizes: Vec<i64> = emas.iter().map(|e| e.size() * e.size()).collect();
            let per_forward: i64 = sizes.iter().sum();
            let per_micro = per_forward * forwards as i64;
            let mine = shares[self.rank()];
            let expected = mine * forwards * emas.len();
            let in_order = records
                .iter()
                .enumerate()
                .all(|(i, r)| r.id == emas[i % emas.len()].id());
            if records.len() != expected || !in_order {
                return Err(Error::Parallel(format!(
                    "the model made {} EMA updates in this step where {mine} micro-batches of \
                     {forwards} forwards each should make {expected}, one per buffer in the \
                     model's order",
                    records.len()
                )));
            }
            let max_share = shares.iter().copied().max().unwrap_or(0);
            let capacity = max_share as i64 * per_micro;
            if capacity > 0 {
                let kind = emas[0].buffer().kind();
                let device = emas[0].buffer().device();
                let mut parts: Vec<Tensor> = records
                    .iter()
                    .map(|r| r.stat.f_to_kind(kind).and_then(|s| s.f_reshape([-1])))
                    .collect::<std::result::Result<_, _>>()?;
                let used = mine as i64 * per_micro;
                if used < capacity {
                    parts.push(Tensor::f_zeros([capacity - used], (kind, device))?);
                }
                // Every rank's row has `capacity` values of the buffers' kind by construction:
                // no shape exchange (and no host read) in the step.
                let row = Tensor::f_cat(&parts, 0)?;
                let rows = self.group.stack_rows(&row)?;
                let _guard = tch::no_grad_guard();
                for (r, &share) in shares.iter().enumerate() {
                    let row = rows.f_select(0, r as i64)?;
                    let mut off = 0;
                    for _ in 0..share * forwards {
                        for (ema, &len) in emas.iter().zip(&sizes) {
                            let k = ema.size();
                            ema.update(&row.f_narrow(0, off, len)?.f_view([k, k])?)?;
                            off += len;
                        }
                    }
                }
            }
        }
        if !self.others.is_empty() {
            let _guard = tch::no_grad_guard();
            for t in &self.others {
                self.group.broadcast(std::slice::from_ref(t), 0)?;
            }
        }
        Ok(())
    }
}

/// A stable 64-bit hash (FNV-1a) of `bytes`: what [`DataParallel::agree`] compares (the
/// standard library's hasher is not guaranteed stable across builds).
pub(crate) fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A hash of a split's shapes and kinds and of its first and last targets' sums (the data each
/// process loaded: the same files, subsampled and split alike).
pub(crate) fn split_hash(split: &ono_data::dataset::Split) -> Result<u64> {
    let mut bytes = Vec::new();
    for t in [&split.fx, &split.y, &split.pos] {
        bytes.extend(t.size().iter().flat_map(|d| d.to_le_bytes()));
        bytes.push(match t.kind() {
            Kind::Float => 1u8,
            Kind::Double => 2,
            _ => 0,
        });
    }
    let n = split.y.size()[0];
    if n > 0 {
        let ends = Tensor::f_stack(
            &[
                split.y.f_select(0, 0)?.f_sum(Kind::Double)?,
                split.y.f_select(0, n - 1)?.f_sum(Kind::Double)?,
            ],
            0,
        )?;
        for v in ono_kernels::host::to_vec_f64(&ends)? {
            bytes.extend(v.to_bits().to_le_bytes());
        }
    }
    Ok(fingerprint(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_stable_and_tell_inputs_apart() {
        // FNV-1a's published test vectors.
        assert_eq!(fingerprint(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fingerprint(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fingerprint(b"batch_size=4"), fingerprint(b"batch_size=5"));
    }
}
