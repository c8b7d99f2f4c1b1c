//! GNOT's published numbers (Hao et al., "GNOT: A General Neural Operator Transformer for
//! Operator Learning", ICML 2023, arXiv 2302.14376; `shared/papers/gnot.md`): the cells of Tables
//! 1–3 whose data this project can make or read, the values the report sets ours beside. All
//! are the mean relative L2 error of the test set (the paper's eq. 13).

use ono_models::gnot::BlockOrder;

/// Table 1's columns this project has data for: (label, the ONO paper's benchmark it is).
/// NS2d is the "part" row (the FNO set as the ONO paper uses it); NACA is Geo-FNO's airfoil set.
pub const TABLE1_COLUMNS: [&str; 4] = ["Darcy2d", "NS2d (part)", "Elasticity", "NACA"];

/// Table 1's rows this project has models for, by `--models` name, with their numbers in
/// [`TABLE1_COLUMNS`]' order.
pub const TABLE1: [(&str, &str, [f64; 4]); 4] = [
    ("fno", "FNO(-interp)", [1.09e-2, 1.56e-1, 5.08e-2, 4.21e-2]),
    (
        "galerkin",
        "GK-Transformer",
        [8.40e-3, 1.40e-1, 2.01e-2, 1.61e-2],
    ),
    ("geofno", "Geo-FNO", [1.09e-2, 1.56e-1, 2.20e-2, 1.38e-2]),
    ("gnot", "GNOT (ours)", [1.05e-2, 1.38e-1, 8.65e-3, 7.57e-3]),
];

/// Table 1's rows of models this project does not port, for the report's note: MIONet and
/// OFormer, in [`TABLE1_COLUMNS`]' order (MIONet has no NS2d number).
pub const TABLE1_NOT_PORTED: [(&str, [Option<f64>; 4]); 2] = [
    (
        "MIONet",
        [Some(5.45e-2), None, Some(9.65e-2), Some(1.32e-1)],
    ),
    (
        "OFormer",
        [Some(1.24e-2), Some(1.71e-1), Some(1.83e-2), Some(1.83e-2)],
    ),
];

/// Table 2's columns this project has data for (NS2d-c's is left out: no data).
pub const TABLE2_COLUMNS: [&str; 2] = ["NACA", "Elasticity"];

/// Table 2: the order of a block's attentions (its label is the row's), in
/// [`TABLE2_COLUMNS`]' order.
pub const TABLE2: [(BlockOrder, [f64; 2]); 3] = [
    (BlockOrder::CrossCross, [3.52e-2, 3.31e-2]),
    (BlockOrder::SelfCross, [9.53e-3, 1.25e-2]),
    (BlockOrder::CrossSelf, [7.57e-3, 8.65e-3]),
];

/// Table 3 (on Heat): the number of experts with one attention head, and the number of heads
/// with one expert.
pub const TABLE3_EXPERTS: [(i64, f64); 4] =
    [(1, 0.04212), (3, 0.03695), (8, 0.04732), (16, 0.04628)];
pub const TABLE3_HEADS: [(i64, f64); 4] = [(1, 0.04131), (4, 0.04180), (8, 0.04068), (16, 0.03952)];
