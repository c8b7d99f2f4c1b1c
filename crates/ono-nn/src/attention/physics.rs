//! Transolver's Physics-Attention (Wu et al., *Transolver: A Fast Transformer Solver for PDEs on
//! General Geometries*, ICML 2024), as the Neural-Solver-Library writes it
//! (`layers/Physics_Attention.py`, thuml/Neural-Solver-Library `db942b7`): the N points are
//! softly assigned to G learned slices, attention runs among the G slice tokens, and the result
//! is spread back over the points with the same weights. Cost O(N·G·d + G²·d) per head.
//!
//! ```text
//! fx_mid, x_mid = in_project_fx(z), in_project_x(z)        (B, H, N, d) each
//! w     = softmax(in_project_slice(x_mid) / τ_h)             (B, H, N, G), over the G slices
//! s     = wᵀ fx_mid / (Σ_n w + 1e-5)                         (B, H, G, d) slice tokens
//! o     = softmax(to_q(s) to_k(s)ᵀ / √d) to_v(s)             (B, H, G, d)
//! out   = to_out(merge_heads(w o))                           (B, N, C)
//! ```
//!
//! The two projections are per-point linear layers on point clouds
//! (`Physics_Attention_Irregular_Mesh`) and 3×…×3 zero-padded convolutions over the grid on
//! structured meshes (`Physics_Attention_Structured_Mesh_{1,2,3}D`), where τ is also clamped to
//! [0.1, 5] (not on point clouds). `in_project_slice`, `to_q`, `to_k`, `to_v` act on one head's
//! d features and are shared by all heads; τ is one learned temperature per head. The deslice
//! uses the slice weights without the normalisation over the points.
//!
//! Variables (NSL's names): `temperature` (1, H, 1, 1), `in_project_x.*`, `in_project_fx.*`,
//! `in_project_slice.*`, `to_q.weight`, `to_k.weight`, `to_v.weight`, `to_out.0.*`.

use ono_kernels::points;
use tch::nn::{Init, Path};
use tch::Tensor;

use crate::attention::{merge_heads, split_heads};
use crate::conv::{Conv, ConvConfig};
use crate::grid::{grid_to_points, points_to_grid, Geometry};
use crate::linear::{Linear, LinearConfig};
use crate::precision::matmul;
use crate::{Error, Result};

/// NSL's initial temperature of every head.
pub const INITIAL_TEMPERATURE: f64 = 0.5;
/// The clamp of the temperature on structured meshes.
pub const TEMPERATURE_RANGE: (f64, f64) = (0.1, 5.0);
/// Added to each slice's total weight before dividing by it.
pub const SLICE_EPS: f64 = 1e-5;
/// Kernel size of the structured meshes' projections.
pub const KERNEL: i64 = 3;

/// Settings of [`PhysicsAttention`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhysicsAttentionConfig {
    /// Input and output channels C.
    pub dim: i64,
    pub heads: i64,
    /// Channels per head d (NSL: C // H; the inner width H·d may be less than C).
    pub dim_head: i64,
    /// Slices G.
    pub slice_num: i64,
    /// Per-point linear projections on a point cloud (`Physics_Attention_Irregular_Mesh`),
    /// convolutional ones over a structured grid.
    pub geometry: Geometry,
}

impl PhysicsAttentionConfig {
    pub fn check(&self) -> Result<()> {
        if self.dim < 1 || self.heads < 1 || self.dim_head < 1 || self.slice_num < 1 {
            return Err(Error::Config(format!(
                "physics attention: dim {}, heads {}, dim_head {} and slice_num {} must be \
                 positive",
                self.dim, self.heads, self.dim_head, self.slice_num
            )));
        }
        if let Geometry::Structured { dims } = self.geometry {
            if !(1..=3).contains(&dims) {
                return Err(Error::Config(format!(
                    "physics attention: a structured mesh has 1 to 3 axes, not {dims}"
                )));
            }
        }
        Ok(())
    }

