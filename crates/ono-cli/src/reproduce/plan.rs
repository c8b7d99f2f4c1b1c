//! The ONO paper's tables as experiments: which model is trained on which benchmark with which
//! settings (an experiment file that `ono train` runs), which step is timed, and which number of
//! which experiment fills each cell of each table. One experiment can fill several cells (Geo-FNO
//! is FNO on regular grids; Table 1's ONO runs are the Nyström and orthonormal rows of Tables 5
//! and 6 and ONO-8 of Table 7).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use toml::{Table, Value};

use super::paper;

/// How big and on which data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The paper's settings on the published files (a GPU job).
    Paper,
    /// Every table at reduced size on data the project generates; under an hour on 2 CPU cores.
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

/// The tables, by the name `--only` takes.
pub const TABLES: [&str; 8] = [
    "table1", "table2", "table3", "table4", "table5", "table6", "table7", "table8",
];

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

    /// The benchmark's name in experiment files.
    pub fn key(self) -> &'static str {
        match self {
            Task::Ns2d => "ns2d",
            Task::Airfoil => "airfoil",
            Task::Pipe => "pipe",
            Task::Darcy => "darcy",
            Task::Elasticity => "elasticity",
            Task::Plasticity => "plasticity",
        }
    }

    /// Its column in Table 1.
    fn column(self) -> usize {
        Task::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    /// The Neural-Solver-Library script's preset name and batch size.
    fn nsl(self) -> (&'static str, i64) {
        match self {
            Task::Ns2d => ("ns", 2),
            Task::Airfoil => ("airfoil", 8),
            Task::Pipe => ("pipe", 4),
            Task::Darcy => ("darcy", 4),
            Task::Elasticity => ("elasticity", 1),
            Task::Plasticity => ("plasticity", 8),
        }
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
    /// `ono train` of an experiment file, then its evaluations.
    Train {
        /// The experiment file (its `output_dir` is set when it is written).
        config: Table,
        /// Also evaluate the result at these strides of the run's own benchmark.
        strides: Vec<usize>,
    },
    /// `ono bench-step` in a process of its own (its peak memory is the process's).
    Measure(Measure),
}

/// A timed training step: `ono bench-step`'s arguments.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measure {
    pub arch: String,
    pub preset: String,
    pub shapes: String,
    pub batch: i64,
    pub overrides: Table,
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
}

/// Which number of which experiment a cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// The paper's "–": the model cannot handle the benchmark.
    Unsupported,
    /// The test relative L2 of a trained experiment.
    TestError(String),
    /// Its test error at another subsampling stride.
    AtStride(String, usize),
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
            Source::Unsupported => None,
            Source::TestError(e)
            | Source::AtStride(e, _)
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
pub struct Plan {
    pub experiments: Vec<Experiment>,
    pub cells: Vec<Cell>,
}

/// The folders the experiment files read from.
pub struct DataPaths {
    /// The published files (`--data-dir`).
    pub published: PathBuf,
    /// The quick and smoke profiles' generated files.
    pub generated: PathBuf,
}

impl DataPaths {
    /// The generated point-cloud Darcy set, the stand-in for Elasticity.
    pub fn cloud(&self) -> PathBuf {
        self.generated.join("darcy_cloud.safetensors")
    }
}

/// Sizes of the reduced profiles.
#[derive(Debug, Clone, Copy)]
pub struct Reduced {
    /// (train, test) samples and epochs of Darcy, and the stride of Table 1's Darcy on the 421
    /// grid (Table 3 trains at stride 10, 43 × 43, on the same samples).
    pub darcy: (i64, i64, u64),
    pub darcy_r: i64,
    /// Table 3's test samples (the first of Darcy's; its finest grid is 421 × 421).
    pub superres_test: i64,
    /// (train, test) samples and epochs of NS2d (10 frames in, 10 out) and its stride on the
    /// 64 × 64 grid.
    pub ns2d: (i64, i64, u64),
    pub ns2d_r: i64,
    /// The same for the point-cloud stand-in of Elasticity.
    pub cloud: (i64, i64, u64),
    /// The same for a published benchmark found in the data folder.
    pub published: (i64, i64, u64),
    /// Points of each point-cloud sample.
    pub cloud_points: i64,
    /// Timed steps of Table 2.
    pub timed_steps: usize,
    /// Model widths: the smoke profile's are tiny.
    pub tiny: bool,
}

