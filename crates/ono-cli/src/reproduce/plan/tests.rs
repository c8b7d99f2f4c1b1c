use std::path::PathBuf;

use super::bases::BASES;
use super::*;
use ono_data::benchmarks::Benchmark;
use ono_models::ModelConfig;

fn paths() -> DataPaths {
    DataPaths {
        published: PathBuf::from("/data"),
        neuralop: PathBuf::from("/neuralop"),
        generated: PathBuf::from("/out/data"),
    }
}

const PROFILES: [Profile; 3] = [Profile::Paper, Profile::Quick, Profile::Smoke];

/// Every experiment of every profile is a valid experiment, its file text reads back as the
/// same experiment, every cell reads an experiment of the plan, and the plan has the paper's
/// shape.
#[test]
fn every_profile_plans_valid_experiments() {
    for profile in PROFILES {
        let p = plan(profile, &paths()).unwrap();
        for e in &p.experiments {
            match &e.work {
                Work::Train { config, .. } | Work::TimeRun { config, .. } => {
                    config
                        .validate()
                        .unwrap_or_else(|err| panic!("{}: {}: {err}", profile.name(), e.id));
                    let text = toml::to_string(config.as_ref()).unwrap();
                    let back = ono_train::config::TrainConfig::from_toml(&text).unwrap();
                    assert_eq!(&back, config.as_ref(), "{}: {}", profile.name(), e.id);
                }
                Work::Measure(m) => {
                    let c = m
                        .model
                        .config()
                        .unwrap_or_else(|err| panic!("{}: {err}", e.id));
                    c.validate().unwrap_or_else(|err| panic!("{}: {err}", e.id));
                }
            }
        }
        for c in &p.cells {
            if let Some(id) = c.source.experiment() {
                assert!(p.experiments.iter().any(|e| e.id == id), "{id}");
            }
        }
        let count = |t: usize| p.cells.iter().filter(|c| c.table == t).count();
        // 9 rows × 6 benchmarks; 9 models × 1 (Table 2), × 2 (Table 8); 3 rows (FNO both
        // ways, ONO) × 6; 2 × 2; 3 × 3; 4 × 3; 2 × 2.
        // The reduced profiles add Table 3's zero-shot pair on the neuraloperator set.
        let table3 = if profile == Profile::Paper { 18 } else { 22 };
        assert_eq!(
            (1..=8).map(count).collect::<Vec<_>>(),
            [54, 9, table3, 4, 9, 12, 4, 18]
        );
        // The paper's "–" cells are the paper's.
        let dash = p
            .cells
            .iter()
            .filter(|c| c.table == 1 && c.source == Source::Unsupported)
            .count();
        assert_eq!(dash, 4 + 4 + 2, "FNO and Galerkin: 4 each, GNOT: 2");
    }
}

/// Every committed base is read by the ONO paper's plan or by GNOT's (its GK-Transformer rows
/// on Elasticity and NACA), and `experiments/paper` holds no file that is not a base.
#[test]
fn every_base_file_is_used() {
    let p = plan(Profile::Paper, &paths()).unwrap();
    let gnot = crate::reproduce::gnot::plan(Profile::Paper, &paths()).unwrap();
    for b in BASES {
        let id = format!("{}/{}", b.task.key(), b.model);
        let used = |p: &Plan| p.experiments.iter().any(|e| e.id == id);
        assert!(
            used(&p) || used(&gnot),
            "experiments/{} is not used by a paper plan",
            b.file
        );
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    for task in Task::ALL {
        let dir = root.join("paper").join(task.key());
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let file = format!("paper/{}/{name}", task.key());
            assert!(
                BASES.iter().any(|b| b.file == file),
                "experiments/{file} is not a base of the plan"
            );
        }
    }
}

#[test]
fn selection_by_table_and_model() {
    let quick = || plan(Profile::Quick, &paths()).unwrap();
    let p = select(
        Paper::Ono,
        quick(),
        &["table3".into()],
        &["fno".into(), "ono".into()],
    )
    .unwrap();
    let ids: Vec<&str> = p.experiments.iter().map(|e| e.id.as_str()).collect();
    // Table 3's zero-shot pair reads Table 1's Darcy runs (with their seed replicates).
    assert_eq!(
        ids,
        [
            "darcy/fno",
            "darcy/fno@seed1",
            "darcy/ono",
            "darcy/ono@seed1",
            "superres/fno",
            "superres/fno-per-channel",
            "superres/ono"
        ]
    );
    assert!(select(Paper::Ono, quick(), &["table0".into()], &[]).is_err());
    assert!(select(Paper::Ono, quick(), &[], &["deeponet".into()]).is_err());
    // Geo-FNO's regular-grid cells are FNO's runs.
    let p = select(
        Paper::Ono,
        plan(Profile::Paper, &paths()).unwrap(),
        &["table1".into()],
        &["geofno".into()],
    )
    .unwrap();
    assert!(p.experiments.iter().any(|e| e.id == "darcy/fno"));
    assert!(!p.experiments.iter().any(|e| e.id == "darcy/geofno"));
    // A selected cell keeps its experiment's seed replicates.
    let p = select(Paper::Ono, quick(), &["table1".into()], &["fno".into()]).unwrap();
    assert!(p.experiments.iter().any(|e| e.id == "darcy/fno@seed1"));
}

