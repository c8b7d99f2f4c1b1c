//! What the device-side jitter ladder costs against the host-read ladder it replaced (issue #19,
//! item 1): one factorization of a k×k covariance per orthogonal block per training step.
//!
//! `cargo run --release -p ono-benches --bin cholesky_ladder [-- --rounds R --calls C --device D]`
//! prints, for k = 8, 16, 32 in f32 on the CPU (or D), the time per call (µs) of
//! - `host`: the previous `psd_safe_cholesky` (a plain attempt, then one host read to decide
//!   whether to retry; kept here as the baseline),
//! - `device`: `psd_safe_cholesky_device` (11 candidates in one batch without a graph, the chosen
//!   one again with it; no host read),
//! - `device+read`: `psd_safe_cholesky`, the device ladder plus one read of its status,
//!
//! forward only and forward + backward (the training case). Each sample times C calls; the variants
//! are interleaved in an order shuffled per round, and the minimum over R rounds is reported.

use std::time::Instant;

use ono_benches::{forward_backward, SplitMix};
use ono_kernels::orthonormal::{psd_safe_cholesky, psd_safe_cholesky_device};
use tch::{Kind, Tensor};

/// The host-read ladder before the device one (commit b4c8a27), plain attempt only: the inputs
/// here are well conditioned, as a training covariance almost always is.
fn host_ladder(a: &Tensor) -> Tensor {
    let finite = a.isfinite().all();
    let (l, info) = a.linalg_cholesky_ex(false, false);
    let ok = info.eq(0).all().logical_and(&l.isfinite().all());
    let code =
        finite.logical_not().to_kind(Kind::Int64) * 2 + ok.logical_not().to_kind(Kind::Int64);
    assert_eq!(code.int64_value(&[]), 0, "a well-conditioned input");
    l
}

type Variant = (&'static str, fn(&Tensor) -> Tensor);

const VARIANTS: [Variant; 3] = [
    ("host", host_ladder),
    ("device", |a| psd_safe_cholesky_device(a).expect("square").0),
    ("device+read", |a| psd_safe_cholesky(a).expect("SPD").0),
];

fn main() {
    let flags = ono_benches::timing_flags("cholesky_ladder", (15, 200));
    let (rounds, calls) = (flags.rounds, flags.calls);
    tch::manual_seed(0);
    let ks = [8i64, 16, 32];
    let covs: Vec<Tensor> = ks
        .iter()
        .map(|&k| {
            let psi = Tensor::randn([4 * 256, k], (Kind::Float, flags.device));
            psi.tr().mm(&psi) / (4 * 256) as f64
        })
        .collect();
    // (k index, variant index, backward)
    let mut cases: Vec<(usize, usize, bool)> = (0..ks.len())
        .flat_map(|k| (0..VARIANTS.len()).flat_map(move |v| [(k, v, false), (k, v, true)]))
        .collect();
    let mut best = vec![f64::INFINITY; cases.len()];
    let mut rng = SplitMix(19);
    for round in 0..=rounds {
        rng.shuffle(&mut cases);
        for &(ki, vi, backward) in &cases {
            let f = VARIANTS[vi].1;
            let a = covs[ki].detach().set_requires_grad(backward);
            flags.sync();
            let start = Instant::now();
            for _ in 0..calls {
                if backward {
                    drop(forward_backward(
                        &|t: &[Tensor]| f(&t[0]),
                        &[a.shallow_clone()],
                    ));
                } else {
                    drop(tch::no_grad(|| f(&a)));
                }
            }
            flags.sync();
            let per_call = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
            // Round 0 warms up.
            if round > 0 {
                let i = (ki * VARIANTS.len() + vi) * 2 + backward as usize;
                best[i] = best[i].min(per_call);
            }
        }
    }
    println!(
        "{}, f32, torch threads {}, {rounds} rounds of {calls} calls, minimum µs per call",
        flags.device_name(),
        tch::get_num_threads()
    );
    println!("| k | pass | host | device | device+read |\n|---|---|---:|---:|---:|");
    for (ki, k) in ks.iter().enumerate() {
        for (pass, backward) in [("fwd", 0), ("fwd+bwd", 1)] {
            let cells: Vec<String> = (0..VARIANTS.len())
                .map(|vi| format!("{:.1}", best[(ki * VARIANTS.len() + vi) * 2 + backward]))
                .collect();
            println!("| {k} | {pass} | {} |", cells.join(" | "));
        }
    }
}
