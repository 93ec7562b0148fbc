//! Nested-loop theta joins (under construction).
