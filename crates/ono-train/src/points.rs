//! Point sharding's collectives: [`ono_kernels::points::PointGroup`] on torch's c10d
//! ([`ono_dist::ProcessGroup`]), so that the kernels' sums over a sample's points run over the
//! processes that each hold a share of them (see `ono_kernels::points` for the contract).

use std::rc::Rc;

use ono_dist::ProcessGroup;
use ono_kernels::points::PointGroup;
use tch::Tensor;

/// The processes of a [`ProcessGroup`] as the holders of a sample's point shares.
pub struct ProcessPoints {
    group: Rc<ProcessGroup>,
}

impl ProcessPoints {
    /// Sums and maxima over `group`'s processes.
    pub fn new(group: Rc<ProcessGroup>) -> Self {
        Self { group }
    }
}

fn collective(op: &'static str, e: ono_dist::DistError) -> ono_kernels::Error {
    ono_kernels::Error::Collective {
        op,
        msg: e.to_string(),
    }
}

impl PointGroup for ProcessPoints {
    fn sum(&self, t: &Tensor) -> ono_kernels::Result<Tensor> {
        self.group
            .all_reduce_sum_grad(t)
            .map_err(|e| collective("sum", e))
    }

    fn max(&self, t: &Tensor) -> ono_kernels::Result<Tensor> {
        let out = t.f_detach_copy()?.f_contiguous()?;
        self.group
            .all_reduce_max(&[out.shallow_clone()])
            .map_err(|e| collective("max", e))?;
        Ok(out)
    }

    fn world(&self) -> usize {
        self.group.world()
    }
}
