//! The model trait every architecture implements and the one input type they all take
//! ([`Model`](crate::Model) owns a built operator with its variables).
//!
//! An architecture is a type implementing [`NeuralOperator`] (forward, plus the hooks whose
//! defaults suit a stateless model) and a configuration implementing
//! [`ArchConfig`](crate::ArchConfig) (`arch.rs`), which the registry (`registry.rs`) names.

use std::path::Path as FsPath;

use tch::nn::VarStore;
use tch::Tensor;

use crate::{Error, Recompute, Result};
use ono_nn::weights::{self, NamedTensors};

/// An input function sampled on its own points, as GNOT's branches take them.
#[derive(Debug, Clone, Copy)]
pub struct InputFunction<'a> {
    /// (B, L, C): the features of each point (coordinates and values, as the model expects).
    pub values: &'a Tensor,
    /// (B, L) bool, true where a row is real in a ragged batch padded to L; `None`: all real.
    pub mask: Option<&'a Tensor>,
}

/// What one forward pass gets. Every architecture reads the fields it understands and refuses
/// the others with [`Error::Unsupported`] (see [`ModelInput::refuse`]), so an input is never
/// silently ignored.
///
/// # Shapes
/// - `pos`: (B, N, space_dim), the points where the input function is sampled
/// - `fx`: (B, N, fun_dim), the input function at `pos`; `None` for models without one
/// - `mask`: (B, N) bool, true for the real points of a ragged batch padded to N
/// - `functions`: further input functions on their own points ([`InputFunction`])
/// - `time`: (B, 1), a time value per sample (Plasticity)
/// - `query`: (B, M, space_dim), output points different from `pos` (cross-attention,
///   super-resolution), with `query_mask` (B, M) for ragged queries
/// - `grid`: the grid shape when the N points are a row-major grid (e.g. `[H, W]`)
#[derive(Debug, Clone, Copy)]
pub struct ModelInput<'a> {
    pub pos: &'a Tensor,
    pub fx: Option<&'a Tensor>,
    pub mask: Option<&'a Tensor>,
    pub functions: &'a [InputFunction<'a>],
    pub time: Option<&'a Tensor>,
    pub query: Option<&'a Tensor>,
    pub query_mask: Option<&'a Tensor>,
    pub grid: Option<&'a [i64]>,
}

/// The optional parts of a [`ModelInput`], to name what an architecture cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputPart {
    Mask,
    Functions,
    Time,
    Query,
    Grid,
}

impl InputPart {
    fn name(self) -> &'static str {
        match self {
            InputPart::Mask => "a padding mask (ragged batch)",
            InputPart::Functions => "input functions on their own points",
            InputPart::Time => "a time value",
            InputPart::Query => "query positions different from the input positions",
            InputPart::Grid => "a grid shape",
        }
    }
}

impl<'a> ModelInput<'a> {
    /// Points `pos` with the input function `fx` on them; nothing else.
    pub fn new(pos: &'a Tensor, fx: &'a Tensor) -> Self {
        Self {
            fx: Some(fx),
            ..Self::positions(pos)
        }
    }

    /// Points only (no input function on them).
    pub fn positions(pos: &'a Tensor) -> Self {
        Self {
            pos,
            fx: None,
            mask: None,
            functions: &[],
            time: None,
            query: None,
            query_mask: None,
            grid: None,
        }
    }

    pub fn with_time(self, time: Option<&'a Tensor>) -> Self {
        Self { time, ..self }
    }

    pub fn with_grid(self, grid: Option<&'a [i64]>) -> Self {
        Self { grid, ..self }
    }

    pub fn with_mask(self, mask: Option<&'a Tensor>) -> Self {
        Self { mask, ..self }
    }

    pub fn with_query(self, query: Option<&'a Tensor>, query_mask: Option<&'a Tensor>) -> Self {
        Self {
            query,
            query_mask,
            ..self
        }
    }

    pub fn with_functions(self, functions: &'a [InputFunction<'a>]) -> Self {
        Self { functions, ..self }
    }

    /// Whether `part` is present.
    pub fn has(&self, part: InputPart) -> bool {
        match part {
            InputPart::Mask => self.mask.is_some(),
            InputPart::Functions => !self.functions.is_empty(),
            InputPart::Time => self.time.is_some(),
            InputPart::Query => self.query.is_some() || self.query_mask.is_some(),
            InputPart::Grid => self.grid.is_some(),
        }
    }

    /// [`Error::Unsupported`] for the first of `parts` that is present.
    pub fn refuse(&self, arch: &'static str, parts: &[InputPart]) -> Result<()> {
        match parts.iter().find(|p| self.has(**p)) {
            Some(p) => Err(Error::Unsupported {
                arch,
                what: p.name(),
            }),
            None => Ok(()),
        }
    }
}

/// Error of a loss closure, kept whole so the caller gets its own error type back (see
/// [`Error::Loss`]).
pub type LossError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The loss of a training step: the model's output → a scalar.
pub type LossFn<'l> = dyn FnMut(&Tensor) -> std::result::Result<Tensor, LossError> + 'l;

/// A neural operator: maps a [`ModelInput`] to the output function at the output points
/// (`query` if given, else `pos`). Built by [`ArchConfig::build`](crate::ArchConfig::build) on a
/// `tch::nn::Path`; the variables live in the caller's `VarStore` ([`Model`](crate::Model) owns
/// both).
pub trait NeuralOperator: std::fmt::Debug + Send {
    /// The architecture's name (`ono`, `mlp`, …), as in the registry.
    fn arch(&self) -> &'static str;