/// The quick profile runs Table 1's Darcy cells and every cell on the point-cloud stand-in
/// (Table 1's Elasticity column, Tables 5–7) with two seeds: each has one replicate,
/// `<id>@seed1`, the same experiment at the next seed; the other profiles and tasks have none.
#[test]
fn replicates_repeat_table1_cells_with_other_seeds() {
    for profile in PROFILES {
        let p = plan(profile, &paths()).unwrap();
        let replicates: Vec<&Experiment> = p
            .experiments
            .iter()
            .filter(|e| e.replicate_of.is_some())
            .collect();
        if profile != Profile::Quick {
            assert!(replicates.is_empty(), "{}", profile.name());
            continue;
        }
        // Every Darcy model of Table 1 (Geo-FNO's Darcy run is FNO's), and every run on the
        // stand-in.
        let darcy: Vec<&str> = p
            .cells
            .iter()
            .filter(|c| {
                (c.table == 1 && c.column == "Darcy")
                    || ((c.table == 1 || (5..=7).contains(&c.table)) && c.column == "Elasticity")
            })
            .filter_map(|c| c.source.experiment())
            .collect();
        assert!(darcy.len() >= 8 + 8, "{darcy:?}");
        assert!(darcy.contains(&"elasticity/ono-nystrom"), "{darcy:?}");
        for id in &darcy {
            let runs: Vec<&Experiment> = p.seeds_of(id).collect();
            assert_eq!(runs.len(), 2, "{id}");
            let (
                Work::Train {
                    config: a,
                    strides: sa,
                    test_resolutions: ta,
                },
                Work::Train {
                    config: b,
                    strides: sb,
                    test_resolutions: tb,
                },
            ) = (&runs[0].work, &runs[1].work)
            else {
                panic!("{id}: not trained")
            };
            assert_eq!(runs[1].id, format!("{id}@seed1"));
            assert_eq!(b.seed, a.seed + 1, "{id}");
            let mut same = b.as_ref().clone();
            same.seed = a.seed;
            assert_eq!(&same, a.as_ref(), "{id}: differs beyond the seed");
            assert_eq!((sa, ta, &runs[1].model), (sb, tb, &runs[0].model));
        }
        let mut of: Vec<&str> = replicates
            .iter()
            .filter_map(|e| e.replicate_of.as_deref())
            .collect();
        of.sort_unstable();
        let mut expected = darcy.clone();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(of, expected);
    }
}

