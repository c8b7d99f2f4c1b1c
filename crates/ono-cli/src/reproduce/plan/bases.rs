//! The base experiment of each model × benchmark: the committed experiment files the paper
//! profile runs (each file says in its comment whose script and recipe it follows). The reduced
//! profiles and the tables derive every experiment from these by typed edits, so a recipe is
//! stated once, in its file.

use anyhow::{Context, Result};
use ono_train::config::TrainConfig;

use super::Task;

/// One base: (row model, benchmark, file under `experiments/`, its text).
pub struct BaseFile {
    pub model: &'static str,
    pub task: Task,
    pub file: &'static str,
    text: &'static str,
}

macro_rules! base {
    ($model:literal, $task:ident, $file:literal) => {
        BaseFile {
            model: $model,
            task: Task::$task,
            file: $file,
            text: include_str!(concat!("../../../../../experiments/", $file)),
        }
    };
}

/// Every base experiment. A pair that is not here has no experiment (the paper's "–", or a row
/// that reuses another model's run: Geo-FNO on the regular grids is FNO's).
pub const BASES: &[BaseFile] = &[
    base!("ono", Ns2d, "paper/ns2d/ono.toml"),
    base!("ono", Airfoil, "paper/airfoil/ono.toml"),
    base!("ono", Pipe, "paper/pipe/ono.toml"),
    base!("ono", Darcy, "paper/darcy/ono.toml"),
    base!("ono", Elasticity, "paper/elasticity/ono.toml"),
    base!("ono", Plasticity, "paper/plasticity/ono.toml"),
    base!("ufno", Ns2d, "paper/ns2d/ufno.toml"),
    base!("ufno", Airfoil, "paper/airfoil/ufno.toml"),
    base!("ufno", Pipe, "paper/pipe/ufno.toml"),
    base!("ufno", Darcy, "paper/darcy/ufno.toml"),
    base!("ufno", Elasticity, "paper/elasticity/ufno.toml"),
    base!("ufno", Plasticity, "paper/plasticity/ufno.toml"),
    base!("ffno", Ns2d, "paper/ns2d/ffno.toml"),
    base!("ffno", Airfoil, "paper/airfoil/ffno.toml"),
    base!("ffno", Pipe, "paper/pipe/ffno.toml"),
    base!("ffno", Darcy, "paper/darcy/ffno.toml"),
    base!("ffno", Elasticity, "paper/elasticity/ffno.toml"),
    base!("ffno", Plasticity, "paper/plasticity/ffno.toml"),
    base!("lsm", Ns2d, "paper/ns2d/lsm.toml"),
    base!("lsm", Airfoil, "paper/airfoil/lsm.toml"),
    base!("lsm", Pipe, "paper/pipe/lsm.toml"),
    base!("lsm", Darcy, "paper/darcy/lsm.toml"),
    base!("lsm", Elasticity, "paper/elasticity/lsm.toml"),
    base!("lsm", Plasticity, "paper/plasticity/lsm.toml"),
    base!("transolver", Ns2d, "paper/ns2d/transolver.toml"),
    base!("transolver", Airfoil, "paper/airfoil/transolver.toml"),
    base!("transolver", Pipe, "paper/pipe/transolver.toml"),
    base!("transolver", Darcy, "paper/darcy/transolver.toml"),
    base!("transolver", Elasticity, "paper/elasticity/transolver.toml"),
    base!("transolver", Plasticity, "paper/plasticity/transolver.toml"),
    base!("fno", Darcy, "paper/darcy/fno.toml"),
    base!("fno", Ns2d, "paper/ns2d/fno.toml"),
    base!("geofno", Airfoil, "paper/airfoil/geofno.toml"),
    base!("geofno", Pipe, "paper/pipe/geofno.toml"),
    base!("geofno", Elasticity, "paper/elasticity/geofno.toml"),
    base!("geofno", Plasticity, "paper/plasticity/geofno.toml"),
    base!("galerkin", Darcy, "galerkin/darcy_141_43.toml"),
    base!("galerkin", Ns2d, "galerkin/ns2d.toml"),
    // GNOT's Table 1 only: the ONO paper has no GK-Transformer on these.
    base!("galerkin", Airfoil, "gnot/galerkin_airfoil.toml"),
    base!("galerkin", Elasticity, "gnot/galerkin_elasticity.toml"),
    base!("gnot", Darcy, "gnot/darcy.toml"),
    base!("gnot", Ns2d, "gnot/ns2d.toml"),
    base!("gnot", Airfoil, "gnot/airfoil.toml"),
    base!("gnot", Elasticity, "gnot/elasticity.toml"),
];

/// The base experiment of `model` on `task`, if it has one (its paths as in the file, relative
/// to it).
pub fn base(model: &str, task: Task) -> Result<Option<TrainConfig>> {
    BASES
        .iter()
        .find(|b| b.model == model && b.task == task)
        .map(|b| {
            TrainConfig::from_toml(b.text)
                .with_context(|| format!("experiments/{} is not a valid experiment file", b.file))
        })
        .transpose()
}