impl Reduced {
    pub fn of(profile: Profile) -> Option<Self> {
        match profile {
            Profile::Paper => None,
            Profile::Quick => Some(Self {
                darcy: (64, 32, 32),
                darcy_r: 14,
                superres_test: 16,
                ns2d: (48, 8, 8),
                ns2d_r: 2,
                cloud: (64, 32, 24),
                published: (64, 16, 4),
                cloud_points: 600,
                timed_steps: 2,
                tiny: false,
            }),
            Profile::Smoke => Some(Self {
                darcy: (4, 2, 2),
                darcy_r: 14,
                superres_test: 2,
                ns2d: (2, 1, 1),
                ns2d_r: 2,
                cloud: (4, 2, 1),
                published: (2, 1, 1),
                cloud_points: 64,
                timed_steps: 1,
                tiny: true,
            }),
        }
    }
}

/// The training resolution of Table 3 (421 / 10 → 43) and the test strides (61, 85, 141, 211,
/// 421).
pub const SUPERRES_TRAIN_STRIDE: usize = 10;
pub const SUPERRES_STRIDES: [usize; 5] = [7, 5, 3, 2, 1];

/// Time steps trained in Table 4 (`time_gen.py`: frames 10–17 of 10 rolled out).
pub const SEEN_STEPS: i64 = 8;

/// The committed experiment files the paper profile starts from, by (model, task).
fn committed(model: &str, task: Task) -> Option<&'static str> {
    Some(match (model, task) {
        ("galerkin", Task::Darcy) => {
            include_str!("../../../../experiments/galerkin/darcy_141_43.toml")
        }
        ("galerkin", Task::Ns2d) => include_str!("../../../../experiments/galerkin/ns2d.toml"),
        ("gnot", Task::Darcy) => include_str!("../../../../experiments/gnot/darcy.toml"),
        ("gnot", Task::Ns2d) => include_str!("../../../../experiments/gnot/ns2d.toml"),
        ("gnot", Task::Airfoil) => include_str!("../../../../experiments/gnot/airfoil.toml"),
        ("gnot", Task::Elasticity) => include_str!("../../../../experiments/gnot/elasticity.toml"),
        _ => return None,
    })
}

fn parse(text: &str) -> Table {
    // The texts are this file's own or committed files checked by tests/experiment_files.rs.
    text.parse::<Table>()
        .unwrap_or_else(|e| panic!("a built-in experiment does not parse: {e}\n{text}"))
}

/// The FNO scripts' optimisation: Adam with L2 weight decay 1e-4, StepLR per epoch, no clipping.
fn fno_recipe(step_size: u64, batch: i64, epochs: u64) -> String {
    format!(
        "epochs = {epochs}\nbatch_size = {batch}\n[optimizer]\nkind = \"adam\"\nlr = 1e-3\nweight_decay = 1e-4\nmax_grad_norm = 0.0\n[schedule]\nkind = \"step\"\nstep_size = {step_size}\ngamma = 0.5\n"
    )
}

