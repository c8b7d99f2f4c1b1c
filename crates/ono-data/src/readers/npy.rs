//! numpy's `.npy` files and `.npz` archives (zips of `.npy`, stored or deflated), read and
//! written without numpy.
//!
//! Reading accepts format versions 1.0, 2.0 and 3.0; the dtypes `f8 f4 f2 i8 i4 i2 i1 u1 u2 u4 u8
//! b1` in either byte order (converted to the host's), `float16` widened to float32 and `bool` read
//! as uint8 (0/1); C or Fortran order (Fortran data are reordered once, by
//! [`NamedArray::from_fortran`]); 0-d arrays (shape `[]`). Object arrays, structured dtypes,
//! complex, strings and datetimes are refused with [`Error::Format`] naming the dtype.
//!
//! Input is untrusted: nothing here panics on a corrupt file, and no buffer is sized from a header
//! before the header's claim has been checked against the bytes that are really there (the file
//! length, the slice length, or what a zip entry's compressed bytes can expand to). The data must
//! fill the file exactly: a header whose shape disagrees with the file size is refused, which
//! catches most corrupt shapes instead of reading a wrong-shaped array.
//!
//! Writing always produces C-order little-endian version 1.0 files (2.0 when the header needs it),
//! through the one atomic writer ([`ono_io::atomic`]), so a reader never sees a half-written file.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use ono_io::atomic::write_atomic_with;

use zip::write::FileOptions;
use zip::CompressionMethod;

use crate::array::{ArrayData, NamedArray};
use crate::{Error, Result};

/// The first six bytes of every `.npy` file.
pub const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header accepted. numpy refuses headers over 10 000 bytes by default; only a structured
/// dtype with very many fields would need more, and those are refused anyway.
const MAX_HEADER_LEN: usize = 1 << 20;

/// Deepest nesting of brackets in a header (the parser recurses; a header of a million `(` must
/// not overflow the stack).
const MAX_HEADER_DEPTH: usize = 16;

/// deflate cannot expand data by more than about 1032:1; a zip entry that claims more
/// uncompressed bytes than that is lying, and its claim must not size an allocation.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Elements converted per block while reading or writing (64 KiB of 8-byte values).
const BLOCK_ELEMS: usize = 8192;

/// Parses a whole `.npy` file held in memory. The array's name is empty. Errors name the path
/// `<memory>`. Never panics, whatever the bytes.
pub fn parse_npy(bytes: &[u8]) -> Result<NamedArray> {
    let mut reader = bytes;
    read_stream(&mut reader, bytes.len() as u64, String::new())
        .map_err(|f| f.into_error(Path::new("<memory>"), None))
}

/// Reads a `.npy` file; the array is named after the file stem (`X` for `NACA_X.npy` is `NACA_X`).
pub fn read_npy(path: &Path) -> Result<NamedArray> {
    let file = File::open(path).map_err(|source| io_error(path, source))?;
    let len = file
        .metadata()
        .map_err(|source| io_error(path, source))?
        .len();
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    read_stream(&mut BufReader::new(file), len, name).map_err(|f| f.into_error(path, None))
}

