//! AdamW (decoupled weight decay), numerically PyTorch's `torch.optim.AdamW`, with parameter
//! groups and a state that can be saved and restored; with `l2_weight_decay` it is
//! `torch.optim.Adam` (the decay added to the gradient), the optimizer of the FNO scripts.
//!
//! Why not tch's optimizer: it cannot save its state, and it launches several kernels per
//! parameter. Here each group's parameters are re-seated as views of one flat buffer, so a step
//! is a constant dozen kernels whatever the number of parameters, and needs no host read.
//!
//! Float16 training skips the steps whose gradients overflowed ([`AdamW::step_unless`],
//! `GradScaler.step`'s semantics) without a host read: the update is computed and then discarded
//! on the device, and the bias corrections count only the steps taken, from per-parameter device
//! counters of skipped steps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// AdamW's hyper-parameters (PyTorch's defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdamWConfig {
    /// Learning rate (the schedule overrides it every step).
    pub lr: f64,
    /// (β1, β2); β1 is overridden by a momentum-cycling schedule.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay λ: p ← p (1 − lr λ).
    pub weight_decay: f64,
    /// Use the maximum of past second moments.
    pub amsgrad: bool,
    /// `torch.optim.Adam`'s weight decay instead of AdamW's: g ← g + λ p before the moments
    /// (L2 regularisation), no decoupled decay. Left out of the serialized form when false, so
    /// the configurations of earlier runs read and compare unchanged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub l2_weight_decay: bool,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            amsgrad: false,
            l2_weight_decay: false,
        }
    }
}

impl AdamWConfig {
    /// Refuses values PyTorch refuses; errors name the field under `optimizer.`.
    pub fn validate(&self) -> Result<()> {
        let bad = |k: &str, v: f64| {
            Err(Error::config(
                format!("optimizer.{k}"),
                format!("invalid value {v}"),
            ))
        };
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return bad("lr", self.lr);
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return bad("eps", self.eps);
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay", self.weight_decay);
        }
        for (k, b) in [("betas[0]", self.betas.0), ("betas[1]", self.betas.1)] {
            if !(0.0..1.0).contains(&b) {
                return bad(k, b);
            }
        }
        Ok(())
    }
}

/// Each parameter starts at a multiple of this many elements of its group's flat buffer: a
/// complex weight kept as (…, 2) real pairs is viewed as complex in the forward, which needs an
/// even storage offset, and aligned starts suit vectorised kernels. The gaps hold zeros, which
/// neither the update nor the gradient norm sees.
const ALIGN: i64 = 16;

/// One parameter group: its own hyper-parameters, its parameters and their moments.
struct Group {
    hp: AdamWConfig,
    names: Vec<String>,
    params: Vec<Tensor>,
    /// Per-parameter step counts, as PyTorch keeps them (they differ only when a parameter
    /// had no gradient at some step).
    steps: Vec<u64>,
    /// The flat parameter buffer the parameters are views of.
    flat: Tensor,
    offsets: Vec<(i64, i64)>,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    max_exp_avg_sq: Option<Tensor>,
    /// (parameters,) int64 on the device: steps each parameter had a gradient for but that
    /// [`AdamW::step_unless`] skipped. `None` until the first such step.
    skipped: Option<Tensor>,
    /// Whether every parameter's skip count is the same (every skippable step so far had a
    /// gradient for all of them), so that one count serves the whole flat buffer.
    skips_uniform: bool,
    /// Each stretch's scalars of the current step, on the device.
    scalars: Scalars,
    /// The device mask of the parameters with a gradient, for the pattern it was made for.
    mask_cache: Option<(Vec<bool>, Tensor)>,
}

/// Flat gradients of every group, gathered once per step (clipping works on them in place).
pub struct FlatGrads {
    /// One flat gradient per group; `None` where no parameter of the group has a gradient.
    grads: Vec<Option<Tensor>>,
    /// Per group, which parameters had a gradient.
    present: Vec<Vec<bool>>,
}

impl FlatGrads {
    /// The global L2 norm over every gradient, on the device.
    pub fn total_norm(&self) -> Result<Tensor> {
        let norms = self
            .grads
            .iter()
            .flatten()
            .map(|g| g.f_norm())
            .collect::<Result<Vec<_>, _>>()?;
        match norms.len() {
            0 => Err(Error::Data("no parameter has a gradient".into())),
            1 => Ok(norms.into_iter().next().expect("one norm")),
            _ => Ok(Tensor::f_stack(&norms, 0)?.f_norm()?),
        }
    }

    /// Per group, which parameters have a gradient.
    pub fn present(&self) -> &[Vec<bool>] {
        &self.present
    }

    /// The flat gradient tensors (what a loss scaler unscales in place).
    pub fn tensors_mut(&mut self) -> impl Iterator<Item = &mut Tensor> {
        self.grads.iter_mut().flatten()
    }

