//! VTK meshes as samples: one file a sample, its point (or cell) arrays the fields, its points
//! (or cell centres) the positions, on the axes that vary over the meshes.

use std::path::PathBuf;

use super::{
    choose, finite, interleave, list, Association, Coords, Field, ImportOptions, Parts, RawSample,
    SampleAxis, SampleRef,
};
use crate::readers::vtk::{self, Mesh, MeshArray};
use crate::{Error, Result};

/// The samples of the meshes in `files` and what they agree on.
pub(super) fn from_meshes(
    files: &[PathBuf],
    o: &ImportOptions,
    inferred: &mut Vec<String>,
) -> Result<(Vec<RawSample>, Parts)> {
    if o.samples == Some(SampleAxis::Leading) {
        return Err(Error::Config {
            what: "samples".into(),
            msg: "a VTK file is one sample; samples along a first axis are for array files".into(),
        });
    }
    let meshes: Vec<Mesh> = files
        .iter()
        .map(|f| vtk::read_mesh(f))
        .collect::<Result<_>>()?;
    let first = &meshes[0];
    let association = association(first, o, inferred);
    let what = format!("{} arrays", association.name());
    let coords_array = o.coords.as_deref().filter(|c| *c != "points");
    let on = On { association };
    let (inputs, targets) = choose(&on.names(first), o, coords_array, inferred, &what)?;
    let fields = |names: &[String]| -> Result<Vec<Field>> {
        names
            .iter()
            .map(|n| {
                Ok(Field {
                    name: n.clone(),
                    components: on.array(first, n)?.components,
                })
            })
            .collect()
    };
    let parts = Parts {
        association,
        inputs: fields(&inputs)?,
        targets: fields(&targets)?,
        coords: coordinates(&meshes, on, coords_array)?,
        grid: None,
    };
    let mut dims: Option<usize> = None;
    let raw = meshes
        .iter()
        .map(|m| on.sample(m, first, &parts, &mut dims))
        .collect::<Result<_>>()?;
    Ok((raw, parts))
}

/// Point or cell data: as asked, else where the named arrays are (cells when every one is a
/// cell array only), else points unless the first mesh has only cell data; said when inferred.
fn association(first: &Mesh, o: &ImportOptions, inferred: &mut Vec<String>) -> Association {
    if let Some(a) = o.association {
        return a;
    }
    let named: Vec<&String> = o.inputs.iter().chain(&o.targets).flatten().collect();
    let in_cells = |n: &&String| first.cell_array(n).is_some() && first.point_array(n).is_none();
    let a = if (!named.is_empty() && named.iter().all(in_cells))
        || (named.is_empty() && first.point_data.is_empty() && !first.cell_data.is_empty())
    {
        Association::Cell
    } else {
        Association::Point
    };
    inferred.push(format!(
        "{} data (pass --cell-data or --point-data to choose)",
        a.name()
    ));
    a
}

/// The coordinates: the array the user named, else the mesh's points (or cell centres) on the
/// axes that vary over any sample (a planar mesh written with z = 0 has two).
fn coordinates(meshes: &[Mesh], on: On, coords_array: Option<&str>) -> Result<Coords> {
    if let Some(name) = coords_array {
        return Ok(Coords::Array {
            name: name.to_string(),
        });
    }
    let mut axes: Vec<usize> = Vec::new();
    for m in meshes {
        let loc = on.location(m);
        for a in 0..3 {
            let mut it = loc.iter().skip(a).step_by(3);
            let v0 = it.next().copied().unwrap_or(0.0);
            if !axes.contains(&a) && it.any(|&v| v != v0) {
                axes.push(a);
            }
        }
    }
    axes.sort_unstable();
    if axes.is_empty() {
        return Err(Error::Format {
            path: meshes[0].path.clone(),
            msg: format!("all its {}s are at one place", on.association.name()),
        });
    }
    Ok(match on.association {
        Association::Point => Coords::MeshPoints { axes },
        Association::Cell => Coords::CellCentres { axes },
    })
}

