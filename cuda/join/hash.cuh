// Hash-join kernels, shared declarations (seed 002, "Efficiently Processing Large Relational Joins on GPUs").
//
// Partitioned hash join: the keys of both sides are stably radix-partitioned elsewhere (CUB's
// one-sweep sort on the low partition bits); here the partition offsets are read off the
// partitioned keys, the co-partitions are cut into work items (a chunk of at most CAP build rows
// and a range of probe rows; oversized partitions become several items), and one block per item
// builds a shared-memory hash table on the build chunk and probes it with the probe rows. The
// match runs twice: a count pass (pairs per item, match flags) and, after an exclusive scan of
// the item counts, a write pass that writes each item's pairs at its offset. Nothing decides an
// output position by an atomic, so the output is the same on every run.
//
// The shared-memory table holds the distinct keys of the chunk: slot word = owner (chunk index
// + 1 of the row that claimed the slot, 16 bits) | count of rows with that key (15 bits) << 16 |
// a "matched" bit. When the chunk has no duplicate key, the owner is the only row of its key.
// Otherwise the write pass groups the chunk's rows by slot in chunk order (a scan of the slot
// counts, then one warp walks the rows in order), so that the matches of a probe row come in
// build partition order.
//
// Non-partitioned hash join: first the unique-build table (one slot a build row, claimed by
// compare-and-swap on the key; a key met twice raises a flag; for dense keys a direct-address
// table, slot = key - min), probed once a probe row, the hits compacted in probe order. When a
// build key repeats, the sorted path: the build side sorted by key; every run of equal keys goes
// into one global open-addressing table (key, first sorted position, count); probe rows look
// their key up, and the pairs are expanded by load-balancing search.
//
// The kernels live in one file per phase: hash_prepare.cu (key mixing), hash_partition.cu
// (partition offsets, work items, chunked stable partition), hash_match.cu (the partitioned
// join's shared-memory build and probe: count, write and one-pass passes), hash_global.cu (the
// non-partitioned join: global table build, probe, expansion), hash_direct.cu (its direct-address
// table for dense unique build keys) and auto_sampler.cu (the sampled match ratio of
// Algorithm::Auto).
#pragma once
#include "gpujoin/launch.cuh"
#include "gpujoin/lbs.cuh"
#include "gpujoin_hash.h"

namespace gj {
namespace hash {

constexpr uint32_t FULL = 0xffffffffu;

inline int grid(int64_t n) { return blocks_for_sms(n, 256 * 4, tuning::kStreamBlocksPerSm); }

constexpr uint32_t CAP = 2048;  // build rows per chunk
constexpr int SLOTS = 4096;     // shared-memory table slots (power of two, >= 2 * CAP)

}  // namespace hash
}  // namespace gj
