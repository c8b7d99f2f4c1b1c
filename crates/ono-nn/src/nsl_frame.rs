//! The model frame the Neural-Solver-Library's grid models share (`models/FNO.py`, `F_FNO.py`,
//! `U_FNO.py`, `LSM.py` at thuml/Neural-Solver-Library `db942b7`): the way from the points to a
//! latent regular grid and back. A model is `frame.enter` → its own latent layers on the grid →
//! `frame.leave` → its own heads (`fc1`, GELU, `fc2` in all four).
//!
//! ```text
//! enter:  [unified pos | pos], fx → preprocess (Linear → GELU → Linear) [+ time_fc(emb(t))]
//!         structured:   points → row-major grid (B, C, n_1, …) → zeros to a multiple of 16 per axis
//!         unstructured: Geo-FNO projection: points → (s1, s2) grid at ξ = IPHI(pos)
//! leave:  structured:   crop → points;  unstructured: Geo-FNO projection back to the points
//! ```
//!
//! The lift alone ([`NslLift`]: `preprocess` and `time_fc`, without the grid) is what
//! Transolver (`models/Transolver.py`) starts with; it stays at the points.
//!
//! Variables (the reference names, at the model's root): `preprocess.linear_pre.0.*`,
//! `preprocess.linear_post.*`, `time_fc.{0,2}.*` (with a time input), and on point clouds
//! `fftproject_in.weights{1,2}`, `fftproject_out.weights{1,2}`, `iphi.*`. Every linear layer
//! has PyTorch's default initialisation (NSL applies none of its own to these models).
//!
//! Choices where the reference is defective or silent:
//! - **Crop.** NSL crops with `x[..., :-p_1, :-p_2]`, an empty slice when exactly one padding is 0
//!   (e.g. a 16 × 21 grid: the model returns (B, 0, out)). No benchmark shape triggers it (85²,
//!   64², 221 × 51, 129², 101 × 31), so every published number comes from the correct crop, which
//!   is what [`NslFrame::leave`] does.
//! - **1-D grids.** NSL computes the padding for every `shapelist` but only applies it (and the
//!   crop) for 2-D and 3-D; a 1-D grid runs unpadded here too.
//! - **Unified positions on point clouds.** NSL ignores `unified_pos` there (the preprocess takes
//!   the coordinates); [`NslFrameConfig::check`] refuses the combination instead.
//! - **Time.** `time_input` builds `time_fc`; NSL adds the embedding only when a time is passed.
//!   Here a model with `time_input` requires the time (nothing is silently skipped) and one
//!   without refuses it (NSL would fail on the missing `time_fc`).
//! - **The mesh of a point cloud** is `pos` when it has two coordinates (NSL's loaders give
//!   pos = (x, y)); otherwise the first two channels of `fx`, the layout of ono's Elasticity
//!   loader (pos = the point index, fx = (x, y)), where the preprocess takes both as input.
//! - **IPHI** is evaluated once per forward and its ξ used by both projections; the reference
//!   evaluates it twice on the same input (identical values, the same summed gradient).

use ono_kernels::{health, points};
use tch::nn::Path;
use tch::{Kind, Tensor};

use crate::geo_projection::{GeoSpectralConv, GeoSpectralConvConfig};
use crate::grid::{crop, grid_to_points, pad_end, points_to_grid, unified_pos_embedding, Geometry};
use crate::iphi::{Iphi, IphiConfig};
use crate::linear::LinearInit;
use crate::mlp::{Mlp, MlpConfig};
use crate::time_embedding::TimeMlp;
use crate::{Error, Result};

