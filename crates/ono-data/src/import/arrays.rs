//! Array files as samples: one sample per file, or every sample along the first axis of every
//! array; the fields on the points of the coordinates the user names (or finds), or on the
//! arrays' own grid on [0, 1].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{
    choose, finite, interleave, Association, Coords, Field, ImportOptions, Parts, RawSample,
    SampleAxis, SampleRef, COORD_NAMES,
};
use crate::array::NamedArray;
use crate::{Error, Result};

/// Sample s's positions of one array file.
type PositionsOf = Box<dyn Fn(usize) -> Result<Vec<f64>>>;

/// The samples of the array files `files` and what they agree on.
pub(super) fn from_arrays(
    files: &[PathBuf],
    o: &ImportOptions,
    inferred: &mut Vec<String>,
) -> Result<(Vec<RawSample>, Parts)> {
    if o.association == Some(Association::Cell) {
        return Err(Error::Config {
            what: "cell data".into(),
            msg: "array files have no cells; cell data are for VTK meshes".into(),
        });
    }
    let axis = sample_axis(files, o, inferred);
    // The names come from the first file.
    let first = read(&files[0], None)?;
    let available: Vec<String> = first.iter().map(|a| a.name.clone()).collect();
    let coords_name = coords_name(&available, o, inferred);
    let (inputs, targets) = choose(&available, o, coords_name.as_deref(), inferred, "arrays")?;
    let names = Names {
        inputs: &inputs,
        targets: &targets,
        coords: coords_name.as_deref(),
    };
    let mut raw = Vec::new();
    let mut parts: Option<Parts> = None;
    for f in files {
        let file = ArrayFile::read(f, axis, names)?;
        let (spatial, pos_of) = file.positions(names)?;
        let in_fields = file.fields(&inputs, &spatial, names.coords.is_some())?;
        let out_fields = file.fields(&targets, &spatial, names.coords.is_some())?;
        let points: usize = spatial.iter().product();
        if points == 0 {
            return Err(Error::Format {
                path: f.clone(),
                msg: format!("array `{}` has no points", targets[0]),
            });
        }
        match &parts {
            None => {
                parts = Some(Parts {
                    association: Association::Point,
                    inputs: in_fields.clone(),
                    targets: out_fields.clone(),
                    coords: match names.coords {
                        Some(c) => Coords::Array { name: c.into() },
                        None => Coords::UnitGrid,
                    },
                    grid: names.coords.is_none().then(|| spatial.clone()),
                })
            }
            Some(p) => agrees(p, f, &files[0], (&in_fields, &out_fields), &spatial)?,
        }
        raw.extend(file.samples((&in_fields, &out_fields), points, &pos_of)?);
    }
    let parts = parts.ok_or_else(|| Error::Invalid("no array files to import".into()))?;
    let d = raw[0].pos.len() / raw[0].source.points;
    if let Some(r) = raw.iter().find(|r| r.pos.len() / r.source.points != d) {
        return Err(Error::Format {
            path: r.source.file.clone(),
            msg: format!(
                "coordinates of {} axes, {} has {d}",
                r.pos.len() / r.source.points,
                files[0].display()
            ),
        });
    }
    Ok((raw, parts))
}

/// Where the samples are: as asked, else one per file for several files and along the first
/// axis for one; said when inferred.
fn sample_axis(files: &[PathBuf], o: &ImportOptions, inferred: &mut Vec<String>) -> SampleAxis {
    o.samples.unwrap_or_else(|| {
        let a = if files.len() > 1 {
            SampleAxis::PerFile
        } else {
            SampleAxis::Leading
        };
        inferred.push(match a {
            SampleAxis::PerFile => "one sample per file (pass --samples leading for samples along the first axis)".into(),
            SampleAxis::Leading => "samples along the first axis of every array (pass --samples per-file for one sample per file)".into(),
        });
        a
    })
}

/// The coordinates' array: as asked, else the first of [`COORD_NAMES`] the file has, else none
/// (the arrays' own grid); said when inferred.
fn coords_name(
    available: &[String],
    o: &ImportOptions,
    inferred: &mut Vec<String>,
) -> Option<String> {
    if let Some(c) = &o.coords {
        return Some(c.clone());
    }
    let found = COORD_NAMES
        .iter()
        .find(|c| available.iter().any(|a| a == *c))
        .map(|c| c.to_string());
    inferred.push(match &found {
        Some(c) => format!("coordinates: `{c}` (pass --coords to choose)"),
        None => format!(
            "coordinates: none (no array named {}): the arrays' own grid on [0, 1]",
            COORD_NAMES.join(", ")
        ),
    });
    found
}

