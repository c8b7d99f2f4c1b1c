//! The training step as a CUDA graph (`graphs` in the experiment file): each optimizer step's
//! kernels recorded once per shape and launched again as one graph, so that a small step is no
//! longer bound by kernel launches and the host code between them.
//!
//! # The invariant
//! A step run through a graph trains exactly what the plain step trains: the same parameters,
//! optimizer state, losses and checkpoints (bit-identical where the kernels are deterministic).
//! What a step must keep for that (being *graph-safe*), since a replay reruns the recorded
//! kernels on the recorded memory and none of the host code between them:
//! - **inputs in static buffers**: each step's tensors (its [`StepBatch`] and the regime's
//!   extras) are copied into buffers made at the first step of their shape, and the step reads
//!   those;
//! - **per-step values as device data**: AdamW's learning rate, β1 and bias corrections
//!   ([`AdamW::plan_for`](crate::adamw::AdamW::plan_for) writes them before the step), the
//!   health checks' step label ([`ono_kernels::health`]), the loss scale and the EMA statistics
//!   (which were on the device already); state is updated in place;
//! - **host effects repeated from the record**: what the step's host code did at its first run
//!   (which parameters had gradients, how many losses it queued and for how many samples) is
//!   recorded, and every later step of that shape repeats it: the optimizer's step counts move
//!   on by the recorded plan, and the queued losses are the graph's outputs with the recorded
//!   sample counts;
//! - **randomness**: torch's generator is reseeded before the step, as in the plain step; a
//!   replay reads the generator's seed and offset when it launches.
//!
//! `graphs = "emulate"` runs exactly this discipline without capturing (on any device, the CPU
//! included): static buffers, device-side values, the plan and the queued losses taken from the
//! record. The tests compare it with the plain step for every architecture; a step whose host
//! code differs from its first run (other gradients, other losses) fails there with an error.
//!
//! # The rule for shapes
//! The first step of a shape (the shapes and kinds of its tensors, its micro-batches and the
//! regime's variant) runs plainly and is recorded: the warm-up (cuBLAS handles, lazily made
//! buffers, the health sites). The second is captured and replayed, and every later one
//! replayed. At most [`MAX_GRAPHS`] shapes are kept per run (a full batch and an epoch's last,
//! smaller one; twice that for the per-time-step regime, whose first time step counts its
//! samples); steps of further shapes run plainly. A step whose optimizer plan would differ from
//! the recorded one (a parameter gaining or losing its gradient) runs plainly and is recorded
//! afresh, its graph dropped.
//!
//! # Where a step is not graph-safe
//! [`resolve`] says why and, under `auto`, trains plainly: a process that trains several
//! micro-batches per step (`accumulate_steps > 1`: it reseeds torch's generator between them,
//! inside the step). A process of a data-parallel or point-sharded launch trains one, seeded
//! before the step, and its collectives (the gradients' sum, the EMA statistics, the losses) are
//! captured inside the graph with the rest: NCCL's collectives are graph-safe, Gloo's run on the
//! CPU, where steps are only emulated.
//! Under `auto` a capture that fails on the device (a model that reads the device inside its
//! step) is undone and the run goes on plainly, saying why once.

use std::collections::HashMap;

use ono_dist::graph::CudaGraph;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::adamw::PlanShape;
use crate::step::{MicroBatch, PendingLoss, StepBatch, StepRunner};
use crate::{Error, Result};

/// `graphs` of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Graphs {
    /// Captured on CUDA where the step is graph-safe; otherwise plain, the reason said.
    #[default]
    Auto,
    /// Captured; a run that cannot be is refused with the reason.
    On,
    /// Plain steps.
    Off,
    /// The graph-safe step without capture, on any device (see the module documentation).
    Emulate,
}

impl std::fmt::Display for Graphs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
            Self::Emulate => "emulate",
        })
    }
}

impl std::str::FromStr for Graphs {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            "emulate" => Ok(Self::Emulate),
            _ => Err(Error::config(
                "graphs",
                format!("`{s}` is not auto, on, off or emulate"),
            )),
        }
    }
}