/// Reads the arrays of a `.npz` archive (`np.savez`, stored, or `np.savez_compressed`, deflated),
/// in archive order, named by their entry names less `.npy`. With `names`, only those, each once,
/// in the order of `names`; a missing one is an error listing what the archive has. Entries not
/// asked for are not decompressed.
pub fn read_npz(path: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    let file = File::open(path).map_err(|source| io_error(path, source))?;
    let file_len = file
        .metadata()
        .map_err(|source| io_error(path, source))?
        .len();
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| format_error(path, format!("not a .npz (zip) archive: {e}")))?;
    let mut out: Vec<NamedArray> = Vec::new();
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| format_error(path, format!("zip entry {i}: {e}")))?;
        if entry.is_dir() {
            continue;
        }
        let entry_name = entry.name().to_string();
        let key = entry_name
            .strip_suffix(".npy")
            .unwrap_or(&entry_name)
            .to_string();
        if names.is_some_and(|ns| !ns.contains(&key.as_str())) {
            continue;
        }
        if out.iter().any(|a| a.name == key) {
            return Err(format_error(path, format!("two arrays named `{key}`")));
        }
        let arr = read_entry(&mut entry, file_len, key)
            .map_err(|f| f.into_error(path, Some(&entry_name)))?;
        out.push(arr);
    }
    if let Some(names) = names {
        // The order asked for, as the MAT readers return it.
        let mut ordered = Vec::with_capacity(names.len());
        for n in names {
            if let Some(i) = out.iter().position(|a| a.name == *n) {
                ordered.push(out.swap_remove(i));
            } else if !ordered.iter().any(|a: &NamedArray| a.name == *n) {
                let mut have: Vec<String> = archive
                    .file_names()
                    .map(|f| f.strip_suffix(".npy").unwrap_or(f).to_string())
                    .collect();
                have.sort();
                return Err(format_error(
                    path,
                    format!("no array `{n}` in the archive (it has {})", have.join(", ")),
                ));
            }
        }
        return Ok(ordered);
    }
    Ok(out)
}

/// Writes one array as a C-order little-endian `.npy` file, atomically (temporary file, then
/// rename). The array's name is not stored (numpy has no place for it).
pub fn write_npy(path: &Path, a: &NamedArray) -> Result<()> {
    check_consistent(a)?;
    Ok(write_atomic_with(path, |w| write_npy_to(w, a))?)
}

/// Writes arrays as an uncompressed `.npz` (what `np.savez` writes), entry `<name>.npy` each,
/// atomically. Names must be non-empty and distinct.
pub fn write_npz(path: &Path, arrays: &[NamedArray]) -> Result<()> {
    for (i, a) in arrays.iter().enumerate() {
        check_consistent(a)?;
        if a.name.is_empty() {
            return Err(Error::Invalid(format!(
                "write_npz: array {i} has no name (it becomes the entry name)"
            )));
        }
        if arrays[..i].iter().any(|b| b.name == a.name) {
            return Err(Error::Invalid(format!(
                "write_npz: two arrays named `{}`",
                a.name
            )));
        }
    }
    write_atomic_with(path, |w| {
        let mut zip = zip::ZipWriter::new(w);
        for a in arrays {
            let header = npy_header(a);
            let total = header.len() as u64 + data_bytes(&a.data);
            let options = FileOptions::default()
                .compression_method(CompressionMethod::Stored)
                // zip needs to know up front whether an entry needs zip64 sizes.
                .large_file(total >= u64::from(u32::MAX));
            zip.start_file(format!("{}.npy", a.name), options)
                .map_err(zip_to_io)?;
            zip.write_all(&header)?;
            write_data(&mut zip, &a.data)?;
        }
        zip.finish().map_err(zip_to_io)?;
        Ok(())
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reading

/// Why a read failed, before the path is known: an I/O error of the source, or a format error.
#[derive(Debug)]
enum Fail {
    Io(io::Error),
    Format(String),
}

impl Fail {
    fn into_error(self, path: &Path, entry: Option<&str>) -> Error {
        match (self, entry) {
            (Fail::Format(msg), None) => format_error(path, msg),
            (Fail::Format(msg), Some(e)) => format_error(path, format!("entry `{e}`: {msg}")),
            // A read error inside a zip entry is a corrupt entry (bad CRC, bad deflate stream).
            (Fail::Io(err), Some(e)) => format_error(path, format!("entry `{e}`: {err}")),
            (Fail::Io(source), None) => io_error(path, source),
        }
    }
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            // The size checks make this mean the source shrank or lied about its length.
            Fail::Format("truncated: the data end before the header says they do".into())
        } else {
            Fail::Io(e)
        }
    }
}

type R<T> = std::result::Result<T, Fail>;

macro_rules! fail {
    ($($arg:tt)*) => {
        return Err(Fail::Format(format!($($arg)*)))
    };
}

/// Reads one `.npy` from a zip entry, after bounding the entry's claimed size by what its
/// compressed bytes can hold, and checks the entry's CRC by reading to its end.
fn read_entry(entry: &mut zip::read::ZipFile<'_>, file_len: u64, key: String) -> R<NamedArray> {
    let size = entry.size();
    let packed = entry.compressed_size();
    if packed > file_len {
        fail!("claims {packed} compressed bytes in a {file_len}-byte file");
    }
    let bound = match entry.compression() {
        CompressionMethod::Stored => packed,
        CompressionMethod::Deflated => packed.saturating_mul(MAX_DEFLATE_RATIO),
        other => fail!("compression {other:?} is not supported (only stored and deflated)"),
    };
    if size > bound {
        fail!("claims {size} bytes, more than its {packed} compressed bytes can hold");
    }
    let arr = read_stream(entry, size, key)?;
    // zip verifies the CRC when a read hits the entry's end; make that read happen.
    let mut probe = [0u8; 1];
    if entry.read(&mut probe)? != 0 {
        fail!("bytes after the array data");
    }
    Ok(arr)
}

/// Reads a `.npy` of `total` bytes from `r`.
fn read_stream<Rd: Read>(r: &mut Rd, total: u64, name: String) -> R<NamedArray> {
    let header = read_header(r, total)?;
    let avail = total - header.data_offset;
    let n = header
        .shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Fail::Format(format!("shape {:?} overflows", header.shape)))?;
    let nbytes = n.checked_mul(header.dtype.elem.size() as u64);
    if nbytes != Some(avail) {
        fail!(
            "header says shape {:?} of {} ({} bytes of data), but {avail} bytes follow the header",
            header.shape,
            header.descr,
            nbytes.map_or_else(|| "too many".to_string(), |b| b.to_string()),
        );
    }
    // Both conversions hold: n elements fit in `avail` bytes, which exist.
    let n = usize::try_from(n).map_err(|_| Fail::Format("array too large for this host".into()))?;
    let shape: Vec<usize> = header.shape.iter().map(|&d| d as usize).collect();
    let data = decode(r, header.dtype, n)?;
    let built = if header.fortran_order {
        NamedArray::from_fortran(name, shape, data)
    } else {
        NamedArray::new(name, shape, data)
    };
    built.map_err(|e| Fail::Format(e.to_string()))
}

