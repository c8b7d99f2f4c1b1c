//! Two (and three) real ranks on this machine, over torch's TCPStore and ProcessGroupGloo.
//!
//! The test binary runs itself (`ono_testing::ranks`): each `two_ranks_*` test spawns this
//! executable twice (or once, or under `torchrun`) to run a `child_*` test as each rank.

// These need the shim; `without_c10d.rs` covers the build without it.
#![cfg(feature = "c10d")]

use ono_dist::{Backend, DistError, Launch, Launcher, ProcessGroup};
use ono_testing::ranks::{assert_passed, free_port, is_child, run_ranks, this_test_binary, Proc};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use tch::{Kind, Tensor};

/// The launch of a child: plain env:// variables from the parent.
fn child_launch() -> Launch {
    let launch = Launch::from_env()
        .expect("launch variables")
        .expect("a launch");
    assert_eq!(launch.launcher, Launcher::Env);
    launch
}

/// A child's launch and its Gloo group (20 s timeout), or a panic naming the rank.
fn child_gloo_group() -> (Launch, ProcessGroup) {
    let launch = child_launch();
    let pg = ProcessGroup::new(&launch, Backend::Gloo, Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("rank {}: {e}", launch.rank));
    (launch, pg)
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
    let (launch, pg) = child_gloo_group();
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

// --- 1b. the differentiable sum, on three ranks -------------------------------------------------

#[test]
fn three_ranks_differentiable_sum() {
    if is_child() {
        return;
    }
    for d in run_ranks("child_differentiable_sum", &[0, 1, 2], 3) {
        assert_passed(&d);
    }
}

/// Rank `r`'s term x_r, its local weights w_r and its local points' values p_r (rank 2 holds no
/// points: an empty tensor, as a rank without points of a sample has).
fn term(rank: usize) -> (Tensor, Tensor, Tensor) {
    let r = rank as f64;
    let x = Tensor::from_slice(&[0.5 + r, -1.25 * (r + 1.0), 2.0 - r * r]);
    let w = Tensor::from_slice(&[1.0 + 0.1 * r, 0.3 - r, 2.5]);
    let n = [2i64, 1, 0][rank];
    let p = Tensor::arange(n * 3, (Kind::Double, tch::Device::Cpu))
        .f_mul_scalar(0.25 + r)
        .unwrap()
        .view([n, 3]);
    (x, w, p)
}

#[test]
fn child_differentiable_sum() {
    if !is_child() {
        return;
    }
    let (_, pg) = child_gloo_group();
    let (rank, world) = (pg.rank(), pg.world());
    assert_eq!(world, 3);

    // S = Σ_r Σ_points (x_r + p) (a sum over points split across ranks, as a kernel's), then a
    // rank-local use of the replicated S: ℓ_r = Σ w_r ⊙ S². The total L = Σ_r ℓ_r has
    // dL/dx_r = n_r · Σ_r' 2 w_r' ⊙ S for every rank, n_r its points.
    let (x, w, p) = term(rank);
    let x = x.set_requires_grad(true);
    let local = (&p + &x).sum_dim_intlist(&[0i64][..], false, Kind::Double);
    let s = pg.all_reduce_sum_grad(&local).unwrap();
    let loss = (&w * &s * &s).sum(Kind::Double);
    loss.backward();

    let terms: Vec<_> = (0..world).map(term).collect();
    let n = |r: usize| terms[r].2.size()[0] as f64;
    let want_s = terms
        .iter()
        .map(|(x, _, p)| {
            p.sum_dim_intlist(&[0i64][..], false, Kind::Double) + x * (p.size()[0] as f64)
        })
        .fold(
            Tensor::zeros([3], (Kind::Double, tch::Device::Cpu)),
            |a, b| a + b,
        );
    let total_w = terms.iter().fold(
        Tensor::zeros([3], (Kind::Double, tch::Device::Cpu)),
        |a, (_, w, _)| a + w,
    );
    let want_grad = total_w * &want_s * (2.0 * n(rank));
    let close = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]) < 1e-12;
    assert!(close(&s, &want_s), "rank {rank}: sum {s:?} vs {want_s:?}");
    let grad = x.grad();
    assert!(
        close(&grad, &want_grad),
        "rank {rank}: grad {grad:?} vs {want_grad:?}"
    );

    // Without a gradient wanted, no node: the result is a plain tensor.
    let plain = tch::no_grad(|| pg.all_reduce_sum_grad(&local).unwrap());
    assert!(!plain.requires_grad());
    assert!(close(&plain, &want_s));

    // The maximum over ranks, in place.
    let m = Tensor::from_slice(&[rank as f64, -(rank as f64), f64::NEG_INFINITY]);
    pg.all_reduce_max(&[m.shallow_clone()]).unwrap();
    assert_eq!(
        Vec::<f64>::try_from(&m).unwrap(),
        [2.0, 0.0, f64::NEG_INFINITY]
    );

    // An undefined tensor is refused locally, before anything is sent.
    assert!(matches!(
        pg.all_reduce_sum_grad(&Tensor::new()),
        Err(DistError::InvalidArgument { .. })
    ));
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