    /// `clip_grad_norm_`: scales every gradient by min(1, max_norm / (‖g‖ + 1e-6)) without reading
    /// the norm back to the host, and returns the norm before clipping.
    pub fn clip_norm_(&mut self, max_norm: f64) -> Result<Tensor> {
        let total = self.total_norm()?;
        let coef = crate::clip::coefficient(&total, max_norm)?;
        for g in self.grads.iter_mut().flatten() {
            let _ = g.f_mul_(&coef)?;
        }
        Ok(total)
    }
}

impl FlatGrads {
    /// Sums the gradients over the processes of a data-parallel run: `all_reduce` sums a tensor
    /// in place over them (one call per group's flat gradient, then one for the presence flags),
    /// so every process ends with the same gradients. A group without a gradient here takes
    /// part as zeros; a parameter has a gradient when it has one in any process. The flags are
    /// read back only when this process lacks some gradient (a process whose share of a step
    /// was empty): a step where every parameter has a gradient here reads nothing.
    pub(crate) fn sum_over(
        &mut self,
        opt: &AdamW,
        all_reduce: impl Fn(&Tensor) -> Result<()>,
    ) -> Result<()> {
        for (g, group) in self.grads.iter_mut().zip(&opt.groups) {
            if g.is_none() {
                *g = Some(group.flat.f_zeros_like()?);
            }
            all_reduce(g.as_ref().expect("set above"))?;
        }
        let local: Vec<f32> = self
            .present
            .iter()
            .flatten()
            .map(|&p| f32::from(u8::from(p)))
            .collect();
        let Some(first) = opt.groups.first() else {
            return Ok(());
        };
        let flags = Tensor::f_from_slice(&local)?.f_to_device(first.flat.device())?;
        all_reduce(&flags)?;
        if self.present.iter().flatten().all(|&p| p) {
            return Ok(());
        }
        let any = ono_kernels::host::to_vec_f64(&flags)?;
        let mut i = 0;
        for (mask, g) in self.present.iter_mut().zip(&mut self.grads) {
            for p in mask.iter_mut() {
                *p = any[i] > 0.0;
                i += 1;
            }
            // As a single process: a group no process has a gradient for is left alone.
            if !mask.iter().any(|&p| p) {
                *g = None;
            }
        }
        Ok(())
    }
}

impl Group {
    /// The `.skipped_steps` counts of [`AdamW::state`], if the state has them; one host read (at
    /// load time) settles whether they are uniform.
    fn load_skips(&mut self, prefix: &str, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
        let keys: Vec<String> = self
            .names
            .iter()
            .map(|n| format!("{prefix}{n}.skipped_steps"))
            .collect();
        let found: Vec<&Tensor> = keys.iter().filter_map(|k| tensors.get(k)).collect();
        if found.is_empty() {
            self.skipped = None;
            self.skips_uniform = true;
            return Ok(());
        }
        if found.len() != keys.len() || found.iter().any(|t| t.numel() != 1) {
            return Err(Error::Data(format!(
                "optimizer state has {} of the {} skip counts {}… (one number each)",
                found.len(),
                keys.len(),
                keys[0]
            )));
        }
        let parts = found
            .iter()
            .map(|t| t.f_reshape([1])?.f_to_kind(Kind::Int64))
            .collect::<Result<Vec<_>, _>>()?;
        let counts = Tensor::f_cat(&parts, 0)?;
        let host = ono_kernels::host::to_vec_i64(&counts)?;
        self.skips_uniform = host.windows(2).all(|w| w[0] == w[1]);
        self.skipped = Some(counts.f_to_device(self.flat.device())?);
        Ok(())
    }

    /// The group's values and moments, for [`update`].
    fn slots(&self) -> Slots {
        Slots {
            param: self.flat.shallow_clone(),
            exp_avg: self.exp_avg.shallow_clone(),
            exp_avg_sq: self.exp_avg_sq.shallow_clone(),
            max_exp_avg_sq: self.max_exp_avg_sq.as_ref().map(Tensor::shallow_clone),
        }
    }

