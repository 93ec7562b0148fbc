//! Sort-based theta joins for a single inequality or a band (under construction).