/// Shapes kept per run (see the module documentation).
pub const MAX_GRAPHS: usize = 4;

/// How graph-safe steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// Captured and replayed on this CUDA device.
    Cuda(usize),
    /// Run eagerly under the graph discipline.
    Emulated,
}

/// The checks `graphs` needs from the experiment alone: `on` needs a CUDA device, `on` and
/// `emulate` a step of one micro-batch per process.
pub fn check_config(graphs: Graphs, device: Device, accumulate_steps: u64) -> Result<()> {
    if matches!(graphs, Graphs::On | Graphs::Emulate) && accumulate_steps > 1 {
        return Err(Error::config(
            "graphs",
            format!("`{graphs}`: {}", MICRO_BATCHES),
        ));
    }
    if graphs == Graphs::On && !matches!(device, Device::Cuda(_)) {
        return Err(Error::config(
            "graphs",
            format!(
                "`on` needs a CUDA device; this run is on {device:?} (`emulate` runs the \
                 graph-safe step on any device)"
            ),
        ));
    }
    Ok(())
}

const MICRO_BATCHES: &str = "a step of several micro-batches in one process reseeds torch's \
     generator between them, inside the step (accumulate_steps > 1)";

/// The engine of a run (none: plain steps), and what to say about it. `accumulate`: the
/// micro-batches each process trains per step.
pub fn resolve(
    graphs: Graphs,
    device: Device,
    accumulate: u64,
) -> Result<(Option<Engine>, Option<String>)> {
    let unsafe_why = (accumulate > 1).then_some(MICRO_BATCHES);
    let cuda = match device {
        Device::Cuda(i) => Some(i),
        _ => None,
    };
    match (graphs, unsafe_why, cuda) {
        (Graphs::Off, ..) | (Graphs::Auto, _, None) => Ok((None, None)),
        (Graphs::Auto, Some(why), Some(_)) => {
            Ok((None, Some(format!("graphs: plain steps ({why})"))))
        }
        (Graphs::On | Graphs::Emulate, Some(why), _) => {
            Err(Error::config("graphs", format!("`{graphs}`: {why}")))
        }
        (Graphs::Emulate, None, _) => Ok((
            Some(Engine::Emulated),
            Some("graphs: emulated (the graph-safe step, run without capture)".into()),
        )),
        (Graphs::On, None, None) => {
            check_config(graphs, device, 1)?;
            unreachable!("check_config refuses `on` off CUDA")
        }
        (Graphs::On | Graphs::Auto, None, Some(i)) => match ono_dist::graph::available(i) {
            Ok(()) => Ok((
                Some(Engine::Cuda(i)),
                Some(format!(
                    "graphs: each shape's step (or forward) captured on cuda:{i} at its second run, then replayed"
                )),
            )),
            Err(e) if graphs == Graphs::Auto => {
                Ok((None, Some(format!("graphs: plain steps ({e})"))))
            }
            Err(e) => Err(Error::config("graphs", e.to_string())),
        },
    }
}

/// A step body whose inputs are static already, run under the graph discipline by its engine:
/// emulated, it runs as it is; on CUDA its first run is captured (and then launched) and every
/// later one launched from the graph. What `bench_step` times; [`StepGraphs`] adds the static
/// buffers and the record a trainer's step needs.
pub struct Replayer {
    engine: Engine,
    graph: Option<CudaGraph>,
}

impl Replayer {
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            graph: None,
        }
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Runs `body` (see [`Replayer`]).
    pub fn run(&mut self, body: impl FnOnce() -> Result<()>) -> Result<()> {
        match (self.engine, &self.graph) {
            (Engine::Emulated, _) => body(),
            (Engine::Cuda(_), Some(g)) => Ok(g.replay()?),
            (Engine::Cuda(device), None) => {
                let (g, ()) = CudaGraph::capture(device, body)?;
                g.replay()?;
                self.graph = Some(g);
                Ok(())
            }
        }
    }
}