/// The arrays of `f` (those `names`, or all), refusing a file that holds none.
fn read(f: &Path, names: Option<&[&str]>) -> Result<Vec<NamedArray>> {
    let arrays = crate::readers::read_any(f, names)?;
    if arrays.is_empty() {
        return Err(Error::Format {
            path: f.to_path_buf(),
            msg: "holds no arrays".into(),
        });
    }
    Ok(arrays)
}

/// Checks that file `f`'s fields and grid are those of the first file.
fn agrees(
    p: &Parts,
    f: &Path,
    first: &Path,
    (inputs, targets): (&[Field], &[Field]),
    spatial: &[usize],
) -> Result<()> {
    let mismatch = |what: String| Error::Format {
        path: f.to_path_buf(),
        msg: format!("{what} ({} has otherwise)", first.display()),
    };
    for (a, b) in p
        .inputs
        .iter()
        .chain(&p.targets)
        .zip(inputs.iter().chain(targets))
    {
        if a != b {
            return Err(mismatch(format!(
                "array `{}` has {} components",
                b.name, b.components
            )));
        }
    }
    if let Some(g) = &p.grid {
        if g != spatial {
            return Err(mismatch(format!(
                "its arrays are on a grid {spatial:?}, not {g:?}"
            )));
        }
    }
    Ok(())
}

/// The arrays an import reads.
#[derive(Clone, Copy)]
struct Names<'a> {
    inputs: &'a [String],
    targets: &'a [String],
    coords: Option<&'a str>,
}

impl Names<'_> {
    fn fields(&self) -> impl Iterator<Item = &String> {
        self.inputs.iter().chain(self.targets)
    }
}

/// One array file: its arrays, how many samples it holds, and each field's values as float64,
/// checked finite once.
struct ArrayFile<'a> {
    path: &'a PathBuf,
    arrays: Vec<NamedArray>,
    axis: SampleAxis,
    count: usize,
    values: HashMap<String, Vec<f64>>,
}

impl<'a> ArrayFile<'a> {
    fn read(path: &'a PathBuf, axis: SampleAxis, names: Names<'_>) -> Result<Self> {
        let mut wanted: Vec<&str> = names.fields().map(String::as_str).collect();
        wanted.extend(names.coords);
        let arrays = read(path, Some(&wanted))?;
        let mut file = ArrayFile {
            path,
            arrays,
            axis,
            count: 1,
            values: HashMap::new(),
        };
        let target = &names.targets[0];
        if axis == SampleAxis::Leading {
            let s = file.get(target)?.shape.first().copied().unwrap_or(0);
            for n in names.fields() {
                let a = file.get(n)?;
                if a.shape.first().copied() != Some(s) {
                    return Err(Error::Format {
                        path: path.clone(),
                        msg: format!(
                            "array `{n}` {:?} does not have the {s} samples of `{target}` along its first axis",
                            a.shape
                        ),
                    });
                }
            }
            file.count = s;
        }
        if file.count == 0 {
            return Err(Error::Format {
                path: path.clone(),
                msg: format!("array `{target}` holds no samples"),
            });
        }
        for n in names.fields() {
            let v = file.get(n)?.data.to_f64();
            finite(path, "array", n, &v, (1, "element"))?;
            file.values.insert(n.clone(), v);
        }
        Ok(file)
    }

    /// Array `name` (the reader returns every name asked for).
    fn get(&self, name: &str) -> Result<&NamedArray> {
        self.arrays
            .iter()
            .find(|a| a.name == name)
            .ok_or_else(|| Error::Format {
                path: self.path.clone(),
                msg: format!("no array `{name}`"),
            })
    }

    /// An array's shape per sample.
    fn per_sample(&self, a: &NamedArray) -> Vec<usize> {
        match self.axis {
            SampleAxis::PerFile => a.shape.clone(),
            SampleAxis::Leading => a.shape[1..].to_vec(),
        }
    }

    /// The fields `names` on the points `spatial`: one component where an array is `spatial`
    /// per sample, C where it is `spatial` + (C,).
    fn fields(&self, names: &[String], spatial: &[usize], coords: bool) -> Result<Vec<Field>> {
        names
            .iter()
            .map(|n| {
                let s = self.per_sample(self.get(n)?);
                let c = if s == spatial {
                    1
                } else if s.len() == spatial.len() + 1 && s[..spatial.len()] == *spatial {
                    s[spatial.len()]
                } else {
                    let want = if coords {
                        format!(
                            "({}) or ({}, C), the points of the coordinates",
                            spatial[0], spatial[0]
                        )
                    } else {
                        format!("{spatial:?} or {spatial:?} + (C,), the grid of the other arrays")
                    };
                    return Err(Error::Format {
                        path: self.path.clone(),
                        msg: format!("array `{n}` is {s:?} per sample, not {want}"),
                    });
                };
                Ok(Field {
                    name: n.clone(),
                    components: c,
                })
            })
            .collect()
    }

