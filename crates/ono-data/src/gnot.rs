//! GNOT's multi-input-output (MIO) datasets, read from the published pickles or from the .npz
//! that earlier versions of ono converted them to.
//!
//! A pickle is a list of samples `[X (N, N_in), Y (N, N_out), θ (N_θ,), (f_1, …, f_k) or None]`
//! of numpy arrays, with N varying between samples. [`read_gnot_pickle`] reads it natively
//! through ono-io's pickle machine (numpy's own pickling, protocols 2–5, numpy 1.x and 2.x module
//! paths, either byte order, C or Fortran order; no Python code runs). As the GNOT README allows,
//! the functions may be `None` or `(None,)` (no input functions), and θ may be None in every
//! sample (no global parameters). Each field is float32 when every sample stores it as float32
//! and float64 otherwise (integer and bool arrays become float64).
//!
//! The .npz of the retired converter (`cargo xtask data convert-gnot`) held the samples
//! concatenated along the point axis:
//!
//! | array          | shape            | meaning                                              |
//! |----------------|------------------|------------------------------------------------------|
//! | `x`            | (ΣN_i, N_in)     | X of every sample, sample i in rows `offsets[i]..offsets[i+1]` |
//! | `y`            | (ΣN_i, N_out)    | Y, same rows                                         |
//! | `offsets`      | (S + 1,) int64   | 0, N_0, N_0 + N_1, …                                 |
//! | `theta`        | (S, N_θ)         | θ; absent when the samples have none                 |
//! | `f{j}`         | (ΣM_ij, c_j)     | input function j (coordinates and values concatenated) |
//! | `f{j}_offsets` | (S + 1,) int64   | its row offsets; an M_ij may be 0                     |
//! | `meta`         | uint8            | UTF-8 JSON from the converter (ignored here)         |
//!
//! [`read_gnot_npz`] turns this back into a [`PointCloudSplit`] (its per-sample tensors are views
//! into the concatenated arrays). Either way X becomes the positions (GNOT's query coordinates;
//! there are no other node features, so `fx` is (N, 0)), Y the targets, and the split passes the
//! same checks ([`PointCloudSplit::validate`]), refused as [`Error::Format`] naming the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ono_io::pickle::Value;
use tch::{Device, Kind, Tensor};

use crate::array::{ArrayData, NamedArray};
use crate::point_cloud::{PointCloudSplit, PointSample};
use crate::readers::npy::read_npz;
use crate::{Error, Result};

/// The datasets GNOT's `get_dataset` wires (`./data/{name}_1100_{train,test}.pkl`).
pub const GNOT_DATASETS: [&str; 3] = ["ns2d", "inductor2d", "heat2d"];

/// Where the pickles are published: the "Our GNOT datasets" link of the GNOT README.
pub const GNOT_DATA_URL: &str =
    "https://drive.google.com/drive/folders/1kicZyL1t4z6a7B-6DJEOxIrX877gjBC0";

/// Reads a GNOT MIO pickle (the published `{name}_1100_{split}.pkl`). A file that is not a
/// readable pickle, or that holds anything but numpy arrays, lists, tuples, None and numbers, is
/// refused by ono-io ([`Error::File`]); one that is not a list of `[X, Y, θ, funcs]` samples, or
/// whose samples disagree (point counts of X and Y, column counts, θ in some samples only, the
/// number of input functions, NaN/Inf, ...), is an [`Error::Format`] naming the file.
pub fn read_gnot_pickle(path: &Path) -> Result<PointCloudSplit> {
    let root = ono_io::pickle::load(path)?;
    split_from_pickle(path, root)
}

/// A split from either a GNOT pickle or a converted .npz (by the extension `.npz`).
pub fn read_gnot(path: &Path) -> Result<PointCloudSplit> {
    if path.extension().is_some_and(|e| e == "npz") {
        read_gnot_npz(path)
    } else {
        read_gnot_pickle(path)
    }
}

