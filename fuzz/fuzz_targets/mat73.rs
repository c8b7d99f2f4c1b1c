//! Any bytes given to the MAT v7.3 / HDF5 reader must give `Ok` or `Err`: no panic, no unbounded
//! allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ono_data::readers::hdf5_mat::parse_mat73(data.to_vec(), None);
    // Plain HDF5 order, and the by-name path: refusing non-numeric variables, naming missing ones.
    let _ = ono_data::readers::hdf5_mat::parse_hdf5(data.to_vec(), Some(&["coeff", "x"]));
});
