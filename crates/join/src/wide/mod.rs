//! Wide relational joins (issue 4, seed 002): relations of key and payload columns joined by
//! SMJ-UM/OM, PHJ-UM/OM or the non-partitioned hash join, chosen by `Algorithm::Auto`; join
//! sequences over a fact table and several dimension tables.
//!
//! (Under construction.)
