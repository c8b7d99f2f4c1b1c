//! Checks whose verdict can stay on the device: deferred errors for training steps.
//!
//! A check inside a model (finite input, a Cholesky factor that exists) needs a host read to
//! decide whether to fail, and on a GPU a read inside a training step stalls it. Library code
//! therefore states its checks through [`check`] / [`require`] with a site name and the error it
//! would raise, and the caller decides when the verdict is read:
//!
//! - outside a [`Scope`] (inference, tests, any caller that did not ask otherwise) the check reads
//!   its verdict at once (one host read) and fails with the typed error, as a plain `if` would;
//! - inside a [`Scope`] entered on a [`Monitor`] (the trainer enters one per optimizer step) the
//!   verdict is folded into the monitor on the device (a few scalar kernels, no read) and the call
//!   succeeds; the computation goes on with what the site produced (the Cholesky gives NaN, never a
//!   silently wrong factor). The owner reads every site at once with [`Monitor::check`] or
//!   together with its own values ([`Monitor::codes`] + [`Monitor::failure`]), at its logging
//!   interval, and gets the first failure: its step, its site and the typed error.
//!
//! Each site keeps one int64 on the device: the smallest `step · 64 + fault` of its failures, so
//! the earliest failing step survives any number of later steps at no memory cost.

use std::cell::RefCell;
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, MutexGuard};

use tch::{Kind, TchError, Tensor};

use crate::host;

/// Fault codes are 1..FAULT_CODES (0 means no fault).
pub const FAULT_CODES: i64 = 64;
/// What a site holds while it has not failed (a power of two: exact in f64 when a caller reads
/// the codes together with f64 values).
pub const NO_FAILURE: i64 = 1 << 62;

type DeferredError = Box<dyn StdError + Send + Sync>;
type MakeError = Box<dyn Fn(i64) -> DeferredError + Send + Sync>;

struct Site {
    name: &'static str,
    first: Tensor,
    make: MakeError,
}

#[derive(Default)]
struct Sites(Vec<Site>);

/// Collects the verdicts of the checks made inside its scopes, on the device.
#[derive(Clone, Default)]
pub struct Monitor {
    sites: Arc<Mutex<Sites>>,
    /// `step · 64` of the current scope as an int64 0-dim tensor on the sites' device (made at
    /// the first check), with the step it holds: the checks read the step from the device, so
    /// a captured step's checks label each replay with its own step.
    label: Arc<Mutex<Option<(Tensor, u64)>>>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.lock().0.iter().map(|s| s.name).collect();
        f.debug_struct("Monitor").field("sites", &names).finish()
    }
}

/// The first failure a [`Monitor`] saw.
#[derive(Debug)]
pub struct Failure {
    /// The step given to [`Monitor::enter`] when it happened.
    pub step: u64,
    /// The site's name.
    pub site: &'static str,
    /// The error the site would have raised at once, typed as the site's crate types it
    /// (downcast to recover it).
    pub error: DeferredError,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {}", self.step, self.error)
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<(Monitor, u64)>> = const { RefCell::new(None) };
}

/// While alive, checks on this thread are folded into a monitor instead of read (see the module
/// documentation). Dropping it restores what was active before.
#[must_use = "checks are deferred only while the scope is alive"]
pub struct Scope {
    previous: Option<(Monitor, u64)>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ACTIVE.with(|a| *a.borrow_mut() = previous);
    }
}

