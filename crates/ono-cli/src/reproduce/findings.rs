//! The ONO paper's findings as claims, each evaluated from the outcomes and the plan's cells:
//! it holds, does not hold, or was not measured (and which experiments are missing), with the
//! numbers that decide it. The report leads with them; `summary.json` lists them.
//!
//! Claims are keyed on the plan's cells (table, row, column), not on experiment ids, so a cell
//! added to a table (another super-resolution data set, a column of Table 1) is judged too.

use std::fmt::Write as _;

use ono_models::NnBlock;
use ono_nn::orthogonal::Orthogonalization;
use ono_train::config::TrainConfig;
use serde::{Deserialize, Serialize};

use super::paper;
use super::plan::{model_label, Cell, Plan, Source, Work};
use super::values::{err, Reading, Readings, Shown};

/// The profile's bar: every trained model ends at most this fraction of its task's mean-field
/// error (issue #27).
pub const MEAN_FIELD_BAR: f64 = 0.6;

/// Table 1's columns are ranked where at least this many models were measured.
const MIN_RANKED: usize = 3;

/// What is claimed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Claim {
    /// Every trained experiment ends at most `bar` × its task's mean-field error.
    MeanFieldBar { bar: f64 },
    /// Every trained experiment ends below its task's mean-field error.
    BeatsMeanField,
    /// In a Table 1 column, ONO ranks among the measured models no worse than it ranks among
    /// the same models in the paper.
    Table1Rank { column: String },
    /// ONO's error grows less than FNO's from the training resolution to the finest (Table 3),
    /// for the super-resolution experiments `<experiments>/fno` and `<experiments>/ono`; or
    /// against FNO's other row `fno_row` (its per-channel normalizer) on the same data.
    SuperResolution {
        experiments: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fno_row: Option<String>,
    },
    /// In every column of `table`, row `row` has a lower error than row `than` (at most `bar` ×
    /// it, where there is a bar).
    Below {
        table: usize,
        row: String,
        than: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bar: Option<f64>,
    },
    /// Row `row`'s errors over the columns of `table` (starting with `columns`) differ by at
    /// most the factor `bar`, largest over smallest.
    Invariant {
        table: usize,
        row: String,
        columns: String,
        bar: f64,
    },
}

/// Whether a claim holds in this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict", content = "missing")]
pub enum Verdict {
    Holds,
    DoesNotHold,
    /// Nothing it needs was measured: the experiments that have no number, with why.
    NotMeasured(Vec<Missing>),
}

/// A number that decides a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Number {
    pub label: String,
    pub value: f64,
}

/// A claim evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub claim: Claim,
    /// The finding in words.
    pub statement: String,
    pub verdict: Verdict,
    /// The numbers that decide it.
    pub numbers: Vec<Number>,
    /// What decides it, in words with the numbers.
    pub summary: String,
    /// The experiments without a number where others had one.
    pub unmeasured: Vec<Missing>,
    /// Why it may not hold at this scale: the profile's settings of the experiments that
    /// decide it against the paper's. Only where it does not hold.
    pub why: Option<String>,
}

impl Finding {
    pub(crate) fn new(claim: Claim, statement: String) -> Self {
        Self {
            claim,
            statement,
            verdict: Verdict::Holds,
            numbers: Vec::new(),
            summary: String::new(),
            unmeasured: Vec::new(),
            why: None,
        }
    }

    pub(crate) fn number(&mut self, label: impl Into<String>, value: f64) {
        self.numbers.push(Number {
            label: label.into(),
            value,
        });
    }

    /// Sets the verdict: not measured when nothing was, else whether any part failed; the
    /// reason is kept only where it does not hold.
    pub(crate) fn decide(
        mut self,
        measured: bool,
        failed: bool,
        missing: Vec<Missing>,
        why: String,
    ) -> Self {
        if !measured {
            self.verdict = Verdict::NotMeasured(missing);
        } else {
            self.unmeasured = missing;
            if failed {
                self.verdict = Verdict::DoesNotHold;
                self.why = Some(why);
            }
        }
        self
    }
}

/// Every claim the plan has cells for, evaluated from `r`; `paper` is the paper profile's plan
/// (the settings the "why" compares with; `None` when this run is the paper profile).
pub fn evaluate(r: &Readings, paper: Option<&Plan>) -> Vec<Finding> {
    let scale = Scale { r, paper };
    let mut out = mean_field(&scale);
    out.extend(table1_ranks(&scale));
    out.extend(super_resolution(&scale));
    for b in below_claims() {
        out.extend(below(&scale, &b));
    }
    out
}

