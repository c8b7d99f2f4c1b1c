//! Legacy VTK files (`.vtk`), ASCII or binary (big-endian, as VTK writes them), of an
//! `UNSTRUCTURED_GRID` or `POLYDATA` data set:
//!
//! - `POINTS n type`, then `CELLS`/`CELL_TYPES` (grids) or `VERTICES`, `LINES`, `POLYGONS`,
//!   `TRIANGLE_STRIPS` (poly data), each in the classic layout (a count before each cell's
//!   points) or the 5.1 layout (`OFFSETS` and `CONNECTIVITY` arrays);
//! - `POINT_DATA n` / `CELL_DATA n` with `SCALARS` (with their `LOOKUP_TABLE` line),
//!   `COLOR_SCALARS`, `VECTORS`, `NORMALS`, `TEXTURE_COORDINATES`, `TENSORS`, and `FIELD`s of
//!   arrays; `LOOKUP_TABLE` definitions and `METADATA` blocks are skipped.
//!
//! Every count is checked against the bytes left before anything is allocated by it.

use super::{cell_types, indices, MeshArray, Piece, Scalar};

type R<T> = std::result::Result<T, String>;

/// A position in the file's bytes.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    binary: bool,
}

impl<'a> Cursor<'a> {
    /// The next line (without its end), as text.
    fn line(&mut self) -> R<&'a str> {
        let rest = &self.b[self.at.min(self.b.len())..];
        let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
        self.at += (end + 1).min(rest.len());
        std::str::from_utf8(&rest[..end])
            .map(|s| s.trim_end_matches('\r'))
            .map_err(|_| "a header line is not text".to_string())
    }

    fn skip_space(&mut self, newlines: bool) {
        while let Some(&c) = self.b.get(self.at) {
            if c == b' ' || c == b'\t' || c == b'\r' || (newlines && c == b'\n') {
                self.at += 1;
            } else {
                break;
            }
        }
    }

    /// The next whitespace-separated token, if any.
    fn next(&mut self) -> R<Option<&'a str>> {
        self.skip_space(true);
        let start = self.at;
        while self
            .b
            .get(self.at)
            .is_some_and(|c| !c.is_ascii_whitespace())
        {
            self.at += 1;
        }
        if start == self.at {
            return Ok(None);
        }
        std::str::from_utf8(&self.b[start..self.at])
            .map(Some)
            .map_err(|_| format!("at byte {start}: a keyword that is not text"))
    }

    fn token(&mut self, what: &str) -> R<&'a str> {
        self.next()?
            .ok_or_else(|| format!("the file ends where {what} should be"))
    }

    /// The next token if it is on the current line.
    fn on_line(&mut self) -> R<Option<&'a str>> {
        self.skip_space(false);
        if matches!(self.b.get(self.at), None | Some(b'\n')) {
            return Ok(None);
        }
        self.next()
    }

    fn count(&mut self, what: &str) -> R<usize> {
        let t = self.token(what)?;
        t.parse()
            .map_err(|_| format!("{what}: `{t}` is not a count"))
    }

    fn scalar(&mut self) -> R<Scalar> {
        let t = self.token("a data type")?;
        Ok(match t.to_ascii_lowercase().as_str() {
            "char" => Scalar::I8,
            "unsigned_char" => Scalar::U8,
            "short" => Scalar::I16,
            "unsigned_short" => Scalar::U16,
            "int" => Scalar::I32,
            "unsigned_int" => Scalar::U32,
            "long" | "vtktypeint64" | "vtkidtype" => Scalar::I64,
            "unsigned_long" | "vtktypeuint64" => Scalar::U64,
            "float" => Scalar::F32,
            "double" => Scalar::F64,
            other => return Err(format!("data type `{other}` is not numeric")),
        })
    }

    /// `n` numbers of type `ty`: tokens (ASCII), or big-endian bytes after the current line
    /// (binary).
    fn values(&mut self, n: usize, ty: Scalar) -> R<Vec<f64>> {
        let left = self.b.len().saturating_sub(self.at);
        if !self.binary {
            // A number takes at least one character and one separator (the last none).
            if n > left.div_ceil(2) + 1 {
                return Err(format!("{n} numbers do not fit the {left} bytes left"));
            }
            return (0..n)
                .map(|_| {
                    let t = self.token("a number")?;
                    t.parse::<f64>().map_err(|_| {
                        format!(
                            "`{}` is not a number",
                            t.chars().take(24).collect::<String>()
                        )
                    })
                })
                .collect();
        }
        // The data start on the line after the keyword's.
        self.skip_space(false);
        if self.b.get(self.at) == Some(&b'\n') {
            self.at += 1;
        }
        let bytes = n
            .checked_mul(ty.size())
            .filter(|&k| k <= self.b.len().saturating_sub(self.at))
            .ok_or_else(|| format!("{n} binary values do not fit the {left} bytes left"))?;
        let v = ty.decode(&self.b[self.at..self.at + bytes], true)?;
        self.at += bytes;
        Ok(v)
    }
}