/// The paper-profile experiment of `model` on `task` (its own recipe), or `None` where the paper
/// has "–".
fn paper_experiment(model: &str, task: Task) -> Option<Table> {
    if let Some(text) = committed(model, task) {
        return Some(parse(text));
    }
    let b = task.key();
    let text = match model {
        "ono" => {
            let preset = match task {
                Task::Ns2d => "ns2d",
                _ => b,
            };
            let batch = preset
                .parse::<ono_models::Preset>()
                .map(|p| p.batch_size())
                .unwrap_or(8);
            format!("seed = 0\nepochs = 500\nbatch_size = {batch}\n[model]\narch = \"ono\"\npreset = \"{preset}\"\n[data]\nbenchmark = \"{b}\"\n")
        }
        "fno" | "geofno" => {
            // Geo-FNO is FNO on the regular grids (the paper's own note); on the meshes it is
            // FNO on the deformed mesh's index grid, and on Elasticity's point cloud the
            // learned deformation.
            let (arch, preset, regime, step, tf) = match (model, task) {
                (_, Task::Darcy) => ("fno2d", "darcy", "", 100, ""),
                (_, Task::Ns2d) => ("fno2d", "ns", "", 100, "teacher_forcing = false\n"),
                ("geofno", Task::Airfoil) => ("fno2d", "airfoil", "", 100, ""),
                ("geofno", Task::Pipe) => ("fno2d", "pipe", "", 100, ""),
                ("geofno", Task::Elasticity) => ("geofno", "elasticity", "", 50, ""),
                ("geofno", Task::Plasticity) => {
                    ("fno3d", "plasticity", "regime = \"space_time\"\n", 100, "")
                }
                _ => return None,
            };
            let epochs = if task == Task::Elasticity { 200 } else { 500 };
            format!(
                "seed = 0\n{}[model]\narch = \"{arch}\"\npreset = \"{preset}\"\n[data]\nbenchmark = \"{b}\"\nlayout = \"fno\"\n{regime}{tf}",
                fno_recipe(step, 20, epochs)
            )
        }
        "ufno" | "ffno" | "lsm" | "transolver" => {
            let (preset, batch) = task.nsl();
            // NSL's run.py: AdamW 1e-3, weight decay 1e-5, OneCycle, no clipping; the scripts'
            // own changes on top (docs/models.md, LSM and Transolver "Training as the
            // reference").
            let extra = match (model, task) {
                ("lsm", Task::Darcy) => "[optimizer]\nkind = \"adam\"\nlr = 5e-4\nweight_decay = 1e-4\nmax_grad_norm = 0.0\n[schedule]\nkind = \"step\"\nstep_size = 100\ngamma = 0.5\n",
                ("lsm", Task::Ns2d) => "[optimizer]\nlr = 5e-4\nweight_decay = 1e-4\nmax_grad_norm = 0.0\n[schedule]\nkind = \"step\"\nstep_size = 100\ngamma = 0.5\n",
                (_, Task::Airfoil) => "[optimizer]\nweight_decay = 1e-4\nmax_grad_norm = 0.1\n",
                _ => "[optimizer]\nmax_grad_norm = 0.0\n",
            };
            // LSM's Darcy script: batch 20, Gaussian normalizers, no derivative term.
            let lsm_darcy = model == "lsm" && task == Task::Darcy;
            let (batch, layout, loss) = if lsm_darcy {
                (
                    20,
                    "normalize_x = \"gaussian\"\nnormalize_y = \"gaussian\"\n",
                    "[loss]\nderivative_alpha = 0.0\n",
                )
            } else {
                (batch, "", "")
            };
            format!("seed = 0\nepochs = 500\nbatch_size = {batch}\n[model]\narch = \"{model}\"\npreset = \"{preset}\"\n[data]\nbenchmark = \"{b}\"\n{layout}{extra}{loss}")
        }
        _ => return None,
    };
    Some(parse(&text))
}

/// Sets `table[path...] = value`, creating tables on the way.
pub fn set(table: &mut Table, path: &[&str], value: Value) {
    let (last, parents) = path.split_last().expect("a non-empty key path");
    let mut t = table;
    for p in parents {
        t = t
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .expect("a table on the key path");
    }
    t.insert(last.to_string(), value);
}

fn section<'a>(table: &'a mut Table, name: &str) -> &'a mut Table {
    table
        .entry(name.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .expect("a table")
}

fn path_value(p: &Path) -> Value {
    Value::String(p.display().to_string())
}

/// Smaller models for the reduced profiles: the same architecture and block types, fewer and
/// narrower layers.
fn reduced_model(model: &str, arch: &str, tiny: bool) -> Vec<(&'static str, Value)> {
    use Value::{Array, Integer as I};
    let w = |quick: i64, small: i64| I(if tiny { small } else { quick });
    match (model, arch) {
        // The presets' Nyström block costs about 10 s per step on 2 CPU cores at any size (its
        // 256 landmarks); the reduced profiles use the linear transformer block, the paper's
        // other choice, and Table 5 compares the two.
        (_, "ono") => vec![
            ("nn_block", Value::String("linear_transformer".into())),
            ("n_hidden", w(64, 8)),
            ("n_head", w(4, 2)),
            ("psi_dim", w(8, 4)),
            ("n_layers", w(3, 1)),
        ],
        (_, "fno2d") => vec![
            ("width", w(20, 4)),
            ("modes", Array(vec![w(10, 4), w(10, 4)])),
        ],
        (_, "fno3d") => vec![
            ("width", w(12, 4)),
            ("modes", Array(vec![w(8, 2), w(8, 2), w(6, 2)])),
        ],
        (_, "geofno") => vec![
            ("width", w(20, 4)),
            ("modes", Array(vec![w(10, 4), w(10, 4)])),
        ],
        (_, "ufno") => vec![("n_hidden", w(16, 4)), ("modes", w(10, 4))],
        (_, "ffno") => vec![
            ("n_hidden", w(32, 4)),
            ("modes", w(10, 4)),
            ("n_layers", w(4, 1)),
        ],
        (_, "lsm") => vec![("n_hidden", w(16, 4)), ("n_heads", w(4, 2))],
        (_, "transolver") => vec![
            ("n_hidden", w(64, 8)),
            ("n_heads", w(4, 2)),
            ("n_layers", w(3, 1)),
            ("slice_num", w(32, 4)),
        ],
        (_, "gnot") => vec![
            ("n_hidden", w(64, 8)),
            ("n_layers", w(2, 1)),
            ("n_head", w(4, 2)),
            ("n_inner", w(2, 2)),
        ],
        (_, "galerkin") => vec![
            ("n_hidden", w(64, 8)),
            ("n_head", w(4, 2)),
            ("num_encoder_layers", w(3, 1)),
            ("dim_feedforward", w(128, 16)),
        ],
        _ => vec![],
    }
}

