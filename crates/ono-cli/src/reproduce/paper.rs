//! The ONO paper's published numbers (relative L2 errors), the values the report sets ours beside.
//!
//! Sources: arXiv 2310.12487v1, Tables 1–6 (the only version whose tables are readable as text;
//! docs/reference-implementations.md#ono-paper-versus-code), numbered here as in the published
//! version (v4): 1 main results, 3 super-resolution, 4 NS2d time steps, 5 NN blocks, 6
//! orthogonalization, 7 depth. The Transolver row is Transolver's own Table 1 (the image in
//! thuml/Transolver), the extra row. Tables 2 (runtime) and 8 (parameters and memory)
//! could not be read from any version available to us: they have no paper column.

use ono_models::NnBlock;
use ono_nn::orthogonal::Orthogonalization;

/// Table 1's columns, in the paper's order.
pub const TABLE1_COLUMNS: [&str; 6] = [
    "NS2d",
    "Airfoil",
    "Pipe",
    "Darcy",
    "Elasticity",
    "Plasticity",
];

/// Table 1, row by model key; `None` is the paper's "–" (the model cannot handle the benchmark).
pub fn table1(model: &str) -> [Option<f64>; 6] {
    match model {
        "fno" => [Some(0.1556), None, None, Some(0.0108), None, None],
        "galerkin" => [Some(0.1401), None, None, Some(0.0084), None, None],
        "geofno" => [
            Some(0.1556),
            Some(0.0138),
            Some(0.0067),
            Some(0.0108),
            Some(0.0229),
            Some(0.0074),
        ],
        "ufno" => [
            Some(0.2182),
            Some(0.0137),
            Some(0.0050),
            Some(0.0266),
            Some(0.0226),
            Some(0.0028),
        ],
        "ffno" => [
            Some(0.1213),
            Some(0.0079),
            Some(0.0063),
            Some(0.0318),
            Some(0.0316),
            Some(0.0048),
        ],
        "lsm" => [
            Some(0.1693),
            Some(0.0062),
            Some(0.0049),
            Some(0.0069),
            Some(0.0225),
            Some(0.0035),
        ],
        "gnot" => [
            Some(0.1380),
            Some(0.0076),
            None,
            Some(0.0105),
            Some(0.0086),
            None,
        ],
        "ono" => [
            Some(0.1195),
            Some(0.0056),
            Some(0.0034),
            Some(0.0076),
            Some(0.0118),
            Some(0.0048),
        ],
        "transolver" => [
            Some(0.0900),
            Some(0.0053),
            Some(0.0033),
            Some(0.0057),
            Some(0.0064),
            Some(0.0012),
        ],
        _ => [None; 6],
    }
}

/// Table 3: the resolutions and (FNO, ONO) errors, trained at 43 × 43.
pub const TABLE3: [(i64, f64, f64); 5] = [
    (61, 0.1164, 0.0204),
    (85, 0.1797, 0.0259),
    (141, 0.2679, 0.0315),
    (211, 0.3160, 0.0349),
    (421, 0.3631, 0.0386),
];

/// Table 4: (seen, unseen) for FNO and ONO.
pub const TABLE4_FNO: (f64, f64) = (0.0982, 0.2446);
pub const TABLE4_ONO: (f64, f64) = (0.0889, 0.2143);

/// Tables 5 and 6's columns.
pub const ABLATION_COLUMNS: [&str; 3] = ["Airfoil", "Elasticity", "Pipe"];

/// Table 5: (row label, ONO `nn_block`, Airfoil, Elasticity, Pipe).
pub const TABLE5: [(&str, NnBlock, [f64; 3]); 3] = [
    (
        "Linear",
        NnBlock::LinearTransformer,
        [0.0079, 0.0137, 0.0060],
    ),
    ("Nyström", NnBlock::Nystrom, [0.0056, 0.0118, 0.0034]),
    ("Galerkin", NnBlock::Galerkin, [0.0122, 0.0133, 0.0075]),
];

/// Table 6: (row label, ONO `orthogonalization`, Airfoil, Elasticity, Pipe); the paper has no
/// "none" row.
pub const TABLE6: [(&str, Orthogonalization, Option<[f64; 3]>); 4] = [
    (
        "BN",
        Orthogonalization::BatchNorm,
        Some([0.0808, 0.0149, 0.2151]),
    ),
    (
        "LN",
        Orthogonalization::LayerNorm,
        Some([0.0288, 0.2579, 0.0056]),
    ),
    ("none", Orthogonalization::None, None),
    (
        "Ortho",
        Orthogonalization::Orthonormal,
        Some([0.0056, 0.0118, 0.0034]),
    ),
];

/// Table 7: (row, layers, Elasticity, Plasticity).
pub const TABLE7: [(&str, usize, [f64; 2]); 2] = [
    ("ONO-8", 8, [0.0118, 0.0048]),
    ("ONO-30", 30, [0.0047, 0.0013]),
];
