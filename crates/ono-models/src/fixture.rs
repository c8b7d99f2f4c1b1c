//! Checks a port against reference fixtures, for any architecture that claims the fixture's JSON
//! ([`ModelConfig::reference_arch`]: ONO when it names no `family`). Two layouts:
//!
//! **ONO** (`fixtures/ono`, JSON with `suggested_tolerances`): `CASE.safetensors` with
//! `param.*`, `input.*`, `output.*`, `loss.train`, `grad.*`, `after_pass3.*` and their `f64.*`
//! copies. The procedure mirrors the one that made the fixtures:
//! 1. load `param.*`, forget the statistics, and run two training passes without gradients; the
//!    EMA covariances (or BatchNorm statistics) must equal the fixture's buffers;
//! 2. load the fixture's buffers, then compare the eval output, the training output of pass 3, its
//!    loss (Σ_b relative L2), every gradient, and the buffers after pass 3.
//!
//! Gradient errors are max|port − ref| over the largest |grad| of all parameters of the case.
//!
//! **state_dict** (`fixtures/fno`, `geofno`, `ffno`, `ufno` and the later families): `param.<the
//! reference state_dict name>` (complex weights as `<name>.view_as_real`, which is exactly our
//! (…, 2) layout), `input.*` for the reference's forward signature
//! ([`NeuralOperator::reference_forward`](crate::NeuralOperator::reference_forward)), `input.y`,
//! `output.eval`, `output.eval_f64`, optionally `output.train`, `loss.train` and `grad.*`:
//! 1. load `param.*`, reset the running statistics, one training forward: compare
//!    `output.train` (if stored), `loss.train` (Σ_b relative L2 against `input.y`; with
//!    `input.num_nodes`, the ragged layout of GNOT, sample b is the next num_nodes_b rows), the
//!    statistics it updated against the stored buffers, and every gradient (a parameter the
//!    forward does not use must get none or zeros);
//! 2. the eval forward with those statistics: compare `output.eval`.
//!
//! In float64 only `output.eval_f64` exists to compare with. Every error is per tensor,
//! max|port − ref| / max|ref|; the bounds are the JSON's `tolerances` (`output_rel`,
//! `output_train_rel` for the training output and the updated buffers, `grad_rel`,
//! `grad_rel_overrides` per gradient; `grad_not_comparable` gradients are reported but not
//! bounded).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use ono_kernels::host;
use serde_json::Value;
use tch::{Device, Kind, Tensor};

use crate::model::Model;
use crate::operator::ModelInput;
use crate::registry::{ModelConfig, ARCHS};
use crate::{Error, Result};
use ono_nn::loss::{relative_l2, Reduction};
use ono_nn::weights::{read_safetensors, real_layout, NamedTensors};

/// Relative tolerances of one precision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tolerances {
    /// Outputs, loss and buffers.
    pub outputs: f64,
    /// Gradients (normwise against the largest gradient of the case).
    pub grads: f64,
    /// Per-parameter gradient tolerances by reference name (`tolerances.grad_rel_overrides` of a
    /// case), replacing `grads` for those parameters.
    pub grad_overrides: BTreeMap<String, f64>,
    /// The training output and the running statistics it updates (`output_train_rel`), where
    /// looser than `outputs`.
    pub train_outputs: Option<f64>,
    /// Gradients float32 cannot resolve (`grad_not_comparable`): reported, not bounded.
    pub not_comparable: BTreeSet<String>,
}

/// The float64 tolerances of the fixtures' README: 1e-9 on outputs, 1e-8 on gradients.
pub const F64_TOLERANCES: Tolerances = Tolerances {
    outputs: 1e-9,
    grads: 1e-8,
    grad_overrides: BTreeMap::new(),
    train_outputs: None,
    not_comparable: BTreeSet::new(),
};

/// One compared quantity.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub error: f64,
    pub tolerance: f64,
}

impl Check {
    /// NaN errors fail.
    pub fn passed(&self) -> bool {
        self.error <= self.tolerance
    }
}

