// Launch configuration shared by gpujoin's kernels (C++ only; not part of the C ABI).
//
// As in CUB, tuning is data, not constants sprinkled through the launches: a grid cap is the
// current device's multiprocessor count (read once per device) times a named number of blocks per
// SM. The values below were tuned on the H100 (132 SMs); other GPUs get the same per-SM
// occupancy instead of the H100's absolute block counts.
#pragma once
#include <atomic>
#include <cstdint>
#include <cuda_runtime.h>

#include "gpujoin/common.cuh"

namespace gj {

// Blocks per SM of the grid caps (grid-stride kernels loop over whatever the cap leaves).
namespace tuning {
// Element-wise grid-stride kernels (256 threads, about 4 items a thread).
constexpr int kStreamBlocksPerSm = 32;
// Kernels over tiles or rows with heavier per-item work (theta rows, expansion tiles, scans,
// gathers of the primitives).
constexpr int kTileBlocksPerSm = 16;
// The radix partition's histogram (each block counts with shared counters).
constexpr int kHistogramBlocksPerSm = 4;
}  // namespace tuning

// Used only when the device cannot be asked (the launch that follows fails and reports it).
constexpr int kFallbackSmCount = 132;
constexpr int kMaxCachedDevices = 64;

// The multiprocessor count of the current device, read with cudaDeviceGetAttribute once per
// device id and cached (threads racing on a first read store the same value).
inline int sm_count() {
  static std::atomic<int> cache[kMaxCachedDevices];  // 0: not read yet
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return kFallbackSmCount;
  const bool cached = dev >= 0 && dev < kMaxCachedDevices;
  if (cached) {
    const int v = cache[dev].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
    return kFallbackSmCount;
  if (cached) cache[dev].store(sms, std::memory_order_relaxed);
  return sms;
}

// The grid cap for `blocks_per_sm` resident blocks on every SM of the current device.
inline int grid_cap(int blocks_per_sm) { return sm_count() * blocks_per_sm; }

// blocks_for with the cap of `blocks_per_sm` blocks per SM of the current device.
inline int blocks_for_sms(int64_t n, int per_block, int blocks_per_sm) {
  return blocks_for(n, per_block, grid_cap(blocks_per_sm));
}

}  // namespace gj