/// The samples of an unpickled MIO list; `path` names the source in errors.
fn split_from_pickle(path: &Path, root: Value) -> Result<PointCloudSplit> {
    let bad = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    let array = |v: Value, what: &dyn Fn() -> String| match v {
        Value::Tensor(t) if !t.is_complex() => Ok(t),
        Value::Tensor(t) => Err(bad(format!("{} must be real, got {:?}", what(), t.kind()))),
        other => Err(bad(format!(
            "{} must be a numpy array, got {}",
            what(),
            other.type_name()
        ))),
    };
    // A list or tuple, else `refusal(its type)`.
    let sequence = |v: Value, refusal: &dyn Fn(&str) -> String| match v {
        Value::List(v) | Value::Tuple(v) => Ok(v),
        other => Err(bad(refusal(other.type_name()))),
    };
    let samples = sequence(root, &|t| {
        format!("holds {t}, not the list of samples [X, Y, theta, funcs] of a GNOT MIO dataset")
    })?;
    let mut parsed = Vec::with_capacity(samples.len());
    for (i, sample) in samples.into_iter().enumerate() {
        let items = sequence(sample, &|t| {
            format!("sample {i} must be [X, Y, theta, funcs], got {t}")
        })?;
        let [x, y, theta, funcs] = <[Value; 4]>::try_from(items).map_err(|items| {
            let nested = match items.first() {
                Some(Value::List(_) | Value::Tuple(_)) => {
                    " that are lists themselves (samples nested one level too deep?)"
                }
                _ => "",
            };
            bad(format!(
                "sample {i} must be [X, Y, theta, funcs] (4 items), got {} items{nested}",
                items.len()
            ))
        })?;
        let x = array(x, &|| format!("sample {i}: X"))?;
        let y = array(y, &|| format!("sample {i}: Y"))?;
        let theta = match theta {
            Value::None => None,
            t => Some(array(t, &|| format!("sample {i}: theta"))?),
        };
        // None and (None,) both mean "no input functions" (the GNOT README).
        let funcs = match funcs {
            Value::None => Vec::new(),
            fs => {
                sequence(fs, &|t| {
                    format!("sample {i}: the input functions must be a tuple of arrays or None, got {t}")
                })?
            }
        };
        let funcs: Vec<Tensor> = if funcs.iter().all(|f| matches!(f, Value::None)) {
            Vec::new()
        } else {
            funcs
                .into_iter()
                .enumerate()
                .map(|(j, f)| match f {
                    Value::None => Err(bad(format!(
                        "sample {i}: input function {j} is None but others are not"
                    ))),
                    f => array(f, &|| format!("sample {i}: input function {j}")),
                })
                .collect::<Result<_>>()?
        };
        parsed.push((x, y, theta, funcs));
    }

    // One float kind per field across the samples, as the converter's concatenation had.
    let x_kind = common_float(parsed.iter().map(|s| &s.0));
    let y_kind = common_float(parsed.iter().map(|s| &s.1));
    let theta_kind = common_float(parsed.iter().filter_map(|s| s.2.as_ref()));
    let n_funcs = parsed.iter().map(|s| s.3.len()).max().unwrap_or(0);
    let func_kinds: Vec<Kind> = (0..n_funcs)
        .map(|j| common_float(parsed.iter().filter_map(|s| s.3.get(j))))
        .collect();
    let mut samples = Vec::with_capacity(parsed.len());
    for (x, y, theta, funcs) in parsed {
        let pos = x.f_to_kind(x_kind)?;
        let n = pos.size().first().copied().unwrap_or(0);
        samples.push(PointSample {
            fx: Tensor::f_zeros([n, 0], (x_kind, Device::Cpu))?,
            pos,
            y: y.f_to_kind(y_kind)?,
            theta: theta.map(|t| t.f_to_kind(theta_kind)).transpose()?,
            funcs: funcs
                .iter()
                .zip(&func_kinds)
                .map(|(f, &k)| f.f_to_kind(k))
                .collect::<std::result::Result<_, _>>()?,
        });
    }
    validated(path, samples)
}

/// Reads one converted MIO file. A file that is not a readable .npz, or whose arrays do not
/// have the layout of the module docs (offsets not starting at 0, not increasing, not ending at
/// the row count; θ or a function offset table of the wrong length; NaN/Inf; ...) is refused
/// with [`Error::Format`] naming the file (or [`Error::Io`] when it cannot be opened).
pub fn read_gnot_npz(path: &Path) -> Result<PointCloudSplit> {
    let arrays = read_npz(path, None)?;
    split_from_arrays(path, arrays)
}

