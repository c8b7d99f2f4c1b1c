//! MATLAB v5/v7 MAT-files (not v7.3, which is HDF5): the format of the Darcy, Burgers, NS and
//! Plasticity benchmark files.
//!
//! A MAT v5 file is a 128-byte header followed by one data element per variable: a `miMATRIX`
//! (array flags, dimensions, name, data) either stored as it is (`scipy.io.savemat` default) or
//! zlib-compressed inside a `miCOMPRESSED` element (MATLAB `save`, `-v7`). The reader walks the
//! top-level elements with seeks, reads each variable's header (inflating only the first bytes of a
//! compressed one), and inflates or reads the data of the variables asked for only: the Darcy files
//! hold ~1.4 GB per variable, most of it in `Kcoeff*` arrays nobody uses.
//!
//! Data are column-major in the file; [`NamedArray::from_fortran`] turns them row-major, so that
//! `a[i, j, k]` is what `scipy.io.loadmat(...)[name][i, j, k]` gives.
//!
//! Every size field is checked against the bytes that can actually be there (the rest of the file,
//! or zlib's maximum expansion of the compressed bytes) before anything is allocated from it, so a
//! corrupt or hostile file yields [`Error::Format`], never a panic or an unbounded allocation.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufReader, Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;

use flate2::{Decompress, FlushDecompress, Status};

use crate::array::{ArrayData, NamedArray};
use crate::{Error, Result};

const HEADER_LEN: u64 = 128;
const VERSION_5: u16 = 0x0100;
const VERSION_73: u16 = 0x0200;

// Data types (MAT-File Format, table 1-1).
const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;
const MI_UTF8: u32 = 16;

// Array classes (table 1-3).
const MX_CELL: u32 = 1;
const MX_STRUCT: u32 = 2;
const MX_OBJECT: u32 = 3;
const MX_CHAR: u32 = 4;
const MX_SPARSE: u32 = 5;
const MX_DOUBLE: u32 = 6;
const MX_SINGLE: u32 = 7;
const MX_INT8: u32 = 8;
const MX_UINT8: u32 = 9;
const MX_INT16: u32 = 10;
const MX_UINT16: u32 = 11;
const MX_INT32: u32 = 12;
const MX_UINT32: u32 = 13;
const MX_INT64: u32 = 14;
const MX_UINT64: u32 = 15;
const MX_FUNCTION: u32 = 16;
const MX_OPAQUE: u32 = 17;

const FLAG_COMPLEX: u32 = 0x0800;
const FLAG_LOGICAL: u32 = 0x0200;

/// Deflate cannot expand data by more than 1032:1 (258-byte matches coded in 2 bits); an inflated
/// size claimed beyond this is corrupt, and refusing it bounds what a small file can make us allocate.
const MAX_INFLATE_RATIO: u64 = 1040;
/// More dimensions than this is a corrupt dims element, not an array.
const MAX_DIMS: u32 = 1024;
/// MATLAB names are at most 63 characters; anything near this cap is corrupt.
const MAX_NAME_BYTES: u32 = 4096;
/// Bytes of stored data converted per step, so a 1.4 GB variable never exists twice as raw bytes.
const CHUNK_BYTES: usize = 1 << 16;
/// Synthetic path of in-memory files in error messages.
pub(crate) const MEMORY_PATH: &str = "<memory>";

/// One variable of a MAT v5 file as its header describes it (for `ono data info`); obtained without
/// inflating or reading its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableInfo {
    /// The variable's name (empty for MATLAB's unnamed subsystem-data element).
    pub name: String,
    /// MATLAB class, as `whos` and `scipy.io.whosmat` name it: `double`, `single`, `int8` ...
    /// `uint64`, `logical`, `char`, `cell`, `struct`, `object`, `sparse`, `function_handle`,
    /// `opaque`, or `unknown(N)`.
    pub class: String,
    /// Dimensions as MATLAB `size` gives them (at least two; empty for opaque objects, whose
    /// header has none).
    pub shape: Vec<usize>,
    /// Whether the variable is stored in a `miCOMPRESSED` (zlib) element.
    pub compressed: bool,
    /// Whether the array has an imaginary part (such arrays are listed but not read).
    pub complex: bool,
}

/// Variables of a MAT v5 file: name, class, dims, compressed or not, without inflating data.
pub fn list(path: &Path) -> Result<Vec<VariableInfo>> {
    let (mut r, len) = open(path)?;
    scan(&mut r, len, path, &mut |_, _| Ok(false))
}

