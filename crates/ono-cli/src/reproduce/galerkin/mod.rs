//! The Galerkin Transformer paper's tables as experiments (`ono reproduce --paper galerkin`):
//! Table 1 (memory and time of a training step), Table 2 ((a) Burgers at n = 512 … 8192, (b) the
//! Darcy interface problem at two grids), Table 3 (the inverse coefficient problem at two grids
//! and three noise levels) and Table 8 (the normalization and initialization ablation on
//! Burgers).
//!
//! Every trained experiment is derived from a committed experiment file of `experiments/galerkin/`
//! (the paper's recipe: Adam, OneCycle, the H¹ loss, the best epoch) by typed edits: the row's
//! attention and normalization ([`Variant`]), the column's grid or noise, and in the reduced
//! profiles the sizes of [`Reduced`]. FNO's rows are FNO1d / FNO2d trained by the same trainer
//! (the paper's "1cycle" rows) with the relative L2 loss of FNO's own code.

pub mod findings;
pub mod numbers;

use anyhow::{Context, Result};
use ono_models::galerkin::{GalerkinAttentionKind, OutputGrid};
use ono_models::ModelConfig;
use ono_train::config::{LossKind, ModelSection, TrainConfig};

use super::plan::{shrink_model, DataPaths, PaperOnly, Plan, Profile, Sizes, Source, Work};
use numbers::{BURGERS_N, DARCY_GRIDS, INVERSE_GRIDS, INVERSE_NOISE};

/// The tables, by number.
pub const TABLES: [usize; 4] = [1, 2, 3, 8];

/// The row models `--models` takes: FNO (1-D or 2-D), and the four attentions.
pub const MODELS: [&str; 5] = ["fno", "ft", "gt", "st", "lt"];

/// A table's title in the report.
pub fn title(table: usize) -> &'static str {
    match table {
        1 => "Table 1: peak memory and time of a training step (Burgers, batch 4; the paper: n = 8192 on a GPU)",
        2 => "Table 2: (a) Burgers' equation at n points, (b) the Darcy interface problem on the grids n_f, n_c",
        3 => "Table 3: the inverse coefficient problem (grids n_f, n_c; noise ε)",
        8 => "Table 8: the Galerkin Transformer on Burgers: regular or Galerkin-type layer normalization, initialization (xavier gain η, diagonal δ) and dropout ζ",
        _ => "?",
    }
}

/// An attention row of Tables 2 and 3: which attention, and which layer normalization.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variant {
    /// `ft`, `gt`, `st` or `lt`.
    pub model: &'static str,
    pub kind: GalerkinAttentionKind,
    /// The regular layer normalization (post-LayerNorms), else the attention's own per-head
    /// norms (on Q, K for FT and ST; on K, V for GT and LT).
    pub regular: bool,
}

impl Variant {
    /// The paper's row label.
    pub fn label(self) -> String {
        let name = self.model.to_ascii_uppercase();
        match (self.regular, self.kind.normalises_values()) {
            (true, _) => format!("{name} regular Ln"),
            (false, true) => format!("{name} Ln on K, V"),
            (false, false) => format!("{name} Ln on Q, K"),
        }
    }

    /// Its part of an experiment id.
    fn id(self) -> String {
        if self.regular {
            format!("{}-reg", self.model)
        } else {
            self.model.to_string()
        }
    }

    /// Sets the attention and the normalization in `cfg`. As the reference's encoder layer,
    /// linear and softmax attention train with dropout 0.1; Fourier-type and softmax attention
    /// with the Fourier preset's xavier gain on Burgers (`burgers_fourier`: 10⁻³), where the
    /// README's commands pass it.
    fn apply(self, cfg: &mut TrainConfig, burgers: bool) -> Result<()> {
        cfg.model.edit(|m| {
            if let ModelConfig::Galerkin(c) = m {
                c.attention_type = self.kind;
                c.layer_norm = self.regular;
                c.attn_norm = !self.regular;
                if matches!(
                    self.kind,
                    GalerkinAttentionKind::Linear | GalerkinAttentionKind::Softmax
                ) {
                    c.encoder_dropout = 0.1;
                }
                if burgers && !self.kind.normalises_values() {
                    c.xavier_init = 1e-3;
                }
            }
        })?;
        // ex2_darcy.py L105–108: Fourier-type and softmax attention at half the peak rate.
        if !burgers && !self.kind.normalises_values() {
            cfg.optimizer.lr = cfg.optimizer.lr.min(5e-4);
        }
        Ok(())
    }
}

