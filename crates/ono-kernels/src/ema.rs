//! Exponential moving average of a k×k feature covariance (ONO's `feature_cov` buffer,
//! reference `ONOBlock` L238, L278–285).
//!
//! The buffer lives on a `tch::nn::Path` as a non-trainable variable, so it is saved and loaded with
//! the model and never reaches an optimizer. Beside it a 0-dim int64 counter records how many batches
//! have been folded in. Updates are in place (rebinding would disconnect the VarStore's copy), under
//! `no_grad`, and entirely on the device: the "first batch initialises the buffer" rule is a
//! `where` on the counter, not a host branch, so training never syncs for it.
//!
//! Before any update [`EmaCovariance::value`] returns the identity matrix: whitening by its Cholesky
//! factor is then the identity map, a defined (if untrained) behaviour where the reference crashes on a
//! `None` buffer.
//!
//! Under data parallelism each process sees only its share of a step's micro-batches, yet every
//! process must end the step with the buffer a single process would have: every micro-batch's
//! statistic folded in, in the step's micro-batch order. Inside a [`capture`] scope an update is
//! recorded (buffer [`id`](EmaCovariance::id) and detached statistic) instead of folded; the
//! trainer exchanges the records of all processes and folds them in order with
//! [`EmaCovariance::update`], so every process applies the same operations to the same values.
//! Training never reads the buffer (a training forward whitens with its own batch's statistic),
//! so deferring the fold to the step's end changes nothing else.

use std::cell::RefCell;

use tch::nn::Path;
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// The reference's momentum: buffer ← m·buffer + (1 − m)·batch.
pub const DEFAULT_MOMENTUM: f64 = 0.9;

/// A k×k EMA buffer plus its update counter.
#[derive(Debug)]
pub struct EmaCovariance {
    value: Tensor,
    count: Tensor,
    momentum: f64,
}

impl EmaCovariance {
    /// Registers `name` (k×k, zeros, of `kind`) and `name_count` (0-dim int64) on `path`.
    pub fn new(path: &Path, name: &str, k: i64, momentum: f64, kind: Kind) -> Result<Self> {
        if !(0.0..=1.0).contains(&momentum) {
            return Err(Error::InvalidArgument {
                op: "EmaCovariance::new",
                msg: format!("momentum must lie in [0, 1], got {momentum}"),
            });
        }
        if k <= 0 {
            return Err(Error::InvalidArgument {
                op: "EmaCovariance::new",
                msg: format!("k must be positive, got {k}"),
            });
        }
        let dev = path.device();
        let value = path.add(name, Tensor::f_zeros([k, k], (kind, dev))?, false);
        let count = path.add(
            &format!("{name}_count"),
            Tensor::f_zeros([], (Kind::Int64, dev))?,
            false,
        );
        Ok(Self {
            value,
            count,
            momentum,
        })
    }