/// Reads the named real numeric (and logical, as `U8`) variables, or all of them when `names` is
/// `None` (then complex, sparse, cell, struct, char and other kinds are skipped). With names, the
/// result holds each name once, in the order of `names`; without, the file order. Only returned
/// variables are inflated or read; the others are seeked past.
///
/// Errors: a requested variable that is missing (the message lists what the file has) or of a kind
/// that cannot be returned as a numeric array, and any malformed content met on the way.
pub fn read(path: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    let (mut r, len) = open(path)?;
    read_from(&mut r, len, path, names)
}

/// [`read`] of a file already in memory (what the fuzz target calls); errors name `<memory>`.
pub fn parse(bytes: &[u8], names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    let mut cur = Cursor::new(bytes);
    read_from(&mut cur, bytes.len() as u64, Path::new(MEMORY_PATH), names)
}

/// [`list`] of a file already in memory.
pub fn list_bytes(bytes: &[u8]) -> Result<Vec<VariableInfo>> {
    let mut cur = Cursor::new(bytes);
    scan(
        &mut cur,
        bytes.len() as u64,
        Path::new(MEMORY_PATH),
        &mut |_, _| Ok(false),
    )
}

fn open(path: &Path) -> Result<(BufReader<File>, u64)> {
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = File::open(path).map_err(io_err)?;
    let len = f.metadata().map_err(io_err)?.len();
    Ok((BufReader::with_capacity(CHUNK_BYTES, f), len))
}

fn format_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Format {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

fn read_from<R: Read + Seek>(
    r: &mut R,
    len: u64,
    path: &Path,
    names: Option<&[&str]>,
) -> Result<Vec<NamedArray>> {
    // Requested names, deduplicated, in the caller's order.
    let wanted: Option<Vec<&str>> = names.map(|ns| {
        let mut seen = HashSet::new();
        ns.iter().copied().filter(|n| seen.insert(*n)).collect()
    });
    let mut found: Vec<NamedArray> = Vec::new();
    let infos = scan(r, len, path, &mut |h, body| {
        let take = match &wanted {
            // Files may repeat a name (MATLAB cannot, other writers might): the first one wins.
            Some(ws) => ws.contains(&h.name.as_str()) && !found.iter().any(|a| a.name == h.name),
            None => !h.name.is_empty() && h.numeric_class().is_some() && !h.is_complex(),
        };
        if !take {
            return Ok(false);
        }
        if let Some(why) = h.unreadable() {
            return Err(format_err(path, format!("variable `{}` is {why}", h.name)));
        }
        let data = read_real_data(body, h, path)?;
        let arr = NamedArray::from_fortran(h.name.clone(), h.dims.clone(), data)
            .map_err(|e| format_err(path, format!("variable `{}`: {e}", h.name)))?;
        found.push(arr);
        Ok(true)
    })?;
    let Some(ws) = wanted else {
        return Ok(found);
    };
    let mut out = Vec::with_capacity(ws.len());
    for w in ws {
        match found.iter().position(|a| a.name == w) {
            Some(i) => out.push(found.swap_remove(i)),
            None => {
                let have: Vec<String> = infos
                    .iter()
                    .map(|v| format!("{} ({} {:?})", v.name, v.class, v.shape))
                    .collect();
                let have = if have.is_empty() {
                    "no variables".to_string()
                } else {
                    have.join(", ")
                };
                return Err(format_err(
                    path,
                    format!("no variable `{w}`; the file has {have}"),
                ));
            }
        }
    }
    Ok(out)
}

/// What a `miMATRIX` header says about a variable.
#[derive(Debug)]
struct Header {
    name: String,
    flags: u32,
    dims: Vec<usize>,
}

impl Header {
    fn class(&self) -> u32 {
        self.flags & 0xff
    }

    fn is_complex(&self) -> bool {
        self.flags & FLAG_COMPLEX != 0
    }

    fn is_logical(&self) -> bool {
        self.flags & FLAG_LOGICAL != 0
    }

    /// The class of a numeric array, `None` for every other kind.
    fn numeric_class(&self) -> Option<u32> {
        (MX_DOUBLE..=MX_UINT64)
            .contains(&self.class())
            .then_some(self.class())
    }

    fn class_name(&self) -> String {
        if self.is_logical() && self.class() == MX_UINT8 {
            return "logical".into();
        }
        let s = match self.class() {
            MX_CELL => "cell",
            MX_STRUCT => "struct",
            MX_OBJECT => "object",
            MX_CHAR => "char",
            MX_SPARSE => "sparse",
            MX_DOUBLE => "double",
            MX_SINGLE => "single",
            MX_INT8 => "int8",
            MX_UINT8 => "uint8",
            MX_INT16 => "int16",
            MX_UINT16 => "uint16",
            MX_INT32 => "int32",
            MX_UINT32 => "uint32",
            MX_INT64 => "int64",
            MX_UINT64 => "uint64",
            MX_FUNCTION => "function_handle",
            MX_OPAQUE => "opaque",
            c => return format!("unknown({c})"),
        };
        s.into()
    }

    /// Why this variable cannot be returned as a numeric array (`None` if it can).
    fn unreadable(&self) -> Option<String> {
        match self.numeric_class() {
            None => Some(format!(
                "of class `{}`; only real numeric and logical arrays can be read",
                self.class_name()
            )),
            Some(_) if self.is_complex() => Some(format!(
                "a complex `{}` array; complex arrays are not supported",
                self.class_name()
            )),
            Some(_) => None,
        }
    }
}

/// The visitor of [`scan`]: gets each variable's header and its body stream positioned after the
/// name; returns whether it consumed data (then a compressed element is inflated to its end, which
/// verifies zlib's checksum).
type Visit<'v> = dyn FnMut(&Header, &mut Elements<'_>) -> Result<bool> + 'v;

