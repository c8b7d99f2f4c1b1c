//! The claims on synthetic outcomes: one that holds, one that does not, one not measured; the
//! ranks and Spearman's ρ against hand-computed values; the seeds' mean and spread.

use std::collections::BTreeMap;

use super::*;
use crate::reproduce::execute::{Outcome, Status};
use crate::reproduce::plan::{base, Cell, Experiment, PaperOnly, Plan, Source, Task, Work};
use crate::reproduce::values::Readings;
use crate::reproduce::RunContext;

/// A trained experiment (Darcy FNO's base under another id, on 64 samples for 7 epochs).
fn experiment(id: &str) -> Experiment {
    let mut config = base("fno", Task::Darcy).unwrap().unwrap();
    config.data.ntrain = Some(64);
    config.epochs = 7;
    Experiment {
        id: id.into(),
        model: "fno".into(),
        work: Work::Train {
            config: Box::new(config),
            strides: Vec::new(),
            test_resolutions: Vec::new(),
        },
        data_note: String::new(),
        replicate_of: None,
    }
}

/// `id`'s replicate of seed offset `k`.
fn replicate(id: &str, k: u64) -> Experiment {
    let mut e = experiment(&format!("{id}@seed{k}"));
    if let Work::Train { config, .. } = &mut e.work {
        config.seed += k;
    }
    e.replicate_of = Some(id.into());
    e
}

fn cell(table: usize, row: &str, column: &str, paper: Option<f64>, source: Source) -> Cell {
    Cell {
        table,
        row: row.into(),
        column: column.into(),
        model: "ono".into(),
        paper,
        source,
    }
}

/// A finished experiment with test error `test` against mean field `field`.
fn done(e: &Experiment, test: f64, field: f64) -> Outcome {
    let ctx = RunContext::for_tests();
    Outcome {
        test_rel_l2: Some(test),
        mean_field: Some(field),
        ..Outcome::new(e, &ctx)
    }
}

fn no_data(e: &Experiment) -> Outcome {
    Outcome {
        status: Status::MissingData("pipe.mat: not in /data".into()),
        test_rel_l2: None,
        mean_field: None,
        ..done(e, 0.0, 0.0)
    }
}

fn find<'a>(found: &'a [Finding], claim: &Claim) -> &'a Finding {
    found
        .iter()
        .find(|f| &f.claim == claim)
        .unwrap_or_else(|| panic!("no {claim:?} in {found:#?}"))
}

fn below_claim(table: usize, row: &str, than: &str) -> Claim {
    Claim::Below {
        table,
        row: row.into(),
        than: than.into(),
        bar: None,
    }
}

