// DeviceRadixSort::SortPairs for 8-byte keys.
#include <cub/device/device_radix_sort.cuh>
#include "common.cuh"
#include "sort_impl.cuh"
GJ_DEF_SORT_PAIRS(u64, uint64_t, u32, uint32_t)
GJ_DEF_SORT_PAIRS(u64, uint64_t, u64, uint64_t)
GJ_DEF_SORT_PAIRS(i64, int64_t, u32, uint32_t)
GJ_DEF_SORT_PAIRS(i64, int64_t, u64, uint64_t)
GJ_DEF_SORT_PAIRS(f64, double, u32, uint32_t)
GJ_DEF_SORT_PAIRS(f64, double, u64, uint64_t)
GJ_DEF_SORT_PAIRS_DB(u64, uint64_t, u32, uint32_t)