/// Settings of [`NslFrame`], NSL's `args` as far as the frame reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct NslFrameConfig {
    /// Coordinate channels of `pos` (`args.space_dim`).
    pub space_dim: i64,
    /// Channels of the input function `fx` (`args.fun_dim`; 0: no fx).
    pub fun_dim: i64,
    /// Latent channels (`args.n_hidden`).
    pub n_hidden: i64,
    /// Replace the positions by their distances to a `reference`^D grid (`args.unified_pos`;
    /// structured grids only).
    pub unified_pos: bool,
    /// `args.ref`: reference points per axis of the unified position embedding.
    pub reference: i64,
    /// A time value per sample enters through a sinusoidal embedding and `time_fc`
    /// (`args.time_input`).
    pub time_input: bool,
    /// NSL's `geotype`: a 2-D point cloud is moved onto the `latent` grid by the Geo-FNO
    /// projection.
    pub geometry: Geometry,
    /// The latent grid (s1, s2) of a point cloud's projection (NSL: 96 × 96); not read on
    /// structured grids.
    pub latent: [i64; 2],
    /// Fourier modes per axis of a point cloud's projection (`args.modes`); not read on
    /// structured grids.
    pub modes: i64,
}

impl NslFrameConfig {
    /// Spatial axes of the latent grid.
    pub fn latent_dims(&self) -> usize {
        match self.geometry {
            Geometry::Structured { dims } => dims,
            Geometry::Unstructured => 2,
        }
    }

    /// Channels entering `preprocess`: the positions (or ref^D unified distances), then fx.
    pub fn preprocess_in(&self) -> i64 {
        let pos = if self.unified_pos {
            self.reference.pow(self.latent_dims() as u32)
        } else {
            self.space_dim
        };
        pos + self.fun_dim
    }

    /// Refuses settings no NSL model can be built with: the lift's ([`Self::check_lift`]) and,
    /// on point clouds, a latent grid that holds the projection's modes.
    pub fn check(&self) -> Result<()> {
        self.check_lift()?;
        if self.geometry == Geometry::Unstructured {
            let (latent, modes) = (self.latent, self.modes);
            if modes < 1 || latent.iter().any(|&s| s < 2 * modes || s / 2 + 1 < modes) {
                return Err(Error::Config(format!(
                    "NSL model frame: the latent grid {latent:?} must hold 2·{modes} rows and \
                     {modes} rFFT columns"
                )));
            }
        }
        Ok(())
    }

    /// Refuses settings the lift ([`NslLift`]) cannot be built with (the projections' latent grid
    /// and modes are not read).
    pub fn check_lift(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("NSL model frame: {msg}")));
        if self.n_hidden < 1 || self.fun_dim < 0 || self.space_dim < 0 {
            return bad(format!(
                "n_hidden {} must be positive, fun_dim {} and space_dim {} ≥ 0",
                self.n_hidden, self.fun_dim, self.space_dim
            ));
        }
        match &self.geometry {
            Geometry::Structured { dims } => {
                if !(1..=3).contains(dims) {
                    return bad(format!("a structured grid has 1 to 3 axes, not {dims}"));
                }
                if self.unified_pos && !(1..=64).contains(&self.reference) {
                    return bad(format!(
                        "ref = {} must lie in 1..=64 with unified_pos",
                        self.reference
                    ));
                }
            }
            Geometry::Unstructured => {
                if self.unified_pos {
                    return bad(
                        "unified_pos applies to structured grids only (NSL ignores it on point \
                         clouds)"
                            .into(),
                    );
                }
            }
        }
        if !self.unified_pos && self.space_dim == 0 && self.fun_dim == 0 {
            return bad("the preprocess needs positions or an input function".into());
        }
        Ok(())
    }

    /// Registers the lift's variables at `path` (the model's root): `preprocess` and, with a
    /// time input, `time_fc`, their linear layers drawn by `init` (NSL's grid models keep
    /// PyTorch's defaults; Transolver applies trunc-normal(0.02) to every `nn.Linear`).
    pub fn init_lift(&self, path: &Path, init: LinearInit) -> Result<NslLift> {
        self.check_lift()?;
        let h = self.n_hidden;
        let preprocess = MlpConfig {
            residual: false,
            ..MlpConfig::new(self.preprocess_in(), 2 * h, h)
        }
        .with_init(init)
        .init(&(path / "preprocess"));
        let time_fc = self
            .time_input
            .then(|| TimeMlp::with_init(&(path / "time_fc"), h, init));
        Ok(NslLift {
            cfg: self.clone(),
            preprocess,
            time_fc,
        })
    }

    /// Registers the frame's variables at `path` (the model's root).
    pub fn init(&self, path: &Path) -> Result<NslFrame> {
        self.check()?;
        let h = self.n_hidden;
        let lift = self.init_lift(path, LinearInit::Torch)?;
        let cloud = match self.geometry {
            Geometry::Structured { .. } => None,
            Geometry::Unstructured => {
                let proj = GeoSpectralConvConfig {
                    in_channels: h,
                    out_channels: h,
                    modes: [self.modes, self.modes],
                    latent: self.latent,
                };
                Some(Cloud {
                    project_in: proj.init(&(path / "fftproject_in"))?,
                    project_out: proj.init(&(path / "fftproject_out"))?,
                    // NSL builds `IPHI()`: width 32 whatever n_hidden is.
                    iphi: IphiConfig::default().init(&(path / "iphi"))?,
                })
            }
        };
        Ok(NslFrame { lift, cloud })
    }
}

