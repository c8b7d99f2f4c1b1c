//! The reduced profiles (quick, smoke): their sizes, and the typed edits that turn a paper
//! experiment into a reduced one (generated data or fewer published samples, fewer epochs, one
//! batch size per benchmark, a smaller model of the same architecture).

use anyhow::Result;
use ono_data::normalizer::NormalizerKind;
use ono_models::galerkin::ScalerGrids;
use ono_models::{ModelConfig, NnBlock};
use ono_train::config::TrainConfig;

use super::{DataPaths, Profile, Task};

/// Sizes of the reduced profiles.
#[derive(Debug, Clone, Copy)]
pub struct Reduced {
    /// (train, test) samples and epochs of Darcy, and the stride of Table 1's Darcy on the 421
    /// grid (Table 3 trains at stride 10, 43 × 43, on the same samples).
    pub darcy: (i64, i64, u64),
    pub darcy_r: usize,
    /// Table 3's test samples (the first of Darcy's; its finest grid is 421 × 421).
    pub superres_test: i64,
    /// (train, test) samples and epochs of NS2d (10 frames in, 10 out) and its stride on the
    /// 64 × 64 grid.
    pub ns2d: (i64, i64, u64),
    pub ns2d_r: usize,
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
    /// Seeds of Table 1's cells, by task (1 where a task is not listed): the cells cheap
    /// enough to run twice show their seed spread.
    pub seeds: &'static [(Task, usize)],
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
                seeds: &[(Task::Darcy, 2)],
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
                seeds: &[],
            }),
        }
    }

    /// How many seeds Table 1's cells of `task` run with.
    pub fn seeds(&self, task: Task) -> usize {
        self.seeds
            .iter()
            .find(|(t, _)| *t == task)
            .map_or(1, |(_, n)| *n)
    }

    /// The side of Table 1's reduced Darcy grid.
    pub fn darcy_side(&self) -> i64 {
        420 / self.darcy_r as i64 + 1
    }

    /// The reduced version of a paper experiment: its data replaced by the generated set (or
    /// the published benchmark at fewer samples), fewer epochs, a smaller model, one batch size
    /// per benchmark (so that the models see the same number of steps).
    pub fn reduce(
        &self,
        mut cfg: TrainConfig,
        task: Task,
        data: &DataPaths,
    ) -> Result<TrainConfig> {
        let (ntrain, ntest, epochs, batch) = match task {
            Task::Darcy => (self.darcy.0, self.darcy.1, self.darcy.2, 8),
            Task::Ns2d => (self.ns2d.0, self.ns2d.1, self.ns2d.2, 2),
            Task::Elasticity => (self.cloud.0, self.cloud.1, self.cloud.2, 8),
            _ => (self.published.0, self.published.1, self.published.2, 4),
        };
        cfg.epochs = epochs;
        cfg.batch_size = batch.min(ntrain);
        let d = &mut cfg.data;
        d.benchmark = None;
        d.data_dir = None;
        d.path = None;
        d.r = None;
        d.ntrain = None;
        d.ntest = None;
        match task {
            Task::Elasticity => {
                // The point-cloud stand-in is a dataset file with its own split, and no
                // benchmark layout.
                d.path = Some(data.cloud());
                d.layout = Default::default();
                // A dataset file has no recipe, so no normalizers: the coefficient (3 or 12)
                // and the solution (about 1e-2) would then start the models' outputs two
                // orders of magnitude off, which a few hundred steps do not undo. ONO's
                // Elasticity recipe normalizes as here (UnitTransformer, per point index).
                d.normalize_x.get_or_insert(NormalizerKind::Unit);
                d.normalize_y.get_or_insert(NormalizerKind::Unit);
            }
            _ => {
                let dir = if task.generated() {
                    &data.generated
                } else {
                    &data.published
                };
                d.benchmark = Some(task.key().to_string());
                d.data_dir = Some(dir.clone());
                d.ntrain = Some(ntrain);
                d.ntest = Some(ntest);
                d.r = match task {
                    Task::Darcy => Some(self.darcy_r),
                    Task::Ns2d => Some(self.ns2d_r),
                    _ => None,
                };
            }
        }
        let tiny = self.tiny;
        let galerkin_side = (task == Task::Darcy).then(|| self.darcy_side());
        cfg.model.edit(|m| {
            smaller_model(m, tiny);
            if let (ModelConfig::Galerkin(c), Some(side)) = (m, galerkin_side) {
                // The preset's 141 → 43 scaler grids, at the reduced training grid.
                c.scaler_grids = Some(galerkin_grids(side));
            }
        })?;
        Ok(cfg)
    }

    /// The data a task's experiments read, in words.
    pub fn data_note(&self, task: Task) -> String {
        match task {
            Task::Darcy => format!(
                "generated Darcy (`ono data gen darcy`, 421², r = {} → {s}²), {} train / {} test, {} epochs",
                self.darcy_r, self.darcy.0, self.darcy.1, self.darcy.2, s = self.darcy_side()
            ),
            Task::Ns2d => format!(
                "generated NS2d (`ono data gen ns2d --profile reduced`, 64², r = {} → {s}²), {} train / {} test, {} epochs",
                self.ns2d_r, self.ns2d.0, self.ns2d.1, self.ns2d.2, s = 64 / self.ns2d_r
            ),
            Task::Elasticity => format!(
                "stand-in: generated Darcy on {} random points per sample (`ono data darcy --points`), {} train / {} test, {} epochs",
                self.cloud_points, self.cloud.0, self.cloud.1, self.cloud.2
            ),
            _ => format!(
                "published {} files if in the data folder, {} train / {} test, {} epochs",
                task.key(),
                self.published.0,
                self.published.1,
                self.published.2
            ),
        }
    }
}