    /// Registers the variables with NSL's initialisation: trunc-normal(0.02) linear layers with
    /// zero biases (Transolver's `initialize_weights`, which also overwrites the orthogonal init
    /// of `in_project_slice`), PyTorch's default for the convolutions (left alone there),
    /// temperatures 0.5.
    pub fn init(&self, path: &Path) -> Result<PhysicsAttention> {
        self.check()?;
        let inner = self.heads * self.dim_head;
        let project = |name: &str| -> Result<Projection> {
            Ok(match self.geometry {
                Geometry::Unstructured => Projection::Points(LinearConfig::default().init(
                    &(path / name),
                    self.dim,
                    inner,
                )),
                Geometry::Structured { dims } => Projection::Grid(
                    ConvConfig {
                        dims,
                        in_channels: self.dim,
                        out_channels: inner,
                        kernel: KERNEL,
                        padding: KERNEL / 2,
                        bias: true,
                    }
                    .init(&(path / name))?,
                ),
            })
        };
        let head =
            |name: &str| LinearConfig::no_bias().init(&(path / name), self.dim_head, self.dim_head);
        Ok(PhysicsAttention {
            temperature: path.var(
                "temperature",
                &[1, self.heads, 1, 1],
                Init::Const(INITIAL_TEMPERATURE),
            ),
            in_project_x: project("in_project_x")?,
            in_project_fx: project("in_project_fx")?,
            in_project_slice: LinearConfig::default().init(
                &(path / "in_project_slice"),
                self.dim_head,
                self.slice_num,
            ),
            to_q: head("to_q"),
            to_k: head("to_k"),
            to_v: head("to_v"),
            to_out: LinearConfig::default().init(&(path / "to_out" / 0), inner, self.dim),
            cfg: *self,
        })
    }
}

/// `in_project_x` / `in_project_fx`.
#[derive(Debug)]
enum Projection {
    Points(Linear),
    Grid(Conv),
}

