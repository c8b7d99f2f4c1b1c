//! MATLAB v7.3 MAT-files (HDF5 with a 512-byte user block holding the MAT header), read in pure
//! Rust (`hdf5-pure`; why this crate and not libhdf5: docs/data.md).
//!
//! MATLAB writes an array of dims `[d0, …, dk]` as an HDF5 dataset of shape `[dk, …, d0]` whose
//! C-order data are MATLAB's column-major data. So the dataset's shape is reversed and the data
//! go through [`NamedArray::from_fortran`], the same single reordering the v5 reader uses:
//! `coeff` of MATLAB size (1024, 421, 421) comes back with shape `[1024, 421, 421]` and
//! `a[i, j, k]` equal to MATLAB's `coeff(i+1, j+1, k+1)`, as from [`super::mat_v5::read`].
//!
//! Each variable's MATLAB class is its `MATLAB_class` attribute: the numeric classes and
//! `logical` (uint8) are read; `char`, `cell`, `struct`, sparse, complex and object variables are
//! skipped when all variables are read and refused when asked for by name. `#refs#` and
//! `#subsystem#` (MATLAB's internal groups) are never variables.
//!
//! [`write_mat73`] writes such files (through `hdf5-pure`'s MAT writer), for the miniature
//! benchmark copies in this format.

use std::collections::HashMap;
use std::path::Path;

use hdf5_pure::{AttrValue, DType};

use super::mat_v5::MEMORY_PATH;
use super::npy::{format_error, io_error};
use crate::array::{ArrayData, NamedArray};
use crate::Result;

/// Writes `arrays` (row-major, numpy's order: `a[i, j, k]` becomes MATLAB's `a(i+1, j+1, k+1)`)
/// as a MATLAB v7.3 file, atomically. 0-D and 1-D arrays become 1×1 and 1×n, as in
/// [`super::mat_v5::write`]. The data are stored contiguous, not deflated: `hdf5-pure` compresses
/// only in HDF5 1.10's chunk format, and MATLAB's v7.3 loader reads the 1.8 format.
pub fn write_mat73(path: &Path, arrays: &[NamedArray]) -> Result<()> {
    use hdf5_pure::mat::{MatBuilder, Options};
    let mut mat = MatBuilder::new(Options::default());
    let invalid = |name: &str, e: hdf5_pure::mat::MatError| {
        crate::Error::Invalid(format!("MAT v7.3 variable `{name}`: {e}"))
    };
    for a in arrays {
        let dims: Vec<usize> = match a.shape.len() {
            0 => vec![1, 1],
            1 => vec![1, a.shape[0]],
            _ => a.shape.clone(),
        };
        // The reordering of the v5 writer: row-major data of shape S, read as column-major, are
        // the array of shape reverse(S) with its axes reversed.
        let rev: Vec<usize> = dims.iter().rev().copied().collect();
        let column_major = NamedArray::from_fortran(a.name.clone(), rev, a.data.clone())?.data;
        let name = a.name.as_str();
        match &column_major {
            ArrayData::F64(v) => mat.write_f64(name, &dims, v),
            ArrayData::F32(v) => mat.write_f32(name, &dims, v),
            ArrayData::I64(v) => mat.write_i64(name, &dims, v),
            ArrayData::I32(v) => mat.write_i32(name, &dims, v),
            ArrayData::I16(v) => mat.write_i16(name, &dims, v),
            ArrayData::I8(v) => mat.write_i8(name, &dims, v),
            ArrayData::U8(v) => mat.write_u8(name, &dims, v),
            ArrayData::U16(v) => mat.write_u16(name, &dims, v),
            ArrayData::U32(v) => mat.write_u32(name, &dims, v),
            ArrayData::U64(v) => mat.write_u64(name, &dims, v),
        }
        .map_err(|e| invalid(name, e))?;
    }
    ono_io::atomic::try_write_atomic_with(path, |w| {
        mat.finish_to(w)
            .map_err(|e| format_error(path, format!("writing MAT v7.3: {e}")))
    })
}

/// deflate (MATLAB's only filter) cannot expand data more than about 1032:1.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Reads the numeric (and logical, as uint8) variables of a MATLAB v7.3 file, with MATLAB's
/// logical shapes (see the module doc), or only `names` (each once, in that order; a missing or
/// non-numeric one is an error). Without `names`, variables of other classes are skipped.
pub fn read_mat73(path: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    read(path, names, Order::Matlab)
}

/// Reads any HDF5 file's top-level datasets: those with a `MATLAB_class` attribute as
/// [`read_mat73`] does, the others in HDF5's (numpy's, h5py's) C order with the dataset's shape.
pub fn read_hdf5(path: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    read(path, names, Order::ByAttribute)
}

