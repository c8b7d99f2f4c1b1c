//! The cells' numbers: each cell's value read from its experiment's outcome, or the mean over
//! the experiment's seeds where it runs with several, and how the report writes them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::execute::{Outcome, Status};
use super::plan::{Cell, Experiment, Plan, Source, Work, SEEN_STEPS};

/// What a cell shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Shown {
    /// Its value; the mean over the seeds that were measured where it has several.
    Value(f64),
    /// The paper's "–".
    Unsupported,
    /// Run by the paper profile only ("Cells only in the paper profile" says why).
    PaperOnly,
    /// Its experiment did not run to the end (missing data, failure), with why.
    Missing(String),
}

/// One seed's value of a cell (`summary.json` lists them where a cell has several seeds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedValue {
    pub experiment: String,
    pub seed: u64,
    pub value: Option<f64>,
}

/// A cell's value with its seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub shown: Shown,
    /// Every seed's value, where the cell's experiment runs with several seeds; empty otherwise.
    pub seeds: Vec<SeedValue>,
}

impl Reading {
    /// The value, if there is one.
    pub fn value(&self) -> Option<f64> {
        match self.shown {
            Shown::Value(v) => Some(v),
            _ => None,
        }
    }

    /// Half the range of the measured seeds' values, where two or more were measured.
    pub fn spread(&self) -> Option<f64> {
        spread(&self.measured())
    }

    fn measured(&self) -> Vec<f64> {
        self.seeds.iter().filter_map(|s| s.value).collect()
    }

    /// The value as the report's tables show it: `0.0123 ± 0.0004 (2 seeds)` where it has
    /// several seeds, `0.0123 (1 of 2 seeds)` where only one of them was measured.
    pub fn format(&self, source: &Source) -> String {
        match &self.shown {
            Shown::Value(v) => {
                let measured = self.measured();
                // The spread to the value's own decimals (errors: 4 where `num` writes 4).
                let sp = |s: f64| match source {
                    Source::StepTime(_) | Source::Params(_) | Source::PeakMemory(_) => {
                        num(source, s)
                    }
                    _ if v.abs() >= 1e-3 => format!("{s:.4}"),
                    _ => format!("{s:.2e}"),
                };
                let v = num(source, *v);
                let (n, m) = (self.seeds.len(), measured.len());
                match spread(&measured) {
                    _ if n <= 1 => v,
                    Some(s) if m == n => format!("{v} ± {} ({n} seeds)", sp(s)),
                    Some(s) => format!("{v} ± {} ({m} of {n} seeds)", sp(s)),
                    None => format!("{v} ({m} of {n} seeds)"),
                }
            }
            Shown::Unsupported => "–".into(),
            Shown::PaperOnly => "(paper profile)".into(),
            // The file and where it is published are said once, under "Missing data".
            Shown::Missing(m) if m.starts_with("no data") => "(no data)".into(),
            Shown::Missing(m) => format!("({})", m.replace('|', "/")),
        }
    }
}

/// The mean of `xs`, if any.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Half the range of `xs`: with two seeds, mean ± spread are the two values.
pub fn spread(xs: &[f64]) -> Option<f64> {
    (xs.len() >= 2).then(|| {
        let (lo, hi) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(*x), hi.max(*x))
            });
        (hi - lo) / 2.0
    })
}

/// The plan's cells read from the outcomes of its experiments.
pub struct Readings<'a> {
    pub plan: &'a Plan,
    by_id: HashMap<&'a str, &'a Outcome>,
}

impl<'a> Readings<'a> {
    pub fn new(plan: &'a Plan, outcomes: &'a [Outcome]) -> Self {
        Self {
            plan,
            by_id: outcomes.iter().map(|o| (o.id.as_str(), o)).collect(),
        }
    }