    /// The stretches a step with `present` gradients updates (see [`Group::plan`]), changing
    /// nothing.
    fn stretches(&self, present: &[bool], skippable: bool) -> Vec<Stretch> {
        let all = present.iter().all(|&d| d);
        // A skippable step where some parameter lacks a gradient makes the skip counts differ.
        let uniform = self.skips_uniform && (all || !skippable);
        let same_step = self.steps.windows(2).all(|w| w[0] == w[1]);
        if all && same_step && uniform {
            return vec![Stretch {
                first: 0,
                end: self.names.len(),
                off: 0,
                numel: self.flat.numel() as i64,
            }];
        }
        // Some parameter had no gradient, or did not at an earlier step (a model with unused
        // parameters, every step). Neighbours that have gradients and the same step count share
        // one update over their stretch of the flat buffers (the gaps between them are zeros and
        // stay zeros), so the cost is per stretch, not per parameter. Non-uniform skip counts
        // are per parameter, so they update alone.
        let merge = !skippable || uniform;
        let mut stretches = Vec::new();
        let mut i = 0;
        while i < self.offsets.len() {
            if !present[i] {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while merge && j < self.offsets.len() && present[j] && self.steps[j] == self.steps[i] {
                j += 1;
            }
            let off = self.offsets[i].0;
            let numel = self.offsets[j - 1].0 + self.offsets[j - 1].1 - off;
            stretches.push(Stretch {
                first: i,
                end: j,
                off,
                numel,
            });
            i = j;
        }
        stretches
    }

    /// The host half of a step: the stretches its update covers, each parameter's step count
    /// moved on, and each stretch's scalars written to the device (only those that changed).
    fn plan(&mut self, present: &[bool], skippable: bool) -> Result<GroupPlan> {
        if present.len() != self.names.len() {
            return Err(Error::Data(format!(
                "a step planned for {} parameters of a group of {}",
                present.len(),
                self.names.len()
            )));
        }
        let all = present.iter().all(|&d| d);
        let stretches = self.stretches(present, skippable);
        if skippable {
            if self.skipped.is_none() {
                let n = self.names.len() as i64;
                self.skipped = Some(Tensor::f_zeros([n], (Kind::Int64, self.flat.device()))?);
            }
            if !all {
                self.skips_uniform = false;
            }
        }
        for (row, s) in stretches.iter().enumerate() {
            let step = self.steps[s.first] + 1;
            self.steps[s.first..s.end]
                .iter_mut()
                .for_each(|c| *c = step);
            self.scalars.write(row, &self.hp, step)?;
        }
        let count_mask = match (skippable, all) {
            (true, false) => Some(self.skip_mask(present)?),
            _ => None,
        };
        Ok(GroupPlan {
            stretches,
            skippable,
            count_mask,
        })
    }

    /// The int64 mask of the parameters with a gradient, on the device; kept while the same
    /// parameters have one, so that a step neither uploads it again nor (captured) bakes in a
    /// tensor that a later step frees.
    fn skip_mask(&mut self, present: &[bool]) -> Result<Tensor> {
        if let Some((p, t)) = &self.mask_cache {
            if p == present {
                return Ok(t.shallow_clone());
            }
        }
        let mask: Vec<i64> = present.iter().map(|&p| i64::from(p)).collect();
        let t = Tensor::f_from_slice(&mask)?.f_to_device(self.flat.device())?;
        self.mask_cache = Some((present.to_vec(), t.shallow_clone()));
        Ok(t)
    }

    /// The device half of a step: every stretch of `plan` updated from the scalars `plan`
    /// wrote, nothing read from the host.
    fn apply(&self, plan: &GroupPlan, grad: &Tensor, found_inf: Option<&Tensor>) -> Result<()> {
        let all_slots = self.slots();
        for (row, s) in plan.stretches.iter().enumerate() {
            let scalars = self.scalars.row(row)?;
            let bias = match (plan.skippable, found_inf, &self.skipped) {
                (true, Some(found), Some(skipped)) => Bias::Device {
                    taken: taken_steps(
                        &scalars.select(STEP)?,
                        &skipped.f_select(0, s.first as i64)?,
                    )?,
                    keep: found.f_reshape([])?.f_eq(0.0)?,
                },
                (false, None, _) => Bias::Host,
                _ => {
                    return Err(Error::Data(
                        "an optimizer step planned for one kind of step was applied as another"
                            .into(),
                    ))
                }
            };
            let mut slots = if s.off == 0 && s.numel == self.flat.numel() as i64 {
                self.slots()
            } else {
                all_slots.narrow(s.off, s.numel)?
            };
            let g = if s.numel == grad.numel() as i64 {
                grad.shallow_clone()
            } else {
                grad.f_narrow(0, s.off, s.numel)?
            };
            update(&self.hp, &bias, &scalars, &g, &mut slots)?;
        }
        if let (Some(found), Some(skipped)) = (found_inf, &self.skipped) {
            count_skip(skipped, found, plan.count_mask.as_ref())?;
        }
        Ok(())
    }
}

/// Adds this step's skip (1 where `found_inf` is non-zero) to the counts of the parameters that
/// had a gradient (all of them without a `mask`).
fn count_skip(skipped: &Tensor, found_inf: &Tensor, mask: Option<&Tensor>) -> Result<()> {
    let inc = found_inf
        .f_reshape([1])?
        .f_ne(0.0)?
        .f_to_kind(Kind::Int64)?;
    let inc = match mask {
        Some(m) => inc.f_mul(m)?,
        None => inc,
    };
    let _ = skipped.shallow_clone().f_add_(&inc)?;
    Ok(())
}

/// The step count of the bias corrections: the steps a parameter had a gradient for (`step`,
/// this one included, float64 on the device) less those skipped.
fn taken_steps(step: &Tensor, skipped: &Tensor) -> Result<Tensor> {
    Ok(step.f_sub(&skipped.f_to_kind(Kind::Double)?)?)
}

/// One stretch of a group's flat buffers that a single update covers: parameters
/// `first..end`, every one with a gradient and one step count.
#[derive(Debug, Clone, PartialEq)]
struct Stretch {
    first: usize,
    end: usize,
    off: i64,
    numel: i64,
}

/// What a step of one group updates: fixed by which parameters had gradients (and, under
/// float16, how the skips went), not by the step's values.
#[derive(Debug)]
struct GroupPlan {
    stretches: Vec<Stretch>,
    skippable: bool,
    count_mask: Option<Tensor>,
}

/// The host half of an optimizer step ([`AdamW::plan`]): which stretches of the flat buffers
/// the update covers, with their step counts moved on and their scalars (learning rate, β1,
/// bias corrections) written to the device. [`AdamW::apply`] then runs on the device alone, so
/// that a captured update replays with each step's own values. Two plans of the same
/// [`shape`](StepPlan::shape) make the same kernels.
#[derive(Debug)]
pub struct StepPlan {
    groups: Vec<Option<GroupPlan>>,
    /// The parameters with gradients it was planned for.
    present: Vec<Vec<bool>>,
}

/// The host-side counters of an [`AdamW`] ([`AdamW::host_state`]).
#[derive(Debug, Clone)]
pub struct HostState(Vec<(Vec<u64>, bool)>);

/// The structure of a [`StepPlan`]: what a captured update depends on. Per group (`None`: no
/// gradient), its stretches' parameter ranges and whether it may skip.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlanShape(Vec<Option<GroupShape>>);

type GroupShape = (Vec<(usize, usize)>, bool);

impl StepPlan {
    /// The plan's structure (its stretches and whether it may skip).
    pub fn shape(&self) -> PlanShape {
        PlanShape(
            self.groups
                .iter()
                .map(|g| {
                    g.as_ref().map(|g| {
                        let s = g.stretches.iter().map(|s| (s.first, s.end)).collect();
                        (s, g.skippable)
                    })
                })
                .collect(),
        )
    }
}

/// Indices into a stretch's row of [`Scalars`].
const DECAY: i64 = 0;
const LERP: i64 = 1;
const STEP_SIZE: i64 = 2;
const BIAS2_SQRT: i64 = 3;
const NEG_LR: i64 = 4;
const STEP: i64 = 5;
const BETA1: i64 = 6;
const SCALARS: usize = 7;

/// Each stretch's per-step scalars as float64 on the device, one row per stretch: what an
/// update reads instead of host numbers, so that the same kernels serve every step (and a
/// captured step). A host copy of what was last written spares the writes that would not
/// change anything (the learning rate of a constant schedule, β1 without momentum cycling).
struct Scalars {
    device: Tensor,
    written: Vec<[f64; SCALARS]>,
}

impl Scalars {
    fn new(rows: usize, device: tch::Device) -> Result<Self> {
        Ok(Self {
            device: Tensor::f_zeros([rows as i64, SCALARS as i64], (Kind::Double, device))?,
            written: vec![[f64::NAN; SCALARS]; rows],
        })
    }