/// The reduced profiles drop no cell of the paper's but Galerkin's Darcy and Geo-FNO's
/// Elasticity (its model has no input for the stand-in's field), and the quick profile the
/// runs it does not learn; the paper profile drops none of its own.
#[test]
fn cells_only_in_the_paper_profile() {
    let paper = plan(Profile::Paper, &paths()).unwrap();
    assert!(only_in(&paper, &paper).is_empty());
    for profile in [Profile::Quick, Profile::Smoke] {
        let p = plan(profile, &paths()).unwrap();
        let dropped: Vec<(usize, &str, &str)> = only_in(&paper, &p)
            .iter()
            .map(|c| (c.table, c.row.as_str(), c.column.as_str()))
            .collect();
        let mut expected = vec![(1, "Galerkin", "Darcy"), (1, "Geo-FNO", "Elasticity")];
        if profile == Profile::Quick {
            // The runs that do not learn at the quick sizes, and the U-Nets too coarse for
            // NS2d at 16².
            expected.extend([
                (1, "U-FNO", "NS2d"),
                (1, "LSM", "NS2d"),
                (1, "GNOT", "NS2d"),
                (1, "ONO (ours)", "NS2d"),
                (1, "Transolver (extra row)", "NS2d"),
                (4, "ONO (ours)", "Seen"),
                (4, "ONO (ours)", "Unseen"),
                (6, "BN", "Elasticity"),
                (6, "LN", "Elasticity"),
                (7, "ONO-30", "Elasticity"),
            ]);
        }
        expected.sort();
        let mut dropped = dropped;
        dropped.sort();
        assert_eq!(dropped, expected, "{}", profile.name());
        // Each says why, and runs no experiment of its own.
        for c in p
            .cells
            .iter()
            .filter(|c| dropped.contains(&(c.table, c.row.as_str(), c.column.as_str())))
        {
            assert!(matches!(c.source, Source::PaperOnly(_)), "{c:?}");
        }
        let ids: Vec<&str> = p.experiments.iter().map(|e| e.id.as_str()).collect();
        assert!(ids.contains(&"ns2d/fno"));
        assert!(ids.contains(&"elasticity/ono-8"));
        for run in ["ono-batch-norm", "ono-layer-norm", "ono-30"] {
            let id = format!("elasticity/{run}");
            assert_eq!(
                ids.contains(&id.as_str()),
                profile == Profile::Smoke,
                "{id}"
            );
        }
        assert_eq!(
            ids.contains(&"ns2d/ono"),
            profile == Profile::Smoke,
            "{}",
            profile.name()
        );
    }
    // A cell absent from a plan counts as dropped.
    let mut p = plan(Profile::Quick, &paths()).unwrap();
    p.cells.retain(|c| c.table != 7);
    assert_eq!(only_in(&paper, &p).len(), 2 + 9 + 4);
}

/// Deliberate changes to the paper plan's experiments since its snapshot (issue #28: recipes
/// fixed against the reference scripts, docs/models.md "Recipes checked against the scripts"):
/// experiment id, section of its training config ("" for the top level), key, JSON value.
/// Experiments added to the paper plan since its snapshot: ONO's Table 3 with FNO's
/// per-channel normalizers (issue #46), whose row also renamed FNO's other one.
const ADDED_SINCE_SNAPSHOT: &[&str] = &["superres/fno-per-channel"];

const CHANGED_SINCE_SNAPSHOT: &[(&str, &str, &str, &str)] = &[
    // time_gen.py adds the running sum of the frames' losses at every frame.
    ("ns2d-time/ono", "loss", "rollout", "\"cumulative\""),
    // NSL's U-FNO and LSM NS2d scripts: batch 20, their own rollout (and U-FNO's optimizer).
    ("ns2d/ufno", "", "batch_size", "20"),
    ("ns2d/ufno", "data", "teacher_forcing", "false"),
    ("ns2d/ufno", "optimizer", "lr", "5e-4"),
    ("ns2d/ufno", "optimizer", "weight_decay", "1e-4"),
    ("ns2d/ufno", "schedule", "kind", "\"step\""),
    ("ns2d/lsm", "", "batch_size", "20"),
    ("ns2d/lsm", "data", "teacher_forcing", "false"),
    // NSL's F-FNO NS2d script.
    ("ns2d/ffno", "", "batch_size", "20"),
    ("ns2d/ffno", "optimizer", "lr", "2.5e-3"),
    ("ns2d/ffno", "optimizer", "weight_decay", "1e-4"),
    ("ns2d/ffno", "optimizer", "max_grad_norm", "0.1"),
    ("ns2d/ffno", "schedule", "kind", "\"step\""),
    // The other benchmarks' NSL scripts, per model (the files had followed Transolver's).
    ("airfoil/ufno", "", "batch_size", "20"),
    ("airfoil/ufno", "optimizer", "max_grad_norm", "0.0"),
    ("airfoil/ufno", "schedule", "kind", "\"step\""),
    ("airfoil/ffno", "", "batch_size", "20"),
    ("airfoil/ffno", "optimizer", "max_grad_norm", "0.0"),
    ("airfoil/ffno", "schedule", "kind", "\"step\""),
    ("airfoil/lsm", "", "batch_size", "4"),
    ("airfoil/lsm", "optimizer", "weight_decay", "1e-5"),
    ("airfoil/lsm", "optimizer", "max_grad_norm", "0.0"),
    ("darcy/ffno", "optimizer", "max_grad_norm", "0.1"),
    ("pipe/ffno", "optimizer", "max_grad_norm", "0.1"),
    ("elasticity/ffno", "optimizer", "max_grad_norm", "0.1"),
    ("plasticity/ffno", "optimizer", "max_grad_norm", "0.1"),
    ("elasticity/lsm", "", "batch_size", "4"),
    ("plasticity/lsm", "", "batch_size", "4"),
    // NSL's Elasticity scripts of U-FNO, F-FNO and Transolver: `--scheduler CosineAnnealingLR`.
    ("elasticity/ufno", "schedule", "kind", "\"cosine\""),
    ("elasticity/ffno", "schedule", "kind", "\"cosine\""),
    ("elasticity/transolver", "schedule", "kind", "\"cosine\""),
    // NSL's GNOT NS2d script: no clipping, weight decay 5e-5.
    ("ns2d/gnot", "optimizer", "weight_decay", "5e-5"),
    ("ns2d/gnot", "optimizer", "max_grad_norm", "0.0"),
];