/// The parts of a `.npy` header that matter.
#[derive(Debug)]
struct Header {
    dtype: Dtype,
    /// The `descr` string as written, for messages.
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
    /// Offset of the first data byte.
    data_offset: u64,
}

fn read_header<Rd: Read>(r: &mut Rd, total: u64) -> R<Header> {
    if total < 10 {
        fail!("{total} bytes is too short for a .npy file");
    }
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre)?;
    if &pre[..6] != NPY_MAGIC {
        fail!("not a .npy file (no \\x93NUMPY magic)");
    }
    let (major, minor) = (pre[6], pre[7]);
    let (len_bytes, utf8) = match (major, minor) {
        (1, 0) => (2usize, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => fail!("unsupported .npy format version {major}.{minor} (1.0, 2.0 and 3.0 are)"),
    };
    let mut len_buf = [0u8; 4];
    r.read_exact(&mut len_buf[..len_bytes])?;
    let header_len = u32::from_le_bytes(len_buf) as usize;
    let data_offset = 8 + len_bytes as u64 + header_len as u64;
    if header_len > MAX_HEADER_LEN {
        fail!("header of {header_len} bytes is implausibly long");
    }
    if data_offset > total {
        fail!("header of {header_len} bytes runs past the end of the {total}-byte file");
    }
    let mut raw = Vec::with_capacity(header_len);
    (&mut *r).take(header_len as u64).read_to_end(&mut raw)?;
    if raw.len() != header_len {
        fail!("truncated header");
    }
    // Versions 1 and 2 are latin-1, version 3 is UTF-8.
    let text: String = if utf8 {
        String::from_utf8(raw).map_err(|_| Fail::Format("header is not UTF-8".into()))?
    } else {
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let dict = parse_header_dict(&text)?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (key, value) in dict {
        match key.as_str() {
            "descr" => descr = Some(value),
            "fortran_order" => fortran = Some(value),
            "shape" => shape = Some(value),
            other => fail!("unexpected header key `{other}`"),
        }
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        fail!(
            "header lacks one of `descr`, `fortran_order`, `shape`: {}",
            text.trim_end()
        );
    };
    let descr = match descr {
        Py::Str(s) => s,
        Py::List(_) | Py::Tuple(_) => fail!(
            "structured dtype {} is not supported (only plain numeric arrays are)",
            shorten(&descr.repr())
        ),
        other => fail!("`descr` is not a dtype: {}", shorten(&other.repr())),
    };
    let dtype = parse_descr(&descr)?;
    let Py::Bool(fortran_order) = fortran else {
        fail!(
            "`fortran_order` is {}, not True/False",
            shorten(&fortran.repr())
        );
    };
    let Py::Tuple(dims) = shape else {
        fail!("`shape` is {}, not a tuple", shorten(&shape.repr()));
    };
    let shape = dims
        .into_iter()
        .map(|d| match d {
            Py::Int(v) => u64::try_from(v).map_err(|_| ()),
            _ => Err(()),
        })
        .collect::<std::result::Result<Vec<u64>, ()>>()
        .map_err(|()| Fail::Format("`shape` holds something other than sizes ≥ 0".into()))?;
    Ok(Header {
        dtype,
        descr,
        fortran_order,
        shape,
        data_offset,
    })
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}

/// An element type of the files this module reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem {
    F64,
    F32,
    F16,
    I64,
    I32,
    I16,
    I8,
    U8,
    U16,
    U32,
    U64,
    Bool,
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::F64 | Elem::I64 | Elem::U64 => 8,
            Elem::F32 | Elem::I32 | Elem::U32 => 4,
            Elem::F16 | Elem::I16 | Elem::U16 => 2,
            Elem::I8 | Elem::U8 | Elem::Bool => 1,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Dtype {
    elem: Elem,
    big_endian: bool,
}

/// Parses a numpy dtype string (`<f8`, `>i4`, `|u1`, ...).
fn parse_descr(descr: &str) -> R<Dtype> {
    let mut chars = descr.chars();
    let order = chars.next();
    let code = chars.as_str();
    let big_endian = match order {
        Some('<' | '|') => false,
        Some('>') => true,
        Some('=') => cfg!(target_endian = "big"),
        _ => fail!("dtype `{descr}` has no byte-order mark"),
    };
    let elem = match code {
        "f8" => Elem::F64,
        "f4" => Elem::F32,
        "f2" => Elem::F16,
        "i8" => Elem::I64,
        "i4" => Elem::I32,
        "i2" => Elem::I16,
        "i1" => Elem::I8,
        "u1" => Elem::U8,
        "u2" => Elem::U16,
        "u4" => Elem::U32,
        "u8" => Elem::U64,
        "b1" => Elem::Bool,
        _ => {
            let what = match code.chars().next() {
                Some('O') => "object arrays (pickled Python objects) are not supported",
                Some('c') => "complex arrays are not supported (save real and imaginary parts)",
                Some('U' | 'S' | 'a') => "string arrays are not supported",
                Some('V') => "raw void / structured arrays are not supported",
                Some('M' | 'm') => "datetime arrays are not supported",
                Some('f') => "only float16, float32 and float64 are supported",
                _ => "unknown or unsupported dtype",
            };
            fail!("dtype `{descr}`: {what}");
        }
    };
    if order == Some('|') && elem.size() > 1 {
        fail!("dtype `{descr}`: byte order `|` on a multi-byte type");
    }
    Ok(Dtype { elem, big_endian })
}

/// Reads `n` elements of `dtype` from `r` into the matching [`ArrayData`], block by block so that
/// the only large allocation is the result (sized by the caller's checked `n`).
fn decode<Rd: Read>(r: &mut Rd, dtype: Dtype, n: usize) -> io::Result<ArrayData> {
    let big = dtype.big_endian;
    macro_rules! num {
        ($variant:ident, $t:ty) => {
            ArrayData::$variant(read_elems(r, n, |b: [u8; std::mem::size_of::<$t>()]| {
                if big {
                    <$t>::from_be_bytes(b)
                } else {
                    <$t>::from_le_bytes(b)
                }
            })?)
        };
    }
    Ok(match dtype.elem {
        Elem::F64 => num!(F64, f64),
        Elem::F32 => num!(F32, f32),
        Elem::I64 => num!(I64, i64),
        Elem::I32 => num!(I32, i32),
        Elem::I16 => num!(I16, i16),
        Elem::I8 => num!(I8, i8),
        Elem::U8 => num!(U8, u8),
        Elem::U16 => num!(U16, u16),
        Elem::U32 => num!(U32, u32),
        Elem::U64 => num!(U64, u64),
        // ArrayData has no float16: widening to float32 is exact.
        Elem::F16 => ArrayData::F32(read_elems(r, n, |b: [u8; 2]| {
            f16_to_f32(if big {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            })
        })?),
        // numpy treats any non-zero byte as True.
        Elem::Bool => ArrayData::U8(read_elems(r, n, |b: [u8; 1]| u8::from(b[0] != 0))?),
    })
}

fn read_elems<Rd: Read, T, const N: usize>(
    r: &mut Rd,
    n: usize,
    convert: impl Fn([u8; N]) -> T,
) -> io::Result<Vec<T>> {
    let mut out = Vec::with_capacity(n);
    let mut buf = vec![0u8; BLOCK_ELEMS.min(n) * N];
    let mut left = n;
    while left > 0 {
        let k = left.min(BLOCK_ELEMS);
        let block = &mut buf[..k * N];
        r.read_exact(block)?;
        out.extend(block.chunks_exact(N).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            convert(a)
        }));
        left -= k;
    }
    Ok(out)
}