/// Walks the top-level elements of a whole file, calling `visit` for each variable; returns the
/// variables' descriptions.
fn scan<R: Read + Seek>(
    r: &mut R,
    len: u64,
    path: &Path,
    visit: &mut Visit<'_>,
) -> Result<Vec<VariableInfo>> {
    let big = read_file_header(r, len, path)?;
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut infos = Vec::new();
    let mut pos = HEADER_LEN;
    while pos < len {
        let left = len - pos;
        if left < 8 {
            return Err(format_err(
                path,
                format!("truncated: {left} stray bytes at offset {pos} where an element tag was expected"),
            ));
        }
        r.seek(SeekFrom::Start(pos)).map_err(io_err)?;
        let mut tag = [0u8; 8];
        r.read_exact(&mut tag).map_err(io_err)?;
        let ty = word(&tag[0..4], big);
        let nbytes = u64::from(word(&tag[4..8], big));
        if ty >> 16 != 0 {
            return Err(format_err(
                path,
                format!("corrupt element tag at offset {pos} (type word {ty:#010x})"),
            ));
        }
        if nbytes > left - 8 {
            return Err(format_err(
                path,
                format!(
                    "truncated: element at offset {pos} claims {nbytes} bytes, only {} remain",
                    left - 8
                ),
            ));
        }
        let compressed = match ty {
            MI_MATRIX => false,
            MI_COMPRESSED => true,
            _ => {
                return Err(format_err(
                    path,
                    format!(
                        "element at offset {pos} is of type {} ({ty}); a variable must be miMATRIX or miCOMPRESSED",
                        mi_name(ty)
                    ),
                ))
            }
        };
        let ctx = Ctx { path, pos };
        if compressed {
            let mut inflater = Inflater::new((&mut *r).take(nbytes));
            let mut inner = Elements::new(&mut inflater, u64::MAX, big, ctx);
            let t = inner.tag("compressed element")?;
            if t.ty != MI_MATRIX || t.small.is_some() {
                return Err(ctx.err(format!(
                    "compressed element holds type {} ({}), expected miMATRIX",
                    mi_name(t.ty),
                    t.ty
                )));
            }
            let bound = nbytes
                .saturating_mul(MAX_INFLATE_RATIO)
                .saturating_add(1024);
            if u64::from(t.n) > bound {
                return Err(ctx.err(format!(
                    "compressed element of {nbytes} bytes claims {} inflated bytes, more than zlib can produce",
                    t.n
                )));
            }
            let consumed = {
                let mut body = Elements::new(&mut inflater, u64::from(t.n), big, ctx);
                visit_matrix(&mut body, true, &mut infos, visit)?
            };
            if consumed {
                // Inflating to the end checks the stream's Adler-32, so a corrupt byte anywhere in
                // a variable we return is an error rather than a silently wrong value.
                io::copy(&mut inflater, &mut io::sink())
                    .map_err(|e| ctx.io(e, "compressed data"))?;
            }
        } else {
            let mut take = (&mut *r).take(nbytes);
            let mut body = Elements::new(&mut take, nbytes, big, ctx);
            visit_matrix(&mut body, false, &mut infos, visit)?;
        }
        pos += 8 + nbytes;
    }
    Ok(infos)
}

fn visit_matrix(
    body: &mut Elements<'_>,
    compressed: bool,
    infos: &mut Vec<VariableInfo>,
    visit: &mut Visit<'_>,
) -> Result<bool> {
    if body.remaining() == 0 {
        // MATLAB writes empty miMATRIX elements only as empty cells, never as variables.
        return Err(body
            .ctx
            .err("empty miMATRIX element where a variable was expected"));
    }
    let h = read_matrix_header(body)?;
    infos.push(VariableInfo {
        name: h.name.clone(),
        class: h.class_name(),
        shape: h.dims.clone(),
        compressed,
        complex: h.is_complex(),
    });
    visit(&h, body)
}

