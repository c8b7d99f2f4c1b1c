//! Data-parallel training as users launch it: `torchrun --no-python --nproc-per-node 2 ono train`
//! (torch's elastic agent and its TCPStore, Gloo on this CPU), and plain `RANK`/`WORLD_SIZE`
//! environments as a hand-written launcher sets them.
//!
//! The oracle: two processes with one micro-batch each must train exactly what one process
//! accumulating the same two micro-batches trains (`accumulate_steps = 2`), in float64, to
//! 1e-10: parameters, ONO's EMA covariances and the other buffers, the logged losses and the test
//! errors. Point sharding (`parallel = "points"`) is launched the same way: 2 and 3 processes,
//! each holding a share of every sample's points, must train what one process trains on whole
//! samples. Killing a rank with SIGKILL mid-epoch and relaunching with `--resume` must end where
//! an uninterrupted run ends. Mismatched configurations, an unreachable rendezvous and a dead
//! rank are errors within the timeout, never hangs.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ono_data::dataset::{Split, TensorDataset};
use ono_train::checkpoint::{Checkpoint, TrainState};
use tch::{Device, Kind, Tensor};

use common::{ok, ono, read_json, temp_dir};

/// `torchrun` from the xtask's venv (on PATH under `cargo xtask test`), if there is one.
fn torchrun() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        dirs.push(PathBuf::from(v).join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("torchrun"))
        .find(|p| p.is_file())
}

/// The tests of this file one at a time: each starts several processes that rendezvous on a
/// port picked free (and released) just before, so launches at once on the 2 cores could take
/// each other's port or time out; a kill test would see its launch end early.
fn one_launch_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LAUNCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LAUNCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const H: i64 = 8;

/// A steady set on an H×H grid: 10 training and 3 test samples.
fn grid_dataset(path: &Path) {
    let n = H * H;
    let opts = (Kind::Float, Device::Cpu);
    tch::manual_seed(11);
    let r = Tensor::linspace(0.0, 1.0, H, opts);
    let pos = Tensor::stack(
        &[
            r.view([H, 1]).expand([H, H], false),
            r.view([1, H]).expand([H, H], false),
        ],
        2,
    )
    .view([1, n, 2]);
    let make = |s: i64| {
        let fx = Tensor::randn([s, n, 2], opts);
        let y = (fx.narrow(2, 0, 1) * 0.5).sin() * 4.0 + fx.narrow(2, 1, 1) + 3.0;
        Split::new(fx, y, pos.shallow_clone())
    };
    TensorDataset {
        train: make(10),
        test: make(3),
        grid: Some(vec![H, H]),
        query_grid: None,
        test_grid: None,
    }
    .write(path)
    .unwrap();
}

/// An experiment file `dir/name.toml` writing to `dir/name`: a small ONO or FNO in float64,
/// batches of 4 (10 samples: steps of 4, 4 and 2), clipping on.
fn experiment(dir: &Path, name: &str, arch: &str, extra: &str, epochs: u64) -> PathBuf {
    let model = match arch {
        // ONO with its linear-transformer block: every sum over points it makes can be split.
        "ono-points" => "preset = \"ns2d\"\n[model.overrides]\nn_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4\nnn_block = \"linear_transformer\"",
        "fno" => "arch = \"fno2d\"\npreset = \"darcy\"\n[model.overrides]\nmodes = [3, 3]\nwidth = 6\nn_layers = 2\npadding = [0, 0]\nproj_hidden = 8",
        _ => "preset = \"ns2d\"\n[model.overrides]\nn_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4",
    };
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
seed = 3
epochs = {epochs}
batch_size = 4
threads = 1
double = true
output_dir = "{name}"
{extra}

[model]
{model}

[data]
path = "grid.safetensors"

[optimizer]
max_grad_norm = 0.5

[log]
panels = 0
"#
        ),
    )
    .unwrap();
    path
}

/// `torchrun --no-python --nproc-per-node 2 ono train CONFIG --quiet [--resume]`.
fn torchrun_train(torchrun: &Path, config: &Path, resume: bool, tag: &str) -> Command {
    torchrun_train_on(torchrun, 2, config, resume, tag)
}

