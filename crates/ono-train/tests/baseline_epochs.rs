//! Every baseline architecture trains one epoch end to end through the loader of every benchmark
//! it applies to, on the miniature files, with the benchmark's recipe in the FNO layout.

mod common;

use common::{temp_dir, Epoch};
use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::config::TrainConfig;
use ono_train::progress::Progress;
use ono_train::{RunSpec, Trainer};

/// The FNO scripts' optimisation (Adam with L2 decay, StepLR, no clipping).
const FNO_RECIPE: &str = "[optimizer]\nkind = \"adam\"\nweight_decay = 1e-4\nmax_grad_norm = 0\n\n[schedule]\nkind = \"step\"";

/// One epoch of `arch` (preset, small overrides) on the miniature `benchmark`.
fn one_epoch(arch: &str, preset: &str, overrides: &str, b: Benchmark, extra: &str) {
    one_epoch_batched(arch, preset, overrides, b, extra, None)
}

/// [`one_epoch`] with `batch` samples per step (`None` for 2).
fn one_epoch_batched(
    arch: &str,
    preset: &str,
    overrides: &str,
    b: Benchmark,
    extra: &str,
    batch: Option<usize>,
) {
    common::one_epoch(&Epoch {
        arch,
        preset,
        overrides,
        benchmark: b,
        data: extra,
        recipe: FNO_RECIPE,
        batch: Some(batch.unwrap_or(2)),
    });
}

#[test]
fn fno_trains_one_epoch_on_its_benchmarks() {
    let small1 = "modes = [4]\nwidth = 6";
    let small2 = "modes = [3, 3]\nwidth = 6";
    one_epoch("fno1d", "burgers", small1, Benchmark::Burgers, "");
    one_epoch("fno2d", "darcy", small2, Benchmark::Darcy, "");
    one_epoch("fno2d", "ns", small2, Benchmark::Ns2d, "");
    one_epoch("fno2d", "airfoil", small2, Benchmark::Airfoil, "");
    one_epoch("fno2d", "pipe", small2, Benchmark::Pipe, "");
    one_epoch("fno2d", "darcy", small2, Benchmark::ElasticityGrid, "");
    // FNO-3D: time as a third grid axis (fourier_3d.py, plasticity_3d.py).
    let small3 = "modes = [2, 2, 2]\nwidth = 6";
    let space_time = "regime = \"space_time\"";
    let gaussian =
        "regime = \"space_time\"\nnormalize_x = \"gaussian\"\nnormalize_y = \"gaussian\"";
    one_epoch("fno3d", "ns", small3, Benchmark::Ns2d, gaussian);
    one_epoch(
        "fno3d",
        "plasticity",
        small3,
        Benchmark::Plasticity,
        space_time,
    );
}

#[test]
fn geofno_and_nsl_fno_train_one_epoch_on_their_benchmarks() {
    // Geo-FNO's point-cloud form on the Elasticity point clouds (IPHI without the code: the
    // loader does not read `rr`).
    let geo = "modes = [3, 3]\nwidth = 6\nlatent = [12, 12]\niphi_width = 8";
    one_epoch("geofno", "elasticity", geo, Benchmark::Elasticity, "");
    // NSL's FNO on its StandardBench benchmarks.
    let nsl = "n_hidden = 8\nmodes = 3";
    one_epoch("nsl_fno", "darcy", nsl, Benchmark::Darcy, "");
    one_epoch("nsl_fno", "ns", nsl, Benchmark::Ns2d, "");
    one_epoch("nsl_fno", "airfoil", nsl, Benchmark::Airfoil, "");
    one_epoch("nsl_fno", "pipe", nsl, Benchmark::Pipe, "");
    one_epoch("nsl_fno", "plasticity", nsl, Benchmark::Plasticity, "");
}

#[test]
fn ffno_and_ufno_train_one_epoch_on_their_benchmarks() {
    // Small widths; U-FNO's padded grids stay multiples of 16 for its U-Net.
    let ff = "n_hidden = 8\nmodes = 3\nn_layers = 2";
    one_epoch("ffno", "darcy", ff, Benchmark::Darcy, "");
    one_epoch("ffno", "ns", ff, Benchmark::Ns2d, "");
    one_epoch("ffno", "airfoil", ff, Benchmark::Airfoil, "");
    one_epoch("ffno", "pipe", ff, Benchmark::Pipe, "");
    one_epoch("ffno", "plasticity", ff, Benchmark::Plasticity, "");
    // U-FNO's U-Net halves the padded grid four times; on the miniatures' 16 × 16 padded grids
    // its coarsest level is one cell, where a BatchNorm needs the batch to hold two samples and
    // an InstanceNorm cannot normalise at all. PyTorch refuses both, and so do we; the
    // benchmarks' real grids are fine. So the miniatures train with the whole split as one
    // batch, and NS2d and Plasticity (InstanceNorm: not steady tasks) are left to their real
    // 64 × 64 and 101 × 31 grids.
    let uf = "n_hidden = 2\nmodes = 3";
    for (preset, b) in [
        ("darcy", Benchmark::Darcy),
        ("airfoil", Benchmark::Airfoil),
        ("pipe", Benchmark::Pipe),
    ] {
        let n = miniature::write(b, &temp_dir("ufno-count").join("d"))
            .unwrap()
            .ntrain;
        one_epoch_batched("ufno", preset, uf, b, "", Some(n));
    }
}