/// The attention rows in the paper's order: the four with the regular normalization, then the
/// four with their own.
pub const VARIANTS: [Variant; 8] = {
    use GalerkinAttentionKind::{Fourier, Galerkin, Linear, Softmax};
    const fn v(model: &'static str, kind: GalerkinAttentionKind, regular: bool) -> Variant {
        Variant {
            model,
            kind,
            regular,
        }
    }
    [
        v("ft", Fourier, true),
        v("gt", Galerkin, true),
        v("st", Softmax, true),
        v("lt", Linear, true),
        v("ft", Fourier, false),
        v("gt", Galerkin, false),
        v("st", Softmax, false),
        v("lt", Linear, false),
    ]
};

/// The reduced profiles (quick, smoke): generated data, fewer samples and epochs, narrower
/// models, and a subset of the rows and columns.
#[derive(Debug, Clone, Copy)]
pub struct Reduced {
    /// Burgers, generated at `burgers_resolution` points (`ono data gen burgers --res`), read
    /// at the columns `burgers_n`.
    pub burgers: Sizes,
    pub burgers_resolution: usize,
    pub burgers_n: &'static [usize],
    /// The Fourier-type and softmax rows run on Burgers up to this n (their cost is quadratic
    /// in n; above it their cells are left to the paper profile).
    pub quadratic_max_n: usize,
    /// Darcy generated at 421² (`ono data gen darcy`), read at stride `darcy_r`; the coarse
    /// grid about half as fine.
    pub darcy: Sizes,
    pub darcy_r: usize,
    /// The inverse problem on the same files: input at stride `inverse_r`, coefficient at
    /// `inverse_coarse_r`.
    pub inverse: Sizes,
    pub inverse_r: usize,
    pub inverse_coarse_r: usize,
    pub noise: &'static [f64],
    /// The rows (variants, by label) of Tables 2 and 3; FNO's are always there.
    pub rows2: &'static [&'static str],
    pub rows3: &'static [&'static str],
    /// Table 8's rows (indices into [`numbers::TABLE8`]) and its column.
    pub rows8: &'static [usize],
    /// Table 1's points per sample, and timed steps.
    pub timed_n: usize,
    pub timed_steps: usize,
    /// The smoke profile's tiny models.
    pub tiny: bool,
}

impl Reduced {
    pub fn of(profile: Profile) -> Option<Self> {
        match profile {
            Profile::Paper => None,
            Profile::Quick => Some(Self {
                burgers: Sizes::new(128, 32, 20, 8),
                burgers_resolution: 2048,
                burgers_n: &[512, 2048],
                // FT at n = 2048 measured 6.0 s a step (batch 8), 32 min for the cell; 0.37 s
                // at 512.
                quadratic_max_n: 512,
                darcy: Sizes::new(128, 16, 20, 4),
                darcy_r: 10,
                inverse: Sizes::new(128, 16, 20, 4),
                inverse_r: 10,
                inverse_coarse_r: 20,
                noise: &[0.0, 0.01, 0.1],
                rows2: &["FT Ln on Q, K", "GT Ln on K, V", "GT regular Ln"],
                rows3: &["GT Ln on K, V"],
                rows8: &[0, 4, 6, 8],
                timed_n: 2048,
                timed_steps: 2,
                tiny: false,
            }),
            Profile::Smoke => Some(Self {
                burgers: Sizes::new(4, 2, 1, 2),
                burgers_resolution: 256,
                burgers_n: &[64],
                quadratic_max_n: 64,
                darcy: Sizes::new(4, 2, 1, 2),
                darcy_r: 20,
                inverse: Sizes::new(4, 2, 1, 2),
                inverse_r: 20,
                inverse_coarse_r: 60,
                noise: &[0.01],
                rows2: &["FT Ln on Q, K", "GT Ln on K, V", "GT regular Ln"],
                rows3: &["GT Ln on K, V"],
                rows8: &[0, 8],
                timed_n: 64,
                timed_steps: 1,
                tiny: true,
            }),
        }
    }
}

