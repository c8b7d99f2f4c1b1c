//! Tests that run as several ranks of one world: the test binary runs itself.
//!
//! A parent test spawns its own executable once per rank ([`run_ranks`]) with `--exact
//! <child test> --nocapture --test-threads 1`, the `env://` variables of that rank (`RANK`,
//! `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`) and [`CHILD`] set. The child test does its work
//! only when [`is_child`] (in an ordinary run it passes at once). A child that does not finish
//! within the deadline is killed and the parent fails, so a hang is a failure, not a stuck CI job.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Set in the children: their test bodies run only then.
pub const CHILD: &str = "ONO_TEST_CHILD";
/// How long the parent waits for a child before killing it.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// Launcher variables of the surrounding environment that would outrank the children's env://.
pub const FOREIGN: &[&str] = &[
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RESTART_COUNT",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
];

pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// A port nobody listens on now (the OS's pick for 127.0.0.1:0).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A running child and the threads collecting its output.
pub struct Proc {
    name: String,
    child: Child,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// What a child did.
pub struct Done {
    pub name: String,
    pub status: ExitStatus,
    pub output: String,
    pub secs: f64,
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

impl Proc {
    pub fn spawn(name: String, mut cmd: Command) -> Proc {
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
    pub fn finish(mut self, start: Instant, deadline: Duration) -> Done {
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

pub fn this_test_binary() -> PathBuf {
    std::env::current_exe().expect("current_exe")
}

/// This binary running one child test as `rank` of `world` with rank 0's store at `port`.
pub fn rank_cmd(child_test: &str, rank: usize, world: usize, port: u16) -> Command {
    let mut cmd = Command::new(this_test_binary());
    cmd.args([child_test, "--exact", "--nocapture", "--test-threads", "1"])
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string());
    cmd
}

/// Runs `ranks` of a world of `world` on `child_test`; returns each rank's outcome.
pub fn run_ranks(child_test: &str, ranks: &[usize], world: usize) -> Vec<Done> {
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

pub fn assert_passed(d: &Done) {
    assert!(
        d.status.success(),
        "{} failed ({:?}); its output:\n{}",
        d.name,
        d.status,
        d.output
    );
}