/// A step's shape: what a graph is valid for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The micro-batches' tensor slots, then the extras.
    tensors: Signature,
    /// Samples in the whole step (its micro-batches' shares follow from it).
    samples: i64,
    /// Per micro-batch: its first sample, index and weight (bits), which the step's host code
    /// reads.
    micros: Vec<(i64, u64, Option<u64>)>,
    variant: u64,
}

impl Key {
    fn of(batch: &StepBatch, extras: &[Tensor], (variant, _pass): (u64, u64)) -> Self {
        let mut slots: Vec<Option<&Tensor>> = batch
            .micros
            .iter()
            .flat_map(|m| m.batch.tensors())
            .collect();
        slots.extend(extras.iter().map(Some));
        Self {
            tensors: signature(&slots),
            samples: batch.samples,
            micros: batch
                .micros
                .iter()
                .map(|m| (m.first, m.index, m.weight.map(f64::to_bits)))
                .collect(),
            variant,
        }
    }
}

/// What a step's host code did at its first run.
struct Record {
    /// Per group, which parameters had gradients.
    present: Vec<Vec<bool>>,
    plan: PlanShape,
    /// Per queued loss: its batch and new samples.
    losses: Vec<(i64, i64)>,
}

/// A step's static buffers: copies of its batch and extras, which every later step of its
/// shape is copied into.
struct Statics {
    batch: StepBatch,
    extras: Vec<Tensor>,
}

impl Statics {
    fn copy_of(batch: &StepBatch, extras: &[Tensor]) -> Result<Self> {
        let _guard = tch::no_grad_guard();
        let micros = batch
            .micros
            .iter()
            .map(|m| {
                Ok(MicroBatch {
                    batch: m.batch.try_map(|t| Ok::<_, Error>(t.f_detach_copy()?))?,
                    first: m.first,
                    index: m.index,
                    weight: m.weight,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            batch: StepBatch {
                micros,
                samples: batch.samples,
            },
            extras: extras
                .iter()
                .map(Tensor::f_detach_copy)
                .collect::<std::result::Result<_, _>>()?,
        })
    }

    /// Copies `batch` and `extras` (of this shape) into the buffers.
    fn load(&self, batch: &StepBatch, extras: &[Tensor]) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (dst, src) in self.batch.micros.iter().zip(&batch.micros) {
            for (d, s) in dst.batch.tensors().into_iter().zip(src.batch.tensors()) {
                if let (Some(d), Some(s)) = (d, s) {
                    d.shallow_clone().f_copy_(s)?;
                }
            }
        }
        for (d, s) in self.extras.iter().zip(extras) {
            d.shallow_clone().f_copy_(s)?;
        }
        Ok(())
    }
}

/// One shape's buffers, record and graph.
struct Entry {
    statics: Statics,
    record: Record,
    /// The graph and its queued-loss outputs, once captured.
    graph: Option<(CudaGraph, Vec<Tensor>)>,
}

/// The body of an optimizer step: begin, forward and backward of its micro-batches, finish.
pub(crate) type StepBody<'b> =
    dyn FnMut(&mut StepRunner<'_>, &StepBatch, &[Tensor]) -> Result<()> + 'b;

/// What a run's graphs did so far (a field of the run's summary line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphStats {
    /// How the steps ran.
    pub engine: Option<Engine>,
    /// Why graphs were turned off mid-run (a capture that failed under `auto`), if they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fell_back: Option<String>,
    /// Step shapes recorded (at most [`MAX_GRAPHS`]).
    pub shapes: usize,
    /// Steps run plainly to record a shape (the first of each, and any whose plan changed).
    pub recorded: u64,
    /// Steps captured (on CUDA).
    pub captured: u64,
    /// Steps replayed from a record: launched as a graph, or emulated.
    pub replayed: u64,
    /// Steps run plainly because graphs were off for them (shapes beyond the limit, or after a
    /// failed capture).
    pub plain: u64,
}

/// A run's graphs, one per step shape.
pub struct StepGraphs {
    stats: GraphStats,
    engine: Engine,
    /// Under `auto`: a failed capture turns graphs off for the run instead of failing it.
    fall_back: bool,
    entries: HashMap<Key, Entry>,
    /// Why graphs were turned off mid-run, not yet said.
    news: Option<String>,
    /// Turned off for the rest of the run.
    off: bool,
}

impl StepGraphs {
    /// Graphs run by `engine`; `fall_back` under `auto`.
    pub fn new(engine: Engine, fall_back: bool) -> Self {
        Self {
            stats: GraphStats::default(),
            engine,
            fall_back,
            entries: HashMap::new(),
            news: None,
            off: false,
        }
    }

