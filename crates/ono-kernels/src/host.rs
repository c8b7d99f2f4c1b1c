//! The one door from device tensors back to the host.
//!
//! On a GPU every read of a tensor's values waits for the queued kernels: a read inside a training
//! step stalls the pipeline once per read. Library code of ono-kernels, ono-nn, ono-models and
//! ono-train reads values only through these functions (a source scan in
//! `crates/ono-train/tests/host_reads.rs` refuses any other), so that counting them here tells
//! whether a step reads: the trainer's steps must not, its logging intervals read once.
//!
//! The count is kept per thread (a step runs on one thread; parallel tests do not disturb each
//! other's counts) and in a process total.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use tch::{Kind, TchError, Tensor};

thread_local! {
    static THREAD_READS: Cell<u64> = const { Cell::new(0) };
}
static TOTAL_READS: AtomicU64 = AtomicU64::new(0);

fn count() {
    THREAD_READS.with(|c| c.set(c.get() + 1));
    TOTAL_READS.fetch_add(1, Ordering::Relaxed);
}

/// Host reads made by this thread so far.
pub fn host_reads() -> u64 {
    THREAD_READS.with(Cell::get)
}

/// Host reads made by every thread of the process so far.
pub fn host_reads_total() -> u64 {
    TOTAL_READS.load(Ordering::Relaxed)
}

/// The value of a one-element tensor as f64.
pub fn read_f64(t: &Tensor) -> Result<f64, TchError> {
    count();
    t.f_double_value(&[])
}

/// The value of a one-element integer (or bool) tensor as i64.
pub fn read_i64(t: &Tensor) -> Result<i64, TchError> {
    count();
    t.f_int64_value(&[])
}

/// The value of a one-element tensor as a bool (non-zero is true).
pub fn read_bool(t: &Tensor) -> Result<bool, TchError> {
    count();
    Ok(t.f_to_kind(Kind::Bool)?.f_int64_value(&[])? != 0)
}

/// Every element, flattened, as f64.
pub fn to_vec_f64(t: &Tensor) -> Result<Vec<f64>, TchError> {
    count();
    Vec::<f64>::try_from(t.f_to_kind(Kind::Double)?.f_reshape([-1])?)
}

/// Every element, flattened, as f32.
pub fn to_vec_f32(t: &Tensor) -> Result<Vec<f32>, TchError> {
    count();
    Vec::<f32>::try_from(t.f_to_kind(Kind::Float)?.f_reshape([-1])?)
}

/// Every element, flattened, as i64.
pub fn to_vec_i64(t: &Tensor) -> Result<Vec<i64>, TchError> {
    count();
    Vec::<i64>::try_from(t.f_to_kind(Kind::Int64)?.f_reshape([-1])?)
}

/// Every element, flattened, as bool.
pub fn to_vec_bool(t: &Tensor) -> Result<Vec<bool>, TchError> {
    count();
    Vec::<bool>::try_from(t.f_to_kind(Kind::Bool)?.f_reshape([-1])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_counted_once() {
        let before = host_reads();
        let t = Tensor::from_slice(&[1.5f32, -2.0, 0.0]);
        assert_eq!(to_vec_f64(&t).unwrap(), vec![1.5, -2.0, 0.0]);
        assert_eq!(to_vec_bool(&t).unwrap(), vec![true, true, false]);
        assert_eq!(to_vec_i64(&t).unwrap(), vec![1, -2, 0]);
        assert_eq!(read_f64(&t.get(1)).unwrap(), -2.0);
        assert!(!read_bool(&t.get(2)).unwrap());
        assert_eq!(read_i64(&t.get(0).to_kind(Kind::Int64)).unwrap(), 1);
        // Building tensors and computing on them is no read.
        let _ = (&t * 2.0).sum(Kind::Float);
        assert_eq!(host_reads() - before, 6);
        assert!(host_reads_total() >= 6);
    }
}
