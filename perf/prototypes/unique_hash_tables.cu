// Prototype (session 20, perf/NOTES.md): unique-build global hash tables for a maps-only
// equi-join of 64-bit keys, nb build rows (unique keys) and nb probe rows (30% matching), the
// table's clear, insert and probe timed by CUDA events (median of 7 after 2 warm-ups):
//   A  the table NPHJ had: 16-byte slots (key, row), linear probing, 2x capacity;
//   B  buckets of 8 four-byte slots (a build position and a tag of the hash; keys compared in
//      the build column on equal tags), at most 60% full -- what NPHJ took (hash_global.cu);
//   B2 the same at most 30% full;  C  8-byte slots (position, 32-bit tag), buckets of 4.
// Not part of the build: nvcc -O3 -arch=sm_90 -o proto unique_hash_tables.cu && ./proto
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(err_), __LINE__); exit(1); } } while (0)

__host__ __device__ __forceinline__ uint64_t fmix64(uint64_t k) {
  k ^= k >> 33; k *= 0xff51afd7ed558ccdull; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ull; k ^= k >> 33; return k;
}
__device__ __forceinline__ uint64_t ghash(uint64_t k) { return fmix64(k ^ 0x2545F4914F6CDD1Dull); }

__global__ void gen_build(uint64_t *k, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) k[i] = fmix64(2 * (uint64_t)i + 12345);
}
__global__ void gen_probe(uint64_t *k, int64_t n, int64_t nb, uint64_t *expect) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
    uint64_t h = fmix64((uint64_t)j * 0x9E3779B97F4A7C15ull + 7);
    bool m = (h % 10) < 3;
    uint64_t r = (h >> 8) % (uint64_t)nb;
    k[j] = m ? fmix64(2 * r + 12345) : fmix64(2 * ((uint64_t)nb + j) + 1 + 12345);
    if (m) atomicAdd((unsigned long long *)expect, 1ull);
  }
}

// ---- A: the current table: 16-byte slots (key, row), linear probing, 2x capacity.
struct __align__(16) Slot16 { unsigned long long key; uint32_t row, pad; };
__global__ void a_insert(const uint64_t *keys, int64_t n, Slot16 *t, uint64_t mask, uint32_t *flags) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t key = keys[i];
    uint64_t s = ghash(key) & mask;
    while (true) {
      unsigned long long prev = atomicCAS(&t[s].key, ~0ull, (unsigned long long)key);
      if (prev == ~0ull) { t[s].row = (uint32_t)i; break; }
      if (prev == key) { atomicOr(flags, 1u); break; }
      s = (s + 1) & mask;
    }
  }
}
__global__ void a_probe(const Slot16 *t, uint64_t mask, const uint64_t *probe, int64_t n, uint32_t *match, uint8_t *hit) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t key = probe[i];
    uint32_t m = 0; uint8_t h = 0;
    uint64_t s = ghash(key) & mask;
    while (true) {
      Slot16 e = t[s];
      if (e.key == ~0ull) break;
      if (e.key == key) { m = e.row; h = 1; break; }
      s = (s + 1) & mask;
    }
    match[i] = m; hit[i] = h;
  }
}

// ---- B: 4-byte slots (row in the low RB bits, a tag of the hash above), buckets of 8 slots
// (one 32-byte sector), linear probing over buckets. Equal tags compare the build key.
__device__ __forceinline__ uint32_t pack(uint32_t row, uint64_t h, int RB) { return row | ((uint32_t)(h >> 40) << RB); }
__global__ void b_insert(const uint64_t *keys, int64_t n, uint32_t *t, uint64_t bmask, uint32_t *flags, int RB) {
  const uint32_t RMASK = (1u << RB) - 1;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t key = keys[i];
    uint64_t h = ghash(key);
    uint32_t w = pack((uint32_t)i, h, RB);
    uint64_t b = (h & bmask);
    bool done = false;
    while (!done) {
      uint32_t *bk = t + b * 8;
      uint4 lo = __ldcg(reinterpret_cast<const uint4 *>(bk)), hi = __ldcg(reinterpret_cast<const uint4 *>(bk + 4));
      uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      int j = 0;
      while (j < 8) {
        if (v[j] == ~0u) {
          uint32_t prev = atomicCAS(bk + j, ~0u, w);
          if (prev == ~0u) { done = true; break; }
          v[j] = prev;  // re-examine the taken slot
          continue;
        }
        if ((v[j] >> RB) == (w >> RB) && keys[v[j] & RMASK] == key) { atomicOr(flags, 1u); done = true; break; }
        ++j;
      }
      b = (b + 1) & bmask;
    }
  }
}
__global__ void b_probe(const uint32_t *t, uint64_t bmask, const uint64_t *bkeys, const uint64_t *probe, int64_t n, uint32_t *match, uint8_t *hit, int RB) {
  const uint32_t RMASK = (1u << RB) - 1;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t key = probe[i];
    uint64_t h = ghash(key);
    const uint32_t tag = pack(0, h, RB) >> RB;
    uint64_t b = h & bmask;
    uint32_t m = 0; uint8_t hh = 0;
    while (true) {
      const uint4 *bk = reinterpret_cast<const uint4 *>(t + b * 8);
      uint4 lo = __ldg(bk), hi = __ldg(bk + 1);
      uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      bool empty = false, found = false;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (v[j] == ~0u) { empty = true; }
        else if (!found && (v[j] >> RB) == tag && bkeys[v[j] & RMASK] == key) { found = true; m = v[j] & RMASK; }
      }
      if (found) { hh = 1; break; }
      if (empty) break;
      b = (b + 1) & bmask;
    }
    match[i] = m; hit[i] = hh;
  }
}