/// The Galerkin Transformer's fine and coarse grids for a `fine` × `fine` Darcy grid: the coarse
/// one about half as fine, interpolated to exactly (the scale-factor path misses most sizes).
fn galerkin_grids(fine: i64) -> Table {
    let mut g = Table::new();
    g.insert("fine".into(), Value::Integer(fine));
    g.insert("coarse".into(), Value::Integer((fine + 1) / 2));
    g.insert("scale_factor".into(), Value::Boolean(false));
    g
}

/// The reduced profile's version of a paper experiment: its data replaced by the generated set
/// (or the published benchmark at fewer samples), fewer epochs, a smaller model, one batch size
/// per benchmark (so that the models see the same number of steps).
fn reduce(mut t: Table, model: &str, task: Task, r: &Reduced, data: &DataPaths) -> Table {
    let arch = t
        .get("model")
        .and_then(|m| m.get("arch"))
        .and_then(Value::as_str)
        .unwrap_or("ono")
        .to_string();
    let (ntrain, ntest, epochs, batch) = match task {
        Task::Darcy => (r.darcy.0, r.darcy.1, r.darcy.2, 8),
        Task::Ns2d => (r.ns2d.0, r.ns2d.1, r.ns2d.2, 2),
        Task::Elasticity => (r.cloud.0, r.cloud.1, r.cloud.2, 8),
        _ => (r.published.0, r.published.1, r.published.2, 4),
    };
    t.insert("epochs".into(), Value::Integer(epochs as i64));
    t.insert("batch_size".into(), Value::Integer(batch.min(ntrain)));
    let d = section(&mut t, "data");
    for k in ["benchmark", "data_dir", "path", "r", "ntrain", "ntest"] {
        d.remove(k);
    }
    match task {
        Task::Elasticity => {
            // The point-cloud stand-in is a dataset file with its own split, and no benchmark
            // layout.
            d.insert("path".into(), path_value(&data.cloud()));
            d.remove("layout");
            // A dataset file has no recipe, so no normalizers: the coefficient (3 or 12) and
            // the solution (about 1e-2) would then start the models' outputs two orders of
            // magnitude off, which a few hundred steps do not undo. ONO's Elasticity recipe
            // normalizes as here (UnitTransformer, per point index).
            for k in ["normalize_x", "normalize_y"] {
                d.entry(k).or_insert_with(|| Value::String("unit".into()));
            }
        }
        _ => {
            let dir = if task.generated() {
                &data.generated
            } else {
                &data.published
            };
            d.insert("benchmark".into(), Value::String(task.key().into()));
            d.insert("data_dir".into(), path_value(dir));
            d.insert("ntrain".into(), Value::Integer(ntrain));
            d.insert("ntest".into(), Value::Integer(ntest));
            match task {
                Task::Darcy => {
                    d.insert("r".into(), Value::Integer(r.darcy_r));
                }
                Task::Ns2d => {
                    d.insert("r".into(), Value::Integer(r.ns2d_r));
                }
                _ => {}
            }
        }
    }
    let reduced = reduced_model(model, &arch, r.tiny);
    let m = section(&mut t, "model");
    let o = section(m, "overrides");
    for (k, v) in reduced {
        // Keep the preset's layer count where it is already smaller.
        o.insert(k.into(), v);
    }
    if arch == "galerkin" && task == Task::Darcy {
        // The preset's 141 → 43 scaler grids, at the reduced training grid.
        let fine = 420 / r.darcy_r + 1;
        o.insert("scaler_grids".into(), Value::Table(galerkin_grids(fine)));
    }
    t
}

