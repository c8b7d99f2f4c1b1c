//! `ono`: the user-facing command line of the toolkit. This file is the command line alone (clap's
//! parsing and the exit status); every command's work is in the library (`src/lib.rs`), one
//! module per command group.

use ono_cli::message::{Message, REFUSED_EXIT};
use ono_cli::{bench, check, compare, data, device, eval, info, predict, reproduce, train};

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ono",
    version,
    about = "Neural operators on libtorch",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// Say the result, a refusal or a failure as one tagged JSON line on standard output, for
    /// the `ono` that started this one (`ono_cli::message`).
    #[arg(long, global = true, hide = true)]
    messages: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the libtorch build this binary runs on and the devices it sees, and run a small
    /// matrix product on each device as a smoke test.
    Info,
    /// Train a model from an experiment file (TOML): checkpoints, metrics.jsonl, curves.png and
    /// panels.png go to its `output_dir`.
    Train {
        /// The experiment file.
        config: PathBuf,
        /// Continue the run in `output_dir` from its last checkpoint.
        #[arg(long)]
        resume: bool,
        /// Print nothing while training (the summary line is still printed).
        #[arg(long)]
        quiet: bool,
        /// Also write the run's hand-off to the PyTorch reference loop into this folder (the
        /// resolved run, its data and its initial weights; see
        /// `python benches/pytorch/train_ref.py --help`). Not with `--resume`.
        #[arg(long, conflicts_with = "resume")]
        handoff: Option<PathBuf>,
    },
    /// Evaluate a training checkpoint on the test split of a dataset; prints one JSON line.
    Eval {
        /// A checkpoint written by `ono train` (`checkpoints/last.safetensors` or `best`).
        checkpoint: PathBuf,
        /// The dataset file (default: the one the run was trained on).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Re-read the run's own benchmark at this subsampling stride instead of its own (the
        /// same model at another resolution; e.g. Burgers with r = 1 is 8192 points).
        #[arg(long)]
        r: Option<usize>,
        /// Re-read the run's own benchmark with its test set at this resolution
        /// (`neuralop_darcy`: 16 or 32; a model trained at 16² tested zero-shot at 32²).
        #[arg(long)]
        test_resolution: Option<usize>,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Samples per forward pass.
        #[arg(long, default_value_t = 8)]
        batch: i64,
    },
    /// Predict with a training checkpoint: reads `fx` (S, N, Cf) and `pos` (1 or S, N, d) from a
    /// safetensors file, writes `pred` to another; or predicts the samples of a dataset made by
    /// `ono data import` and writes each on its own mesh (`--format vtu`, for ParaView) or as
    /// NumPy (`--format npz`) into the `--output` folder.
    Predict {
        /// A checkpoint written by `ono train`.
        checkpoint: PathBuf,
        /// Input safetensors file with `fx` and `pos` (raw, un-normalized values), or a dataset
        /// file written by `ono data import`.
        #[arg(long)]
        input: PathBuf,
        /// Output file (`pred` (S, N, C) or (S, N, C, T)); for an imported dataset with
        /// `--format npz` or `vtu`, a folder with one file per sample.
        #[arg(long)]
        output: PathBuf,
        /// safetensors, npz or vtu (VTK XML unstructured grids, for ParaView).
        #[arg(long, value_enum, default_value = "safetensors")]
        format: predict::Format,
        /// The samples of an imported dataset to predict: test, train or all.
        #[arg(long, value_enum, default_value = "test")]
        split: predict::SplitChoice,
        /// Time steps to predict for a time-series model.
        #[arg(long, default_value_t = 10)]
        steps: i64,
        /// Samples per forward pass for point clouds (GNOT's data; use the training batch size).
        #[arg(long, default_value_t = 8)]
        batch: i64,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Under a launcher (torchrun, srun, mpirun): each process predicts a contiguous share
        /// of every sample's points, as a `parallel = "points"` run trains; rank 0 writes.
        #[arg(long)]
        split_points: bool,
        /// Forward passes as CUDA graphs: auto (captured on CUDA: each batch shape's second
        /// forward captured, later ones replayed), on, off, or emulate.
        #[arg(long, default_value = "auto")]
        graphs: ono_train::graphs::Graphs,
    },
    /// Make datasets and inspect benchmark files.
    #[command(subcommand)]
    Data(data::DataCmd),
    /// Check a port against one reference fixture case (`CASE.safetensors` and `CASE.json` as
    /// in fixtures/ono): the architecture comes from the JSON's `family`, the tolerances from
    /// its tolerance fields (per-parameter gradient overrides included); float32 and float64.
    /// Exits 1 naming every tensor beyond its tolerance.
    CheckReference {
        /// The case's tensors.
        weights: PathBuf,
        /// The case's JSON.
        json: PathBuf,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Only float32.
        #[arg(long, conflicts_with = "f64_only")]
        f32_only: bool,
        /// Only float64.
        #[arg(long)]
        f64_only: bool,
    },
    /// Time full training steps (forward, loss, backward, clipping, AdamW) on random data at a
    /// benchmark's shapes and batch size; prints one JSON line.
    BenchStep {
        /// The architecture (`ono info` lists them).
        #[arg(long, default_value = "ono")]
        arch: String,
        /// The architecture's preset. ONO: darcy, ns2d, airfoil, pipe, elasticity, plasticity,
        /// super_resolution, time_extrapolation; mlp: default, small; fno2d: darcy, ns2d, airfoil,
        /// pipe; …
        #[arg(long)]
        preset: String,
        /// Whose shapes (points, grid, batch, channels): an ONO preset name; default: --preset.
        #[arg(long)]
        shapes: Option<String>,
        /// Samples per step (default: the shapes' batch size, ONO's).
        #[arg(long)]
        batch: Option<i64>,
        /// The optimisation: `ono` (AdamW, clipping, Darcy's derivative loss) or `fno` (Adam with
        /// L2 weight decay, no clipping); default: fno for the FNO family, else ono.
        #[arg(long)]
        recipe: Option<String>,
        /// Timed steps.
        #[arg(long, default_value_t = 5)]
        steps: usize,
        /// Untimed warm-up steps.
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Torch intra-op threads (default: libtorch's).
        #[arg(long)]
        threads: Option<i32>,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// How activations are kept: auto (the model's default), none, blocks (recompute each
        /// block: least memory, one more forward) or selective (keep the products, recompute
        /// the element-wise operations). `--recompute` alone means blocks.
        #[arg(long, default_value = "auto", num_args = 0..=1, default_missing_value = "blocks")]
        recompute: ono_models::Recompute,
        /// Fields of the preset to change, as TOML lines (`n_layers = 4`).
        #[arg(long)]
        overrides: Option<String>,
        /// The kind of the matrix products: f32, bf16 or f16 (mixed precision: float32
        /// parameters; f16 with dynamic loss scaling).
        #[arg(long, default_value = "f32")]
        precision: String,
        /// The step as a CUDA graph: auto (captured on CUDA), on, off, or emulate (the
        /// graph-safe step without capture, on any device).
        #[arg(long, default_value = "auto")]
        graphs: ono_train::graphs::Graphs,
    },
    /// Time whole training batches of a run configuration (its data, model, regime, loss and
    /// optimizer, as `ono train` trains them) and print one JSON line: parameters, seconds per
    /// batch, peak memory, bytes per sample. Nothing is written.
    BenchTrain {
        /// The run's TOML file (as for `ono train`).
        config: PathBuf,
        /// Timed batches.
        #[arg(long, default_value_t = 2)]
        steps: usize,
        /// Untimed warm-up batches.
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// cpu, cuda or cuda:N (default: the file's).
        #[arg(long)]
        device: Option<String>,
        /// Torch intra-op threads (default: the file's).
        #[arg(long)]
        threads: Option<i32>,
    },
    /// Reproduce the ONO paper's tables: train every model of every table (experiment files in
    /// each run folder), time the steps, and write report.md, summary.json and plots. Finished
    /// experiments are skipped, interrupted ones resume (`cargo xtask reproduce` builds and runs
    /// this).
    Reproduce(reproduce::Options),
    /// Compare operators on one dataset file (yours, from `ono data import`): each chosen
    /// model trains with its recipe for data of this kind (a 2-D grid: Darcy's; point clouds:
    /// Elasticity's), one budget for all, then report.md and summary.json. Finished models are
    /// skipped, interrupted ones resume; a model that cannot take the data is refused, saying why.
    Compare(compare::Options),
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let messages = cli.messages;
    match dispatch(cli.command) {
        Ok((verdict, said)) => {
            let printed = said.map_or(
                Ok(()),
                |m| {
                    if messages {
                        m.print()
                    } else {
                        m.print_plain()
                    }
                },
            );
            match (printed, verdict) {
                (Err(e), _) => {
                    eprintln!("Error: {e:?}");
                    ExitCode::from(2)
                }
                (Ok(()), true) => ExitCode::SUCCESS,
                // A check that ran and found differences.
                (Ok(()), false) => ExitCode::from(1),
            }
        }
        Err(e) => {
            let m = Message::of_error(&e);
            if messages {
                // The message carries the error; the parent says it in its own words.
                let _ = m.print();
            } else {
                eprintln!("Error: {e:?}");
            }
            // An architecture that cannot take this data, whatever the run: a status of its
            // own for scripts.
            ExitCode::from(match m {
                Message::Refused { .. } => REFUSED_EXIT,
                _ => 2,
            })
        }
    }
}

