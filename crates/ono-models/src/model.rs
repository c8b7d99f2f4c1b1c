//! [`Model`]: a built operator of any architecture together with the `VarStore` that owns its
//! variables — what the trainer, the predictor and `ono check-reference` hold.

use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::operator::{LossFn, ModelInput, NeuralOperator};
use crate::registry::ModelConfig;
use crate::Result;
use ono_nn::weights::NamedTensors;

/// See the module documentation.
#[derive(Debug)]
pub struct Model {
    vs: VarStore,
    net: Box<dyn NeuralOperator>,
    config: ModelConfig,
    kind: Kind,
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

    /// See [`NeuralOperator::forward`].
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        self.net.forward(input, train)
    }

    /// See [`NeuralOperator::forward_backward`].
    pub fn forward_backward(
        &self,
        input: &ModelInput<'_>,
        loss: &mut LossFn<'_>,
        recompute: crate::Recompute,
    ) -> Result<Tensor> {
        self.net.forward_backward(input, loss, recompute)
    }

    /// See [`NeuralOperator::reset_statistics`].
    pub fn reset_statistics(&self) -> Result<()> {
        self.net.reset_statistics()
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
