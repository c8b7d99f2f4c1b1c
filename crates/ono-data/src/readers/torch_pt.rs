//! PyTorch `torch.save` files (`.pt`, `.pth`), read by the one torch.save reader of the
//! workspace, [`ono_io::torch_save`], and converted to [`NamedArray`]s.
//!
//! A data file is a tensor or a plain `dict` of tensors. The reader itself reads more (a
//! state_dict `OrderedDict`, nested dicts, lists, numbers), but those are not arrays of a data
//! set and are refused here with [`Error::Format`](crate::Error::Format), saying what the file
//! holds and how to convert it; so is the legacy non-zip format of PyTorch < 1.6. Failures of the
//! archive itself (a truncated zip, a broken pickle) are [`Error::File`](crate::Error::File).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use ono_io::pickle::Value;
use tch::{Kind, Tensor};

use super::npy::{format_error, io_error};
use crate::array::{ArrayData, NamedArray};
use crate::Result;

/// The start of the legacy (PyTorch < 1.6) `torch.save` format: a pickled magic number.
pub const LEGACY_TORCH_MAGIC: &[u8] = ono_io::torch_save::LEGACY_MAGIC;

const CONVERT_HINT: &str = "re-save it as a tensor or a plain dict of tensors \
     (`torch.save(dict(obj), path)`), or convert it to .npy/.npz/.safetensors";

/// Reads a `torch.save` file holding one tensor (named after the file stem) or a plain `dict`
/// of tensors (named by their keys, sorted). Tensors come back on the CPU in their stored type;
/// `float16`/`bfloat16` are widened to float32 and `bool` becomes uint8. Anything else (a
/// state_dict `OrderedDict`, nested containers, non-tensor values, complex tensors, the legacy
/// non-zip format) is refused with [`Error::Format`](crate::Error::Format).
pub fn read_pt(path: &Path) -> Result<Vec<NamedArray>> {
    read_tensors(path)?
        .iter()
        .map(|(name, t)| tensor_to_array(name, t).map_err(|msg| format_error(path, msg)))
        .collect()
}

/// (name, dtype, shape) of every tensor of a file [`read_pt`] reads, in torch's dtype names
/// (`bool` stays `bool`, `float16` `float16`), sorted by name.
pub fn list_pt(path: &Path) -> Result<Vec<(String, String, Vec<usize>)>> {
    Ok(read_tensors(path)?
        .into_iter()
        .map(|(name, t)| {
            let kind = t
                .f_kind()
                .map_or_else(|e| e.to_string(), |k| dtype_name(k).to_string());
            let shape = t.size().iter().map(|&d| d.max(0) as usize).collect();
            (name, kind, shape)
        })
        .collect())
}

/// torch's name of a dtype.
fn dtype_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Bool => "bool",
        Kind::Uint8 => "uint8",
        Kind::Int8 => "int8",
        Kind::Int16 => "int16",
        Kind::Int => "int32",
        Kind::Int64 => "int64",
        Kind::Half => "float16",
        Kind::BFloat16 => "bfloat16",
        Kind::Float => "float32",
        Kind::Double => "float64",
        Kind::ComplexFloat => "complex64",
        Kind::ComplexDouble => "complex128",
        _ => "other",
    }
}

/// The tensors of a file [`read_pt`] reads, by name (sorted), as torch stored them.
fn read_tensors(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let mut head = Vec::with_capacity(LEGACY_TORCH_MAGIC.len());
    File::open(path)
        .and_then(|f| {
            f.take(LEGACY_TORCH_MAGIC.len() as u64)
                .read_to_end(&mut head)
        })
        .map_err(|source| io_error(path, source))?;
    if head.starts_with(LEGACY_TORCH_MAGIC) {
        return Err(format_error(
            path,
            format!("the legacy (PyTorch < 1.6, non-zip) torch.save format is not supported: {CONVERT_HINT}"),
        ));
    }
    if !head.starts_with(b"PK\x03\x04") {
        return Err(format_error(
            path,
            "not a torch.save file (not a zip archive)",
        ));
    }
    let refuse = |what: String| {
        format_error(
            path,
            format!("holds {what}; only a tensor or a plain dict of tensors can be read: {CONVERT_HINT}"),
        )
    };
    match ono_io::torch_save::load(path)? {
        Value::Tensor(t) => {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(vec![(name, t.shallow_clone())])
        }
        Value::Dict(d) if d.ordered => Err(refuse(
            "a collections.OrderedDict (a module's state_dict? read it with \
             ono_nn::weights::read_torch_zip)"
                .into(),
        )),
        Value::Dict(d) => {
            let mut out = Vec::new();
            for (k, v) in d.deduplicated() {
                let Value::Str(name) = k else {
                    return Err(refuse(format!("a dict with {} as a key", describe(k))));
                };
                let Value::Tensor(t) = v else {
                    return Err(refuse(format!(
                        "a dict whose entry `{name}` is {}, not a tensor (nested containers and \
                         other values are not arrays)",
                        describe(v)
                    )));
                };
                out.push((name.clone(), t.shallow_clone()));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        }
        other => Err(refuse(describe(&other).into())),
    }
}

/// What a pickled value is, in the words of the refusals.
fn describe(v: &Value) -> &'static str {
    match v {
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => "a plain number or boolean",
        Value::Str(_) | Value::Bytes(_) => "a string or bytes",
        Value::Storage(_) => "a bare storage (not a tensor)",
        other => other.type_name(),
    }
}