/// Table 7 holds (ONO-30 below ONO-8 where measured, Plasticity missing), Table 5's Nyström
/// against the linear block does not (with the settings in its "why"), Table 6 was not measured
/// at all; the mean-field bar fails for the one run above 0.6× while every run beats the mean
/// field.
#[test]
fn a_claim_holds_one_does_not_one_is_not_measured() {
    let ids = [
        "elasticity/ono-8",
        "elasticity/ono-30",
        "plasticity/ono-8",
        "plasticity/ono-30",
        "elasticity/ono-linear",
        "elasticity/ono",
        "pipe/ono-batch-norm",
        "pipe/ono",
    ];
    let experiments: Vec<Experiment> = ids.iter().map(|id| experiment(id)).collect();
    let e = |id: &str| experiments.iter().find(|e| e.id == id).unwrap();
    let cells = vec![
        cell(
            7,
            "ONO-8",
            "Elasticity",
            Some(0.0118),
            Source::TestError(ids[0].into()),
        ),
        cell(
            7,
            "ONO-8",
            "Plasticity",
            Some(0.0048),
            Source::TestError(ids[2].into()),
        ),
        cell(
            7,
            "ONO-30",
            "Elasticity",
            Some(0.0047),
            Source::TestError(ids[1].into()),
        ),
        cell(
            7,
            "ONO-30",
            "Plasticity",
            Some(0.0013),
            Source::TestError(ids[3].into()),
        ),
        cell(
            5,
            "Linear",
            "Elasticity",
            Some(0.0137),
            Source::TestError(ids[4].into()),
        ),
        cell(
            5,
            "Nyström",
            "Elasticity",
            Some(0.0118),
            Source::TestError(ids[5].into()),
        ),
        cell(
            6,
            "BN",
            "Pipe",
            Some(0.2151),
            Source::TestError(ids[6].into()),
        ),
        cell(
            6,
            "Ortho",
            "Pipe",
            Some(0.0034),
            Source::TestError(ids[7].into()),
        ),
        // Table 6 on Elasticity: BN and LN left to the paper profile, the orthonormalization
        // run measured.
        cell(
            6,
            "BN",
            "Elasticity",
            Some(0.0149),
            Source::PaperOnly(PaperOnly::NotLearnedInBudget),
        ),
        cell(
            6,
            "LN",
            "Elasticity",
            Some(0.0121),
            Source::PaperOnly(PaperOnly::NotLearnedInBudget),
        ),
        cell(
            6,
            "Ortho",
            "Elasticity",
            Some(0.0118),
            Source::TestError(ids[5].into()),
        ),
    ];
    let outcomes = vec![
        done(e(ids[0]), 0.20, 0.5),
        done(e(ids[1]), 0.10, 0.5),
        no_data(e(ids[2])),
        no_data(e(ids[3])),
        done(e(ids[4]), 0.10, 0.5),
        // 0.35 / 0.5 = 0.7: above the 0.6 bar, below the mean field.
        done(e(ids[5]), 0.35, 0.5),
        no_data(e(ids[6])),
        no_data(e(ids[7])),
    ];
    let plan = Plan {
        experiments: experiments.clone(),
        cells,
    };
    let found = evaluate(&Readings::new(&plan, &outcomes), None);

    let t7 = find(&found, &below_claim(7, "ONO-30", "ONO-8"));
    assert_eq!(t7.verdict, Verdict::Holds, "{t7:#?}");
    assert_eq!(
        t7.summary,
        "ONO-30 against ONO-8: Elasticity: 0.1000 < 0.2000"
    );
    assert_eq!(
        t7.numbers,
        [
            Number {
                label: "ONO-30 Elasticity".into(),
                value: 0.10
            },
            Number {
                label: "ONO-8 Elasticity".into(),
                value: 0.20
            }
        ]
    );
    assert_eq!(
        t7.unmeasured,
        [
            missing("plasticity/ono-30", "no data"),
            missing("plasticity/ono-8", "no data")
        ]
    );
    assert_eq!(t7.why, None);

    let t5 = find(&found, &below_claim(5, "Nyström", "Linear"));
    assert_eq!(t5.verdict, Verdict::DoesNotHold, "{t5:#?}");
    assert_eq!(
        t5.summary,
        "Nyström against Linear: Elasticity: 0.3500 ≥ 0.1000"
    );
    // The why states both runs' settings, read from their experiments.
    let why = t5.why.as_deref().unwrap();
    let needle =
        "`elasticity/ono`, `elasticity/ono-linear`: width 32, 4 layers, 64 training samples, 7 epochs.";
    assert!(why.contains(needle), "{needle} not in {why}");
    // Table 5's Galerkin row is not in the plan: no claim about it.
    assert!(!found
        .iter()
        .any(|f| f.claim == below_claim(5, "Nyström", "Galerkin")));

    let t6 = find(&found, &below_claim(6, "Ortho", "BN"));
    assert_eq!(
        t6.verdict,
        Verdict::NotMeasured(vec![
            missing("pipe/ono", "no data"),
            missing("pipe/ono-batch-norm", "no data")
        ])
    );
    assert_eq!(t6.why, None);
    // A pair with a cell left to the paper profile is named, not judged.
    assert_eq!(
        t6.summary,
        "Ortho against BN: Elasticity: left to the paper profile"
    );
    let ln = find(&found, &below_claim(6, "Ortho", "LN"));
    assert_eq!(ln.verdict, Verdict::NotMeasured(Vec::new()));
    assert_eq!(
        ln.summary,
        "Ortho against LN: Elasticity: left to the paper profile"
    );

    let bar = find(&found, &Claim::MeanFieldBar { bar: 0.6 });
    assert_eq!(bar.verdict, Verdict::DoesNotHold);
    assert_eq!(
        bar.summary,
        "3 of 4 measured trained experiments do; not: `elasticity/ono` 0.70× (error / mean field)"
    );
    assert_eq!(bar.unmeasured.len(), 4, "{:?}", bar.unmeasured);
    let beats = find(&found, &Claim::BeatsMeanField);
    assert_eq!(beats.verdict, Verdict::Holds, "{beats:#?}");

    // The report's sections put each where it belongs.
    let md = markdown(&found);
    let (holds, rest) = md.split_once("## What does not, and why").unwrap();
    assert!(holds.contains("ONO-30 is below ONO-8") && holds.contains("beats the mean field"));
    let (fails, unmeasured) = rest.split_once("Not measured in this run:").unwrap();
    assert!(
        fails.contains("Nyström block is below ONO with the linear")
            && fails.contains("*Why it may not hold at this scale:*")
    );
    assert!(unmeasured.contains("with BN") && !unmeasured.contains("ONO-30"));
    assert!(
        unmeasured.contains(
            "with BN (Table 6): Ortho against BN: Elasticity: left to the paper profile; `pipe/ono` (no data), `pipe/ono-batch-norm` (no data)\n"
        ),
        "{unmeasured}"
    );
    assert!(
        unmeasured.contains(
            "with LN (Table 6): Ortho against LN: Elasticity: left to the paper profile\n"
        ),
        "{unmeasured}"
    );
}