/// The resolution of the generated Burgers file of a reduced profile.
pub fn burgers_resolution(profile: Profile) -> Option<usize> {
    Reduced::of(profile).map(|r| r.burgers_resolution)
}

/// A committed experiment file of `experiments/galerkin/`.
macro_rules! base_file {
    ($file:literal) => {
        (
            $file,
            include_str!(concat!("../../../../../experiments/galerkin/", $file)),
        )
    };
}

fn base((file, text): (&str, &str)) -> Result<TrainConfig> {
    TrainConfig::from_toml(text)
        .with_context(|| format!("experiments/galerkin/{file} is not a valid experiment file"))
}

/// The data every experiment of a profile is derived with.
struct Ctx<'a> {
    reduced: Option<Reduced>,
    data: &'a DataPaths,
}

impl Ctx<'_> {
    /// The rows of Table 2 (or 3) this profile runs.
    fn runs(&self, table: usize, v: &Variant) -> bool {
        self.reduced.is_none_or(|r| {
            let rows = if table == 2 { r.rows2 } else { r.rows3 };
            rows.contains(&v.label().as_str())
        })
    }

    /// `cfg` reading `benchmark` from the profile's folder: the published files, or the
    /// generated ones with the reduced sizes.
    fn data(&self, cfg: &mut TrainConfig, sizes: impl Fn(&Reduced) -> Sizes) {
        let d = &mut cfg.data;
        match &self.reduced {
            None => d.data_dir = Some(self.data.published.clone()),
            Some(r) => {
                let z = sizes(r);
                d.data_dir = Some(self.data.generated.clone());
                d.ntrain = Some(z.ntrain);
                d.ntest = Some(z.ntest);
                cfg.epochs = z.epochs;
                cfg.batch_size = z.batch.min(z.ntrain);
            }
        }
    }

    /// The smaller model of a reduced profile (`side`: the training grid's, for the 2-D
    /// models' modes and scaler grids).
    fn shrink(&self, cfg: &mut TrainConfig, side: Option<i64>, darcy: bool) -> Result<()> {
        match &self.reduced {
            Some(r) => shrink_model(cfg, r.tiny, side, darcy),
            None => Ok(()),
        }
    }

    /// The data a Burgers experiment reads, in words.
    fn burgers_note(&self, n: usize) -> String {
        match &self.reduced {
            None => format!("published Burgers (burgers_data_R10.mat), n = {n}"),
            Some(r) => format!(
                "generated Burgers (`ono data gen burgers --res {}`), n = {n}, {} train / {} test, {} epochs, batch {}",
                r.burgers_resolution, r.burgers.ntrain, r.burgers.ntest, r.burgers.epochs, r.burgers.batch
            ),
        }
    }

    fn darcy_note(&self, what: &str, z: impl Fn(&Reduced) -> Sizes) -> String {
        match &self.reduced {
            None => format!("published Darcy files (piececonst_r421_N1024_smooth1/2.mat), {what}"),
            Some(r) => {
                let z = z(r);
                format!(
                    "generated Darcy (`ono data gen darcy --res 421`), {what}, {} train / {} test, {} epochs, batch {}",
                    z.ntrain, z.ntest, z.epochs, z.batch
                )
            }
        }
    }
}