/// A CPU tensor as a [`NamedArray`] (logical shape, row-major data).
pub(crate) fn tensor_to_array(name: &str, t: &Tensor) -> std::result::Result<NamedArray, String> {
    let fail = |e: tch::TchError| format!("tensor `{name}`: {e}");
    let kind = t
        .f_kind()
        .map_err(|e| format!("tensor `{name}` has a dtype tch does not know ({e})"))?;
    let shape: Vec<usize> = t
        .size()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("tensor `{name}`: negative size")))
        .collect::<std::result::Result<_, _>>()?;
    // Contiguous and flat: the views torch saves (transposes, slices) come out row-major.
    let flat = t
        .f_contiguous()
        .and_then(|c| c.f_reshape([-1]))
        .map_err(fail)?;
    let data = match kind {
        Kind::Double => ArrayData::F64(Vec::try_from(&flat).map_err(fail)?),
        Kind::Float | Kind::Half | Kind::BFloat16 => {
            ArrayData::F32(Vec::try_from(&flat).map_err(fail)?)
        }
        Kind::Int64 => ArrayData::I64(Vec::try_from(&flat).map_err(fail)?),
        Kind::Int => ArrayData::I32(Vec::try_from(&flat).map_err(fail)?),
        Kind::Int16 => ArrayData::I16(Vec::try_from(&flat).map_err(fail)?),
        Kind::Int8 => ArrayData::I8(Vec::try_from(&flat).map_err(fail)?),
        Kind::Uint8 | Kind::Bool => ArrayData::U8(Vec::try_from(&flat).map_err(fail)?),
        other => {
            return Err(format!(
                "tensor `{name}` has dtype {other:?}, which is not supported (real numbers only)"
            ))
        }
    };
    NamedArray::new(name, shape, data).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn names_the_object_it_refuses() {
        assert_eq!(describe(&Value::Int(3)), "a plain number or boolean");
        assert_eq!(describe(&Value::Float(0.5)), "a plain number or boolean");
        assert_eq!(describe(&Value::Bool(true)), "a plain number or boolean");
        assert_eq!(describe(&Value::Str("x".into())), "a string or bytes");
        assert_eq!(describe(&Value::List(Vec::new())), "a list");
        assert_eq!(describe(&Value::Tuple(Vec::new())), "a tuple");
        assert_eq!(describe(&Value::None), "None");
        let od = Value::Dict(ono_io::pickle::Dict {
            entries: Vec::new(),
            ordered: true,
        });
        assert!(describe(&od).contains("OrderedDict"));
    }

    /// A minimal archive written by hand (protocol 2, as torch.save): a float tensor of two
    /// elements at offset 1 of a three-element storage.
    #[test]
    fn reads_a_hand_written_tensor_archive_named_after_the_file() {
        let mut pkl = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(".to_vec();
        pkl.extend_from_slice(b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\n");
        pkl.extend_from_slice(b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x03tQ");
        pkl.extend_from_slice(b"K\x01K\x02\x85K\x01\x85\x89ccollections\nOrderedDict\n)RtR.");
        let data: Vec<u8> = [1.0f32, 2.5, -4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let dir = std::env::temp_dir().join(format!("ono_data_pt_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hand.pt");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in [
            ("hand/data.pkl", &pkl),
            ("hand/byteorder", &b"little".to_vec()),
            ("hand/data/0", &data),
        ] {
            zip.start_file(name, opts).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        let arrays = read_pt(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(arrays.len(), 1);
        assert_eq!(arrays[0].name, "hand");
        assert_eq!(arrays[0].shape, [2]);
        assert_eq!(arrays[0].data, ArrayData::F32(vec![2.5, -4.0]));
    }
}