/// Every check of one case at one precision.
#[derive(Debug, Clone)]
pub struct Report {
    pub case: String,
    pub kind: Kind,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(Check::passed)
    }

    /// The check with the largest error relative to its tolerance.
    pub fn worst(&self) -> Option<&Check> {
        self.checks.iter().max_by(|a, b| {
            let ra = a.error / a.tolerance.max(f64::MIN_POSITIVE);
            let rb = b.error / b.tolerance.max(f64::MIN_POSITIVE);
            ra.partial_cmp(&rb).unwrap_or(std::cmp::Ordering::Greater)
        })
    }

    /// The largest error among checks whose name starts with `prefix`.
    pub fn max_error(&self, prefix: &str) -> f64 {
        self.checks
            .iter()
            .filter(|c| c.name.starts_with(prefix))
            .map(|c| c.error)
            .fold(0.0, f64::max)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} ({:?}): {}",
            self.case,
            self.kind,
            if self.passed() { "PASS" } else { "FAIL" }
        )?;
        for c in &self.checks {
            writeln!(
                f,
                "  {:<4} {:<55} rel err {:.3e}  (tol {:.1e})",
                if c.passed() { "ok" } else { "FAIL" },
                c.name,
                c.error,
                c.tolerance
            )?;
        }
        Ok(())
    }
}

/// How a fixture's tensors are laid out (module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Ono,
    StateDict,
}

/// One fixture case: its configuration, sidecar JSON and tensors.
pub struct Fixture {
    pub name: String,
    pub layout: Layout,
    /// The architecture the case is of.
    pub config: ModelConfig,
    pub json: Value,
    pub tensors: NamedTensors,
    pub path: PathBuf,
}

fn fixture_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Nn(ono_nn::Error::Weights {
        path: path.display().to_string(),
        msg: msg.into(),
    })
}

impl Fixture {
    /// Reads `CASE.safetensors` and `CASE.json`. The architecture is the JSON's `family` (ONO
    /// when absent); a family this build has no architecture for is an [`Error::Config`].
    pub fn load(safetensors: &Path, json: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(json).map_err(|e| fixture_err(json, e.to_string()))?;
        let json_value: Value =
            serde_json::from_str(&text).map_err(|e| fixture_err(json, e.to_string()))?;
        let Some(arch) = ModelConfig::reference_arch(&json_value) else {
            return Err(Error::Config(format!(
                "{}: no architecture in this build takes the fixture's family {} (model class \
                 {}); known: {}",
                json.display(),
                json_value["family"],
                json_value["model_class"],
                ARCHS.join(", ")
            )));
        };
        let config = ModelConfig::from_reference(arch, &json_value)?;
        let layout = if json_value.get("suggested_tolerances").is_some() {
            Layout::Ono
        } else {
            Layout::StateDict
        };
        let (mut tensors, _) = read_safetensors(safetensors)?;
        if layout == Layout::StateDict {
            tensors = real_layout(tensors)?;
        }
        let name = json_value["case"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| safetensors.display().to_string());
        Ok(Self {
            name,
            layout,
            config,
            json: json_value,
            tensors,
            path: safetensors.to_path_buf(),
        })
    }

    /// The float32 tolerances of the case's JSON: `suggested_tolerances` (the ONO fixtures) or
    /// `tolerances` with `output_rel`, `grad_rel` and per-parameter `grad_rel_overrides`.
    pub fn f32_tolerances(&self) -> Result<Tolerances> {
        let t = &self.json["suggested_tolerances"]["float32_port_vs_float32_reference"];
        if let (Some(outputs), Some(grads)) = (t["outputs_and_loss"].as_f64(), t["grads"].as_f64())
        {
            return Ok(Tolerances {
                outputs,
                grads,
                ..Tolerances::default()
            });
        }
        let t = &self.json["tolerances"];
        let (Some(outputs), Some(grads)) = (t["output_rel"].as_f64(), t["grad_rel"].as_f64())
        else {
            return Err(fixture_err(&self.path, "no float32 tolerances in the JSON"));
        };
        let mut grad_overrides = BTreeMap::new();
        if let Some(map) = t["grad_rel_overrides"].as_object() {
            for (name, v) in map {
                let tol = v.as_f64().ok_or_else(|| {
                    fixture_err(
                        &self.path,
                        format!("tolerances.grad_rel_overrides.{name} is not a number"),
                    )
                })?;
                grad_overrides.insert(name.clone(), tol);
            }
        }
        let not_comparable = match &t["grad_not_comparable"] {
            Value::Null => BTreeSet::new(),
            v => v["names"]
                .as_array()
                .or_else(|| v.as_array())
                .ok_or_else(|| {
                    fixture_err(&self.path, "tolerances.grad_not_comparable lists no names")
                })?
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect::<Option<BTreeSet<_>>>()
                .ok_or_else(|| {
                    fixture_err(
                        &self.path,
                        "tolerances.grad_not_comparable: a name is not text",
                    )
                })?,
        };
        Ok(Tolerances {
            outputs,
            grads,
            grad_overrides,
            train_outputs: t["output_train_rel"].as_f64(),
            not_comparable,
        })
    }

