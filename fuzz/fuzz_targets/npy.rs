//! Any bytes given to the `.npy` reader must give `Ok` or `Err`: no panic, no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ono_data::readers::npy::parse_npy(data);
});