/// Reading a mesh's point or cell data.
#[derive(Clone, Copy)]
struct On {
    association: Association,
}

impl On {
    /// The names of `m`'s arrays of this association.
    fn names(self, m: &Mesh) -> Vec<String> {
        match self.association {
            Association::Point => m.point_data.iter().map(|a| a.name.clone()).collect(),
            Association::Cell => m.cell_data.iter().map(|a| a.name.clone()).collect(),
        }
    }

    /// `m`'s array `name`, or an error listing the arrays it has.
    fn array(self, m: &Mesh, name: &str) -> Result<MeshArray> {
        let found = match self.association {
            Association::Point => m.point_array(name),
            Association::Cell => m.cell_array(name),
        };
        found.cloned().ok_or_else(|| Error::Format {
            path: m.path.clone(),
            msg: format!(
                "no {0} array `{name}` (its {0} arrays: {1})",
                self.association.name(),
                list(&self.names(m))
            ),
        })
    }

    /// `m`'s points or cell centres, (n, 3) row-major.
    fn location(self, m: &Mesh) -> Vec<f64> {
        match self.association {
            Association::Point => m.points.clone(),
            Association::Cell => m.cell_centres.clone(),
        }
    }

    /// Mesh `m` as a sample: its fields side by side per point, each with the components the
    /// first mesh gave it and finite, and its positions. `dims`: the coordinate array's
    /// components, set by the first mesh that has it.
    fn sample(
        self,
        m: &Mesh,
        first: &Mesh,
        parts: &Parts,
        dims: &mut Option<usize>,
    ) -> Result<RawSample> {
        let name = self.association.name();
        let n = match self.association {
            Association::Point => m.num_points(),
            Association::Cell => m.cells,
        };
        if n == 0 {
            return Err(Error::Format {
                path: m.path.clone(),
                msg: format!("the mesh has no {name}s"),
            });
        }
        let gather = |fields: &[Field]| -> Result<Vec<f64>> {
            let arrays: Vec<MeshArray> = fields
                .iter()
                .map(|f| {
                    let a = self.array(m, &f.name)?;
                    if a.components != f.components {
                        return Err(Error::Format {
                            path: m.path.clone(),
                            msg: format!(
                                "{name} array `{}` has {} components, {} has {}",
                                f.name,
                                a.components,
                                first.path.display(),
                                f.components
                            ),
                        });
                    }
                    finite(
                        &m.path,
                        &format!("{name} array"),
                        &a.name,
                        &a.values,
                        (a.components, name),
                    )?;
                    Ok(a)
                })
                .collect::<Result<_>>()?;
            let columns: Vec<(&[f64], usize)> = arrays
                .iter()
                .map(|a| (&a.values[..], a.components))
                .collect();
            Ok(interleave(&columns, n))
        };
        let pos = match &parts.coords {
            Coords::Array { name: c } => {
                let a = self.array(m, c)?;
                finite(&m.path, "coordinates", c, &a.values, (a.components, name))?;
                if *dims.get_or_insert(a.components) != a.components {
                    return Err(Error::Format {
                        path: m.path.clone(),
                        msg: format!(
                            "coordinates `{c}` have {} components, {} has {}",
                            a.components,
                            first.path.display(),
                            dims.unwrap_or(0)
                        ),
                    });
                }
                a.values
            }
            Coords::MeshPoints { axes } | Coords::CellCentres { axes } => {
                let loc = self.location(m);
                finite(&m.path, "coordinates", "points", &loc, (3, name))?;
                loc.chunks(3)
                    .flat_map(|p| axes.iter().map(move |&a| p[a]))
                    .collect()
            }
            Coords::UnitGrid => {
                return Err(Error::Invalid(
                    "meshes have coordinates: a unit grid is for arrays".into(),
                ))
            }
        };
        Ok(RawSample {
            source: SampleRef {
                file: m.path.clone(),
                index: None,
                points: n,
            },
            pos,
            fx: gather(&parts.inputs)?,
            y: gather(&parts.targets)?,
        })
    }
}