/// The experiments' settings, here and in the paper, for the "why".
struct Scale<'a> {
    r: &'a Readings<'a>,
    paper: Option<&'a Plan>,
}

impl Scale<'_> {
    /// `reason`, then the settings of the experiments `ids` against their counterparts in the
    /// paper plan (the experiments of the paper's cells at the same table, row and column):
    /// experiments of the same settings together, and as ranges where there are many.
    fn why(&self, reason: &str, ids: &[&str]) -> String {
        // (ids, here, paper), one entry per distinct pair of settings.
        let mut groups: Vec<(Vec<&str>, Settings, Option<Settings>)> = Vec::new();
        for id in ids {
            let Some(here) = self.config(self.r.plan, id).map(|c| Settings::of(&c)) else {
                continue;
            };
            let theirs = self.paper.and_then(|p| {
                let c = self
                    .r
                    .plan
                    .cells
                    .iter()
                    .find(|c| c.source.experiment() == Some(id))?;
                let twin = p
                    .cells
                    .iter()
                    .find(|t| (t.table, &t.row, &t.column) == (c.table, &c.row, &c.column))?;
                self.config(p, twin.source.experiment()?)
                    .map(|c| Settings::of(&c))
            });
            match groups.iter_mut().find(|g| (&g.1, &g.2) == (&here, &theirs)) {
                Some(g) if !g.0.contains(id) => g.0.push(id),
                Some(_) => {}
                None => groups.push((vec![id], here, theirs)),
            }
        }
        let paper = |p: &Option<Settings>| {
            p.as_ref()
                .map_or(String::new(), |p| format!(" (paper: {})", p.words()))
        };
        let body = if groups.len() <= 3 {
            groups
                .iter()
                .map(|(ids, here, theirs)| {
                    let ids: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
                    format!("{}: {}{}", ids.join(", "), here.words(), paper(theirs))
                })
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            let n: usize = groups.iter().map(|g| g.0.len()).sum();
            let here: Vec<&Settings> = groups.iter().map(|g| &g.1).collect();
            let theirs: Vec<&Settings> = groups.iter().filter_map(|g| g.2.as_ref()).collect();
            format!(
                "these {n} experiments have {}{}",
                Settings::range(&here),
                if theirs.is_empty() {
                    String::new()
                } else {
                    format!(" (paper: {})", Settings::range(&theirs))
                }
            )
        };
        if body.is_empty() {
            reason.trim_end_matches(':').to_string() + "."
        } else {
            format!("{reason} {body}.")
        }
    }

    fn config(&self, plan: &Plan, id: &str) -> Option<TrainConfig> {
        match &plan.experiments.iter().find(|e| e.id == id)?.work {
            Work::Train { config, .. } | Work::TimeRun { config, .. } => {
                Some(config.as_ref().clone())
            }
            Work::Measure(_) => None,
        }
    }
}

/// An experiment's size: its model's width and depth, training samples and epochs.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    width: Option<i64>,
    layers: Option<i64>,
    /// The training samples it takes, or where it takes all of them from.
    samples: Result<i64, &'static str>,
    epochs: u64,
}

impl Settings {
    fn of(cfg: &TrainConfig) -> Self {
        let model = cfg
            .model
            .config()
            .ok()
            .and_then(|m| serde_json::to_value(&m).ok())
            .unwrap_or_default();
        Self {
            width: field(&model, &["n_hidden", "width"]),
            layers: field(&model, &["n_layers", "num_encoder_layers"]),
            samples: match (cfg.data.ntrain, &cfg.data.path) {
                (Some(n), _) => Ok(n),
                (None, Some(_)) => Err("its file's training split"),
                (None, None) => Err("the published training split"),
            },
            epochs: cfg.epochs,
        }
    }

    /// `width 64, 3 layers, 64 training samples, 32 epochs`.
    fn words(&self) -> String {
        Self::range(&[self])
    }

