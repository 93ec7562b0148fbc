//! Indexed nested-loop join (issue 5, seed 003 algorithm 2): a sorted index over one relation's
//! key column, probed by binary search from the other; integer, floating-point and string keys.
//!
//! (Under construction.)
