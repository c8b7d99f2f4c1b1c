//! Checks the ONO port against reference fixtures laid out as `fixtures/ono` (see its README):
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

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::ono::{NnBlock, OnoConfig};
use crate::reference::{import_reference, reference_name};
use crate::{Error, Result};
use ono_nn::loss::{relative_l2, Reduction};
use ono_nn::orthogonal::Orthogonalization;
use ono_nn::weights::{read_safetensors, NamedTensors};

/// Relative tolerances of one precision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Outputs, loss and buffers.
    pub outputs: f64,
    /// Gradients (normwise against the largest gradient of the case).
    pub grads: f64,
}

/// The float64 tolerances of the fixtures' README: 1e-9 on outputs, 1e-8 on gradients.
pub const F64_TOLERANCES: Tolerances = Tolerances {
    outputs: 1e-9,
    grads: 1e-8,
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
    pub config: OnoConfig,
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

/// Maps the reference constructor arguments (`ONO2(**config)`) onto [`OnoConfig`].
pub fn config_from_reference(config: &Value) -> Result<OnoConfig> {
    let bad = |m: String| Error::Config(format!("reference config: {m}"));
    let int = |key: &str| -> Result<i64> {
        config[key]
            .as_i64()
            .ok_or_else(|| bad(format!("{key} missing or not an integer")))
    };
    let nn_block = match &config["attn_type"] {
        Value::Null => NnBlock::LinearTransformer,
        Value::String(s) if s == "nystrom" => NnBlock::Nystrom,
        Value::String(s) if s == "galerkin" => NnBlock::Galerkin,
        other => return Err(bad(format!("attn_type {other} is not supported"))),
    };
    let orthogonalization = match int("orth")? {
        1 => Orthogonalization::Orthonormal,
        0 => Orthogonalization::BatchNorm,
        o => return Err(bad(format!("orth {o}"))),
    };
    for key in ["dropout", "attn_dropout"] {
        if config[key].as_f64().unwrap_or(0.0) != 0.0 {
            return Err(bad(format!("{key} must be 0 (dropout is not ported)")));
        }
    }
    if config["act"].as_str().unwrap_or("gelu") != "gelu" {
        return Err(bad(format!("act {} (only gelu)", config["act"])));
    }
    Ok(OnoConfig {
        space_dim: int("space_dim")?,
        fun_dim: int("fun_dim")?,
        out_dim: int("out_dim")?,
        n_layers: int("n_layers")? as usize,
        n_hidden: int("n_hidden")?,
        n_head: int("n_head")?,
        psi_dim: int("psi_dim")?,
        mlp_ratio: int("mlp_ratio")?,
        nn_block,
        orthogonalization,
        momentum: config["momentum"].as_f64().unwrap_or(0.9),
        time_input: config["Time_Input"].as_bool().unwrap_or(false),
        ..OnoConfig::default()
    })
}

impl Fixture {
    /// Reads `CASE.safetensors` and `CASE.json`.
    pub fn load(safetensors: &Path, json: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(json).map_err(|e| fixture_err(json, e.to_string()))?;
        let json_value: Value =
            serde_json::from_str(&text).map_err(|e| fixture_err(json, e.to_string()))?;
        let config = config_from_reference(&json_value["config"])?;
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

    /// The float32 tolerances the case's JSON suggests.
    pub fn f32_tolerances(&self) -> Result<Tolerances> {
        let t = &self.json["suggested_tolerances"]["float32_port_vs_float32_reference"];
        match (t["outputs_and_loss"].as_f64(), t["grads"].as_f64()) {
            (Some(outputs), Some(grads)) => Ok(Tolerances { outputs, grads }),
            _ => Err(fixture_err(&self.path, "no suggested float32 tolerances")),
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
pub fn check(fixture: &Fixture, kind: Kind, device: Device, tol: Tolerances) -> Result<Report> {
    let f64_mode = match kind {
        Kind::Float => false,
        Kind::Double => true,
        other => return Err(Error::Config(format!("reference check in {other:?}"))),
    };
    let pre = if f64_mode { "f64." } else { "" };
    let mut vs = VarStore::new(device);
    let model = fixture.config.init(&vs.root())?;
    if f64_mode {
        vs.double();
    }
    import_reference(&vs, &fixture.tensors, "param.", &fixture.path)?;

    let input = |name: &str| -> Result<Tensor> {
        Ok(fixture
            .get(&format!("input.{name}"))?
            .f_to_kind(kind)?
            .f_to_device(device)?)
    };
    let (pos, fx, y) = (input("pos")?, input("fx")?, input("y")?);
    let t = if fixture.config.time_input {
        Some(input("T")?)
    } else {
        None
    };
    let optional = |name: &str| -> Result<Tensor> {
        if fixture.tensors.contains_key(&format!("input.{name}")) {
            input(name)
        } else {
            Ok(fx.shallow_clone())
        }
    };
    let (fx1, fx2) = (optional("fx_pass1")?, optional("fx_pass2")?);

    let vars = vs.variables();
    let mut buffers: Vec<(&String, &Tensor)> = vars
        .iter()
        .filter(|(n, v)| !v.requires_grad() && reference_name(n).is_some())
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
        let _ = model.forward(&pos, &fx1, t.as_ref(), true)?;
        let _ = model.forward(&pos, &fx2, t.as_ref(), true)?;
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
    let eval = tch::no_grad(|| model.forward(&pos, &fx, t.as_ref(), false))?;
    push(
        "output.eval".into(),
        normwise(&eval, fixture.get(&format!("{pre}output.eval"))?, None)?,
        tol.outputs,
    );
    let train = model.forward(&pos, &fx, t.as_ref(), true)?;
    push(
        "output.train".into(),
        normwise(&train, fixture.get(&format!("{pre}output.train"))?, None)?,
        tol.outputs,
    );
    let loss = relative_l2(&train, &y, Reduction::Sum)?;
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
        push(
            format!("grad.{name}"),
            normwise(
                &grad,
                fixture.get(&format!("{pre}grad.{name}"))?,
                Some(scale),
            )?,
            tol.grads,
        );
    }
    Ok(Report {
        case: fixture.name.clone(),
        kind,
        checks,
    })
}