/// IEEE half → single precision (exact).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let negative = h & 0x8000 != 0;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let magnitude = match exp {
        // Subnormal (and zero): man · 2⁻²⁴, exact in f32.
        0 => man as f32 * (1.0 / 16_777_216.0),
        0x1f => f32::from_bits(0x7f80_0000 | (man << 13)),
        e => f32::from_bits(((e + 112) << 23) | (man << 13)),
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// bfloat16 → single precision (exact: bfloat16 is the top half of an f32).
pub(crate) fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

// ---------------------------------------------------------------------------------------------
// The header: a Python dict literal such as
// `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`.

/// The Python literals a header can hold.
#[derive(Debug, Clone, PartialEq)]
enum Py {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<Py>),
    List(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

impl Py {
    fn repr(&self) -> String {
        let join = |items: &[Py]| items.iter().map(Py::repr).collect::<Vec<_>>().join(", ");
        match self {
            Py::Str(s) => format!("'{s}'"),
            Py::Int(v) => v.to_string(),
            Py::Bool(true) => "True".into(),
            Py::Bool(false) => "False".into(),
            Py::None => "None".into(),
            Py::Tuple(items) => format!("({})", join(items)),
            Py::List(items) => format!("[{}]", join(items)),
            Py::Dict(items) => format!(
                "{{{}}}",
                items
                    .iter()
                    .map(|(k, v)| format!("{}: {}", k.repr(), v.repr()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

fn parse_header_dict(text: &str) -> R<Vec<(String, Py)>> {
    let mut p = PyParser {
        s: text.as_bytes(),
        pos: 0,
    };
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.s.len() {
        fail!(
            "header has text after its dict: {}",
            shorten(text.trim_end())
        );
    }
    let Py::Dict(items) = value else {
        fail!("header is not a dict: {}", shorten(text.trim_end()));
    };
    items
        .into_iter()
        .map(|(k, v)| match k {
            Py::Str(k) => Ok((k, v)),
            other => fail!("header key {} is not a string", shorten(&other.repr())),
        })
        .collect()
}

/// A recursive-descent parser of the Python literals above (over bytes: every token is ASCII, and
/// string contents are re-decoded as UTF-8 from the original text).
struct PyParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl PyParser<'_> {
    fn skip_ws(&mut self) {
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\0'))
        {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> R<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            fail!("header: expected `{}` at byte {}", char::from(c), self.pos)
        }
    }

    fn value(&mut self, depth: usize) -> R<Py> {
        if depth > MAX_HEADER_DEPTH {
            fail!("header nests too deeply");
        }
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(Py::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    self.expect(b':')?;
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => fail!("header: expected `,` or `}}` at byte {}", self.pos),
                    }
                }
            }
            Some(open @ (b'(' | b'[')) => {
                self.pos += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                let mut trailing_comma = false;
                loop {
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        // `(3)` is the int 3 in Python, `(3,)` a tuple.
                        if open == b'(' && items.len() == 1 && !trailing_comma {
                            return Ok(items.pop().unwrap_or(Py::None));
                        }
                        return Ok(if open == b'(' {
                            Py::Tuple(items)
                        } else {
                            Py::List(items)
                        });
                    }
                    items.push(self.value(depth + 1)?);
                    trailing_comma = false;
                    match self.peek() {
                        Some(b',') => {
                            self.pos += 1;
                            trailing_comma = true;
                        }
                        Some(c) if c == close => {}
                        _ => fail!(
                            "header: expected `,` or a closing bracket at byte {}",
                            self.pos
                        ),
                    }
                }
            }
            Some(q @ (b'\'' | b'"')) => {
                self.pos += 1;
                let start = self.pos;
                while self.s.get(self.pos).is_some_and(|&c| c != q) {
                    if self.s[self.pos] == b'\\' {
                        fail!("header: escapes in strings are not supported");
                    }
                    self.pos += 1;
                }
                if self.pos >= self.s.len() {
                    fail!("header: unterminated string");
                }
                let text = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                self.pos += 1;
                Ok(Py::Str(text))
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.pos;
                if c == b'-' {
                    self.pos += 1;
                }
                while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                // Python 2 wrote longs as `3L`.
                if self.s.get(self.pos) == Some(&b'L') {
                    self.pos += 1;
                }
                digits
                    .parse::<i128>()
                    .map(Py::Int)
                    .map_err(|_| Fail::Format(format!("header: bad integer `{digits}`")))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self.s.get(self.pos).is_some_and(u8::is_ascii_alphanumeric) {
                    self.pos += 1;
                }
                match &self.s[start..self.pos] {
                    b"True" => Ok(Py::Bool(true)),
                    b"False" => Ok(Py::Bool(false)),
                    b"None" => Ok(Py::None),
                    word => fail!("header: unexpected `{}`", String::from_utf8_lossy(word)),
                }
            }
            Some(c) => fail!(
                "header: unexpected character `{}` at byte {}",
                char::from(c).escape_default(),
                self.pos
            ),
            None => fail!("header ends early"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writing

fn check_consistent(a: &NamedArray) -> Result<()> {
    // The fields are public, so the invariant `NamedArray::new` checks may have been broken.
    let n = a
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if n != Some(a.data.len()) {
        return Err(Error::Invalid(format!(
            "array `{}`: shape {:?} does not hold its {} elements",
            a.name,
            a.shape,
            a.data.len()
        )));
    }
    Ok(())
}

fn descr_of(data: &ArrayData) -> &'static str {
    match data {
        ArrayData::F64(_) => "<f8",
        ArrayData::F32(_) => "<f4",
        ArrayData::I64(_) => "<i8",
        ArrayData::I32(_) => "<i4",
        ArrayData::I16(_) => "<i2",
        ArrayData::I8(_) => "|i1",
        ArrayData::U8(_) => "|u1",
        ArrayData::U16(_) => "<u2",
        ArrayData::U32(_) => "<u4",
        ArrayData::U64(_) => "<u8",
    }
}

fn data_bytes(data: &ArrayData) -> u64 {
    let size = match data {
        ArrayData::F64(_) | ArrayData::I64(_) | ArrayData::U64(_) => 8,
        ArrayData::F32(_) | ArrayData::I32(_) | ArrayData::U32(_) => 4,
        ArrayData::I16(_) | ArrayData::U16(_) => 2,
        ArrayData::I8(_) | ArrayData::U8(_) => 1,
    };
    data.len() as u64 * size
}

/// Magic, version, header length and the padded header dict, as numpy writes them.
fn npy_header(a: &NamedArray) -> Vec<u8> {
    let shape = match a.shape.as_slice() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_of(&a.data)
    );
    // numpy pads with spaces to a 64-byte boundary (aligned data for memory mapping) and ends
    // the header with a newline; version 2.0 only when the length does not fit 16 bits.
    let build = |len_bytes: usize| {
        let prefix = 6 + 2 + len_bytes;
        let unpadded = prefix + dict.len() + 1;
        let pad = (64 - unpadded % 64) % 64;
        dict.len() + pad + 1
    };
    let (version, len_bytes) = if build(2) <= usize::from(u16::MAX) {
        (1u8, 2)
    } else {
        (2, 4)
    };
    let header_len = build(len_bytes);
    let mut out = Vec::with_capacity(6 + 2 + len_bytes + header_len);
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[version, 0]);
    if len_bytes == 2 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + header_len - dict.len() - 1, b' ');
    out.push(b'\n');
    out
}

fn write_npy_to<W: Write>(w: &mut W, a: &NamedArray) -> io::Result<()> {
    w.write_all(&npy_header(a))?;
    write_data(w, &a.data)
}

/// Writes the elements little-endian, a block at a time.
fn write_data<W: Write>(w: &mut W, data: &ArrayData) -> io::Result<()> {
    macro_rules! emit {
        ($v:expr) => {{
            let mut buf = Vec::with_capacity(BLOCK_ELEMS * 8);
            for block in $v.chunks(BLOCK_ELEMS) {
                buf.clear();
                for x in block {
                    buf.extend_from_slice(&x.to_le_bytes());
                }
                w.write_all(&buf)?;
            }
            Ok(())
        }};
    }
    match data {
        ArrayData::F64(v) => emit!(v),
        ArrayData::F32(v) => emit!(v),
        ArrayData::I64(v) => emit!(v),
        ArrayData::I32(v) => emit!(v),
        ArrayData::I16(v) => emit!(v),
        ArrayData::I8(v) => emit!(v),
        ArrayData::U8(v) => emit!(v),
        ArrayData::U16(v) => emit!(v),
        ArrayData::U32(v) => emit!(v),
        ArrayData::U64(v) => emit!(v),
    }
}

fn zip_to_io(e: zip::result::ZipError) -> io::Error {
    match e {
        zip::result::ZipError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

pub(crate) fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn format_error(path: &Path, msg: impl Into<String>) -> Error {
    Error::Format {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_conversions() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(bf16_to_f32(0xc040), -3.0);
    }

    #[test]
    fn header_literals() {
        let d = parse_header_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 4), }")
            .unwrap();
        assert_eq!(d[2].1, Py::Tuple(vec![Py::Int(3), Py::Int(4)]));
        let d = parse_header_dict("{'shape': (7,), 'x': ()}").unwrap();
        assert_eq!(d[0].1, Py::Tuple(vec![Py::Int(7)]));
        assert_eq!(d[1].1, Py::Tuple(vec![]));
        // `(7)` is an int in Python, not a tuple.
        assert_eq!(parse_header_dict("{'s': (7)}").unwrap()[0].1, Py::Int(7));
        let deep = format!("{{'s': {}{}}}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse_header_dict(&deep).is_err());
    }

    #[test]
    fn written_header_is_aligned_and_parses() {
        let a = NamedArray::new("a", vec![2, 3], ArrayData::I16(vec![1, 2, 3, 4, 5, 6])).unwrap();
        let h = npy_header(&a);
        assert_eq!(h.len() % 64, 0);
        assert_eq!(h.last(), Some(&b'\n'));
    }
}
