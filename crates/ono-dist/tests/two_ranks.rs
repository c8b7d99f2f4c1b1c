//! Two real ranks on this machine, over torch's TCPStore and ProcessGroupGloo.
//!
//! The test binary runs itself: each `two_ranks_*` test spawns this executable twice (or once,
//! or under `torchrun`) with `--exact child_* --nocapture --test-threads 1`, the `env://`
//! variables of one rank and [`CHILD`] set. The `child_*` tests do their work only when
//! [`CHILD`] is set; in an ordinary run they pass at once. A child that does not finish within
//! [`DEADLINE`] is killed and the test fails, so a hang is a failure, not a stuck CI job.

// These need the shim; `without_c10d.rs` covers the build without it.
#![cfg(feature = "c10d")]

use ono_dist::{Backend, DistError, Launch, Launcher, ProcessGroup};
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tch::{Kind, Tensor};

/// Set in the children: their test bodies run only then.
const CHILD: &str = "ONO_DIST_TEST_CHILD";
/// How long the parent waits for a child before killing it.
const DEADLINE: Duration = Duration::from_secs(30);
/// Launcher variables of the surrounding environment that would outrank the children's env://.
const FOREIGN: &[&str] = &[
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RESTART_COUNT",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
];

fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// A port nobody listens on now (the OS's pick for 127.0.0.1:0).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A running child and the threads collecting its output.
struct Proc {
    name: String,
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// What a child did.
struct Done {
    name: String,
    status: ExitStatus,
    output: String,
    secs: f64,
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

impl Proc {
    fn spawn(name: String, mut cmd: Command) -> Proc {
        for var in FOREIGN {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .env(CHILD, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Proc {
            name,
            child,
            out,
            err,
        }
    }

    /// Waits until `deadline` (from `start`), then kills; returns what the child did, or panics
    /// with its output when it had to be killed.
    fn finish(mut self, start: Instant, deadline: Duration) -> Done {
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break Some(s);
            }
            if start.elapsed() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let secs = start.elapsed().as_secs_f64();
        let mut output = String::new();
        for h in [self.out.take(), self.err.take()].into_iter().flatten() {
            output.push_str(&h.join().unwrap_or_default());
        }
        match status {
            Some(status) => Done {
                name: self.name.clone(),
                status,
                output,
                secs,
            },
            None => panic!(
                "{} did not finish within {deadline:?} and was killed; its output:\n{output}",
                self.name
            ),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A panic in the parent must not leave a child behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn this_test_binary() -> PathBuf {
    std::env::current_exe().expect("current_exe")
}

/// This binary running one child test as `rank` of `world` with rank 0's store at `port`.
fn rank_cmd(child_test: &str, rank: usize, world: usize, port: u16) -> Command {
    let mut cmd = Command::new(this_test_binary());
    cmd.args([child_test, "--exact", "--nocapture", "--test-threads", "1"])
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string());
    cmd
}

/// Runs `ranks` of a world of `world` on `child_test`; returns each rank's outcome.
fn run_ranks(child_test: &str, ranks: &[usize], world: usize) -> Vec<Done> {
    let port = free_port();
    let start = Instant::now();
    let procs: Vec<Proc> = ranks
        .iter()
        .map(|&r| {
            Proc::spawn(
                format!("{child_test} rank {r}"),
                rank_cmd(child_test, r, world, port),
            )
        })
        .collect();
    let done: Vec<Done> = procs
        .into_iter()
        .map(|p| p.finish(start, DEADLINE))
        .collect();
    for d in &done {
        println!(
            "--- {} ({:?} after {:.2} s) ---\n{}",
            d.name, d.status, d.secs, d.output
        );
    }
    done
}

fn assert_passed(d: &Done) {
    assert!(
        d.status.success(),
        "{} failed ({:?}); its output:\n{}",
        d.name,
        d.status,
        d.output
    );
}

/// The launch of a child: plain env:// variables from the parent.
fn child_launch() -> Launch {
    let launch = Launch::from_env()
        .expect("launch variables")
        .expect("a launch");
    assert_eq!(launch.launcher, Launcher::Env);
    launch
}

// --- 1. collectives ---------------------------------------------------------------------------

#[test]
fn two_ranks_collectives() {
    if is_child() {
        return;
    }
    for d in run_ranks("child_collectives", &[0, 1], 2) {
        assert_passed(&d);
    }
}

/// Values that each rank can predict for the other, so both check the exact sum.
fn f64_values(rank: usize) -> Vec<f64> {
    let r = rank as f64;
    vec![
        1.0 + r,
        0.1 * (r + 1.0),
        1e-17 * r - 3.0,
        f64::MAX / 4.0,
        -(r + 0.5),
    ]
}

fn f32_values(rank: usize) -> Vec<f32> {
    (0..6)
        .map(|i| (i as f32 + 0.3) * (rank as f32 + 1.7))
        .collect()
}

#[test]
fn child_collectives() {
    if !is_child() {
        return;
    }
    let launch = child_launch();
    let pg = ProcessGroup::new(&launch, Backend::Gloo, Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("rank {}: {e}", launch.rank));
    let (rank, world) = (pg.rank(), pg.world());
    assert_eq!((rank, world, pg.backend()), (launch.rank, 2, Backend::Gloo));

    // all_reduce_sum, two kinds in one call, each reduced on its own.
    let a = Tensor::from_slice(&f64_values(rank));
    let b = Tensor::from_slice(&f32_values(rank)).view([2, 3]);
    pg.all_reduce_sum(&[a.shallow_clone(), b.shallow_clone()])
        .unwrap();
    let want_a: Vec<f64> = f64_values(0)
        .iter()
        .zip(f64_values(1))
        .map(|(x, y)| x + y)
        .collect();
    let want_b: Vec<f32> = f32_values(0)
        .iter()
        .zip(f32_values(1))
        .map(|(x, y)| x + y)
        .collect();
    assert_eq!(Vec::<f64>::try_from(&a).unwrap(), want_a);
    assert_eq!(Vec::<f32>::try_from(&b.view([-1])).unwrap(), want_b);
    assert_eq!(b.size(), [2, 3]);

    // broadcast from rank 1.
    let c = Tensor::full([4], 7.0 + rank as f64, (Kind::Double, tch::Device::Cpu));
    pg.broadcast(&[c.shallow_clone()], 1).unwrap();
    assert_eq!(Vec::<f64>::try_from(&c).unwrap(), vec![8.0; 4]);

    // all_gather_rows: rank order, exact int64.
    let local = Tensor::from_slice(&[rank as i64 * 10, rank as i64 * 10 + 1, i64::MIN / 2]);
    let rows = pg.all_gather_rows(&local).unwrap();
    assert_eq!(rows.size(), [2, 3]);
    assert_eq!(
        Vec::<Vec<i64>>::try_from(&rows).unwrap(),
        vec![vec![0, 1, i64::MIN / 2], vec![10, 11, i64::MIN / 2]]
    );

    // Ranks that disagree on the shape both get Mismatch, before any data moves.
    let uneven = Tensor::zeros([1 + rank as i64], (Kind::Int64, tch::Device::Cpu));
    match pg.all_gather_rows(&uneven) {
        Err(DistError::Mismatch { detail, .. }) => println!("rank {rank} mismatch: {detail}"),
        other => panic!("rank {rank}: expected a mismatch, got {other:?}"),
    }

    // Refused locally, nothing sent (so the ranks stay in step).
    let t = Tensor::zeros([3, 2], (Kind::Float, tch::Device::Cpu)).transpose(0, 1);
    assert!(matches!(
        pg.all_reduce_sum(&[t]),
        Err(DistError::InvalidArgument { .. })
    ));
    assert!(matches!(
        pg.broadcast(&[a.shallow_clone()], 2),
        Err(DistError::InvalidArgument { .. })
    ));
    pg.all_reduce_sum(&[]).unwrap();

    pg.barrier().unwrap();
    println!("rank {rank} ok");
}

// --- 2. nobody at the rendezvous ---------------------------------------------------------------

#[test]
fn two_ranks_unreachable_rendezvous() {
    if is_child() {
        return;
    }
    // Rank 1 alone: there is no rank 0 to host the store.
    let done = run_ranks("child_unreachable", &[1], 2);
    assert_passed(&done[0]);
}

#[test]
fn child_unreachable() {
    if !is_child() {
        return;
    }
    let launch = child_launch();
    let timeout = Duration::from_secs(2);
    let start = Instant::now();
    let got = ProcessGroup::new(&launch, Backend::Gloo, timeout);
    let secs = start.elapsed().as_secs_f64();
    match got {
        Err(e @ DistError::Rendezvous { .. }) => println!("after {secs:.2} s: {e}"),
        other => panic!("expected a rendezvous error, got {other:?}"),
    }
    assert!(secs < 10.0, "took {secs:.2} s for a 2 s timeout");
}

// --- 3. a peer that dies ----------------------------------------------------------------------

#[test]
fn two_ranks_dead_peer() {
    if is_child() {
        return;
    }
    let done = run_ranks("child_dead_peer", &[0, 1], 2);
    // Rank 1 exits on purpose; rank 0's test asserts the error.
    assert_passed(&done[0]);
}

#[test]
fn child_dead_peer() {
    if !is_child() {
        return;
    }
    let launch = child_launch();
    let timeout = Duration::from_secs(5);
    let pg = ProcessGroup::new(&launch, Backend::Gloo, timeout).unwrap();
    // Both ranks are past ProcessGroup::new once the barrier returns.
    pg.barrier().unwrap();
    if pg.rank() == 1 {
        // A moment for rank 0's barrier to take in this rank's last message before the socket
        // closes; rank 0 is then waiting in all_reduce_sum when the peer vanishes.
        std::thread::sleep(Duration::from_millis(300));
        println!("rank 1 exits");
        std::process::exit(0);
    }
    let t = Tensor::ones([1000], (Kind::Float, tch::Device::Cpu));
    let start = Instant::now();
    let got = pg.all_reduce_sum(&[t]);
    let secs = start.elapsed().as_secs_f64();
    match got {
        Err(e @ DistError::Collective { .. }) => println!("rank 0 after {secs:.2} s: {e}"),
        other => panic!("expected the collective to fail, got {other:?}"),
    }
    assert!(secs < 5.0 + 5.0, "took {secs:.2} s for a 5 s timeout");
    let start = Instant::now();
    drop(pg);
    println!(
        "dropping the group took {:.2} s",
        start.elapsed().as_secs_f64()
    );
}

// --- 3b. a peer that stays alive but never calls ----------------------------------------------

#[test]
fn two_ranks_silent_peer() {
    if is_child() {
        return;
    }
    let done = run_ranks("child_silent_peer", &[0, 1], 2);
    assert_passed(&done[0]);
}

#[test]
fn child_silent_peer() {
    if !is_child() {
        return;
    }
    let launch = child_launch();
    let timeout = Duration::from_secs(2);
    let pg = ProcessGroup::new(&launch, Backend::Gloo, timeout).unwrap();
    pg.barrier().unwrap();
    if pg.rank() == 1 {
        // Alive, connected, and silent until rank 0 has given up.
        std::thread::sleep(timeout + Duration::from_secs(1));
        std::process::exit(0);
    }
    let t = Tensor::ones([10], (Kind::Double, tch::Device::Cpu));
    let start = Instant::now();
    let got = pg.all_reduce_sum(&[t]);
    let secs = start.elapsed().as_secs_f64();
    match got {
        Err(e @ DistError::Collective { .. }) => println!("rank 0 after {secs:.2} s: {e}"),
        other => panic!("expected the collective to time out, got {other:?}"),
    }
    assert!(
        (1.5..6.0).contains(&secs),
        "took {secs:.2} s for a 2 s timeout"
    );
}

// --- 4. under torchrun (its agent hosts the store) ---------------------------------------------

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[test]
fn two_ranks_under_torchrun() {
    if is_child() {
        return;
    }
    let Some(torchrun) = find_on_path("torchrun") else {
        println!(
            "skipped: no torchrun on PATH (`eval \"$(cargo xtask env)\"` puts torch's venv there)"
        );
        return;
    };
    let port = free_port();
    let mut cmd = Command::new(torchrun);
    cmd.args([
        "--no-python",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
    ])
    .args(["--master-port", &port.to_string()])
    .arg(this_test_binary())
    .args([
        "child_torchrun",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    // Only the agent's variables, not the parent's.
    .env_remove("RANK")
    .env_remove("WORLD_SIZE")
    .env_remove("MASTER_ADDR")
    .env_remove("MASTER_PORT");
    let start = Instant::now();
    let d = Proc::spawn("torchrun".to_owned(), cmd).finish(start, Duration::from_secs(60));
    println!(
        "--- torchrun ({:?} after {:.2} s) ---\n{}",
        d.status, d.secs, d.output
    );
    assert_passed(&d);
    for r in 0..2 {
        assert!(
            d.output.contains(&format!("torchrun rank {r} ok")),
            "{}",
            d.output
        );
    }
}

#[test]
fn child_torchrun() {
    if !is_child() {
        return;
    }
    let launch = Launch::from_env().unwrap().unwrap();
    assert_eq!(launch.launcher, Launcher::Torchrun);
    assert!(launch.agent_store, "{launch:?}");
    assert_eq!((launch.world, launch.local_world), (2, 2));
    let pg = ProcessGroup::new(&launch, Backend::Gloo, Duration::from_secs(20)).unwrap();
    let rows = pg
        .all_gather_rows(&Tensor::from_slice(&[pg.rank() as i64 + 100]))
        .unwrap();
    assert_eq!(
        Vec::<Vec<i64>>::try_from(&rows).unwrap(),
        vec![vec![100], vec![101]]
    );
    pg.barrier().unwrap();
    println!("torchrun rank {} ok: {launch:?}", pg.rank());
}
