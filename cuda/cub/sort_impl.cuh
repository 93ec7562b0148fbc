// Definitions behind GJ_DECL_SORT_PAIRS / GJ_DECL_SORT_KEYS.
#pragma once

#define GJ_DEF_SORT_PAIRS(KN, K, VN, V)                                                              \
  extern "C" int gj_cub_sort_pairs_##KN##_##VN(void *temp, size_t *temp_bytes, const K *keys_in,   \
                                                K *keys_out, const V *values_in, V *values_out,    \
                                                int64_t n, int begin_bit, int end_bit,             \
                                                int descending, gj_stream_t stream) {              \
    GJ_NOEXCEPT(if (descending) GJ_CALL(cub::DeviceRadixSort::SortPairsDescending(                 \
                    temp, *temp_bytes, keys_in, keys_out, values_in, values_out, n, begin_bit,    \
                    end_bit, GJ_STREAM(stream)));                                                  \
                GJ_CALL(cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, keys_in, keys_out,     \
                                                        values_in, values_out, n, begin_bit,      \
                                                        end_bit, GJ_STREAM(stream))))              \
  }

#define GJ_DEF_SORT_KEYS(KN, K)                                                                       \
  extern "C" int gj_cub_sort_keys_##KN(void *temp, size_t *temp_bytes, const K *keys_in,          \
                                       K *keys_out, int64_t n, int begin_bit, int end_bit,         \
                                       int descending, gj_stream_t stream) {                       \
    GJ_NOEXCEPT(if (descending) GJ_CALL(cub::DeviceRadixSort::SortKeysDescending(                  \
                    temp, *temp_bytes, keys_in, keys_out, n, begin_bit, end_bit, GJ_STREAM(stream))); \
                GJ_CALL(cub::DeviceRadixSort::SortKeys(temp, *temp_bytes, keys_in, keys_out, n,   \
                                                       begin_bit, end_bit, GJ_STREAM(stream))))    \
  }

// SortPairs over cub::DoubleBuffer: the inputs are one of two ping-pong buffers, so the only
// temporary storage is CUB's small bookkeeping; *selector (0 or 1) says which of the two holds the
// sorted keys and values afterwards.
#define GJ_DEF_SORT_PAIRS_DB(KN, K, VN, V)                                                              \
  extern "C" int gj_cub_sort_pairs_db_##KN##_##VN(void *temp, size_t *temp_bytes, K *keys, K *keys_alt, \
                                                   V *values, V *values_alt, int64_t n, int begin_bit,  \
                                                   int end_bit, int *selector, gj_stream_t stream) {    \
    GJ_NOEXCEPT(cub::DoubleBuffer<K> k(keys, keys_alt); cub::DoubleBuffer<V> v(values, values_alt);     \
                cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, k, v, n, begin_bit,  \
                                                                end_bit, GJ_STREAM(stream));            \
                *selector = k.selector; GJ_CALL(e))                                                     \
  }