/// [`read_mat73`] of an in-memory file (errors name the path `<memory>`).
pub fn parse_mat73(bytes: Vec<u8>, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    parse(bytes, Path::new(MEMORY_PATH), names, Order::Matlab)
}

/// [`read_hdf5`] of an in-memory file (errors name the path `<memory>`).
pub fn parse_hdf5(bytes: Vec<u8>, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    parse(bytes, Path::new(MEMORY_PATH), names, Order::ByAttribute)
}

#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Every dataset was written by MATLAB: reverse the axes.
    Matlab,
    /// Reverse only datasets that carry `MATLAB_class`.
    ByAttribute,
}

fn read(path: &Path, names: Option<&[&str]>, order: Order) -> Result<Vec<NamedArray>> {
    // The whole file in memory (a compressed v7.3 file is smaller than its arrays): one code path
    // with `parse_mat73`, which the fuzz target drives.
    let bytes = std::fs::read(path).map_err(|source| io_error(path, source))?;
    parse(bytes, path, names, order)
}

fn parse(
    bytes: Vec<u8>,
    path: &Path,
    names: Option<&[&str]>,
    order: Order,
) -> Result<Vec<NamedArray>> {
    let h5err = |e: hdf5_pure::Error| format_error(path, format!("HDF5: {e}"));
    let file_len = bytes.len() as u64;
    let file = hdf5_pure::File::from_bytes(bytes).map_err(h5err)?;
    // libhdf5 refuses a file shorter than its superblock's end-of-file address (which counts the
    // user block); so do we, or a truncated file could read as one whose missing chunks hold the
    // fill value.
    let eof = file.superblock().eof_address;
    if eof > file_len {
        return Err(format_error(
            path,
            format!("truncated HDF5 file: {file_len} bytes, its superblock says {eof}"),
        ));
    }
    let root = file.root();
    let datasets = root.datasets().map_err(h5err)?;
    let groups = root.groups().map_err(h5err)?;
    // By name, the order in which libhdf5 listed them (and the fixtures' records expect).
    let mut members: Vec<&String> = datasets
        .iter()
        .chain(&groups)
        .filter(|n| !n.starts_with('#'))
        .collect();
    members.sort();
    members.dedup();
    let wanted: Vec<&str> = match names {
        Some(ns) => {
            let mut once: Vec<&str> = Vec::with_capacity(ns.len());
            for &n in ns {
                if !members.iter().any(|m| *m == n) {
                    let have: Vec<&str> = members.iter().map(|m| m.as_str()).collect();
                    return Err(format_error(
                        path,
                        format!("no variable `{n}` (the file has {})", have.join(", ")),
                    ));
                }
                if !once.contains(&n) {
                    once.push(n);
                }
            }
            once
        }
        None => members.iter().map(|m| m.as_str()).collect(),
    };
    let mut out = Vec::with_capacity(wanted.len());
    for name in wanted {
        let var = if datasets.iter().any(|d| d == name) {
            variable(&file, name, order, file_len)
        } else {
            let class = root
                .group(name)
                .ok()
                .and_then(|g| g.attrs().ok())
                .and_then(|a| class_of(&a));
            Ok(Var::Unsupported(match class.as_deref() {
                Some("struct") | None => "a struct (an HDF5 group)".into(),
                Some(c) => format!("a MATLAB `{c}` stored as a group (sparse?)"),
            }))
        }
        .map_err(|msg| format_error(path, format!("variable `{name}`: {msg}")))?;
        match var {
            Var::Array(a) => out.push(a),
            Var::Unsupported(what) if names.is_some() => {
                return Err(format_error(
                    path,
                    format!("variable `{name}` is {what}, not a real numeric array"),
                ));
            }
            Var::Unsupported(_) => {}
        }
    }
    Ok(out)
}

enum Var {
    Array(NamedArray),
    /// What it is, for the message when it was asked for.
    Unsupported(String),
}