fn read_matrix_header(e: &mut Elements<'_>) -> Result<Header> {
    let t = e.tag("array flags")?;
    if t.ty != MI_UINT32 || t.n != 8 {
        return Err(e.ctx.err(format!(
            "array flags must be 8 bytes of miUINT32, found {} bytes of type {}",
            t.n, t.ty
        )));
    }
    let b = e.payload(&t, 8, "array flags")?;
    let flags = word(&b[0..4], e.big);
    // Opaque objects (MCOS classes such as `string`) have no dimensions element.
    let dims = if flags & 0xff == MX_OPAQUE {
        Vec::new()
    } else {
        let t = e.tag("dimensions")?;
        if t.ty != MI_INT32 || t.n % 4 != 0 || t.n == 0 {
            return Err(e.ctx.err(format!(
                "dimensions must be miINT32, found {} bytes of type {}",
                t.n, t.ty
            )));
        }
        let b = e.payload(&t, MAX_DIMS * 4, "dimensions")?;
        let mut dims = Vec::with_capacity(b.len() / 4);
        for c in b.chunks_exact(4) {
            let d = word(c, e.big) as i32;
            let d = usize::try_from(d).map_err(|_| e.ctx.err(format!("negative dimension {d}")))?;
            dims.push(d);
        }
        dims
    };
    let t = e.tag("array name")?;
    if !matches!(t.ty, MI_INT8 | MI_UINT8 | MI_UTF8) {
        return Err(e
            .ctx
            .err(format!("array name must be miINT8, found type {}", t.ty)));
    }
    let b = e.payload(&t, MAX_NAME_BYTES, "array name")?;
    let name = String::from_utf8(b).map_err(|_| e.ctx.err("array name is not UTF-8"))?;
    Ok(Header { name, flags, dims })
}

/// Reads the real part of a numeric variable and converts it to its class's element type (MATLAB
/// stores e.g. a `double` array of small integers as miUINT8).
fn read_real_data(e: &mut Elements<'_>, h: &Header, path: &Path) -> Result<ArrayData> {
    let err = |msg: String| format_err(path, format!("variable `{}`: {msg}", h.name));
    let count = h
        .dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| err(format!("dimensions {:?} overflow", h.dims)))?;
    let t = e.tag("real part")?;
    let size = mi_size(t.ty).ok_or_else(|| {
        err(format!(
            "data of type {} ({}) where numbers were expected",
            mi_name(t.ty),
            t.ty
        ))
    })?;
    let n = t.n as usize;
    if !n.is_multiple_of(size) {
        return Err(err(format!(
            "{n} bytes of {} is not a whole number of elements",
            mi_name(t.ty)
        )));
    }
    if n / size != count {
        return Err(err(format!(
            "dimensions {:?} need {count} elements, the data hold {} {}",
            h.dims,
            n / size,
            mi_name(t.ty)
        )));
    }
    let mut conv = Converter::new(h.numeric_class().unwrap_or(MX_DOUBLE), count);
    if let Some(small) = t.small {
        conv.push(t.ty, &small[..n], e.big);
    } else {
        // `e.tag` checked n against the bytes left, so `count` is backed by real (or, compressed,
        // at most 1040x as many) bytes of the file, and the allocation above is bounded by them.
        let mut left = n;
        let mut buf = vec![0u8; CHUNK_BYTES.min(n)];
        while left > 0 {
            let step = left.min(CHUNK_BYTES);
            e.read_exact(&mut buf[..step], "data")?;
            conv.push(t.ty, &buf[..step], e.big);
            left -= step;
        }
        e.skip_padding(n)?;
    }
    Ok(conv.finish())
}

/// Position of a top-level element, for error messages.
#[derive(Clone, Copy)]
struct Ctx<'p> {
    path: &'p Path,
    pos: u64,
}

impl Ctx<'_> {
    fn err(&self, msg: impl AsRef<str>) -> Error {
        format_err(
            self.path,
            format!("element at offset {}: {}", self.pos, msg.as_ref()),
        )
    }

    fn io(&self, e: io::Error, what: &str) -> Error {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => self.err(format!("truncated {what}")),
            io::ErrorKind::InvalidData => self.err(format!("corrupt compressed data ({e})")),
            _ => Error::Io {
                path: self.path.to_path_buf(),
                source: e,
            },
        }
    }
}

/// A tag: type, byte count, and the data of a small data element (≤ 4 bytes inside the tag).
struct Tag {
    ty: u32,
    n: u32,
    small: Option<[u8; 4]>,
}

/// Sub-elements of one `miMATRIX`, read from a stream limited to the matrix's byte count.
struct Elements<'a> {
    s: io::Take<&'a mut dyn Read>,
    big: bool,
    ctx: Ctx<'a>,
}