/// [`torchrun_train`] on `nproc` processes.
fn torchrun_train_on(
    torchrun: &Path,
    nproc: usize,
    config: &Path,
    resume: bool,
    tag: &str,
) -> Command {
    let mut c = Command::new(torchrun);
    c.args([
        "--nproc-per-node",
        &nproc.to_string(),
        "--master-addr",
        "127.0.0.1",
    ])
    .arg(format!("--master-port={}", free_port()))
    .arg("--no-python")
    .arg(env!("CARGO_BIN_EXE_ono"))
    .arg("train")
    .arg(config)
    .arg("--quiet")
    .env("OMP_NUM_THREADS", "1")
    .env("ONO_DIST_TIMEOUT", "60")
    .env("ONO_TEST_TAG", tag);
    if resume {
        c.arg("--resume");
    }
    c
}

/// The model's variables (parameters and buffers) of a checkpoint, by name, in f64.
fn model_tensors(path: &Path) -> Vec<(String, Tensor)> {
    let c = Checkpoint::load(path).unwrap();
    c.tensors
        .into_iter()
        .filter(|(k, _)| k.starts_with("model."))
        .map(|(k, v)| (k, v.to_kind(Kind::Double)))
        .collect()
}

/// Asserts that two checkpoints' models agree to `tol` (max |a − b| over max |b|, per tensor),
/// and that their runs logged the same losses and test errors.
fn assert_close_runs(a: &Path, b: &Path, tol: f64) {
    let (ma, mb) = (model_tensors(a), model_tensors(b));
    assert!(!ma.is_empty());
    assert_eq!(ma.len(), mb.len());
    for ((ka, va), (kb, vb)) in ma.iter().zip(&mb) {
        assert_eq!(ka, kb);
        let d = (va - vb).abs().max().double_value(&[]);
        let scale = vb.abs().max().double_value(&[]).max(1e-300);
        assert!(d <= tol * scale, "{ka}: |Δ| {d:e} of {scale:e}");
    }
    let sa: TrainState = read_json(&a.with_extension("json")).unwrap();
    let sb: TrainState = read_json(&b.with_extension("json")).unwrap();
    assert_eq!(sa.global_step, sb.global_step);
    assert_eq!(sa.history.len(), sb.history.len());
    for (x, y) in sa.history.iter().zip(&sb.history) {
        assert!((x.train_loss - y.train_loss).abs() <= tol * y.train_loss.abs());
        let (ex, ey) = (x.test_rel_l2.unwrap(), y.test_rel_l2.unwrap());
        assert!((ex - ey).abs() <= tol * ey, "{ex} vs {ey}");
    }
}

fn output(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().unwrap()
}

#[test]
fn two_ranks_train_what_one_process_accumulating_two_micro_batches_trains() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let Some(torchrun) = torchrun() else {
        eprintln!("SKIPPED: no torchrun on PATH or in $VIRTUAL_ENV (run under `cargo xtask test`)");
        return;
    };
    let dir = temp_dir("dp-oracle");
    grid_dataset(&dir.join("grid.safetensors"));
    for arch in ["fno", "ono"] {
        let dp = experiment(&dir, &format!("dp-{arch}"), arch, "", 2);
        let one = experiment(
            &dir,
            &format!("one-{arch}"),
            arch,
            "accumulate_steps = 2",
            2,
        );
        let mut c = torchrun_train(&torchrun, &dp, false, "oracle");
        c.current_dir(&dir);
        let out = output(c);
        ok(&out);
        // Rank 0 alone prints the summary line.
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("\"steps\":6").count(), 1, "{stdout}");
        let mut c = ono();
        c.current_dir(&dir).arg("train").arg(&one).arg("--quiet");
        ok(&output(c));
        let last = |name: &str| dir.join(name).join("checkpoints/last.safetensors");
        assert_close_runs(
            &last(&format!("dp-{arch}")),
            &last(&format!("one-{arch}")),
            1e-10,
        );
        // Not vacuous: one process with one micro-batch per step trains something else for
        // ONO (its whitening sees the whole batch), and the runs did train.
        if arch == "ono" {
            let plain = experiment(&dir, "plain-ono", arch, "", 2);
            let mut c = ono();
            c.current_dir(&dir).arg("train").arg(&plain).arg("--quiet");
            ok(&output(c));
            let (a, b) = (
                model_tensors(&last("plain-ono")),
                model_tensors(&last("one-ono")),
            );
            let moved = a
                .iter()
                .zip(&b)
                .any(|((_, x), (_, y))| (x - y).abs().max().double_value(&[]) > 1e-8);
            assert!(moved, "accumulation changed nothing for ONO");
        }
    }
}

