//! One entry point for every format: [`read_any`] looks at a file's first bytes and hands it to
//! the matching reader, falling back to the extension when the content says nothing (so that a
//! damaged `.npy` still gets the `.npy` reader's precise error).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::npy::{format_error, io_error, NPY_MAGIC};
use super::torch_pt::LEGACY_TORCH_MAGIC;
use super::{mat_v5, npy, safetensors_file, torch_pt};
use crate::array::NamedArray;
use crate::Result;

/// The HDF5 superblock signature; found at offset 0, 512, 1024, 2048, ... (after a user block).
const HDF5_SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Bytes read to sniff a file: enough for a MAT header and an HDF5 signature after a user block
/// of up to 2048 bytes.
const SNIFF_LEN: u64 = 2048 + 8;

/// The formats [`read_any`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy `.npy`.
    Npy,
    /// numpy `.npz` (a zip of `.npy`).
    Npz,
    /// PyTorch `torch.save` (zip, or the legacy pickle format, which is then refused).
    TorchPt,
    /// `.safetensors`.
    Safetensors,
    /// MATLAB v5/v7 MAT-file.
    MatV5,
    /// MATLAB v7.3 MAT-file (HDF5 with a 512-byte user block).
    Mat73,
    /// Another HDF5 file (read like a v7.3 file).
    Hdf5,
}

/// The format of the file at `path`: by its first bytes, else by its extension.
pub fn sniff(path: &Path) -> Result<Format> {
    let file = File::open(path).map_err(|source| io_error(path, source))?;
    let mut head = Vec::new();
    file.take(SNIFF_LEN)
        .read_to_end(&mut head)
        .map_err(|source| io_error(path, source))?;
    if let Some(format) = sniff_bytes(&head, path) {
        return Ok(format);
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    Ok(match ext.as_str() {
        "npy" => Format::Npy,
        "npz" => Format::Npz,
        "pt" | "pth" => Format::TorchPt,
        "safetensors" => Format::Safetensors,
        "mat" => Format::MatV5,
        "h5" | "hdf5" => Format::Hdf5,
        _ => {
            return Err(format_error(
                path,
                "unrecognised file format (not .npy, .npz, torch.save, .safetensors, MAT or HDF5)",
            ))
        }
    })
}

/// Recognises a format by content; `None` when nothing matches. Needs `path` only to look inside
/// zip archives (npz or torch.save).
fn sniff_bytes(head: &[u8], path: &Path) -> Option<Format> {
    if head.starts_with(NPY_MAGIC) {
        return Some(Format::Npy);
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Some(zip_kind(path));
    }
    if head.starts_with(LEGACY_TORCH_MAGIC) {
        return Some(Format::TorchPt);
    }
    if head.starts_with(HDF5_SIGNATURE) {
        return Some(Format::Hdf5);
    }
    if [512usize, 1024, 2048]
        .iter()
        .any(|&o| head.get(o..o + 8) == Some(HDF5_SIGNATURE))
    {
        return Some(if head.starts_with(b"MATLAB 7.3 MAT-file") {
            Format::Mat73
        } else {
            Format::Hdf5
        });
    }
    // MAT v5: a 116-byte text, 8-byte subsystem offset, version 0x0100 and an endian indicator
    // ("IM" written little-endian, "MI" big-endian) with the version in the same byte order.
    if let Some(tail) = head.get(124..128) {
        if tail == [0x00, 0x01, b'I', b'M'] || tail == [0x01, 0x00, b'M', b'I'] {
            return Some(Format::MatV5);
        }
        if head.starts_with(b"MATLAB 7.3 MAT-file") {
            return Some(Format::Mat73);
        }
    }
    // safetensors: u64 header length, then a JSON object.
    if let (Some(len), Some(b'{')) = (head.get(..8), head.get(8)) {
        let mut n = [0u8; 8];
        n.copy_from_slice(len);
        if u64::from_le_bytes(n) >= 2 {
            return Some(Format::Safetensors);
        }
    }
    None
}

/// A zip holding a `data.pkl` is a torch.save archive; any other zip is taken for an `.npz`.
fn zip_kind(path: &Path) -> Format {
    let Ok(file) = File::open(path) else {
        return Format::Npz;
    };
    let Ok(archive) = zip::ZipArchive::new(BufReader::new(file)) else {
        return Format::Npz; // the npz reader will say what is wrong
    };
    let torch = archive.file_names().any(|n| {
        n.strip_suffix("data.pkl")
            .is_some_and(|p| p.is_empty() || (p.ends_with('/') && p.matches('/').count() == 1))
    });
    if torch {
        Format::TorchPt
    } else {
        Format::Npz
    }
}

/// Reads the arrays of any supported file (see [`Format`]), detected by [`sniff`]. `names`
/// selects arrays (each must be there; result in the order of `names`); `None` reads all that
/// the format's reader returns by default. A single `.npy` is one array named after the file
/// stem.
pub fn read_any(path: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    let format = sniff(path)?;
    match format {
        Format::Npy => select(path, vec![npy::read_npy(path)?], names),
        Format::Npz => npy::read_npz(path, names),
        Format::TorchPt => select(path, torch_pt::read_pt(path)?, names),
        Format::Safetensors => safetensors_file::read_safetensors_names(path, names),
        Format::MatV5 => mat_v5::read(path, names),
        Format::Mat73 | Format::Hdf5 => read_hdf5(path, names, format),
    }
}

fn read_hdf5(path: &Path, names: Option<&[&str]>, format: Format) -> Result<Vec<NamedArray>> {
    if format == Format::Mat73 {
        super::hdf5_mat::read_mat73(path, names)
    } else {
        super::hdf5_mat::read_hdf5(path, names)
    }
}

/// `arrays` restricted to `names` (in that order, each once); a missing name is an error.
fn select(path: &Path, arrays: Vec<NamedArray>, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    let Some(names) = names else {
        return Ok(arrays);
    };
    let mut pool: Vec<Option<NamedArray>> = arrays.into_iter().map(Some).collect();
    let mut out: Vec<NamedArray> = Vec::with_capacity(names.len());
    for n in names {
        if out.iter().any(|a| a.name == *n) {
            continue;
        }
        let found = pool
            .iter_mut()
            .find(|a| a.as_ref().is_some_and(|a| a.name == *n))
            .and_then(Option::take);
        match found {
            Some(a) => out.push(a),
            None => {
                let have: Vec<&str> = pool
                    .iter()
                    .flatten()
                    .map(|a| a.name.as_str())
                    .chain(out.iter().map(|a| a.name.as_str()))
                    .collect();
                return Err(format_error(
                    path,
                    format!("no array `{n}` (it has {})", have.join(", ")),
                ));
            }
        }
    }
    Ok(out)
}
