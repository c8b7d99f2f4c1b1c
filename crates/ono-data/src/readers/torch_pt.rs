//! PyTorch `torch.save` files (`.pt`, `.pth`), read through libtorch.
//!
//! What libtorch (through tch) can read of a Python `torch.save` zip archive was found by trying
//! each entry point on files written by torch 2.11:
//!
//! | `torch.save(...)` of         | `Tensor::load` | `Tensor::loadz_multi` |
//! |------------------------------|----------------|-----------------------|
//! | a tensor                     | no (wants a TorchScript archive) | no ("Expected GenericDict") |
//! | a plain `dict` of tensors    | no             | yes                   |
//! | an `OrderedDict` (state_dict)| no             | no                    |
//! | nested dicts, lists, scalars | no             | no                    |
//! | the pre-1.6 non-zip format   | no             | no                    |
//!
//! So a plain dict goes straight to `loadz_multi`. A single tensor is made readable by the same
//! call: its `data.pkl` is wrapped in a one-entry dict (an `EMPTY_DICT`, the key, the original
//! pickle body, `SETITEM`) and the archive is copied, with that pickle, to a temporary file. The
//! rest is refused with [`Error::Format`](crate::Error::Format) saying what the pickle holds and how to convert it.
//! (`ono-nn` has a full pickle reader for state_dicts; this crate must not depend on it.)

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tch::{Device, Kind, Tensor};
use zip::write::FileOptions;
use zip::CompressionMethod;

use super::npy::{format_error, io_error};
use crate::array::{ArrayData, NamedArray};
use crate::Result;

/// The start of the legacy (PyTorch < 1.6) `torch.save` format: a pickled magic number.
pub const LEGACY_TORCH_MAGIC: &[u8] = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19";

/// `data.pkl` larger than this is not a pickle of a few tensors' metadata.
const MAX_PICKLE_LEN: u64 = 256 << 20;

const CONVERT_HINT: &str = "re-save it as a tensor or a plain dict of tensors \
     (`torch.save(dict(obj), path)`), or convert it to .npy/.npz/.safetensors";

/// Reads a `torch.save` file holding one tensor (named after the file stem) or a plain `dict`
/// of tensors (named by their keys, sorted). Tensors come back on the CPU in their stored type;
/// `float16`/`bfloat16` are widened to float32 and `bool` becomes uint8. Anything else (a
/// state_dict `OrderedDict`, nested containers, non-tensor values, complex tensors, the legacy
/// non-zip format) is refused with [`Error::Format`](crate::Error::Format).
pub fn read_pt(path: &Path) -> Result<Vec<NamedArray>> {
    let mut file = File::open(path).map_err(|source| io_error(path, source))?;
    let file_len = file
        .metadata()
        .map_err(|source| io_error(path, source))?
        .len();
    let mut head = Vec::with_capacity(LEGACY_TORCH_MAGIC.len());
    (&mut file)
        .take(LEGACY_TORCH_MAGIC.len() as u64)
        .read_to_end(&mut head)
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
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| format_error(path, format!("not a torch.save archive: {e}")))?;
    let pkl_name = find_pickle(&archive).ok_or_else(|| {
        format_error(
            path,
            "zip archive without a data.pkl: not a torch.save file",
        )
    })?;
    let pickle = read_small_entry(&mut archive, &pkl_name, file_len)
        .map_err(|msg| format_error(path, format!("{pkl_name}: {msg}")))?;
    match top_object(&pickle) {
        Top::Dict => load_dict(path, path),
        Top::Tensor => {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let wrapped = wrap_in_dict(&pickle, &name)
                .ok_or_else(|| format_error(path, format!("{pkl_name} is not a complete pickle")))?;
            let tmp = TempFile::new(path);
            rewrite_archive(&mut archive, &pkl_name, &wrapped, &tmp.0)
                .map_err(|msg| format_error(path, format!("copying the archive: {msg}")))?;
            load_dict(&tmp.0, path)
        }
        Top::Other(what) => Err(format_error(
            path,
            format!("holds {what}; only a tensor or a plain dict of tensors can be read: {CONVERT_HINT}"),
        )),
    }
}

/// What the pickle's top-level object is, judged from its first opcode.
#[derive(Debug, PartialEq)]
enum Top {
    Dict,
    Tensor,
    /// A description for the error message.
    Other(String),
}

fn top_object(pickle: &[u8]) -> Top {
    let mut p = pickle;
    if let [0x80, _, rest @ ..] = p {
        p = rest; // PROTO
    }
    if let [0x95, rest @ ..] = p {
        p = rest.get(8..).unwrap_or(&[]); // FRAME and its 8-byte length (protocol 4)
    }
    match p.first() {
        Some(b'}') => Top::Dict,
        Some(b'c') => {
            // GLOBAL "module\nname\n"
            let mut lines = p[1..].splitn(3, |&b| b == b'\n');
            let module = String::from_utf8_lossy(lines.next().unwrap_or(&[])).into_owned();
            let name = String::from_utf8_lossy(lines.next().unwrap_or(&[])).into_owned();
            match (module.as_str(), name.as_str()) {
                ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_parameter") => Top::Tensor,
                ("collections", "OrderedDict") => Top::Other(
                    "a collections.OrderedDict (a module's state_dict?), which libtorch's reader refuses"
                        .into(),
                ),
                _ => Top::Other(format!("an object of class {module}.{name}")),
            }
        }
        Some(b']') => Top::Other("a list".into()),
        Some(b'(' | b')') => Top::Other("a tuple".into()),
        Some(b'N') => Top::Other("None".into()),
        Some(b'K' | b'M' | b'J' | b'G' | b'\x8a' | b'\x88' | b'\x89') => {
            Top::Other("a plain number or boolean".into())
        }
        Some(b'X' | b'U' | b'T' | b'B' | b'C') => Top::Other("a string or bytes".into()),
        Some(b'\x93' | b'\x8c') => Top::Other("an object pickled with protocol ≥ 4".into()),
        Some(op) => Top::Other(format!("a pickle starting with opcode {op:#04x}")),
        None => Top::Other("an empty pickle".into()),
    }
}

