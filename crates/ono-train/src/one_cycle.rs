//! The one-cycle learning-rate policy, identical to PyTorch's `torch.optim.lr_scheduler.OneCycleLR`
//! (two and three phases, cosine and linear annealing, Adam β1 cycling).
//!
//! The schedule is a pure function of the step, so a resumed run needs only the step number.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How the rate moves between the ends of a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Anneal {
    /// Half a cosine (`anneal_strategy='cos'`, the default).
    #[default]
    Cos,
    /// A straight line (`anneal_strategy='linear'`).
    Linear,
}

/// The constructor arguments of `OneCycleLR`, with its defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OneCycleConfig {
    /// The peak learning rate.
    pub max_lr: f64,
    /// Optimizer steps in the whole run (`epochs × steps_per_epoch` in the reference scripts).
    pub total_steps: u64,
    /// Fraction of the steps spent warming up.
    pub pct_start: f64,
    /// Cosine or linear annealing.
    pub anneal_strategy: Anneal,
    /// Whether β1 is cycled inversely to the rate.
    pub cycle_momentum: bool,
    /// β1 at the peak rate.
    pub base_momentum: f64,
    /// β1 at the start and the end.
    pub max_momentum: f64,
    /// initial lr = max_lr / div_factor.
    pub div_factor: f64,
    /// final lr = initial lr / final_div_factor.
    pub final_div_factor: f64,
    /// Go back down to the initial rate before the final annealing (fast.ai's original policy).
    pub three_phase: bool,
}

impl Default for OneCycleConfig {
    fn default() -> Self {
        Self {
            max_lr: 1e-3,
            total_steps: 1,
            pct_start: 0.3,
            anneal_strategy: Anneal::Cos,
            cycle_momentum: true,
            base_momentum: 0.85,
            max_momentum: 0.95,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Phase {
    end_step: f64,
    start_lr: f64,
    end_lr: f64,
    start_momentum: f64,
    end_momentum: f64,
}

/// A validated one-cycle schedule.
#[derive(Debug, Clone)]
pub struct OneCycle {
    config: OneCycleConfig,
    phases: Vec<Phase>,
}

/// What the optimizer uses at one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepValues {
    /// The learning rate.
    pub lr: f64,
    /// Adam's β1 when momentum is cycled.
    pub beta1: Option<f64>,
}

impl OneCycleConfig {
    /// Checks the arguments as `OneCycleLR.__init__` does; errors name the bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |k: &str, m: String| Err(Error::config(format!("schedule.{k}"), m));
        if self.total_steps == 0 {
            return bad("total_steps", "must be positive".into());
        }
        if !(self.pct_start >= 0.0 && self.pct_start <= 1.0) {
            return bad(
                "pct_start",
                format!("must be in [0, 1], got {}", self.pct_start),
            );
        }
        for (k, v) in [
            ("max_lr", self.max_lr),
            ("div_factor", self.div_factor),
            ("final_div_factor", self.final_div_factor),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(k, format!("must be finite and positive, got {v}"));
            }
        }
        for (k, v) in [
            ("base_momentum", self.base_momentum),
            ("max_momentum", self.max_momentum),
        ] {
            if !(v.is_finite() && (0.0..1.0).contains(&v)) {
                return bad(k, format!("must be in [0, 1), got {v}"));
            }
        }
        Ok(())
    }

    /// The schedule, after validation.
    pub fn build(&self) -> Result<OneCycle> {
        self.validate()?;
        let initial = self.max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        let n = self.total_steps as f64;
        let (hi_m, lo_m) = (self.max_momentum, self.base_momentum);
        let phase = |end_step, start_lr, end_lr, start_momentum, end_momentum| Phase {
            end_step,
            start_lr,
            end_lr,
            start_momentum,
            end_momentum,
        };
        // The end steps are floats computed exactly as PyTorch does; comparisons use them as is.
        let phases = if self.three_phase {
            vec![
                phase(self.pct_start * n - 1.0, initial, self.max_lr, hi_m, lo_m),
                phase(
                    2.0 * self.pct_start * n - 2.0,
                    self.max_lr,
                    initial,
                    lo_m,
                    hi_m,
                ),
                phase(n - 1.0, initial, min, hi_m, hi_m),
            ]
        } else {
            vec![
                phase(self.pct_start * n - 1.0, initial, self.max_lr, hi_m, lo_m),
                phase(n - 1.0, self.max_lr, min, lo_m, hi_m),
            ]
        };
        Ok(OneCycle {
            config: self.clone(),
            phases,
        })
    }
}

impl OneCycle {
    /// The configuration it was built from.
    pub fn config(&self) -> &OneCycleConfig {
        &self.config
    }

    /// The values in force for optimizer step `step` (0-based), as PyTorch's `get_lr` after
    /// `step` calls of `scheduler.step()`. Stepping past `total_steps` is an error, as in PyTorch.
    pub fn at(&self, step: u64) -> Result<StepValues> {
        if step > self.config.total_steps {
            return Err(Error::config(
                "schedule.total_steps",
                format!(
                    "step {step} is past the schedule's {} steps (more epochs or batches than it was built for?)",
                    self.config.total_steps
                ),
            ));
        }
        let s = step as f64;
        let mut start = 0.0;
        let last = self.phases.len() - 1;
        for (i, p) in self.phases.iter().enumerate() {
            if s <= p.end_step || i == last {
                let pct = (s - start) / (p.end_step - start);
                let lr = self.anneal(p.start_lr, p.end_lr, pct);
                let beta1 = self
                    .config
                    .cycle_momentum
                    .then(|| self.anneal(p.start_momentum, p.end_momentum, pct));
                return Ok(StepValues { lr, beta1 });
            }
            start = p.end_step;
        }
        unreachable!("the last phase always matches")
    }

    fn anneal(&self, start: f64, end: f64, pct: f64) -> f64 {
        match self.config.anneal_strategy {
            Anneal::Cos => end + (start - end) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0),
            Anneal::Linear => (end - start) * pct + start,
        }
    }
}
