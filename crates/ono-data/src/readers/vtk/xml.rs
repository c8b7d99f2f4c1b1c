//! Serial VTK XML files (`.vtu` unstructured grids, `.vtp` poly data), as VTK's
//! `vtkXMLWriter` and its imitators (meshio, vtkio, pyvista) write them:
//!
//! - the root `VTKFile` with `type`, `byte_order` (LittleEndian by default), `header_type`
//!   (UInt32 by default, or UInt64) and an optional `compressor` (only
//!   `vtkZLibDataCompressor`: LZ4 and LZMA are refused by name);
//! - `Piece`s with `NumberOfPoints` and `NumberOfCells` (grids) or `NumberOfVerts`,
//!   `NumberOfLines`, `NumberOfPolys`, `NumberOfStrips` (poly data), a `Points` array, the
//!   cells' `connectivity`, `offsets` (and `types`), and `PointData` / `CellData` arrays;
//! - `DataArray`s of any numeric `type` (Int8 … UInt64, Float32, Float64), `format` `ascii`
//!   (numbers in the text), `binary` (base64 in the text) or `appended` (at `offset` in the
//!   `AppendedData` section, `raw` bytes or `base64`);
//! - binary blocks: a header of one size word then the data, or, compressed, the words (blocks,
//!   block size, last block's size, each block's compressed size) then the zlib blocks. In base64
//!   the header and the data may be one stream or two (VTK encodes them separately); the padding
//!   of the header's stream tells which.
//!
//! Sizes come from the file and are never trusted: every count is checked against the bytes that
//! are there, and an inflated block may not outgrow the size its header states.

use std::io::Read;

use base64::Engine;
use roxmltree::Node;

use super::{cell_types, indices, MeshArray, Piece, Scalar};

type R<T> = std::result::Result<T, String>;

/// What every data array of a file shares.
struct ArrayEncoding<'a> {
    big_endian: bool,
    /// 4 (UInt32) or 8 (UInt64).
    word: usize,
    compressed: bool,
    /// The raw bytes after the `_` of `AppendedData`, if there is such a section.
    appended: Option<&'a [u8]>,
    /// Whether the appended section is base64 rather than raw.
    appended_base64: bool,
}

/// The pieces of an XML file's bytes.
pub(super) fn pieces(bytes: &[u8]) -> R<Vec<Piece>> {
    // The raw appended section is not text: it is cut out before the XML is parsed.
    let (text, appended) = split_appended(bytes)?;
    let text = std::str::from_utf8(&text).map_err(|e| format!("not UTF-8 XML: {e}"))?;
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("not well-formed XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "VTKFile" {
        return Err(format!(
            "the root element is <{}>, not <VTKFile>",
            root.tag_name().name()
        ));
    }
    let kind = root.attribute("type").unwrap_or("");
    if kind != "UnstructuredGrid" && kind != "PolyData" {
        return Err(format!(
            "a `{kind}` file: only unstructured grids (.vtu) and poly data (.vtp) are read (the \
             structured kinds have implicit points; the parallel kinds keep their pieces in other \
             files); save it as an unstructured grid"
        ));
    }
    let big_endian = match root.attribute("byte_order").unwrap_or("LittleEndian") {
        "LittleEndian" => false,
        "BigEndian" => true,
        other => {
            return Err(format!(
                "byte_order `{other}` is neither LittleEndian nor BigEndian"
            ))
        }
    };
    let word = match root.attribute("header_type").unwrap_or("UInt32") {
        "UInt32" => 4,
        "UInt64" => 8,
        other => {
            return Err(format!(
                "header_type `{other}` is neither UInt32 nor UInt64"
            ))
        }
    };
    let compressed = match root.attribute("compressor") {
        None | Some("") => false,
        Some("vtkZLibDataCompressor") => true,
        Some(other) => {
            return Err(format!(
                "compressor `{other}`: only zlib (vtkZLibDataCompressor) is read; re-save the file \
                 with zlib or without compression"
            ))
        }
    };
    let appended_base64 = match element(root, "AppendedData").map(|a| a.attribute("encoding")) {
        None | Some(Some("raw")) => false,
        Some(Some("base64")) => true,
        Some(other) => {
            return Err(format!(
                "AppendedData encoding {other:?} is neither raw nor base64"
            ))
        }
    };
    let ctx = ArrayEncoding {
        big_endian,
        word,
        compressed,
        appended: appended.as_deref(),
        appended_base64,
    };
    let set = element(root, kind).ok_or_else(|| format!("no <{kind}> element"))?;
    let pieces = children(set, "Piece");
    if pieces.is_empty() {
        return Err(format!("<{kind}> has no <Piece>"));
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| piece(p, kind == "PolyData", &ctx).map_err(|e| format!("piece {i}: {e}")))
        .collect()
}