    /// The outcome of experiment `id`, if it ran.
    pub fn outcome(&self, id: &str) -> Option<&'a Outcome> {
        self.by_id.get(id).copied()
    }

    /// Experiment `id` of the plan.
    pub fn experiment(&self, id: &str) -> Option<&'a Experiment> {
        self.plan.experiments.iter().find(|e| e.id == id)
    }

    /// The outcome of `id`, or why it has none.
    pub fn done(&self, id: &str) -> Result<&'a Outcome, String> {
        let o = self.outcome(id).ok_or_else(|| "not run".to_string())?;
        match &o.status {
            Status::Done => Ok(o),
            Status::MissingData(m) => Err(format!("no data: {m}")),
            Status::Failed(m) => Err(format!("failed: {m}")),
        }
    }

    /// A number of experiment `id` and its replicates: each run's value, or why it has none.
    pub fn seeds(&self, id: &str, pick: impl Fn(&Outcome) -> Option<f64>) -> Vec<SeedRun> {
        let mut runs: Vec<(String, u64)> = self
            .plan
            .seeds_of(id)
            .map(|e| (e.id.clone(), seed(e)))
            .collect();
        if runs.is_empty() {
            // Not an experiment of this plan: its outcome alone.
            runs.push((id.to_string(), 0));
        }
        runs.into_iter()
            .map(|(experiment, seed)| {
                let value = self
                    .done(&experiment)
                    .and_then(|o| pick(o).ok_or_else(|| "not measured".to_string()));
                SeedRun {
                    experiment,
                    seed,
                    value,
                }
            })
            .collect()
    }

    /// What `cell` shows.
    pub fn cell(&self, cell: &Cell) -> Reading {
        match cell.source.experiment() {
            None => Reading {
                shown: match cell.source {
                    Source::PaperOnly(_) => Shown::PaperOnly,
                    _ => Shown::Unsupported,
                },
                seeds: Vec::new(),
            },
            Some(id) => Reading::of(&self.seeds(id, |o| of_outcome(&cell.source, o))),
        }
    }
}

/// One run of a number: its experiment, seed, and value or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedRun {
    pub experiment: String,
    pub seed: u64,
    pub value: Result<f64, String>,
}

impl Reading {
    /// The mean of the runs that have a value (else why none has), with every seed's value
    /// where there are several.
    pub fn of(runs: &[SeedRun]) -> Self {
        let measured: Vec<f64> = runs.iter().filter_map(|r| r.value.clone().ok()).collect();
        let shown = match mean(&measured) {
            Some(m) => Shown::Value(m),
            None => Shown::Missing(
                runs.iter()
                    .find_map(|r| r.value.clone().err())
                    .unwrap_or_else(|| "not measured".into()),
            ),
        };
        let seeds = if runs.len() > 1 {
            runs.iter()
                .map(|r| SeedValue {
                    experiment: r.experiment.clone(),
                    seed: r.seed,
                    value: r.value.clone().ok(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Reading { shown, seeds }
    }
}

/// The seed a trained experiment runs with (0 for a timed step).
fn seed(e: &Experiment) -> u64 {
    match &e.work {
        Work::Train { config, .. } | Work::TimeRun { config, .. } => config.seed,
        Work::Measure(_) => 0,
    }
}

/// The number `source` reads from an outcome of its experiment.
pub fn of_outcome(source: &Source, o: &Outcome) -> Option<f64> {
    let seen = SEEN_STEPS as usize;
    match source {
        Source::Unsupported | Source::PaperOnly(_) => None,
        Source::TestError(_) => o.test_rel_l2,
        Source::AtStride(_, r) => o.at_stride.get(&r.to_string()).copied(),
        Source::AtResolution(_, s) => o.at_resolution.get(&s.to_string()).copied(),
        Source::Seen(_) => mean(&o.per_step[..seen.min(o.per_step.len())]),
        Source::Unseen(_) => o.per_step.get(seen..).and_then(mean),
        Source::StepTime(_) => o.step_s,
        Source::Params(_) => o.params.map(|p| p as f64),
        Source::PeakMemory(_) => o.peak_mb,
    }
}

/// A value of a cell read from `source` in the paper's style: errors with four significant
/// digits, seconds per step, parameters with thousands separators, megabytes.
pub fn num(source: &Source, v: f64) -> String {
    match source {
        Source::StepTime(_) => format!("{v:.3} s"),
        Source::Params(_) => {
            let s = format!("{}", v.round() as i64);
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            out
        }
        Source::PeakMemory(_) => format!("{v:.0}"),
        _ if v.abs() >= 1e-3 => format!("{v:.4}"),
        _ => format!("{v:.2e}"),
    }
}

/// An error as the report writes it.
pub fn err(v: f64) -> String {
    num(&Source::TestError(String::new()), v)
}