/// The data a task's experiments read, in words.
fn data_note(profile: Profile, task: Task, r: Option<&Reduced>) -> String {
    match (profile, r) {
        (Profile::Paper, _) | (_, None) => format!("published {} files", task.key()),
        (_, Some(r)) => match task {
            Task::Darcy => format!(
                "generated Darcy (`ono data gen darcy`, 421², r = {} → {s}²), {} train / {} test, {} epochs",
                r.darcy_r, r.darcy.0, r.darcy.1, r.darcy.2, s = 420 / r.darcy_r + 1
            ),
            Task::Ns2d => format!(
                "generated NS2d (`ono data gen ns2d --profile reduced`, 64², r = {} → {s}²), {} train / {} test, {} epochs",
                r.ns2d_r, r.ns2d.0, r.ns2d.1, r.ns2d.2, s = 64 / r.ns2d_r
            ),
            Task::Elasticity => format!(
                "stand-in: generated Darcy on {} random points per sample (`ono data darcy --points`), {} train / {} test, {} epochs",
                r.cloud_points, r.cloud.0, r.cloud.1, r.cloud.2
            ),
            _ => format!(
                "published {} files if in the data folder, {} train / {} test, {} epochs",
                task.key(),
                r.published.0,
                r.published.1,
                r.published.2
            ),
        },
    }
}