// ---- C: 8-byte slots (row, tag 32 bits), buckets of 4 slots.
__global__ void c_insert(const uint64_t *keys, int64_t n, unsigned long long *t, uint64_t bmask, uint32_t *flags) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t key = keys[i];
    uint64_t h = ghash(key);
    unsigned long long w = (uint64_t)(uint32_t)i | ((h >> 32) << 32);
    uint64_t b = h & bmask;
    bool done = false;
    while (!done) {
      unsigned long long *bk = t + b * 4;
      for (int j = 0; j < 4 && !done; ++j) {
        unsigned long long cur = ((volatile unsigned long long *)bk)[j];
        while (true) {
          if (cur == ~0ull) {
            unsigned long long prev = atomicCAS(bk + j, ~0ull, w);
            if (prev == ~0ull) { done = true; break; }
            cur = prev;
            continue;
          }
          if ((cur >> 32) == (w >> 32) && keys[(uint32_t)cur] == key) { atomicOr(flags, 1u); done = true; }
          break;
        }
      }
      b = (b + 1) & bmask;
    }
  }
}
__global__ void c_probe(const unsigned long long *t, uint64_t bmask, const uint64_t *bkeys, const uint64_t *probe, int64_t n, uint32_t *match, uint8_t *hit) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t key = probe[i];
    uint64_t h = ghash(key);
    uint32_t tag = (uint32_t)(h >> 32);
    uint64_t b = h & bmask;
    uint32_t m = 0; uint8_t hh = 0;
    while (true) {
      const ulonglong2 *bk = reinterpret_cast<const ulonglong2 *>(t + b * 4);
      ulonglong2 lo = __ldg(bk), hi = __ldg(bk + 1);
      unsigned long long v[4] = {lo.x, lo.y, hi.x, hi.y};
      bool empty = false, found = false;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (v[j] == ~0ull) empty = true;
        else if (!found && (uint32_t)(v[j] >> 32) == tag && bkeys[(uint32_t)v[j]] == key) { found = true; m = (uint32_t)v[j]; }
      }
      if (found) { hh = 1; break; }
      if (empty) break;
      b = (b + 1) & bmask;
    }
    match[i] = m; hit[i] = hh;
  }
}

__global__ void count_hits(const uint8_t *hit, int64_t n, unsigned long long *c) {
  uint32_t s = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) s += hit[i];
  for (int o = 16; o; o >>= 1) s += __shfl_down_sync(~0u, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(c, (unsigned long long)s);
}
__global__ void copyk(const uint4 *a, uint4 *b, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) b[i] = a[i];
}

