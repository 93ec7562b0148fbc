// DeviceRadixSort::SortPairs for 4-byte keys.
#include <cub/device/device_radix_sort.cuh>
#include "common.cuh"
#include "sort_impl.cuh"
GJ_DEF_SORT_PAIRS(u32, uint32_t, u32, uint32_t)
GJ_DEF_SORT_PAIRS(u32, uint32_t, u64, uint64_t)
GJ_DEF_SORT_PAIRS(i32, int32_t, u32, uint32_t)
GJ_DEF_SORT_PAIRS(i32, int32_t, u64, uint64_t)
GJ_DEF_SORT_PAIRS(f32, float, u32, uint32_t)
GJ_DEF_SORT_PAIRS(f32, float, u64, uint64_t)
GJ_DEF_SORT_PAIRS_DB(u32, uint32_t, u32, uint32_t)