/// Spearman's ρ: without ties, 1 − 6 Σd² / (n (n² − 1)); with ties, the Pearson correlation
/// of the averaged ranks (worked by hand in the comments).
#[test]
fn spearman_against_hand_computed_values() {
    // Ranks 1 2 3 4 against 3 1 4 2: Σd² = 4 + 1 + 1 + 4 = 10, ρ = 1 − 60 / 60 = 0.
    let r = spearman(&[0.1, 0.2, 0.3, 0.4], &[0.3, 0.1, 0.4, 0.2]).unwrap();
    assert!(r.abs() < 1e-12, "{r}");
    // Against 2 1 3 4: Σd² = 2, ρ = 1 − 12 / 60 = 0.8.
    let r = spearman(&[0.1, 0.2, 0.3, 0.4], &[0.2, 0.1, 0.3, 0.4]).unwrap();
    assert!((r - 0.8).abs() < 1e-12, "{r}");
    // Ranks 1 2 3 4 5 against 1 2 3.5 5 3.5 (a tie): deviations −2 −1 0 1 2 and
    // −2 −1 0.5 2 0.5, covariance 8, variances 10 and 9.5: ρ = 8 / √95.
    let r = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]).unwrap();
    assert!((r - 8.0 / 95f64.sqrt()).abs() < 1e-12, "{r}");
    assert_eq!(spearman(&[1.0, 2.0], &[3.0, 3.0]), None);
    assert_eq!(spearman(&[1.0], &[1.0]), None);
}

