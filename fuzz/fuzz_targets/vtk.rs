//! Any bytes given to the VTK reader, parsed as a serial XML file (`.vtu`, `.vtp`) and as a
//! legacy file (`.vtk`), must give `Ok` or `Err`: no panic (vtkio's included: the panic hook of
//! libFuzzer aborts on one even where `read_mesh` would catch it), no unbounded allocation.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ono_data::readers::vtk::{parse_mesh, MeshFormat};

fuzz_target!(|data: &[u8]| {
    for format in [MeshFormat::Xml, MeshFormat::Legacy] {
        let _ = parse_mesh(data, format, Path::new("fuzz"));
    }
});
