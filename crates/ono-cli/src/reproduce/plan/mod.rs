//! The ONO paper's tables as experiments: which model is trained on which benchmark with which
//! settings, which step is timed, and which number of which experiment fills each cell of each
//! table. One experiment can fill several cells (Geo-FNO is FNO on regular grids; Table 1's ONO
//! runs are the Nyström and orthonormal rows of Tables 5 and 6 and ONO-8 of Table 7).
//!
//! Experiments are data: every trained experiment is a typed [`TrainConfig`], derived from the
//! committed base experiment of its model × benchmark ([`bases`], `experiments/paper/`) by typed
//! edits: the reduced profiles' sizes ([`reduced`]) and each table's own changes ([`tables`], one
//! function per table).

mod bases;
mod reduced;
pub mod rehearsal;
mod tables;

use std::path::PathBuf;

use anyhow::{bail, Result};

use super::papers::Paper;
use ono_data::benchmarks::Benchmark;
use ono_train::config::{ModelSection, TrainConfig};
use serde::{Deserialize, Serialize};

pub use bases::base;
pub use reduced::{shrink_model, Reduced, Sizes, NEURALOP_DARCY_ZERO_SHOT};
pub use tables::{plan, BenchmarkRuns, SEEN_STEPS};

/// How big and on which data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The paper's settings on the published files (a GPU job).
    Paper,
    /// Every table at reduced size, for a CPU: the neuraloperator Darcy set and data the project
    /// generates (the sizes: [`Reduced`]).
    Quick,
    /// A few steps per experiment on tiny generated sets: keeps the command working (tests).
    Smoke,
}

impl std::str::FromStr for Profile {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "paper" => Ok(Self::Paper),
            "quick" => Ok(Self::Quick),
            "smoke" => Ok(Self::Smoke),
            _ => bail!("--profile: `{s}` is not quick, paper or smoke"),
        }
    }
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Self::Paper => "paper",
            Self::Quick => "quick",
            Self::Smoke => "smoke",
        }
    }
}

/// The models of the tables (rows), by the name `--models` takes.
pub const MODELS: [&str; 9] = [
    "fno",
    "galerkin",
    "geofno",
    "ufno",
    "ffno",
    "lsm",
    "gnot",
    "ono",
    "transolver",
];

/// The row label of a model.
pub fn model_label(model: &str) -> &'static str {
    match model {
        "fno" => "FNO",
        "galerkin" => "Galerkin",
        "geofno" => "Geo-FNO",
        "ufno" => "U-FNO",
        "ffno" => "F-FNO",
        "lsm" => "LSM",
        "gnot" => "GNOT",
        "ono" => "ONO (ours)",
        "transolver" => "Transolver (extra row)",
        _ => "?",
    }
}

/// A benchmark of Table 1 (and the ablations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Ns2d,
    Airfoil,
    Pipe,
    Darcy,
    Elasticity,
    Plasticity,
}

impl Task {
    pub const ALL: [Task; 6] = [
        Task::Ns2d,
        Task::Airfoil,
        Task::Pipe,
        Task::Darcy,
        Task::Elasticity,
        Task::Plasticity,
    ];

    /// The benchmark it is (one of [`Benchmark::PAPER`]).
    pub fn benchmark(self) -> Benchmark {
        match self {
            Task::Ns2d => Benchmark::Ns2d,
            Task::Airfoil => Benchmark::Airfoil,
            Task::Pipe => Benchmark::Pipe,
            Task::Darcy => Benchmark::Darcy,
            Task::Elasticity => Benchmark::Elasticity,
            Task::Plasticity => Benchmark::Plasticity,
        }
    }

    /// The benchmark's name in experiment files (and the folder of its base experiments).
    pub fn key(self) -> &'static str {
        self.benchmark().name()
    }

    /// Its column in Table 1.
    fn column(self) -> usize {
        Task::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    /// Whether the quick profile has data of its own for it (the others need the published
    /// files in the data folder).
    pub fn generated(self) -> bool {
        matches!(self, Task::Ns2d | Task::Darcy | Task::Elasticity)
    }
}

/// What an experiment does.
#[derive(Debug, Clone)]
pub enum Work {
    /// `ono train` of an experiment, then its evaluations.
    Train {
        /// The experiment (its `output_dir` is the run folder, `.`, when it is written there).
        config: Box<TrainConfig>,
        /// Also evaluate the result at these strides of the run's own benchmark.
        strides: Vec<usize>,
        /// And with its test set at these resolutions (`neuralop_darcy`: 32, zero-shot).
        test_resolutions: Vec<usize>,
    },
    /// `ono bench-step` in a process of its own (its peak memory is the process's).
    Measure(Measure),
    /// `ono bench-train` of an experiment in a process of its own: `steps` batches timed on its
    /// own data, and the process's peak memory.
    TimeRun {
        config: Box<TrainConfig>,
        steps: usize,
    },
}

