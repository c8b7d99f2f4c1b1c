//! The experiment files shipped in `experiments/` parse, validate, and build the models they name
//! at the published parameter counts (the paper's settings cannot be run in a test; their files
//! must at least be runnable).

use std::path::Path;

use ono_models::{DataDims, Model};
use ono_train::config::TrainConfig;
use ono_train::graphs::Graphs;
use tch::{Device, Kind};

/// (file, the data's dimensions, the reference's parameter count when the file names one).
const GALERKIN: [(&str, (i64, i64), Option<i64>); 9] = [
    ("burgers.toml", (1, 1), Some(530_305)),
    ("burgers_fourier.toml", (1, 1), Some(530_305)),
    ("darcy_141_43.toml", (2, 1), Some(2_220_829)),
    ("darcy_211_61.toml", (2, 1), Some(2_220_829)),
    (
        "darcy_inverse_141_36_noise0.01.toml",
        (2, 1),
        Some(2_383_873),
    ),
    (
        "darcy_inverse_141_36_noise0.1.toml",
        (2, 1),
        Some(2_383_873),
    ),
    (
        "darcy_inverse_211_71_noise0.01.toml",
        (2, 1),
        Some(2_383_873),
    ),
    (
        "darcy_inverse_211_71_noise0.1.toml",
        (2, 1),
        Some(2_383_873),
    ),
    ("ns2d.toml", (2, 10), None),
];

/// How many experiment files `dir` holds.
fn toml_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "toml")
        })
        .count()
}

#[test]
fn galerkin_experiment_files_build_the_published_models() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/galerkin");
    let shipped = toml_files(&dir);
    assert_eq!(
        shipped,
        GALERKIN.len(),
        "a file without a check (or a check without a file)"
    );
    for (file, (space_dim, fun_dim), count) in GALERKIN {
        let cfg = TrainConfig::from_file(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        cfg.validate().unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(cfg.model.arch, "galerkin", "{file}");
        let model_cfg = cfg
            .model_config(DataDims {
                space_dim,
                fun_dim,
                out_dim: 1,
                time_input: false,
                functions: Vec::new(),
            })
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let model = Model::new(&model_cfg, Device::Cpu, Kind::Float).unwrap();
        if let Some(n) = count {
            assert_eq!(model.parameter_count(), n, "{file}");
        }
    }
}

/// The data's dimensions as the trainer sets them: space, fun (θ included), input functions.
type Dims = (i64, i64, &'static [i64]);

/// (file, its architecture, its data's dimensions): GNOT's, and the GK-Transformer rows of GNOT's
/// Table 1 that no other experiment folder has.
const GNOT: [(&str, &str, Dims); 7] = [
    ("darcy.toml", "gnot", (2, 0, &[3])),
    ("airfoil.toml", "gnot", (2, 0, &[4])),
    ("elasticity.toml", "gnot", (2, 0, &[4])),
    ("ns2d.toml", "gnot", (2, 10, &[])),
    ("ns2d_cgpt.toml", "gnot", (2, 12, &[])),
    ("galerkin_elasticity.toml", "galerkin", (1, 2, &[])),
    ("galerkin_airfoil.toml", "galerkin", (2, 2, &[])),
];

#[test]
fn gnot_experiment_files_build_their_models() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/gnot");
    let shipped = toml_files(&dir);
    assert_eq!(
        shipped,
        GNOT.len(),
        "a file without a check (or a check without a file)"
    );
    for (file, arch, (space_dim, fun_dim, functions)) in GNOT {
        let cfg = TrainConfig::from_file(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        cfg.validate().unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(cfg.model.arch, arch, "{file}");
        let model_cfg = cfg
            .model_config(DataDims {
                space_dim,
                fun_dim,
                out_dim: 1,
                time_input: false,
                functions: functions.to_vec(),
            })
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        Model::new(&model_cfg, Device::Cpu, Kind::Float).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// The two files of the mixed-precision comparison (issue #19) describe the same run but for
/// `precision`, and write to different folders.
#[test]
fn precision_experiment_files_differ_only_in_precision() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/precision");
    assert_eq!(toml_files(&dir), 2);
    let read = |f: &str| {
        let cfg = TrainConfig::from_file(&dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        cfg.validate().unwrap_or_else(|e| panic!("{f}: {e}"));
        cfg
    };
    let (full, bf16) = (read("darcy_f32.toml"), read("darcy_bf16.toml"));
    assert_eq!(
        (full.precision, bf16.precision),
        (ono_train::Precision::F32, ono_train::Precision::Bf16)
    );
    assert_eq!(
        full.fingerprint().differing_keys(&bf16.fingerprint()),
        ["precision"]
    );
    assert_ne!(full.output_dir, bf16.output_dir);
    // How the processes split the work is a run key: a run may resume point-sharded.
    let mut points = full.clone();
    points.parallel = ono_train::config::Parallelism::Points;
    assert!(full.fingerprint().same_experiment(&points.fingerprint()));
    // So are graphs: a run may resume with them on, off or emulated.
    for graphs in [Graphs::On, Graphs::Off, Graphs::Emulate] {
        let mut g = full.clone();
        g.graphs = graphs;
        assert!(full.fingerprint().same_experiment(&g.fingerprint()));
        // Written only when not the default.
        assert!(toml::to_string(&g)
            .unwrap()
            .contains(&format!("graphs = \"{graphs}\"")));
    }
    assert!(!toml::to_string(&full).unwrap().contains("graphs"));
}

/// `data.benchmark` is read by name as the benchmarks' own parser reads it (any case, as files
/// of earlier versions wrote it), written back in its canonical spelling, and an unknown name is
/// refused as the file is read, with the known ones.
#[test]
fn the_benchmark_is_read_by_name_and_an_unknown_one_refused() {
    use ono_data::benchmarks::Benchmark;
    let file = |b: &str| {
        format!(
            "epochs = 1\nbatch_size = 2\noutput_dir = \"run\"\n[model]\narch = \"ono\"\n\
             [data]\nbenchmark = \"{b}\"\n"
        )
    };
    let cfg = TrainConfig::from_toml(&file("Darcy")).unwrap();
    assert_eq!(cfg.data.benchmark, Some(Benchmark::Darcy));
    let text = toml::to_string(&cfg).unwrap();
    assert!(text.contains("benchmark = \"darcy\""), "{text}");
    assert_eq!(TrainConfig::from_toml(&text).unwrap(), cfg);
    let err = TrainConfig::from_toml(&file("navier_stokes"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown benchmark `navier_stokes`") && err.contains("ns2d"),
        "{err}"
    );
}