/// Graph-safe steps over processes (issue #47): two ranks under `graphs = "emulate"` (each
/// seeding its one micro-batch before the step; the gradients', losses' and EMA statistics'
/// collectives inside the step, as a captured step holds them) train what two plain ranks
/// train, bit for bit; so do two ranks splitting every sample's points.
#[test]
fn emulated_graph_steps_over_processes_train_as_plain_ones() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let Some(torchrun) = torchrun() else {
        eprintln!("SKIPPED: no torchrun on PATH or in $VIRTUAL_ENV (run under `cargo xtask test`)");
        return;
    };
    let dir = temp_dir("dp-graphs");
    grid_dataset(&dir.join("grid.safetensors"));
    let last = |name: &str| dir.join(name).join("checkpoints/last.safetensors");
    for (arch, extra) in [("ono", ""), ("ono-points", "parallel = \"points\"")] {
        let plain = format!("plain-{arch}");
        let emulated = format!("emulated-{arch}");
        let files = [
            experiment(&dir, &plain, arch, extra, 2),
            experiment(
                &dir,
                &emulated,
                arch,
                &format!("{extra}\ngraphs = \"emulate\""),
                2,
            ),
        ];
        for file in &files {
            let mut c = torchrun_train(&torchrun, file, false, "graphs");
            c.current_dir(&dir);
            ok(&output(c));
        }
        assert_close_runs(&last(&plain), &last(&emulated), 0.0);
    }
}

/// The PID of the `ono` process with `RANK=rank` launched under `ONO_TEST_TAG=tag`.
fn rank_pid(tag: &str, rank: usize) -> Option<i32> {
    let want_tag = format!("ONO_TEST_TAG={tag}");
    let want_rank = format!("RANK={rank}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        let has = |s: &str| vars.contains(&s.as_bytes());
        let exe = std::fs::read_link(e.path().join("exe")).unwrap_or_default();
        if has(&want_tag) && has(&want_rank) && exe.file_name().is_some_and(|n| n == "ono") {
            return Some(pid);
        }
    }
    None
}