impl<'a> Elements<'a> {
    fn new(s: &'a mut dyn Read, limit: u64, big: bool, ctx: Ctx<'a>) -> Self {
        Self {
            s: s.take(limit),
            big,
            ctx,
        }
    }

    fn remaining(&self) -> u64 {
        self.s.limit()
    }

    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        self.s.read_exact(buf).map_err(|e| self.ctx.io(e, what))
    }

    fn tag(&mut self, what: &str) -> Result<Tag> {
        if self.remaining() < 8 {
            return Err(self.ctx.err(format!("truncated before the {what} tag")));
        }
        let mut b = [0u8; 8];
        self.read_exact(&mut b, what)?;
        let first = word(&b[0..4], self.big);
        if first >> 16 != 0 {
            // Small data element: byte count in the high half-word, type in the low one.
            let n = first >> 16;
            if n > 4 {
                return Err(self
                    .ctx
                    .err(format!("{what}: small data element claims {n} bytes")));
            }
            let mut small = [0u8; 4];
            small.copy_from_slice(&b[4..8]);
            return Ok(Tag {
                ty: first & 0xffff,
                n,
                small: Some(small),
            });
        }
        let n = word(&b[4..8], self.big);
        if u64::from(n) > self.remaining() {
            return Err(self.ctx.err(format!(
                "{what} claims {n} bytes, its array has only {} left",
                self.remaining()
            )));
        }
        Ok(Tag {
            ty: first,
            n,
            small: None,
        })
    }

    /// The data of a (small or normal) element of at most `max` bytes, padding skipped.
    fn payload(&mut self, t: &Tag, max: u32, what: &str) -> Result<Vec<u8>> {
        if t.n > max {
            return Err(self
                .ctx
                .err(format!("{what} of {} bytes exceeds {max}", t.n)));
        }
        let n = t.n as usize;
        if let Some(small) = t.small {
            return Ok(small[..n].to_vec());
        }
        let mut v = vec![0u8; n];
        self.read_exact(&mut v, what)?;
        self.skip_padding(n)?;
        Ok(v)
    }

    /// Elements are padded to 8 bytes; the padding may be cut off only at the end of the matrix.
    fn skip_padding(&mut self, n: usize) -> Result<()> {
        let pad = ((8 - n % 8) % 8).min(self.remaining() as usize);
        let mut b = [0u8; 8];
        self.read_exact(&mut b[..pad], "padding")
    }
}

/// Decodes stored elements of any numeric type into the class's element type, appending.
struct Converter(ArrayData);

macro_rules! decode_into {
    ($v:expr, $t:ty, $ty:expr, $bytes:expr, $big:expr) => {{
        let (v, bytes, big) = ($v, $bytes, $big);
        macro_rules! each {
            ($n:literal, $src:ty) => {
                v.extend(bytes.chunks_exact($n).map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    let x = if big {
                        <$src>::from_be_bytes(a)
                    } else {
                        <$src>::from_le_bytes(a)
                    };
                    // `as` saturates: a corrupt file can give wrong numbers, never a panic.
                    x as $t
                }))
            };
        }
        match $ty {
            MI_INT8 => each!(1, i8),
            MI_UINT8 => each!(1, u8),
            MI_INT16 => each!(2, i16),
            MI_UINT16 => each!(2, u16),
            MI_INT32 => each!(4, i32),
            MI_UINT32 => each!(4, u32),
            MI_SINGLE => each!(4, f32),
            MI_DOUBLE => each!(8, f64),
            MI_INT64 => each!(8, i64),
            MI_UINT64 => each!(8, u64),
            _ => {}
        }
    }};
}

impl Converter {
    fn new(class: u32, count: usize) -> Self {
        Self(match class {
            MX_SINGLE => ArrayData::F32(Vec::with_capacity(count)),
            MX_INT8 => ArrayData::I8(Vec::with_capacity(count)),
            MX_UINT8 => ArrayData::U8(Vec::with_capacity(count)),
            MX_INT16 => ArrayData::I16(Vec::with_capacity(count)),
            MX_UINT16 => ArrayData::U16(Vec::with_capacity(count)),
            MX_INT32 => ArrayData::I32(Vec::with_capacity(count)),
            MX_UINT32 => ArrayData::U32(Vec::with_capacity(count)),
            MX_INT64 => ArrayData::I64(Vec::with_capacity(count)),
            MX_UINT64 => ArrayData::U64(Vec::with_capacity(count)),
            _ => ArrayData::F64(Vec::with_capacity(count)),
        })
    }