fn variable(
    file: &hdf5_pure::File,
    name: &str,
    order: Order,
    file_len: u64,
) -> std::result::Result<Var, String> {
    let err = |e: hdf5_pure::Error| format!("HDF5: {e}");
    let ds = file.dataset(name).map_err(err)?;
    let attrs = ds.attrs().map_err(err)?;
    let class = class_of(&attrs);
    let matlab = order == Order::Matlab || class.is_some();
    match class.as_deref() {
        None
        | Some(
            "double" | "single" | "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32"
            | "int64" | "uint64" | "logical",
        ) => {}
        Some(other) => return Ok(Var::Unsupported(format!("of MATLAB class `{other}`"))),
    }
    let dtype = ds.dtype().map_err(err)?;
    let elem_size = ds.element_size().map_err(err)?;
    let h5_shape = ds.shape().map_err(err)?;
    // The product of the non-zero dims must fit: then no partial product overflows, in
    // whichever order the shape is multiplied out later (it is reversed below).
    let dims_fit = |dims: &[u64]| {
        dims.iter()
            .filter(|&&d| d != 0)
            .try_fold(elem_size.max(1), |acc, &d| acc.checked_mul(d))
    };
    if attrs.contains_key("MATLAB_empty") {
        // An empty MATLAB array is stored as its dims (uint64) with this flag.
        if dims_fit(&h5_shape).is_none_or(|b| b > file_len) {
            return Err(format!("MATLAB_empty dataset of shape {h5_shape:?}"));
        }
        let dims: Vec<u64> = ds.read_u64().map_err(err)?;
        let shape: Vec<usize> = dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| "bad empty dims".to_string()))
            .collect::<std::result::Result<_, _>>()?;
        if shape.iter().product::<usize>() != 0 || dims.len() > 64 {
            return Err(format!("MATLAB_empty with dims {dims:?}"));
        }
        let data = empty_of(class.as_deref().unwrap_or("double"));
        return NamedArray::new(name, shape, data)
            .map(Var::Array)
            .map_err(|e| e.to_string());
    }
    match &dtype {
        DType::Compound(fields) if fields.len() == 2 => {
            return Ok(Var::Unsupported("complex".into()))
        }
        DType::F32 | DType::F64 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => {}
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {}
        DType::Enum(members) if is_bool(members) && elem_size == 1 => {}
        other => return Ok(Var::Unsupported(format!("of HDF5 type {other}"))),
    }
    // The dataspace and chunk dims are untrusted metadata: before the reader allocates them,
    // check that the file can hold them (stored plainly, or deflated at most 1032:1).
    let bound = if ds.filters().is_empty() {
        file_len
    } else {
        file_len.saturating_mul(MAX_DEFLATE_RATIO)
    };
    let n = h5_shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let chunk = ds.chunk_shape().map_err(err)?;
    let too_big = |dims: &[u64]| dims_fit(dims).is_none_or(|b| b > bound);
    if n.is_none() || too_big(&h5_shape) || chunk.as_deref().is_some_and(too_big) {
        return Err(format!(
            "dataset of shape {h5_shape:?} (chunks {chunk:?}) needs more bytes than the \
             {file_len}-byte file can hold"
        ));
    }
    let data = match dtype {
        DType::F64 => ArrayData::F64(ds.read_f64().map_err(err)?),
        DType::F32 => ArrayData::F32(ds.read_f32().map_err(err)?),
        DType::I64 => ArrayData::I64(ds.read_i64().map_err(err)?),
        DType::I32 => ArrayData::I32(ds.read_i32().map_err(err)?),
        DType::I16 => ArrayData::I16(ds.read_i16().map_err(err)?),
        DType::I8 => ArrayData::I8(ds.read_i8().map_err(err)?),
        DType::U64 => ArrayData::U64(ds.read_u64().map_err(err)?),
        DType::U32 => ArrayData::U32(ds.read_u32().map_err(err)?),
        DType::U16 => ArrayData::U16(ds.read_u16().map_err(err)?),
        // uint8 and h5py's bool (an enum FALSE/TRUE over one byte).
        _ => ArrayData::U8(ds.read_raw().map_err(err)?),
    };
    let shape = h5_shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dims {h5_shape:?} overflow usize")))
        .collect::<std::result::Result<Vec<usize>, _>>()?;
    let built = if matlab {
        NamedArray::from_fortran(name, shape.into_iter().rev().collect(), data)
    } else {
        NamedArray::new(name, shape, data)
    };
    built.map(Var::Array).map_err(|e| e.to_string())
}

fn is_bool(members: &[String]) -> bool {
    members.len() == 2 && members[0] == "FALSE" && members[1] == "TRUE"
}

/// The `MATLAB_class` attribute (a short ASCII string), if any.
fn class_of(attrs: &HashMap<String, AttrValue>) -> Option<String> {
    let s = match attrs.get("MATLAB_class")? {
        AttrValue::AsciiString(s) | AttrValue::String(s) => s,
        AttrValue::StringSized { value, .. } => value,
        _ => return None,
    };
    Some(s.trim_end_matches('\0').to_string())
}

fn empty_of(class: &str) -> ArrayData {
    match class {
        "single" => ArrayData::F32(vec![]),
        "int8" => ArrayData::I8(vec![]),
        "uint8" | "logical" => ArrayData::U8(vec![]),
        "int16" => ArrayData::I16(vec![]),
        "uint16" => ArrayData::U16(vec![]),
        "int32" => ArrayData::I32(vec![]),
        "uint32" => ArrayData::U32(vec![]),
        "int64" => ArrayData::I64(vec![]),
        "uint64" => ArrayData::U64(vec![]),
        _ => ArrayData::F64(vec![]),
    }
}
