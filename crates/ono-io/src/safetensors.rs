//! The one safetensors writer: named tensors (any device) and string metadata, streamed through
//! the [atomic writer](crate::atomic).
//!
//! The file is what the `safetensors` crate and Python's `safetensors` read: an 8-byte
//! little-endian header length, a JSON header (`__metadata__` when there is any, and per tensor
//! its `dtype`, `shape` and `data_offsets`) padded with spaces to a multiple of 8 bytes, then the
//! little-endian data of each tensor, largest elements first so that every tensor is aligned to
//! its element size. The data are copied to the host one bounded chunk at a time, so writing a
//! large dataset does not hold a second copy of it in memory.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

/// Bytes copied from a tensor to the host at a time.
const CHUNK_BYTES: usize = 8 << 20;

/// The safetensors name of a dtype, for those that safetensors and tch share.
pub fn dtype_name(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::Float => "F32",
        Kind::Double => "F64",
        Kind::Half => "F16",
        Kind::BFloat16 => "BF16",
        Kind::Int64 => "I64",
        Kind::Int => "I32",
        Kind::Int16 => "I16",
        Kind::Int8 => "I8",
        Kind::Uint8 => "U8",
        Kind::Bool => "BOOL",
        _ => return None,
    })
}

/// Writes `tensors` and `metadata` to a safetensors file at `path`, atomically. Names must be
/// distinct; dtypes outside [`dtype_name`] are refused with [`Error::Format`] before anything is
/// written.
pub fn write<'a>(
    path: &Path,
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    metadata: &HashMap<String, String>,
) -> Result<()> {
    let fail = |msg: String| Error::format(path, msg);
    let mut entries: Vec<(&str, &Tensor, &'static str, Vec<usize>, usize)> = Vec::new();
    for (name, t) in tensors {
        let kind = t
            .f_kind()
            .map_err(|e| fail(format!("{name}: unknown dtype ({e})")))?;
        let dtype =
            dtype_name(kind).ok_or_else(|| fail(format!("{name}: dtype {kind:?} not storable")))?;
        let shape = t
            .size()
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| fail(format!("{name}: negative size")))?;
        entries.push((name, t, dtype, shape, kind.elt_size_in_bytes()));
    }
    // Largest elements first, then by name (the order of the safetensors crate).
    entries.sort_by(|a, b| b.4.cmp(&a.4).then(a.0.cmp(b.0)));
    if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(fail(format!("two tensors are named {:?}", w[0].0)));
    }

    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        let meta: BTreeMap<&String, &String> = metadata.iter().collect();
        header.insert(
            "__metadata__".into(),
            serde_json::to_value(meta).map_err(|e| fail(e.to_string()))?,
        );
    }
    let mut offset = 0usize;
    for (name, _, dtype, shape, elt) in &entries {
        let n = shape
            .iter()
            .try_fold(*elt, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| fail(format!("{name}: size overflows")))?;
        let end = offset
            .checked_add(n)
            .ok_or_else(|| fail("total size overflows".into()))?;
        header.insert(
            (*name).to_string(),
            serde_json::json!({ "dtype": dtype, "shape": shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let mut header = serde_json::to_vec(&header).map_err(|e| fail(e.to_string()))?;
    // The data start 8-byte aligned: pad the header with spaces, as the safetensors crate does.
    header.resize(header.len().next_multiple_of(8), b' ');

    crate::atomic::try_write_atomic_with(path, |w| {
        let io = |e| Error::io(path, e);
        w.write_all(&(header.len() as u64).to_le_bytes())
            .map_err(io)?;
        w.write_all(&header).map_err(io)?;
        let mut buf = Vec::new();
        for (name, t, _, _, elt) in &entries {
            let torch = |e: tch::TchError| fail(format!("{name}: {e}"));
            let flat = t
                .f_detach()
                .and_then(|t| t.f_reshape([-1]))
                .map_err(torch)?;
            let numel = flat.numel();
            let per_chunk = (CHUNK_BYTES / elt).max(1);
            let mut start = 0;
            while start < numel {
                let len = per_chunk.min(numel - start);
                let chunk = flat
                    .f_narrow(0, start as i64, len as i64)
                    .and_then(|c| c.f_to_device(Device::Cpu))
                    .and_then(|c| c.f_contiguous())
                    .map_err(torch)?;
                buf.resize(len * elt, 0);
                chunk.f_copy_data_u8(&mut buf, len).map_err(torch)?;
                w.write_all(&buf).map_err(io)?;
                start += len;
            }
        }
        Ok(())
    })
}

/// The header of a safetensors file is at most this long (the safetensors crate's own limit).
const MAX_HEADER: u64 = 100 << 20;

/// The string metadata (`__metadata__`) of the safetensors file at `path`, reading its header
/// only; empty when it has none. A file too short for its header, or whose header is not JSON
/// of strings, is an [`Error::Format`].
pub fn read_metadata(path: &Path) -> Result<HashMap<String, String>> {
    use std::io::Read;
    let fail = |msg: String| Error::format(path, msg);
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut len = [0u8; 8];
    file.read_exact(&mut len)
        .map_err(|_| fail("too short for a safetensors header".into()))?;
    let len = u64::from_le_bytes(len);
    if len > MAX_HEADER || len > size.saturating_sub(8) {
        return Err(fail(format!(
            "a header of {len} bytes does not fit this file of {size} bytes"
        )));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header)
        .map_err(|e| Error::io(path, e))?;
    let json: serde_json::Value = serde_json::from_slice(&header)
        .map_err(|e| fail(format!("its header is not JSON: {e}")))?;
    match json.get("__metadata__") {
        None => Ok(HashMap::new()),
        Some(m) => serde_json::from_value(m.clone())
            .map_err(|e| fail(format!("its metadata are not strings: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_data_read_back_with_the_safetensors_crate() {
        let dir = std::env::temp_dir().join(format!("ono_io_st_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let a = Tensor::from_slice(&[1.5f64, -2.0, 3.25]);
        let b = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6])
            .reshape([2, 3])
            .tr();
        let c = Tensor::from_slice(&[true, false]);
        let s = Tensor::from(7i64);
        let meta = HashMap::from([("k".to_string(), "v".to_string())]);
        write(&path, [("b", &b), ("a", &a), ("c", &c), ("s", &s)], &meta).unwrap();

        let bytes = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n % 8, 0);
        let st = ::safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let (_, m) = ::safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(m.metadata().as_ref().unwrap()["k"], "v");
        assert_eq!(read_metadata(&path).unwrap()["k"], "v");
        let a_back = st.tensor("a").unwrap();
        assert_eq!(a_back.shape(), [3]);
        let vals: Vec<f64> = a_back
            .data()
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, [1.5, -2.0, 3.25]);
        // A transposed view is written in its logical (row-major) order.
        let b_back = st.tensor("b").unwrap();
        assert_eq!(b_back.shape(), [3, 2]);
        let vals: Vec<i32> = b_back
            .data()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, [1, 4, 2, 5, 3, 6]);
        assert_eq!(st.tensor("c").unwrap().data(), [1, 0]);
        assert_eq!(st.tensor("s").unwrap().shape(), [] as [usize; 0]);
        // Every tensor is aligned to its element size.
        for (name, view) in st.tensors() {
            let at = view.data().as_ptr() as usize - bytes[8 + n..].as_ptr() as usize;
            let elt = match view.dtype() {
                ::safetensors::Dtype::F64 | ::safetensors::Dtype::I64 => 8,
                ::safetensors::Dtype::I32 => 4,
                _ => 1,
            };
            assert_eq!(at % elt, 0, "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refused_tensors_write_nothing() {
        let dir = std::env::temp_dir().join(format!("ono_io_st_bad_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let z = Tensor::from_slice(&[1.0f32]).to_kind(Kind::ComplexFloat);
        let msg = write(&path, [("z", &z)], &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not storable"), "{msg}");
        let a = Tensor::from_slice(&[1.0f32]);
        let msg = write(&path, [("a", &a), ("a", &a)], &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("two tensors"), "{msg}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tensor_larger_than_a_chunk_is_written_whole() {
        let dir = std::env::temp_dir().join(format!("ono_io_st_big_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let n = (CHUNK_BYTES / 4 * 2 + 3) as i64;
        let t = Tensor::arange(n, (Kind::Float, Device::Cpu));
        write(&path, [("t", &t)], &HashMap::new()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let st = ::safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let data = st.tensor("t").unwrap().data().to_vec();
        assert_eq!(data.len(), n as usize * 4);
        let last = f32::from_le_bytes(data[data.len() - 4..].try_into().unwrap());
        assert_eq!(last, (n - 1) as f32);
        let mid = (CHUNK_BYTES / 4) * 4;
        assert_eq!(
            f32::from_le_bytes(data[mid..mid + 4].try_into().unwrap()),
            (CHUNK_BYTES / 4) as f32
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
