//! The ports of the Neural-Solver-Library (thuml/Neural-Solver-Library `db942b7`): its FNO
//! ([`fno`], `arch = "nsl_fno"`), F-FNO ([`ffno`]), U-FNO ([`ufno`]), Latent Spectral Model
//! ([`lsm`]) and Transolver ([`transolver`]). They share NSL's `args` ([`settings`]: the
//! settings of the model frame [`ono_nn::nsl_frame`], the StandardBench benchmarks as presets),
//! one reader of NSL's fixture cases (`reference.rs`), and one wiring into the registry
//! (`nsl_arch!` below).

pub mod ffno;
pub mod fno;
pub mod lsm;
mod reference;
pub mod settings;
pub mod transolver;
pub mod ufno;

/// What every NSL port's configuration shares, implemented in the port's module (which has
/// `presets::by_name`, `reference::config`, the configuration's `check` and its `nsl` settings):
/// `Default` (the `darcy` preset), `Deref`/`DerefMut` to the settings,
/// [`Presets`](crate::arch::Presets) (the StandardBench benchmarks), [`ArchConfig`]
/// (`validate` = `check`, the data's dimensions into the settings, fields read over the `darcy`
/// preset ([`fields_over`](settings::fields_over)), `build` = `$model::new`) and
/// [`FromReference`](crate::arch::FromReference) (the fixtures whose model class is `$class`);
/// and the model's [`NeuralOperator`](crate::operator::NeuralOperator) over its [`NslPort`].
///
/// [`ArchConfig`]: crate::arch::ArchConfig
macro_rules! nsl_arch {
    ($config:ident, $model:ident, $arch:literal, $class:literal) => {
        impl Default for $config {
            fn default() -> Self {
                presets::by_name("darcy").expect("the darcy preset exists")
            }
        }

        impl std::ops::Deref for $config {
            type Target = $crate::nsl::settings::NslSettings;
            fn deref(&self) -> &Self::Target {
                &self.nsl
            }
        }

        impl std::ops::DerefMut for $config {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.nsl
            }
        }

        impl $crate::arch::Presets for $config {
            const NAMES: &'static [&'static str] = &$crate::arch::BENCHMARKS;

            fn by_name(name: &str) -> Option<Self> {
                presets::by_name(name)
            }
        }

        impl $crate::arch::ArchConfig for $config {
            const ARCH: &'static str = $arch;

            fn validate(&self) -> $crate::Result<()> {
                self.check()
            }

            fn set_data_dims(&mut self, dims: $crate::arch::DataDims) {
                self.nsl.set_data_dims(dims);
            }

            /// Over the `darcy` preset, unknown fields refused
            /// ([`fields_over`](crate::nsl::settings::fields_over)).
            fn from_fields(fields: serde_json::Value) -> $crate::Result<Self> {
                $crate::nsl::settings::fields_over(Self::ARCH, fields, &Self::default())
            }

            fn build(
                &self,
                path: &tch::nn::Path,
            ) -> $crate::Result<Box<dyn $crate::operator::NeuralOperator>> {
                Ok(Box::new($model::new(path, self)?))
            }
        }

        impl $crate::operator::NeuralOperator for $model {
            fn arch(&self) -> &'static str {
                $arch
            }

            fn forward(
                &self,
                input: &$crate::operator::ModelInput<'_>,
                train: bool,
            ) -> $crate::Result<tch::Tensor> {
                $crate::nsl::NslPort::port_forward(self, input, train)
            }

            fn reset_statistics(&self) -> $crate::Result<()> {
                $crate::nsl::NslPort::reset(self)
            }

            fn reference_forward(
                &self,
                inputs: &ono_nn::weights::NamedTensors,
                train: bool,
            ) -> $crate::Result<tch::Tensor> {
                let dims = $crate::nsl::NslPort::structured_dims(self);
                $crate::nsl::reference::forward(self, dims, inputs, train)
            }
        }

        impl $crate::arch::FromReference for $config {
            fn claims_reference(json: &serde_json::Value) -> bool {
                $crate::nsl::reference::claims(json, $class)
            }

            fn from_reference(json: &serde_json::Value) -> $crate::Result<Self> {
                reference::config(json)
            }
        }
    };
}
use nsl_arch;

/// What an NSL port provides for its [`NeuralOperator`](crate::operator::NeuralOperator);
/// `nsl_arch!` writes the rest.
pub(crate) trait NslPort {
    /// The forward pass; `train` matters to the ports with BatchNorm (U-FNO, LSM).
    fn port_forward(
        &self,
        input: &crate::operator::ModelInput<'_>,
        train: bool,
    ) -> crate::Result<tch::Tensor>;

    /// The grid dimensions of the reference's structured loaders, `None` on point clouds
    /// ([`settings::NslSettings::structured_dims`]).
    fn structured_dims(&self) -> Option<usize>;

    /// Forgets running statistics (BatchNorm's, back to mean 0, variance 1, no batches
    /// tracked); the ports without any have none to forget.
    fn reset(&self) -> crate::Result<()> {
        Ok(())
    }
}