    /// Forward pass in training (`train`: batch statistics, updated running buffers) or
    /// evaluation mode.
    ///
    /// # Shapes
    /// - returns: (B, N or M, out_dim)
    fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor>;

    /// One training forward and backward: every parameter's `.grad` gets d loss / d parameter
    /// added; returns the loss, detached. `recompute` selects how activations are kept (see
    /// [`Recompute`]); `Auto` is [`default_recompute`](Self::default_recompute).
    fn forward_backward(
        &self,
        input: &ModelInput<'_>,
        loss: &mut LossFn<'_>,
        recompute: Recompute,
    ) -> Result<Tensor> {
        match recompute {
            Recompute::None | Recompute::Auto => plain_forward_backward(self, input, loss),
            other => Err(Error::Unsupported {
                arch: self.arch(),
                what: unsupported_recompute(other),
            }),
        }
    }

    /// Whether [`forward_backward`](Self::forward_backward) runs in `mode`.
    fn supports_recompute(&self, mode: Recompute) -> bool {
        matches!(mode, Recompute::None | Recompute::Auto)
    }

    /// What `Recompute::Auto` means for this model on `input`'s device and at its size (the
    /// measured best there; see docs/benchmarks.md).
    fn default_recompute(&self, input: &ModelInput<'_>) -> Recompute {
        let _ = input;
        Recompute::None
    }

    /// Forgets running statistics (EMA covariances, BatchNorm statistics), as freshly built.
    fn reset_statistics(&self) -> Result<()> {
        Ok(())
    }

    /// The EMA covariance buffers a training forward updates, in a fixed order: what data
    /// parallelism folds in every process's micro-batch order ([`ono_kernels::ema::capture`]).
    /// Other non-trainable state (BatchNorm statistics) is not listed.
    fn ema_statistics(&self) -> Vec<&ono_kernels::ema::EmaCovariance> {
        Vec::new()
    }

    /// The reference implementation's own forward signature on a fixture's inputs (`input.*`
    /// without the prefix, the target `y` left out), for fixtures in the `state_dict` layout
    /// (`fixtures/fno` and its neighbours; see [`fixture`](crate::fixture)). The output holds the
    /// reference output's elements in its order, in any shape.
    fn reference_forward(&self, inputs: &NamedTensors, train: bool) -> Result<Tensor> {
        let _ = (inputs, train);
        Err(Error::Unsupported {
            arch: self.arch(),
            what: "reference fixtures in the state_dict layout",
        })
    }

    /// The reference implementation's name of one of our variables, or `None` where the
    /// reference has no counterpart. The identity by default.
    fn reference_name<'n>(&self, ours: &'n str) -> Option<&'n str> {
        Some(ours)
    }

    /// Copies a reference `state_dict` (keys `prefix` + reference name) into `vs`, strictly:
    /// every variable with a reference name must be present with its shape, and reference keys
    /// under `prefix` that map to nothing are errors.
    fn import_reference(
        &self,
        vs: &VarStore,
        tensors: &NamedTensors,
        prefix: &str,
        origin: &FsPath,
    ) -> Result<()> {
        let vars = vs.variables();
        let mut ours = NamedTensors::new();
        let mut known = std::collections::BTreeSet::new();
        for name in vars.keys() {
            let Some(reference) = self.reference_name(name) else {
                continue;
            };
            let key = format!("{prefix}{reference}");
            if let Some(t) = tensors.get(&key) {
                ours.insert(name.clone(), t.shallow_clone());
            }
            known.insert(key);
        }
        for (key, t) in tensors.range(prefix.to_string()..) {
            if !key.starts_with(prefix) {
                break;
            }
            if !known.contains(key) {
                ours.insert(key[prefix.len()..].to_string(), t.shallow_clone());
            }
        }
        weights::copy_into(vs, &ours, false, origin)?;
        Ok(())
    }

    /// The variables under the reference names, as the reference's `state_dict()` holds them.
    fn export_reference(&self, vs: &VarStore) -> Result<NamedTensors> {
        let mut out = NamedTensors::new();
        for (name, var) in vs.variables() {
            if let Some(reference) = self.reference_name(&name) {
                out.insert(reference.to_string(), var.f_detach_copy()?);
            }
        }
        Ok(out)
    }
}

/// Forward in training mode, the loss, backward: the default of
/// [`NeuralOperator::forward_backward`], for overrides to fall back on.
pub fn plain_forward_backward<M: NeuralOperator + ?Sized>(
    model: &M,
    input: &ModelInput<'_>,
    loss: &mut LossFn<'_>,
) -> Result<Tensor> {
    let out = model.forward(input, true)?;
    let value = loss(&out).map_err(Error::Loss)?;
    check_scalar(&value)?;
    value.f_backward()?;
    Ok(value.f_detach()?)
}

/// The loss of a step must be one number.
pub(crate) fn check_scalar(value: &Tensor) -> Result<()> {
    if value.numel() != 1 {
        return Err(Error::Shape {
            op: "forward_backward",
            expected: "a scalar loss".into(),
            got: value.size(),
        });
    }
    Ok(())
}

/// The name of a recomputation mode an architecture lacks, for [`Error::Unsupported`].
pub fn unsupported_recompute(mode: Recompute) -> &'static str {
    match mode {
        Recompute::Blocks => "block recomputation (recompute = \"blocks\")",
        Recompute::Selective => "selective recomputation (recompute = \"selective\")",
        Recompute::None | Recompute::Auto => "training",
    }
}
