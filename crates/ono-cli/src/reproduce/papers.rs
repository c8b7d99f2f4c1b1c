//! The papers whose tables `ono reproduce --paper` reproduces: the ONO paper (the default), the
//! Galerkin Transformer's (Cao 2021) and GNOT's (Hao et al. 2023). Each has its own tables,
//! rows, plan and findings; the execution, the results folders and the report's form are
//! shared.

use anyhow::{bail, Result};

use super::findings::Finding;
use super::plan::{self, DataPaths, Plan, Profile};
use super::values::Readings;
use super::{findings, galerkin, gnot};

/// Which paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paper {
    Ono,
    Galerkin,
    Gnot,
}

impl std::str::FromStr for Paper {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ono" => Ok(Self::Ono),
            "galerkin" => Ok(Self::Galerkin),
            "gnot" => Ok(Self::Gnot),
            _ => bail!("--paper: `{s}` is not ono, galerkin or gnot"),
        }
    }
}

impl Paper {
    /// Its name on the command line.
    pub fn key(self) -> &'static str {
        match self {
            Self::Ono => "ono",
            Self::Galerkin => "galerkin",
            Self::Gnot => "gnot",
        }
    }

    /// The paper, as the report's title names it.
    pub fn title(self) -> &'static str {
        match self {
            Self::Ono => "The ONO paper's tables",
            Self::Galerkin => "The Galerkin Transformer paper's tables (Cao, NeurIPS 2021)",
            Self::Gnot => "GNOT's tables (Hao et al., ICML 2023)",
        }
    }

    /// The default results folder of a profile (`rehearsal` for a rehearsal): the ONO paper's
    /// are `results/<profile>`, as before there were several papers.
    pub fn results_dir(self, profile: &str) -> std::path::PathBuf {
        let results = std::path::PathBuf::from("results");
        match self {
            Self::Ono => results.join(profile),
            other => results.join(other.key()).join(profile),
        }
    }

    /// The numbers of its tables, in the report's order.
    pub fn tables(self) -> &'static [usize] {
        match self {
            Self::Ono => &[1, 2, 3, 4, 5, 6, 7, 8],
            Self::Galerkin => &galerkin::TABLES,
            Self::Gnot => &gnot::TABLES,
        }
    }

    /// A table's title in the report.
    pub fn table_title(self, table: usize) -> &'static str {
        match self {
            Self::Ono => ONO_TITLES
                .get(table.wrapping_sub(1))
                .copied()
                .unwrap_or("?"),
            Self::Galerkin => galerkin::title(table),
            Self::Gnot => gnot::title(table),
        }
    }

    /// The row models `--models` takes.
    pub fn models(self) -> &'static [&'static str] {
        match self {
            Self::Ono => &plan::MODELS,
            Self::Galerkin => &galerkin::MODELS,
            Self::Gnot => &gnot::MODELS,
        }
    }

    /// Every experiment and cell of a profile.
    pub fn plan(self, profile: Profile, data: &DataPaths) -> Result<Plan> {
        match self {
            Self::Ono => plan::plan(profile, data),
            Self::Galerkin => galerkin::plan(profile, data),
            Self::Gnot => gnot::plan(profile, data),
        }
    }

    /// The report's section on how a profile's runs differ from the paper's.
    pub fn differences(self, profile: Profile) -> String {
        match self {
            Self::Ono => super::report::ono_differences(profile),
            Self::Galerkin => galerkin::differences(profile),
            Self::Gnot => gnot::differences(profile),
        }
    }

    /// The paper's findings, judged on a run (`paper`: the paper profile's plan, for the "why").
    pub fn findings(self, r: &Readings, paper: Option<&Plan>) -> Vec<Finding> {
        match self {
            Self::Ono => findings::evaluate(r, paper),
            Self::Galerkin => galerkin::findings::evaluate(r, paper),
            Self::Gnot => gnot::findings::evaluate(r, paper),
        }
    }
}

const ONO_TITLES: [&str; 8] = [
    "Table 1: relative L2 error on the six benchmarks",
    "Table 2: time per training step (batch 8; FNO, LSM and ONO with 4 layers; ONO k = 16, width 128, linear transformer block)",
    "Table 3: zero-shot super-resolution on Darcy (trained at 43 × 43)",
    "Table 4: NS2d, trained on 8 predicted steps (seen), tested also on the next 2 (unseen)",
    "Table 5: ONO's NN block",
    "Table 6: orthogonalization against other normalizations of ψ",
    "Table 7: ONO-8 against ONO-30",
    "Table 8: parameters and peak memory of a training step (the Table 2 configurations)",
];