/// The piece of a legacy file's bytes.
pub(super) fn pieces(bytes: &[u8]) -> R<Vec<Piece>> {
    let mut c = Cursor {
        b: bytes,
        at: 0,
        binary: false,
    };
    let head = c.line()?;
    if !head.trim_start().starts_with("# vtk DataFile") {
        return Err("no `# vtk DataFile Version` line: not a legacy VTK file".into());
    }
    let _title = c.line()?;
    c.binary = match c.token("ASCII or BINARY")?.to_ascii_uppercase().as_str() {
        "ASCII" => false,
        "BINARY" => true,
        other => return Err(format!("`{other}` where ASCII or BINARY should be")),
    };
    if !c.token("DATASET")?.eq_ignore_ascii_case("DATASET") {
        return Err("no DATASET line".into());
    }
    let kind = c.token("the data set's kind")?.to_ascii_uppercase();
    if kind != "UNSTRUCTURED_GRID" && kind != "POLYDATA" {
        return Err(format!(
            "a {kind} data set: only unstructured grids and poly data are read (the structured \
             kinds have implicit points); save it as an unstructured grid"
        ));
    }
    let mut p = Piece::default();
    let mut points: Option<usize> = None;
    let mut grid_types: Option<Vec<u8>> = None;
    // (point or cell data, its tuples)
    let mut section: Option<(bool, usize)> = None;
    while let Some(t) = c.next()? {
        let key = t.to_ascii_uppercase();
        match key.as_str() {
            "POINTS" => {
                let n = c.count("the point count")?;
                let ty = c.scalar()?;
                p.points = c.values(3 * n, ty)?;
                points = Some(n);
            }
            "CELLS" | "VERTICES" | "LINES" | "POLYGONS" | "TRIANGLE_STRIPS" => {
                let (conn, offsets) = cells(&mut c, &key)?;
                let shift = p.connectivity.len() as u64;
                p.offsets.extend(offsets.iter().map(|&o| o + shift));
                p.connectivity.extend(conn);
                let poly_type = match key.as_str() {
                    "VERTICES" => Some(2),
                    "LINES" => Some(4),
                    "POLYGONS" => Some(7),
                    "TRIANGLE_STRIPS" => Some(6),
                    _ => None,
                };
                if let Some(t) = poly_type {
                    p.types.extend(std::iter::repeat_n(t, offsets.len()));
                }
            }
            "CELL_TYPES" => {
                let n = c.count("the cell type count")?;
                grid_types = Some(cell_types(&c.values(n, Scalar::I32)?)?);
            }
            "POINT_DATA" | "CELL_DATA" => {
                section = Some((key == "POINT_DATA", c.count("the tuple count")?));
            }
            "SCALARS"
            | "COLOR_SCALARS"
            | "VECTORS"
            | "NORMALS"
            | "TEXTURE_COORDINATES"
            | "TENSORS"
            | "FIELD" => {
                let (point, n) =
                    section.ok_or_else(|| format!("{key} before POINT_DATA or CELL_DATA"))?;
                let arrays = attribute(&mut c, &key, n)?;
                let into = if point {
                    &mut p.point_data
                } else {
                    &mut p.cell_data
                };
                into.extend(arrays);
            }
            "LOOKUP_TABLE" => {
                let _name = c.token("the table's name")?;
                let size = c.count("the table's size")?;
                let ty = if c.binary { Scalar::U8 } else { Scalar::F64 };
                c.values(4 * size, ty)?;
            }
            "METADATA" => {
                // Information keys until an empty line (after the METADATA line itself).
                c.line()?;
                loop {
                    let l = c.line()?;
                    if l.trim().is_empty() || c.at >= c.b.len() {
                        break;
                    }
                }
            }
            other => {
                return Err(format!(
                    "unknown keyword `{}`",
                    other.chars().take(32).collect::<String>()
                ))
            }
        }
    }
    if points.is_none() {
        return Err("no POINTS".into());
    }
    if kind == "UNSTRUCTURED_GRID" {
        p.types = grid_types.unwrap_or_default();
    }
    if p.types.len() != p.offsets.len() {
        return Err(format!(
            "{} cells but {} cell types",
            p.offsets.len(),
            p.types.len()
        ));
    }
    Ok(vec![p])
}