/// A timed training step: `ono bench-step`'s arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// The architecture, its preset and the fields changed in it (`--overrides`).
    #[serde(flatten)]
    pub model: ModelSection,
    /// Whose input shapes (an ONO preset's benchmark).
    pub shapes: String,
    pub batch: i64,
    pub steps: usize,
}

/// One experiment: its folder under the output directory, its model (for `--models`) and work.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub id: String,
    pub model: String,
    pub work: Work,
    /// Where its data come from, for the report.
    pub data_note: String,
    /// The experiment this one repeats with another seed (its id is `<that id>@seed<k>`); the
    /// cells that read that experiment show the mean over it and its replicates.
    pub replicate_of: Option<String>,
}

/// Why a reduced profile leaves out a cell that the paper profile runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaperOnly {
    /// The Galerkin Transformer's Darcy recipe reads a fine grid beside the training one (its
    /// derivative targets and scaler grids); the reduced Darcy, the neuraloperator set, has one.
    NeedsFineGrid,
    /// Geo-FNO's Elasticity model takes the mesh coordinates alone (the geometry is its input);
    /// the point-cloud stand-in's input is a field at the points, which it has no channel for.
    CoordinatesOnly,
    /// U-FNO's and LSM's U-Net halves the grid four times and, on a time-dependent task,
    /// normalizes with InstanceNorm, which the reference refuses on the single cell a grid under
    /// 32² leaves.
    GridTooCoarse,
    /// Measured not to learn the task within the profile's budget (docs/results.md, "Sizing
    /// the new quick profile"): its cell would report a starved model, not the architecture.
    NotLearnedInBudget,
    /// The Fourier-type or softmax attention's n × n products at this many points: on a CPU
    /// they cost more than the profile's whole budget (the Galerkin Transformer paper's
    /// Burgers at n = 2048).
    QuadraticInPoints,
}

impl PaperOnly {
    /// The report's sentence.
    pub fn why(self) -> &'static str {
        match self {
            PaperOnly::NeedsFineGrid => {
                "the recipe reads a fine grid beside the training one, which this profile's Darcy set does not have"
            }
            PaperOnly::GridTooCoarse => {
                "the U-Net's coarsest level is a single cell on this profile's grid, where its instance norm has nothing to normalize (the reference refuses it too)"
            }
            PaperOnly::CoordinatesOnly => {
                "the model takes the mesh coordinates alone, and the stand-in's input is a field at the points"
            }
            PaperOnly::QuadraticInPoints => {
                "the attention's n × n products at this many points cost more on a CPU than this profile's whole budget (the same row runs at the smaller n)"
            }
            PaperOnly::NotLearnedInBudget => {
                "measured not to get below 0.6× the mean field within this profile's budget (docs/results.md, \"Sizing the new quick profile\"): left to the paper profile rather than starved"
            }
        }
    }
}

/// Which number of which experiment a cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// The paper's "–": the model cannot handle the benchmark.
    Unsupported,
    /// Run by the paper profile only, for this reason.
    PaperOnly(PaperOnly),
    /// The test relative L2 of a trained experiment.
    TestError(String),
    /// Its test error at another subsampling stride.
    AtStride(String, usize),
    /// Its test error on the test set at another resolution.
    AtResolution(String, usize),
    /// The mean per-step error over the trained time steps (seen) or the later ones (unseen).
    Seen(String),
    Unseen(String),
    /// Seconds per training step.
    StepTime(String),
    /// Trainable parameters.
    Params(String),
    /// Peak memory in MB.
    PeakMemory(String),
}

impl Source {
    /// The experiment it reads.
    pub fn experiment(&self) -> Option<&str> {
        match self {
            Source::Unsupported | Source::PaperOnly(_) => None,
            Source::TestError(e)
            | Source::AtStride(e, _)
            | Source::AtResolution(e, _)
            | Source::Seen(e)
            | Source::Unseen(e)
            | Source::StepTime(e)
            | Source::Params(e)
            | Source::PeakMemory(e) => Some(e),
        }
    }
}

/// One cell of one table.
#[derive(Debug, Clone)]
pub struct Cell {
    /// 1–8.
    pub table: usize,
    pub row: String,
    pub column: String,
    /// The row's model (for `--models`).
    pub model: String,
    pub paper: Option<f64>,
    pub source: Source,
}

/// All the experiments and cells of a profile, before filtering.
#[derive(Default)]
pub struct Plan {
    pub experiments: Vec<Experiment>,
    pub cells: Vec<Cell>,
}

