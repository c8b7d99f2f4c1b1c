//! MATLAB v5 MAT-files (in progress).