/// Points a side of the 421² Darcy grid at stride `r`.
fn side(r: usize) -> usize {
    420 / r + 1
}

/// Every experiment and cell of a profile.
pub fn plan(profile: Profile, data: &DataPaths) -> Result<Plan> {
    let ctx = Ctx {
        reduced: Reduced::of(profile),
        data,
    };
    let mut p = Plan::default();
    table2_burgers(&ctx, &mut p)?;
    table2_darcy(&ctx, &mut p)?;
    table3(&ctx, &mut p)?;
    table8(&ctx, &mut p)?;
    table1(&ctx, &mut p)?;
    Ok(p)
}

/// The columns (n) of Table 2a and 8 in this profile, with the stride of each on the file.
fn burgers_columns(ctx: &Ctx) -> Vec<(usize, usize)> {
    match &ctx.reduced {
        None => BURGERS_N.iter().map(|&n| (n, 8192 / n)).collect(),
        Some(r) => r
            .burgers_n
            .iter()
            .map(|&n| (n, r.burgers_resolution / n))
            .collect(),
    }
}

/// A Burgers experiment at stride `stride` from the Galerkin (`galerkin`) or FNO1d base.
fn burgers(ctx: &Ctx, stride: usize, n: usize, fno: bool) -> Result<TrainConfig> {
    let mut cfg = base(base_file!("burgers.toml"))?;
    if fno {
        cfg.model = ModelSection::preset("fno1d", "burgers");
        cfg.loss.kind = Some(LossKind::RelL2);
    }
    cfg.data.r = Some(stride);
    ctx.data(&mut cfg, |r| r.burgers);
    // Table 8's caption: batch 4 at n = 8192.
    if ctx.reduced.is_none() && n == 8192 {
        cfg.batch_size = 4;
    }
    ctx.shrink(&mut cfg, None, false)?;
    Ok(cfg)
}

/// Table 2a: FNO1d and the attention rows at each n.
fn table2_burgers(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for (n, stride) in burgers_columns(ctx) {
        let paper_col = BURGERS_N.iter().position(|&m| m == n);
        let paper = |row: usize| paper_col.map(|c| numbers::TABLE2A[row].1[c]);
        let column = format!("Burgers n={n}");
        let id = format!("burgers/n{n}/fno");
        p.add(
            &id,
            "fno",
            train(burgers(ctx, stride, n, true)?),
            ctx.burgers_note(n),
        );
        p.cell(
            2,
            numbers::TABLE2A[0].0,
            &column,
            "fno",
            paper(0),
            Source::TestError(id),
        );
        for (i, v) in VARIANTS.iter().enumerate() {
            if !ctx.runs(2, v) {
                continue;
            }
            let quadratic = !v.kind.normalises_values();
            if quadratic && ctx.reduced.is_some_and(|r| n > r.quadratic_max_n) {
                let source = Source::PaperOnly(PaperOnly::QuadraticInPoints);
                p.cell(2, &v.label(), &column, v.model, paper(i + 1), source);
                continue;
            }
            let id = format!("burgers/n{n}/{}", v.id());
            let mut cfg = burgers(ctx, stride, n, false)?;
            v.apply(&mut cfg, true)?;
            p.add(&id, v.model, train(cfg), ctx.burgers_note(n));
            p.cell(
                2,
                &v.label(),
                &column,
                v.model,
                paper(i + 1),
                Source::TestError(id),
            );
        }
    }
    Ok(())
}

/// The Darcy interface problem's grids in this profile: (n_f, n_c, stride on 421², preset).
fn darcy_grids(ctx: &Ctx) -> Vec<(usize, usize, usize, Option<&'static str>)> {
    match &ctx.reduced {
        None => vec![(141, 43, 3, Some("darcy")), (211, 61, 2, Some("darcy_211"))],
        Some(r) => {
            let f = side(r.darcy_r);
            vec![(f, f.div_ceil(2), r.darcy_r, None)]
        }
    }
}

