//! `cargo xtask`: the project runner.
//!
//! It installs what the workspace needs (libtorch through a cached PyPI `torch==2.11.0`, Debian
//! packages), then runs cargo with the environment that makes tch build and its binaries run.
//! It deliberately does not depend on tch, so it compiles in seconds on a fresh clone.

mod bench_compare;
mod bench_report;
mod neuralop;
mod system;
mod test_run;
mod torch;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use torch::TorchEnv;

/// Debian packages that crates of the workspace link against.
/// `libopenblas-dev`: LAPACK for the ndarray-linalg f64 oracles in tests.
/// `libgloo-dev`: the Gloo headers ono-dist's c10d shim compiles against (the wheel lacks them).
const SYSTEM_PACKAGES: &[system::Package] = &[
    system::Package {
        name: "libopenblas-dev",
        why: "LAPACK for the ndarray-linalg f64 test oracles",
    },
    system::Package {
        name: "libgloo-dev",
        why: "declarations of the Gloo types torch's ProcessGroupGloo.hpp names (torch's own \
              bundled Gloo does the work)",
    },
];

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "ono project runner",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install or find libtorch and the system packages; print what was found or installed.
    Setup,
    /// Set up, then run `cargo test --workspace --no-fail-fast` with one torch thread per test
    /// process, once on the machine's own floating-point paths and once more on the x86-64
    /// baseline paths (ATen's scalar kernels, MKL's SSE4.2 code, oneDNN's SSE4.1 code), and end
    /// with a line of passed, failed and ignored per pass and every failure.
    ///
    /// Extra arguments go to `cargo test` (e.g. `cargo xtask test -p ono-kernels -- cholesky`).
    Test {
        /// The passes to run, comma-separated: native (the machine's own kernels), baseline.
        #[arg(long, value_delimiter = ',', default_values = ["native", "baseline"])]
        paths: Vec<test_run::FloatingPath>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Set up, then run the criterion benchmarks, optionally only those matching FILTER.
    Bench {
        /// Criterion filter (a regex on benchmark ids).
        filter: Option<String>,
        /// Further arguments for criterion (after `--`).
        #[arg(last = true)]
        criterion_args: Vec<OsString>,
    },
    /// Print criterion's saved results as markdown tables with the log-log slope against N.
    BenchReport,
    /// Time the PyTorch original's training step and ours one after the other, in separate
    /// processes, and print the time and memory ratios (docs/benchmarks.md).
    ///
    /// Sets up, installs the PyTorch side's pinned packages into the xtask's venv if missing,
    /// builds the release `ono`, then for each (model, preset) runs `benches/pytorch/*_step.py`
    /// and `ono bench-step` with the same steps, warm-up, threads and device.
    BenchCompare(Box<BenchCompareArgs>),
    /// Build the release measurement program `slopes` (benches/src/bin/slopes.rs) and print the
    /// log-log slopes of the linear attention kernels' time against N = 64k … 1M (B = 1, H = 8,
    /// d = 16), sizes interleaved in a shuffled order per round, the minimum over rounds: the
    /// machine's facts, then one markdown table per pass. Arguments go to the program:
    /// `[--rounds R] [--max-n N] [--sizes N,…] [--kernels K,…] [--threads T] [--device cpu|cuda]
    /// [--seed S]`.
    BenchSlopes {
        /// Arguments of `slopes`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Print shell exports so that plain cargo works: `eval "$(cargo xtask env)"`.
    Env,
    /// Reproduce the ONO paper's tables (or the Galerkin Transformer paper's, `--paper
    /// galerkin`, or GNOT's, `--paper gnot`): set up, build the release `ono` binary and run
    /// `ono reproduce` with these arguments: `[--paper ono|galerkin|gnot] [--profile quick|paper] [--only TABLES]
    /// [--models M,…] [--device D] [--data-dir DIR] [--neuralop-dir DIR] [--out DIR] [--threads N]
    /// [--plan-only [--measure]] [--rehearse] [--jobs N | --devices cuda:0,…] [--shard I/N]
    /// [--reference]` (`ono reproduce --help`); the neuraloperator 0.3.0 files
    /// (the reduced profiles' Darcy) are fetched first unless a folder is named. `--reference`
    /// also trains every trained experiment with the PyTorch reference loop
    /// (`benches/pytorch/train_ref.py`, in the libtorch's Python, its packages installed) and
    /// reports both. Finished experiments are skipped and interrupted ones resume, so the same
    /// command continues a run.
    Reproduce {
        /// Arguments of `ono reproduce`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Data sets: the generators, and the published files fetched from a registry.
    Data {
        #[command(subcommand)]
        command: DataCmd,
    },
}

#[derive(clap::Args)]
struct BenchCompareArgs {
    /// Models, comma-separated: ono, fno, galerkin, gnot.
    #[arg(long, value_delimiter = ',', default_value = "ono")]
    models: Vec<String>,
    /// Benchmark shapes, comma-separated (ono, gnot: darcy, ns2d, elasticity; fno, galerkin:
    /// darcy); default: every one each model has.
    #[arg(long, value_delimiter = ',')]
    presets: Option<Vec<String>>,
    /// Timed steps per process.
    #[arg(long, default_value_t = 5)]
    steps: usize,
    /// Untimed warm-up steps per process (default: 1 on the CPU, 2 on CUDA).
    #[arg(long)]
    warmup: Option<usize>,
    /// Rounds; PyTorch goes first in the odd ones, ours in the even ones.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Torch threads of both processes (and OMP_NUM_THREADS); default: all cores.
    #[arg(long)]
    threads: Option<usize>,
    /// cpu or cuda (pick the GPU with CUDA_VISIBLE_DEVICES).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Ours' mode: default (the model's `auto`), none, blocks or selective (passed as
    /// `ono bench-step --recompute MODE`).
    #[arg(long, default_value = "default")]
    mode: String,
    /// Passed to ours as `--precision` (PyTorch stays float32).
    #[arg(long)]
    precision: Option<String>,
    /// Passed to ours as `--graphs`: auto (ours' default: the step captured as a CUDA graph on
    /// CUDA), on, off or emulate.
    #[arg(long)]
    graphs: Option<String>,
    /// Also write every raw record and ratio to this JSON file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A prebuilt `ono` binary: no setup and no build (for a GPU machine without a Rust
    /// toolchain). The PyTorch scripts are then found under the current directory, and the
    /// environment (LD_LIBRARY_PATH to a torch/lib) is the caller's.
    #[arg(long, requires = "python")]
    ono: Option<PathBuf>,
    /// With `--ono`: the Python whose torch runs the PyTorch side (its packages must already be
    /// there; nothing is installed).
    #[arg(long, requires = "ono")]
    python: Option<PathBuf>,
}

#[derive(Subcommand)]
enum DataCmd {
    /// Generate darcy, ns2d or burgers data in the original file layout: builds the release
    /// `ono` binary and runs `ono data gen` with these arguments (`--n`, `--res`, `--seed`,
    /// `--out`, ...; see `ono data gen --help`).
    Gen {
        /// Arguments of `ono data gen`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Fetch the data files of the neuraloperator 0.3.0 wheel on PyPI (MIT licence) once with
    /// pip into the cache (`$ONO_CACHE_DIR`, else `~/.cache/ono`), check the wheel's sha256,
    /// unpack them (the benchmarks `neuralop_darcy` and `neuralop_burgers`), and print their
    /// folder: the `--data-dir` / `data_dir` to read them from. Nothing is fetched when the
    /// folder is already complete.
    Fetch,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Setup => {
            let env = setup()?;
            env.describe();
            Ok(())
        }
        Cmd::Test { paths, args } => test(paths, args),
        Cmd::Bench {
            filter,
            criterion_args,
        } => {
            let env = setup()?;
            let mut cmd = cargo(&env);
            cmd.args(["bench", "-p", "ono-benches", "--"]);
            cmd.args(filter).args(criterion_args);
            run(cmd)
        }
        Cmd::BenchReport => {
            let dir = target_dir().join("criterion");
            print!("{}", bench_report::report(&dir)?);
            Ok(())
        }
        Cmd::BenchSlopes { args } => {
            let env = setup()?;
            let mut build = cargo(&env);
            build.args(["build", "--release", "-p", "ono-benches", "--bin", "slopes"]);
            run(build)?;
            let mut cmd = Command::new(target_dir().join("release").join("slopes"));
            env.apply(&mut cmd);
            cmd.args(args).stderr(std::process::Stdio::inherit());
            let shown = format!("{cmd:?}");
            let out = cmd
                .output()
                .with_context(|| format!("could not start {shown}"))?;
            if !out.status.success() {
                bail!("command failed ({}): {shown}", out.status);
            }
            print!("{}", bench_report::slopes_report(&out.stdout)?);
            Ok(())
        }
        Cmd::Env => {
            // Progress goes to stderr, so only the exports reach `eval`.
            let env = setup()?;
            print!("{}", env.shell_exports());
            Ok(())
        }
        Cmd::BenchCompare(a) => bench_compare(*a),
        Cmd::Reproduce { args } => {
            let env = setup()?;
            let mut build = cargo(&env);
            build.args(["build", "--release", "-p", "ono-cli", "--bin", "ono"]);
            run(build)?;
            let mut cmd = Command::new(target_dir().join("release").join("ono"));
            env.apply(&mut cmd);
            if let Some(commit) = git_commit() {
                cmd.env("ONO_COMMIT", commit);
            }
            // `--reference`: the PyTorch reference loop after each trained experiment, run by
            // the Python of the libtorch in use, with the restatements' pinned packages.
            let reference = args.iter().any(|a| a == "--reference");
            let args: Vec<OsString> = args.into_iter().filter(|a| a != "--reference").collect();
            cmd.arg("reproduce").args(&args);
            if reference {
                let python = env.python().context(
                    "--reference runs the PyTorch loop with the Python of the libtorch in use, \
                     and LIBTORCH names no Python: unset LIBTORCH (xtask's own venv) or set \
                     LIBTORCH_USE_PYTORCH",
                )?;
                bench_compare::ensure_packages(python, env.managed())?;
                cmd.arg("--reference-python").arg(python);
                cmd.arg("--reference-script").arg(
                    workspace_root()
                        .join("benches")
                        .join("pytorch")
                        .join("train_ref.py"),
                );
            }
            // The reduced profiles' Darcy is the neuraloperator wheel's set: fetched once (or
            // reused from the cache), unless the call names its own folder.
            let named = args.iter().any(|a| {
                a.to_str()
                    .is_some_and(|a| a == "--neuralop-dir" || a.starts_with("--neuralop-dir="))
            }) || std::env::var_os("ONO_NEURALOP_DIR").is_some();
            if !named {
                cmd.arg("--neuralop-dir").arg(neuralop::ensure_data()?);
            }
            run(cmd)
        }
        Cmd::Data {
            command: DataCmd::Fetch,
        } => {
            println!("{}", neuralop::ensure_data()?.display());
            Ok(())
        }
        Cmd::Data {
            command: DataCmd::Gen { args },
        } => {
            let env = setup()?;
            let mut cmd = cargo(&env);
            cmd.args([
                "run",
                "--release",
                "-p",
                "ono-cli",
                "--bin",
                "ono",
                "--",
                "data",
                "gen",
            ]);
            cmd.args(args);
            run(cmd)
        }
    }
}

/// `cargo xtask test`: every pass to its end, then one summary of all of them.
fn test(paths: Vec<test_run::FloatingPath>, args: Vec<OsString>) -> Result<()> {
    let env = setup()?;
    // The whole workspace unless the caller picked packages.
    let whole_workspace = !args
        .iter()
        .any(|a| a == "-p" || a == "--package" || a.to_string_lossy().starts_with("--package="));
    let mut summary = String::new();
    let mut ok = true;
    for path in paths {
        let mut cmd = cargo(&env);
        cmd.arg("test");
        if whole_workspace {
            cmd.arg("--workspace");
        }
        if !args.iter().any(|a| a == "--no-fail-fast") {
            cmd.arg("--no-fail-fast");
        }
        cmd.args(&args);
        path.apply(&mut cmd, &args);
        // One torch (OpenMP/MKL) thread per test process: the CI machine has two cores and
        // libtest already runs tests on several threads. OpenBLAS likewise
        // (docs/tch-notes.md#openblas-and-lapack).
        for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"] {
            cmd.env(var, "1");
        }
        reference_python(&env, &mut cmd)?;
        let scratch = TestScratch::new()?;
        cmd.env("TMPDIR", scratch.path());
        torch::say(format!("test pass `{path}`: {}", path.describe()));
        let (tally, cargo_ok) = test_run::run_counted(cmd)?;
        drop(scratch);
        let label = format!("test pass `{path}`");
        summary.push_str(&tally.report(&label));
        if !cargo_ok && tally.ok() {
            // cargo failed without a test failing: a build error, or a crash it reported alone.
            summary.push_str("  cargo test failed without a failing test (see its output above)\n");
        }
        ok &= cargo_ok && tally.ok();
    }
    if whole_workspace {
        if let Err(e) = run_downstream_example(&env) {
            summary.push_str(&format!("  FAILED the downstream example: {e:#}\n"));
            ok = false;
        }
        match check_without_dist(&env) {
            Ok(tally) => {
                summary.push_str(&tally.report("ono-train without `dist`"));
                ok &= tally.ok();
            }
            Err(e) => {
                summary.push_str(&format!("  FAILED ono-train without `dist`: {e:#}\n"));
                ok = false;
            }
        }
    }
    println!("\n{summary}");
    if !ok {
        // The summary is the whole message: no error chain or backtrace after it.
        std::process::exit(1);
    }
    Ok(())
}

fn bench_compare(a: BenchCompareArgs) -> Result<()> {
    use bench_compare::{Options, RawOptions};
    let o = Options::new(RawOptions {
        models: a.models,
        presets: a.presets,
        steps: a.steps,
        warmup: a.warmup,
        rounds: a.rounds,
        threads: a.threads,
        device: a.device,
        mode: a.mode,
        precision: a.precision,
        graphs: a.graphs,
        json: a.json,
    })?;
    if let (Some(ono), Some(python)) = (&a.ono, &a.python) {
        // Prebuilt: the caller's environment as it is, the scripts under the current folder.
        bench_compare::ensure_packages(python, false)?;
        let root = std::env::current_dir()?;
        return compare_and_print(&o, &root, ono, python, &|_: &mut Command| {});
    }
    let env = setup()?;
    let python = env.python().context(
        "bench-compare runs the PyTorch side with the Python of the libtorch in use, and \
         LIBTORCH names no Python: unset LIBTORCH (xtask's own venv) or set LIBTORCH_USE_PYTORCH",
    )?;
    bench_compare::ensure_packages(python, env.managed())?;
    let mut build = cargo(&env);
    build.args(["build", "--release", "-p", "ono-cli", "--bin", "ono"]);
    run(build)?;
    let ono = target_dir().join("release").join("ono");
    let root = workspace_root();
    let apply = |cmd: &mut Command| env.apply(cmd);
    compare_and_print(&o, &root, &ono, python, &apply)
}

/// Checks `ono`'s flags, runs every pair and prints the table (and the JSON report).
fn compare_and_print(
    o: &bench_compare::Options,
    root: &std::path::Path,
    ono: &std::path::Path,
    python: &std::path::Path,
    apply: &dyn Fn(&mut Command),
) -> Result<()> {
    let mut help = Command::new(ono);
    apply(&mut help);
    let help = help.args(["bench-step", "--help"]).output()?;
    bench_compare::check_flags(&String::from_utf8_lossy(&help.stdout), o)?;
    let machine = bench_compare::machine(o.cuda);
    torch::say(format!("machine: {machine}"));
    let rows = bench_compare::Runner {
        root,
        ono,
        python,
        env: apply,
    }
    .run(o)?;
    println!("machine: {machine}");
    for r in &rows {
        println!("round {}: PyTorch: {}", r.round + 1, r.pytorch.command);
        println!("round {}: ours:    {}", r.round + 1, r.ours.command);
    }
    print!("{}", bench_compare::table(&rows, o.cuda));
    if let Some(path) = &o.json {
        let report = bench_compare::json_report(&rows, o, &machine);
        bench_compare::write_atomic(path, &serde_json::to_string_pretty(&report)?)?;
        torch::say(format!("wrote {}", path.display()));
    }
    Ok(())
}

fn workspace_root() -> std::path::PathBuf {
    let xtask = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// Installs or finds everything the workspace needs. Progress goes to stderr.
fn setup() -> Result<TorchEnv> {
    let start = Instant::now();
    system::ensure(SYSTEM_PACKAGES)?;
    let env = torch::bootstrap()?;
    torch::ensure_cuda_headers(&env)?;
    torch::say(format!(
        "setup done in {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    Ok(env)
}

/// Names the Python of the libtorch in use to the tests that run the PyTorch reference loop
/// (`ONO_REFERENCE_PYTHON`), after installing the restatements' pinned packages into the xtask's
/// own venv. A Python the xtask does not manage is named only when it has them; without one those
/// tests say they were skipped.
fn reference_python(env: &TorchEnv, cmd: &mut Command) -> Result<()> {
    let Some(python) = env.python() else {
        torch::say("no Python beside libtorch: the reference-loop tests are skipped");
        return Ok(());
    };
    match bench_compare::ensure_packages(python, env.managed()) {
        Ok(()) => {
            cmd.env("ONO_REFERENCE_PYTHON", python);
        }
        Err(e) if !env.managed() => {
            torch::say(format!("the reference-loop tests are skipped: {e:#}"));
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// A `cargo` command with the libtorch environment applied.
fn cargo(env: &TorchEnv) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    env.apply(&mut cmd);
    cmd
}

/// Runs the binary of `examples/downstream` as a user would: directly, not through `cargo run`
/// (which sets `LD_LIBRARY_PATH`), and with `LD_LIBRARY_PATH` removed, so that it starts only if
/// ono-link gave it a RUNPATH to libtorch. The workspace test run has just built it (the package
/// has integration tests); `test --workspace --no-run` makes sure of that with the test run's own
/// feature set, where a `build -p` would resolve features anew and rebuild half the workspace.
fn run_downstream_example(env: &TorchEnv) -> Result<()> {
    const PACKAGE: &str = "ono-downstream-example";
    let mut build = cargo(env);
    build.args(["test", "--workspace", "--no-run"]);
    run(build)?;
    let exe = target_dir().join("debug").join(PACKAGE);
    let mut cmd = Command::new(&exe);
    cmd.env_remove("LD_LIBRARY_PATH");
    torch::say(format!("running {} without LD_LIBRARY_PATH", exe.display()));
    run(cmd)
}

/// A library user of ono-train builds no C++ shim and needs no Gloo headers: resolved for
/// ono-train alone, ono-dist's `c10d` feature is off (and on for the `ono` binary, so the check
/// can fail either way); built that way, ono-dist refuses a process group by name.
fn check_without_dist(env: &TorchEnv) -> Result<test_run::Tally> {
    const C10D: &str = "ono-dist feature \"c10d\"";
    for (package, wanted) in [("ono-train", false), ("ono-cli", true)] {
        let mut tree = cargo(env);
        tree.args(["tree", "-p", package, "-e", "features", "--prefix", "none"]);
        let out = tree.output().context("could not run cargo tree")?;
        if !out.status.success() {
            bail!(
                "cargo tree -p {package} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let has = String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == C10D);
        if has != wanted {
            bail!(
                "resolved for {package} alone, ono-dist's c10d is {} (expected {})",
                if has { "on" } else { "off" },
                if wanted { "on" } else { "off" }
            );
        }
    }
    let mut cmd = cargo(env);
    cmd.args(["test", "-p", "ono-dist", "--no-default-features"]);
    torch::say("ono-dist without c10d (ono-train without `dist`)");
    let (tally, cargo_ok) = test_run::run_counted(cmd)?;
    if !cargo_ok {
        bail!("cargo test -p ono-dist --no-default-features failed");
    }
    Ok(tally)
}

/// The temp dir of one test pass, `<target>/test-tmp`: emptied before the pass and removed after
/// it (unless `ONO_KEEP_TEST_DIRS` is set), so that whatever a test leaves behind, a killed child
/// process's files included, never piles up in the system's /tmp from run to run. A CI machine's
/// disk once filled up that way.
struct TestScratch(PathBuf);

impl TestScratch {
    fn new() -> Result<Self> {
        let dir = target_dir().join("test-tmp");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        Ok(TestScratch(dir))
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TestScratch {
    fn drop(&mut self) {
        if std::env::var_os("ONO_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `CARGO_TARGET_DIR`, else the workspace's `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The checked-out commit (with `-dirty` for local changes), for the reproduction report.
fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(workspace_root())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs a command with inherited stdio (output streams live) and fails on a non-zero exit.
fn run(mut cmd: Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start {shown}"))?;
    if !status.success() {
        bail!("command failed ({status}): {shown}");
    }
    Ok(())
}