/// Table 1's Darcy column: ONO's rank here and in the paper among the measured models, ρ of
/// the two orders; ONO's cell is the mean of its two seeds; a column with fewer than three
/// measured models is not ranked.
#[test]
fn table1_rank_with_seeds() {
    let models = ["fno", "lsm", "ono", "gnot"];
    let mut experiments: Vec<Experiment> = models
        .iter()
        .map(|m| experiment(&format!("darcy/{m}")))
        .collect();
    experiments.push(replicate("darcy/ono", 1));
    experiments.push(experiment("pipe/ono"));
    experiments.push(experiment("pipe/lsm"));
    let mut cells: Vec<Cell> = models
        .iter()
        .map(|m| Cell {
            model: m.to_string(),
            ..cell(
                1,
                m,
                "Darcy",
                paper::table1(m)[3],
                Source::TestError(format!("darcy/{m}")),
            )
        })
        .collect();
    cells.push(cell(
        1,
        "ono",
        "Pipe",
        Some(0.0034),
        Source::TestError("pipe/ono".into()),
    ));
    cells.push(Cell {
        model: "lsm".into(),
        ..cell(
            1,
            "lsm",
            "Pipe",
            Some(0.0049),
            Source::TestError("pipe/lsm".into()),
        )
    });
    let e = |id: &str| experiments.iter().find(|e| e.id == id).unwrap();
    // Ours: lsm 0.0100 < ono (0.0119 + 0.0127) / 2 = 0.0123 < fno 0.0300 < gnot 0.0400.
    // The paper: lsm 0.0069 < ono 0.0076 < gnot 0.0105 < fno 0.0108.
    let outcomes = vec![
        done(e("darcy/fno"), 0.0300, 0.5),
        done(e("darcy/lsm"), 0.0100, 0.5),
        done(e("darcy/ono"), 0.0119, 0.5),
        done(e("darcy/ono@seed1"), 0.0127, 0.5),
        done(e("darcy/gnot"), 0.0400, 0.5),
        done(e("pipe/ono"), 0.0100, 0.5),
        done(e("pipe/lsm"), 0.0100, 0.5),
    ];
    let plan = Plan { experiments, cells };
    let readings = Readings::new(&plan, &outcomes);
    let found = evaluate(&readings, None);
    let darcy = find(
        &found,
        &Claim::Table1Rank {
            column: "Darcy".into(),
        },
    );
    assert_eq!(darcy.verdict, Verdict::Holds, "{darcy:#?}");
    let n = |label: &str| {
        darcy
            .numbers
            .iter()
            .find(|n| n.label == label)
            .unwrap_or_else(|| panic!("{label}"))
            .value
    };
    assert_eq!(
        (n("ONO's rank here"), n("ONO's rank in the paper")),
        (2.0, 2.0)
    );
    assert!((n("ONO here") - 0.0123).abs() < 1e-12);
    // Ranks by model (fno lsm ono gnot): paper 4 1 2 3, ours 3 1 2 4: Σd² = 2, ρ = 0.8.
    assert!((n("Spearman") - 0.8).abs() < 1e-12);
    assert!(
        darcy
            .summary
            .starts_with("ONO is 2nd of 4 here (0.0123), 2nd among"),
        "{}",
        darcy.summary
    );
    let pipe = find(
        &found,
        &Claim::Table1Rank {
            column: "Pipe".into(),
        },
    );
    assert_eq!(pipe.verdict, Verdict::NotMeasured(Vec::new()));
    assert_eq!(pipe.summary, "2 models measured, of the 3 a ranking needs");

    // The cell shows the mean ± half the range of its seeds; summary.json lists both.
    let reading = readings.cell(&plan.cells[2]);
    assert_eq!(
        reading.format(&plan.cells[2].source),
        "0.0123 ± 0.0004 (2 seeds)"
    );
    assert_eq!(
        reading
            .seeds
            .iter()
            .map(|s| (s.experiment.as_str(), s.value))
            .collect::<Vec<_>>(),
        [
            ("darcy/ono", Some(0.0119)),
            ("darcy/ono@seed1", Some(0.0127))
        ]
    );
    assert_eq!(reading.seeds[1].seed, reading.seeds[0].seed + 1);
    assert!((reading.spread().unwrap() - 0.0004).abs() < 1e-12);
    // One seed missing: the other alone, said so.
    let partial = vec![outcomes[2].clone(), no_data(&plan.experiments[4])];
    let reading = Readings::new(&plan, &partial).cell(&plan.cells[2]);
    assert_eq!(
        reading.format(&plan.cells[2].source),
        "0.0119 (1 of 2 seeds)"
    );
    // A cell of one seed is its value alone.
    assert_eq!(
        readings.cell(&plan.cells[0]).format(&plan.cells[0].source),
        "0.0300"
    );
    assert!(readings.cell(&plan.cells[0]).seeds.is_empty());
}