/// Table 2b: FNO2d and the attention rows on each grid.
fn table2_darcy(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for (fine, coarse, stride, preset) in darcy_grids(ctx) {
        let paper_col = DARCY_GRIDS.iter().position(|&g| g == (fine, coarse));
        let paper = |row: usize| paper_col.map(|c| numbers::TABLE2B[row].1[c]);
        let column = format!("Darcy {fine},{coarse}");
        let what = format!("n_f = {fine}, n_c = {coarse}");
        let make = |fno: bool| -> Result<TrainConfig> {
            let mut cfg = base(base_file!("darcy_141_43.toml"))?;
            if let Some(preset) = preset {
                cfg.model = ModelSection::preset("galerkin", preset);
            }
            if fno {
                cfg.model = ModelSection::preset("fno2d", "darcy");
                cfg.loss.kind = Some(LossKind::RelL2);
            }
            cfg.data.r = Some(stride);
            ctx.data(&mut cfg, |r| r.darcy);
            // The reduced profiles' scaler grids follow the training grid (`galerkin_grids`: the
            // coarse one about half as fine, as `darcy_grids` names it).
            ctx.shrink(&mut cfg, Some(fine as i64), true)?;
            Ok(cfg)
        };
        let id = format!("darcy/{fine}/fno");
        p.add(
            &id,
            "fno",
            train(make(true)?),
            ctx.darcy_note(&what, |r| r.darcy),
        );
        p.cell(
            2,
            numbers::TABLE2B[0].0,
            &column,
            "fno",
            paper(0),
            Source::TestError(id),
        );
        for (i, v) in VARIANTS.iter().enumerate() {
            if !ctx.runs(2, v) {
                continue;
            }
            let id = format!("darcy/{fine}/{}", v.id());
            let mut cfg = make(false)?;
            v.apply(&mut cfg, false)?;
            p.add(&id, v.model, train(cfg), ctx.darcy_note(&what, |r| r.darcy));
            p.cell(
                2,
                &v.label(),
                &column,
                v.model,
                paper(i + 1),
                Source::TestError(id),
            );
        }
    }
    Ok(())
}

/// The inverse problem's grids in this profile: (n_f, n_c, stride, coarse stride).
fn inverse_grids(ctx: &Ctx) -> Vec<(usize, usize, usize, usize)> {
    match &ctx.reduced {
        None => vec![(141, 36, 3, 12), (211, 71, 2, 6)],
        Some(r) => vec![(
            side(r.inverse_r),
            side(r.inverse_coarse_r),
            r.inverse_r,
            r.inverse_coarse_r,
        )],
    }
}

