//! `elasticity/elas_geofno.py` as the fixture case describes it (`fixtures/geofno`
//! `elas_geofno_small`): `model = FNO2d(...)`, `model_iphi = IPHI(...)`, and
//! `model(x, code=code, iphi=model_iphi)`.

use serde_json::Value;
use tch::Tensor;

use super::{GeoFno, GeoFnoConfig};
use crate::arch::FromReference;
use crate::operator::{ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::iphi::CODE_DIM;
use ono_nn::weights::NamedTensors;

/// `model(x, code=code, iphi=model_iphi)`: x (B, N, 2) the mesh, code (B, 42) repeated over the
/// points as fx.
pub(super) fn forward(model: &GeoFno, inputs: &NamedTensors, train: bool) -> Result<Tensor> {
    let x = inputs
        .get("x")
        .ok_or_else(|| Error::Config("the fixture has no input.x".into()))?;
    let size = x.size();
    let fx = match inputs.get("code") {
        Some(code) => {
            let dim = |s: &[i64], i: usize| s.get(i).copied().unwrap_or(0);
            let n = [dim(&size, 0), dim(&size, 1), dim(&code.size(), 1)];
            Some(code.f_unsqueeze(1)?.f_expand(n, false)?)
        }
        None => None,
    };
    let input = match &fx {
        Some(fx) => ModelInput::new(x, fx),
        None => ModelInput::positions(x),
    };
    NeuralOperator::forward(model, &input, train)
}

impl FromReference for GeoFnoConfig {
    /// The elasticity script's pair of modules.
    fn claims_reference(json: &Value) -> bool {
        json["family"].as_str() == Some("geofno")
            && json["model_class"]
                .as_str()
                .is_some_and(|c| c.starts_with("FNO2d + IPHI"))
    }

    fn from_reference(json: &Value) -> Result<Self> {
        let kw = &json["constructor_kwargs"];
        let find = |prefix: &str| {
            kw.as_object()
                .and_then(|o| o.iter().find(|(k, _)| k.starts_with(prefix)))
                .map(|(_, v)| v)
                .ok_or_else(|| Error::Config(format!("constructor_kwargs has no `{prefix}`")))
        };
        let (fno, iphi) = (find("model = FNO2d")?, find("model_iphi = IPHI")?);
        let int = |v: &Value, k: &str| {
            v[k].as_i64()
                .ok_or_else(|| Error::Config(format!("constructor_kwargs lack {k}")))
        };
        if fno["is_mesh"].as_bool() != Some(true) || fno["in_channels"].as_i64() != Some(2) {
            return Err(Error::Config(
                "geofno: only the mesh-as-input form (is_mesh=True, in_channels=2) exists".into(),
            ));
        }
        let has_code = json["tensors"].get("input.code").is_some();
        Ok(GeoFnoConfig {
            space_dim: 2,
            fun_dim: if has_code { CODE_DIM } else { 0 },
            out_dim: int(fno, "out_channels")?,
            modes: [int(fno, "modes1")?, int(fno, "modes2")?],
            width: int(fno, "width")?,
            latent: [int(fno, "s1")?, int(fno, "s2")?],
            iphi_width: iphi["width"].as_i64().unwrap_or(32),
            proj_hidden: 128,
        })
    }
}
