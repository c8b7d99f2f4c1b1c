//! Named-tensor files: safetensors (read and written, with string metadata) and PyTorch's zip
//! `torch.save` format (read), plus strict copying of named tensors into a `VarStore`.
//!
//! Writes are atomic: the bytes go to a temporary file in the target's directory, are synced, and
//! the file is renamed over the target, so a kill mid-write leaves the old file or the new one,
//! never a torn one.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, View};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

/// Named tensors in name order.
pub type NamedTensors = BTreeMap<String, Tensor>;

fn weights_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Weights {
        path: path.display().to_string(),
        msg: msg.into(),
    }
}

fn dtype_of(kind: Kind) -> Option<Dtype> {
    Some(match kind {
        Kind::Float => Dtype::F32,
        Kind::Double => Dtype::F64,
        Kind::Half => Dtype::F16,
        Kind::BFloat16 => Dtype::BF16,
        Kind::Int64 => Dtype::I64,
        Kind::Int => Dtype::I32,
        Kind::Int16 => Dtype::I16,
        Kind::Int8 => Dtype::I8,
        Kind::Uint8 => Dtype::U8,
        Kind::Bool => Dtype::BOOL,
        _ => return None,
    })
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

struct HostTensor {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &HostTensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn to_host(path: &Path, name: &str, t: &Tensor) -> Result<HostTensor> {
    let dtype = dtype_of(t.kind())
        .ok_or_else(|| weights_err(path, format!("{name}: dtype {:?} not storable", t.kind())))?;
    let t = t.f_detach()?.f_to_device(Device::Cpu)?.f_contiguous()?;
    let numel = t.numel();
    let mut bytes = vec![0u8; numel * t.kind().elt_size_in_bytes()];
    t.f_copy_data_u8(&mut bytes, numel)?;
    Ok(HostTensor {
        dtype,
        shape: t.size().iter().map(|&d| d as usize).collect(),
        bytes,
    })
}

/// Writes bytes to `path` atomically (temporary sibling, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .ok_or_else(|| weights_err(path, "not a file path"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    };
    // A failed write (disk full, target is a directory) must not leave a partial file behind.
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// Writes named tensors (any device, stored from host copies) and string metadata to a
/// safetensors file, atomically.
pub fn save_safetensors<'a>(
    path: &Path,
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    metadata: HashMap<String, String>,
) -> Result<()> {
    let host: Vec<(String, HostTensor)> = tensors
        .into_iter()
        .map(|(n, t)| Ok((n.to_string(), to_host(path, n, t)?)))
        .collect::<Result<_>>()?;
    let meta = (!metadata.is_empty()).then_some(metadata);
    let bytes = safetensors::tensor::serialize(host.iter().map(|(n, t)| (n.as_str(), t)), &meta)
        .map_err(|e| weights_err(path, e.to_string()))?;
    write_atomic(path, &bytes)
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
    crate::torch_pickle::read_torch_state_dict(path)
}

/// Reads a weight file by extension: `.safetensors`, or a PyTorch zip for anything else.
pub fn read_any(path: &Path) -> Result<NamedTensors> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("safetensors") => Ok(read_safetensors(path)?.0),
        _ => read_torch_zip(path),
    }
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