    /// `bytes` holds whole elements of type `ty` (a type [`mi_size`] knows).
    fn push(&mut self, ty: u32, bytes: &[u8], big: bool) {
        match &mut self.0 {
            ArrayData::F64(v) => decode_into!(v, f64, ty, bytes, big),
            ArrayData::F32(v) => decode_into!(v, f32, ty, bytes, big),
            ArrayData::I64(v) => decode_into!(v, i64, ty, bytes, big),
            ArrayData::I32(v) => decode_into!(v, i32, ty, bytes, big),
            ArrayData::I16(v) => decode_into!(v, i16, ty, bytes, big),
            ArrayData::I8(v) => decode_into!(v, i8, ty, bytes, big),
            ArrayData::U8(v) => decode_into!(v, u8, ty, bytes, big),
            ArrayData::U16(v) => decode_into!(v, u16, ty, bytes, big),
            ArrayData::U32(v) => decode_into!(v, u32, ty, bytes, big),
            ArrayData::U64(v) => decode_into!(v, u64, ty, bytes, big),
        }
    }

    fn finish(self) -> ArrayData {
        self.0
    }
}

/// Bytes per element of the numeric data types, `None` for the others.
fn mi_size(ty: u32) -> Option<usize> {
    match ty {
        MI_INT8 | MI_UINT8 => Some(1),
        MI_INT16 | MI_UINT16 => Some(2),
        MI_INT32 | MI_UINT32 | MI_SINGLE => Some(4),
        MI_DOUBLE | MI_INT64 | MI_UINT64 => Some(8),
        _ => None,
    }
}

fn mi_name(ty: u32) -> &'static str {
    match ty {
        MI_INT8 => "miINT8",
        MI_UINT8 => "miUINT8",
        MI_INT16 => "miINT16",
        MI_UINT16 => "miUINT16",
        MI_INT32 => "miINT32",
        MI_UINT32 => "miUINT32",
        MI_SINGLE => "miSINGLE",
        MI_DOUBLE => "miDOUBLE",
        MI_INT64 => "miINT64",
        MI_UINT64 => "miUINT64",
        MI_MATRIX => "miMATRIX",
        MI_COMPRESSED => "miCOMPRESSED",
        MI_UTF8 => "miUTF8",
        17 => "miUTF16",
        18 => "miUTF32",
        _ => "unknown",
    }
}

/// A 32-bit word of the file's byte order from 4 bytes.
fn word(b: &[u8], big: bool) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// Checks the 128-byte header; returns whether the file is big-endian.
fn read_file_header<R: Read + Seek>(r: &mut R, len: u64, path: &Path) -> Result<bool> {
    if len < HEADER_LEN {
        return Err(format_err(
            path,
            format!("{len} bytes is shorter than the 128-byte MAT-file header"),
        ));
    }
    let mut h = [0u8; HEADER_LEN as usize];
    r.seek(SeekFrom::Start(0))
        .and_then(|_| r.read_exact(&mut h))
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
    // The characters 'M','I' written as one 16-bit word in the writer's byte order.
    let big = match &h[126..128] {
        b"IM" => false,
        b"MI" => true,
        other => {
            return Err(format_err(
                path,
                format!(
                    "not a MAT v5 file: endian indicator {other:02x?} is neither 'IM' nor 'MI'"
                ),
            ))
        }
    };
    let version = if big {
        u16::from_be_bytes([h[124], h[125]])
    } else {
        u16::from_le_bytes([h[124], h[125]])
    };
    match version {
        VERSION_5 => Ok(big),
        VERSION_73 => Err(format_err(
            path,
            "MAT v7.3 (HDF5) file; this reader handles MAT v5/v7 only",
        )),
        v => Err(format_err(
            path,
            format!("unknown MAT-file version {v:#06x}"),
        )),
    }
}

/// A zlib stream as `Read`: inflates on demand only as many bytes as are asked for (so listing a
/// compressed variable costs its header, not its data), and reports a stream that ends before
/// zlib's end marker, or fails its checksum, as an error instead of a short read.
struct Inflater<R> {
    inner: R,
    d: Decompress,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    inner_eof: bool,
    done: bool,
}

impl<R: Read> Inflater<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            d: Decompress::new(true),
            buf: vec![0u8; 1 << 15],
            start: 0,
            end: 0,
            inner_eof: false,
            done: false,
        }
    }

    /// Moves unconsumed input to the front and appends more from `inner`.
    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.end == self.buf.len() {
            // A full buffer that inflates to nothing cannot be valid deflate data.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "inflate makes no progress",
            ));
        }
        let n = self.inner.read(&mut self.buf[self.end..])?;
        if n == 0 {
            self.inner_eof = true;
        }
        self.end += n;
        Ok(())
    }
}