#[test]
fn galerkin_trains_one_epoch_on_burgers_and_ns2d() {
    // SimpleTransformer on the Burgers points (the Fourier and Galerkin attentions).
    let small = "n_hidden = 16\nn_head = 2\nnum_encoder_layers = 1\ndim_feedforward = 32\nfreq_dim = 8\nnum_regressor_layers = 1\nfourier_modes = 4";
    one_epoch("galerkin", "burgers", small, Benchmark::Burgers, "");
    one_epoch("galerkin", "burgers_fourier", small, Benchmark::Burgers, "");
    // The same model on NS2d's 2-D grid, rolled out autoregressively (experiments/galerkin/ns2d.toml).
    one_epoch("galerkin", "burgers", small, Benchmark::Ns2d, "");
}

#[test]
fn gnot_trains_one_epoch_on_every_standard_benchmark() {
    // The input function reaches GNOT as its one input function, rows (x, a(x)) (the branch);
    // NS2d's frames stay at the points (its rollout feeds them back there): GNOT's trunk takes
    // them, and the cross-attention has no input function; so in Plasticity, which runs in
    // space-time (GNOT takes no time value).
    let small = "n_hidden = 8\nn_head = 2\nn_layers = 1\nn_experts = 2\nmlp_layers = 1";
    let branch = "fx_as_function = true";
    for b in [
        Benchmark::Darcy,
        Benchmark::Burgers,
        Benchmark::Airfoil,
        Benchmark::Pipe,
        Benchmark::Elasticity,
        Benchmark::ElasticityGrid,
    ] {
        one_epoch("gnot", "gnot", small, b, branch);
    }
    one_epoch("gnot", "gnot", small, Benchmark::Ns2d, "");
    one_epoch(
        "gnot",
        "cgpt",
        "n_hidden = 8\nn_head = 2\nn_layers = 1\nmlp_layers = 1",
        Benchmark::Plasticity,
        "regime = \"space_time\"",
    );
    // An input function on its own points is for the steady regime only.
    let dir = temp_dir("gnot-ns-branch");
    let m = miniature::write(Benchmark::Ns2d, &dir).unwrap();
    let text = format!(
        "epochs = 1\nbatch_size = 2\noutput_dir = \"{}\"\n[model]\narch = \"gnot\"\n[data]\nbenchmark = \"ns2d\"\ndata_dir = \"{}\"\nntrain = {}\nntest = {}\nfx_as_function = true\n",
        dir.join("run").display(),
        dir.display(),
        m.ntrain,
        m.ntest
    );
    let e = RunSpec::resolve(TrainConfig::from_toml(&text).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("steady"), "{e}");
}

/// GNOT's own data: a multi-input-output pickle read natively (three samples of 4, 3 and 6
/// points, θ ∈ ℝ², two input functions of different lengths, some empty), batched as the
/// reference (padding to the batch's longest sample, unmasked) and as a masked deviation, with
/// GNOT's recipe (unit normalizers on x, y and θ, per-channel loss on normalized targets, AdamW,
/// OneCycle with div factors 1e4, the loader's fixed batch order).
#[test]
fn gnot_trains_one_epoch_on_a_ragged_pickle() {
    let pkl = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gnot/mio_layouts_p4.pkl");
    for (tag, overrides, batch) in [("ref", "", 3), ("masked", "mask_padding = true", 2)] {
        let dir = temp_dir(&format!("gnot-pickle-{tag}"));
        let text = format!(
            r#"
epochs = 2
batch_size = {batch}
threads = 1
output_dir = "{out}"

[model]
arch = "gnot"
preset = "gnot"
[model.overrides]
n_hidden = 8
n_head = 2
n_layers = 1
n_experts = 2
{overrides}

[data]
point_clouds = {{ train = "{pkl}", test = "{pkl}" }}
normalize_pos = "unit"
normalize_y = "unit"
normalize_theta = "unit"
batch_order = "fixed_chunks"

[loss]
kind = "gnot"

[optimizer]
weight_decay = 5e-5
max_grad_norm = 1000

[schedule]
pct_start = 0.2
div_factor = 1e4
final_div_factor = 1e4
"#,
            out = dir.join("run").display(),
            pkl = pkl.display(),
        );
        let cfg = TrainConfig::from_toml(&text).unwrap_or_else(|e| panic!("{tag}: {e}"));
        let mut tr = RunSpec::resolve(cfg)
            .and_then(|run| Trainer::new(run, false))
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
        let s = tr
            .run(&Progress::Quiet)
            .unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_eq!(s.steps, 2 * 3u64.div_ceil(batch), "{tag}");
        let err = s.final_test.unwrap();
        assert!(err.is_finite() && err > 0.0, "{tag}: {err}");
    }
}