/// A cell as the snapshot records it.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct CellRecord {
    table: usize,
    row: String,
    column: String,
    model: String,
    paper: Option<f64>,
    source: String,
}

/// A plan as the snapshot records it: each experiment as its settings and resolved model.
#[derive(Debug, serde::Deserialize)]
struct PlanRecord {
    experiments: Vec<serde_json::Value>,
    cells: Vec<CellRecord>,
}

/// The plans are their snapshots (`tests/data/plan_before/<profile>.json`): every experiment
/// with the same settings and the same resolved model, every cell the same. The paper plan's
/// snapshot was written by the string-built planner this one replaced (commit c77bf0e) and is
/// never rewritten. The reduced profiles were changed on purpose (issue #27: the neuraloperator
/// Darcy set, the IF-RK4 NS2d data, their sizes); their snapshots are rewritten, after reading
/// the difference, with `ONO_WRITE_PLAN_SNAPSHOT=1 cargo test -p ono-cli plans_are`.
#[test]
fn plans_are_those_of_the_previous_planner() {
    use serde_json::json;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/plan_before");
    for profile in PROFILES {
        let name = profile.name();
        let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let mut before: PlanRecord = serde_json::from_str(&text).unwrap();
        let p = plan(profile, &paths()).unwrap();
        // The seed replicates are new (`replicates_repeat_table1_cells_with_other_seeds`).
        let experiments: Vec<serde_json::Value> = p
            .experiments
            .iter()
            .filter(|e| e.replicate_of.is_none())
            .map(|e| {
                let work = match &e.work {
                    Work::Train {
                        config,
                        strides,
                        test_resolutions,
                    } => {
                        // The snapshot holds the model resolved, not how it was written.
                        let model = config.model.config().unwrap();
                        let mut cfg = serde_json::to_value(config.as_ref()).unwrap();
                        cfg.as_object_mut().unwrap().remove("model");
                        let mut w = json!({"train": cfg, "model": model, "strides": strides});
                        if !test_resolutions.is_empty() {
                            w["test_resolutions"] = json!(test_resolutions);
                        }
                        w
                    }
                    Work::Measure(m) => json!({
                        "measure": {"shapes": m.shapes, "batch": m.batch, "steps": m.steps},
                        "model": m.model.config().unwrap(),
                    }),
                    Work::TimeRun { config, steps } => {
                        let model = config.model.config().unwrap();
                        let mut cfg = serde_json::to_value(config.as_ref()).unwrap();
                        cfg.as_object_mut().unwrap().remove("model");
                        json!({"time_run": cfg, "model": model, "steps": steps})
                    }
                };
                json!({"id": e.id, "model": e.model, "data_note": e.data_note, "work": work})
            })
            .collect();
        let added = |id: Option<&str>| id.is_some_and(|id| ADDED_SINCE_SNAPSHOT.contains(&id));
        let experiments: Vec<serde_json::Value> = experiments
            .into_iter()
            .filter(|e| profile != Profile::Paper || !added(e["id"].as_str()))
            .collect();
        let mut cells: Vec<CellRecord> = p
            .cells
            .iter()
            .filter(|c| profile != Profile::Paper || !added(c.source.experiment()))
            .map(|c| CellRecord {
                table: c.table,
                row: c.row.clone(),
                column: c.column.clone(),
                model: c.model.clone(),
                paper: c.paper,
                source: format!("{:?}", c.source),
            })
            .collect();
        if profile != Profile::Paper && std::env::var_os("ONO_WRITE_PLAN_SNAPSHOT").is_some() {
            let record = json!({"experiments": experiments, "cells": cells});
            let text = serde_json::to_string_pretty(&record).unwrap() + "\n";
            std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
            continue;
        }
        assert_eq!(experiments.len(), before.experiments.len(), "{name}");
        // FNO's Table 3 row has said which normalizer it uses since its per-channel twin came.
        for c in before.cells.iter_mut() {
            if c.table == 3 && c.row == "FNO" && c.source.contains("\"superres/fno\"") {
                c.row = super::tables::SUPERRES_FNO_INTERPOLATED.into();
            }
        }
        // Deliberate changes to the paper plan since its snapshot, each a recipe fixed against
        // the reference scripts (docs/models.md, "Recipes checked against the scripts").
        // (The reduced profiles' snapshots are rewritten instead.)
        let changed = if profile == Profile::Paper {
            CHANGED_SINCE_SNAPSHOT
        } else {
            &[]
        };
        for (id, section, key, value) in changed {
            for was in before.experiments.iter_mut().filter(|e| e["id"] == *id) {
                let mut at = &mut was["work"]["train"];
                if !section.is_empty() {
                    at = &mut at[*section];
                }
                at[*key] = serde_json::from_str(value).unwrap();
            }
        }
        for (now, was) in experiments.iter().zip(&mut before.experiments) {
            // Read the snapshot's model as today's config, so that a field added since with
            // the old behaviour as its default (ONO's `landmarks`) reads as it was.
            let model = &mut was["work"]["model"];
            let mut fields = model.as_object().unwrap().clone();
            let arch = fields.remove("arch").unwrap();
            let arch = arch.as_str().unwrap();
            let read = ModelConfig::from_fields(arch, serde_json::Value::Object(fields)).unwrap();
            *model = json!(read);
            assert_eq!(now, was, "{name}");
        }
        // Tables 2 and 8 are stated one after the other now, where the old planner interleaved
        // their cells: the order within a table is what the report shows.
        cells.sort_by_key(|c| c.table);
        before.cells.sort_by_key(|c| c.table);
        assert_eq!(cells, before.cells, "{name}");
    }
}