    /// The float64 tolerances: the JSON's own where it gives them, else [`F64_TOLERANCES`].
    pub fn f64_tolerances(&self) -> Tolerances {
        let t = &self.json["suggested_tolerances"]["float64_port_vs_f64_reference"];
        match (t["outputs_and_loss"].as_f64(), t["grads"].as_f64()) {
            (Some(outputs), Some(grads)) => Tolerances {
                outputs,
                grads,
                ..Tolerances::default()
            },
            _ => F64_TOLERANCES,
        }
    }

    fn get(&self, key: &str) -> Result<&Tensor> {
        self.tensors
            .get(key)
            .ok_or_else(|| fixture_err(&self.path, format!("no tensor {key:?}")))
    }
}

/// max|a − b| / denominator (or max|b| when `denominator` is None), in f64.
fn normwise(a: &Tensor, b: &Tensor, denominator: Option<f64>) -> Result<f64> {
    if a.size() != b.size() {
        return Err(Error::Shape {
            op: "reference check",
            expected: format!("{:?}", b.size()),
            got: a.size(),
        });
    }
    let a = a.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?;
    let b = b.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?;
    let diff = host::read_f64(&a.f_sub(&b)?.f_abs()?.f_max()?)?;
    let den = match denominator {
        Some(d) => d,
        None => host::read_f64(&b.f_abs()?.f_max()?)?,
    };
    Ok(if den > 0.0 { diff / den } else { diff })
}

/// Σ_b relative L2 of a ragged case (GNOT's): `out` and `y` hold the samples' rows one after the
/// other, `counts` (B) rows each.
fn ragged_loss(out: &Tensor, y: &Tensor, counts: &Tensor) -> Result<Tensor> {
    let counts = host::to_vec_i64(counts)?;
    let rows = y.size().first().copied().unwrap_or(0);
    if counts.iter().any(|&n| n < 1) || counts.iter().sum::<i64>() != rows {
        return Err(Error::Shape {
            op: "reference check",
            expected: format!("targets with the Σ num_nodes {counts:?} rows"),
            got: y.size(),
        });
    }
    let out = out.f_reshape(y.size())?;
    let mut total: Option<Tensor> = None;
    for (o, t) in out
        .f_split_with_sizes(&counts, 0)?
        .iter()
        .zip(y.f_split_with_sizes(&counts, 0)?)
    {
        let l = relative_l2(&o.f_unsqueeze(0)?, &t.f_unsqueeze(0)?, Reduction::Sum, None)?;
        total = Some(match total {
            Some(acc) => acc.f_add(&l)?,
            None => l,
        });
    }
    total.ok_or_else(|| Error::Config("a ragged case without samples".into()))
}

/// Runs the procedure of the module documentation in `kind` (Float against the float32
/// references, Double against the float64 ones) on `device`.
pub fn check(fixture: &Fixture, kind: Kind, device: Device, tol: &Tolerances) -> Result<Report> {
    match fixture.layout {
        Layout::Ono => check_ono(fixture, kind, device, tol),
        Layout::StateDict => check_state_dict(fixture, kind, device, tol),
    }
}