/// Table 3: the inverse problem. FNO2d runs with input and target on one grid, the fine one
/// (`only n_f`) or the coarse one (`only n_c`); the attention rows read the fine grid and answer
/// on the coarse one.
fn table3(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    let noise: Vec<f64> = ctx
        .reduced
        .map_or(INVERSE_NOISE.to_vec(), |r| r.noise.to_vec());
    for (fine, coarse, stride, coarse_stride) in inverse_grids(ctx) {
        let grid_col = INVERSE_GRIDS.iter().position(|&g| g == (fine, coarse));
        for &eps in &noise {
            let paper_col = grid_col
                .zip(INVERSE_NOISE.iter().position(|&e| e == eps))
                .map(|(g, e)| g * 3 + e);
            let paper = |row: usize| paper_col.map(|c| numbers::TABLE3[row].1[c]);
            let column = format!("{fine},{coarse} ε={eps}");
            let what = format!("n_f = {fine}, n_c = {coarse}, noise {eps}");
            let make = |r: usize, coarse_r: usize, fno: bool| -> Result<TrainConfig> {
                let mut cfg = base(base_file!("darcy_inverse_141_36_noise0.01.toml"))?;
                if fno {
                    cfg.model = ModelSection::preset("fno2d", "darcy");
                    cfg.loss.kind = Some(LossKind::RelL2);
                }
                cfg.data.r = Some(r);
                cfg.data.coarse_r = Some(coarse_r);
                cfg.data.noise = Some(eps);
                ctx.data(&mut cfg, |r| r.inverse);
                // ex3_darcy_inv.py L27: batch 2 where the coarse stride is at most 7.
                if ctx.reduced.is_none() && coarse_r <= 7 {
                    cfg.batch_size = 2;
                }
                ctx.shrink(&mut cfg, Some(side(r) as i64), false)?;
                if !fno {
                    cfg.model.edit(|m| {
                        if let ModelConfig::Galerkin(c) = m {
                            if let Some(g) = c.scaler_grids.as_mut() {
                                g.fine = side(r) as i64;
                                g.coarse = side(coarse_r) as i64;
                                g.output = OutputGrid::Coarse;
                                // The reference's scale-factor path misses most other grids.
                                g.scale_factor &= ctx.reduced.is_none();
                            }
                        }
                    })?;
                }
                Ok(cfg)
            };
            for (row, (label, r, coarse_r)) in [
                ("FNO2d (only n_f)", stride, stride),
                ("FNO2d (only n_c)", coarse_stride, coarse_stride),
            ]
            .into_iter()
            .enumerate()
            {
                let which = if r == stride { "nf" } else { "nc" };
                let id = format!("inverse/{fine}/eps{eps}/fno-{which}");
                let note = ctx.darcy_note(&what, |r| r.inverse);
                p.add(&id, "fno", train(make(r, coarse_r, true)?), note);
                p.cell(3, label, &column, "fno", paper(row), Source::TestError(id));
            }
            // Table 3 has FT, GT, ST and LT regular and FT, GT with their own norms.
            for (i, v) in VARIANTS.iter().take(6).enumerate() {
                if !ctx.runs(3, v) {
                    continue;
                }
                let id = format!("inverse/{fine}/eps{eps}/{}", v.id());
                let mut cfg = make(stride, coarse_stride, false)?;
                v.apply(&mut cfg, false)?;
                p.add(
                    &id,
                    v.model,
                    train(cfg),
                    ctx.darcy_note(&what, |r| r.inverse),
                );
                p.cell(
                    3,
                    &v.label(),
                    &column,
                    v.model,
                    paper(i + 2),
                    Source::TestError(id),
                );
            }
        }
    }
    Ok(())
}

/// Table 8: GT on Burgers with each normalization, initialization and dropout. The rows with
/// η = δ = 10⁻² and no dropout are Table 2a's GT runs (the same experiments).
fn table8(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    let rows: Vec<usize> = ctx
        .reduced
        .map_or((0..numbers::TABLE8.len()).collect(), |r| r.rows8.to_vec());
    // The reduced profiles' Table 8 is at their smallest n.
    let columns = burgers_columns(ctx);
    let columns = match &ctx.reduced {
        None => columns,
        Some(_) => columns.into_iter().take(1).collect(),
    };
    for (n, stride) in columns {
        let paper_col = BURGERS_N.iter().position(|&m| m == n);
        let column = format!("Burgers n={n}");
        for &row in &rows {
            let numbers::AblationRow {
                label,
                regular,
                eta,
                delta,
                zeta,
                errors: paper,
            } = numbers::TABLE8[row];
            let gt = VARIANTS[if regular { 1 } else { 5 }];
            let shared = eta == 1e-2 && delta == 1e-2 && zeta == 0.0;
            let id = if shared {
                format!("burgers/n{n}/{}", gt.id())
            } else {
                format!("burgers/n{n}/{}-eta{eta}-delta{delta}-zeta{zeta}", gt.id())
            };
            let mut cfg = burgers(ctx, stride, n, false)?;
            gt.apply(&mut cfg, true)?;
            cfg.model.edit(|m| {
                if let ModelConfig::Galerkin(c) = m {
                    c.xavier_init = eta;
                    c.diagonal_weight = delta;
                    c.encoder_dropout = zeta;
                }
            })?;
            p.add(&id, "gt", train(cfg), ctx.burgers_note(n));
            let paper = paper_col.map(|c| paper[c]);
            p.cell(8, label, &column, "gt", paper, Source::TestError(id));
        }
    }
    Ok(())
}