impl Plan {
    /// Adds an experiment unless one of that id is there (several cells read one experiment).
    pub(crate) fn add(&mut self, id: &str, model: &str, mut work: Work, data_note: String) {
        if let Work::Train { config, .. } | Work::TimeRun { config, .. } = &mut work {
            // Its file lives in its run folder: `ono train <folder>/experiment.toml --resume`
            // continues this very run.
            config.output_dir = PathBuf::from(".");
        }
        if !self.experiments.iter().any(|e| e.id == id) {
            self.experiments.push(Experiment {
                id: id.to_string(),
                model: model.to_string(),
                work,
                data_note,
                replicate_of: None,
            });
        }
    }

    /// Runs the trained experiment `id` with `seeds` seeds in all: `id` itself (its own seed,
    /// so that its results folder still resumes) and the replicates `<id>@seed<k>` for k in
    /// 1..seeds, the identical experiment at seed `seed + k`.
    fn add_seeds(&mut self, id: &str, seeds: usize) {
        let Some(e) = self.experiments.iter().find(|e| e.id == id).cloned() else {
            return;
        };
        let Work::Train {
            config,
            strides,
            test_resolutions,
        } = e.work
        else {
            return;
        };
        for k in 1..seeds {
            let replicate = format!("{id}@seed{k}");
            if self.experiments.iter().any(|e| e.id == replicate) {
                continue;
            }
            let mut config = config.clone();
            config.seed = config.seed.wrapping_add(k as u64);
            self.experiments.push(Experiment {
                id: replicate,
                model: e.model.clone(),
                work: Work::Train {
                    config,
                    strides: strides.clone(),
                    test_resolutions: test_resolutions.clone(),
                },
                data_note: e.data_note.clone(),
                replicate_of: Some(id.to_string()),
            });
        }
    }

    /// The runs of experiment `id`: itself, then its replicates of other seeds.
    pub fn seeds_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Experiment> + 'a {
        self.experiments
            .iter()
            .filter(move |e| e.id == id || e.replicate_of.as_deref() == Some(id))
    }

    /// Adds a cell.
    pub(crate) fn cell(
        &mut self,
        table: usize,
        row: &str,
        column: &str,
        model: &str,
        paper: Option<f64>,
        source: Source,
    ) {
        self.cells.push(Cell {
            table,
            row: row.to_string(),
            column: column.to_string(),
            model: model.to_string(),
            paper,
            source,
        });
    }
}

/// The folders the experiment files read from.
pub struct DataPaths {
    /// The published files (`--data-dir`).
    pub published: PathBuf,
    /// The neuraloperator 0.3.0 wheel's files (`--neuralop-dir`; `cargo xtask data fetch`).
    pub neuralop: PathBuf,
    /// The quick and smoke profiles' generated files.
    pub generated: PathBuf,
}

impl DataPaths {
    /// The generated point-cloud Darcy set, the stand-in for Elasticity.
    pub fn cloud(&self) -> PathBuf {
        self.generated.join("darcy_cloud.safetensors")
    }
}

/// The cells of `reference` (the paper plan) that `this` plan does not run: absent from it (by
/// table, row and column), or "–" in it where the reference has an experiment.
pub fn only_in<'a>(reference: &'a Plan, this: &Plan) -> Vec<&'a Cell> {
    reference
        .cells
        .iter()
        .filter(|r| r.source != Source::Unsupported)
        .filter(|r| {
            !this.cells.iter().any(|c| {
                (c.table, &c.row, &c.column) == (r.table, &r.row, &r.column)
                    && c.source.experiment().is_some()
            })
        })
        .collect()
}

/// Keeps the cells of `tables` and `models` (all when empty) and the experiments they read.
/// Unknown names (of `paper`'s tables and rows) are errors that list the known ones.
pub fn select(paper: Paper, plan: Plan, tables: &[String], models: &[String]) -> Result<Plan> {
    let known: Vec<String> = paper.tables().iter().map(|t| format!("table{t}")).collect();
    for t in tables {
        if !known.contains(t) {
            bail!("--only: unknown table `{t}` (known: {})", known.join(", "));
        }
    }
    for m in models {
        if !paper.models().contains(&m.as_str()) {
            bail!(
                "--models: unknown model `{m}` (known: {})",
                paper.models().join(", ")
            );
        }
    }
    let cells: Vec<Cell> = plan
        .cells
        .into_iter()
        .filter(|c| tables.is_empty() || tables.contains(&format!("table{}", c.table)))
        .filter(|c| models.is_empty() || models.contains(&c.model))
        .collect();
    let experiments = plan
        .experiments
        .into_iter()
        .filter(|e| {
            let read = e.replicate_of.as_deref().unwrap_or(&e.id);
            cells.iter().any(|c| c.source.experiment() == Some(read))
        })
        .collect();
    Ok(Plan { experiments, cells })
}

/// Parses a comma-separated list (`table1,table3`).
pub fn list(s: Option<&str>) -> Vec<String> {
    s.map(|s| {
        s.split(',')
            .map(|x| x.trim().to_ascii_lowercase())
            .filter(|x| !x.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests;