fn check_state_dict(
    fixture: &Fixture,
    kind: Kind,
    device: Device,
    tol: &Tolerances,
) -> Result<Report> {
    if !matches!(kind, Kind::Float | Kind::Double) {
        return Err(Error::Config(format!("reference check in {kind:?}")));
    }
    let model = Model::new(&fixture.config, device, kind)?;
    model.import_reference(&fixture.tensors, "param.", &fixture.path)?;
    let op = model.operator();
    let mut inputs = NamedTensors::new();
    for (key, t) in fixture.tensors.range("input.".to_string()..) {
        let Some(name) = key.strip_prefix("input.") else {
            break;
        };
        if name != "y" {
            let t = if t.is_floating_point() {
                t.f_to_kind(kind)?
            } else {
                t.shallow_clone()
            };
            inputs.insert(name.to_string(), t.f_to_device(device)?);
        }
    }
    let mut checks = Vec::new();
    let mut push = |name: String, error: f64, tolerance: f64| {
        checks.push(Check {
            name,
            error,
            tolerance,
        })
    };
    let compare_output = |out: &Tensor, key: &str| -> Result<f64> {
        let reference = fixture.get(key)?;
        let out = if out.numel() == reference.numel() {
            out.f_reshape(reference.size())?
        } else {
            out.shallow_clone()
        };
        normwise(&out, reference, None)
    };

    if kind == Kind::Double {
        let eval = tch::no_grad(|| op.reference_forward(&inputs, false))?;
        push(
            "output.eval_f64".into(),
            compare_output(&eval, "output.eval_f64")?,
            tol.outputs,
        );
        return Ok(Report {
            case: fixture.name.clone(),
            kind,
            checks,
        });
    }

    // 1. One training pass from reset statistics.
    let train_tol = tol.train_outputs.unwrap_or(tol.outputs);
    model.reset_statistics()?;
    let train = op.reference_forward(&inputs, true)?;
    if fixture.tensors.contains_key("output.train") {
        push(
            "output.train".into(),
            compare_output(&train, "output.train")?,
            train_tol,
        );
    }
    let y = fixture
        .get("input.y")?
        .f_to_device(device)?
        .f_to_kind(kind)?;
    let loss = match fixture.tensors.get("input.num_nodes") {
        Some(counts) => ragged_loss(&train, &y, counts)?,
        None => {
            let b = y.size().first().copied().unwrap_or(1);
            relative_l2(
                &train.f_reshape([b, -1])?,
                &y.f_reshape([b, -1])?,
                Reduction::Sum,
                None,
            )?
        }
    };
    push(
        "loss.train".into(),
        normwise(&loss, fixture.get("loss.train")?, None)?,
        tol.outputs,
    );
    let vars = model.var_store().variables();
    let mut vars: Vec<(&String, &Tensor)> = vars
        .iter()
        .filter(|(n, _)| op.reference_name(n).is_some())
        .collect();
    vars.sort_by(|a, b| a.0.cmp(b.0));
    for (name, var) in vars.iter().filter(|(_, v)| !v.requires_grad()) {
        let reference = op.reference_name(name).unwrap_or(name);
        let exact = var.kind() == Kind::Int64;
        push(
            format!("buffer {reference}"),
            normwise(var, fixture.get(&format!("param.{reference}"))?, None)?,
            if exact { 0.0 } else { train_tol },
        );
    }
    loss.f_backward()?;
    for (name, var) in vars.iter().filter(|(_, v)| v.requires_grad()) {
        let reference = op.reference_name(name).unwrap_or(name);
        let grad = var.grad();
        let grad = if grad.defined() {
            grad
        } else {
            var.f_zeros_like()?
        };
        let tolerance = if tol.not_comparable.contains(reference) {
            f64::INFINITY
        } else {
            tol.grad_overrides
                .get(reference)
                .copied()
                .unwrap_or(tol.grads)
        };
        push(
            format!("grad.{reference}"),
            normwise(&grad, fixture.get(&format!("grad.{reference}"))?, None)?,
            tolerance,
        );
    }

    // 2. Evaluation with the statistics of that pass.
    let eval = tch::no_grad(|| op.reference_forward(&inputs, false))?;
    push(
        "output.eval".into(),
        compare_output(&eval, "output.eval")?,
        tol.outputs,
    );
    Ok(Report {
        case: fixture.name.clone(),
        kind,
        checks,
    })
}