/// Smaller models for the reduced profiles: the same architecture and block types, fewer and
/// narrower layers (the quick width, or the smoke profile's tiny one).
fn smaller_model(m: &mut ModelConfig, tiny: bool) {
    let w = |quick: i64, small: i64| if tiny { small } else { quick };
    let layers = |quick: usize, small: usize| if tiny { small } else { quick };
    match m {
        // The presets' Nyström block costs about 10 s per step on 2 CPU cores at any size (its
        // 256 landmarks); the reduced profiles use the linear transformer block, the paper's
        // other choice, and Table 5 compares the two.
        ModelConfig::Ono(c) => {
            c.nn_block = NnBlock::LinearTransformer;
            c.n_hidden = w(64, 8);
            c.n_head = w(4, 2);
            c.psi_dim = w(8, 4);
            c.n_layers = layers(3, 1);
        }
        ModelConfig::Fno2d(c) => {
            c.width = w(20, 4);
            c.modes = vec![w(10, 4); 2];
        }
        ModelConfig::Fno3d(c) => {
            c.width = w(12, 4);
            c.modes = vec![w(8, 2), w(8, 2), w(6, 2)];
        }
        ModelConfig::GeoFno(c) => {
            c.width = w(20, 4);
            c.modes = [w(10, 4); 2];
        }
        ModelConfig::Ufno(c) => {
            c.nsl.n_hidden = w(16, 4);
            c.nsl.modes = w(10, 4);
        }
        ModelConfig::Ffno(c) => {
            c.nsl.n_hidden = w(32, 4);
            c.nsl.modes = w(10, 4);
            c.n_layers = layers(4, 1);
        }
        ModelConfig::Lsm(c) => {
            c.nsl.n_hidden = w(16, 4);
            c.n_heads = w(4, 2);
        }
        ModelConfig::Transolver(c) => {
            c.nsl.n_hidden = w(64, 8);
            c.n_heads = w(4, 2);
            c.n_layers = layers(3, 1);
            c.slice_num = w(32, 4);
        }
        ModelConfig::Gnot(c) => {
            c.n_hidden = w(64, 8);
            c.n_layers = layers(2, 1);
            c.n_head = w(4, 2);
            c.n_inner = w(2, 2);
        }
        ModelConfig::Galerkin(c) => {
            c.n_hidden = w(64, 8);
            c.n_head = w(4, 2);
            c.num_encoder_layers = layers(3, 1);
            c.dim_feedforward = w(128, 16);
        }
        ModelConfig::Mlp(_) | ModelConfig::Fno1d(_) | ModelConfig::NslFno(_) => {}
    }
}

/// The Galerkin Transformer's fine and coarse grids for a `fine` × `fine` Darcy grid: the coarse
/// one about half as fine, interpolated to exactly (the scale-factor path misses most sizes).
pub fn galerkin_grids(fine: i64) -> ScalerGrids {
    ScalerGrids {
        fine,
        coarse: (fine + 1) / 2,
        output: Default::default(),
        scale_factor: false,
    }
}
