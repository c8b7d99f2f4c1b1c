//! Checks a port against reference fixtures laid out as `fixtures/ono` (see its README), for any
//! architecture the fixture's JSON names (`family`, ONO when absent):
//! `CASE.safetensors` with `param.*`, `input.*`, `output.*`, `loss.train`, `grad.*`, `after_pass3.*`
//! and their `f64.*` copies, and `CASE.json` with the constructor arguments and tolerances.
//!
//! The procedure mirrors the one that made the fixtures:
//! 1. load `param.*`, forget the statistics, and run two training passes without gradients; the
//!    EMA covariances (or BatchNorm statistics) must equal the fixture's buffers;
//! 2. load the fixture's buffers, then compare the eval output, the training output of pass 3, its
//!    loss (Σ_b relative L2), every gradient, and the buffers after pass 3.
//!
//! Errors are normwise: max|port − ref| / max|ref| per tensor; for gradients the denominator is the
//! largest |grad| over all parameters of the case (as the fixtures' tolerances are defined).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tch::{Device, Kind, Tensor};

use crate::model::Model;
use crate::operator::ModelInput;
use crate::registry::{ModelConfig, ARCHS};
use crate::{Error, Result};
use ono_nn::loss::{relative_l2, Reduction};
use ono_nn::weights::{read_safetensors, NamedTensors};

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
}

/// The float64 tolerances of the fixtures' README: 1e-9 on outputs, 1e-8 on gradients.
pub const F64_TOLERANCES: Tolerances = Tolerances {
    outputs: 1e-9,
    grads: 1e-8,
    grad_overrides: BTreeMap::new(),
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

/// One fixture case: its configuration, sidecar JSON and tensors.
pub struct Fixture {
    pub name: String,
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
        let arch = json_value["family"].as_str().unwrap_or("ono");
        if !ARCHS.contains(&arch) {
            return Err(Error::Config(format!(
                "{}: the fixture's family `{arch}` (model class {}) has no architecture in this \
                 build (known: {})",
                json.display(),
                json_value["model_class"],
                ARCHS.join(", ")
            )));
        }
        let config = ModelConfig::from_reference(arch, &json_value)?;
        let (tensors, _) = read_safetensors(safetensors)?;
        let name = json_value["case"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| safetensors.display().to_string());
        Ok(Self {
            name,
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
                grad_overrides: BTreeMap::new(),
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
        Ok(Tolerances {
            outputs,
            grads,
            grad_overrides,
        })
    }

    /// The float64 tolerances: the JSON's own where it gives them, else [`F64_TOLERANCES`].
    pub fn f64_tolerances(&self) -> Tolerances {
        let t = &self.json["suggested_tolerances"]["float64_port_vs_f64_reference"];
        match (t["outputs_and_loss"].as_f64(), t["grads"].as_f64()) {
            (Some(outputs), Some(grads)) => Tolerances {
                outputs,
                grads,
                grad_overrides: BTreeMap::new(),
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
    let diff = a.f_sub(&b)?.f_abs()?.f_max()?.f_double_value(&[])?;
    let den = match denominator {
        Some(d) => d,
        None => b.f_abs()?.f_max()?.f_double_value(&[])?,
    };
    Ok(if den > 0.0 { diff / den } else { diff })
}

/// Runs the procedure of the module documentation in `kind` (Float against the float32
/// references, Double against `f64.*`) on `device`.
pub fn check(fixture: &Fixture, kind: Kind, device: Device, tol: &Tolerances) -> Result<Report> {
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
        scale = scale.max(
            g.f_abs()?
                .f_max()?
                .f_to_kind(Kind::Double)?
                .f_double_value(&[])?,
        );
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
