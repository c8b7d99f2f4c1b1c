//! `ono train`: a run from an experiment file, with its figures ([`RunFigures`]).

use std::path::PathBuf;

use anyhow::{Context, Result};
use ono_train::config::TrainConfig;
use ono_train::handoff::{self, Handoff};
use ono_train::parallel::{self, DataParallel};
use ono_train::progress::Progress;
use ono_train::{RunSpec, Summary, Trainer};

use crate::figures::RunFigures;

/// Trains (or, with `resume`, continues) the run of `config`; its summary, on the process that
/// reports. With `handoff`, first writes the run's hand-off to the reference loop there.
///
/// Started by a launcher (`torchrun`, `srun`, `mpirun`: [`DataParallel::from_env`]) this process
/// is one of a data-parallel run; rank 0 alone reports, writes and returns the summary.
pub fn train(
    config: PathBuf,
    resume: bool,
    quiet: bool,
    handoff: Option<PathBuf>,
) -> Result<Option<Summary>> {
    let cfg = TrainConfig::from_file(&config)?;
    let run = RunSpec::resolve(cfg).with_context(|| format!("in {}", config.display()))?;
    let parallel = DataParallel::from_env(run.device, parallel::timeout_from_env()?)?;
    if parallel.is_some() && handoff.is_some() {
        anyhow::bail!("--handoff describes a single-process run; start it without a launcher");
    }
    if let Some(dir) = &handoff {
        Handoff::write(&run, dir).with_context(|| format!("hand-off to {}", dir.display()))?;
    }
    let mut trainer = Trainer::with_parallel(run, resume, parallel)?;
    if let Some(dir) = &handoff {
        handoff::write_init(trainer.model(), dir)?;
    }
    let leader = trainer.is_leader();
    if leader {
        trainer.set_observer(RunFigures);
    }
    let total = trainer.steps_per_epoch() * trainer.config().epochs;
    let progress = if quiet {
        Progress::Quiet
    } else {
        Progress::auto(total, trainer.state().global_step)
    };
    let summary = trainer.run(&progress)?;
    Ok(leader.then_some(summary))
}
