//! Named-tensor files: safetensors (read and written, with string metadata) and PyTorch's zip
//! `torch.save` format (read), plus strict copying of named tensors into a `VarStore`.
//!
//! Writing and the torch.save reader are ono-io's ([`ono_io::safetensors`],
//! [`ono_io::torch_save`]): writes are atomic and durable, so a kill mid-write leaves the old file
//! or the new one, never a torn one.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors};
use tch::nn::VarStore;
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Named tensors in name order.
pub type NamedTensors = BTreeMap<String, Tensor>;

fn weights_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Weights {
        path: path.display().to_string(),
        msg: msg.into(),
    }
}

fn kind_of(dtype: Dtype) -> Option<Kind> {
    Some(match dtype {
        Dtype::F32 => Kind::Float,
        Dtype::F64 => Kind::Double,
        Dtype::F16 => Kind::Half,
        Dtype::BF16 => Kind::BFloat16,
        Dtype::I64 => Kind::Int64,
        Dtype::I32 => Kind::Int,
        Dtype::I16 => Kind::Int16,
        Dtype::I8 => Kind::Int8,
        Dtype::U8 => Kind::Uint8,
        Dtype::BOOL => Kind::Bool,
        _ => return None,
    })
}

/// Writes named tensors (any device, stored from host copies) and string metadata to a
/// safetensors file, atomically.
pub fn save_safetensors<'a>(
    path: &Path,
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    metadata: HashMap<String, String>,
) -> Result<()> {
    Ok(ono_io::safetensors::write(path, tensors, &metadata)?)
}

/// Reads every tensor of a safetensors file (on the CPU) and its metadata. Truncated or corrupt
/// files are [`Error::Weights`].
pub fn read_safetensors(path: &Path) -> Result<(NamedTensors, HashMap<String, String>)> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| weights_err(path, e.to_string()))?;
    let (_, meta) =
        SafeTensors::read_metadata(&bytes).map_err(|e| weights_err(path, e.to_string()))?;
    let mut out = NamedTensors::new();
    for (name, view) in st.tensors() {
        let kind = kind_of(view.dtype()).ok_or_else(|| {
            weights_err(
                path,
                format!("{name}: unsupported dtype {:?}", view.dtype()),
            )
        })?;
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        out.insert(name, Tensor::f_from_data_size(view.data(), &shape, kind)?);
    }
    Ok((out, meta.metadata().clone().unwrap_or_default()))
}

/// Reads a `torch.save(state_dict)` zip archive (`.pt`/`.pth`/`.bin`) onto the CPU.
pub fn read_torch_zip(path: &Path) -> Result<NamedTensors> {
    // libtorch's loader (`Tensor::loadz_multi`) refuses the OrderedDict of `model.state_dict()`.
    Ok(ono_io::torch_save::read_state_dict(path)?)
}

/// Reads a weight file by extension: `.safetensors`, or a PyTorch zip for anything else, in
/// [`real_layout`].
pub fn read_any(path: &Path) -> Result<NamedTensors> {
    let tensors = match path.extension().and_then(|e| e.to_str()) {
        Some("safetensors") => read_safetensors(path)?.0,
        _ => read_torch_zip(path)?,
    };
    real_layout(tensors)
}

/// Complex weights in the layout our modules keep them in, a real (…, 2) tensor of (real,
/// imaginary) pairs: a complex tensor (a reference `state_dict` saved by `torch.save`) becomes its
/// `view_as_real`, and a key `<name>.view_as_real` (how safetensors files, which cannot hold
/// complex tensors, store them, as in the fixtures) becomes `<name>`.
pub fn real_layout(tensors: NamedTensors) -> Result<NamedTensors> {
    tensors
        .into_iter()
        .map(|(k, t)| {
            let t = if t.is_complex() {
                t.f_view_as_real()?.f_contiguous()?
            } else {
                t
            };
            let k = match k.strip_suffix(".view_as_real") {
                Some(base) => base.to_string(),
                None => k,
            };
            Ok((k, t))
        })
        .collect()
}

/// Copies `tensors` into the variables of `vs` with the same names, converting dtype and device.
/// Every variable must be present with its exact shape; names in `tensors` that the store lacks
/// are errors unless `allow_unused`. Nothing is copied if anything is wrong.
pub fn copy_into(
    vs: &VarStore,
    tensors: &NamedTensors,
    allow_unused: bool,
    origin: &Path,
) -> Result<()> {
    let vars = vs.variables();
    let mut missing = Vec::new();
    let mut mismatched = Vec::new();
    for (name, var) in &vars {
        match tensors.get(name) {
            None => missing.push(name.clone()),
            Some(t) if t.size() != var.size() => mismatched.push(format!(
                "{name}: file {:?}, model {:?}",
                t.size(),
                var.size()
            )),
            Some(_) => {}
        }
    }
    let unused: Vec<&String> = tensors.keys().filter(|n| !vars.contains_key(*n)).collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        missing.sort();
        problems.push(format!("missing {missing:?}"));
    }
    if !mismatched.is_empty() {
        mismatched.sort();
        problems.push(format!("wrong shapes {mismatched:?}"));
    }
    if !allow_unused && !unused.is_empty() {
        problems.push(format!("not in the model {unused:?}"));
    }
    if !problems.is_empty() {
        return Err(weights_err(origin, problems.join("; ")));
    }
    tch::no_grad(|| -> Result<()> {
        for (name, var) in &vars {
            let mut var = var.shallow_clone();
            var.f_copy_(&tensors[name])?;
        }
        Ok(())
    })
}