impl Monitor {
    /// A monitor with no site yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Sites> {
        // A panic while folding leaves the sites consistent (each fold replaces one tensor).
        self.sites.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Defers the checks of this thread into this monitor, labelled `step`, until the scope is
    /// dropped.
    pub fn enter(&self, step: u64) -> Scope {
        let mut label = self.label.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, at)) = label.as_mut() {
            if *at != step {
                // A fill carries its value in the launch: no upload, no wait.
                let _ = t.f_fill_(step as i64 * FAULT_CODES);
                *at = step;
            }
        }
        drop(label);
        let previous = ACTIVE.with(|a| a.borrow_mut().replace((self.clone(), step)));
        Scope { previous }
    }

    /// Every site's `step · 64 + fault` of its first failure, or [`NO_FAILURE`], as an int64
    /// vector on the sites' device; `None` before any site was checked. For a caller that reads it
    /// together with other values and decodes with [`Monitor::failure`].
    pub fn codes(&self) -> Result<Option<Tensor>, TchError> {
        let sites = self.lock();
        if sites.0.is_empty() {
            return Ok(None);
        }
        let firsts: Vec<&Tensor> = sites.0.iter().map(|s| &s.first).collect();
        Ok(Some(Tensor::f_stack(&firsts, 0)?))
    }

    /// The earliest failure in `codes` (values of [`Monitor::codes`], read back); at the same step
    /// the site checked first wins.
    pub fn failure(&self, codes: &[i64]) -> Option<Failure> {
        let sites = self.lock();
        let (i, &v) = codes
            .iter()
            .enumerate()
            .filter(|(_, &v)| v < NO_FAILURE)
            .min_by_key(|(i, &v)| (v / FAULT_CODES, *i))?;
        let site = sites.0.get(i)?;
        Some(Failure {
            step: (v / FAULT_CODES) as u64,
            site: site.name,
            error: (site.make)(v % FAULT_CODES),
        })
    }

    /// Reads every site (one host read; none when no site was checked) and returns the first
    /// failure.
    pub fn check(&self) -> Result<Option<Failure>, TchError> {
        match self.codes()? {
            None => Ok(None),
            Some(codes) => Ok(self.failure(&host::to_vec_i64(&codes)?)),
        }
    }

    fn fold(
        &self,
        name: &'static str,
        step: u64,
        fault: &Tensor,
        make: impl FnOnce() -> MakeError,
    ) -> Result<(), TchError> {
        let _guard = tch::no_grad_guard();
        let fault = fault.f_to_kind(Kind::Int64)?.f_clamp(0, FAULT_CODES - 1)?;
        let label = {
            let mut label = self.label.lock().unwrap_or_else(|p| p.into_inner());
            match label.as_ref() {
                Some((t, at)) if *at == step && t.device() == fault.device() => t.shallow_clone(),
                _ => {
                    let t = Tensor::f_scalar_tensor(
                        (step as i64 * FAULT_CODES) as f64,
                        (Kind::Int64, fault.device()),
                    )?;
                    *label = Some((t.shallow_clone(), step));
                    t
                }
            }
        };
        let candidate = fault
            .f_add(&label)?
            .f_masked_fill(&fault.f_eq(0)?, NO_FAILURE)?;
        let mut sites = self.lock();
        match sites.0.iter_mut().find(|s| s.name == name) {
            // In place: a captured step keeps folding into the same tensor.
            Some(site) => {
                site.first.f_copy_(&site.first.f_minimum(&candidate)?)?;
            }
            None => sites.0.push(Site {
                name,
                first: candidate,
                make: make(),
            }),
        }
        Ok(())
    }
}

/// Whether checks on this thread are deferred right now.
pub fn is_deferred() -> bool {
    ACTIVE.with(|a| a.borrow().is_some())
}