    /// Row `row` for a step numbered `step` (1 for the first) under `hp`: the values PyTorch's
    /// single-tensor AdamW computes on the host, computed here the same way.
    fn write(&mut self, row: usize, hp: &AdamWConfig, step: u64) -> Result<()> {
        let (b1, b2) = hp.betas;
        let t = step as f64;
        let bias1 = 1.0 - b1.powf(t);
        let values = [
            1.0 - hp.lr * hp.weight_decay,
            1.0 - b1,
            -hp.lr / bias1,
            (1.0 - b2.powf(t)).sqrt(),
            -hp.lr,
            t,
            b1,
        ];
        let old = &mut self.written[row];
        for (c, (&v, o)) in values.iter().zip(old.iter_mut()).enumerate() {
            if v.to_bits() != o.to_bits() {
                let _ = self
                    .device
                    .f_select(0, row as i64)?
                    .f_select(0, c as i64)?
                    .f_fill_(v)?;
                *o = v;
            }
        }
        Ok(())
    }

    /// Forgets what was written, so that the next writes rewrite every value.
    fn forget(&mut self) {
        self.written
            .iter_mut()
            .for_each(|r| *r = [f64::NAN; SCALARS]);
    }

    fn row(&self, row: usize) -> Result<Row> {
        Ok(Row(self.device.f_select(0, row as i64)?))
    }
}

/// One stretch's scalars on the device.
struct Row(Tensor);

impl Row {
    fn select(&self, i: i64) -> Result<Tensor> {
        Ok(self.0.f_select(0, i)?)
    }
}

/// The optimizer.
pub struct AdamW {
    groups: Vec<Group>,
}

/// The parameters of one group, by name, and its hyper-parameters.
pub struct GroupSpec {
    /// (name, parameter) pairs; the names key the saved state.
    pub params: Vec<(String, Tensor)>,
    /// The group's hyper-parameters.
    pub config: AdamWConfig,
}

impl AdamW {
    /// One group holding every trainable variable of `vs`, sorted by name.
    pub fn new(vs: &tch::nn::VarStore, config: AdamWConfig) -> Result<Self> {
        let trainable = vs.trainable_variables();
        let mut params: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        debug_assert_eq!(params.len(), trainable.len());
        Self::with_groups(vec![GroupSpec { params, config }])
    }