    /// What the graphs did so far.
    pub fn stats(&self) -> GraphStats {
        GraphStats {
            shapes: self.entries.len(),
            engine: Some(self.engine),
            ..self.stats.clone()
        }
    }

    /// What to tell the user since the last call (a capture that failed and why).
    pub fn take_news(&mut self) -> Option<String> {
        self.news.take()
    }

    /// Runs one optimizer step of `batch` (with the regime's `extras`, and its `variant` of the
    /// step's host code) through `body`, as the module documentation says.
    pub(crate) fn run(
        &mut self,
        runner: &mut StepRunner<'_>,
        batch: &StepBatch,
        extras: &[Tensor],
        variant: (u64, u64),
        body: &mut StepBody<'_>,
    ) -> Result<()> {
        if self.off {
            self.stats.plain += 1;
            return body(runner, batch, extras);
        }
        let key = Key::of(batch, extras, variant);
        let Some(entry) = self.entries.get_mut(&key) else {
            if self.entries.len() >= MAX_GRAPHS {
                self.stats.plain += 1;
                return body(runner, batch, extras);
            }
            let statics = Statics::copy_of(batch, extras)?;
            let record = record(runner, &statics, body)?;
            self.stats.recorded += 1;
            self.entries.insert(
                key,
                Entry {
                    statics,
                    record,
                    graph: None,
                },
            );
            return Ok(());
        };
        entry.statics.load(batch, extras)?;
        let skippable = runner.scaler.is_some();
        let rec = &entry.record;
        if runner.opt.plan_shape_for(&rec.present, skippable)? != rec.plan {
            entry.graph = None;
            entry.record = record(runner, &entry.statics, body)?;
            self.stats.recorded += 1;
            return Ok(());
        }
        let before = runner.opt.host_state();
        let plan = runner.opt.plan_for(&rec.present, skippable)?;
        let start = runner.pending.len();
        let outputs = match (self.engine, &entry.graph) {
            (Engine::Emulated, _) => {
                runner.planned = Some(plan);
                body(runner, &entry.statics.batch, &entry.statics.extras)?;
                let ran: Vec<Tensor> = runner.pending.drain(start..).map(|p| p.loss).collect();
                if ran.len() != rec.losses.len() {
                    return Err(Error::Data(format!(
                        "a step queued {} losses where its first run of this shape queued {} (a \
                         step that is not graph-safe)",
                        ran.len(),
                        rec.losses.len()
                    )));
                }
                ran
            }
            (Engine::Cuda(_), Some((graph, outputs))) => {
                graph.replay()?;
                copies(outputs)?
            }
            (Engine::Cuda(device), None) => {
                runner.planned = Some(plan);
                let statics = &entry.statics;
                let captured = CudaGraph::capture(device, || -> Result<Vec<Tensor>> {
                    body(runner, &statics.batch, &statics.extras)?;
                    Ok(runner.pending.drain(start..).map(|p| p.loss).collect())
                });
                runner.planned = None;
                let outcome = match captured {
                    Ok((graph, outputs)) if outputs.len() == rec.losses.len() => {
                        self.stats.captured += 1;
                        graph.replay()?;
                        let out = copies(&outputs)?;
                        entry.graph = Some((graph, outputs));
                        Ok(out)
                    }
                    Ok((_, o)) => Err(Error::Data(format!(
                        "a captured step queued {} losses where its first run queued {}",
                        o.len(),
                        rec.losses.len()
                    ))),
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(out) => out,
                    Err(e) if !self.fall_back => return Err(e),
                    Err(e) => {
                        // Nothing of the captured step ran: undo its plan and its queued
                        // losses, and train on plainly.
                        runner.pending.truncate(start);
                        runner.opt.restore_host_state(before);
                        self.off = true;
                        self.entries.clear();
                        self.stats.fell_back = Some(e.to_string());
                        self.news = Some(format!(
                            "graphs: a step could not be captured ({e}); plain steps from here on"
                        ));
                        self.stats.plain += 1;
                        return body(runner, batch, extras);
                    }
                }
            }
        };
        self.stats.replayed += 1;
        for (loss, &(b, new_samples)) in outputs.into_iter().zip(&rec.losses) {
            runner.pending.push(PendingLoss {
                loss,
                step: runner.step,
                batch: b,
                new_samples,
            });
        }
        Ok(())
    }
}

/// Handles on the same tensors (no copy).
pub(crate) fn shallow(slots: &[Option<Tensor>]) -> Vec<Option<Tensor>> {
    slots
        .iter()
        .map(|t| t.as_ref().map(Tensor::shallow_clone))
        .collect()
}

/// The shapes and kinds of a forward's input slots: what an inference graph is valid for.
type Signature = Vec<Option<(Vec<i64>, Kind)>>;

fn signature(inputs: &[Option<&Tensor>]) -> Signature {
    inputs
        .iter()
        .map(|t| t.map(|t| (t.size(), t.kind())))
        .collect()
}

/// One input shape's static buffers and, once captured, its graph and output.
struct Forward {
    statics: Vec<Option<Tensor>>,
    graph: Option<(CudaGraph, Tensor)>,
}

/// Forward passes without gradients (evaluation, prediction) as graphs, one per input shape,
/// under the rule of [`StepGraphs`]: the first forward of a shape runs plainly on static copies
/// of its inputs, the second is captured, later ones are replayed. A forward has no host state
/// to repeat, only its output (copied out of the graph). The models' checks are deferred into
/// this object's health monitor (a check that reads the device cannot be captured); the caller
/// reads them once with [`InferenceGraphs::check`].
pub struct InferenceGraphs {
    engine: Engine,
    fall_back: bool,
    entries: HashMap<Signature, Forward>,
    monitor: ono_kernels::health::Monitor,
    off: bool,
    news: Option<String>,
}

impl InferenceGraphs {
    pub fn new(engine: Engine, fall_back: bool) -> Self {
        Self {
            engine,
            fall_back,
            entries: HashMap::new(),
            monitor: ono_kernels::health::Monitor::new(),
            off: false,
            news: None,
        }
    }