/// The whole plan of a profile.
pub fn plan(profile: Profile, data: &DataPaths) -> Plan {
    let reduced = Reduced::of(profile);
    let mut experiments: Vec<Experiment> = Vec::new();
    let mut cells = Vec::new();
    let build = |model: &str, task: Task| -> Option<Table> {
        let t = paper_experiment(model, task)?;
        Some(match &reduced {
            None => {
                let mut t = t;
                let d = section(&mut t, "data");
                if d.contains_key("benchmark") {
                    d.insert("data_dir".into(), path_value(&data.published));
                }
                t
            }
            Some(r) => reduce(t, model, task, r, data),
        })
    };
    let add = |experiments: &mut Vec<Experiment>, id: String, model: &str, work, note| {
        if !experiments.iter().any(|e| e.id == id) {
            experiments.push(Experiment {
                id,
                model: model.into(),
                work,
                data_note: note,
            });
        }
    };
    let train = |config| Work::Train {
        config,
        strides: Vec::new(),
    };

    // Table 1.
    for model in MODELS {
        let paper_row = paper::table1(model);
        for task in Task::ALL {
            let col = task.column();
            let owner = match (model, task) {
                ("geofno", Task::Darcy | Task::Ns2d) => "fno",
                _ => model,
            };
            // Geo-FNO's Elasticity model (`elas_geofno.py`) takes the mesh coordinates alone
            // (the geometry is its input); the stand-in's input is a field at the points, which
            // it has no channel for.
            let stand_in_only_coordinates =
                reduced.is_some() && model == "geofno" && task == Task::Elasticity;
            let source = match build(owner, task) {
                Some(cfg)
                    if (paper_row[col].is_some() || model == "transolver")
                        && !stand_in_only_coordinates =>
                {
                    let id = format!("{}/{owner}", task.key());
                    add(
                        &mut experiments,
                        id.clone(),
                        owner,
                        train(cfg),
                        data_note(profile, task, reduced.as_ref()),
                    );
                    Source::TestError(id)
                }
                _ => Source::Unsupported,
            };
            cells.push(Cell {
                table: 1,
                row: model_label(model).into(),
                column: paper::TABLE1_COLUMNS[col].into(),
                model: model.into(),
                paper: paper_row[col],
                source,
            });
        }
    }

    // Table 2 and 8: one timed step per model at Darcy's shapes, batch 8; FNO, LSM and ONO
    // with 4 layers, ONO with k = 16, width 128 and the linear transformer block.
    let (shapes, steps) = match &reduced {
        None => ("darcy", 5),
        Some(r) => ("super_resolution", r.timed_steps),
    };
    for model in MODELS {
        let owner = if model == "geofno" { "fno" } else { model };
        let (arch, preset, overrides): (&str, &str, &str) = match owner {
            "ono" => (
                "ono",
                "super_resolution",
                "n_layers = 4\nn_hidden = 128\npsi_dim = 16\nnn_block = \"linear_transformer\"",
            ),
            "fno" => ("fno2d", "darcy", ""),
            "galerkin" => ("galerkin", "darcy", ""),
            "lsm" => ("lsm", "darcy", ""),
            "ffno" => ("ffno", "darcy", "n_layers = 4"),
            "gnot" => ("gnot", "gnot_e3", ""),
            m => (m, "darcy", ""),
        };
        let mut overrides = parse(overrides);
        if owner == "galerkin" {
            let side = if shapes == "darcy" { 85 } else { 43 };
            overrides.insert("scaler_grids".into(), Value::Table(galerkin_grids(side)));
        }
        let id = format!("runtime/{owner}");
        add(
            &mut experiments,
            id.clone(),
            owner,
            Work::Measure(Measure {
                arch: arch.into(),
                preset: preset.into(),
                shapes: shapes.into(),
                batch: 8,
                overrides,
                steps,
            }),
            format!("random data at the shapes of ONO's `{shapes}` preset, batch 8"),
        );
        for (table, column, source) in [
            (2, "s / step", Source::StepTime(id.clone())),
            (8, "parameters", Source::Params(id.clone())),
            (8, "peak memory (MB)", Source::PeakMemory(id.clone())),
        ] {
            cells.push(Cell {
                table,
                row: model_label(model).into(),
                column: column.into(),
                model: model.into(),
                paper: None,
                source,
            });
        }
    }

    // Table 3: trained at 43 × 43, tested at finer grids of the same test samples.
    for model in ["fno", "ono"] {
        let mut t = if model == "ono" {
            parse("seed = 0\nepochs = 500\nbatch_size = 8\n[model]\narch = \"ono\"\npreset = \"super_resolution\"\n[data]\nbenchmark = \"darcy\"\nr = 10\nntest = 200\n[loss]\nderivative_alpha = 0.0\n")
        } else {
            let mut t = paper_experiment("fno", Task::Darcy).expect("FNO runs Darcy");
            set(&mut t, &["data", "r"], Value::Integer(10));
            t
        };
        t = match &reduced {
            None => {
                set(&mut t, &["data", "data_dir"], path_value(&data.published));
                t
            }
            Some(r) => {
                let mut t = reduce(t, model, Task::Darcy, r, data);
                set(
                    &mut t,
                    &["data", "r"],
                    Value::Integer(SUPERRES_TRAIN_STRIDE as i64),
                );
                set(&mut t, &["data", "ntest"], Value::Integer(r.superres_test));
                t
            }
        };
        let id = format!("superres/{model}");
        let note = match &reduced {
            None => "published Darcy files, trained at r = 10 (43²)".to_string(),
            Some(r) => format!(
                "generated Darcy (`ono data gen darcy`, 421², r = 10 → 43²), {} train / {} test, {} epochs",
                r.darcy.0, r.superres_test, r.darcy.2
            ),
        };
        add(
            &mut experiments,
            id.clone(),
            model,
            Work::Train {
                config: t,
                strides: SUPERRES_STRIDES.to_vec(),
            },
            note,
        );
        let paper_col = |i: usize| {
            let (_, f, o) = paper::TABLE3[i];
            if model == "fno" {
                f
            } else {
                o
            }
        };
        cells.push(Cell {
            table: 3,
            row: model_label(model).into(),
            column: "s=43 (trained)".into(),
            model: model.into(),
            paper: None,
            source: Source::TestError(id.clone()),
        });
        for (i, stride) in SUPERRES_STRIDES.iter().enumerate() {
            cells.push(Cell {
                table: 3,
                row: model_label(model).into(),
                column: format!("s={}", paper::TABLE3[i].0),
                model: model.into(),
                paper: Some(paper_col(i)),
                source: Source::AtStride(id.clone(), *stride),
            });
        }
    }

    // Table 4: NS2d, trained on the first 8 predicted steps, rolled out 10.
    for model in ["fno", "ono"] {
        let mut t = if model == "ono" {
            parse("seed = 0\nepochs = 500\nbatch_size = 8\n[model]\narch = \"ono\"\npreset = \"time_extrapolation\"\n[data]\nbenchmark = \"ns2d\"\n")
        } else {
            paper_experiment("fno", Task::Ns2d).expect("FNO runs NS2d")
        };
        set(&mut t, &["data", "train_steps"], Value::Integer(SEEN_STEPS));
        t = match &reduced {
            None => {
                set(&mut t, &["data", "data_dir"], path_value(&data.published));
                t
            }
            Some(r) => reduce(t, model, Task::Ns2d, r, data),
        };
        let id = format!("ns2d-time/{model}");
        add(
            &mut experiments,
            id.clone(),
            model,
            train(t),
            data_note(profile, Task::Ns2d, reduced.as_ref()),
        );
        let (seen, unseen) = if model == "fno" {
            paper::TABLE4_FNO
        } else {
            paper::TABLE4_ONO
        };
        for (column, paper, source) in [
            ("Seen", seen, Source::Seen(id.clone())),
            ("Unseen", unseen, Source::Unseen(id.clone())),
        ] {
            cells.push(Cell {
                table: 4,
                row: model_label(model).into(),
                column: column.into(),
                model: model.into(),
                paper: Some(paper),
                source,
            });
        }
    }

    // Tables 5 and 6: ONO with another NN block, or another normalization of ψ. The
    // benchmarks' presets already use Nyström and the orthonormalization: those rows are
    // Table 1's runs.
    let ablation_tasks = [Task::Airfoil, Task::Elasticity, Task::Pipe];
    let variants = paper::TABLE5
        .iter()
        .map(|(row, block, p)| (5, *row, "nn_block", *block, Some(*p)))
        .chain(
            paper::TABLE6
                .iter()
                .map(|(row, o, p)| (6, *row, "orthogonalization", *o, *p)),
        );
    for (table, row, key, value, paper_row) in variants {
        for (i, task) in ablation_tasks.iter().enumerate() {
            let base = build("ono", *task).expect("ONO runs every benchmark");
            let (id, t) = if preset_field(&base, key).as_deref() == Some(value) {
                (format!("{}/ono", task.key()), base)
            } else {
                let mut t = base;
                set(
                    &mut t,
                    &["model", "overrides", key],
                    Value::String(value.into()),
                );
                (format!("{}/ono-{}", task.key(), value.replace('_', "-")), t)
            };
            add(
                &mut experiments,
                id.clone(),
                "ono",
                train(t),
                data_note(profile, *task, reduced.as_ref()),
            );
            cells.push(Cell {
                table,
                row: row.into(),
                column: paper::ABLATION_COLUMNS[i].into(),
                model: "ono".into(),
                paper: paper_row.map(|p| p[i]),
                source: Source::TestError(id),
            });
        }
    }

    // Table 7: ONO-8 (the presets) against ONO-30 (30 layers at the same width).
    for (row, layers, paper_row) in paper::TABLE7 {
        for (i, task) in [Task::Elasticity, Task::Plasticity].into_iter().enumerate() {
            let mut t = build("ono", task).expect("ONO runs every benchmark");
            // The paper's ONO-8 is the presets' run (Table 1's); the reduced profiles' Table 1
            // runs have fewer layers, so their ONO-8 is a run of its own.
            let id = if layers == 8 && reduced.is_none() {
                format!("{}/ono", task.key())
            } else {
                set(
                    &mut t,
                    &["model", "overrides", "n_layers"],
                    Value::Integer(layers as i64),
                );
                if reduced.as_ref().is_some_and(|r| !r.tiny) {
                    // 30 layers at the reduced width would take most of the hour.
                    set(
                        &mut t,
                        &["model", "overrides", "n_hidden"],
                        Value::Integer(32),
                    );
                }
                format!("{}/ono-{layers}", task.key())
            };
            add(
                &mut experiments,
                id.clone(),
                "ono",
                train(t),
                data_note(profile, task, reduced.as_ref()),
            );
            cells.push(Cell {
                table: 7,
                row: row.into(),
                column: ["Elasticity", "Plasticity"][i].into(),
                model: "ono".into(),
                paper: Some(paper_row[i]),
                source: Source::TestError(id),
            });
        }
    }

    Plan { experiments, cells }
}