    /// Folds a batch statistic in: the first update copies it, later ones blend with the momentum.
    /// The batch is detached; no graph is kept.
    /// Inside a [`capture`] scope the statistic is recorded instead, for the caller to fold.
    ///
    /// # Shapes
    /// - `batch`: (k, k)
    pub fn update(&self, batch: &Tensor) -> Result<()> {
        if batch.size() != self.value.size() {
            return Err(Error::Shape {
                op: "EmaCovariance::update",
                expected: format!("a {:?} statistic", self.value.size()),
                got: batch.size(),
            });
        }
        let _guard = tch::no_grad_guard();
        let batch = batch.f_detach()?.f_to_kind(self.value.kind())?;
        let recorded = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
            Some(list) => {
                list.push(Captured {
                    id: self.id(),
                    stat: batch.shallow_clone(),
                });
                true
            }
            None => false,
        });
        if recorded {
            return Ok(());
        }
        let blended = self
            .value
            .f_mul_scalar(self.momentum)?
            .f_add(&batch.f_mul_scalar(1.0 - self.momentum)?)?;
        let first = self.count.f_eq(0)?;
        let new = batch.f_where_self(&first, &blended)?;
        self.value.shallow_clone().f_copy_(&new)?;
        let _ = self.count.shallow_clone().f_add_scalar_(1)?;
        Ok(())
    }

    /// The current estimate; the identity matrix before the first update.
    ///
    /// # Shapes
    /// - returns: (k, k)
    pub fn value(&self) -> Result<Tensor> {
        let k = self.value.size()[0];
        let eye = Tensor::f_eye(k, (self.value.kind(), self.value.device()))?;
        Ok(eye.f_where_self(&self.count.f_eq(0)?, &self.value)?)
    }

    /// The raw stored buffer (zeros before the first update).
    pub fn buffer(&self) -> &Tensor {
        &self.value
    }

    /// Number of updates so far. Reads the device: for logging, not for the hot path.
    pub fn count(&self) -> Result<i64> {
        Ok(crate::host::read_i64(&self.count)?)
    }

    /// Marks the buffer as holding a valid estimate (after loading a reference `feature_cov`, which
    /// has no counter) by setting the counter to `n` if it is zero.
    pub fn mark_initialised(&self, n: i64) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let n = Tensor::f_full([], n, (Kind::Int64, self.count.device()))?;
        let new = n.f_where_self(&self.count.f_eq(0)?, &self.count)?;
        self.count.shallow_clone().f_copy_(&new)?;
        Ok(())
    }

    /// Back to the state before any update: zeros and a zero counter (value() = identity).
    pub fn reset(&self) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let _ = self.value.shallow_clone().f_zero_()?;
        let _ = self.count.shallow_clone().f_zero_()?;
        Ok(())
    }

    pub fn momentum(&self) -> f64 {
        self.momentum
    }

    /// Names this buffer among a model's ([`Captured::id`]): the address of its storage, which
    /// the in-place updates never move.
    pub fn id(&self) -> usize {
        self.value.data_ptr() as usize
    }

    /// The [`id`](Self::id) of the update counter beside the buffer.
    pub fn count_id(&self) -> usize {
        self.count.data_ptr() as usize
    }

    /// The buffer's side k.
    pub fn size(&self) -> i64 {
        self.value.size()[0]
    }
}

/// An update recorded inside a [`capture`] scope.
#[derive(Debug)]
pub struct Captured {
    /// The [`EmaCovariance::id`] of the buffer it was meant for.
    pub id: usize,
    /// The batch statistic, detached, of the buffer's kind: (k, k).
    pub stat: Tensor,
}

thread_local! {
    static CAPTURED: RefCell<Option<Vec<Captured>>> = const { RefCell::new(None) };
}

/// While alive, [`EmaCovariance::update`] on this thread records instead of folding.
#[derive(Debug)]
pub struct Capture {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Starts recording this thread's EMA updates; an error if a capture is already running (the
/// records of the outer one would be split).
pub fn capture() -> Result<Capture> {
    CAPTURED.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_some() {
            return Err(Error::InvalidArgument {
                op: "ema::capture",
                msg: "a capture is already running on this thread".into(),
            });
        }
        *c = Some(Vec::new());
        Ok(Capture {
            _not_send: std::marker::PhantomData,
        })
    })
}

impl Capture {
    /// Ends the capture: the recorded updates, in the order they were made.
    pub fn finish(self) -> Vec<Captured> {
        CAPTURED.with(|c| c.borrow_mut().take().unwrap_or_default())
    }
}