/// A check with several possible faults: `fault` is a 0-dim integer tensor, 0 when all is well,
/// else a code in 1..64 that `make` turns into the error. At once outside a scope (one host read),
/// folded into the active monitor inside one (no read); `site` names the check there.
pub fn check<E, F>(site: &'static str, fault: &Tensor, make: F) -> Result<(), E>
where
    E: StdError + Send + Sync + From<TchError> + 'static,
    F: Fn(i64) -> E + Send + Sync + 'static,
{
    match ACTIVE.with(|a| a.borrow().clone()) {
        None => match host::read_i64(fault)? {
            0 => Ok(()),
            code => Err(make(code)),
        },
        Some((monitor, step)) => Ok(monitor.fold(site, step, fault, || {
            Box::new(move |code| Box::new(make(code)) as DeferredError)
        })?),
    }
}

/// A yes/no check: `ok` is a 0-dim bool tensor; when false the error is `make()`. See [`check`].
pub fn require<E, F>(site: &'static str, ok: &Tensor, make: F) -> Result<(), E>
where
    E: StdError + Send + Sync + From<TchError> + 'static,
    F: Fn() -> E + Send + Sync + 'static,
{
    if !is_deferred() {
        return if host::read_bool(ok)? {
            Ok(())
        } else {
            Err(make())
        };
    }
    check(site, &ok.f_logical_not()?, move |_| make())
}

/// [`require`] that every element of `t` is finite.
pub fn require_finite<E, F>(site: &'static str, t: &Tensor, make: F) -> Result<(), E>
where
    E: StdError + Send + Sync + From<TchError> + 'static,
    F: Fn() -> E + Send + Sync + 'static,
{
    require(site, &t.f_isfinite()?.f_all()?, make)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn flag(v: i64) -> Tensor {
        Tensor::from(v)
    }

    fn nan_error(code: i64) -> Error {
        Error::InvalidArgument {
            op: "test",
            msg: format!("fault {code}"),
        }
    }

    #[test]
    fn outside_a_scope_a_check_fails_at_once() {
        assert!(!is_deferred());
        let before = host::host_reads();
        assert!(check("a", &flag(0), nan_error).is_ok());
        let e = check("a", &flag(3), nan_error).unwrap_err();
        assert!(e.to_string().contains("fault 3"), "{e}");
        assert_eq!(host::host_reads() - before, 2);
    }

    #[test]
    fn inside_a_scope_the_first_failure_is_kept_on_the_device() {
        let monitor = Monitor::new();
        assert!(monitor.check().unwrap().is_none());
        let before = host::host_reads();
        for step in 0..6u64 {
            let _scope = monitor.enter(step);
            assert!(is_deferred());
            // Site "a" fails at steps 2 and 4, site "b" at step 4 and 5.
            let fa = if step == 2 || step == 4 { 5 } else { 0 };
            check("a", &flag(fa), nan_error).unwrap();
            let ok = Tensor::from(step < 4);
            require("b", &ok, || nan_error(9)).unwrap();
        }
        assert!(!is_deferred());
        assert_eq!(host::host_reads(), before, "no read inside the scopes");
        let f = monitor.check().unwrap().expect("a failure");
        assert_eq!(host::host_reads() - before, 1);
        assert_eq!((f.step, f.site), (2, "a"));
        assert!(f.error.to_string().contains("fault 5"), "{f}");
        let typed = f.error.downcast::<Error>().expect("the site's own type");
        assert!(matches!(*typed, Error::InvalidArgument { .. }));

        // A site first in checking order wins a tie.
        let m = Monitor::new();
        {
            let _s = m.enter(7);
            require_finite("x", &Tensor::from(f64::NAN), || nan_error(1)).unwrap();
            check("y", &flag(2), nan_error).unwrap();
        }
        let f = m.check().unwrap().unwrap();
        assert_eq!((f.step, f.site), (7, "x"));
    }

    #[test]
    fn scopes_nest_and_restore() {
        let (outer, inner) = (Monitor::new(), Monitor::new());
        let _o = outer.enter(1);
        {
            let _i = inner.enter(2);
            check("s", &flag(1), nan_error).unwrap();
        }
        check("s", &flag(1), nan_error).unwrap();
        drop(_o);
        assert_eq!(inner.check().unwrap().unwrap().step, 2);
        assert_eq!(outer.check().unwrap().unwrap().step, 1);
        assert!(check("s", &flag(1), nan_error).is_err());
    }
}
