//! Where the pruned DFT pays (issue #28): the FNO spectral multiply computed by matrix products
//! over the kept modes (`spectral_conv`'s pruned path) against the reference's full FFTs
//! (`spectral_conv_fft`), forward + backward, in float32 on the CPU or, with `--device`, a GPU.
//!
//! `cargo run --release -p ono-benches --bin spectral_paths [-- --rounds R --calls C --device D]`
//! prints, per 2-D shape (B, C, n × n, m × m modes), the minimum over R rounds of the time per call
//! (µs) of each path and their ratio; the cases are interleaved in an order shuffled per round.

use std::time::Instant;

use ono_benches::{forward_backward, SplitMix};
use ono_kernels::spectral::{spectral_conv, spectral_conv_fft};
use tch::{Kind, Tensor};

/// (B, C, n, m): batch, channels in and out, grid side, modes per side.
const SHAPES: [(i64, i64, i64, i64); 10] = [
    (16, 20, 16, 8),
    (16, 20, 25, 8),
    (16, 32, 25, 8),
    (16, 20, 32, 8),
    (8, 32, 43, 12),
    (8, 32, 52, 12),
    (20, 32, 64, 12),
    (4, 32, 94, 12),
    (20, 20, 94, 12),
    (4, 64, 141, 16),
];

fn main() {
    let flags = ono_benches::timing_flags("spectral_paths", (7, 10));
    let (rounds, calls) = (flags.rounds, flags.calls);
    tch::manual_seed(0);
    let opts = (Kind::Float, flags.device);
    let inputs: Vec<(Tensor, [Tensor; 2])> = SHAPES
        .iter()
        .map(|&(b, c, n, m)| {
            let x = Tensor::randn([b, c, n, n], opts);
            let w = || Tensor::rand([c, c, m, m, 2], opts) / (c * c) as f64;
            (x, [w(), w()])
        })
        .collect();
    let paths = ["pruned", "fft"];
    let mut cases: Vec<(usize, usize)> = (0..SHAPES.len())
        .flat_map(|s| (0..paths.len()).map(move |p| (s, p)))
        .collect();
    let mut best = vec![f64::INFINITY; cases.len()];
    let mut rng = SplitMix(28);
    for round in 0..=rounds {
        rng.shuffle(&mut cases);
        for &(si, pi) in &cases {
            let (_, _, _, m) = SHAPES[si];
            let modes = [m, m];
            let (x, w) = &inputs[si];
            let leaves = [
                x.detach().set_requires_grad(true),
                w[0].detach().set_requires_grad(true),
                w[1].detach().set_requires_grad(true),
            ];
            let f = |t: &[Tensor]| -> Tensor {
                let ws = [&t[1], &t[2]];
                if pi == 0 {
                    spectral_conv(&t[0], &ws, &modes, "backward").expect("shapes")
                } else {
                    spectral_conv_fft(&t[0], &ws, &modes, "backward").expect("shapes")
                }
            };
            flags.sync();
            let start = Instant::now();
            for _ in 0..calls {
                drop(forward_backward(&f, &leaves));
            }
            flags.sync();
            let per_call = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
            // Round 0 warms up.
            if round > 0 {
                let i = si * paths.len() + pi;
                best[i] = best[i].min(per_call);
            }
        }
    }
    println!(
        "{}, f32, torch threads {}, {rounds} rounds of {calls} calls, forward + backward, minimum µs per call",
        flags.device_name(),
        tch::get_num_threads()
    );
    println!("| B | C | n | m | pruned | fft | pruned / fft |\n|---|---|---|---|---:|---:|---:|");
    for (si, &(b, c, n, m)) in SHAPES.iter().enumerate() {
        let (p, f) = (best[si * 2], best[si * 2 + 1]);
        println!("| {b} | {c} | {n} | {m} | {p:.0} | {f:.0} | {:.2} |", p / f);
    }
}