/// No spectral layer of a reduced model keeps more modes than its grid has: the neuraloperator
/// Darcy grid is 16², NS2d's 64/r (U-FNO and F-FNO at the quick width's 10 modes refused to run
/// on 16²).
#[test]
fn reduced_models_fit_their_grids() {
    for profile in [Profile::Quick, Profile::Smoke] {
        let r = Reduced::of(profile).unwrap();
        let p = plan(profile, &paths()).unwrap();
        for e in &p.experiments {
            let Work::Train { config, .. } = &e.work else {
                continue;
            };
            let side = match config.data.benchmark {
                Some(Benchmark::NeuralopDarcy) => 16,
                Some(Benchmark::Ns2d) => 64 / r.ns2d_r as i64,
                _ => continue,
            };
            let modes: Vec<i64> = match config.model.config().unwrap() {
                ModelConfig::Fno2d(c) => c.modes.clone(),
                ModelConfig::Fno3d(c) => c.modes[..2].to_vec(),
                ModelConfig::GeoFno(c) => c.modes.to_vec(),
                ModelConfig::Ufno(c) => vec![c.nsl.modes],
                ModelConfig::Ffno(c) => vec![c.nsl.modes],
                ModelConfig::Galerkin(c) => vec![c.fourier_modes],
                _ => continue,
            };
            assert!(modes.iter().all(|&m| m <= side / 2), "{}: {modes:?}", e.id);
            let unet = matches!(
                config.model.config().unwrap(),
                ModelConfig::Ufno(_) | ModelConfig::Lsm(_)
            );
            if unet && side < 32 {
                assert_eq!(
                    config.data.benchmark,
                    Some(Benchmark::NeuralopDarcy),
                    "{}",
                    e.id
                );
            }
        }
    }
}

/// The benchmark names are views of one list: the table's tasks, the rehearsal's miniatures
/// and budget ([`Benchmark::PAPER`]) and the model presets named after the benchmarks.
#[test]
fn tasks_and_presets_are_the_paper_benchmarks() {
    use ono_models::Presets;
    let mut tasks: Vec<Benchmark> = Task::ALL.iter().map(|t| t.benchmark()).collect();
    tasks.sort_by_key(|b| b.name());
    let mut paper = Benchmark::PAPER.to_vec();
    paper.sort_by_key(|b| b.name());
    assert_eq!(tasks, paper);
    for t in Task::ALL {
        assert_eq!(t.key().parse::<Benchmark>().unwrap(), t.benchmark());
    }
    let names: Vec<&str> = Benchmark::PAPER.iter().map(|b| b.name()).collect();
    assert_eq!(
        &<ono_models::OnoConfig as Presets>::NAMES[..6],
        &names[..],
        "ONO's presets lead with the benchmarks"
    );
    assert_eq!(
        <ono_models::nsl::transolver::TransolverConfig as Presets>::NAMES,
        &names[..],
        "the NSL ports' presets are the benchmarks"
    );
}