fn check_ono(fixture: &Fixture, kind: Kind, device: Device, tol: &Tolerances) -> Result<Report> {
    let f64_mode = match kind {
        Kind::Float => false,
        Kind::Double => true,
        other => return Err(Error::Config(format!("reference check in {other:?}"))),
    };
    let pre = if f64_mode { "f64." } else { "" };
    let model = Model::new(&fixture.config, device, kind)?;
    model.import_reference(&fixture.tensors, "param.", &fixture.path)?;
    let op = model.operator();
    let vs = model.var_store();

    let input = |name: &str| -> Result<Tensor> {
        Ok(fixture
            .get(&format!("input.{name}"))?
            .f_to_kind(kind)?
            .f_to_device(device)?)
    };
    let has = |name: &str| fixture.tensors.contains_key(&format!("input.{name}"));
    let (pos, fx, y) = (input("pos")?, input("fx")?, input("y")?);
    let t = if has("T") { Some(input("T")?) } else { None };
    let optional = |name: &str| -> Result<Tensor> {
        if has(name) {
            input(name)
        } else {
            Ok(fx.shallow_clone())
        }
    };
    let (fx1, fx2) = (optional("fx_pass1")?, optional("fx_pass2")?);
    let forward = |fx: &Tensor, train: bool| -> Result<Tensor> {
        model.forward(&ModelInput::new(&pos, fx).with_time(t.as_ref()), train)
    };

    let vars = vs.variables();
    let mut buffers: Vec<(&String, &Tensor)> = vars
        .iter()
        .filter(|(n, v)| !v.requires_grad() && op.reference_name(n).is_some())
        .collect();
    buffers.sort_by(|a, b| a.0.cmp(b.0));
    let buffer_key = |name: &str| {
        if f64_mode {
            format!("f64.buffer.{name}")
        } else {
            format!("param.{name}")
        }
    };
    let mut checks = Vec::new();
    let mut push = |name: String, error: f64, tolerance: f64| {
        checks.push(Check {
            name,
            error,
            tolerance,
        })
    };

    // 1. The statistics of two training passes, from scratch.
    model.reset_statistics()?;
    tch::no_grad(|| -> Result<()> {
        let _ = forward(&fx1, true)?;
        let _ = forward(&fx2, true)?;
        Ok(())
    })?;
    for (name, var) in &buffers {
        let reference = fixture.get(&buffer_key(name))?;
        let exact = var.kind() == Kind::Int64;
        let tolerance = if exact { 0.0 } else { tol.outputs };
        push(
            format!("two passes: {name}"),
            normwise(var, reference, None)?,
            tolerance,
        );
    }

    // 2. From the fixture's buffers: eval, pass 3, loss, gradients, buffers after pass 3.
    tch::no_grad(|| -> Result<()> {
        for (name, var) in &buffers {
            var.shallow_clone()
                .f_copy_(fixture.get(&buffer_key(name))?)?;
        }
        Ok(())
    })?;
    let eval = tch::no_grad(|| forward(&fx, false))?;
    push(
        "output.eval".into(),
        normwise(&eval, fixture.get(&format!("{pre}output.eval"))?, None)?,
        tol.outputs,
    );
    let train = forward(&fx, true)?;
    push(
        "output.train".into(),
        normwise(&train, fixture.get(&format!("{pre}output.train"))?, None)?,
        tol.outputs,
    );
    let loss = relative_l2(&train, &y, Reduction::Sum, None)?;
    push(
        "loss.train".into(),
        normwise(&loss, fixture.get(&format!("{pre}loss.train"))?, None)?,
        tol.outputs,
    );
    for (name, var) in &buffers {
        let exact = var.kind() == Kind::Int64;
        push(
            format!("after pass 3: {name}"),
            normwise(var, fixture.get(&format!("{pre}after_pass3.{name}"))?, None)?,
            if exact { 0.0 } else { tol.outputs },
        );
    }
    loss.f_backward()?;
    let mut params: Vec<(&String, &Tensor)> =
        vars.iter().filter(|(_, v)| v.requires_grad()).collect();
    params.sort_by(|a, b| a.0.cmp(b.0));
    let mut scale = 0.0f64;
    for (name, _) in &params {
        let g = fixture.get(&format!("{pre}grad.{name}"))?;
        scale = scale.max(host::read_f64(&g.f_abs()?.f_max()?)?);
    }
    for (name, var) in &params {
        let grad = var.grad();
        if !grad.defined() {
            return Err(fixture_err(
                &fixture.path,
                format!("{name} received no gradient"),
            ));
        }
        let tolerance = op
            .reference_name(name)
            .and_then(|r| tol.grad_overrides.get(r))
            .copied()
            .unwrap_or(tol.grads);
        push(
            format!("grad.{name}"),
            normwise(
                &grad,
                fixture.get(&format!("{pre}grad.{name}"))?,
                Some(scale),
            )?,
            tolerance,
        );
    }
    Ok(Report {
        case: fixture.name.clone(),
        kind,
        checks,
    })
}