fn element<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Vec<Node<'a, 'i>> {
    node.children()
        .filter(|c| c.is_element() && c.tag_name().name() == name)
        .collect()
}

fn count(node: Node, attr: &str) -> R<usize> {
    match node.attribute(attr) {
        None => Ok(0),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{attr}=\"{v}\" is not a count")),
    }
}

/// The bytes without the raw appended data, and that data (after its `_` marker, up to the
/// closing tag).
fn split_appended(bytes: &[u8]) -> R<(Vec<u8>, Option<Vec<u8>>)> {
    let Some(open) = find(bytes, b"<AppendedData") else {
        return Ok((bytes.to_vec(), None));
    };
    let tag_end =
        open + find(&bytes[open..], b">").ok_or("the <AppendedData> tag is not closed")?;
    let marker =
        tag_end + find(&bytes[tag_end..], b"_").ok_or("the appended data has no `_` marker")?;
    let close = rfind(bytes, b"</AppendedData>")
        .filter(|&c| c > marker)
        .ok_or("the appended data has no closing </AppendedData>")?;
    let mut text = bytes[..marker].to_vec();
    text.extend_from_slice(&bytes[close..]);
    Ok((text, Some(bytes[marker + 1..close].to_vec())))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

fn piece(p: Node, poly: bool, ctx: &ArrayEncoding) -> R<Piece> {
    let n = count(p, "NumberOfPoints")?;
    let points = match element(p, "Points") {
        Some(pts) => {
            let a = first_array(pts).ok_or("<Points> has no <DataArray>")?;
            values(a, ctx).map_err(|e| format!("the points: {e}"))?
        }
        None if n == 0 => Vec::new(),
        None => return Err(format!("{n} points but no <Points>")),
    };
    if points.len() != 3 * n {
        return Err(format!(
            "NumberOfPoints is {n}, the points hold {} coordinates (3 per point)",
            points.len()
        ));
    }
    let mut out = Piece {
        points,
        ..Default::default()
    };
    let blocks: &[(&str, &str, u8)] = if poly {
        // VTK numbers poly data cells vertices first, then lines, polygons, strips.
        &[
            ("Verts", "NumberOfVerts", 2),
            ("Lines", "NumberOfLines", 4),
            ("Polys", "NumberOfPolys", 7),
            ("Strips", "NumberOfStrips", 6),
        ]
    } else {
        &[("Cells", "NumberOfCells", 0)]
    };
    for &(tag, attr, poly_type) in blocks {
        let cells = count(p, attr)?;
        let Some(block) = element(p, tag) else {
            if cells > 0 {
                return Err(format!("{attr} is {cells} but there is no <{tag}>"));
            }
            continue;
        };
        let named = |name: &str| -> R<Vec<f64>> {
            let a = children(block, "DataArray")
                .into_iter()
                .find(|a| a.attribute("Name") == Some(name))
                .ok_or_else(|| format!("<{tag}> has no `{name}` array"))?;
            values(a, ctx).map_err(|e| format!("<{tag}> `{name}`: {e}"))
        };
        let connectivity = indices(&named("connectivity")?, "the connectivity")?;
        let offsets = indices(&named("offsets")?, "the offsets")?;
        if offsets.len() != cells {
            return Err(format!(
                "{attr} is {cells}, <{tag}> has {} offsets",
                offsets.len()
            ));
        }
        if offsets.windows(2).any(|w| w[1] < w[0]) {
            return Err(format!("the offsets of <{tag}> decrease"));
        }
        let types = if poly {
            vec![poly_type; cells]
        } else {
            cell_types(&named("types")?)?
        };
        if types.len() != cells {
            return Err(format!(
                "{attr} is {cells}, <{tag}> has {} types",
                types.len()
            ));
        }
        // Offsets are ends within this block's connectivity; the piece's run on after it.
        let shift = out.connectivity.len() as u64;
        out.offsets.extend(offsets.iter().map(|&o| o + shift));
        out.connectivity.extend(connectivity);
        out.types.extend(types);
    }
    for (tag, into) in [
        ("PointData", &mut out.point_data),
        ("CellData", &mut out.cell_data),
    ] {
        let Some(data) = element(p, tag) else {
            continue;
        };
        for a in children(data, "DataArray") {
            let name = a
                .attribute("Name")
                .ok_or_else(|| format!("a <{tag}> array has no Name"))?
                .to_string();
            let components = count(a, "NumberOfComponents")?
                .max(usize::from(a.attribute("NumberOfComponents").is_none()));
            if components == 0 {
                return Err(format!("<{tag}> array `{name}` has 0 components"));
            }
            let values = values(a, ctx).map_err(|e| format!("<{tag}> array `{name}`: {e}"))?;
            into.push(MeshArray {
                name,
                components,
                values,
            });
        }
    }
    Ok(out)
}

fn first_array<'a, 'i>(node: Node<'a, 'i>) -> Option<Node<'a, 'i>> {
    element(node, "DataArray")
}

/// The numbers of a `DataArray`, as float64.
fn values(a: Node, ctx: &ArrayEncoding) -> R<Vec<f64>> {
    let ty = a.attribute("type").unwrap_or("");
    let scalar = match ty {
        "Int8" | "Char" => Scalar::I8,
        "UInt8" | "UChar" => Scalar::U8,
        "Int16" => Scalar::I16,
        "UInt16" => Scalar::U16,
        "Int32" => Scalar::I32,
        "UInt32" => Scalar::U32,
        "Int64" => Scalar::I64,
        "UInt64" => Scalar::U64,
        "Float32" => Scalar::F32,
        "Float64" => Scalar::F64,
        other => return Err(format!("type `{other}` is not numeric")),
    };
    let bytes = match a.attribute("format").unwrap_or("ascii") {
        "ascii" => {
            let text: String = a
                .descendants()
                .filter(|d| d.is_text())
                .filter_map(|d| d.text())
                .collect();
            return text
                .split_ascii_whitespace()
                .map(|t| {
                    t.parse::<f64>().map_err(|_| {
                        format!(
                            "`{}` is not a number",
                            t.chars().take(24).collect::<String>()
                        )
                    })
                })
                .collect();
        }
        "binary" => {
            let text: Vec<u8> = a
                .descendants()
                .filter(|d| d.is_text())
                .filter_map(|d| d.text())
                .flat_map(|t| t.bytes())
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            base64_block(&text, ctx)?
        }
        "appended" => {
            let data = ctx
                .appended
                .ok_or("format appended, but there is no <AppendedData>")?;
            let offset: usize = a
                .attribute("offset")
                .ok_or("an appended array has no offset")?
                .trim()
                .parse()
                .map_err(|_| "its offset is not a number".to_string())?;
            let at = data.get(offset..).ok_or_else(|| {
                format!(
                    "offset {offset} is past the appended data's {} bytes",
                    data.len()
                )
            })?;
            if ctx.appended_base64 {
                let text: Vec<u8> = at
                    .iter()
                    .copied()
                    .take_while(|b| !b.is_ascii_whitespace())
                    .collect();
                base64_block(&text, ctx)?
            } else {
                raw_block(at, ctx)?
            }
        }
        other => return Err(format!("format `{other}` is not ascii, binary or appended")),
    };
    scalar.decode(&bytes, ctx.big_endian)
}

fn word(bytes: &[u8], i: usize, ctx: &ArrayEncoding) -> R<u64> {
    let w = ctx.word;
    let b = bytes
        .get(i * w..(i + 1) * w)
        .ok_or("the block header is cut short")?;
    Ok(match (w, ctx.big_endian) {
        (4, false) => u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
        (4, true) => u64::from(u32::from_be_bytes(b.try_into().expect("4 bytes"))),
        (_, false) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        (_, true) => u64::from_be_bytes(b.try_into().expect("8 bytes")),
    })
}

/// A block of raw bytes (appended raw data): header, then data.
fn raw_block(at: &[u8], ctx: &ArrayEncoding) -> R<Vec<u8>> {
    if !ctx.compressed {
        let n = to_usize(word(at, 0, ctx)?)?;
        return at
            .get(ctx.word..)
            .and_then(|d| d.get(..n))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("a block of {n} bytes runs past the appended data"));
    }
    let blocks = to_usize(word(at, 0, ctx)?)?;
    if blocks > at.len() {
        return Err(format!("{blocks} compressed blocks in {} bytes", at.len()));
    }
    let header = (3 + blocks) * ctx.word;
    let head = at.get(..header).ok_or("the block header is cut short")?;
    inflate(head, at.get(header..).unwrap_or(&[]), ctx)
}

