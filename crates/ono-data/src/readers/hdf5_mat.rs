//! MATLAB v7.3 MAT-files (HDF5 with a 512-byte user block holding the MAT header), through the
//! system libhdf5 (`hdf5-metno`; feature `hdf5`).
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

use std::path::Path;

use hdf5::types::{FixedAscii, FloatSize, IntSize, TypeDescriptor, VarLenAscii};
use hdf5::LocationType;
use hdf5_metno as hdf5;

use super::npy::{format_error, io_error};
use crate::array::{ArrayData, NamedArray};
use crate::Result;

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

#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Every dataset was written by MATLAB: reverse the axes.
    Matlab,
    /// Reverse only datasets that carry `MATLAB_class`.
    ByAttribute,
}

fn read(path: &Path, names: Option<&[&str]>, order: Order) -> Result<Vec<NamedArray>> {
    let file_len = std::fs::metadata(path)
        .map_err(|source| io_error(path, source))?
        .len();
    let h5err = |e: hdf5::Error| format_error(path, format!("HDF5: {e}"));
    let file = hdf5::File::open(path).map_err(h5err)?;
    let members: Vec<String> = file
        .member_names()
        .map_err(h5err)?
        .into_iter()
        .filter(|n| !n.starts_with('#'))
        .collect();
    let wanted: Vec<String> = match names {
        Some(ns) => {
            let mut once: Vec<String> = Vec::with_capacity(ns.len());
            for n in ns {
                if !members.iter().any(|m| m == n) {
                    return Err(format_error(
                        path,
                        format!("no variable `{n}` (the file has {})", members.join(", ")),
                    ));
                }
                if !once.iter().any(|o| o == n) {
                    once.push(n.to_string());
                }
            }
            once
        }
        None => members,
    };
    let mut out = Vec::with_capacity(wanted.len());
    for name in &wanted {
        let var = variable(&file, name, order, file_len)
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
    file: &hdf5::File,
    name: &str,
    order: Order,
    file_len: u64,
) -> std::result::Result<Var, String> {
    let err = |e: hdf5::Error| format!("HDF5: {e}");
    match file.loc_type_by_name(name).map_err(err)? {
        LocationType::Dataset => {}
        LocationType::Group => {
            let class = file.group(name).ok().and_then(|g| class_of(&g));
            return Ok(Var::Unsupported(match class.as_deref() {
                Some("struct") | None => "a struct (an HDF5 group)".into(),
                Some(c) => format!("a MATLAB `{c}` stored as a group (sparse?)"),
            }));
        }
        _ => return Ok(Var::Unsupported("not a dataset".into())),
    }
    let ds = file.dataset(name).map_err(err)?;
    let class = class_of(&ds);
    let matlab = order == Order::Matlab || class.is_some();
    match class.as_deref() {
        None
        | Some(
            "double" | "single" | "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32"
            | "int64" | "uint64" | "logical",
        ) => {}
        Some(other) => return Ok(Var::Unsupported(format!("of MATLAB class `{other}`"))),
    }
    if ds.attr("MATLAB_empty").is_ok() {
        // An empty MATLAB array is stored as its dims (uint64) with this flag.
        let dims: Vec<u64> = ds.read_raw().map_err(err)?;
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
    let descriptor = ds.dtype().and_then(|t| t.to_descriptor()).map_err(err)?;
    let elem_size = match &descriptor {
        TypeDescriptor::Integer(s) | TypeDescriptor::Unsigned(s) => *s as u64,
        TypeDescriptor::Float(s) => *s as u64,
        TypeDescriptor::Boolean => 1,
        TypeDescriptor::Compound(c) if c.fields.len() == 2 => {
            return Ok(Var::Unsupported("complex".into()))
        }
        other => return Ok(Var::Unsupported(format!("of HDF5 type {other}"))),
    };
    let h5_shape = ds.shape();
    // The product of the non-zero dims must fit: then no partial product overflows, in
    // whichever order the shape is multiplied out later (it is reversed below).
    h5_shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .ok_or("shape overflows")?;
    let n: u64 = h5_shape.iter().map(|&d| d as u64).product();
    // The dataspace is untrusted metadata: before libhdf5 allocates `n` elements, check that the
    // file can hold them (stored plainly, or deflated at most 1032:1).
    let bound = if ds.filters().is_empty() {
        file_len
    } else {
        file_len.saturating_mul(MAX_DEFLATE_RATIO)
    };
    if n.checked_mul(elem_size).is_none_or(|b| b > bound) {
        return Err(format!(
            "dataset of shape {h5_shape:?} needs more bytes than the {file_len}-byte file can hold"
        ));
    }
    let data = match descriptor {
        TypeDescriptor::Float(FloatSize::U8) => ArrayData::F64(ds.read_raw().map_err(err)?),
        TypeDescriptor::Float(FloatSize::U4) => ArrayData::F32(ds.read_raw().map_err(err)?),
        TypeDescriptor::Integer(IntSize::U8) => ArrayData::I64(ds.read_raw().map_err(err)?),
        TypeDescriptor::Integer(IntSize::U4) => ArrayData::I32(ds.read_raw().map_err(err)?),
        TypeDescriptor::Integer(IntSize::U2) => ArrayData::I16(ds.read_raw().map_err(err)?),
        TypeDescriptor::Integer(IntSize::U1) => ArrayData::I8(ds.read_raw().map_err(err)?),
        TypeDescriptor::Unsigned(IntSize::U8) => ArrayData::U64(ds.read_raw().map_err(err)?),
        TypeDescriptor::Unsigned(IntSize::U4) => ArrayData::U32(ds.read_raw().map_err(err)?),
        TypeDescriptor::Unsigned(IntSize::U2) => ArrayData::U16(ds.read_raw().map_err(err)?),
        TypeDescriptor::Unsigned(IntSize::U1) => ArrayData::U8(ds.read_raw().map_err(err)?),
        TypeDescriptor::Boolean => {
            let v: Vec<bool> = ds.read_raw().map_err(err)?;
            ArrayData::U8(v.into_iter().map(u8::from).collect())
        }
        other => return Ok(Var::Unsupported(format!("of HDF5 type {other}"))),
    };
    let built = if matlab {
        let shape: Vec<usize> = h5_shape.iter().rev().copied().collect();
        NamedArray::from_fortran(name, shape, data)
    } else {
        NamedArray::new(name, h5_shape, data)
    };
    built.map(Var::Array).map_err(|e| e.to_string())
}

/// The `MATLAB_class` attribute (a short fixed- or variable-length ASCII string), if any.
fn class_of(loc: &hdf5::Location) -> Option<String> {
    let attr = loc.attr("MATLAB_class").ok()?;
    if let Ok(s) = attr.read_scalar::<FixedAscii<64>>() {
        return Some(s.as_str().trim_end_matches('\0').to_string());
    }
    attr.read_scalar::<VarLenAscii>()
        .ok()
        .map(|s| s.as_str().to_string())
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