    /// Several groups (for example without weight decay on norms and biases).
    ///
    /// The parameters' storage is moved into one flat buffer per group; the tensors stay the same
    /// objects (the model and its VarStore see the change) and keep their values.
    pub fn with_groups(specs: Vec<GroupSpec>) -> Result<Self> {
        let mut groups = Vec::with_capacity(specs.len());
        for (gi, spec) in specs.into_iter().enumerate() {
            spec.config.validate()?;
            if spec.params.is_empty() {
                return Err(Error::config(
                    format!("optimizer.groups[{gi}]"),
                    "has no parameters",
                ));
            }
            let (kind, device) = (spec.params[0].1.kind(), spec.params[0].1.device());
            let mut offsets = Vec::with_capacity(spec.params.len());
            let mut n = 0i64;
            for (name, p) in &spec.params {
                if p.kind() != kind || p.device() != device {
                    return Err(Error::config(
                        format!("optimizer.groups[{gi}]"),
                        format!(
                            "parameter {name} is {:?} on {:?}, the group's first is {kind:?} on {device:?}",
                            p.kind(),
                            p.device()
                        ),
                    ));
                }
                if !matches!(
                    kind,
                    Kind::Float | Kind::Double | Kind::Half | Kind::BFloat16
                ) {
                    return Err(Error::config(
                        format!("optimizer.groups[{gi}]"),
                        format!("parameter {name} is not floating point ({kind:?})"),
                    ));
                }
                let numel = p.numel() as i64;
                let start = (n + ALIGN - 1) / ALIGN * ALIGN;
                offsets.push((start, numel));
                n = start + numel;
            }
            let flat = tch::no_grad(|| -> Result<Tensor> {
                let flat = Tensor::f_zeros([n], (kind, device))?;
                for ((_, p), &(off, numel)) in spec.params.iter().zip(&offsets) {
                    flat.f_narrow(0, off, numel)?
                        .f_copy_(&p.f_detach()?.f_reshape([-1])?)?;
                }
                Ok(flat)
            })?;
            let n_params = spec.params.len();
            let mut names = Vec::with_capacity(spec.params.len());
            let mut params = Vec::with_capacity(spec.params.len());
            for ((name, mut p), &(off, numel)) in spec.params.into_iter().zip(&offsets) {
                let view = flat.f_narrow(0, off, numel)?.f_view(p.size().as_slice())?;
                p.f_set_data(&view)?;
                names.push(name);
                params.push(p);
            }
            let zeros = || Tensor::f_zeros([n], (kind, device));
            groups.push(Group {
                max_exp_avg_sq: if spec.config.amsgrad {
                    Some(zeros()?)
                } else {
                    None
                },
                hp: spec.config,
                steps: vec![0; names.len()],
                names,
                params,
                flat,
                offsets,
                exp_avg: zeros()?,
                exp_avg_sq: zeros()?,
                skipped: None,
                skips_uniform: true,
                scalars: Scalars::new(n_params, device)?,
                mask_cache: None,
            });
        }
        Ok(Self { groups })
    }

    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Sets the learning rate of every group (what a scheduler does each step).
    pub fn set_lr(&mut self, lr: f64) {
        self.groups.iter_mut().for_each(|g| g.hp.lr = lr);
    }

    /// Sets β1 of every group (momentum cycling).
    pub fn set_beta1(&mut self, beta1: f64) {
        self.groups.iter_mut().for_each(|g| g.hp.betas.0 = beta1);
    }

    /// The hyper-parameters of group `i`.
    pub fn group_config(&self, i: usize) -> Option<&AdamWConfig> {
        self.groups.get(i).map(|g| &g.hp)
    }

    /// Sets every gradient to zero in place (keeps the buffers).
    pub fn zero_grad(&mut self) {
        for g in &mut self.groups {
            for p in &mut g.params {
                p.zero_grad();
            }
        }
    }

    /// The gradients of every group as flat tensors (one copy; absent gradients count as zero
    /// for clipping and are skipped by the update, as in PyTorch).
    pub fn gather_grads(&self) -> Result<FlatGrads> {
        let mut grads = Vec::with_capacity(self.groups.len());
        let mut present = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            let gs: Vec<Tensor> = g.params.iter().map(|p| p.grad()).collect();
            let mask: Vec<bool> = gs.iter().map(|t| t.defined()).collect();
            if !mask.iter().any(|&d| d) {
                grads.push(None);
            } else {
                let opts = (g.flat.kind(), g.flat.device());
                let mut parts = Vec::with_capacity(2 * gs.len());
                // One zero block per run of gaps and absent gradients, not one per parameter:
                // models with many unused parameters would otherwise launch a fill for each.
                let (mut end, mut zeros_from) = (0, 0);
                for (t, &(off, numel)) in gs.iter().zip(&g.offsets) {
                    if t.defined() {
                        if off > zeros_from {
                            parts.push(Tensor::f_zeros([off - zeros_from], opts)?);
                        }
                        parts.push(t.f_reshape([-1])?);
                        zeros_from = off + numel;
                    }
                    end = off + numel;
                }
                if end > zeros_from {
                    parts.push(Tensor::f_zeros([end - zeros_from], opts)?);
                }
                grads.push(Some(Tensor::f_cat(&parts, 0)?));
            }
            present.push(mask);
        }
        Ok(FlatGrads { grads, present })
    }

