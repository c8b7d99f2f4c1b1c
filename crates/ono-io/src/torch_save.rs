//! The one reader of `torch.save` files: the zip archives of PyTorch ≥ 1.6 (the default format).
//!
//! libtorch's own loaders do not serve us: `Tensor::loadz_multi` accepts only a plain `dict` at
//! the top of `data.pkl` (not the `OrderedDict` of `model.state_dict()`, not a single tensor, not
//! nested dicts) and `Tensor::load` wants a TorchScript archive. So the archive is read here:
//!
//! * it holds `<name>/data.pkl` (the pickle), `<name>/data/<key>` (the raw little-endian bytes of
//!   each storage), and optionally `<name>/byteorder` (must be `little`);
//! * `data.pkl` runs on the [pickle machine](crate::pickle), which rebuilds tensors with the
//!   globals `torch._utils._rebuild_tensor_v2`, `_rebuild_parameter` (an `nn.Parameter` reads as
//!   its data), `torch._tensor._rebuild_from_type_v2`, and the storage types of every real and
//!   complex dtype;
//! * persistent ids `('storage', <storage type>, key, location, numel)` name the storages, which
//!   are read once each (views of one storage share it) onto the CPU, whatever `location` says;
//!   tensors come back contiguous, in their stored dtype.
//!
//! [`load`] returns the whole object as a [`Value`] tree; [`read_state_dict`] the tensors of a
//! (nested) dict by dotted names; [`write_dict`] writes a plain dict of tensors the way
//! `torch.save` does (the miniature copies of data sets saved with torch). Anything else (the legacy non-zip format, a missing `data.pkl`,
//! a truncated storage, an unknown opcode or global, a big-endian archive) is
//! [`Error::Format`], never a panic; a file that cannot be opened is [`Error::Io`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::rc::Rc;

use tch::{Kind, Tensor};

use crate::pickle::{self, bail, Fail, Global, Obj, Persistent, Storage, Value, R};
use crate::{Error, Result};

/// The start of the legacy (PyTorch < 1.6) `torch.save` format: a pickled magic number.
pub const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19";

/// A `data.pkl` larger than this is not the pickle of a few tensors' metadata.
const MAX_PICKLE_BYTES: u64 = 256 << 20;

/// deflate cannot expand data by more than about 1032:1; an entry that claims more is lying,
/// and its claim must not size an allocation.
const MAX_DEFLATE_RATIO: u64 = 1032;

type Archive = zip::ZipArchive<BufReader<File>>;

/// Reads the object that a `torch.save` zip archive holds, tensors on the CPU.
pub fn load(path: &Path) -> Result<Value> {
    let (mut archive, prefix) = open(path)?;
    let fail = |msg: String| Error::format(path, msg);
    let byteorder = format!("{prefix}byteorder");
    if archive.file_names().any(|n| n == byteorder) {
        let order = read_entry(&mut archive, &byteorder, 64).map_err(|Fail(m)| fail(m))?;
        match String::from_utf8_lossy(&order).trim() {
            "little" => {}
            "big" => return Err(fail("big-endian archives are not supported".into())),
            other => return Err(fail(format!("unknown byteorder {other:?}"))),
        }
    }
    if cfg!(target_endian = "big") {
        return Err(fail(
            "reading torch.save archives needs a little-endian host".into(),
        ));
    }
    let pkl_name = format!("{prefix}data.pkl");
    let pickle =
        read_entry(&mut archive, &pkl_name, MAX_PICKLE_BYTES).map_err(|Fail(m)| fail(m))?;
    let mut storages = Storages {
        archive,
        prefix,
        loaded: HashMap::new(),
    };
    pickle::unpickle(&pickle, &mut storages).map_err(|Fail(m)| fail(format!("{pkl_name}: {m}")))
}