/// The input of [`NslFrame::enter`] (the fields of a model input the frame reads).
#[derive(Debug, Clone, Copy)]
pub struct FrameInput<'a> {
    /// (B, N, space_dim): the points (on a structured grid with `unified_pos`, only B and N are
    /// read, as NSL).
    pub pos: &'a Tensor,
    /// (B, N, fun_dim), `None` when fun_dim = 0.
    pub fx: Option<&'a Tensor>,
    /// (B, 1): one time per sample, with `time_input`.
    pub time: Option<&'a Tensor>,
    /// The row-major grid shape of the points (structured; optional in 1-D, where the N points are
    /// the axis; not read on point clouds).
    pub grid: Option<&'a [i64]>,
}

/// What [`NslFrame::leave`] needs to return to the points.
#[derive(Debug)]
pub struct FrameContext {
    n_points: i64,
    place: Place,
}

#[derive(Debug)]
enum Place {
    /// The grid shape before padding.
    Grid(Vec<i64>),
    /// The points' computational coordinates ξ = IPHI(pos), (B, N, 2).
    Cloud(Tensor),
}

impl FrameContext {
    /// The grid shape of the points (structured geometry), before padding.
    pub fn grid_shape(&self) -> Option<&[i64]> {
        match &self.place {
            Place::Grid(s) => Some(s),
            Place::Cloud(_) => None,
        }
    }

    /// Points per sample.
    pub fn n_points(&self) -> i64 {
        self.n_points
    }
}

/// The first part of every NSL model: the inputs at the points → `n_hidden` channels at the
/// points, `preprocess([unified pos | pos], fx)` [+ shift] [+ `time_fc`(emb(t))]. The frame
/// ([`NslFrame`]) continues to a latent grid; Transolver stays at the points.
#[derive(Debug)]
pub struct NslLift {
    cfg: NslFrameConfig,
    preprocess: Mlp,
    time_fc: Option<TimeMlp>,
}

impl NslLift {
    pub fn config(&self) -> &NslFrameConfig {
        &self.cfg
    }

    /// The grid shape of a structured input, checked against the points.
    fn grid_shape(&self, grid: Option<&[i64]>, n: i64, dims: usize) -> Result<Vec<i64>> {
        let shape = match grid {
            Some(g) => g.to_vec(),
            None if dims == 1 => vec![n],
            None => {
                return Err(Error::Config(format!(
                    "NSL model frame: the points must be a regular {dims}-D grid; pass its shape"
                )))
            }
        };
        if shape.len() != dims || shape.iter().any(|&s| s < 1) || shape.iter().product::<i64>() != n
        {
            return Err(Error::Shape {
                op: "NslFrame::enter",
                expected: format!("a {dims}-D grid of the {n} points"),
                got: shape,
            });
        }
        Ok(shape)
    }