    /// One AdamW step from the current gradients, optionally clipped to a global norm first.
    /// Returns the gradient norm before clipping (on the device) when clipping.
    pub fn step(&mut self, max_grad_norm: Option<f64>) -> Result<Option<Tensor>> {
        let mut grads = self.gather_grads()?;
        let norm = match max_grad_norm {
            Some(m) => Some(grads.clip_norm_(m)?),
            None => None,
        };
        self.step_with(&grads)?;
        Ok(norm)
    }

    /// One AdamW step from gathered (and possibly clipped) gradients.
    pub fn step_with(&mut self, grads: &FlatGrads) -> Result<()> {
        self.step_masked(grads, None)
    }

    /// [`AdamW::step_with`] unless `found_inf` (a one-element float tensor, as a loss scaler's
    /// unscale leaves it) is non-zero: then no parameter, moment or step count changes. Decided
    /// on the device: the update is computed and selected with `where`, and the step counts of
    /// the bias corrections subtract device counters of skipped steps (saved with the state).
    pub fn step_unless(&mut self, grads: &FlatGrads, found_inf: &Tensor) -> Result<()> {
        if found_inf.numel() != 1 {
            return Err(Error::Shape {
                op: "AdamW::step_unless",
                expected: "a one-element found_inf".into(),
                got: found_inf.size(),
            });
        }
        self.step_masked(grads, Some(found_inf))
    }

    fn step_masked(&mut self, grads: &FlatGrads, found_inf: Option<&Tensor>) -> Result<()> {
        let plan = self.plan(grads, found_inf.is_some())?;
        self.apply(&plan, grads, found_inf)
    }

    /// The host half of a step on `grads` (which parameters have gradients): the step counts
    /// moved on and the step's scalars written to the device. `skippable`: the step will be
    /// applied with a `found_inf` (float16's loss scaling).
    pub fn plan(&mut self, grads: &FlatGrads, skippable: bool) -> Result<StepPlan> {
        self.plan_for(&grads.present, skippable)
    }