    /// The points' shape and each sample's positions: the coordinates' (N, d), shared or one
    /// per sample, or the fields' own grid (the smallest per-sample shape among them) on
    /// [0, 1].
    fn positions(&self, names: Names<'_>) -> Result<(Vec<usize>, PositionsOf)> {
        let Some(c) = names.coords else {
            let spatial = names
                .fields()
                .map(|n| self.get(n).map(|a| self.per_sample(a)))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .min_by_key(|s| s.len())
                .unwrap_or_default();
            if spatial.is_empty() || spatial.len() > 3 {
                return Err(Error::Format {
                    path: self.path.clone(),
                    msg: format!(
                        "arrays of {spatial:?} per sample are not a grid of 1 to 3 axes (name the coordinates with --coords for a point cloud)"
                    ),
                });
            }
            let pos = unit_grid(&spatial);
            return Ok((spatial, Box::new(move |_| Ok(pos.clone()))));
        };
        let a = self.get(c)?;
        let values = a.data.to_f64();
        finite(self.path, "coordinates", c, &values, (1, "element"))?;
        let (shared, n, d) = match (self.axis, a.shape.as_slice()) {
            (_, [n, d]) => (true, *n, *d),
            (SampleAxis::Leading, [s, n, d]) if *s == self.count => (false, *n, *d),
            (_, [n]) => (true, *n, 1),
            _ => {
                return Err(Error::Format {
                    path: self.path.clone(),
                    msg: format!(
                        "coordinates `{c}` are {:?}, not (N, d){}",
                        a.shape,
                        if self.axis == SampleAxis::Leading {
                            " or (S, N, d)"
                        } else {
                            ""
                        }
                    ),
                })
            }
        };
        Ok((
            vec![n],
            Box::new(move |s| {
                Ok(if shared {
                    values.clone()
                } else {
                    values[s * n * d..(s + 1) * n * d].to_vec()
                })
            }),
        ))
    }

    /// The file's samples: each field's rows side by side per point, and the positions.
    fn samples(
        &self,
        (inputs, targets): (&[Field], &[Field]),
        points: usize,
        pos_of: &PositionsOf,
    ) -> Result<Vec<RawSample>> {
        (0..self.count)
            .map(|s| {
                let take = |fields: &[Field]| -> Vec<f64> {
                    let columns: Vec<(&[f64], usize)> = fields
                        .iter()
                        .map(|fl| {
                            let all = &self.values[&fl.name][..];
                            let k = points * fl.components;
                            let rows = match self.axis {
                                SampleAxis::PerFile => all,
                                SampleAxis::Leading => &all[s * k..(s + 1) * k],
                            };
                            (rows, fl.components)
                        })
                        .collect();
                    interleave(&columns, points)
                };
                let pos = pos_of(s)?;
                if pos.len() % points != 0 || pos.len() / points == 0 {
                    return Err(Error::Format {
                        path: self.path.clone(),
                        msg: "coordinates do not fit the points".into(),
                    });
                }
                Ok(RawSample {
                    source: SampleRef {
                        file: self.path.clone(),
                        index: (self.axis == SampleAxis::Leading).then_some(s),
                        points,
                    },
                    pos,
                    fx: take(inputs),
                    y: take(targets),
                })
            })
            .collect()
    }
}

/// Positions of a row-major grid of `shape` on [0, 1] per axis, in the convention of
/// [`crate::dataset::grid_positions_2d`]: channel c runs along grid axis d − 1 − c (x along the
/// columns), a single node at 0.
fn unit_grid(shape: &[usize]) -> Vec<f64> {
    let d = shape.len();
    let n: usize = shape.iter().product();
    let mut pos = Vec::with_capacity(n * d);
    for k in 0..n {
        let mut rem = k;
        let mut idx = vec![0usize; d];
        for a in (0..d).rev() {
            idx[a] = rem % shape[a];
            rem /= shape[a];
        }
        for c in 0..d {
            let a = d - 1 - c;
            let m = shape[a];
            pos.push(if m > 1 {
                idx[a] as f64 / (m - 1) as f64
            } else {
                0.0
            });
        }
    }
    pos
}
