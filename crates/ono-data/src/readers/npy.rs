//! .npy / .npz (in progress).