impl<R: Read> Read for Inflater<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() || self.done {
            return Ok(0);
        }
        loop {
            if self.start == self.end && !self.inner_eof {
                self.refill()?;
            }
            let flush = if self.inner_eof {
                FlushDecompress::Finish
            } else {
                FlushDecompress::None
            };
            let (in0, out0) = (self.d.total_in(), self.d.total_out());
            let status = self
                .d
                .decompress(&self.buf[self.start..self.end], out, flush)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            let consumed = (self.d.total_in() - in0) as usize;
            let produced = (self.d.total_out() - out0) as usize;
            self.start += consumed;
            if status == Status::StreamEnd {
                self.done = true;
                return Ok(produced);
            }
            if produced > 0 {
                return Ok(produced);
            }
            if consumed == 0 {
                if self.inner_eof {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "compressed stream ends before its end marker",
                    ));
                }
                self.refill()?;
            }
        }
    }
}

// ---- writing ---------------------------------------------------------------------------------

/// Writes numeric arrays as a MAT v5 file, readable by MATLAB, `scipy.io.loadmat` and [`read`]:
/// each variable zlib-compressed in a `miCOMPRESSED` element (as MATLAB `-v7`) when `compress`,
/// otherwise plain (as `scipy.io.savemat`). Rank-0 arrays are written as 1×1 and rank-1 as 1×n
/// (scipy's `oned_as="row"`); `U8` data become `uint8`, not `logical`. The file appears
/// atomically, through the one atomic writer ([`ono_io::atomic`]).
pub fn write(path: &Path, arrays: &[NamedArray], compress: bool) -> Result<()> {
    for a in arrays {
        if a.name.is_empty() || !a.name.is_ascii() || a.name.len() > MAX_NAME_BYTES as usize {
            return Err(Error::Invalid(format!(
                "MAT variable name `{}` must be 1 to {MAX_NAME_BYTES} ASCII characters",
                a.name
            )));
        }
    }
    ono_io::atomic::try_write_atomic_with(path, |w| -> Result<()> {
        write_file_header(w).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        for a in arrays {
            write_variable(w, a, compress, path)?;
        }
        Ok(())
    })
}

fn write_file_header(w: &mut impl Write) -> io::Result<()> {
    let mut h = [b' '; HEADER_LEN as usize];
    let text = b"MATLAB 5.0 MAT-file, written by ono-data (Rust)";
    h[..text.len()].copy_from_slice(text);
    // Bytes 116..124, the subsystem-data offset, stay spaces: there is none.
    h[124..126].copy_from_slice(&VERSION_5.to_le_bytes());
    h[126..128].copy_from_slice(b"IM");
    w.write_all(&h)
}

/// Class and stored data type of each element type.
fn write_types(d: &ArrayData) -> (u32, u32, usize) {
    match d {
        ArrayData::F64(_) => (MX_DOUBLE, MI_DOUBLE, 8),
        ArrayData::F32(_) => (MX_SINGLE, MI_SINGLE, 4),
        ArrayData::I64(_) => (MX_INT64, MI_INT64, 8),
        ArrayData::I32(_) => (MX_INT32, MI_INT32, 4),
        ArrayData::I16(_) => (MX_INT16, MI_INT16, 2),
        ArrayData::I8(_) => (MX_INT8, MI_INT8, 1),
        ArrayData::U8(_) => (MX_UINT8, MI_UINT8, 1),
        ArrayData::U16(_) => (MX_UINT16, MI_UINT16, 2),
        ArrayData::U32(_) => (MX_UINT32, MI_UINT32, 4),
        ArrayData::U64(_) => (MX_UINT64, MI_UINT64, 8),
    }
}

fn pad8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// Bytes a data element of `n` payload bytes occupies, tag and padding included.
fn element_len(n: u64) -> u64 {
    if n <= 4 {
        8
    } else {
        8 + pad8(n)
    }
}

fn write_element<W: Write + ?Sized>(w: &mut W, ty: u32, payload: &[u8]) -> io::Result<()> {
    let n = payload.len() as u32;
    if n <= 4 {
        // Small data element, as MATLAB and scipy write short names and scalars.
        w.write_all(&((n << 16) | ty).to_le_bytes())?;
        let mut b = [0u8; 4];
        b[..payload.len()].copy_from_slice(payload);
        return w.write_all(&b);
    }
    w.write_all(&ty.to_le_bytes())?;
    w.write_all(&n.to_le_bytes())?;
    w.write_all(payload)?;
    w.write_all(&[0u8; 8][..(pad8(u64::from(n)) - u64::from(n)) as usize])
}

