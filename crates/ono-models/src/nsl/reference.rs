//! The fixture cases of Neural-Solver-Library models (`fixtures/geofno` `nsl_fno_*`,
//! `fixtures/ffno`, `fixtures/ufno`, and the LSM and Transolver families): the `args` namespace
//! the model is built from, the constructor's `s1`, `s2`, the loader's grid, and the forward
//! signature `Model.forward(x, fx[, T])`. One reader for every NSL port.

use ono_kernels::host;
use serde_json::Value;
use tch::{Kind, Tensor};

use crate::nsl::settings::{Geotype, NslSettings};
use crate::operator::{ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::grid::index_grid;
use ono_nn::weights::NamedTensors;

/// Whether the fixture's model class is `class` (`models.F_FNO.Model`, `models.U_FNO.Model`),
/// whatever the geotype suffix.
pub(crate) fn claims(json: &Value, class: &str) -> bool {
    json["model_class"]
        .as_str()
        .is_some_and(|c| c.starts_with(class))
}

/// The `args` namespace of a fixture (`constructor_kwargs."args (…)"`) and the constructor's
/// `s1`, `s2`.
pub(crate) struct NslArgs<'a> {
    args: &'a Value,
    kwargs: &'a Value,
}

impl<'a> NslArgs<'a> {
    pub(crate) fn of(json: &'a Value) -> Result<Self> {
        let kwargs = &json["constructor_kwargs"];
        let args = kwargs
            .as_object()
            .and_then(|kw| kw.iter().find(|(k, _)| k.starts_with("args")))
            .map(|(_, v)| v)
            .ok_or_else(|| Error::Config("constructor_kwargs has no args".into()))?;
        Ok(Self { args, kwargs })
    }

    pub(crate) fn int(&self, key: &str) -> Result<i64> {
        self.args[key]
            .as_i64()
            .ok_or_else(|| Error::Config(format!("the NSL args lack {key}")))
    }

    /// NSL's flags are ints (`--unified_pos 1`) or bools (`time_input`).
    pub(crate) fn flag(&self, key: &str) -> bool {
        let v = &self.args[key];
        v.as_bool()
            .or_else(|| v.as_i64().map(|i| i != 0))
            .unwrap_or(false)
    }

    pub(crate) fn str(&self, key: &str) -> Option<&'a str> {
        self.args[key].as_str()
    }

    pub(crate) fn geotype(&self) -> Result<Geotype> {
        match self.str("geotype") {
            Some("unstructured") => Ok(Geotype::Unstructured),
            Some(g) if g.starts_with("structured") => Ok(Geotype::Structured),
            g => Err(Error::Config(format!("NSL geotype {g:?}"))),
        }
    }

    /// `len(shapelist)` on a structured grid.
    pub(crate) fn grid_dims(&self) -> usize {
        self.args["shapelist"].as_array().map(Vec::len).unwrap_or(2)
    }

    /// The NSL settings the args give (`ref` defaults to NSL's 8 where a case omits it).
    pub(crate) fn settings(&self) -> Result<NslSettings> {
        let geotype = self.geotype()?;
        Ok(NslSettings {
            space_dim: self.int("space_dim")?,
            fun_dim: self.int("fun_dim")?,
            out_dim: self.int("out_dim")?,
            time_input: self.flag("time_input"),
            geotype,
            grid_dims: if geotype == Geotype::Structured {
                self.grid_dims()
            } else {
                2
            },
            latent: self.latent(),
            n_hidden: self.int("n_hidden")?,
            modes: self.int("modes")?,
            unified_pos: self.flag("unified_pos"),
            reference: self.int("ref").unwrap_or(8),
        })
    }

    /// The constructor's (s1, s2), NSL's defaults 96 × 96.
    pub(crate) fn latent(&self) -> [i64; 2] {
        [
            self.kwargs["s1"].as_i64().unwrap_or(96),
            self.kwargs["s2"].as_i64().unwrap_or(96),
        ]
    }
}

/// The grid shape [s1, s2] of NSL's 2-D loader positions: `meshgrid(linspace(0, 1, s2),
/// linspace(0, 1, s1))` flattened row-major, so x[b, i·s2 + j] = (l_{s2}[j], l_{s1}[i]). The
/// fixtures store these positions but not `args.shapelist` as a tensor; the shape is read off
/// them and the whole grid is checked, so any other layout is refused rather than misread.
///
/// # Shapes
/// - `x`: (B, N, 2)
pub(crate) fn loader_grid(x: &Tensor) -> Result<Vec<i64>> {
    let size = x.size();
    let bad = || Error::Shape {
        op: "NSL reference forward",
        expected: "x (B, N, 2) on the loader's row-major grid \
                   meshgrid(linspace(0,1,s2), linspace(0,1,s1))"
            .into(),
        got: size.clone(),
    };
    let &[_, n, 2] = &size[..] else {
        return Err(bad());
    };
    let first = host::to_vec_f64(&x.f_select(0, 0)?.f_select(1, 1)?)?;
    let s2 = first.iter().take_while(|&&v| v == first[0]).count() as i64;
    if s2 == 0 || n % s2 != 0 {
        return Err(bad());
    }
    let shape = vec![n / s2, s2];
    // index_grid's columns are (l_{s1}[i], l_{s2}[j]); the loader's are swapped.
    let want = index_grid(&shape, Kind::Double, x.device())?.f_flip([1])?;
    let err = host::read_f64(
        &x.f_to_kind(Kind::Double)?
            .f_sub(&want.f_unsqueeze(0)?)?
            .f_abs()?
            .f_max()?,
    )?;
    if err > 1e-6 {
        return Err(bad());
    }
    Ok(shape)
}

/// `Model.forward(x, fx[, T])`: x (B, N, space_dim), fx (B, N, fun_dim) or absent. On a
/// structured 2-D grid (`grid_dims` Some(2)) the grid shape comes from x ([`loader_grid`]); a
/// 1-D grid is the N points; point clouds (`None`) need none.
pub(crate) fn forward(
    model: &dyn NeuralOperator,
    grid_dims: Option<usize>,
    inputs: &NamedTensors,
    train: bool,
) -> Result<Tensor> {
    let x = inputs
        .get("x")
        .ok_or_else(|| Error::Config("the fixture has no input.x".into()))?;
    let grid = match grid_dims {
        Some(2) => Some(loader_grid(x)?),
        _ => None,
    };
    let input = match inputs.get("fx") {
        Some(fx) => ModelInput::new(x, fx),
        None => ModelInput::positions(x),
    };
    let time: Option<&Tensor> = inputs.get("T").or_else(|| inputs.get("time"));
    model.forward(&input.with_time(time).with_grid(grid.as_deref()), train)
}