    /// [`AdamW::plan`] for gradients with `present` parameters (per group, per parameter), before
    /// they exist: what a captured step does before its replay.
    pub fn plan_for(&mut self, present: &[Vec<bool>], skippable: bool) -> Result<StepPlan> {
        self.check_present(present)?;
        let _guard = tch::no_grad_guard();
        let groups = self
            .groups
            .iter_mut()
            .zip(present)
            .map(|(g, p)| match p.iter().any(|&d| d) {
                true => g.plan(p, skippable).map(Some),
                false => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(StepPlan {
            groups,
            present: present.to_vec(),
        })
    }

    /// The [`shape`](StepPlan::shape) [`AdamW::plan_for`] would give now, changing nothing.
    pub fn plan_shape_for(&self, present: &[Vec<bool>], skippable: bool) -> Result<PlanShape> {
        self.check_present(present)?;
        Ok(PlanShape(
            self.groups
                .iter()
                .zip(present)
                .map(|(g, p)| {
                    p.iter().any(|&d| d).then(|| {
                        let s = g.stretches(p, skippable);
                        (s.iter().map(|s| (s.first, s.end)).collect(), skippable)
                    })
                })
                .collect(),
        ))
    }

    fn check_present(&self, present: &[Vec<bool>]) -> Result<()> {
        if present.len() != self.groups.len() {
            return Err(Error::Data(format!(
                "gradients for {} groups given to an optimizer with {}",
                present.len(),
                self.groups.len()
            )));
        }
        Ok(())
    }

    /// What [`AdamW::plan_for`] changes on the host, to undo a plan whose step did not run.
    pub fn host_state(&self) -> HostState {
        HostState(
            self.groups
                .iter()
                .map(|g| (g.steps.clone(), g.skips_uniform))
                .collect(),
        )
    }

    /// Puts back a [`AdamW::host_state`]; the device scalars are written afresh by the next
    /// plan.
    pub fn restore_host_state(&mut self, state: HostState) {
        for (g, (steps, uniform)) in self.groups.iter_mut().zip(state.0) {
            g.steps = steps;
            g.skips_uniform = uniform;
            g.scalars.forget();
        }
    }

    /// The device half of a step planned by [`AdamW::plan`] on gradients with the same
    /// parameters present: every update reads its step's values from the device, so this makes
    /// the same kernels at every step. With `found_inf` (non-zero: skip) the plan must be
    /// skippable.
    pub fn apply(
        &self,
        plan: &StepPlan,
        grads: &FlatGrads,
        found_inf: Option<&Tensor>,
    ) -> Result<()> {
        if plan.groups.len() != self.groups.len() || grads.grads.len() != self.groups.len() {
            return Err(Error::Data(format!(
                "a plan of {} groups and gradients of {} given to an optimizer with {}",
                plan.groups.len(),
                grads.grads.len(),
                self.groups.len()
            )));
        }
        if plan.present != grads.present {
            return Err(Error::Data(
                "the parameters with gradients differ from those the step was planned for (a \
                 step that is not graph-safe)"
                    .into(),
            ));
        }
        let _guard = tch::no_grad_guard();
        for ((g, p), grad) in self.groups.iter().zip(&plan.groups).zip(&grads.grads) {
            match (p, grad) {
                (Some(p), Some(grad)) => g.apply(p, grad, found_inf)?,
                (None, None) => {}
                _ => {
                    return Err(Error::Data(
                        "the gradients present differ from those the step was planned for".into(),
                    ))
                }
            }
        }
        Ok(())
    }

    /// The optimizer state as named tensors (`<prefix><param>.exp_avg`, `.exp_avg_sq`,
    /// `.max_exp_avg_sq`, and `.skipped_steps` once [`AdamW::step_unless`] has run) and
    /// per-parameter step counts, for a checkpoint.
    pub fn state(&self, prefix: &str) -> Result<(BTreeMap<String, Tensor>, AdamWState)> {
        let mut tensors = BTreeMap::new();
        let mut steps = BTreeMap::new();
        let mut groups = Vec::new();
        for g in &self.groups {
            for (i, name) in g.names.iter().enumerate() {
                let (off, numel) = g.offsets[i];
                let shape = g.params[i].size();
                let slice = |t: &Tensor| -> Result<Tensor> {
                    Ok(t.f_narrow(0, off, numel)?
                        .f_reshape(shape.as_slice())?
                        .f_detach_copy()?)
                };
                tensors.insert(format!("{prefix}{name}.exp_avg"), slice(&g.exp_avg)?);
                tensors.insert(format!("{prefix}{name}.exp_avg_sq"), slice(&g.exp_avg_sq)?);
                if let Some(t) = &g.max_exp_avg_sq {
                    tensors.insert(format!("{prefix}{name}.max_exp_avg_sq"), slice(t)?);
                }
                if let Some(t) = &g.skipped {
                    let count = t.f_select(0, i as i64)?.f_detach_copy()?;
                    tensors.insert(format!("{prefix}{name}.skipped_steps"), count);
                }
                steps.insert(name.clone(), g.steps[i]);
            }
            groups.push(g.hp.clone());
        }
        Ok((tensors, AdamWState { steps, groups }))
    }

    /// Restores [`AdamW::state`]; every parameter's moments must be present with its shape, and
    /// skip counts for all of a group's parameters or none.
    pub fn load_state(
        &mut self,
        prefix: &str,
        tensors: &BTreeMap<String, Tensor>,
        state: &AdamWState,
    ) -> Result<()> {
        if state.groups.len() != self.groups.len() {
            return Err(Error::Data(format!(
                "optimizer state has {} groups, the optimizer {}",
                state.groups.len(),
                self.groups.len()
            )));
        }
        let _guard = tch::no_grad_guard();
        for (g, hp) in self.groups.iter_mut().zip(&state.groups) {
            if hp.amsgrad != g.hp.amsgrad {
                return Err(Error::Data(
                    "optimizer state and optimizer disagree on amsgrad".into(),
                ));
            }
            g.hp = hp.clone();
            for (i, name) in g.names.iter().enumerate() {
                let (off, numel) = g.offsets[i];
                let shape = g.params[i].size();
                let fill = |suffix: &str, dst: &Tensor| -> Result<()> {
                    let key = format!("{prefix}{name}.{suffix}");
                    let src = tensors
                        .get(&key)
                        .ok_or_else(|| Error::Data(format!("optimizer state lacks {key}")))?;
                    if src.size() != shape {
                        return Err(Error::Shape {
                            op: "AdamW::load_state",
                            expected: format!("{key} of shape {shape:?}"),
                            got: src.size(),
                        });
                    }
                    dst.f_narrow(0, off, numel)?
                        .f_copy_(&src.f_reshape([-1])?.f_to_kind(dst.kind())?)?;
                    Ok(())
                };
                fill("exp_avg", &g.exp_avg)?;
                fill("exp_avg_sq", &g.exp_avg_sq)?;
                if let Some(t) = &g.max_exp_avg_sq {
                    fill("max_exp_avg_sq", t)?;
                }
                g.steps[i] = *state.steps.get(name).ok_or_else(|| {
                    Error::Data(format!("optimizer state lacks the step of {name}"))
                })?;
            }
            g.load_skips(prefix, tensors)?;
        }
        Ok(())
    }
}

/// The host-side part of the optimizer state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdamWState {
    /// Step count per parameter name.
    pub steps: BTreeMap<String, u64>,
    /// Each group's hyper-parameters as last set.
    pub groups: Vec<AdamWConfig>,
}

/// How an update's bias corrections are had.
enum Bias {
    /// From the stretch's scalars, as written on the host.
    Host,
    /// A skippable step: the count of steps taken (a float64 0-dim tensor) and whether to keep
    /// the update (a bool 0-dim tensor), both on the device.
    Device { taken: Tensor, keep: Tensor },
}

/// A parameter's values and moments: handles on (views of) a group's flat buffers, so that
/// in-place updates reach the buffers.
struct Slots {
    param: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    max_exp_avg_sq: Option<Tensor>,
}

impl Slots {
    fn narrow(&self, off: i64, numel: i64) -> Result<Self> {
        self.map(|t| t.f_narrow(0, off, numel))
    }