/// `<archive>/data.pkl` (the only pickle at depth one) or a top-level `data.pkl`.
fn find_pickle<Rd: Read + std::io::Seek>(archive: &zip::ZipArchive<Rd>) -> Option<String> {
    archive
        .file_names()
        .find(|n| {
            n.strip_suffix("data.pkl")
                .is_some_and(|p| p.is_empty() || (p.ends_with('/') && p.matches('/').count() == 1))
        })
        .map(str::to_string)
}

fn read_small_entry<Rd: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<Rd>,
    name: &str,
    file_len: u64,
) -> std::result::Result<Vec<u8>, String> {
    let entry = archive.by_name(name).map_err(|e| e.to_string())?;
    let size = entry.size();
    // A stored entry cannot be longer than the file; a deflated one than its ratio allows.
    if size > MAX_PICKLE_LEN || entry.compressed_size() > file_len {
        return Err(format!("implausible size {size}"));
    }
    let mut out = Vec::new();
    entry
        .take(size)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// `{name: <the pickled object>}` as a pickle: PROTO, EMPTY_DICT, BINUNICODE name, the original
/// body, SETITEM, STOP. The body's memo indices are untouched (nothing new is memoised).
fn wrap_in_dict(pickle: &[u8], name: &str) -> Option<Vec<u8>> {
    let [0x80, proto, body @ .., b'.'] = pickle else {
        return None;
    };
    let key_len = u32::try_from(name.len()).ok()?;
    let mut out = Vec::with_capacity(pickle.len() + name.len() + 8);
    out.extend_from_slice(&[0x80, *proto, b'}', b'X']);
    out.extend_from_slice(&key_len.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(b"s.");
    Some(out)
}

/// Copies every entry of `archive` to `dest` unchanged, in order, except `pkl_name`, whose
/// content becomes `pickle`.
fn rewrite_archive<Rd: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<Rd>,
    pkl_name: &str,
    pickle: &[u8],
    dest: &Path,
) -> std::result::Result<(), String> {
    let file = File::create(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(|e| e.to_string())?;
        if entry.name() == pkl_name {
            let name = entry.name().to_string();
            drop(entry);
            let options = FileOptions::default().compression_method(CompressionMethod::Stored);
            zip.start_file(name, options).map_err(|e| e.to_string())?;
            zip.write_all(pickle).map_err(|e| e.to_string())?;
        } else {
            zip.raw_copy_file(entry).map_err(|e| e.to_string())?;
        }
    }
    let mut w = zip.finish().map_err(|e| e.to_string())?;
    w.flush().map_err(|e| e.to_string())
}

/// Loads a plain dict of tensors with libtorch onto the CPU; errors are reported against `shown`.
fn load_dict(file: &Path, shown: &Path) -> Result<Vec<NamedArray>> {
    let tensors = Tensor::loadz_multi_with_device(file, Device::Cpu).map_err(|e| {
        // libtorch's message runs on with a C++ backtrace; its first line says what failed.
        let msg = e.to_string();
        let first = msg.lines().next().unwrap_or("").trim();
        format_error(
            shown,
            format!(
                "libtorch cannot read it as a dict of tensors ({first}); values that are not \
                 tensors (nested dicts, numbers, lists) are not supported: {CONVERT_HINT}"
            ),
        )
    })?;
    let mut out = tensors
        .iter()
        .map(|(name, t)| tensor_to_array(name, t).map_err(|msg| format_error(shown, msg)))
        .collect::<Result<Vec<_>>>()?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
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

/// A temporary file path, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(for_path: &Path) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let stem = for_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self(std::env::temp_dir().join(format!(
            "ono-pt-{}-{}-{stem}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_a_pickle_in_a_dict() {
        let p = b"\x80\x02K\x07.";
        let w = wrap_in_dict(p, "ab").unwrap();
        assert_eq!(w, b"\x80\x02}X\x02\x00\x00\x00abK\x07s.");
        assert!(wrap_in_dict(b"\x80\x02K\x07", "a").is_none());
        assert!(wrap_in_dict(b"", "a").is_none());
    }

    #[test]
    fn names_the_top_object() {
        assert_eq!(top_object(b"\x80\x02}q\x00."), Top::Dict);
        assert_eq!(
            top_object(b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00"),
            Top::Tensor
        );
        assert!(
            matches!(top_object(b"\x80\x02ccollections\nOrderedDict\n"), Top::Other(s) if s.contains("OrderedDict"))
        );
        assert!(matches!(top_object(b"\x80\x02]q\x00"), Top::Other(s) if s.contains("list")));
        assert!(matches!(top_object(b"\x80"), Top::Other(_)));
        assert!(matches!(top_object(b""), Top::Other(_)));
    }
}