    /// The same over several experiments: each number as its range (`width 8–64`).
    fn range(all: &[&Settings]) -> String {
        let span = |xs: Vec<i64>| -> Option<(String, bool)> {
            let (lo, hi) = (*xs.iter().min()?, *xs.iter().max()?);
            Some(if lo == hi {
                (lo.to_string(), lo == 1)
            } else {
                (format!("{lo}–{hi}"), false)
            })
        };
        let plural = |(n, one): (String, bool), what: &str| {
            format!("{n} {what}{}", if one { "" } else { "s" })
        };
        let mut parts = Vec::new();
        if let Some((w, _)) = span(all.iter().filter_map(|s| s.width).collect()) {
            parts.push(format!("width {w}"));
        }
        if let Some(l) = span(all.iter().filter_map(|s| s.layers).collect()) {
            parts.push(plural(l, "layer"));
        }
        let mut samples: Vec<String> = Vec::new();
        if let Some(n) = span(all.iter().filter_map(|s| s.samples.ok()).collect()) {
            samples.push(plural(n, "training sample"));
        }
        for s in all {
            if let Err(split) = s.samples {
                if !samples.iter().any(|x| x == split) {
                    samples.push(split.to_string());
                }
            }
        }
        parts.push(samples.join(" or "));
        if let Some(e) = span(all.iter().map(|s| s.epochs as i64).collect()) {
            parts.push(plural(e, "epoch"));
        }
        parts.join(", ")
    }
}

/// The first of `keys` in a model's serialized configuration, at its top level or one section
/// down (`nsl.n_hidden`).
fn field(v: &serde_json::Value, keys: &[&str]) -> Option<i64> {
    let here = |v: &serde_json::Value| {
        let obj = v.as_object()?;
        keys.iter().find_map(|k| obj.get(*k)?.as_i64())
    };
    here(v).or_else(|| v.as_object()?.values().find_map(here))
}

/// An experiment without a number, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Missing {
    pub experiment: String,
    pub why: String,
}