    fn map(&self, f: impl Fn(&Tensor) -> Result<Tensor, tch::TchError>) -> Result<Self> {
        Ok(Self {
            param: f(&self.param)?,
            exp_avg: f(&self.exp_avg)?,
            exp_avg_sq: f(&self.exp_avg_sq)?,
            max_exp_avg_sq: self.max_exp_avg_sq.as_ref().map(&f).transpose()?,
        })
    }

    fn all(&mut self) -> impl Iterator<Item = &mut Tensor> {
        [&mut self.param, &mut self.exp_avg, &mut self.exp_avg_sq]
            .into_iter()
            .chain(self.max_exp_avg_sq.as_mut())
    }
}

/// PyTorch's single-tensor AdamW (or, with `l2_weight_decay`, Adam) update, in place, with the
/// bias corrections of the current β1 (as PyTorch computes them when a scheduler cycles β1),
/// every per-step value read from the stretch's scalars on the device. A skippable step
/// computes the update beside the state and keeps it only where `keep` is true.
fn update(
    hp: &AdamWConfig,
    bias: &Bias,
    scalars: &Row,
    grad: &Tensor,
    slots: &mut Slots,
) -> Result<()> {
    match bias {
        Bias::Host => {
            let corrections = Corrections {
                step_size: scalars.select(STEP_SIZE)?,
                bias2_sqrt: scalars.select(BIAS2_SQRT)?,
            };
            update_in_place(hp, scalars, corrections, grad, slots)
        }
        Bias::Device { taken, keep } => {
            // 1 − β^t with t on the device.
            let one_minus = |beta: &Tensor| -> Result<Tensor> {
                Ok(beta.f_pow(taken)?.f_neg()?.f_add_scalar(1.0)?)
            };
            let b2 = Tensor::f_scalar_tensor(hp.betas.1, (Kind::Double, taken.device()))?;
            let bias1 = one_minus(&scalars.select(BETA1)?)?;
            let corrections = Corrections {
                step_size: scalars.select(NEG_LR)?.f_div(&bias1)?,
                bias2_sqrt: one_minus(&b2)?.f_sqrt()?,
            };
            let mut new = slots.map(Tensor::f_detach_copy)?;
            update_in_place(hp, scalars, corrections, grad, &mut new)?;
            for (dst, new) in slots.all().zip(new.all()) {
                let chosen = new.f_where_self(keep, dst)?;
                dst.f_copy_(&chosen)?;
            }
            Ok(())
        }
    }
}

/// The bias-corrected step size −lr / (1 − β1^t) and √(1 − β2^t), float64 0-dim tensors.
struct Corrections {
    step_size: Tensor,
    bias2_sqrt: Tensor,
}

fn update_in_place(
    hp: &AdamWConfig,
    scalars: &Row,
    corrections: Corrections,
    grad: &Tensor,
    s: &mut Slots,
) -> Result<()> {
    let b2 = hp.betas.1;
    let l2_grad;
    let grad = if hp.l2_weight_decay {
        l2_grad = grad.f_add(&s.param.f_mul_scalar(hp.weight_decay)?)?;
        &l2_grad
    } else {
        let _ = s.param.f_mul_(&scalars.select(DECAY)?)?;
        grad
    };
    // lerp wants its weight in the moments' kind.
    let weight = scalars.select(LERP)?.f_to_kind(s.exp_avg.kind())?;
    let _ = s.exp_avg.f_lerp_tensor_(grad, &weight)?;
    let _ = s.exp_avg_sq.f_mul_scalar_(b2)?;
    let _ = s
        .exp_avg_sq
        .f_addcmul_(grad, &grad.f_mul_scalar(1.0 - b2)?)?;
    let second = match &mut s.max_exp_avg_sq {
        Some(m) => {
            m.f_copy_(&m.f_maximum(&s.exp_avg_sq)?)?;
            m.shallow_clone()
        }
        None => s.exp_avg_sq.shallow_clone(),
    };
    let mut denom = second.f_sqrt()?;
    let _ = denom.f_div_(&corrections.bias2_sqrt)?;
    let step = s.exp_avg.f_mul(&corrections.step_size)?;
    let _ = denom.f_add_scalar_(hp.eps)?;
    let _ = s.param.f_addcdiv_(&step, &denom)?;
    Ok(())
}