/// A cell list after its keyword: the connectivity and each cell's end in it.
fn cells(c: &mut Cursor, key: &str) -> R<(Vec<u64>, Vec<u64>)> {
    let a = c.count("the cell count")?;
    let b = c.count("the cell list's size")?;
    let save = c.at;
    if c.next()?.is_some_and(|t| t.eq_ignore_ascii_case("OFFSETS")) {
        // 5.1: `a` offsets (cells + 1, starting at 0), `b` connectivity entries.
        let ty = c.scalar()?;
        let offsets = indices(&c.values(a, ty)?, "the offsets")?;
        if !c
            .token("CONNECTIVITY")?
            .eq_ignore_ascii_case("CONNECTIVITY")
        {
            return Err(format!("{key}: no CONNECTIVITY after the OFFSETS"));
        }
        let ty = c.scalar()?;
        let conn = indices(&c.values(b, ty)?, "the connectivity")?;
        if offsets.first().is_some_and(|&o| o != 0) || offsets.windows(2).any(|w| w[1] < w[0]) {
            return Err(format!("{key}: the offsets do not start at 0 and grow"));
        }
        return Ok((conn, offsets.into_iter().skip(1).collect()));
    }
    c.at = save;
    // Classic: `a` cells, `b` numbers, each cell its point count then its points.
    let list = indices(&c.values(b, Scalar::I32)?, "the cell list")?;
    let (mut conn, mut offsets) = (Vec::new(), Vec::new());
    let mut at = 0usize;
    for _ in 0..a {
        let k = *list
            .get(at)
            .ok_or_else(|| format!("{key}: the list ends before its last cell"))?
            as usize;
        let ids = list
            .get(at + 1..at + 1 + k)
            .ok_or_else(|| format!("{key}: a cell's points run past the list"))?;
        conn.extend_from_slice(ids);
        offsets.push(conn.len() as u64);
        at += 1 + k;
    }
    if at != list.len() {
        return Err(format!(
            "{key}: {a} cells use {at} of the list's {} numbers",
            list.len()
        ));
    }
    Ok((conn, offsets))
}

/// The arrays of one attribute keyword of a data section of `n` tuples.
fn attribute(c: &mut Cursor, key: &str, n: usize) -> R<Vec<MeshArray>> {
    let name = c.token("the array's name")?.to_string();
    let (components, ty) = match key {
        "SCALARS" => {
            let ty = c.scalar()?;
            let k = match c.on_line()? {
                Some(t) => t
                    .parse::<usize>()
                    .ok()
                    .filter(|k| (1..=4).contains(k))
                    .ok_or_else(|| format!("SCALARS `{name}`: `{t}` is not 1 to 4 components"))?,
                None => 1,
            };
            let save = c.at;
            if c.next()?
                .is_some_and(|t| t.eq_ignore_ascii_case("LOOKUP_TABLE"))
            {
                c.token("the lookup table's name")?;
            } else {
                c.at = save;
            }
            (k, ty)
        }
        "COLOR_SCALARS" => {
            let k = c.count("the colour components")?;
            (k, if c.binary { Scalar::U8 } else { Scalar::F64 })
        }
        "VECTORS" | "NORMALS" => (3, c.scalar()?),
        "TEXTURE_COORDINATES" => {
            let k = c.count("the texture dimension")?;
            (k, c.scalar()?)
        }
        "TENSORS" => (9, c.scalar()?),
        _ => {
            // FIELD name count, then per array: name components tuples type.
            let arrays = c
                .count("the field's array count")
                .map_err(|e| format!("FIELD `{name}`: {e}"))?;
            let mut out = Vec::new();
            for _ in 0..arrays {
                let a = c.token("a field array's name")?.to_string();
                let k = c.count("its components")?;
                let tuples = c.count("its tuples")?;
                let ty = c.scalar()?;
                if tuples != n {
                    return Err(format!(
                        "field array `{a}` has {tuples} tuples in a section of {n}"
                    ));
                }
                let total = k
                    .checked_mul(tuples)
                    .ok_or("a field array's size overflows")?;
                let values = c.values(total, ty)?;
                out.push(MeshArray {
                    name: a,
                    components: k,
                    values,
                });
            }
            return Ok(out);
        }
    };
    if components == 0 {
        return Err(format!("{key} `{name}` has 0 components"));
    }
    let total = components
        .checked_mul(n)
        .ok_or("an array's size overflows")?;
    let values = c
        .values(total, ty)
        .map_err(|e| format!("{key} `{name}`: {e}"))?;
    Ok(vec![MeshArray {
        name,
        components,
        values,
    }])
}