/// A base64 block (inline binary, or appended base64): the header and the data as one stream
/// or two.
fn base64_block(text: &[u8], ctx: &ArrayEncoding) -> R<Vec<u8>> {
    let b64 = |t: &[u8]| -> R<Vec<u8>> {
        base64::engine::general_purpose::STANDARD
            .decode(t)
            .map_err(|e| format!("bad base64: {e}"))
    };
    // The header's byte count: one word, or (3 + blocks) words compressed.
    let header = if ctx.compressed {
        // The first three words are 3·w bytes, a multiple of 3: their base64 is a prefix.
        let first = text
            .get(..4 * ctx.word)
            .ok_or("the block header is cut short")?;
        let blocks = to_usize(word(&b64(first)?, 0, ctx)?)?;
        if blocks > text.len() {
            return Err(format!(
                "{blocks} compressed blocks in {} characters",
                text.len()
            ));
        }
        (3 + blocks) * ctx.word
    } else {
        ctx.word
    };
    let chars = header.div_ceil(3) * 4;
    let head_text = text.get(..chars).ok_or("the block header is cut short")?;
    // The data's byte count, from the header: what limits an appended array's characters.
    let payload = |head: &[u8]| -> R<usize> {
        if !ctx.compressed {
            return to_usize(word(head, 0, ctx)?);
        }
        let blocks = to_usize(word(head, 0, ctx)?)?;
        (0..blocks).try_fold(0usize, |sum, b| {
            sum.checked_add(to_usize(word(head, 3 + b, ctx)?)?)
                .ok_or_else(|| "block sizes overflow".to_string())
        })
    };
    let cut = |from: usize, n: usize| -> R<&[u8]> {
        text.get(from..from.saturating_add(n.div_ceil(3).saturating_mul(4)))
            .ok_or_else(|| "the data are cut short".to_string())
    };
    // Padding at the end of the header's characters: it was encoded on its own.
    let (head, data) = if head_text.last() == Some(&b'=') {
        let head = b64(head_text)?;
        let n = payload(&head)?;
        (head, b64(cut(chars, n)?)?)
    } else {
        let head = b64(head_text)?
            .get(..header)
            .ok_or("the block header is cut short")?
            .to_vec();
        let n = payload(&head)?;
        let all = b64(cut(
            0,
            header.checked_add(n).ok_or("block sizes overflow")?,
        )?)?;
        (head, all.get(header..).unwrap_or_default().to_vec())
    };
    if !ctx.compressed {
        let n = to_usize(word(&head, 0, ctx)?)?;
        if data.len() < n {
            return Err(format!("a block of {n} bytes holds {}", data.len()));
        }
        return Ok(data[..n].to_vec());
    }
    inflate(&head, &data, ctx)
}