fn write_variable<W: Write + Seek>(
    w: &mut W,
    a: &NamedArray,
    compress: bool,
    path: &Path,
) -> Result<()> {
    let too_big = |what: &str| {
        format_err(
            path,
            format!(
                "variable `{}`: {what} exceeds what MAT v5 can store (use v7.3)",
                a.name
            ),
        )
    };
    // MATLAB arrays have at least two dimensions; numpy's 1-D arrays become rows, as in scipy.
    let dims: Vec<usize> = match a.shape.len() {
        0 => vec![1, 1],
        1 => vec![1, a.shape[0]],
        _ => a.shape.clone(),
    };
    let mut dim_bytes = Vec::with_capacity(dims.len() * 4);
    for &d in &dims {
        let d = i32::try_from(d).map_err(|_| too_big("a dimension"))?;
        dim_bytes.extend_from_slice(&d.to_le_bytes());
    }
    // Row-major data of shape S are, read as column-major, the array of shape reverse(S) with its
    // axes reversed; so from_fortran on the reversed shape lays out exactly the column-major order
    // of S (the one conversion routine, used backwards, instead of a second hand-written one).
    let rev: Vec<usize> = dims.iter().rev().copied().collect();
    let fortran = NamedArray::from_fortran(a.name.clone(), rev, a.data.clone())?.data;
    let (class, mi, size) = write_types(&a.data);
    let data_len = (fortran.len() as u64) * size as u64;
    let body_len = 16
        + element_len(dim_bytes.len() as u64)
        + element_len(a.name.len() as u64)
        + element_len(data_len);
    let body_len = u32::try_from(body_len).map_err(|_| too_big("the data size"))?;
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let write_matrix = |w: &mut dyn Write| -> io::Result<()> {
        let mut w = w;
        w.write_all(&MI_MATRIX.to_le_bytes())?;
        w.write_all(&body_len.to_le_bytes())?;
        let mut flags = [0u8; 8];
        flags[..4].copy_from_slice(&class.to_le_bytes());
        write_element(&mut w, MI_UINT32, &flags)?;
        write_element(&mut w, MI_INT32, &dim_bytes)?;
        write_element(&mut w, MI_INT8, a.name.as_bytes())?;
        write_data(&mut w, mi, &fortran, data_len)
    };
    if !compress {
        return write_matrix(w).map_err(io_err);
    }
    // The compressed length is known only afterwards: write a placeholder tag and patch it.
    let tag_pos = w.stream_position().map_err(io_err)?;
    w.write_all(&[0u8; 8]).map_err(io_err)?;
    let mut z = flate2::write::ZlibEncoder::new(&mut *w, flate2::Compression::default());
    write_matrix(&mut z).map_err(io_err)?;
    z.finish().map_err(io_err)?;
    let end = w.stream_position().map_err(io_err)?;
    let clen = u32::try_from(end - tag_pos - 8).map_err(|_| too_big("the compressed size"))?;
    w.seek(SeekFrom::Start(tag_pos)).map_err(io_err)?;
    w.write_all(&MI_COMPRESSED.to_le_bytes()).map_err(io_err)?;
    w.write_all(&clen.to_le_bytes()).map_err(io_err)?;
    w.seek(SeekFrom::Start(end)).map_err(io_err)?;
    Ok(())
}

/// The data element of the real part, little-endian, converted in chunks.
fn write_data(w: &mut dyn Write, mi: u32, d: &ArrayData, n: u64) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(CHUNK_BYTES.min(n as usize));
    macro_rules! dump {
        ($v:expr) => {
            for x in $v.iter() {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    if n <= 4 {
        match d {
            ArrayData::F64(v) => dump!(v),
            ArrayData::F32(v) => dump!(v),
            ArrayData::I64(v) => dump!(v),
            ArrayData::I32(v) => dump!(v),
            ArrayData::I16(v) => dump!(v),
            ArrayData::I8(v) => dump!(v),
            ArrayData::U8(v) => dump!(v),
            ArrayData::U16(v) => dump!(v),
            ArrayData::U32(v) => dump!(v),
            ArrayData::U64(v) => dump!(v),
        }
        return write_element(w, mi, &bytes);
    }
    w.write_all(&mi.to_le_bytes())?;
    // n fits: the caller checked the whole matrix against u32.
    w.write_all(&(n as u32).to_le_bytes())?;
    macro_rules! chunks {
        ($v:expr, $t:ty) => {
            for c in $v.chunks(CHUNK_BYTES / std::mem::size_of::<$t>()) {
                bytes.clear();
                dump!(c);
                w.write_all(&bytes)?;
            }
        };
    }
    match d {
        ArrayData::F64(v) => chunks!(v, f64),
        ArrayData::F32(v) => chunks!(v, f32),
        ArrayData::I64(v) => chunks!(v, i64),
        ArrayData::I32(v) => chunks!(v, i32),
        ArrayData::I16(v) => chunks!(v, i16),
        ArrayData::I8(v) => chunks!(v, i8),
        ArrayData::U8(v) => chunks!(v, u8),
        ArrayData::U16(v) => chunks!(v, u16),
        ArrayData::U32(v) => chunks!(v, u32),
        ArrayData::U64(v) => chunks!(v, u64),
    }
    w.write_all(&[0u8; 8][..(pad8(n) - n) as usize])
}