    /// What to tell the user since the last call (a capture that failed and why).
    pub fn take_news(&mut self) -> Option<String> {
        self.news.take()
    }

    /// Input shapes kept.
    pub fn shapes(&self) -> usize {
        self.entries.len()
    }

    /// `forward` of `inputs` (slots, `None` where absent), through this shape's graph.
    pub fn run(
        &mut self,
        inputs: &[Option<&Tensor>],
        forward: &mut dyn FnMut(&[Option<Tensor>]) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let _guard = tch::no_grad_guard();
        let _deferred = self.monitor.enter(0);
        let owned = || -> Vec<Option<Tensor>> {
            inputs
                .iter()
                .map(|t| t.map(Tensor::shallow_clone))
                .collect()
        };
        if self.off {
            return forward(&owned());
        }
        let key = signature(inputs);
        let Some(entry) = self.entries.get_mut(&key) else {
            if self.entries.len() >= MAX_GRAPHS {
                return forward(&owned());
            }
            let statics = inputs
                .iter()
                .map(|t| t.map(Tensor::f_detach_copy).transpose())
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let out = forward(&statics)?;
            self.entries.insert(
                key,
                Forward {
                    statics,
                    graph: None,
                },
            );
            return Ok(out);
        };
        for (d, s) in entry.statics.iter().zip(inputs) {
            if let (Some(d), Some(s)) = (d, s) {
                d.shallow_clone().f_copy_(s)?;
            }
        }
        match (self.engine, &entry.graph) {
            (Engine::Emulated, _) => forward(&entry.statics),
            (Engine::Cuda(_), Some((graph, out))) => {
                graph.replay()?;
                Ok(out.f_detach_copy()?)
            }
            (Engine::Cuda(device), None) => {
                let statics = &entry.statics;
                match CudaGraph::capture(device, || forward(statics)) {
                    Ok((graph, out)) => {
                        graph.replay()?;
                        let copy = out.f_detach_copy()?;
                        entry.graph = Some((graph, out));
                        Ok(copy)
                    }
                    Err(e) if !self.fall_back => Err(e),
                    Err(e) => {
                        self.off = true;
                        self.entries.clear();
                        self.news = Some(format!(
                            "graphs: a forward pass could not be captured ({e}); plain forwards \
                             from here on"
                        ));
                        forward(&owned())
                    }
                }
            }
        }
    }

