//! The Galerkin Transformer paper's findings as claims on the plan's cells (the ONO paper's
//! framework: [`super::super::findings`]), each judged on a run:
//!
//! - every trained model learns its task (the mean-field bar, as for every paper);
//! - Table 2a: the attention rows' Burgers error does not depend on the resolution;
//! - Table 2a: the Galerkin-type layer normalization beats the regular one where inputs and
//!   targets are not normalized (Burgers);
//! - Table 2b: the Fourier and Galerkin Transformers are 30–50% better than FNO2d;
//! - Table 3: they recover the coefficient where FNO2d struggles;
//! - Table 1: the Fourier-type attention needs 40–50% less memory than the softmax one, and the
//!   Galerkin-type is faster than the linear one;
//! - Table 8: without the diagonal initialization, or with the regular normalization, training
//!   goes wrong.

use super::super::findings::{self, BelowSpec, SpreadSpec};
use super::super::plan::Plan;
use super::super::values::Readings;
use super::numbers;

/// The largest factor between a row's Burgers errors at its resolutions that still counts as
/// "independent of the resolution": the paper's own rows span up to 1.8× (GT regular Ln) and
/// 1.17× (GT Ln on K, V).
pub const INVARIANCE_BAR: f64 = 2.0;

const UNDERTRAINED: &str = "The paper's models are trained on 1024 samples for 100 epochs; these runs see far fewer of both, and a comparison of undertrained models can go either way:";

/// Every claim the plan has cells for.
pub fn evaluate(r: &Readings, paper: Option<&Plan>) -> Vec<findings::Finding> {
    let mut out = findings::mean_field_claims(r, paper);
    let rows: Vec<&str> = {
        let mut rows = Vec::new();
        for c in r.plan.cells.iter().filter(|c| c.table == 2) {
            if c.column.starts_with("Burgers") && !rows.contains(&c.row.as_str()) {
                rows.push(c.row.as_str());
            }
        }
        rows
    };
    for row in rows.into_iter().filter(|row| !row.starts_with("FNO")) {
        out.extend(findings::spread_claim(
            r,
            &SpreadSpec {
                table: 2,
                rows: row,
                columns: "Burgers",
                bar: INVARIANCE_BAR,
                statement: format!("{row}'s error on Burgers is independent of the resolution: largest over smallest at most {INVARIANCE_BAR}× (Table 2a)"),
                reason: UNDERTRAINED,
            },
        ));
    }
    let table8 = |i: usize| numbers::TABLE8[i].label;
    for b in [
        BelowSpec {
            table: 2,
            row: "GT Ln on K, V",
            than: "GT regular Ln",
            bar: None,
            columns: "Burgers",
            statement: "On Burgers, where neither input nor target is normalized, GT with the Galerkin-type layer normalization (on K, V) has a lower error than with the regular one (Table 2a)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 2,
            row: "FT Ln on Q, K",
            than: "FNO2d 1cycle",
            bar: Some(0.7),
            columns: "Darcy",
            statement: "On the Darcy interface problem, FT's error is at least 30% below FNO2d's (Table 2b)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 2,
            row: "GT Ln on K, V",
            than: "FNO2d 1cycle",
            bar: Some(0.7),
            columns: "Darcy",
            statement: "On the Darcy interface problem, GT's error is at least 30% below FNO2d's (Table 2b)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 3,
            row: "GT Ln on K, V",
            than: "FNO2d (only n_c)",
            bar: Some(0.5),
            columns: "",
            statement: "In the inverse problem, GT's error is at most half of FNO2d's (on the coarse grid), at every noise level (Table 3)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 3,
            row: "GT Ln on K, V",
            than: "FNO2d (only n_f)",
            bar: Some(0.5),
            columns: "",
            statement: "In the inverse problem, GT's error is at most half of FNO2d's (on the fine grid), at every noise level (Table 3)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 1,
            row: "FT (FT Ln on Q, K)",
            than: "ST (ST Ln on Q, K)",
            bar: Some(0.6),
            columns: "peak memory",
            statement: "Training FT takes at least 40% less memory than training ST (Table 1)".into(),
            reason: "The peak is the whole process's resident memory: at this profile's n the attention's n × n matrices are a small part of it, where on the paper's GPU at n = 8192 they are most of it:",
        },
        BelowSpec {
            table: 1,
            row: "GT (GT Ln on K, V)",
            than: "LT (LT Ln on K, V)",
            bar: None,
            columns: "s / step",
            statement: "A training step of GT is faster than one of LT (Table 1)".into(),
            reason: "The two differ by two softmaxes over a few channels, which at this profile's size can be within the noise of a CPU step time:",
        },
        BelowSpec {
            table: 8,
            row: table8(6),
            than: table8(0),
            bar: None,
            columns: "",
            statement: format!("{} (the default init) has a lower error than {} (Table 8)", table8(6), table8(0)),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 8,
            row: table8(8),
            than: table8(6),
            bar: None,
            columns: "",
            statement: format!("{} has a lower error than {} (the diagonal initialization helps; Table 8)", table8(8), table8(6)),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 8,
            row: table8(8),
            than: table8(4),
            bar: None,
            columns: "",
            statement: format!("{} has a lower error than {} (Table 8)", table8(8), table8(4)),
            reason: UNDERTRAINED,
        },
    ] {
        out.extend(findings::below_claim(r, paper, &b));
    }
    out
}