/// Table 1: the peak memory and time of a training step of ST, FT, LT and GT on Burgers (batch
/// 4), measured in a process of its own on the profile's data (the paper: n = 8192 on its GPU).
fn table1(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    let (n, stride, steps) = match &ctx.reduced {
        None => (8192, 1, 5),
        Some(r) => (r.timed_n, r.burgers_resolution / r.timed_n, r.timed_steps),
    };
    for (row, mem_gb, speed) in numbers::TABLE1 {
        let model = row.to_ascii_lowercase();
        let v = VARIANTS
            .iter()
            .find(|v| !v.regular && v.model == model)
            .context("Table 1's rows are variants")?;
        let mut cfg = burgers(ctx, stride, n, false)?;
        v.apply(&mut cfg, true)?;
        cfg.batch_size = 4;
        let id = format!("memory/n{n}/{}", v.id());
        let note = format!("{}; {steps} timed batches of 4", ctx.burgers_note(n));
        p.add(
            &id,
            v.model,
            Work::TimeRun {
                config: Box::new(cfg),
                steps,
            },
            note,
        );
        // The paper's GB (nvidia-smi) as MB, and its iterations per second as seconds per step.
        let label = format!("{row} ({})", v.label());
        p.cell(
            1,
            &label,
            "peak memory (MB)",
            v.model,
            Some(mem_gb * 1000.0),
            Source::PeakMemory(id.clone()),
        );
        p.cell(
            1,
            &label,
            "s / step",
            v.model,
            Some(1.0 / speed),
            Source::StepTime(id),
        );
    }
    Ok(())
}

fn train(config: TrainConfig) -> Work {
    Work::Train {
        config: Box::new(config),
        strides: Vec::new(),
        test_resolutions: Vec::new(),
    }
}

/// The report's section on how a profile's runs differ from the paper's.
pub fn differences(profile: Profile) -> String {
    let common = "- The paper's recipe for every row (Adam, OneCycle stepped every batch, gradient clipping at 0.999, the best epoch on the test split; the H¹ loss for the attention rows, the relative L2 of FNO's own code for FNO's \"1cycle\" rows), each cell's experiment file says exactly what.\n- The regular layer normalization rows use the same initialization as the Galerkin-type rows (η = δ = 10⁻², no dropout; Table 8's fifth row): the normalization is the only difference.\n- Table 1 is measured on the machine named above (peak resident memory of a process that trains the model, and its median seconds per batch); the paper column is the paper's GPU memory (GB × 1000) and 1 / its iterations per second, so the ratio says how the machines differ, and the findings compare the rows with each other.\n- Table 8 is read from the appendix's text extraction, whose row labels are garbled; the rows are identified by the caption and by their agreement with Table 2a.\n";
    match profile {
        Profile::Paper => format!("{common}- The published files: Burgers (`burgers_data_R10.mat`, the first 1024 to train, the last 100 to test) and the Darcy files (`piececonst_r421_N1024_smooth1/2.mat`), at the paper's grids.\n"),
        Profile::Quick | Profile::Smoke => format!("{common}- **Data we generate, not the published files**: Burgers with FNO's process (`ono data gen burgers`, ν = 0.1, GRF initial conditions) solved at fewer points than the published 8192, and Darcy with FNO's process at 421² (`ono data gen darcy`), the interface and the inverse problem on the same samples, at a coarser stride than the paper's.\n- **Smaller everything**: fewer samples and epochs, narrower and shallower models of the same architectures, and a subset of the rows and columns (the cells left out are listed below).\n- So the numbers are **not comparable in size** to the paper's (the ratio column shows how far); the profile checks that every model learns its task and whether the findings hold at this scale.\n"),
    }
}