/// Reads every tensor of a `torch.save` archive holding a dict (a state_dict `OrderedDict`, a
/// plain dict, nested dicts), named by their keys joined with `.`. Values that are not tensors
/// or dicts are skipped; a key repeated in one dict keeps its last value, as in Python.
pub fn read_state_dict(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let root = load(path)?;
    let Value::Dict(_) = &root else {
        return Err(Error::format(
            path,
            format!("data.pkl holds {}, not a dict of tensors", root.type_name()),
        ));
    };
    let mut out = BTreeMap::new();
    flatten(&root, "", &mut out).map_err(|Fail(m)| Error::format(path, m))?;
    Ok(out)
}

/// How [`write_dict`] lays out each tensor's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageOrder {
    /// Strides (…, n₋₁, 1): a contiguous tensor.
    RowMajor,
    /// Strides (1, n₀, n₀·n₁, …): a tensor made from a Fortran-ordered NumPy array (the
    /// neuraloperator data files are saved so).
    ColumnMajor,
}

/// Writes `tensors` (CPU, any real dtype or bool) as a plain `dict` in the zip format of
/// `torch.save` (PyTorch ≥ 1.6): `archive/data.pkl` (protocol 2), one storage per tensor in
/// `archive/data/<i>` laid out in `order`, `archive/byteorder` and `archive/version`, entries
/// stored and their data 64-byte aligned as torch writes them. `torch.load` and [`load`] read it
/// back. Written atomically.
pub fn write_dict(path: &Path, tensors: &[(&str, &Tensor)], order: StorageOrder) -> Result<()> {
    if cfg!(target_endian = "big") {
        return Err(Error::format(
            path,
            "writing torch.save archives needs a little-endian host",
        ));
    }
    let fail = |msg: String| Error::format(path, msg);
    let mut pkl = Pickler::default();
    pkl.op(b"\x80\x02}(");
    let mut storages = Vec::with_capacity(tensors.len());
    for (key, (name, t)) in tensors.iter().enumerate() {
        let kind = t
            .f_kind()
            .map_err(|e| fail(format!("tensor `{name}`: {e}")))?;
        let storage_type = pickle::STORAGE_TYPES
            .iter()
            .find(|(_, k)| *k == kind && !matches!(kind, Kind::ComplexFloat | Kind::ComplexDouble))
            .map(|(n, _)| *n)
            .ok_or_else(|| fail(format!("tensor `{name}`: dtype {kind:?} cannot be written")))?;
        let size = t.size();
        let (stored, stride) = match order {
            StorageOrder::RowMajor => (t.shallow_clone(), contiguous_strides(&size)),
            StorageOrder::ColumnMajor => {
                let back: Vec<i64> = (0..size.len() as i64).rev().collect();
                let mut rev = size.clone();
                rev.reverse();
                let mut stride = contiguous_strides(&rev);
                stride.reverse();
                (
                    t.f_permute(back.as_slice())
                        .map_err(|e| fail(e.to_string()))?,
                    stride,
                )
            }
        };
        let bytes = storage_bytes(&stored).map_err(|e| fail(format!("tensor `{name}`: {e}")))?;
        let numel: i64 = size.iter().product();
        pkl.str(name);
        pkl.op(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        pkl.str("storage");
        pkl.op(format!("ctorch\n{storage_type}\n").as_bytes());
        pkl.str(&key.to_string());
        pkl.str("cpu");
        pkl.int(numel);
        pkl.op(b"tQ");
        pkl.int(0);
        pkl.tuple(&size);
        pkl.tuple(&stride);
        pkl.op(b"\x89ccollections\nOrderedDict\n)RtR");
        storages.push(bytes);
    }
    pkl.op(b"u.");
    let entries = [
        ("archive/data.pkl".to_string(), pkl.0),
        ("archive/byteorder".to_string(), b"little".to_vec()),
    ]
    .into_iter()
    .chain(
        storages
            .into_iter()
            .enumerate()
            .map(|(i, b)| (format!("archive/data/{i}"), b)),
    )
    .chain([("archive/version".to_string(), b"3\n".to_vec())]);
    let zip_io = |e: zip::result::ZipError| std::io::Error::other(e.to_string());
    crate::atomic::write_atomic_with(path, |w| {
        let mut zip = zip::ZipWriter::new(w);
        for (name, bytes) in entries {
            let options = zip::write::FileOptions::default()
                .compression_method(zip::CompressionMethod::Stored)
                .large_file(bytes.len() as u64 >= u64::from(u32::MAX));
            zip.start_file_aligned(name, options, 64).map_err(zip_io)?;
            zip.write_all(&bytes)?;
        }
        zip.finish().map_err(zip_io)?;
        Ok(())
    })
}

/// The strides of a contiguous tensor of `size`.
fn contiguous_strides(size: &[i64]) -> Vec<i64> {
    let mut stride = vec![1; size.len()];
    for d in (0..size.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * size[d + 1].max(1);
    }
    stride
}

/// The little-endian bytes of `t` in row-major order (bool as one byte 0 or 1).
fn storage_bytes(t: &Tensor) -> std::result::Result<Vec<u8>, tch::TchError> {
    let flat = t
        .f_to_device(tch::Device::Cpu)?
        .f_contiguous()?
        .f_reshape([-1])?;
    let flat = if flat.f_kind()? == Kind::Bool {
        flat.f_to_kind(Kind::Uint8)?
    } else {
        flat
    };
    let mut bytes = vec![0u8; flat.numel() * flat.f_kind()?.elt_size_in_bytes()];
    flat.f_copy_data_u8(&mut bytes, flat.numel())?;
    Ok(bytes)
}

/// The protocol-2 pickle of [`write_dict`], opcode by opcode.
#[derive(Default)]
struct Pickler(Vec<u8>);

impl Pickler {
    fn op(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// BINUNICODE.
    fn str(&mut self, s: &str) {
        self.0.push(b'X');
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
    }

    /// The shortest of BININT1, BININT2, BININT and LONG1, as pickle chooses.
    fn int(&mut self, v: i64) {
        match v {
            0..=0xff => self.op(&[b'K', v as u8]),
            0x100..=0xffff => {
                self.0.push(b'M');
                self.0.extend_from_slice(&(v as u16).to_le_bytes());
            }
            _ if i32::try_from(v).is_ok() => {
                self.0.push(b'J');
                self.0.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                self.op(&[0x8a, 8]);
                self.0.extend_from_slice(&v.to_le_bytes());
            }
        }
    }

    fn tuple(&mut self, items: &[i64]) {
        self.0.push(b'(');
        for &v in items {
            self.int(v);
        }
        self.0.push(b't');
    }
}

/// Opens the archive and finds its `data.pkl`: the prefix of the entries (`<name>/`, or empty).
fn open(path: &Path) -> Result<(Archive, String)> {
    let mut file = File::open(path).map_err(|source| Error::io(path, source))?;
    let mut head = Vec::with_capacity(LEGACY_MAGIC.len());
    (&mut file)
        .take(LEGACY_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|source| Error::io(path, source))?;
    if head.starts_with(LEGACY_MAGIC) {
        return Err(Error::format(
            path,
            "the legacy (PyTorch < 1.6, non-zip) torch.save format is not supported; load and \
             save it again with a current PyTorch",
        ));
    }
    // ZipArchive seeks to the end of the file itself; the bytes read above do not matter.
    let archive = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| {
        Error::format(
            path,
            format!(
                "not a torch.save zip archive ({e}); the legacy non-zip format of PyTorch < 1.6 \
                 is not supported"
            ),
        )
    })?;
    let prefix = archive
        .file_names()
        .filter_map(|n| n.strip_suffix("data.pkl"))
        .find(|p| p.is_empty() || (p.ends_with('/') && p.matches('/').count() == 1))
        .map(str::to_string)
        .ok_or_else(|| Error::format(path, "no data.pkl in the archive: not a torch.save file"))?;
    Ok((archive, prefix))
}

/// Reads a whole archive entry of at most `limit` bytes.
fn read_entry(archive: &mut Archive, name: &str, limit: u64) -> R<Vec<u8>> {
    let entry = archive
        .by_name(name)
        .map_err(|e| Fail(format!("archive entry {name}: {e}")))?;
    let size = entry.size();
    if size > limit {
        bail!("archive entry {name}: implausible size {size}");
    }
    if size
        > entry
            .compressed_size()
            .saturating_mul(MAX_DEFLATE_RATIO)
            .max(1 << 16)
    {
        bail!(
            "archive entry {name}: {size} bytes cannot come from {} compressed bytes",
            entry.compressed_size()
        );
    }
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // One byte past the declared size shows an entry that lies about it.
    entry
        .take(size.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Fail(format!("{name}: {e}")))?;
    if buf.len() as u64 != size {
        bail!("{name}: {} bytes where the archive says {size}", buf.len());
    }
    Ok(buf)
}

/// The storages of the archive, each read once: the [`Persistent`] source of `data.pkl`.
struct Storages {
    archive: Archive,
    prefix: String,
    loaded: HashMap<String, Rc<Storage>>,
}

impl Persistent for Storages {
    /// `persistent_load` of torch.load: `('storage', storage type, key, location, numel)`.
    fn load(&mut self, pid: &Obj) -> R<Obj> {
        let Obj::Tuple(items) = pid else {
            bail!("persistent id is {}", pid.type_name());
        };
        let [Obj::Str(tag), Obj::Global(ty), Obj::Str(key), _location, Obj::Int(numel)] =
            &items[..]
        else {
            bail!("unsupported persistent id (expected ('storage', type, key, location, numel))");
        };
        if &**tag != "storage" {
            bail!("unsupported persistent id {tag:?}");
        }
        let Global::StorageType(kind) = **ty else {
            bail!("unsupported storage type {ty:?}");
        };
        let numel = usize::try_from(*numel)
            .map_err(|_| Fail(format!("storage {key} has {numel} elements")))?;
        self.get(kind, key, numel).map(Obj::Storage)
    }
}

impl Storages {
    fn get(&mut self, kind: Kind, key: &str, numel: usize) -> R<Rc<Storage>> {
        if let Some(s) = self.loaded.get(key) {
            if s.kind != kind || s.data.numel() != numel {
                bail!(
                    "storage {key} is used as {:?} × {} and as {kind:?} × {numel}",
                    s.kind,
                    s.data.numel()
                );
            }
            return Ok(Rc::clone(s));
        }
        let name = format!("{}data/{key}", self.prefix);
        let nbytes = numel
            .checked_mul(kind.elt_size_in_bytes())
            .ok_or_else(|| Fail(format!("storage {key}: size overflows")))?;
        let declared = self
            .archive
            .by_name(&name)
            .map(|e| e.size())
            .map_err(|e| Fail(format!("archive entry {name}: {e}")))?;
        if declared < nbytes as u64 {
            bail!(
                "storage {name} is truncated: {declared} bytes, expected {nbytes} ({numel} × {kind:?})"
            );
        }
        let bytes = read_entry(&mut self.archive, &name, declared)?;
        let len =
            i64::try_from(numel).map_err(|_| Fail(format!("storage {key}: too many elements")))?;
        let data = bytes.get(..nbytes).unwrap_or_default();
        let t = pickle::tensor_from_bytes(data, &[len], kind)?;
        let s = Rc::new(Storage {
            kind,
            key: key.to_string(),
            data: t,
        });
        self.loaded.insert(key.to_string(), Rc::clone(&s));
        Ok(s)
    }
}

/// Flattens a dict into `out`: tensors under their keys joined with `.`, nested dicts recursed
/// into (the tree is at most [`pickle::MAX_DEPTH`] deep), other values skipped.
fn flatten(value: &Value, prefix: &str, out: &mut BTreeMap<String, Tensor>) -> R<()> {
    let Value::Dict(dict) = value else {
        return Ok(());
    };
    let mut seen = HashSet::new();
    for (k, v) in dict.entries.iter().rev() {
        let Some(key) = k.as_key() else {
            continue;
        };
        if !seen.insert(key.clone()) {
            continue;
        }
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match v {
            Value::Tensor(t) => {
                if out.contains_key(&name) {
                    bail!("two tensors are named {name:?} once nested keys are joined");
                }
                out.insert(name, t.shallow_clone());
            }
            Value::Dict(_) => flatten(v, &name, out)?,
            _ => {}
        }
    }
    Ok(())
}