impl Drop for Capture {
    /// A capture abandoned by an error records nothing further.
    fn drop(&mut self) {
        CAPTURED.with(|c| c.borrow_mut().take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ono_testing::{assert_close, seeded};
    use tch::nn::VarStore;
    use tch::Device;

    #[test]
    fn first_update_copies_then_blends_with_momentum() {
        seeded(3);
        let vs = VarStore::new(Device::Cpu);
        let ema = EmaCovariance::new(&vs.root(), "feature_cov", 3, 0.9, Kind::Double).unwrap();
        let eye = Tensor::eye(3, (Kind::Double, Device::Cpu));
        assert_close(&ema.value().unwrap(), &eye, 0.0, 0.0);
        assert_eq!(ema.count().unwrap(), 0);

        let a = Tensor::randn([3, 3], (Kind::Double, Device::Cpu));
        let b = Tensor::randn([3, 3], (Kind::Double, Device::Cpu));
        ema.update(&a).unwrap();
        assert_close(&ema.value().unwrap(), &a, 0.0, 0.0);
        ema.update(&b).unwrap();
        assert_close(&ema.value().unwrap(), &(&a * 0.9 + &b * 0.1), 1e-15, 1e-15);
        assert_eq!(ema.count().unwrap(), 2);
    }

    #[test]
    fn buffer_is_saved_but_never_trainable() {
        seeded(4);
        let vs = VarStore::new(Device::Cpu);
        let ema = EmaCovariance::new(&vs.root(), "feature_cov", 2, 0.5, Kind::Float).unwrap();
        let batch = Tensor::ones([2, 2], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        ema.update(&(&batch * 2.0)).unwrap();
        assert!(vs.trainable_variables().is_empty());
        let vars = vs.variables();
        // The in-place update reached the VarStore's copy (what a checkpoint writes).
        assert_close(
            &vars["feature_cov"],
            &Tensor::full([2, 2], 2.0, (Kind::Float, Device::Cpu)),
            0.0,
            0.0,
        );
        assert_eq!(vars["feature_cov_count"].int64_value(&[]), 1);
        assert!(!ema.buffer().requires_grad());
    }

    /// A captured update leaves the buffer alone; folding the records afterwards, in order,
    /// gives exactly the buffer of updating directly.
    #[test]
    fn captured_updates_fold_to_the_direct_ones() {
        seeded(5);
        let vs = VarStore::new(Device::Cpu);
        let direct = EmaCovariance::new(&vs.root(), "a", 3, 0.9, Kind::Double).unwrap();
        let deferred = EmaCovariance::new(&vs.root(), "b", 3, 0.9, Kind::Double).unwrap();
        let stats: Vec<Tensor> = (0..3)
            .map(|_| Tensor::randn([3, 3], (Kind::Double, Device::Cpu)))
            .collect();
        stats.iter().for_each(|s| direct.update(s).unwrap());
        let capture = capture().unwrap();
        assert!(super::capture().is_err());
        stats.iter().for_each(|s| deferred.update(s).unwrap());
        let records = capture.finish();
        assert_eq!(deferred.count().unwrap(), 0);
        assert_eq!(records.len(), 3);
        assert!(records.iter().all(|r| r.id == deferred.id()));
        assert_ne!(direct.id(), deferred.id());
        records
            .iter()
            .for_each(|r| deferred.update(&r.stat).unwrap());
        assert_close(
            &deferred.value().unwrap(),
            &direct.value().unwrap(),
            0.0,
            0.0,
        );
        assert_eq!(deferred.count().unwrap(), 3);
        // A dropped capture stops recording.
        drop(super::capture().unwrap());
        deferred.update(&stats[0]).unwrap();
        assert_eq!(deferred.count().unwrap(), 4);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let vs = VarStore::new(Device::Cpu);
        assert!(EmaCovariance::new(&vs.root(), "a", 2, 1.5, Kind::Float).is_err());
        assert!(EmaCovariance::new(&vs.root(), "b", 0, 0.9, Kind::Float).is_err());
        let ema = EmaCovariance::new(&vs.root(), "c", 2, 0.9, Kind::Float).unwrap();
        let wrong = Tensor::zeros([3, 3], (Kind::Float, Device::Cpu));
        assert!(matches!(ema.update(&wrong), Err(Error::Shape { .. })));
    }

    #[test]
    fn marking_a_loaded_buffer_initialised_keeps_its_value() {
        let vs = VarStore::new(Device::Cpu);
        let ema = EmaCovariance::new(&vs.root(), "feature_cov", 2, 0.9, Kind::Float).unwrap();
        let loaded = Tensor::from_slice(&[2.0f32, 0.5, 0.5, 1.0]).view([2, 2]);
        tch::no_grad(|| ema.value.shallow_clone().copy_(&loaded));
        ema.mark_initialised(1).unwrap();
        assert_close(&ema.value().unwrap(), &loaded, 0.0, 0.0);
        ema.mark_initialised(7).unwrap();
        assert_eq!(ema.count().unwrap(), 1);
    }
}