/// Table 3 per super-resolution data set, whatever its experiments are called: here one data
/// set where ONO's error grows less than FNO's and one where it does not; and on the first, a
/// second FNO row (its per-channel normalizer) judged on its own.
#[test]
fn super_resolution_per_data_set() {
    let mut experiments = Vec::new();
    let mut cells = Vec::new();
    let mut outcomes = Vec::new();
    // (data set, experiment, model, row, trained error, finest error)
    for (set, name, model, row_label, trained, finest) in [
        ("superres", "fno", "fno", "fno", 0.01, 0.05),
        (
            "superres",
            "fno-per-channel",
            "fno",
            "FNO per channel",
            0.01,
            0.0105,
        ),
        ("superres", "ono", "ono", "ono", 0.02, 0.021),
        ("zero-shot", "fno", "fno", "fno", 0.01, 0.011),
        ("zero-shot", "ono", "ono", "ono", 0.02, 0.04),
    ] {
        let id = format!("{set}/{name}");
        let e = experiment(&id);
        let mut o = done(&e, trained, 0.5);
        o.at_stride = BTreeMap::from([("2".to_string(), 0.9), ("1".to_string(), finest)]);
        outcomes.push(o);
        experiments.push(e);
        let row = |column: &str, source| Cell {
            model: model.into(),
            ..cell(3, row_label, column, None, source)
        };
        cells.push(row("trained", Source::TestError(id.clone())));
        cells.push(row("s=1", Source::AtStride(id.clone(), 1)));
        cells.push(row("s=2", Source::AtStride(id, 2)));
    }
    let plan = Plan { experiments, cells };
    let found = evaluate(&Readings::new(&plan, &outcomes), None);
    let set = |s: &str| {
        find(
            &found,
            &Claim::SuperResolution {
                experiments: s.into(),
                fno_row: None,
            },
        )
    };
    let per_channel = find(
        &found,
        &Claim::SuperResolution {
            experiments: "superres".into(),
            fno_row: Some("FNO per channel".into()),
        },
    );
    assert_eq!(per_channel.verdict, Verdict::DoesNotHold);
    assert_eq!(
        per_channel.summary,
        "from trained to s=1, FNO's error goes 0.0100 → 0.0105 (+0.0005), ONO's 0.0200 → 0.0210 (+0.0010)"
    );
    assert_eq!(set("superres").verdict, Verdict::Holds);
    assert_eq!(
        set("superres").summary,
        "from trained to s=1, FNO's error goes 0.0100 → 0.0500 (+0.0400), ONO's 0.0200 → 0.0210 (+0.0010)"
    );
    assert_eq!(set("zero-shot").verdict, Verdict::DoesNotHold);
    assert!(set("zero-shot")
        .why
        .as_deref()
        .unwrap()
        .contains("`zero-shot/ono`"));
}

/// Many experiments in few words: those without a number by folder, settings as ranges.
#[test]
fn many_experiments_in_few_words() {
    let m: Vec<Missing> = ["airfoil/a", "airfoil/b", "airfoil/c", "pipe/a", "pipe/b"]
        .iter()
        .map(|id| missing(id, "no data: airfoil.mat is not in ./data"))
        .collect();
    assert_eq!(
        missing_words(&m),
        "`airfoil/*` (3, no data), `pipe/*` (2, no data)"
    );
    assert_eq!(
        missing_words(&m[..2]),
        "`airfoil/a` (no data), `airfoil/b` (no data)"
    );
    let s = |width, layers, samples, epochs| Settings {
        width: Some(width),
        layers: Some(layers),
        samples,
        epochs,
    };
    assert_eq!(
        s(8, 1, Ok(4), 1).words(),
        "width 8, 1 layer, 4 training samples, 1 epoch"
    );
    assert_eq!(
        Settings::range(&[
            &s(8, 1, Ok(4), 2),
            &s(64, 3, Err("its file's training split"), 2),
            &s(16, 2, Ok(64), 2)
        ]),
        "width 8–64, 1–3 layers, 4–64 training samples or its file's training split, 2 epochs"
    );
}
