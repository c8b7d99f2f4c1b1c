//! Transolver trains one epoch end to end through the loader of each StandardBench benchmark
//! (Darcy, NS2d, Airfoil, Pipe, Elasticity, Plasticity) on the miniature files, in the FNO
//! layout as the other NSL ports, with NSL's recipe (`run.py` defaults: AdamW, lr 1e-3, weight
//! decay 1e-5, OneCycle per batch with pct_start 0.3 and div factor 25, no clipping).

mod common;

use common::Epoch;
use ono_data::benchmarks::Benchmark;
use ono_train::checkpoint::Checkpoint;

/// One epoch of the `preset` (small overrides) on the miniature `benchmark`, batches of 2; the
/// model configuration the run used, as its checkpoint holds it.
fn one_epoch(preset: &str, b: Benchmark) -> serde_json::Value {
    let (_, dir) = common::one_epoch(&Epoch {
        arch: "transolver",
        preset,
        overrides: "n_hidden = 8\nn_heads = 2\nn_layers = 2\nmlp_ratio = 1\nslice_num = 4",
        benchmark: b,
        data: "",
        // The trainer's defaults are NSL's (AdamW, lr 1e-3, weight decay 1e-5, OneCycle with
        // pct_start 0.3 and div factors 25 and 1e4) but for the clipping.
        recipe: "[optimizer]\nmax_grad_norm = 0",
        batch: Some(2),
    });
    let ckpt = Checkpoint::load(&dir.join("run/checkpoints/last.safetensors")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::to_value(&ckpt.state.model).unwrap()
}

#[test]
fn transolver_trains_one_epoch_on_every_standard_benchmark() {
    // Structured grids: convolutional Physics-Attention (the trainer passes the grid shape);
    // Darcy and NS2d with unified positions.
    for (preset, b, unified) in [
        ("darcy", Benchmark::Darcy, true),
        ("ns", Benchmark::Ns2d, true),
        ("airfoil", Benchmark::Airfoil, false),
        ("pipe", Benchmark::Pipe, false),
    ] {
        let m = one_epoch(preset, b);
        assert_eq!(m["geotype"], "structured", "{preset}");
        assert_eq!(m["unified_pos"], unified, "{preset}");
        assert_eq!(m["time_input"], false, "{preset}");
    }
    // The point cloud: linear Physics-Attention, no grid.
    let m = one_epoch("elasticity", Benchmark::Elasticity);
    assert_eq!(m["geotype"], "unstructured");
    // A time value per sample through time_fc.
    let m = one_epoch("plasticity", Benchmark::Plasticity);
    assert_eq!(
        (&m["geotype"], &m["time_input"]),
        (&"structured".into(), &true.into())
    );
}
