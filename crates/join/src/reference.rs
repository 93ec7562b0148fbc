//! CPU reference joins (being written).
