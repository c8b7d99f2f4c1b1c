//! Sums over a sample's points when its points are split across processes ("point sharding").
//!
//! # Contract
//! - Outside a [`scope`] nothing is split: [`sum`] and [`max`] return their input and
//!   [`refuse`] passes. Every kernel behaves as it always has.
//! - Inside a scope, each process holds a contiguous share of every sample's points (possibly
//!   none), the same batch and the same parameters. A kernel that sums over points calls [`sum`]
//!   on its local sum: the result is the sum over all processes, the same on each. Its backward
//!   sums the processes' incoming gradients, because each process's gradient at that replicated
//!   value is its share (from its own points downstream); so the gradient reaching every local
//!   input is whole, and a parameter's gradient on a process is its share, which the trainer
//!   sums over the processes as data parallelism does. The loss, replicated too, is then
//!   back-propagated with weight 1/P on each process.
//! - A kernel that needs every point at once (an FFT, a softmax over points, landmarks over all
//!   points) calls [`refuse`] first, which names it.
//! - Every process calls the same functions in the same order with tensors of one shape, as any
//!   collective needs: only the point dimension of the local tensors differs.

use std::cell::RefCell;
use std::rc::Rc;

use tch::Tensor;

use crate::{Error, Result};

/// The processes that share a sample's points: the collectives [`sum`] and [`max`] run on
/// (implemented over torch's c10d by ono-train).
pub trait PointGroup {
    /// Σ over the processes of `t` (the same shape on each), as a new tensor, with a backward
    /// that sums the processes' incoming gradients.
    fn sum(&self, t: &Tensor) -> Result<Tensor>;
    /// The elementwise maximum over the processes of `t`, without a gradient.
    fn max(&self, t: &Tensor) -> Result<Tensor>;
    /// How many processes share the points.
    fn world(&self) -> usize;
}

thread_local! {
    static GROUP: RefCell<Option<Rc<dyn PointGroup>>> = const { RefCell::new(None) };
}

/// Runs `f` with the points split over `group`; the previous setting comes back afterwards,
/// also when `f` panics.
pub fn scope<R>(group: Rc<dyn PointGroup>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rc<dyn PointGroup>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            GROUP.with(|g| *g.borrow_mut() = previous);
        }
    }
    let _restore = Restore(GROUP.with(|g| g.borrow_mut().replace(group)));
    f()
}

fn current() -> Option<Rc<dyn PointGroup>> {
    GROUP.with(|g| g.borrow().clone())
}

/// Whether the points are split (inside a [`scope`]).
pub fn split() -> bool {
    current().is_some()
}

/// The sum of `t` over the processes sharing the points; `t` itself when they are not split.
pub fn sum(t: &Tensor) -> Result<Tensor> {
    match current() {
        None => Ok(t.shallow_clone()),
        Some(g) => g.sum(t),
    }
}

/// The elementwise maximum of `t` over the processes, without a gradient; `t` when the points
/// are not split.
pub fn max(t: &Tensor) -> Result<Tensor> {
    match current() {
        None => Ok(t.shallow_clone()),
        Some(g) => g.max(t),
    }
}

/// Refuses `op` when the points are split: it needs every point of a sample at once, for
/// `why`.
pub fn refuse(op: &'static str, why: &str) -> Result<()> {
    if split() {
        return Err(Error::NeedsEveryPoint {
            op,
            why: why.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for two processes whose other one holds the same points as this one (`sum`
    /// doubles) and zeros (`max` clamps at 0).
    struct Doubled;

    impl PointGroup for Doubled {
        fn sum(&self, t: &Tensor) -> Result<Tensor> {
            Ok(t.f_mul_scalar(2.0)?)
        }
        fn max(&self, t: &Tensor) -> Result<Tensor> {
            Ok(t.f_clamp_min(0.0)?)
        }
        fn world(&self) -> usize {
            2
        }
    }

    #[test]
    fn outside_a_scope_nothing_is_split_and_the_scope_ends_with_its_closure() {
        let t = Tensor::from_slice(&[1.0f64, -3.0]);
        assert!(!split());
        assert!(sum(&t).unwrap().equal(&t));
        assert!(max(&t).unwrap().equal(&t));
        refuse("fft", "a transform over the whole grid").unwrap();
        scope(Rc::new(Doubled), || {
            assert!(split());
            assert_eq!(
                Vec::<f64>::try_from(&sum(&t).unwrap()).unwrap(),
                [2.0, -6.0]
            );
            assert_eq!(Vec::<f64>::try_from(&max(&t).unwrap()).unwrap(), [1.0, 0.0]);
            let e = refuse("fft", "a transform over the whole grid").unwrap_err();
            assert_eq!(
                e.to_string(),
                "fft needs every point of a sample at once (a transform over the whole grid) and \
                 cannot run with the points split across processes"
            );
        });
        assert!(!split());
        let caught = std::panic::catch_unwind(|| scope(Rc::new(Doubled), || panic!("inside")));
        assert!(caught.is_err());
        assert!(!split());
    }
}