/// The zlib blocks after a compressed header, inflated, each to exactly its stated size.
fn inflate(head: &[u8], data: &[u8], ctx: &ArrayEncoding) -> R<Vec<u8>> {
    let blocks = to_usize(word(head, 0, ctx)?)?;
    let size = to_usize(word(head, 1, ctx)?)?;
    let last = to_usize(word(head, 2, ctx)?)?;
    let mut out = Vec::new();
    let mut at = 0usize;
    for b in 0..blocks {
        let c = to_usize(word(head, 3 + b, ctx)?)?;
        let end = at.checked_add(c).ok_or("block sizes overflow")?;
        let packed = data
            .get(at..end)
            .ok_or_else(|| format!("compressed block {b} runs past the data"))?;
        at = end;
        let want = if b + 1 == blocks && last != 0 {
            last
        } else {
            size
        };
        // deflate cannot expand by more than about 1032:1; a block that claims more is lying.
        if want as u64 > (c as u64 + 64) * 1032 {
            return Err(format!(
                "compressed block {b} of {c} bytes claims {want} bytes inflated"
            ));
        }
        let mut got = Vec::new();
        flate2::read::ZlibDecoder::new(packed)
            .take(want as u64 + 1)
            .read_to_end(&mut got)
            .map_err(|e| format!("compressed block {b}: {e}"))?;
        if got.len() != want {
            return Err(format!(
                "compressed block {b} inflates to {} bytes, its header says {want}",
                got.len()
            ));
        }
        out.extend(got);
    }
    Ok(out)
}

fn to_usize(v: u64) -> R<usize> {
    usize::try_from(v).map_err(|_| format!("a size of {v} bytes"))
}