/// The experiments without a number, in words: each by name where they are few, else by their
/// folder (`airfoil/*`) and why.
fn missing_words(missing: &[Missing]) -> String {
    if missing.len() <= 4 {
        return missing
            .iter()
            .map(|m| format!("`{}` ({})", m.experiment, m.why))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let mut groups: Vec<(&str, &str, usize)> = Vec::new();
    for m in missing {
        let folder = m.experiment.split('/').next().unwrap_or_default();
        match groups
            .iter_mut()
            .find(|g| (g.0, g.1) == (folder, m.why.as_str()))
        {
            Some(g) => g.2 += 1,
            None => groups.push((folder, &m.why, 1)),
        }
    }
    groups
        .iter()
        .map(|(folder, why, n)| format!("`{folder}/*` ({n}, {why})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run without a number: why, in a word or two (the whole message is in the experiments'
/// table and under "Missing data").
pub(crate) fn missing(id: &str, why: &str) -> Missing {
    Missing {
        experiment: id.to_string(),
        why: why.split(':').next().unwrap_or(why).to_string(),
    }
}

/// Adds `m` unless it is there (several cells read one experiment).
fn push_new(list: &mut Vec<Missing>, m: Missing) {
    if !list.contains(&m) {
        list.push(m);
    }
}

/// The two mean-field claims of any paper's run ([`mean_field`]).
pub fn mean_field_claims(r: &Readings, paper: Option<&Plan>) -> Vec<Finding> {
    mean_field(&Scale { r, paper })
}

/// The two mean-field claims, over every trained experiment that a cell reads (its seeds
/// averaged).
fn mean_field(s: &Scale) -> Vec<Finding> {
    let r = s.r;
    let trained: Vec<&str> = r
        .plan
        .experiments
        .iter()
        .filter(|e| e.replicate_of.is_none() && matches!(e.work, Work::Train { .. }))
        .map(|e| e.id.as_str())
        .collect();
    if trained.is_empty() {
        return Vec::new();
    }
    // (id, test error, mean field)
    let mut measured = Vec::new();
    let mut absent = Vec::new();
    for id in &trained {
        let test = r.seeds(id, |o| o.test_rel_l2);
        let field = r.seeds(id, |o| o.mean_field);
        match (Reading::of(&test).value(), Reading::of(&field).value()) {
            (Some(t), Some(m)) if m > 0.0 => measured.push((*id, t, m)),
            _ => {
                let why = test
                    .iter()
                    .chain(&field)
                    .find_map(|x| x.value.clone().err())
                    .unwrap_or_else(|| "no mean field".into());
                absent.push(missing(id, &why));
            }
        }
    }
    let n = measured.len();
    let mut out = Vec::new();
    // (claim, whether a ratio error / mean field fails it, the claim and why in words)
    let above_bar: fn(f64) -> bool = |ratio| ratio > MEAN_FIELD_BAR;
    let not_below: fn(f64) -> bool = |ratio| ratio >= 1.0;
    for (claim, fails, statement, reason) in [
        (
            Claim::MeanFieldBar { bar: MEAN_FIELD_BAR },
            above_bar,
            format!(
                "Every trained model ends at most {MEAN_FIELD_BAR}× its task's mean-field error (this profile's bar; the mean field predicts the training targets' mean)"
            ),
            "A model stays near the mean field until it has seen enough samples for enough steps; these runs have far fewer of both than the paper's:",
        ),
        (
            Claim::BeatsMeanField,
            not_below,
            "Every trained model beats the mean field".to_string(),
            "A model that does not beat the mean field has not learnt its task from these samples in these epochs:",
        ),
    ] {
        let mut f = Finding::new(claim, statement);
        let fails: Vec<&(&str, f64, f64)> =
            measured.iter().filter(|(_, t, m)| fails(t / m)).collect();
        for (id, t, m) in &measured {
            f.number(*id, t / m);
        }
        let ratio = |(id, t, m): &(&str, f64, f64)| format!("`{id}` {:.2}×", t / m);
        f.summary = if fails.is_empty() {
            let worst = measured
                .iter()
                .max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2)));
            format!(
                "all {n} measured trained experiments do{}",
                worst.map_or(String::new(), |w| format!("; the highest: {}", ratio(w)))
            )
        } else {
            format!(
                "{} of {n} measured trained experiments do; not: {} (error / mean field)",
                n - fails.len(),
                fails.iter().map(|w| ratio(w)).collect::<Vec<_>>().join(", ")
            )
        };
        let ids: Vec<&str> = fails.iter().map(|(id, ..)| *id).collect();
        let why = s.why(reason, &ids);
        out.push(f.decide(n > 0, !fails.is_empty(), absent.clone(), why));
    }
    out
}

/// Ranks with ties averaged (1 = the lowest).
fn ranks(xs: &[f64]) -> Vec<f64> {
    xs.iter()
        .map(|x| {
            let below = xs.iter().filter(|y| *y < x).count() as f64;
            let equal = xs.iter().filter(|y| *y == x).count() as f64;
            below + (equal + 1.0) / 2.0
        })
        .collect()
}

/// Spearman's rank correlation of `a` and `b` (the Pearson correlation of their ranks, ties
/// averaged); `None` for fewer than two pairs or where either has all values tied.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

/// `1st`, `2nd`, `3rd`, `4th`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Table 1: per column with ONO in it, ONO's rank among the measured models against its rank
/// among the same models in the paper, and the rank correlation of the two orders.
fn table1_ranks(s: &Scale) -> Vec<Finding> {
    let r = s.r;
    let cells: Vec<&Cell> = r
        .plan
        .cells
        .iter()
        .filter(|c| c.table == 1 && c.source.experiment().is_some())
        .collect();
    let mut columns: Vec<&str> = Vec::new();
    for c in &cells {
        if !columns.contains(&c.column.as_str()) {
            columns.push(&c.column);
        }
    }
    let mut out = Vec::new();
    for column in columns {
        let in_column: Vec<&&Cell> = cells.iter().filter(|c| c.column == column).collect();
        let Some(ono) = in_column.iter().find(|c| c.model == "ono") else {
            continue;
        };
        let mut f = Finding::new(
            Claim::Table1Rank {
                column: column.to_string(),
            },
            format!(
                "On {column}, ONO ranks among the measured models at least as well as among the same models in the paper (Table 1)"
            ),
        );
        // (row, ours, paper, experiment)
        let mut measured: Vec<(&str, f64, f64, &str)> = Vec::new();
        let mut absent = Vec::new();
        for c in &in_column {
            let id = c.source.experiment().unwrap_or_default();
            match (r.cell(c).shown, c.paper) {
                (Shown::Value(v), Some(p)) => measured.push((&c.row, v, p, id)),
                (Shown::Missing(why), _) => push_new(&mut absent, missing(id, &why)),
                _ => {}
            }
        }
        let ono_here = measured.iter().find(|m| m.0 == ono.row).copied();
        let Some((_, ono_v, ono_p, ono_id)) = ono_here.filter(|_| measured.len() >= MIN_RANKED)
        else {
            if ono_here.is_some() {
                f.summary = format!(
                    "{} models measured, of the {MIN_RANKED} a ranking needs",
                    measured.len()
                );
            }
            out.push(f.decide(false, false, absent, String::new()));
            continue;
        };
        let here = 1 + measured.iter().filter(|m| m.1 < ono_v).count();
        let there = 1 + measured.iter().filter(|m| m.2 < ono_p).count();
        let ours: Vec<f64> = measured.iter().map(|m| m.1).collect();
        let theirs: Vec<f64> = measured.iter().map(|m| m.2).collect();
        let rho = spearman(&theirs, &ours);
        let n = measured.len();
        f.number("ONO's rank here", here as f64);
        f.number("ONO's rank in the paper", there as f64);
        f.number("models measured", n as f64);
        f.number("ONO here", ono_v);
        f.number("ONO in the paper", ono_p);
        if let Some(rho) = rho {
            f.number("Spearman", rho);
        }
        let mut order: Vec<&(&str, f64, f64, &str)> = measured.iter().collect();
        order.sort_by(|a, b| a.1.total_cmp(&b.1));
        f.summary = format!(
            "ONO is {} of {n} here ({}), {} among the same models in the paper ({}); Spearman's ρ between the paper's order and ours {}. Here: {}",
            ordinal(here),
            err(ono_v),
            ordinal(there),
            err(ono_p),
            rho.map_or("undefined (all tied)".into(), |x| format!("{x:.2}")),
            order
                .iter()
                .map(|m| format!("{} {}", m.0, err(m.1)))
                .collect::<Vec<_>>()
                .join(" < ")
        );
        // The models that overtook ONO here.
        let mut ids = vec![ono_id];
        ids.extend(
            measured
                .iter()
                .filter(|m| m.1 < ono_v && m.2 >= ono_p)
                .map(|m| m.3),
        );
        let why = s.why(
            "The paper ranks the models at convergence; at reduced width, data and epochs the order follows how fast each model learns from few samples:",
            &ids,
        );
        out.push(f.decide(true, here > there, absent, why));
    }
    out
}

/// One model's run of a super-resolution experiment: the error at the training resolution and
/// at the finest.
struct Growth {
    trained: (String, f64),
    finest: (String, f64),
}

/// A Table 3 cell's data set: its experiment's id without the model (`superres/fno`).
fn data_set(c: &Cell) -> Option<&str> {
    c.source
        .experiment()
        .and_then(|id| id.rsplit_once('/'))
        .map(|(set, _)| set)
}

/// Table 3: per super-resolution data set (the experiments `<set>/fno` and `<set>/ono` that its
/// cells read), whether ONO's error grows less than FNO's from the training resolution to the
/// finest.
fn super_resolution(s: &Scale) -> Vec<Finding> {
    let r = s.r;
    let cells: Vec<&Cell> = r.plan.cells.iter().filter(|c| c.table == 3).collect();
    let mut sets: Vec<&str> = Vec::new();
    for c in &cells {
        if let Some(set) = data_set(c) {
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
    }
    let mut out = Vec::new();
    for set in sets {
        let row = |model: &str| -> Vec<&Cell> {
            cells
                .iter()
                .copied()
                .filter(|c| c.model == model && data_set(c) == Some(set))
                .collect()
        };
        let ono = row("ono");
        // FNO's rows on these data: the first is `<set>/fno`; another (its per-channel
        // normalizer) is judged on its own.
        let mut fno_rows: Vec<&str> = Vec::new();
        for c in row("fno") {
            if !fno_rows.contains(&c.row.as_str()) {
                fno_rows.push(&c.row);
            }
        }
        for fno_row in fno_rows {
            let fno: Vec<&Cell> = row("fno")
                .into_iter()
                .filter(|c| c.row == fno_row)
                .collect();
            if fno.is_empty() || ono.is_empty() {
                continue;
            }
            let default_row = fno[0].source.experiment() == Some(&format!("{set}/fno"));
            let mut f = Finding::new(
                Claim::SuperResolution {
                    experiments: set.to_string(),
                    fno_row: (!default_row).then(|| fno_row.to_string()),
                },
                if default_row {
                    format!(
                    "ONO's error grows less than FNO's from the training resolution to the finest (Table 3, `{set}/*`)"
                )
                } else {
                    format!(
                    "ONO's error grows less than that of {fno_row} from the training resolution to the finest (Table 3, `{set}/*`)"
                )
                },
            );
            let mut absent = Vec::new();
            let mut growth = |cells: &[&Cell]| -> Option<Growth> {
                let id = cells[0].source.experiment()?;
                let trained = match cells
                    .iter()
                    .find(|c| matches!(c.source, Source::TestError(_)))
                {
                    Some(c) => (c.column.clone(), r.cell(c)),
                    None => (
                        "trained".to_string(),
                        Reading::of(&r.seeds(id, |o| o.test_rel_l2)),
                    ),
                };
                // The finest: the smallest stride, else the table's last column.
                let others: Vec<&&Cell> = cells
                    .iter()
                    .filter(|c| !matches!(c.source, Source::TestError(_)))
                    .collect();
                let finest = others
                    .iter()
                    .filter_map(|c| match c.source {
                        Source::AtStride(_, k) => Some((k, c)),
                        _ => None,
                    })
                    .min_by_key(|(k, _)| *k)
                    .map(|(_, c)| c)
                    .or(others.last())?;
                let fin = r.cell(finest);
                match (trained.1.value(), fin.value()) {
                    (Some(a), Some(b)) => Some(Growth {
                        trained: (trained.0, a),
                        finest: (finest.column.clone(), b),
                    }),
                    _ => {
                        let why = [&trained.1.shown, &fin.shown]
                            .into_iter()
                            .find_map(|s| match s {
                                Shown::Missing(m) => Some(m.clone()),
                                _ => None,
                            })
                            .unwrap_or_else(|| "not measured".into());
                        absent.push(missing(id, &why));
                        None
                    }
                }
            };
            let (gf, go) = (growth(&fno), growth(&ono));
            let ids = [
                fno[0].source.experiment().unwrap_or_default(),
                ono[0].source.experiment().unwrap_or_default(),
            ];
            let Some((gf, go)) = gf.zip(go) else {
                out.push(f.decide(false, false, absent, String::new()));
                continue;
            };
            let (df, dono) = (gf.finest.1 - gf.trained.1, go.finest.1 - go.trained.1);
            f.number("FNO trained", gf.trained.1);
            f.number("FNO finest", gf.finest.1);
            f.number("ONO trained", go.trained.1);
            f.number("ONO finest", go.finest.1);
            f.summary = format!(
                "from {} to {}, FNO's error goes {} → {} ({df:+.4}), ONO's {} → {} ({dono:+.4})",
                gf.trained.0,
                gf.finest.0,
                err(gf.trained.1),
                err(gf.finest.1),
                err(go.trained.1),
                err(go.finest.1),
            );
            let why = s.why(
            "The paper's models are trained to convergence at the training resolution; here both are trained briefly, and an undertrained model's error at the finest grid reflects more than its resolution invariance:",
            &ids,
        );
            out.push(f.decide(true, dono >= df, Vec::new(), why));
        }
    }
    out
}

/// A "lower than" claim of a table: in every column of `table` that has both rows (and whose
/// name starts with `columns`), row `row`'s value is below row `than`'s, or at most `bar` × it.
pub struct BelowSpec<'a> {
    pub table: usize,
    pub row: &'a str,
    pub than: &'a str,
    /// At most this fraction of `than`'s value (`None`: strictly below it).
    pub bar: Option<f64>,
    /// The columns compared: those whose name starts with this.
    pub columns: &'static str,
    pub statement: String,
    pub reason: &'static str,
}

/// A claim that the errors of some cells of a table differ by at most a factor: those whose
/// row starts with `rows` and column with `columns`.
pub struct SpreadSpec<'a> {
    pub table: usize,
    pub rows: &'a str,
    pub columns: &'a str,
    /// The largest over the smallest, at most.
    pub bar: f64,
    pub statement: String,
    pub reason: &'static str,
}

