//! Samples made in parallel: the one work-sharing loop of the generators.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::{Error, Result};

/// [`map_indexed`], calling `progress(finished, n)` from the worker threads as each index
/// finishes (in any order; `finished` counts them).
pub fn map_indexed_with_progress<T: Send>(
    n: usize,
    workers: usize,
    f: impl Fn(usize) -> Result<T> + Sync,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<Vec<T>> {
    let finished = AtomicUsize::new(0);
    map_indexed(n, workers, |i| {
        let r = f(i);
        progress(finished.fetch_add(1, Ordering::Relaxed) + 1, n);
        r
    })
}

/// `f(0), …, f(n − 1)` on `workers` scoped threads (0: one per available core), in index order.
///
/// Indices are handed out one at a time, so uneven sample costs balance. After the first failure
/// no new index is started, and the error returned is the one of the lowest failed index, so the
/// outcome does not depend on the scheduling. A panic in `f` is resumed on the caller's thread.
pub fn map_indexed<T: Send>(
    n: usize,
    workers: usize,
    f: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let workers = match workers {
        0 => std::thread::available_parallelism().map_or(1, |w| w.get()),
        w => w,
    }
    .min(n);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let done: Vec<Vec<(usize, Result<T>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        let r = f(i);
                        if r.is_err() {
                            failed.store(true, Ordering::Relaxed);
                        }
                        done.push((i, r));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut first_err: Option<(usize, Error)> = None;
    for (i, r) in done.into_iter().flatten() {
        match r {
            Ok(v) => slots[i] = Some(v),
            Err(e) => {
                if first_err.as_ref().is_none_or(|(j, _)| i < *j) {
                    first_err = Some((i, e));
                }
            }
        }
    }
    if let Some((_, e)) = first_err {
        return Err(e);
    }
    // Without a failure every index below n was taken and finished.
    Ok(slots.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_index_order() {
        for workers in [0, 1, 3, 16] {
            let v = map_indexed(37, workers, |i| Ok(i * i)).unwrap();
            assert_eq!(v, (0..37).map(|i| i * i).collect::<Vec<_>>());
        }
        assert!(map_indexed(0, 4, Ok).unwrap().is_empty());
    }

    #[test]
    fn progress_counts_every_finished_index_once() {
        for workers in [1, 4] {
            let seen = std::sync::Mutex::new(Vec::new());
            let v = map_indexed_with_progress(
                23,
                workers,
                |i| Ok(i + 1),
                |done, n| seen.lock().unwrap().push((done, n)),
            )
            .unwrap();
            assert_eq!(v, (1..=23).collect::<Vec<_>>());
            let mut seen = seen.into_inner().unwrap();
            seen.sort_unstable();
            assert_eq!(seen, (1..=23).map(|d| (d, 23)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn the_lowest_failed_index_is_reported() {
        for workers in [1, 2, 4] {
            let r = map_indexed(50, workers, |i| {
                if i % 7 == 5 {
                    Err(Error::Invalid(format!("sample {i}")))
                } else {
                    Ok(i)
                }
            });
            match r {
                Err(Error::Invalid(m)) => assert_eq!(m, "sample 5"),
                other => panic!("expected the failure of sample 5, got {other:?}"),
            }
        }
    }
}