static int grid_for(int64_t n) { return (int)std::min<int64_t>((n + 255) / 256, 132 * 8); }
static float med(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char **argv) {
  int64_t sizes[] = {1 << 20, 1 << 22, 10000000, 1 << 24, 1 << 25};
  cudaEvent_t e[8];
  for (auto &x : e) CK(cudaEventCreate(&x));
  {
    int64_t n = 1ll << 27;
    uint4 *a, *b; CK(cudaMalloc(&a, n * 16)); CK(cudaMalloc(&b, n * 16));
    std::vector<float> ts;
    for (int r = 0; r < 7; ++r) { CK(cudaEventRecord(e[0])); copyk<<<132 * 8, 256>>>(a, b, n); CK(cudaEventRecord(e[1])); CK(cudaEventSynchronize(e[1])); float ms; cudaEventElapsedTime(&ms, e[0], e[1]); ts.push_back(ms); }
    printf("copy: %.1f GB/s\n", 2.0 * n * 16 / med(ts) / 1e6);
    CK(cudaFree(a)); CK(cudaFree(b));
  }
  for (int64_t nb : sizes) {
    int64_t np = nb;
    int rb = 1; while ((1ll << rb) < nb + 1) ++rb;
    uint64_t *bk, *pk, *exp; uint32_t *match, *flags; uint8_t *hit; unsigned long long *cnt;
    CK(cudaMalloc(&bk, nb * 8)); CK(cudaMalloc(&pk, np * 8)); CK(cudaMalloc(&exp, 8)); CK(cudaMemset(exp, 0, 8));
    CK(cudaMalloc(&match, np * 4)); CK(cudaMalloc(&hit, np)); CK(cudaMalloc(&flags, 4)); CK(cudaMalloc(&cnt, 8));
    gen_build<<<1024, 256>>>(bk, nb); gen_probe<<<1024, 256>>>(pk, np, nb, exp);
    uint64_t expect; CK(cudaMemcpy(&expect, exp, 8, cudaMemcpyDeviceToHost));
    // A
    uint64_t capA = 1; while (capA < 2 * (uint64_t)nb) capA <<= 1;
    Slot16 *tA; CK(cudaMalloc(&tA, capA * 16));
    // B: buckets of 8 4-byte slots, slots >= nb / 0.6 rounded to a power of two
    uint64_t capB = 8; while (capB * 6 < (uint64_t)nb * 10) capB <<= 1;
    uint32_t *tB; CK(cudaMalloc(&tB, capB * 4));
    uint64_t capB2 = capB * 2; uint32_t *tB2; CK(cudaMalloc(&tB2, capB2 * 4));
    unsigned long long *tC; CK(cudaMalloc(&tC, capB * 8));
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> tc, ti, tp;
      uint32_t fl = 0; unsigned long long got = 0;
      for (int r = 0; r < 9; ++r) {
        CK(cudaMemset(flags, 0, 4)); CK(cudaMemset(cnt, 0, 8)); CK(cudaMemset(hit, 0xAB, np));
        CK(cudaEventRecord(e[0]));
        if (variant == 0) CK(cudaMemsetAsync(tA, 0xff, capA * 16));
        else if (variant == 1) CK(cudaMemsetAsync(tB, 0xff, capB * 4));
        else if (variant == 2) CK(cudaMemsetAsync(tB2, 0xff, capB2 * 4));
        else CK(cudaMemsetAsync(tC, 0xff, capB * 8));
        CK(cudaEventRecord(e[1]));
        if (variant == 0) a_insert<<<grid_for(nb), 256>>>(bk, nb, tA, capA - 1, flags);
        else if (variant == 1) b_insert<<<grid_for(nb), 256>>>(bk, nb, tB, capB / 8 - 1, flags, rb);
        else if (variant == 2) b_insert<<<grid_for(nb), 256>>>(bk, nb, tB2, capB2 / 8 - 1, flags, rb);
        else c_insert<<<grid_for(nb), 256>>>(bk, nb, tC, capB / 4 - 1, flags);
        CK(cudaEventRecord(e[2]));
        if (variant == 0) a_probe<<<grid_for(np), 256>>>(tA, capA - 1, pk, np, match, hit);
        else if (variant == 1) b_probe<<<grid_for(np), 256>>>(tB, capB / 8 - 1, bk, pk, np, match, hit, rb);
        else if (variant == 2) b_probe<<<grid_for(np), 256>>>(tB2, capB2 / 8 - 1, bk, pk, np, match, hit, rb);
        else c_probe<<<grid_for(np), 256>>>(tC, capB / 4 - 1, bk, pk, np, match, hit);
        CK(cudaEventRecord(e[3]));
        CK(cudaEventSynchronize(e[3]));
        float a, b, c; cudaEventElapsedTime(&a, e[0], e[1]); cudaEventElapsedTime(&b, e[1], e[2]); cudaEventElapsedTime(&c, e[2], e[3]);
        if (r >= 2) { tc.push_back(a); ti.push_back(b); tp.push_back(c); }
        count_hits<<<1024, 256>>>(hit, np, cnt);
        CK(cudaMemcpy(&got, cnt, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&fl, flags, 4, cudaMemcpyDeviceToHost));
      }
      const char *names[] = {"A 16B slots 2x", "B 4B slots b8 0.6", "B2 4B slots b8 0.3", "C 8B slots b4 0.6"};
      uint64_t tbytes = variant == 0 ? capA * 16 : variant == 1 ? capB * 4 : variant == 2 ? capB2 * 4 : capB * 8;
      printf("nb %9lld %-20s table %5llu MiB: clear %.3f insert %.3f probe %.3f total %.3f ms | hits %llu expect %llu flags %u\n", (long long)nb, names[variant],
             (unsigned long long)(tbytes >> 20), med(tc), med(ti), med(tp), med(tc) + med(ti) + med(tp), got, (unsigned long long)expect, fl);
    }
    CK(cudaFree(tA)); CK(cudaFree(tB)); CK(cudaFree(tB2)); CK(cudaFree(tC));
    CK(cudaFree(bk)); CK(cudaFree(pk)); CK(cudaFree(match)); CK(cudaFree(hit));
  }
  return 0;
}