impl Projection {
    /// (B, N, C) → (B, N, H·d); on a grid through (B, C, n_1, …) and back.
    fn forward(&self, z: &Tensor, grid: Option<&[i64]>) -> Result<Tensor> {
        match (self, grid) {
            (Projection::Points(lin), _) => lin.forward(z),
            (Projection::Grid(conv), Some(shape)) => {
                grid_to_points(&conv.forward(&points_to_grid(z, shape)?)?)
            }
            (Projection::Grid(_), None) => Err(Error::Config(
                "physics attention: a structured mesh needs its grid shape".into(),
            )),
        }
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct PhysicsAttention {
    temperature: Tensor,
    in_project_x: Projection,
    in_project_fx: Projection,
    in_project_slice: Linear,
    to_q: Linear,
    to_k: Linear,
    to_v: Linear,
    to_out: Linear,
    cfg: PhysicsAttentionConfig,
}

impl PhysicsAttention {
    pub fn config(&self) -> &PhysicsAttentionConfig {
        &self.cfg
    }

    /// On a padded batch of point clouds, `mask` marks the real points: the slice tokens are
    /// weighted sums over real points only, so each real point gets what its sample alone would
    /// give (NSL has no mask; the mathematics allows it exactly). A structured mesh has no padding.
    ///
    /// # Shapes
    /// - `z`: (B, N, dim)
    /// - `grid`: the row-major grid shape of the N points (structured meshes; optional in 1-D,
    ///   where the N points are the axis; not read on point clouds)
    /// - `mask`: (B, N), point clouds only
    /// - returns: (B, N, dim)
    pub fn forward(
        &self,
        z: &Tensor,
        grid: Option<&[i64]>,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        const OP: &str = "PhysicsAttention";
        let c = &self.cfg;
        let size = z.size();
        let &[_, n, ch] = &size[..] else {
            return Err(Error::Shape {
                op: OP,
                expected: format!("(B, N, {})", c.dim),
                got: size,
            });
        };
        if ch != c.dim {
            return Err(Error::Shape {
                op: OP,
                expected: format!("(B, N, {})", c.dim),
                got: size,
            });
        }
        let grid: Option<Vec<i64>> = match (c.geometry, grid) {
            (Geometry::Unstructured, _) => None,
            (Geometry::Structured { dims: 1 }, None) => Some(vec![n]),
            (Geometry::Structured { dims }, Some(g))
                if g.len() == dims
                    && g.iter().all(|&s| s > 0)
                    && g.iter().product::<i64>() == n =>
            {
                Some(g.to_vec())
            }
            (Geometry::Structured { dims }, g) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("a {dims}-D grid shape of the {n} points"),
                    got: g.map(<[i64]>::to_vec).unwrap_or_default(),
                })
            }
        };
        let grid = grid.as_deref();
        if let Some(m) = mask {
            if c.geometry != Geometry::Unstructured {
                return Err(Error::Config(
                    "PhysicsAttention: a padding mask needs a point cloud (a structured mesh has no padding)"
                        .into(),
                ));
            }
            crate::padding::check_mask(OP, m, size[0], n)?;
        }
        let fx_mid = split_heads(&self.in_project_fx.forward(z, grid)?, c.heads)?;
        let x_mid = split_heads(&self.in_project_x.forward(z, grid)?, c.heads)?;
        let tau = match c.geometry {
            Geometry::Unstructured => self.temperature.shallow_clone(),
            Geometry::Structured { .. } => self
                .temperature
                .f_clamp(TEMPERATURE_RANGE.0, TEMPERATURE_RANGE.1)?,
        };
        let kind = z.kind();
        let w = self
            .in_project_slice
            .forward(&x_mid)?
            .f_div(&tau)?
            .f_softmax(-1, kind)?; // (B, H, N, G)
                                   // The slicing weights: padded points take no part in any slice.
        let w_in = match mask {
            Some(m) => w.f_mul(&m.f_to_kind(kind)?.f_view([size[0], 1, n, 1])?)?,
            None => w.shallow_clone(),
        };
        // The slices' weights and weighted sums over every process's points when the points are
        // split ([`ono_kernels::points`]); the slice tokens are then the same on every process.
        let norm =
            points::sum(&w_in.f_sum_dim_intlist(2, false, kind)?)?.f_add_scalar(SLICE_EPS)?; // (B, H, G)
        let tokens = points::sum(&matmul(&w_in.f_transpose(-2, -1)?, &fx_mid)?)?
            .f_div(&norm.f_unsqueeze(-1)?)?; // (B, H, G, d)
        let out = ono_kernels::attention::softmax(
            &self.to_q.forward(&tokens)?,
            &self.to_k.forward(&tokens)?,
            &self.to_v.forward(&tokens)?,
            None,
        )?;
        self.to_out.forward(&merge_heads(&matmul(&w, &out)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    fn cfg(geometry: Geometry) -> PhysicsAttentionConfig {
        PhysicsAttentionConfig {
            dim: 6,
            heads: 2,
            dim_head: 3,
            slice_num: 4,
            geometry,
        }
    }

    /// The forward against a scalar float64 evaluation of the definition (loops over heads,
    /// points, slices and features; the convolution as a sum over the 3×3 neighbours inside the
    /// grid), on a 2-D grid with temperatures outside the clamp range and on a point cloud.
    #[test]
    fn matches_loops_over_the_definition() {
        for geometry in [Geometry::Unstructured, Geometry::Structured { dims: 2 }] {
            tch::manual_seed(11);
            let mut vs = VarStore::new(Device::Cpu);
            let c = cfg(geometry);
            let attn = c.init(&vs.root()).unwrap();
            vs.double();
            let vars = vs.variables();
            tch::no_grad(|| {
                for (_, mut v) in vs.variables() {
                    // O(1) weights, so that every path matters.
                    v.copy_(&(v.randn_like() * 0.7));
                }
                // Head 0 below the clamp's floor, head 1 inside.
                vars["temperature"]
                    .shallow_clone()
                    .copy_(&Tensor::from_slice(&[0.05f64, 0.7]).view([1, 2, 1, 1]));
            });
            let (s1, s2) = (3i64, 4i64);
            let n = s1 * s2;
            let z = Tensor::randn([2, n, 6], (Kind::Double, Device::Cpu));
            let out = attn.forward(&z, Some(&[s1, s2]), None).unwrap();
            let got = Vec::<f64>::try_from(out.reshape([-1])).unwrap();

            let get = |name: &str| -> Vec<f64> {
                Vec::<f64>::try_from(vars[name].reshape([-1])).unwrap()
            };
            let zv = Vec::<f64>::try_from(z.reshape([-1])).unwrap();
            let (h, d, g, cdim) = (2usize, 3usize, 4usize, 6usize);
            let inner = h * d;
            let n = n as usize;
            // Projection of point p, channel o.
            let project = |name: &str, b: usize, p: usize, o: usize| -> f64 {
                let w = get(&format!("{name}.weight"));
                let bias = get(&format!("{name}.bias"));
                let mut acc = bias[o];
                match geometry {
                    Geometry::Unstructured => {
                        for i in 0..cdim {
                            acc += w[o * cdim + i] * zv[(b * n + p) * cdim + i];
                        }
                    }
                    Geometry::Structured { .. } => {
                        let (pi, pj) = ((p / s2 as usize) as i64, (p % s2 as usize) as i64);
                        for i in 0..cdim {
                            for (ki, di) in (-1i64..=1).enumerate() {
                                for (kj, dj) in (-1i64..=1).enumerate() {
                                    let (qi, qj) = (pi + di, pj + dj);
                                    if qi < 0 || qj < 0 || qi >= s1 || qj >= s2 {
                                        continue;
                                    }
                                    let q = (qi * s2 + qj) as usize;
                                    acc += w[((o * cdim + i) * 3 + ki) * 3 + kj]
                                        * zv[(b * n + q) * cdim + i];
                                }
                            }
                        }
                    }
                }
                acc
            };
            let (ws, bs) = (get("in_project_slice.weight"), get("in_project_slice.bias"));
            let (wq, wk, wv) = (get("to_q.weight"), get("to_k.weight"), get("to_v.weight"));
            let (wo, bo) = (get("to_out.0.weight"), get("to_out.0.bias"));
            let temps = get("temperature");
            let lin = |w: &[f64], x: &[f64], rows: usize| -> Vec<f64> {
                (0..rows)
                    .map(|r| (0..x.len()).map(|i| w[r * x.len() + i] * x[i]).sum())
                    .collect()
            };
            let softmax = |v: &[f64]| -> Vec<f64> {
                let m = v.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = v.iter().map(|x| (x - m).exp()).collect();
                let s: f64 = e.iter().sum();
                e.iter().map(|x| x / s).collect()
            };
            for b in 0..2 {
                let mut merged = vec![vec![0.0; inner]; n];
                for hh in 0..h {
                    let tau = match geometry {
                        Geometry::Unstructured => temps[hh],
                        Geometry::Structured { .. } => temps[hh].clamp(0.1, 5.0),
                    };
                    let fxm: Vec<Vec<f64>> = (0..n)
                        .map(|p| {
                            (0..d)
                                .map(|k| project("in_project_fx", b, p, hh * d + k))
                                .collect()
                        })
                        .collect();
                    let w: Vec<Vec<f64>> = (0..n)
                        .map(|p| {
                            let xm: Vec<f64> = (0..d)
                                .map(|k| project("in_project_x", b, p, hh * d + k))
                                .collect();
                            let logits: Vec<f64> = lin(&ws, &xm, g)
                                .iter()
                                .zip(&bs)
                                .map(|(l, bb)| (l + bb) / tau)
                                .collect();
                            softmax(&logits)
                        })
                        .collect();
                    let tokens: Vec<Vec<f64>> = (0..g)
                        .map(|gg| {
                            let total: f64 = (0..n).map(|p| w[p][gg]).sum::<f64>() + 1e-5;
                            (0..d)
                                .map(|k| (0..n).map(|p| w[p][gg] * fxm[p][k]).sum::<f64>() / total)
                                .collect()
                        })
                        .collect();
                    let q: Vec<Vec<f64>> = tokens.iter().map(|t| lin(&wq, t, d)).collect();
                    let k: Vec<Vec<f64>> = tokens.iter().map(|t| lin(&wk, t, d)).collect();
                    let v: Vec<Vec<f64>> = tokens.iter().map(|t| lin(&wv, t, d)).collect();
                    let o: Vec<Vec<f64>> = (0..g)
                        .map(|i| {
                            let dots: Vec<f64> = (0..g)
                                .map(|j| {
                                    (0..d).map(|c| q[i][c] * k[j][c]).sum::<f64>()
                                        / (d as f64).sqrt()
                                })
                                .collect();
                            let a = softmax(&dots);
                            (0..d)
                                .map(|c| (0..g).map(|j| a[j] * v[j][c]).sum())
                                .collect()
                        })
                        .collect();
                    for (p, row) in merged.iter_mut().enumerate() {
                        for c in 0..d {
                            row[hh * d + c] = (0..g).map(|gg| w[p][gg] * o[gg][c]).sum();
                        }
                    }
                }
                for (p, row) in merged.iter().enumerate() {
                    let y = lin(&wo, row, cdim);
                    for o in 0..cdim {
                        let want = y[o] + bo[o];
                        let have = got[(b * n + p) * cdim + o];
                        assert!(
                            (have - want).abs() <= 1e-12 * want.abs().max(1.0),
                            "{geometry:?} b {b} p {p} o {o}: {have} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// The clamp holds the temperature's gradient at zero outside [0.1, 5] on grids only.
    #[test]
    fn the_clamp_is_structured_only() {
        for (geometry, zero) in [
            (Geometry::Structured { dims: 1 }, true),
            (Geometry::Unstructured, false),
        ] {
            let vs = VarStore::new(Device::Cpu);
            let attn = cfg(geometry).init(&vs.root()).unwrap();
            let t = vs.variables()["temperature"].shallow_clone();
            tch::no_grad(|| t.shallow_clone().copy_(&t.full_like(0.05)));
            let z = Tensor::randn([1, 5, 6], (Kind::Float, Device::Cpu));
            attn.forward(&z, None, None)
                .unwrap()
                .sum(Kind::Float)
                .backward();
            let g = t.grad().abs().max().double_value(&[]);
            assert_eq!(g == 0.0, zero, "{geometry:?}: {g}");
        }
    }

    #[test]
    fn refuses_bad_inputs() {
        let vs = VarStore::new(Device::Cpu);
        let attn = cfg(Geometry::Structured { dims: 2 })
            .init(&vs.root())
            .unwrap();
        let z = Tensor::randn([1, 6, 6], (Kind::Float, Device::Cpu));
        assert!(attn.forward(&z, Some(&[2, 3]), None).is_ok());
        assert!(attn.forward(&z, None, None).is_err());
        assert!(attn.forward(&z, Some(&[3, 3]), None).is_err());
        assert!(attn.forward(&z, Some(&[6]), None).is_err());
        let wide = Tensor::randn([1, 6, 5], (Kind::Float, Device::Cpu));
        assert!(attn.forward(&wide, Some(&[2, 3]), None).is_err());
        assert!(PhysicsAttentionConfig {
            slice_num: 0,
            ..cfg(Geometry::Unstructured)
        }
        .init(&vs.root())
        .is_err());
    }
}
