// Assembling the parts a GPU receives into one column: bitmaps (validity, booleans) placed at
// any bit position, string offsets rebased onto the concatenated bytes.
#include "multi.cuh"

namespace {
using namespace gj;
using namespace gj::multi;

// One thread per destination word the bits touch: it gathers its up to 32 bits and ORs them in
// (words at the two ends may be shared with the neighbouring parts, hence the atomic OR).
__global__ void copy_bits_kernel(const uint8_t *src, int64_t src_bit, int64_t n, uint32_t *dst, int64_t dst_bit) {
  const int64_t first = dst_bit / 32;
  const int64_t last = (dst_bit + n - 1) / 32;
  GJ_M_GRID_STRIDE(k, last - first + 1) {
    const int64_t w = first + k;
    uint32_t v = 0;
    for (int b = 0; b < 32; ++b) {
      const int64_t d = w * 32 + b;  // destination bit
      if (d < dst_bit || d >= dst_bit + n) continue;
      const int64_t s = src_bit + (d - dst_bit);
      const bool set = src == nullptr || ((src[s >> 3] >> (s & 7)) & 1);
      v |= (uint32_t)set << b;
    }
    if (v) atomicOr(&dst[w], v);
  }
}

template <class T>
__global__ void rebase_kernel(const T *src, int64_t count, int64_t base, T *dst) {
  GJ_M_GRID_STRIDE(i, count) { dst[i] = (T)((int64_t)src[i] - (int64_t)src[0] + base); }
}

}  // namespace

extern "C" int gj_m_copy_bits(const uint8_t *src, int64_t src_bit, int64_t n, uint32_t *dst, int64_t dst_bit,
                              gj_m_stream_t stream) {
  if (n <= 0) return 0;
  const int64_t words = (dst_bit + n - 1) / 32 - dst_bit / 32 + 1;
  copy_bits_kernel<<<grid(words), NT, 0, cs(stream)>>>(src, src_bit, n, dst, dst_bit);
  return launch_status();
}

extern "C" int gj_m_rebase_offsets(const void *src, int width, int64_t count, int64_t base, void *dst,
                                   gj_m_stream_t stream) {
  if (count <= 0) return 0;
  if (width == 4) {
    rebase_kernel<<<grid(count), NT, 0, cs(stream)>>>((const int32_t *)src, count, base, (int32_t *)dst);
  } else if (width == 8) {
    rebase_kernel<<<grid(count), NT, 0, cs(stream)>>>((const int64_t *)src, count, base, (int64_t *)dst);
  } else {
    return (int)cudaErrorInvalidValue;
  }
  return launch_status();
}
