//! [`Model`]: a built operator of any architecture together with the `VarStore` that owns its
//! variables — what the trainer, the predictor and `ono check-reference` hold — and the
//! precision its forward passes compute in ([`Model::set_precision`]).

use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::operator::{LossFn, ModelInput, NeuralOperator};
use crate::registry::ModelConfig;
use crate::Result;
use ono_nn::precision::{self, Precision};
use ono_nn::weights::NamedTensors;

/// See the module documentation.
#[derive(Debug)]
pub struct Model {
    vs: VarStore,
    net: Box<dyn NeuralOperator>,
    config: ModelConfig,
    kind: Kind,
    precision: Precision,
}

impl Model {
    /// Builds the model from `config` and initialises it on the CPU with torch's generator (seed
    /// it first), then casts to `kind` and moves to `device`: the initial weights of a seed are
    /// the same on every device (the CPU and CUDA generators draw different numbers), as the
    /// references' `Model(...).cuda()`.
    pub fn new(config: &ModelConfig, device: Device, kind: Kind) -> Result<Self> {
        config.validate()?;
        let mut vs = VarStore::new(Device::Cpu);
        let net = config.build(&vs.root())?;
        match kind {
            Kind::Float => {}
            Kind::Double => vs.double(),
            other => {
                return Err(crate::Error::Config(format!(
                    "models are built in float32 or float64, not {other:?}"
                )))
            }
        }
        vs.set_device(device);
        Ok(Self {
            vs,
            net,
            config: config.clone(),
            kind,
            precision: Precision::F32,
        })
    }

    /// Builds the model from `config` and copies in `tensors` (every variable by our names,
    /// strictly), in the floating kind they were saved in (float32 unless float64): what model
    /// files and checkpoints load through. `origin` names the file in errors.
    pub fn from_tensors(
        config: &ModelConfig,
        tensors: &NamedTensors,
        device: Device,
        origin: &Path,
    ) -> Result<Self> {
        let kind = tensors
            .values()
            .find(|t| t.is_floating_point())
            .map_or(Kind::Float, |t| t.kind());
        let model = Self::new(config, device, kind)?;
        model.load_tensors(tensors, origin)?;
        Ok(model)
    }

    /// The configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The architecture's name (`ono`, `mlp`, …).
    pub fn arch(&self) -> &'static str {
        self.config.arch()
    }

    /// The operator.
    pub fn operator(&self) -> &dyn NeuralOperator {
        self.net.as_ref()
    }

    /// The variables (parameters and statistics buffers).
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// The device of the variables.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// The floating kind of the parameters (inputs are cast to it by the caller).
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Trainable scalars (buffers excluded), as PyTorch's `sum(p.numel() for p in
    /// model.parameters())`.
    pub fn parameter_count(&self) -> i64 {
        crate::parameter_count(&self.vs)
    }

    /// The precision of the forward passes ([`Precision::F32`] unless set).
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Runs the forward passes of [`Model::forward`] and [`Model::forward_backward`] in
    /// `precision` ([`ono_nn::precision`]): the parameters stay in the model's kind, the matrix
    /// products run in the 16-bit kind, the output comes back in the model's kind. Refuses a
    /// reduced precision for a float64 model (mixed precision keeps float32 master weights) and
    /// one whose products do not run on the model's device.
    pub fn set_precision(&mut self, precision: Precision) -> Result<()> {
        if precision != Precision::F32 && self.kind != Kind::Float {
            return Err(crate::Error::Config(format!(
                "precision {precision} needs a float32 model, this one is {:?}",
                self.kind
            )));
        }
        precision::check_supported(precision, self.device())?;
        self.precision = precision;
        Ok(())
    }

    /// The output in the model's kind (a no-op at [`Precision::F32`]).
    fn full(&self, out: Tensor) -> Result<Tensor> {
        Ok(if out.kind() == self.kind || !out.is_floating_point() {
            out
        } else {
            out.f_to_kind(self.kind)?
        })
    }

    /// See [`NeuralOperator::forward`]; in the model's precision, the output in the model's kind.
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let out = precision::scope(self.precision, || self.net.forward(input, train))?;
        self.full(out)
    }

    /// See [`NeuralOperator::forward_backward`]; in the model's precision, and `loss` sees the
    /// output in the model's kind (the loss is computed in float32 under mixed precision).
    pub fn forward_backward(
        &self,
        input: &ModelInput<'_>,
        loss: &mut LossFn<'_>,
        recompute: crate::Recompute,
    ) -> Result<Tensor> {
        if self.precision == Precision::F32 {
            return self.net.forward_backward(input, loss, recompute);
        }
        let mut full_loss = |out: &Tensor| -> std::result::Result<Tensor, crate::LossError> {
            let out = self.full(out.shallow_clone())?;
            loss(&out)
        };
        precision::scope(self.precision, || {
            self.net.forward_backward(input, &mut full_loss, recompute)
        })
    }

    /// See [`NeuralOperator::reset_statistics`].
    pub fn reset_statistics(&self) -> Result<()> {
        self.net.reset_statistics()
    }

    /// See [`NeuralOperator::ema_statistics`].
    pub fn ema_statistics(&self) -> Vec<&ono_kernels::ema::EmaCovariance> {
        self.net.ema_statistics()
    }

    /// Copies every variable from `tensors` (our names, strict: missing, extra or misshapen
    /// tensors are errors naming `origin`).
    pub fn load_tensors(&self, tensors: &NamedTensors, origin: &Path) -> Result<()> {
        ono_nn::weights::copy_into(&self.vs, tensors, false, origin)?;
        Ok(())
    }

    /// See [`NeuralOperator::import_reference`].
    pub fn import_reference(
        &self,
        tensors: &NamedTensors,
        prefix: &str,
        origin: &Path,
    ) -> Result<()> {
        self.net.import_reference(&self.vs, tensors, prefix, origin)
    }

    /// Reads a reference `state_dict` file (`.safetensors`, or a `torch.save` zip such as `.pt`)
    /// and imports it (no key prefix).
    pub fn load_reference_file(&self, path: &Path) -> Result<()> {
        let tensors = ono_nn::weights::read_any(path)?;
        self.import_reference(&tensors, "", path)
    }

    /// See [`NeuralOperator::export_reference`].
    pub fn export_reference(&self) -> Result<NamedTensors> {
        self.net.export_reference(&self.vs)
    }

    /// Writes [`Model::export_reference`] to a safetensors file (atomically).
    pub fn save_reference_file(&self, path: &Path) -> Result<()> {
        let tensors = self.export_reference()?;
        ono_nn::weights::save_safetensors(
            path,
            tensors.iter().map(|(n, t)| (n.as_str(), t)),
            [("format".to_string(), "pt".to_string())].into(),
        )?;
        Ok(())
    }
}
