//! The Galerkin Transformer paper's findings, judged on a run.

use super::super::findings::{self, Finding};
use super::super::plan::Plan;
use super::super::values::Readings;

/// Every claim the plan has cells for.
pub fn evaluate(r: &Readings, paper: Option<&Plan>) -> Vec<Finding> {
    findings::mean_field_claims(r, paper)
}