/// Runs a command: its verdict (`false` when it ran and found differences) and the result it
/// says, if it says one.
fn dispatch(command: Cmd) -> Result<(bool, Option<Message>)> {
    let said = match command {
        Cmd::Info => {
            info::run()?;
            None
        }
        Cmd::Train {
            config,
            resume,
            quiet,
            handoff,
        } => train::train(config, resume, quiet, handoff)?.map(Message::Trained),
        Cmd::Eval {
            checkpoint,
            data,
            r,
            test_resolution,
            device,
            batch,
        } => {
            eval::run(checkpoint, data, r, test_resolution, &device, batch)?;
            None
        }
        Cmd::Predict {
            checkpoint,
            input,
            output,
            steps,
            batch,
            device,
            format,
            split,
            split_points,
            graphs,
        } => {
            predict::run(
                checkpoint,
                input,
                output,
                steps,
                batch,
                &device,
                format,
                split,
                split_points,
                graphs,
            )?;
            None
        }
        Cmd::Data(cmd) => {
            data::run(cmd)?;
            None
        }
        Cmd::CheckReference {
            weights,
            json,
            device: dev,
            f32_only,
            f64_only,
        } => {
            let precisions = check::Precisions {
                f32: !f64_only,
                f64: !f32_only,
            };
            return Ok((
                check::run(&weights, &json, device(&dev)?, precisions)?,
                None,
            ));
        }
        Cmd::BenchStep {
            arch,
            preset,
            shapes,
            batch,
            recipe,
            steps,
            warmup,
            threads,
            device,
            recompute,
            overrides,
            precision,
            graphs,
        } => Some(Message::StepTimes(bench::run(
            &arch,
            &preset,
            shapes.as_deref(),
            batch,
            recipe.as_deref(),
            steps,
            warmup,
            threads,
            &device,
            recompute,
            overrides.as_deref(),
            &precision,
            graphs,
        )?)),
        Cmd::BenchTrain {
            config,
            steps,
            warmup,
            device,
            threads,
        } => Some(Message::BatchTimes(bench::run_train(
            &config, steps, warmup, device, threads,
        )?)),
        Cmd::Reproduce(options) => return Ok((reproduce::run(options)?, None)),
        Cmd::Compare(options) => return Ok((compare::run(options)?, None)),
    };
    Ok((true, said))
}

/// Keeps freed tensor memory in the process instead of returning it to the kernel after every
/// step. With glibc's defaults every (B, N, h) activation (15–35 MB) is a fresh mmap, zeroed by
/// page faults on first touch, and unmapped again when the step ends: the Elasticity training
/// step measured 8.1 s with this tuning against 21.7 s without (docs/benchmarks.md). Blocks up
/// to 32 MiB then come from the heap, which is trimmed only above 2 GiB of free space and grows
/// by at least 1 GiB at a time: with 256 MiB the recomputed Darcy step (which frees and
/// reallocates one block's activations per block) took 26.5–27.7 s against 17.1–21.1 s, for
/// about 0.3 GiB more peak memory; NS2d and Elasticity did not change (docs/benchmarks.md).
/// `ONO_MALLOC_DEFAULTS=1` keeps glibc's behaviour.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("ONO_MALLOC_DEFAULTS").is_none() {
        // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
            libc::mallopt(libc::M_TOP_PAD, 1 << 30);
        }
    }
}
