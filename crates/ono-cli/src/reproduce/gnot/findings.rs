//! GNOT's findings as claims on the plan's cells (the ONO paper's framework:
//! [`super::super::findings`]), each judged on a run:
//!
//! - every trained model learns its task (the mean-field bar, as for every paper);
//! - Table 1: GNOT's error is below FNO's and Geo-FNO's on every benchmark, and below the
//!   GK-Transformer's on the irregular meshes (Elasticity, NACA), where the GK-Transformer is
//!   slightly better on Darcy2d;
//! - Table 2: "cross + self" is the best order on every dataset;
//! - Table 3: three experts beat one and beat eight or sixteen; the number of heads has little
//!   impact.

use ono_models::gnot::BlockOrder;

use super::super::findings::{self, BelowSpec, Finding, SpreadSpec};
use super::super::plan::Plan;
use super::super::values::Readings;
use super::numbers::{TABLE1, TABLE3_HEADS};
use super::TABLE3_COLUMN;

/// "Little impact" of the heads: the largest error over the smallest, at most. The paper's heads
/// span 1.06×.
pub const HEADS_BAR: f64 = 1.25;

const UNDERTRAINED: &str = "The paper trains every model for 500 epochs on the full sets; these runs see far fewer samples and epochs at a smaller width, and a comparison of undertrained models can go either way:";

const ABLATION: &str = "The paper's ablation compares models trained to convergence on its own data; at this size the variants can differ by less than the spread between seeds:";

/// Every claim the plan has cells for.
pub fn evaluate(r: &Readings, paper: Option<&Plan>) -> Vec<Finding> {
    let mut out = findings::mean_field_claims(r, paper);
    let label = |model: &str| TABLE1.iter().find(|t| t.0 == model).map_or("?", |t| t.1);
    let (gnot, fno, geofno, gk) = (
        label("gnot"),
        label("fno"),
        label("geofno"),
        label("galerkin"),
    );
    let experts = |e: i64| format!("N_experts = {e} (1 head)");
    let specs = [
        BelowSpec {
            table: 1,
            row: gnot,
            than: fno,
            bar: None,
            columns: "",
            statement: "GNOT's error is below FNO(-interp)'s on every benchmark both run (Table 1)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 1,
            row: gnot,
            than: geofno,
            bar: None,
            columns: "",
            statement: "GNOT's error is below Geo-FNO's on every benchmark both run (Table 1)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 1,
            row: gnot,
            than: gk,
            bar: None,
            columns: "Elasticity",
            statement: "On Elasticity, an irregular mesh, GNOT's error is below the GK-Transformer's (Table 1)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 1,
            row: gnot,
            than: gk,
            bar: None,
            columns: "NACA",
            statement: "On NACA, an irregular mesh, GNOT's error is below the GK-Transformer's (Table 1)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 1,
            row: gk,
            than: gnot,
            bar: None,
            columns: "Darcy2d",
            statement: "On Darcy2d, a uniform grid, the GK-Transformer's error is slightly below GNOT's (Table 1)".into(),
            reason: UNDERTRAINED,
        },
        BelowSpec {
            table: 2,
            row: BlockOrder::CrossSelf.label(),
            than: BlockOrder::CrossCross.label(),
            bar: None,
            columns: "",
            statement: "A cross-attention followed by a self-attention beats two cross-attentions on every dataset (Table 2)".into(),
            reason: ABLATION,
        },
        BelowSpec {
            table: 2,
            row: BlockOrder::CrossSelf.label(),
            than: BlockOrder::SelfCross.label(),
            bar: None,
            columns: "",
            statement: "The self-attention is better placed after the cross-attention than before it, on every dataset (Table 2)".into(),
            reason: ABLATION,
        },
    ];
    for b in &specs {
        out.extend(findings::below_claim(r, paper, b));
    }
    for (than, statement) in [
        (
            1,
            "Three experts beat one (Table 3; on Heat's three subdomains in the paper)",
        ),
        (
            8,
            "Three experts beat eight: too many experts deteriorate (Table 3)",
        ),
        (
            16,
            "Three experts beat sixteen: too many experts deteriorate (Table 3)",
        ),
    ] {
        let (row, than) = (experts(3), experts(than));
        let b = BelowSpec {
            table: 3,
            row: &row,
            than: &than,
            bar: None,
            columns: TABLE3_COLUMN,
            statement: statement.into(),
            reason: ABLATION,
        };
        out.extend(findings::below_claim(r, paper, &b));
    }
    let paper_spread = {
        let v = TABLE3_HEADS.map(|h| h.1);
        v.iter().copied().fold(0.0, f64::max) / v.iter().copied().fold(f64::INFINITY, f64::min)
    };
    out.extend(findings::spread_claim(
        r,
        &SpreadSpec {
            table: 3,
            rows: "N_heads",
            columns: TABLE3_COLUMN,
            bar: HEADS_BAR,
            statement: format!("The number of heads has little impact: the errors of 1–16 heads are within {HEADS_BAR}× of each other (the paper's: {paper_spread:.2}×; Table 3)"),
            reason: ABLATION,
        },
    ));
    out
}
