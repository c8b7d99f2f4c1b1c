//! `.safetensors` files: an 8-byte little-endian header length, a JSON header naming each
//! tensor's dtype, shape and byte range, then the raw little-endian data.
//!
//! Parsing and validation (offsets contiguous, sizes matching shapes, no overflow, the file
//! exactly as long as the header says) are the `safetensors` crate's; this module converts the
//! tensors to [`NamedArray`]s and names the dtypes it refuses.

use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::npy::{bf16_to_f32, f16_to_f32, format_error, io_error};
use crate::array::{ArrayData, NamedArray};
use crate::Result;

/// The dtypes of the format (the crate's enum refuses the others at parse time, with a message
/// that does not say which).
const KNOWN_DTYPES: &[&str] = &[
    "BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64",
];

/// Reads every tensor of a `.safetensors` file, sorted by name. Types are kept, except that
/// `F16`/`BF16` are widened to float32 (exactly) and `BOOL` becomes uint8. The `__metadata__`
/// entry is ignored. A dtype outside the list above (float8, complex, ...) is refused with
/// [`Error::Format`](crate::Error::Format) naming it.
pub fn read_safetensors(path: &Path) -> Result<Vec<NamedArray>> {
    read_safetensors_names(path, None)
}

/// [`read_safetensors`] of only `names`, each once, in the order asked; a missing one is an error
/// listing what the file has.
pub fn read_safetensors_names(path: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    // The crate parses a whole in-memory buffer; the file's real length bounds this allocation.
    let bytes = std::fs::read(path).map_err(|source| io_error(path, source))?;
    parse(&bytes, names).map_err(|msg| format_error(path, msg))
}

fn parse(bytes: &[u8], names: Option<&[&str]>) -> std::result::Result<Vec<NamedArray>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| describe(bytes, e))?;
    let wanted: Vec<String> = match names {
        Some(ns) => {
            let mut once: Vec<String> = Vec::with_capacity(ns.len());
            for n in ns {
                if !once.iter().any(|o| o == n) {
                    once.push(n.to_string());
                }
            }
            once
        }
        None => {
            let mut all: Vec<String> = st.names().into_iter().cloned().collect();
            all.sort();
            all
        }
    };
    wanted
        .iter()
        .map(|name| {
            let view = st.tensor(name).map_err(|_| {
                let mut have: Vec<&String> = st.names();
                have.sort();
                format!(
                    "no tensor `{name}` (it has {})",
                    have.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            let data = convert(view.dtype(), view.data()).ok_or_else(|| {
                format!("tensor `{name}`: dtype {:?} is not supported", view.dtype())
            })?;
            NamedArray::new(name.as_str(), view.shape().to_vec(), data).map_err(|e| e.to_string())
        })
        .collect()
}

/// The crate's error, plus the offending dtype when that is why the header did not parse.
fn describe(bytes: &[u8], e: safetensors::SafeTensorError) -> String {
    let unknown = header_json(bytes).and_then(|h| {
        let map = h.as_object()?;
        map.iter().find_map(|(name, info)| {
            let dtype = info.get("dtype")?.as_str()?;
            (!KNOWN_DTYPES.contains(&dtype)).then(|| format!("tensor `{name}` has dtype {dtype}"))
        })
    });
    match unknown {
        Some(what) => format!("{what}, which is not supported (real numbers only)"),
        None => format!("not a valid .safetensors file: {e:?}"),
    }
}

fn header_json(bytes: &[u8]) -> Option<serde_json::Value> {
    let len = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let end = usize::try_from(len).ok()?.checked_add(8)?;
    serde_json::from_slice(bytes.get(8..end)?).ok()
}

/// Little-endian bytes of one dtype to [`ArrayData`]; `None` for a dtype it cannot hold.
fn convert(dtype: Dtype, b: &[u8]) -> Option<ArrayData> {
    macro_rules! le {
        ($variant:ident, $t:ty) => {
            ArrayData::$variant(
                b.chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| {
                        let mut a = [0u8; std::mem::size_of::<$t>()];
                        a.copy_from_slice(c);
                        <$t>::from_le_bytes(a)
                    })
                    .collect(),
            )
        };
    }
    let halves = |f: fn(u16) -> f32| {
        ArrayData::F32(
            b.chunks_exact(2)
                .map(|c| f(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        )
    };
    Some(match dtype {
        Dtype::F64 => le!(F64, f64),
        Dtype::F32 => le!(F32, f32),
        Dtype::F16 => halves(f16_to_f32),
        Dtype::BF16 => halves(bf16_to_f32),
        Dtype::I64 => le!(I64, i64),
        Dtype::I32 => le!(I32, i32),
        Dtype::I16 => le!(I16, i16),
        Dtype::I8 => le!(I8, i8),
        Dtype::U8 => le!(U8, u8),
        Dtype::U16 => le!(U16, u16),
        Dtype::U32 => le!(U32, u32),
        Dtype::U64 => le!(U64, u64),
        Dtype::BOOL => ArrayData::U8(b.iter().map(|&x| u8::from(x != 0)).collect()),
        _ => return None,
    })
}
