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
    /// For a skippable step: whether to keep its update (a 0-dim bool on the device) and the
    /// skip counts before it (created at zero on the first skippable step).
    fn skip_state(&mut self, found_inf: &Tensor, all: bool) -> Result<(Tensor, Tensor)> {
        if self.skipped.is_none() {
            let n = self.names.len() as i64;
            self.skipped = Some(Tensor::f_zeros([n], (Kind::Int64, self.flat.device()))?);
        }
        if !all {
            self.skips_uniform = false;
        }
        let keep = found_inf.f_reshape([])?.f_eq(0.0)?;
        // Read (into the bias corrections) before this step's skip is counted in place.
        let skipped = self
            .skipped
            .as_ref()
            .expect("created above")
            .shallow_clone();
        Ok((keep, skipped))
    }

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
}

/// Adds this step's skip (1 where `found_inf` is non-zero) to the counts of the parameters that
/// had a gradient.
fn count_skip(skipped: &mut Tensor, found_inf: &Tensor, present: &[bool], all: bool) -> Result<()> {
    let inc = found_inf
        .f_reshape([1])?
        .f_ne(0.0)?
        .f_to_kind(Kind::Int64)?;
    let inc = if all {
        inc
    } else {
        let mask: Vec<i64> = present.iter().map(|&p| i64::from(p)).collect();
        inc.f_mul(&Tensor::from_slice(&mask).f_to_device(skipped.device())?)?
    };
    let _ = skipped.f_add_(&inc)?;
    Ok(())
}

/// The step count of the bias corrections: the steps a parameter had a gradient for (`step`,
/// this one included) less those skipped, as a float64 0-dim tensor on the device.
fn taken_steps(step: u64, skipped: &Tensor) -> Result<Tensor> {
    Ok(skipped
        .f_to_kind(Kind::Double)?
        .f_neg()?
        .f_add_scalar(step as f64)?)
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
        if grads.grads.len() != self.groups.len() {
            return Err(Error::Data(format!(
                "gradients for {} groups given to an optimizer with {}",
                grads.grads.len(),
                self.groups.len()
            )));
        }
        let _guard = tch::no_grad_guard();
        for ((g, grad), present) in self.groups.iter_mut().zip(&grads.grads).zip(&grads.present) {
            let Some(grad) = grad else { continue };
            let all = present.iter().all(|&d| d);
            let skip = match found_inf {
                Some(found) => Some(g.skip_state(found, all)?),
                None => None,
            };
            let same_step = g.steps.windows(2).all(|w| w[0] == w[1]);
            let bias = |i: usize, step: u64| -> Result<Bias<'_>> {
                Ok(match &skip {
                    None => Bias::Host(step),
                    Some((keep, skipped)) => Bias::Device {
                        step: taken_steps(step, &skipped.f_select(0, i as i64)?)?,
                        keep,
                    },
                })
            };
            if all && same_step && g.skips_uniform {
                let step = g.steps[0] + 1;
                update(&g.hp, &bias(0, step)?, grad, &mut g.slots())?;
                g.steps.iter_mut().for_each(|s| *s = step);
            } else {
                // Some parameter had no gradient, or did not at an earlier step (a model with
                // unused parameters, every step). Neighbours that have gradients and the same
                // step count share one update over their stretch of the flat buffers (the gaps
                // between them are zeros and stay zeros), so the cost is per stretch, not per
                // parameter. Non-uniform skip counts are per parameter, so they update alone.
                let all_slots = g.slots();
                let merge = skip.is_none() || g.skips_uniform;
                let mut i = 0;
                while i < g.offsets.len() {
                    if !present[i] {
                        i += 1;
                        continue;
                    }
                    let step = g.steps[i] + 1;
                    let mut j = i + 1;
                    while merge && j < g.offsets.len() && present[j] && g.steps[j] + 1 == step {
                        j += 1;
                    }
                    let off = g.offsets[i].0;
                    let numel = g.offsets[j - 1].0 + g.offsets[j - 1].1 - off;
                    let gi = grad.f_narrow(0, off, numel)?;
                    let mut slots = all_slots.narrow(off, numel)?;
                    update(&g.hp, &bias(i, step)?, &gi, &mut slots)?;
                    g.steps[i..j].iter_mut().for_each(|s| *s = step);
                    i = j;
                }
            }
            if let (Some(found), Some(skipped)) = (found_inf, &mut g.skipped) {
                count_skip(skipped, found, present, all)?;
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

/// How an update's bias corrections get their step count.
enum Bias<'a> {
    /// Known on the host: the plain step.
    Host(u64),
    /// A skippable step: the count of steps taken (a float64 0-dim tensor) and whether to keep
    /// the update (a bool 0-dim tensor), both on the device.
    Device { step: Tensor, keep: &'a Tensor },
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
/// bias corrections of the current β1 (as PyTorch computes them when a scheduler cycles β1). A
/// skippable step computes the update beside the state and keeps it only where `keep` is true.
fn update(hp: &AdamWConfig, bias: &Bias<'_>, grad: &Tensor, slots: &mut Slots) -> Result<()> {
    let (b1, b2) = hp.betas;
    match bias {
        Bias::Host(step) => {
            let t = *step as f64;
            let corrections = Corrections::Host(1.0 - b1.powf(t), (1.0 - b2.powf(t)).sqrt());
            update_in_place(hp, corrections, grad, slots)
        }
        Bias::Device { step, keep } => {
            // 1 − β^t with t on the device.
            let one_minus = |beta: f64| -> Result<Tensor> {
                Ok(Tensor::f_pow_scalar(beta, step)?
                    .f_neg()?
                    .f_add_scalar(1.0)?)
            };
            let corrections = Corrections::Device(one_minus(b1)?, one_minus(b2)?.f_sqrt()?);
            let mut new = slots.map(Tensor::f_detach_copy)?;
            update_in_place(hp, corrections, grad, &mut new)?;
            for (dst, new) in slots.all().zip(new.all()) {
                let chosen = new.f_where_self(keep, dst)?;
                dst.f_copy_(&chosen)?;
            }
            Ok(())
        }
    }
}

/// The bias corrections 1 − β1^t and √(1 − β2^t), as host numbers or device tensors.
enum Corrections {
    Host(f64, f64),
    Device(Tensor, Tensor),
}

fn update_in_place(
    hp: &AdamWConfig,
    corrections: Corrections,
    grad: &Tensor,
    s: &mut Slots,
) -> Result<()> {
    let (b1, b2) = hp.betas;
    let l2_grad;
    let grad = if hp.l2_weight_decay {
        l2_grad = grad.f_add(&s.param.f_mul_scalar(hp.weight_decay)?)?;
        &l2_grad
    } else {
        let _ = s.param.f_mul_scalar_(1.0 - hp.lr * hp.weight_decay)?;
        grad
    };
    let _ = s.exp_avg.f_lerp_(grad, 1.0 - b1)?;
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
    let step = match corrections {
        Corrections::Host(bias1, bias2_sqrt) => {
            let _ = denom.f_div_scalar_(bias2_sqrt)?;
            s.exp_avg.f_mul_scalar(-hp.lr / bias1)?
        }
        Corrections::Device(bias1, bias2_sqrt) => {
            let _ = denom.f_div_(&bias2_sqrt)?;
            s.exp_avg
                .f_mul(&bias1.f_reciprocal()?.f_mul_scalar(-hp.lr)?)?
        }
    };
    let _ = denom.f_add_scalar_(hp.eps)?;
    let _ = s.param.f_addcdiv_(&step, &denom)?;
    Ok(())
}