/// A [`SpreadSpec`] judged where two or more of its cells are measured (`None` where the plan
/// has fewer than two such cells).
pub fn spread_claim(r: &Readings, s: &SpreadSpec) -> Option<Finding> {
    let cells: Vec<&Cell> = r
        .plan
        .cells
        .iter()
        .filter(|c| c.table == s.table && c.row.starts_with(s.rows))
        .filter(|c| c.column.starts_with(s.columns))
        .filter(|c| c.source.experiment().is_some())
        .collect();
    if cells.len() < 2 {
        return None;
    }
    let claim = Claim::Invariant {
        table: s.table,
        row: s.rows.to_string(),
        columns: s.columns.to_string(),
        bar: s.bar,
    };
    let mut f = Finding::new(claim, s.statement.clone());
    // A cell is named by what varies among them: its column for one row, else its row.
    let label = |c: &Cell| match c.row == s.rows {
        true => c.column.clone(),
        false => c.row.clone(),
    };
    let (mut measured, mut absent) = (Vec::new(), Vec::new());
    for c in &cells {
        let reading = r.cell(c);
        match reading.value() {
            Some(v) => {
                f.number(label(c), v);
                measured.push((label(c), v));
            }
            None => {
                if let (Shown::Missing(why), Some(id)) = (&reading.shown, c.source.experiment()) {
                    absent.push(missing(id, why));
                }
            }
        }
    }
    if measured.len() < 2 {
        return Some(f.decide(false, false, absent, String::new()));
    }
    let lo = measured.iter().map(|m| m.1).fold(f64::INFINITY, f64::min);
    let hi = measured.iter().map(|m| m.1).fold(0.0, f64::max);
    let factor = hi / lo;
    f.summary = format!(
        "{}: {factor:.2}× from the smallest to the largest",
        measured
            .iter()
            .map(|(l, v)| format!("{l} {}", err(*v)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let why = s.reason.trim_end_matches(':').to_string() + ".";
    Some(f.decide(true, factor > s.bar, absent, why))
}

/// Tables 4–7's claims.
fn below_claims() -> Vec<BelowSpec<'static>> {
    let block = |b: NnBlock| paper::TABLE5.iter().find(|r| r.1 == b).map_or("?", |r| r.0);
    let norm = |o: Orthogonalization| paper::TABLE6.iter().find(|r| r.1 == o).map_or("?", |r| r.0);
    let depth = |l: usize| paper::TABLE7.iter().find(|r| r.1 == l).map_or("?", |r| r.0);
    let ablation = "The paper's ablations compare models trained to convergence; at this width, data and number of epochs the variants can differ by less than the spread between seeds:";
    let (ono, fno) = (model_label("ono"), model_label("fno"));
    vec![
        BelowSpec {
            table: 4,
            row: ono,
            than: fno,
            statement: "ONO's error is below FNO's on the seen and on the unseen steps of NS2d (Table 4)".into(),
            reason: "Both models are trained on far fewer trajectories for far fewer epochs than the paper's, and an undertrained rollout's error compounds over the steps:",
            bar: None,
            columns: "",
        },
        BelowSpec {
            table: 5,
            row: block(NnBlock::Nystrom),
            than: block(NnBlock::LinearTransformer),
            statement: "ONO with the Nyström block is below ONO with the linear transformer block (Table 5)".into(),
            reason: ablation,
            bar: None,
            columns: "",
        },
        BelowSpec {
            table: 5,
            row: block(NnBlock::Nystrom),
            than: block(NnBlock::Galerkin),
            statement: "ONO with the Nyström block is below ONO with the Galerkin block (Table 5)".into(),
            reason: ablation,
            bar: None,
            columns: "",
        },
        BelowSpec {
            table: 6,
            row: norm(Orthogonalization::Orthonormal),
            than: norm(Orthogonalization::BatchNorm),
            statement: "Orthonormalizing ψ is below normalizing it with BN (Table 6)".into(),
            reason: ablation,
            bar: None,
            columns: "",
        },
        BelowSpec {
            table: 6,
            row: norm(Orthogonalization::Orthonormal),
            than: norm(Orthogonalization::LayerNorm),
            statement: "Orthonormalizing ψ is below normalizing it with LN (Table 6)".into(),
            reason: ablation,
            bar: None,
            columns: "",
        },
        BelowSpec {
            table: 7,
            row: depth(30),
            than: depth(8),
            statement: format!("{} is below {} (Table 7)", depth(30), depth(8)),
            reason: "A deeper model needs more steps to train than a shallow one; here it is also narrower than the paper's and trained for far fewer epochs:",
            bar: None,
            columns: "",
        },
    ]
}

/// A [`BelowSpec`] claim judged on a run (`paper`: the paper profile's plan, for the "why").
pub fn below_claim(r: &Readings, paper: Option<&Plan>, b: &BelowSpec) -> Option<Finding> {
    below(&Scale { r, paper }, b)
}

/// A "lower error than" claim over the columns of its table that have both rows.
fn below(s: &Scale, b: &BelowSpec) -> Option<Finding> {
    let r = s.r;
    let cell = |row: &str, column: &str| {
        r.plan
            .cells
            .iter()
            .find(|c| c.table == b.table && c.row == row && c.column == column)
    };
    // A pair with a cell left to the paper profile is not a claim this profile can test: it
    // is only named.
    let all: Vec<(&Cell, &Cell)> = r
        .plan
        .cells
        .iter()
        .filter(|c| c.table == b.table && c.row == b.row && c.column.starts_with(b.columns))
        .filter_map(|c| Some((c, cell(b.than, &c.column)?)))
        .collect();
    let pairs: Vec<(&Cell, &Cell)> = all
        .iter()
        .copied()
        .filter(|(a, t)| a.source.experiment().is_some() && t.source.experiment().is_some())
        .collect();
    let paper_only: Vec<&str> = all
        .iter()
        .filter(|(a, t)| {
            [a, t]
                .iter()
                .any(|c| matches!(c.source, Source::PaperOnly(_)))
        })
        .map(|(a, _)| a.column.as_str())
        .collect();
    if pairs.is_empty() && paper_only.is_empty() {
        return None;
    }
    let mut f = Finding::new(
        Claim::Below {
            table: b.table,
            row: b.row.to_string(),
            than: b.than.to_string(),
            bar: b.bar,
        },
        b.statement.clone(),
    );
    let (mut parts, mut absent, mut failed_ids) = (Vec::new(), Vec::new(), Vec::new());
    let mut measured = 0;
    for (a, t) in pairs {
        let (ra, rt) = (r.cell(a), r.cell(t));
        match (ra.value(), rt.value()) {
            (Some(x), Some(y)) => {
                measured += 1;
                f.number(format!("{} {}", b.row, a.column), x);
                f.number(format!("{} {}", b.than, a.column), y);
                let (holds, shown) = match b.bar {
                    None => {
                        let holds = x < y;
                        (holds, if holds { "<" } else { "≥" }.to_string())
                    }
                    Some(bar) => (x <= bar * y, format!("= {:.2} ×", x / y)),
                };
                parts.push(format!(
                    "{}: {} {shown} {}",
                    a.column,
                    ra.format(&a.source),
                    rt.format(&t.source)
                ));
                if !holds {
                    failed_ids.extend(a.source.experiment());
                    failed_ids.extend(t.source.experiment());
                }
            }
            _ => {
                for (c, rd) in [(a, &ra), (t, &rt)] {
                    if let (Shown::Missing(why), Some(id)) = (&rd.shown, c.source.experiment()) {
                        push_new(&mut absent, missing(id, why));
                    }
                }
            }
        }
    }
    if !paper_only.is_empty() {
        parts.push(format!(
            "{}: left to the paper profile",
            paper_only.join(", ")
        ));
    }
    if !parts.is_empty() {
        f.summary = format!("{} against {}: {}", b.row, b.than, parts.join("; "));
    }
    let why = s.why(b.reason, &failed_ids);
    Some(f.decide(measured > 0, !failed_ids.is_empty(), absent, why))
}

/// The report's sections "What holds at this scale" and "What does not, and why".
pub fn markdown(findings: &[Finding]) -> String {
    let mut md = String::from("## What holds at this scale\n\n");
    let holds: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.verdict == Verdict::Holds)
        .collect();
    if holds.is_empty() {
        md.push_str("None of the paper's findings measured in this run holds.\n");
    }
    let partly = |f: &Finding| {
        if f.unmeasured.is_empty() {
            String::new()
        } else {
            format!(" Not measured: {}.", missing_words(&f.unmeasured))
        }
    };
    for f in holds {
        let _ = writeln!(md, "- **{}**: {}.{}", f.statement, f.summary, partly(f));
    }
    md.push_str("\n## What does not, and why\n\n");
    let fails: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.verdict == Verdict::DoesNotHold)
        .collect();
    if fails.is_empty() {
        md.push_str("Every finding measured in this run holds.\n");
    }
    for f in fails {
        let _ = writeln!(
            md,
            "- **{}**: {}.{} *Why it may not hold at this scale:* {}",
            f.statement,
            f.summary,
            partly(f),
            f.why.as_deref().unwrap_or("")
        );
    }
    let unmeasured: Vec<(&Finding, &Vec<Missing>)> = findings
        .iter()
        .filter_map(|f| match &f.verdict {
            Verdict::NotMeasured(m) => Some((f, m)),
            _ => None,
        })
        .collect();
    if !unmeasured.is_empty() {
        md.push_str("\nNot measured in this run:\n\n");
        for (f, m) in unmeasured {
            let why = match (f.summary.is_empty(), m.is_empty()) {
                (false, true) => f.summary.clone(),
                (false, false) => format!("{}; {}", f.summary, missing_words(m)),
                (true, _) => missing_words(m),
            };
            let _ = writeln!(md, "- {}: {why}", f.statement);
        }
    }
    md
}

#[cfg(test)]
mod tests;
