//! Any bytes given to the MAT v5 reader must give `Ok` or `Err`: no panic, no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ono_data::readers::mat_v5::parse(data, None);
    let _ = ono_data::readers::mat_v5::list_bytes(data);
    // The by-name path: refusing non-numeric variables, naming missing ones.
    let _ = ono_data::readers::mat_v5::parse(data, Some(&["a", "x"]));
});