/// [`read_gnot_npz`] on arrays already read; `path` only names the source in errors.
pub fn split_from_arrays(path: &Path, arrays: Vec<NamedArray>) -> Result<PointCloudSplit> {
    let bad = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    let mut map: HashMap<String, NamedArray> =
        arrays.into_iter().map(|a| (a.name.clone(), a)).collect();
    let mut take = |name: &str| {
        map.remove(name).ok_or_else(|| {
            bad(format!(
                "has no array `{name}`: not a converted GNOT MIO file"
            ))
        })
    };

    let x = take("x")?;
    let y = take("y")?;
    let offsets = take("offsets")?;
    let n_rows = rows_of(path, &x)?;
    let offsets = offsets_of(path, &offsets, n_rows, true)?;
    let s = offsets.len() - 1;
    if rows_of(path, &y)? != n_rows {
        return Err(bad(format!(
            "`y` has {} rows but `x` has {n_rows}",
            y.shape[0]
        )));
    }
    let theta = match map.remove("theta") {
        None => None,
        Some(t) => {
            if t.shape.len() != 2 || t.shape[0] != s {
                return Err(bad(format!(
                    "`theta` must be (S, N_theta) with S = {s} samples, got {:?}",
                    t.shape
                )));
            }
            Some(float_tensor(&t)?)
        }
    };
    let mut funcs = Vec::new();
    while let Some(f) = map.remove(&format!("f{}", funcs.len())) {
        let j = funcs.len();
        let offs = map
            .remove(&format!("f{j}_offsets"))
            .ok_or_else(|| bad(format!("has `f{j}` but no `f{j}_offsets`")))?;
        let m = rows_of(path, &f)?;
        let offs = offsets_of(path, &offs, m, false)?;
        if offs.len() != s + 1 {
            return Err(bad(format!(
                "`f{j}_offsets` has {} entries, `offsets` {}: they must describe the same samples",
                offs.len(),
                s + 1
            )));
        }
        funcs.push((float_tensor(&f)?, offs));
    }
    // A gap (f0, f2 without f1) or an offset table without its array would silently drop data.
    if let Some(stray) = map.keys().find(|k| {
        k.strip_prefix('f')
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    }) {
        return Err(bad(format!(
            "has `{stray}` but input functions must be numbered f0, f1, … without gaps, each with \
             its `_offsets` (found {} in order)",
            funcs.len()
        )));
    }

    let x = float_tensor(&x)?;
    let y = float_tensor(&y)?;
    let mut samples = Vec::with_capacity(s);
    for i in 0..s {
        let (o, n) = (offsets[i], offsets[i + 1] - offsets[i]);
        let mut fs = Vec::with_capacity(funcs.len());
        for (f, offs) in &funcs {
            fs.push(f.f_narrow(0, offs[i], offs[i + 1] - offs[i])?);
        }
        samples.push(PointSample {
            pos: x.f_narrow(0, o, n)?,
            fx: Tensor::f_zeros([n, 0], (x.kind(), Device::Cpu))?,
            y: y.f_narrow(0, o, n)?,
            theta: match &theta {
                Some(t) => Some(t.f_get(i as i64)?),
                None => None,
            },
            funcs: fs,
        });
    }
    validated(path, samples)
}

/// float32 when every part is float32, else float64.
fn common_float<'a>(mut parts: impl Iterator<Item = &'a Tensor>) -> Kind {
    if parts.all(|t| t.kind() == Kind::Float) {
        Kind::Float
    } else {
        Kind::Double
    }
}

/// The split of `samples` if it passes [`PointCloudSplit::validate`], else a Format error on
/// `path`: the one set of checks of both file formats.
fn validated(path: &Path, samples: Vec<PointSample>) -> Result<PointCloudSplit> {
    let split = PointCloudSplit { samples };
    split
        .validate(&path.display().to_string())
        .map_err(|e| Error::Format {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
    Ok(split)
}

/// The row count of a rank-2 array, or a Format error.
fn rows_of(path: &Path, a: &NamedArray) -> Result<i64> {
    if a.shape.len() != 2 {
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!("`{}` must be (rows, columns), got {:?}", a.name, a.shape),
        });
    }
    Ok(a.shape[0] as i64)
}