fn wait_with_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("still running after {limit:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `sidecar` says at least `step` steps were done, then kills the `ono` process of
/// `rank` under `tag` with SIGKILL and waits for the launch to fail.
fn kill_rank_after(child: &mut Child, sidecar: &Path, step: u64, tag: &str, rank: usize) {
    let start = Instant::now();
    while read_json::<TrainState>(sidecar).is_none_or(|s| s.global_step < step) {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the launch ended before step {step}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = rank_pid(tag, rank).expect("the rank's process");
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let status = wait_with_timeout(child, Duration::from_secs(120));
    assert!(!status.success(), "the launch survived a dead rank");
}

/// Rank 1 killed mid-epoch, the launch relaunched with `--resume`; then rank 0 killed, and the
/// run resumed by one process, which keeps the two micro-batches per step (`accumulate_steps`
/// becomes 2): the end is the uninterrupted run's.
#[test]
fn a_rank_killed_mid_epoch_resumes_to_the_uninterrupted_result() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let Some(torchrun) = torchrun() else {
        eprintln!("SKIPPED: no torchrun on PATH or in $VIRTUAL_ENV (run under `cargo xtask test`)");
        return;
    };
    let dir = temp_dir("dp-kill");
    grid_dataset(&dir.join("grid.safetensors"));
    let every = "[checkpoint]\nevery_steps = 1";
    let epochs = 24;
    let killed = experiment(&dir, "killed", "ono", every, epochs);
    let whole = experiment(&dir, "whole", "ono", "accumulate_steps = 2", epochs);
    let sidecar = dir.join("killed/checkpoints/last.json");
    let launch = |resume: bool, tag: &str| {
        let mut c = torchrun_train(&torchrun, &killed, resume, tag);
        c.current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c.spawn().unwrap()
    };
    // Steps of 4, 4 and 2 samples: step 4 is the second batch of the second epoch.
    kill_rank_after(&mut launch(false, "kill-1"), &sidecar, 4, "kill-1", 1);
    let first: TrainState = read_json(&sidecar).unwrap();
    kill_rank_after(
        &mut launch(true, "kill-2"),
        &sidecar,
        first.global_step + 12,
        "kill-2",
        0,
    );
    let second: TrainState = read_json(&sidecar).unwrap();
    assert!(
        second.global_step < epochs * 3,
        "the run finished before the kill"
    );
    assert_eq!(second.micro_batches, 2);
    let mut c = ono();
    c.current_dir(&dir)
        .arg("train")
        .arg(&killed)
        .arg("--resume");
    let err = ok(&output(c));
    assert!(
        err.contains("resuming with accumulate_steps = 2 on 1 process"),
        "{err}"
    );
    let mut c = ono();
    c.current_dir(&dir).arg("train").arg(&whole).arg("--quiet");
    ok(&output(c));
    let last = |name: &str| dir.join(name).join("checkpoints/last.safetensors");
    assert_close_runs(&last("killed"), &last("whole"), 1e-10);
}

/// `ono train` as rank `rank` of `world` in a plain env:// launch.
fn env_rank(dir: &Path, config: &Path, rank: usize, world: usize, port: u16) -> Command {
    let mut c = ono();
    c.current_dir(dir)
        .arg("train")
        .arg(config)
        .arg("--quiet")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("LOCAL_WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn stderr_of(child: Child, limit: Duration) -> (bool, String, Duration) {
    let start = Instant::now();
    let mut child = child;
    let status = wait_with_timeout(&mut child, limit);
    let out = child.wait_with_output().unwrap();
    (
        status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

#[test]
fn mismatches_unreachable_rendezvous_and_dead_ranks_are_errors_not_hangs() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let dir = temp_dir("dp-errors");
    grid_dataset(&dir.join("grid.safetensors"));
    let limit = Duration::from_secs(90);

    // Rank 1 was given another batch size.
    let a = experiment(&dir, "a", "fno", "", 1);
    let b = dir.join("b.toml");
    std::fs::write(
        &b,
        std::fs::read_to_string(&a)
            .unwrap()
            .replace("batch_size = 4", "batch_size = 5"),
    )
    .unwrap();
    let port = free_port();
    let r0 = env_rank(&dir, &a, 0, 2, port).spawn().unwrap();
    let r1 = env_rank(&dir, &b, 1, 2, port).spawn().unwrap();
    let (ok0, err0, _) = stderr_of(r0, limit);
    let (ok1, err1, _) = stderr_of(r1, limit);
    assert!(!ok0 && !ok1);
    for err in [&err0, &err1] {
        assert!(
            err.contains("rank 1 differs from rank 0 in its configuration"),
            "{err}"
        );
    }

    // Nobody listens at the rendezvous: an error once the timeout has passed.
    let mut c = env_rank(&dir, &a, 1, 2, free_port());
    c.env("ONO_DIST_TIMEOUT", "3");
    let (ok1, err, took) = stderr_of(c.spawn().unwrap(), limit);
    assert!(!ok1);
    assert!(err.contains("127.0.0.1"), "{err}");
    assert!(took < Duration::from_secs(60), "{took:?}");

    // Rank 1 dies mid-run: rank 0 stops with the collective's error.
    let long = experiment(&dir, "long", "fno", "[checkpoint]\nevery_steps = 1", 500);
    let port = free_port();
    let r0 = env_rank(&dir, &long, 0, 2, port)
        .env("ONO_DIST_TIMEOUT", "20")
        .spawn()
        .unwrap();
    let mut r1 = env_rank(&dir, &long, 1, 2, port)
        .env("ONO_DIST_TIMEOUT", "20")
        .spawn()
        .unwrap();
    let sidecar = dir.join("long/checkpoints/last.json");
    let start = Instant::now();
    while read_json::<TrainState>(&sidecar).is_none_or(|s| s.global_step < 2) {
        assert!(start.elapsed() < limit, "no checkpoint");
        std::thread::sleep(Duration::from_millis(2));
    }
    r1.kill().unwrap();
    r1.wait().unwrap();
    let (ok0, err, took) = stderr_of(r0, limit);
    assert!(!ok0, "rank 0 finished without its peer");
    assert!(err.contains("data-parallel run"), "{err}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// `ono reproduce --nproc-per-node 2` trains its cells under torchrun: the smoke profile's
/// super-resolution FNO cell runs as two processes (its checkpoint says two micro-batches per
/// step) and is reported as any other.
#[test]
fn reproduce_trains_a_cell_in_two_processes() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let Some(torchrun) = torchrun() else {
        eprintln!("SKIPPED: no torchrun on PATH or in $VIRTUAL_ENV (run under `cargo xtask test`)");
        return;
    };
    let dir = temp_dir("dp-reproduce");
    let out = dir.join("out");
    let mut c = ono();
    c.args(["reproduce", "--profile", "smoke", "--only", "table3"])
        .args(["--models", "fno", "--threads", "1", "--nproc-per-node", "2"])
        .arg("--neuralop-dir")
        .arg(dir.join("no-neuralop"))
        .arg("--out")
        .arg(&out)
        .env("ONO_TORCHRUN", &torchrun)
        .env("ONO_DIST_TIMEOUT", "60");
    let err = ok(&output(c));
    assert!(err.contains("data parallel: 2 processes"), "{err}");
    let states: Vec<TrainState> = walk(&out)
        .into_iter()
        .filter(|p| p.ends_with("checkpoints/last.json"))
        .filter_map(|p| read_json(&p))
        .collect();
    assert!(
        !states.is_empty(),
        "no trained cell under {}",
        out.display()
    );
    assert!(states.iter().all(|s| s.micro_batches == 2));
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(summary.contains("superres/fno"), "{summary}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Point sharding as users launch it: 2 and 3 processes (64 points: 32 + 32, 22 + 21 + 21),
/// each with its share of every sample's points, train what one process trains on whole samples
/// (no accumulation: each step is the whole batch's forward on every process), to 1e-10 in
/// float64: parameters, EMA covariances, losses and test errors. Rank 0 alone reports.
/// `ono predict --split-points` on 3 processes writes one process's predictions. A model whose
/// layer needs every point is refused at its first step, by the operation's name.
#[test]
fn points_split_over_processes_train_what_one_process_trains() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let Some(torchrun) = torchrun() else {
        eprintln!("SKIPPED: no torchrun on PATH or in $VIRTUAL_ENV (run under `cargo xtask test`)");
        return;
    };
    let dir = temp_dir("points-oracle");
    grid_dataset(&dir.join("grid.safetensors"));
    let points = "parallel = \"points\"";
    let one = experiment(&dir, "one", "ono-points", "", 2);
    let mut c = ono();
    c.current_dir(&dir).arg("train").arg(&one).arg("--quiet");
    ok(&output(c));
    let last = |name: &str| dir.join(name).join("checkpoints/last.safetensors");
    // Without a launcher there is nothing to split, and the run says so. Exactly: the same
    // computation by the same binary on this machine, one run after the other.
    let alone = experiment(&dir, "alone", "ono-points", points, 2);
    let mut c = ono();
    c.current_dir(&dir).arg("train").arg(&alone);
    let err = ok(&output(c));
    assert!(
        err.contains("in a single process: nothing to split"),
        "{err}"
    );
    assert_close_runs(&last("alone"), &last("one"), 0.0);
    for nproc in [2, 3] {
        let name = format!("points-{nproc}");
        let split = experiment(&dir, &name, "ono-points", points, 2);
        let mut c = torchrun_train_on(&torchrun, nproc, &split, false, "points");
        c.current_dir(&dir);
        let out = output(c);
        ok(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("\"steps\":6").count(), 1, "{stdout}");
        assert_close_runs(&last(&name), &last("one"), 1e-10);
    }
    // `ono predict --split-points` on 3 processes writes what one process predicts.
    let input = dir.join("inputs.safetensors");
    let opts = (Kind::Double, Device::Cpu);
    let pos = Tensor::rand([1, H * H, 2], opts);
    let fx = Tensor::randn([3, H * H, 2], opts);
    Tensor::write_safetensors(&[("fx", &fx), ("pos", &pos)], &input).unwrap();
    let ckpt = last("one");
    let predict = |c: &mut Command, out: &str| {
        c.current_dir(&dir)
            .arg("predict")
            .arg(&ckpt)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(out);
    };
    let mut c = ono();
    predict(&mut c, "whole.safetensors");
    ok(&output(c));
    let mut c = Command::new(&torchrun);
    c.args(["--nproc-per-node", "3", "--master-addr", "127.0.0.1"])
        .arg(format!("--master-port={}", free_port()))
        .arg("--no-python")
        .arg(env!("CARGO_BIN_EXE_ono"))
        .env("OMP_NUM_THREADS", "1")
        .env("ONO_DIST_TIMEOUT", "60");
    predict(&mut c, "split.safetensors");
    c.arg("--split-points");
    ok(&output(c));
    let read = |f: &str| {
        Tensor::read_safetensors(dir.join(f))
            .unwrap()
            .into_iter()
            .find(|(k, _)| k == "pred")
            .unwrap()
            .1
    };
    let (whole, split) = (read("whole.safetensors"), read("split.safetensors"));
    assert_eq!(whole.size(), [3, H * H, 1]);
    let d = (&whole - &split).abs().max().double_value(&[]);
    let scale = whole.abs().max().double_value(&[]);
    assert!(
        d <= 1e-10 * scale,
        "split prediction differs by {d:e} of {scale:e}"
    );
    // Outside a launch the option is refused by name.
    let mut c = ono();
    predict(&mut c, "none.safetensors");
    c.arg("--split-points");
    let out = output(c);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no launcher started this process"));

    // FNO's Fourier layers need every point.
    let fno = experiment(&dir, "points-fno", "fno", points, 1);
    let mut c = torchrun_train(&torchrun, &fno, false, "points-fno");
    c.current_dir(&dir);
    let out = output(c);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs every point of a sample at once"),
        "{err}"
    );
}

/// A point-sharded run killed (rank 1, SIGKILL) mid-epoch and relaunched with `--resume` ends
/// where one uninterrupted process ends.
#[test]
fn a_point_sharded_run_killed_mid_epoch_resumes_to_the_uninterrupted_result() {
    let _one_launch_at_a_time = one_launch_at_a_time();
    let Some(torchrun) = torchrun() else {
        eprintln!("SKIPPED: no torchrun on PATH or in $VIRTUAL_ENV (run under `cargo xtask test`)");
        return;
    };
    let dir = temp_dir("points-kill");
    grid_dataset(&dir.join("grid.safetensors"));
    let epochs = 8;
    let killed = experiment(
        &dir,
        "killed",
        "ono-points",
        "parallel = \"points\"\n[checkpoint]\nevery_steps = 1",
        epochs,
    );
    let whole = experiment(&dir, "whole", "ono-points", "", epochs);
    let sidecar = dir.join("killed/checkpoints/last.json");
    let mut c = torchrun_train(&torchrun, &killed, false, "points-kill");
    c.current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    kill_rank_after(&mut c.spawn().unwrap(), &sidecar, 4, "points-kill", 1);
    let at: TrainState = read_json(&sidecar).unwrap();
    assert!(
        at.global_step < epochs * 3,
        "the run finished before the kill"
    );
    let mut c = torchrun_train(&torchrun, &killed, true, "points-resume");
    c.current_dir(&dir);
    ok(&output(c));
    let mut c = ono();
    c.current_dir(&dir).arg("train").arg(&whole).arg("--quiet");
    ok(&output(c));
    let last = |name: &str| dir.join(name).join("checkpoints/last.safetensors");
    assert_close_runs(&last("killed"), &last("whole"), 1e-10);
}