/// The value of `key` (`nn_block` or `orthogonalization`) an ONO experiment runs with: its
/// override, else its preset's.
fn preset_field(t: &Table, key: &str) -> Option<String> {
    let model = t.get("model")?;
    if let Some(v) = model.get("overrides").and_then(|o| o.get(key)) {
        return v.as_str().map(str::to_string);
    }
    let preset: ono_models::Preset = model.get("preset")?.as_str()?.parse().ok()?;
    let c = preset.config();
    let v = match key {
        "nn_block" => serde_json::to_value(c.nn_block),
        _ => serde_json::to_value(c.orthogonalization),
    };
    v.ok()?.as_str().map(str::to_string)
}

/// Keeps the cells of `tables` and `models` (all when empty) and the experiments they read.
/// Unknown names are errors that list the known ones.
pub fn select(plan: Plan, tables: &[String], models: &[String]) -> Result<Plan> {
    for t in tables {
        if !TABLES.contains(&t.as_str()) {
            bail!("--only: unknown table `{t}` (known: {})", TABLES.join(", "));
        }
    }
    for m in models {
        if !MODELS.contains(&m.as_str()) {
            bail!(
                "--models: unknown model `{m}` (known: {})",
                MODELS.join(", ")
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
            cells
                .iter()
                .any(|c| c.source.experiment() == Some(e.id.as_str()))
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

/// Checks that an experiment table is a valid experiment file (after its output folder is set).
pub fn validate(config: &Table) -> Result<ono_train::config::TrainConfig> {
    let text = toml::to_string(config).context("an experiment does not serialize")?;
    Ok(ono_train::config::TrainConfig::from_toml(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> DataPaths {
        DataPaths {
            published: PathBuf::from("/data"),
            generated: PathBuf::from("/out/data"),
        }
    }

    /// Every experiment of every profile is a valid experiment file, every cell reads an
    /// experiment of the plan, and the plan has the paper's shape.
    #[test]
    fn every_profile_plans_valid_experiments() {
        for profile in [Profile::Paper, Profile::Quick, Profile::Smoke] {
            let p = plan(profile, &paths());
            for e in &p.experiments {
                if let Work::Train { config, .. } = &e.work {
                    let mut t = config.clone();
                    t.insert("output_dir".into(), Value::String(".".into()));
                    validate(&t)
                        .unwrap_or_else(|err| panic!("{}: {}: {err}", profile.name(), e.id));
                }
            }
            for e in &p.experiments {
                if let Work::Measure(m) = &e.work {
                    let base = ono_models::ModelConfig::preset(&m.arch, &m.preset).unwrap();
                    let c = ono_train::config::with_overrides(&base, &m.overrides, "overrides")
                        .unwrap_or_else(|err| panic!("{}: {err}", e.id));
                    c.validate().unwrap_or_else(|err| panic!("{}: {err}", e.id));
                }
            }
            for c in &p.cells {
                if let Some(id) = c.source.experiment() {
                    assert!(p.experiments.iter().any(|e| e.id == id), "{id}");
                }
            }
            let count = |t: usize| p.cells.iter().filter(|c| c.table == t).count();
            // 9 rows × 6 benchmarks; 9 models × 1 (Table 2), × 2 (Table 8); 2 × 6; 2 × 2;
            // 3 × 3; 4 × 3; 2 × 2.
            assert_eq!(
                (1..=8).map(count).collect::<Vec<_>>(),
                [54, 9, 12, 4, 9, 12, 4, 18]
            );
            // The paper's "–" cells are the paper's.
            let dash = p
                .cells
                .iter()
                .filter(|c| c.table == 1 && c.source == Source::Unsupported)
                .count();
            let geofno = usize::from(profile != Profile::Paper);
            assert_eq!(
                dash,
                4 + 4 + 2 + geofno,
                "FNO and Galerkin: 4 each, GNOT: 2"
            );
        }
    }

    #[test]
    fn selection_by_table_and_model() {
        let p = select(
            plan(Profile::Quick, &paths()),
            &["table3".into()],
            &["fno".into(), "ono".into()],
        )
        .unwrap();
        let ids: Vec<&str> = p.experiments.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["superres/fno", "superres/ono"]);
        assert!(select(plan(Profile::Quick, &paths()), &["table0".into()], &[]).is_err());
        assert!(select(plan(Profile::Quick, &paths()), &[], &["deeponet".into()]).is_err());
        // Geo-FNO's regular-grid cells are FNO's runs.
        let p = select(
            plan(Profile::Paper, &paths()),
            &["table1".into()],
            &["geofno".into()],
        )
        .unwrap();
        assert!(p.experiments.iter().any(|e| e.id == "darcy/fno"));
        assert!(!p.experiments.iter().any(|e| e.id == "darcy/geofno"));
    }
}