/// The offsets as i64, checked: rank 1, at least 2 entries, starting at 0, ending at `rows`,
/// strictly increasing for the query points (every sample has a point) and non-decreasing for
/// input functions (a sample may have an empty one).
fn offsets_of(path: &Path, a: &NamedArray, rows: i64, strict: bool) -> Result<Vec<i64>> {
    let bad = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg: format!("`{}` {msg}", a.name),
    };
    let v: Vec<i64> = match &a.data {
        ArrayData::I64(v) => v.clone(),
        ArrayData::I32(v) => v.iter().map(|&o| o as i64).collect(),
        other => return Err(bad(format!("must be int64, got {}", other.dtype()))),
    };
    if a.shape.len() != 1 || v.len() < 2 {
        return Err(bad(format!(
            "must be (S + 1,) with S ≥ 1 samples, got shape {:?}",
            a.shape
        )));
    }
    if v[0] != 0 || v[v.len() - 1] != rows {
        return Err(bad(format!(
            "must run from 0 to the {rows} rows of its array, runs from {} to {}",
            v[0],
            v[v.len() - 1]
        )));
    }
    if let Some(w) = v
        .windows(2)
        .position(|w| w[1] < w[0] || (strict && w[1] == w[0]))
    {
        let rule = if strict {
            "increase strictly (every sample has a point)"
        } else {
            "not decrease"
        };
        return Err(bad(format!(
            "must {rule}: entries {w} and {} are {} and {}",
            w + 1,
            v[w],
            v[w + 1]
        )));
    }
    Ok(v)
}

/// float32 and float64 arrays keep their type; anything else becomes float64.
fn float_tensor(a: &NamedArray) -> Result<Tensor> {
    match a.data {
        ArrayData::F32(_) | ArrayData::F64(_) => a.to_tensor(),
        _ => a.to_float_tensor(Kind::Double),
    }
}

/// The published pickle of one split: `{dir}/{name}_1100_{split}.pkl`.
pub fn gnot_pkl_path(dir: &Path, name: &str, split: &str) -> PathBuf {
    dir.join(format!("{name}_1100_{split}.pkl"))
}

/// A converted file of one split: `{dir}/{name}_1100_{split}.npz`.
pub fn gnot_npz_path(dir: &Path, name: &str, split: &str) -> PathBuf {
    gnot_pkl_path(dir, name, split).with_extension("npz")
}

/// The train and test splits of GNOT dataset `name` (one of [`GNOT_DATASETS`]) from `dir`: the
/// published `{name}_1100_{train,test}.pkl`, or where a split has no pickle, its converted .npz.
/// A split with neither is an [`Error::Io`] that names the pickle, the dataset and where the
/// pickles are published. The two splits must agree on every column count.
pub fn load_gnot(dir: &Path, name: &str) -> Result<(PointCloudSplit, PointCloudSplit)> {
    if !GNOT_DATASETS.contains(&name) {
        return Err(Error::Config {
            what: "GNOT dataset".into(),
            msg: format!(
                "`{name}` is not one of {GNOT_DATASETS:?} (the MIO datasets GNOT's get_dataset \
                 reads)"
            ),
        });
    }
    let read = |split: &str| -> Result<PointCloudSplit> {
        let pkl = gnot_pkl_path(dir, name, split);
        let npz = gnot_npz_path(dir, name, split);
        if pkl.is_file() {
            return read_gnot_pickle(&pkl);
        }
        if npz.is_file() {
            return read_gnot_npz(&npz);
        }
        let msg = format!(
            "GNOT dataset `{name}` ({split} split) not found: download {name}_1100_{split}.pkl \
             from the GNOT datasets linked in the GNOT repository README (HaoZhongkai/GNOT), \
             {GNOT_DATA_URL}, into {}",
            dir.display()
        );
        Err(Error::Io {
            path: pkl,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, msg),
        })
    };
    let train = read("train")?;
    let test = read("test")?;
    let (a, b) = (train.dims()?, test.dims()?);
    if a != b {
        return Err(Error::Invalid(format!(
            "GNOT dataset `{name}`: train and test disagree on columns: {a:?} / {b:?}"
        )));
    }
    Ok((train, test))
}