    /// Reads the deferred checks of the forwards so far (one host read) and fails with the
    /// first.
    pub fn check(&self) -> Result<()> {
        match self.monitor.check()? {
            None => Ok(()),
            Some(f) => Err(Error::deferred(f.error)),
        }
    }
}

/// Runs `body` plainly on `statics` and records its host effects.
fn record(
    runner: &mut StepRunner<'_>,
    statics: &Statics,
    body: &mut StepBody<'_>,
) -> Result<Record> {
    let start = runner.pending.len();
    runner.planned = None;
    body(runner, &statics.batch, &statics.extras)?;
    let (present, plan) = runner
        .last_plan
        .take()
        .ok_or_else(|| Error::Data("a step body that did not finish its optimizer step".into()))?;
    Ok(Record {
        present,
        plan,
        losses: runner.pending[start..]
            .iter()
            .map(|p| (p.batch, p.new_samples))
            .collect(),
    })
}

/// Copies of a graph's outputs (the next replay overwrites them).
fn copies(outputs: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(outputs
        .iter()
        .map(Tensor::f_detach_copy)
        .collect::<std::result::Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_resolve_by_device_and_micro_batches() {
        let cpu = Device::Cpu;
        assert_eq!(resolve(Graphs::Auto, cpu, 1).unwrap(), (None, None));
        assert_eq!(
            resolve(Graphs::Off, Device::Cuda(0), 1).unwrap(),
            (None, None)
        );
        let (e, note) = resolve(Graphs::Emulate, cpu, 1).unwrap();
        assert_eq!(e, Some(Engine::Emulated));
        assert!(note.unwrap().contains("emulated"));
        // Several micro-batches in a process: refused by `emulate`, plain under `auto`.
        let e = resolve(Graphs::Emulate, cpu, 3).unwrap_err();
        assert!(e.to_string().contains("accumulate_steps > 1"), "{e}");
        let (e, note) = resolve(Graphs::Auto, Device::Cuda(0), 2).unwrap();
        assert_eq!(e, None);
        assert!(note.unwrap().starts_with("graphs: plain steps ("));
        let e = check_config(Graphs::On, cpu, 1).unwrap_err();
        assert!(e.to_string().contains("`on` needs a CUDA device"), "{e}");
        assert!(check_config(Graphs::Emulate, cpu, 2).is_err());
        assert!(check_config(Graphs::Auto, cpu, 2).is_ok());
        if !tch::Cuda::is_available() {
            // A CUDA run without a device to capture on: `auto` says why, `on` refuses.
            let (e, note) = resolve(Graphs::Auto, Device::Cuda(0), 1).unwrap();
            assert_eq!(e, None);
            assert!(note.unwrap().contains("CUDA graphs are unavailable"));
            assert!(resolve(Graphs::On, Device::Cuda(0), 1).is_err());
        }
    }

    #[test]
    fn graphs_read_and_write_as_lowercase_names() {
        #[derive(Deserialize, Serialize)]
        struct T {
            graphs: Graphs,
        }
        for (text, g) in [
            ("auto", Graphs::Auto),
            ("on", Graphs::On),
            ("off", Graphs::Off),
            ("emulate", Graphs::Emulate),
        ] {
            let t: T = toml::from_str(&format!("graphs = \"{text}\"")).unwrap();
            assert_eq!(t.graphs, g);
            assert_eq!(g.to_string(), text);
        }
        assert!(toml::from_str::<T>("graphs = \"yes\"").is_err());
    }
}