    /// The features at the points. `shift` (n_hidden) is added to every point before the time
    /// embedding (Transolver's `placeholder`).
    ///
    /// # Shapes
    /// - `input.pos`: (B, N, space_dim); `input.fx`: (B, N, fun_dim); `input.time`: (B, 1)
    /// - `shift`: (n_hidden)
    /// - returns: (B, N, n_hidden), and the grid shape of the points (structured geometry)
    pub fn forward(
        &self,
        input: &FrameInput<'_>,
        shift: Option<&Tensor>,
    ) -> Result<(Tensor, Option<Vec<i64>>)> {
        const OP: &str = "NslFrame::enter";
        let c = &self.cfg;
        let ps = input.pos.size();
        let (b, n) = match ps[..] {
            // A process's share of split points may be empty (ono_kernels::points).
            [b, n, s]
                if b > 0 && (n > 0 || points::split()) && (s == c.space_dim || c.unified_pos) =>
            {
                (b, n)
            }
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos (B, N, {}) with B, N > 0", c.space_dim),
                    got: ps,
                })
            }
        };
        let kind = self.kind();
        let device = input.pos.device();
        let grid = match c.geometry {
            Geometry::Structured { dims } => {
                points::refuse(
                    "the NSL models' structured geometry (`geotype = \"structured\"`; \
                     `unstructured` takes the points as a cloud)",
                    "the points are laid out and convolved as one whole grid",
                )?;
                Some(self.grid_shape(input.grid, n, dims)?)
            }
            Geometry::Unstructured => None,
        };
        let mut features = Vec::with_capacity(2);
        match &grid {
            Some(shape) if c.unified_pos => features.push(
                unified_pos_embedding(shape, c.reference, kind, device)?
                    .f_unsqueeze(0)?
                    .f_expand([b, n, c.reference.pow(shape.len() as u32)], false)?,
            ),
            _ => features.push(input.pos.f_to_kind(kind)?),
        }
        match (input.fx, c.fun_dim) {
            (Some(fx), f) if fx.size() == [b, n, f] => features.push(fx.f_to_kind(kind)?),
            (None, 0) => {}
            (fx, f) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("fx ({b}, {n}, {f})"),
                    got: fx.map(Tensor::size).unwrap_or_default(),
                })
            }
        }
        let x = Tensor::f_cat(&features, -1)?;
        health::require_finite("NslFrame::enter: input", &x, || Error::NonFinite { op: OP })?;
        let mut h = self.preprocess.forward(&x)?;
        if let Some(shift) = shift {
            h = h.f_add(shift)?;
        }
        match (&self.time_fc, input.time) {
            (Some(time_fc), Some(t)) => {
                if t.size() != [b, 1] {
                    return Err(Error::Shape {
                        op: OP,
                        expected: format!("time ({b}, 1)"),
                        got: t.size(),
                    });
                }
                health::require_finite("NslFrame::enter: time", t, || Error::NonFinite { op: OP })?;
                // (B, 1, C) broadcast over the points: NSL repeats the embedding over N first;
                // the rows are the same either way.
                h = h.f_add(&time_fc.forward(t)?)?;
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(Error::Config(
                    "NSL model frame: built with time_input, but no time was given".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(Error::Config(
                    "NSL model frame: a time was given to a model built without time_input".into(),
                ))
            }
        }
        Ok((h, grid))
    }

    /// The floating kind of the parameters.
    pub fn kind(&self) -> Kind {
        self.preprocess.kind()
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct NslFrame {
    lift: NslLift,
    cloud: Option<Cloud>,
}

/// The Geo-FNO projections of the unstructured geometry.
#[derive(Debug)]
struct Cloud {
    project_in: GeoSpectralConv,
    project_out: GeoSpectralConv,
    iphi: Iphi,
}

/// NSL's padding of one axis: up to the next multiple of 16.
pub fn pad_to_16(size: i64) -> i64 {
    (16 - size % 16) % 16
}

impl NslFrame {
    pub fn config(&self) -> &NslFrameConfig {
        &self.lift.cfg
    }

    /// The latent grid size of a structured grid `shape`: padded to multiples of 16 (2-D and
    /// 3-D), unchanged in 1-D.
    pub fn padded_shape(shape: &[i64]) -> Vec<i64> {
        if shape.len() < 2 {
            return shape.to_vec();
        }
        shape.iter().map(|&s| s + pad_to_16(s)).collect()
    }

    /// Points → latent grid.
    ///
    /// # Shapes
    /// - `input.pos`: (B, N, space_dim); `input.fx`: (B, N, fun_dim); `input.time`: (B, 1)
    /// - returns: the latent grid (B, n_hidden, m_1, …, m_D) — structured: the grid padded to
    ///   multiples of 16 per axis (2-D, 3-D); unstructured: (B, n_hidden, s1, s2) — and the
    ///   context for [`leave`](Self::leave)
    pub fn enter(&self, input: &FrameInput<'_>) -> Result<(Tensor, FrameContext)> {
        let (h, grid) = self.lift.forward(input, None)?;
        let n = h.size()[1];
        match (grid, &self.cloud) {
            (Some(shape), _) => {
                let g = points_to_grid(&h, &shape)?;
                let pad: Vec<i64> = if shape.len() < 2 {
                    vec![0]
                } else {
                    shape.iter().map(|&s| pad_to_16(s)).collect()
                };
                let latent = pad_end(&g, &pad)?;
                Ok((
                    latent,
                    FrameContext {
                        n_points: n,
                        place: Place::Grid(shape),
                    },
                ))
            }
            (None, Some(cloud)) => {
                // Any space_dim builds (the preprocess takes what the data has); the projection
                // reads 2-D coordinates: `pos` in NSL's loaders, else the first two channels of
                // fx (ono's Elasticity loader: pos = the point index, fx = (x, y)).
                let c = self.config();
                let mesh = match (c.space_dim, input.fx) {
                    (2, _) => input.pos.shallow_clone(),
                    (_, Some(fx)) if c.fun_dim >= 2 => fx.f_narrow(-1, 0, 2)?,
                    _ => {
                        return Err(Error::Shape {
                            op: "NslFrame::enter",
                            expected: "pos (B, N, 2), or fx (B, N, ≥ 2) starting with the \
                                       coordinates: the Geo-FNO projection needs the points' \
                                       2-D coordinates"
                                .into(),
                            got: input.pos.size(),
                        })
                    }
                };
                let xi = cloud.iphi.forward(&mesh.f_to_kind(self.kind())?, None)?;
                let latent = cloud
                    .project_in
                    .points_to_grid(&h.f_permute([0, 2, 1])?, &xi)?;
                Ok((
                    latent,
                    FrameContext {
                        n_points: n,
                        place: Place::Cloud(xi),
                    },
                ))
            }
            (None, None) => Err(Error::Config(
                "NSL model frame: a structured frame without a grid".into(),
            )),
        }
    }

    /// Latent grid → points.
    ///
    /// # Shapes
    /// - `latent`: (B, C, m_1, …, m_D), as [`enter`](Self::enter) returned it (any C)
    /// - returns: (B, N, C)
    pub fn leave(&self, latent: &Tensor, ctx: &FrameContext) -> Result<Tensor> {
        match &ctx.place {
            Place::Grid(shape) => {
                let size = latent.size();
                if size.len() != shape.len() + 2
                    || size[2..].iter().zip(shape).any(|(&m, &s)| m < s)
                {
                    return Err(Error::Shape {
                        op: "NslFrame::leave",
                        expected: format!("a latent grid (B, C, …) covering {shape:?}"),
                        got: size,
                    });
                }
                grid_to_points(&crop(latent, shape)?)
            }
            Place::Cloud(xi) => {
                let cloud = self.cloud.as_ref().ok_or_else(|| {
                    Error::Config("NSL model frame: a point-cloud context for a grid frame".into())
                })?;
                Ok(cloud
                    .project_out
                    .grid_to_points(latent, xi)?
                    .f_permute([0, 2, 1])?)
            }
        }
    }

    /// The floating kind of the parameters.
    pub fn kind(&self) -> Kind {
        self.lift.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::Device;

    fn structured(
        dims: usize,
        unified_pos: bool,
        fun_dim: i64,
        time_input: bool,
    ) -> NslFrameConfig {
        NslFrameConfig {
            space_dim: dims as i64,
            fun_dim,
            n_hidden: 4,
            unified_pos,
            reference: 3,
            time_input,
            geometry: Geometry::Structured { dims },
            latent: [96, 96],
            modes: 12,
        }
    }

    /// The embedding against the formula in scalar float32 arithmetic: the differences, squares
    /// and their sum are single IEEE roundings in both, bit for bit; libtorch's vectorised
    /// float32 `sqrt` (the reference's too) is within 1 ulp of the correctly rounded one.
    #[test]
    fn unified_pos_is_float32_exact() {
        let (s1, s2, r) = (5i64, 7i64, 3i64);
        let pos = unified_pos_embedding(&[s1, s2], r, Kind::Float, Device::Cpu).unwrap();
        assert_eq!(pos.size(), [s1 * s2, r * r]);
        let lin = |n: i64, i: i64| (i as f64 / (n - 1) as f64) as f32;
        let got = Vec::<f32>::try_from(pos.reshape([-1])).unwrap();
        for i in 0..s1 {
            for j in 0..s2 {
                for a in 0..r {
                    for bb in 0..r {
                        let dx = lin(s1, i) - lin(r, a);
                        let dy = lin(s2, j) - lin(r, bb);
                        let want = (dx * dx + dy * dy).sqrt();
                        let k = ((i * s2 + j) * r * r + a * r + bb) as usize;
                        let ulps = (got[k].to_bits() as i64 - want.to_bits() as i64).abs();
                        assert!(ulps <= 1, "({i}, {j}, {a}, {bb}): {} vs {want}", got[k]);
                    }
                }
            }
        }
    }

    /// enter pads with zeros to multiples of 16 (2-D, 3-D) and leave undoes it: leave(enter(x))
    /// is the preprocess of (pos, fx) at every point, whichever axes need padding (also exactly
    /// one, where NSL's crop returns nothing).
    #[test]
    fn structured_round_trip() {
        for (shape, fun_dim, unified) in [
            (vec![5i64, 7], 1i64, false),
            (vec![16, 21], 0, false),
            (vec![4, 3, 2], 2, true),
            (vec![9], 1, true),
        ] {
            let dims = shape.len();
            let cfg = structured(dims, unified, fun_dim, false);
            let vs = VarStore::new(Device::Cpu);
            let frame = cfg.init(&vs.root()).unwrap();
            let n: i64 = shape.iter().product();
            let pos = Tensor::rand([2, n, dims as i64], (Kind::Float, Device::Cpu));
            let fx = Tensor::rand([2, n, fun_dim], (Kind::Float, Device::Cpu));
            let input = FrameInput {
                pos: &pos,
                fx: (fun_dim > 0).then_some(&fx),
                time: None,
                grid: Some(&shape),
            };
            let (latent, ctx) = frame.enter(&input).unwrap();
            let mut want_size = vec![2, 4];
            want_size.extend(NslFrame::padded_shape(&shape));
            assert_eq!(latent.size(), want_size);
            if dims > 1 {
                assert!(want_size[2..].iter().all(|s| s % 16 == 0));
            }
            let back = frame.leave(&latent, &ctx).unwrap();
            let x = if unified {
                unified_pos_embedding(&shape, 3, Kind::Float, Device::Cpu)
                    .unwrap()
                    .unsqueeze(0)
                    .expand([2, n, 3i64.pow(dims as u32)], false)
            } else {
                pos.shallow_clone()
            };
            let x = if fun_dim > 0 {
                Tensor::cat(&[x, fx], -1)
            } else {
                x
            };
            let want = frame.lift.preprocess.forward(&x).unwrap();
            assert!(back.equal(&want), "{shape:?}");
            // The padding is zeros.
            let total = latent.abs().sum(Kind::Double).double_value(&[]);
            let inner = back.abs().sum(Kind::Double).double_value(&[]);
            assert!((total - inner).abs() <= 1e-9 * total, "{shape:?}");
        }
    }

    /// On a point cloud whose pos is not 2-D (ono's Elasticity: the point index), the mesh is
    /// fx's first two channels: the same latent grid as NSL's layout (pos = the mesh, no fx)
    /// when the preprocess gives the index no weight.
    #[test]
    fn cloud_mesh_from_fx_when_pos_is_an_index() {
        tch::manual_seed(7);
        let cfg = |space_dim, fun_dim| NslFrameConfig {
            space_dim,
            fun_dim,
            n_hidden: 3,
            unified_pos: false,
            reference: 8,
            time_input: false,
            geometry: Geometry::Unstructured,
            latent: [8, 8],
            modes: 3,
        };
        let (va, vb) = (VarStore::new(Device::Cpu), VarStore::new(Device::Cpu));
        let nsl = cfg(2, 0).init(&va.root()).unwrap();
        let ono = cfg(1, 2).init(&vb.root()).unwrap();
        let src = va.variables();
        tch::no_grad(|| {
            for (name, mut t) in vb.variables() {
                if name == "preprocess.linear_pre.0.weight" {
                    let _ = t.narrow(1, 0, 1).zero_();
                    t.narrow(1, 1, 2).copy_(&src[&name]);
                } else {
                    t.copy_(&src[&name]);
                }
            }
        });
        let opts = (Kind::Float, Device::Cpu);
        let xy = Tensor::rand([2, 10, 2], opts);
        let index = Tensor::linspace(0.0, 1.0, 10, opts)
            .reshape([1, 10, 1])
            .expand([2, 10, 1], false);
        let input = |pos, fx| FrameInput {
            pos,
            fx,
            time: None,
            grid: None,
        };
        let (want, _) = nsl.enter(&input(&xy, None)).unwrap();
        let (got, ctx) = ono.enter(&input(&index, Some(&xy))).unwrap();
        let e = (&got - &want).abs().max().double_value(&[]);
        assert!(e < 1e-6, "{e}");
        assert_eq!(ono.leave(&got, &ctx).unwrap().size(), [2, 10, 3]);
        // Neither pos nor fx holds two coordinates.
        let vc = VarStore::new(Device::Cpu);
        let bad = cfg(1, 1).init(&vc.root()).unwrap();
        let one = xy.narrow(2, 0, 1);
        assert!(matches!(
            bad.enter(&input(&index, Some(&one))),
            Err(Error::Shape { .. })
        ));
    }

    #[test]
    fn refuses_bad_inputs() {
        let vs = VarStore::new(Device::Cpu);
        let frame = structured(2, false, 1, true).init(&vs.root()).unwrap();
        let pos = Tensor::rand([1, 6, 2], (Kind::Float, Device::Cpu));
        let fx = Tensor::rand([1, 6, 1], (Kind::Float, Device::Cpu));
        let t = Tensor::zeros([1, 1], (Kind::Float, Device::Cpu));
        let grid = [2i64, 3];
        let ok = FrameInput {
            pos: &pos,
            fx: Some(&fx),
            time: Some(&t),
            grid: Some(&grid),
        };
        assert!(frame.enter(&ok).is_ok());
        assert!(frame.enter(&FrameInput { time: None, ..ok }).is_err());
        assert!(frame.enter(&FrameInput { fx: None, ..ok }).is_err());
        assert!(frame
            .enter(&FrameInput {
                grid: Some(&[3, 3]),
                ..ok
            })
            .is_err());
        assert!(frame.enter(&FrameInput { grid: None, ..ok }).is_err());
        let nan = fx.full_like(f64::NAN);
        assert!(matches!(
            frame.enter(&FrameInput {
                fx: Some(&nan),
                ..ok
            }),
            Err(Error::NonFinite { .. })
        ));
        let mut cloud = structured(2, true, 0, false);
        cloud.geometry = Geometry::Unstructured;
        cloud.latent = [24, 20];
        cloud.modes = 5;
        assert!(cloud.check().is_err(), "unified_pos on a point cloud");
    }
}
