// Prototype (session 26, perf/NOTES.md): a PK-FK join of dense unique build keys through a
// direct-address table larger than the L2, made L2-local by one low fan-out range partition.
//
// R: the keys 0..nr shuffled (a bijection of [0, nr)), P payload columns derived from the key;
// S: ns foreign keys drawn uniformly from [0, nr), P payloads derived from the key. Output: the
// inner join's R payloads and S payloads (the `paper_pkfk` rows of benches/wide.rs).
//
// The table T holds R's payloads at slot `key - min` (one array per payload column) and a
// presence bitmap. At 4 bytes a slot a column it is nr * 4 * P bytes: 256 MiB at 2^26, five
// times the L2, so probes in S's order miss on every access (NPHJ's direct table: 15 ms at 2^26
// on the H100). Range-partitioning S (and R) by the top bits of `key - min` into F ranges makes
// the probes of one range touch one F-th of T (16 MiB a range at F = 16), and a grid walking
// the partitioned S in order works on one or two ranges at a time.
//
// Variants (CUDA events, median of 7 after 2 warm-ups; each phase alone too):
//   cub    R and S sorted on the digit bits by CUB's radix sort, T built from R' in range order
//   own    our partition (tile counts, CUB's scan, a scatter ranked by a block radix sort)
//   own_s  only S partitioned (ours); T built from R as it is (random stores into all of T)
//   none   nothing partitioned (NPHJ's direct table)
// and (run_slots, the second try) 8-byte slots (key, payload) with no bitmap and no atomics,
// probed with the output compacted per warp in row order: slots_own (R and S partitioned),
// slots_own_exch (the insert an atomic exchange, which would catch a repeated key), slots_none.
// `FIRST=1` runs the first try's variants too. Results: perf/NOTES.md, session 26 (refuted:
// random stores into an L2-resident table run at ~30 G/s, so the build costs more than the
// partition pass saves).
// Not part of the build: nvcc -O3 -arch=sm_90 -o proto range_direct_join.cu && ./proto
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cub/cub.cuh>

#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(err_), __LINE__); exit(1); } } while (0)

constexpr int TPB = 256, IPT = 16, TILE = TPB * IPT;

__host__ __device__ inline uint32_t bij(uint32_t x, int bits) {  // a bijection of [0, 2^bits)
  uint32_t m = (bits == 32) ? ~0u : ((1u << bits) - 1);
  for (int r = 0; r < 3; r++) { x = (x * 0x9E3779B1u + 0x7F4A7C15u) & m; x ^= x >> (bits / 2 + 1); }
  return x & m;
}
__device__ inline uint32_t pay(uint32_t k, int c) { return c == 0 ? k * 3u + 1u : k ^ 0x55555555u; }

__global__ void gen(uint32_t *rk, uint32_t *rp0, uint32_t *rp1, int64_t nr, int bits, uint32_t *sk, uint32_t *sp0, uint32_t *sp1, int64_t ns) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < ns; i += (int64_t)gridDim.x * blockDim.x) {
    if (i < nr) { uint32_t k = bij((uint32_t)i, bits); rk[i] = k; rp0[i] = pay(k, 0); rp1[i] = pay(k, 1); }
    uint32_t h = bij((uint32_t)i * 2654435761u ^ 0x1234567u, 32);
    uint32_t k = (uint32_t)(((uint64_t)h * (uint64_t)nr) >> 32);
    sk[i] = k; sp0[i] = pay(k, 0) + 7u; sp1[i] = pay(k, 1) + 7u;
  }
}

// ---- partition: tile counts (digit-major), CUB's exclusive scan, a scatter.
template <int F>
__global__ void __launch_bounds__(TPB) tile_counts(const uint32_t *keys, int64_t n, uint32_t min, int shift, uint32_t *counts, int ntiles) {
  __shared__ uint32_t h[F];
  for (int d = threadIdx.x; d < F; d += TPB) h[d] = 0;
  __syncthreads();
  int64_t base = (int64_t)blockIdx.x * TILE;
  int64_t rem = n - base;
  if (rem >= TILE) {
    const uint4 *k4 = reinterpret_cast<const uint4 *>(keys + base);
    #pragma unroll
    for (int j = 0; j < IPT / 4; j++) {
      uint4 v = k4[j * TPB + threadIdx.x];
      atomicAdd(&h[(v.x - min) >> shift], 1u); atomicAdd(&h[(v.y - min) >> shift], 1u);
      atomicAdd(&h[(v.z - min) >> shift], 1u); atomicAdd(&h[(v.w - min) >> shift], 1u);
    }
  } else {
    for (int64_t e = threadIdx.x; e < rem; e += TPB) atomicAdd(&h[(keys[base + e] - min) >> shift], 1u);
  }
  __syncthreads();
  for (int d = threadIdx.x; d < F; d += TPB) counts[(int64_t)d * ntiles + blockIdx.x] = h[d];
}

template <int F> __host__ __device__ constexpr int digit_bits() { return F <= 2 ? 1 : F <= 4 ? 2 : F <= 8 ? 3 : F <= 16 ? 4 : F <= 32 ? 5 : F <= 64 ? 6 : 7; }

// Each tile: keys loaded blocked (thread t: rows t*IPT..), digits sorted with the tile row as the
// value (CUB's block sort is stable in blocked order, so each digit keeps row order), the
// tile's start of each digit from its counts, then each sorted item's columns copied from the
// input row to base[digit] + (position - start[digit]). Writes of one digit are consecutive.
template <int F, int P>
__global__ void __launch_bounds__(TPB) scatter(const uint32_t *keys, const uint32_t *p0, const uint32_t *p1, int64_t n, uint32_t min, int shift,
                                               const uint32_t *counts, const uint32_t *offsets, int ntiles, uint32_t *ok, uint32_t *op0, uint32_t *op1) {
  constexpr int DB = digit_bits<F>();
  using Sort = cub::BlockRadixSort<uint32_t, TPB, IPT, uint16_t, DB>;
  __shared__ typename Sort::TempStorage tmp;
  __shared__ uint32_t start[F], base[F];
  int64_t b0 = (int64_t)blockIdx.x * TILE;
  int rows = (int)((n - b0) < TILE ? (n - b0) : TILE);
  uint32_t d[IPT]; uint16_t r[IPT];
  if (rows == TILE) {
    const uint4 *k4 = reinterpret_cast<const uint4 *>(keys + b0 + threadIdx.x * IPT);
    #pragma unroll
    for (int j = 0; j < IPT / 4; j++) {
      uint4 v = k4[j];
      d[4 * j] = (v.x - min) >> shift; d[4 * j + 1] = (v.y - min) >> shift; d[4 * j + 2] = (v.z - min) >> shift; d[4 * j + 3] = (v.w - min) >> shift;
    }
  } else {
    #pragma unroll
    for (int i = 0; i < IPT; i++) { int q = threadIdx.x * IPT + i; d[i] = q < rows ? (keys[b0 + q] - min) >> shift : F - 1; }  // padding last: sorts after every row
  }
  #pragma unroll
  for (int i = 0; i < IPT; i++) r[i] = (uint16_t)(threadIdx.x * IPT + i);
  if (threadIdx.x < 32) {  // one warp: exclusive scan of this tile's counts
    uint32_t run = 0;
    for (int c = 0; c < F; c += 32) {
      int dg = c + threadIdx.x;
      uint32_t v = dg < F ? counts[(int64_t)dg * ntiles + blockIdx.x] : 0, x = v;
      #pragma unroll
      for (int o = 1; o < 32; o <<= 1) { uint32_t y = __shfl_up_sync(~0u, x, o); if (threadIdx.x >= o) x += y; }
      if (dg < F) { start[dg] = run + x - v; base[dg] = offsets[(int64_t)dg * ntiles + blockIdx.x]; }
      run += __shfl_sync(~0u, x, 31);
    }
  }
  Sort(tmp).SortBlockedToStriped(d, r, 0, DB);
  __syncthreads();
  #pragma unroll
  for (int i = 0; i < IPT; i++) {
    int pos = threadIdx.x + i * TPB;
    if (pos < rows) {
      uint32_t dg = d[i];
      uint32_t at = base[dg] + (pos - start[dg]);
      int64_t src = b0 + r[i];
      ok[at] = __ldg(keys + src);
      op0[at] = __ldg(p0 + src);
      if (P > 1) op1[at] = __ldg(p1 + src);
    }
  }
}

struct Partitioner {
  int64_t n; int ntiles; uint32_t *counts, *offsets; void *tmp; size_t tmp_bytes;
  template <int F> void init(int64_t n_) {
    n = n_; ntiles = (int)((n + TILE - 1) / TILE);
    CK(cudaMalloc(&counts, sizeof(uint32_t) * F * ntiles)); CK(cudaMalloc(&offsets, sizeof(uint32_t) * F * ntiles));
    tmp = nullptr; tmp_bytes = 0;
    cub::DeviceScan::ExclusiveSum(nullptr, tmp_bytes, counts, offsets, F * ntiles);
    CK(cudaMalloc(&tmp, tmp_bytes));
  }
  template <int F, int P> void run(const uint32_t *k, const uint32_t *a, const uint32_t *b, uint32_t min, int shift, uint32_t *ok, uint32_t *oa, uint32_t *ob) {
    tile_counts<F><<<ntiles, TPB>>>(k, n, min, shift, counts, ntiles);
    cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, counts, offsets, F * ntiles);
    scatter<F, P><<<ntiles, TPB>>>(k, a, b, n, min, shift, counts, offsets, ntiles, ok, oa, ob);
  }
};

// ---- the direct-address table: payloads at key - min, a presence bitmap, a repeat flag.
template <int P>
__global__ void build(const uint32_t *k, const uint32_t *a, const uint32_t *b, int64_t n, uint32_t min, uint32_t span, uint32_t *t0, uint32_t *t1, uint32_t *bits, uint32_t *repeat) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t o = k[i] - min;
    if (o >= span) continue;
    t0[o] = a[i];
    if (P > 1) t1[o] = b[i];
    uint32_t bit = 1u << (o & 31);
    if (atomicOr(&bits[o >> 5], bit) & bit) *repeat = 1;
  }
}

// Probe in input order, one tile a block; a block's outputs consecutive at a block-aggregated
// atomic (the product would use a look-back for a deterministic order; the cost is alike).
template <int P>
__global__ void __launch_bounds__(TPB) probe(const uint32_t *k, const uint32_t *a, const uint32_t *b, int64_t n, uint32_t min, uint32_t span,
                                             const uint32_t *t0, const uint32_t *t1, const uint32_t *bits, unsigned long long *cursor,
                                             uint32_t *or0, uint32_t *or1, uint32_t *os0, uint32_t *os1) {
  using Scan = cub::BlockScan<uint32_t, TPB>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ unsigned long long at0;
  int64_t b0 = (int64_t)blockIdx.x * TILE;
  uint32_t o[IPT]; bool hit[IPT]; uint32_t cnt = 0;
  #pragma unroll
  for (int i = 0; i < IPT; i++) {
    int64_t row = b0 + threadIdx.x + i * TPB;  // striped: coalesced
    hit[i] = false;
    if (row < n) { o[i] = k[row] - min; hit[i] = o[i] < span && ((__ldg(bits + (o[i] >> 5)) >> (o[i] & 31)) & 1); }
    cnt += hit[i];
  }
  uint32_t excl, total;
  Scan(tmp).ExclusiveSum(cnt, excl, total);
  if (threadIdx.x == 0) at0 = atomicAdd(cursor, (unsigned long long)total);
  __syncthreads();
  // positions: thread-major within the block (not row order; a prototype)
  unsigned long long w = at0 + excl;
  #pragma unroll
  for (int i = 0; i < IPT; i++) {
    if (hit[i]) {
      int64_t row = b0 + threadIdx.x + i * TPB;
      or0[w] = __ldg(t0 + o[i]); os0[w] = a[row];
      if (P > 1) { or1[w] = __ldg(t1 + o[i]); os1[w] = b[row]; }
      w++;
    }
  }
}


// ---- second try: 8-byte slots (key, payload), no bitmap, no atomics (plain stores; a repeated
// key is not detected here), and a probe whose output is compacted per warp in row order, so
// every store instruction of a warp writes consecutive words.
__global__ void build_slots(const uint32_t *k, const uint32_t *a, int64_t n, uint32_t min, uint32_t span, uint2 *t, int exch, uint32_t *repeat) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t key = k[i], o = key - min;
    if (o >= span) continue;
    if (exch) {
      unsigned long long v = ((unsigned long long)a[i] << 32) | key;
      unsigned long long old = atomicExch(reinterpret_cast<unsigned long long *>(t + o), v);
      if ((uint32_t)old == key) *repeat = 1;
    } else {
      t[o] = make_uint2(key, a[i]);
    }
  }
}
__global__ void __launch_bounds__(TPB) probe_slots(const uint32_t *k, const uint32_t *a, int64_t n, uint32_t min, uint32_t span, const uint2 *t,
                                                   unsigned long long *cursor, uint32_t *or0, uint32_t *os0) {
  __shared__ uint32_t warp_tot[TPB / 32];
  __shared__ unsigned long long at0;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t w0 = (int64_t)blockIdx.x * TILE + (int64_t)warp * 32 * IPT;
  uint32_t key[IPT], pay[IPT]; uint2 slot[IPT];
  #pragma unroll
  for (int i = 0; i < IPT; i++) {
    int64_t row = w0 + i * 32 + lane;
    key[i] = row < n ? k[row] : 0;
    pay[i] = row < n ? a[row] : 0;
  }
  #pragma unroll
  for (int i = 0; i < IPT; i++) {
    int64_t row = w0 + i * 32 + lane;
    uint32_t o = key[i] - min;
    slot[i] = (row < n && o < span) ? __ldg(t + o) : make_uint2(~key[i], 0);
  }
  uint32_t tot = 0;
  uint32_t mask[IPT];
  #pragma unroll
  for (int i = 0; i < IPT; i++) { mask[i] = __ballot_sync(~0u, slot[i].x == key[i]); tot += __popc(mask[i]); }
  if (lane == 0) warp_tot[warp] = tot;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t run = 0;
    for (int w = 0; w < TPB / 32; w++) { uint32_t x = warp_tot[w]; warp_tot[w] = run; run += x; }
    at0 = atomicAdd(cursor, (unsigned long long)run);
  }
  __syncthreads();
  unsigned long long w = at0 + warp_tot[warp];
  #pragma unroll
  for (int i = 0; i < IPT; i++) {
    if ((mask[i] >> lane) & 1) {
      unsigned long long at = w + __popc(mask[i] & ((1u << lane) - 1));
      or0[at] = slot[i].y; os0[at] = pay[i];
    }
    w += __popc(mask[i]);
  }
}

template <int P>
__global__ void check(const uint32_t *or0, const uint32_t *or1, const uint32_t *os0, const uint32_t *os1, int64_t n, unsigned long long *bad) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    bool ok = os0[i] == or0[i] + 7u;
    if (P > 1) ok = ok && os1[i] == or1[i] + 7u;
    if (!ok) atomicAdd(bad, 1ull);
  }
}

static float med(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

// One rep's phases between events e[0..3] (partition, table, probe) and its total, kept after
// the two warm-ups.
static void phases(cudaEvent_t *e, int rep, std::vector<float> &tp, std::vector<float> &tb, std::vector<float> &tj, std::vector<float> &tot) {
  CK(cudaEventSynchronize(e[3]));
  float a, b, c, t;
  cudaEventElapsedTime(&a, e[0], e[1]); cudaEventElapsedTime(&b, e[1], e[2]); cudaEventElapsedTime(&c, e[2], e[3]); cudaEventElapsedTime(&t, e[0], e[3]);
  if (rep >= 2) { tp.push_back(a); tb.push_back(b); tj.push_back(c); tot.push_back(t); }
}

// The join's output rows, its repeat flag, and the rows `launch_check` (given the rows) found wrong.
template <class Check>
static void outcome(const unsigned long long *cursor, const uint32_t *repeat, unsigned long long *bad, Check launch_check, unsigned long long &rows, unsigned long long &nbad, uint32_t &rpt) {
  CK(cudaMemcpy(&rows, cursor, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&rpt, repeat, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemset(bad, 0, 8));
  launch_check((int64_t)rows);
  CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
}

template <int F, int P>
void run_case(int bits, int64_t nr, int64_t ns, double copy_gbs) {
  uint32_t *rk, *rp0, *rp1, *sk, *sp0, *sp1;
  CK(cudaMalloc(&rk, 4 * nr)); CK(cudaMalloc(&rp0, 4 * nr)); CK(cudaMalloc(&rp1, 4 * nr));
  CK(cudaMalloc(&sk, 4 * ns)); CK(cudaMalloc(&sp0, 4 * ns)); CK(cudaMalloc(&sp1, 4 * ns));
  gen<<<2048, 256>>>(rk, rp0, rp1, nr, bits, sk, sp0, sp1, ns);
  uint32_t *Rk, *Ra, *Rb, *Sk, *Sa, *Sb;  // partitioned copies
  CK(cudaMalloc(&Rk, 4 * nr)); CK(cudaMalloc(&Ra, 4 * nr)); CK(cudaMalloc(&Rb, 4 * nr));
  CK(cudaMalloc(&Sk, 4 * ns)); CK(cudaMalloc(&Sa, 4 * ns)); CK(cudaMalloc(&Sb, 4 * ns));
  uint32_t span = (uint32_t)nr, min = 0;
  int shift = bits - digit_bits<F>();
  uint32_t *t0, *t1, *bm, *repeat; unsigned long long *cursor, *bad;
  CK(cudaMalloc(&t0, 4ull * span)); CK(cudaMalloc(&t1, 4ull * span)); CK(cudaMalloc(&bm, (span + 31) / 32 * 4));
  CK(cudaMalloc(&repeat, 4)); CK(cudaMalloc(&cursor, 8)); CK(cudaMalloc(&bad, 8));
  uint32_t *o0, *o1, *o2, *o3;
  CK(cudaMalloc(&o0, 4 * ns)); CK(cudaMalloc(&o1, 4 * ns)); CK(cudaMalloc(&o2, 4 * ns)); CK(cudaMalloc(&o3, 4 * ns));
  Partitioner pr, ps; pr.init<F>(nr); ps.init<F>(ns);
  // CUB radix sort on the digit bits (keys with one value column: the payload; P = 2 sorts an index? keep P = 1 for cub)
  size_t cub_bytes = 0; void *cub_tmp = nullptr;
  cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, sk, Sk, sp0, Sa, (int64_t)ns, shift, bits);
  CK(cudaMalloc(&cub_tmp, cub_bytes));
  cudaEvent_t e[8]; for (auto &x : e) CK(cudaEventCreate(&x));
  int grid = 132 * 8;
  auto table = [&](const uint32_t *k, const uint32_t *a, const uint32_t *b, int64_t n) {
    CK(cudaMemsetAsync(bm, 0, (span + 31) / 32 * 4)); CK(cudaMemsetAsync(repeat, 0, 4));
    build<P><<<grid, 256>>>(k, a, b, n, min, span, t0, t1, bm, repeat);
  };
  auto join = [&](const uint32_t *k, const uint32_t *a, const uint32_t *b) {
    CK(cudaMemsetAsync(cursor, 0, 8));
    probe<P><<<(int)((ns + TILE - 1) / TILE), TPB>>>(k, a, b, ns, min, span, t0, t1, bm, cursor, o0, o1, o2, o3);
  };
  const char *names[] = {"cub", "own", "own_s", "none"};
  for (int variant = 0; variant < 4; variant++) {
    if (variant == 0 && P > 1) continue;
    std::vector<float> tot, tp, tb, tj;
    for (int rep = 0; rep < 9; rep++) {
      CK(cudaEventRecord(e[0]));
      const uint32_t *bk = rk, *ba = rp0, *bb = rp1, *pk = sk, *pa = sp0, *pb = sp1;
      if (variant == 0) {
        cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, rk, Rk, rp0, Ra, (int64_t)nr, shift, bits);
        cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, sk, Sk, sp0, Sa, (int64_t)ns, shift, bits);
        bk = Rk; ba = Ra; pk = Sk; pa = Sa;
      } else if (variant == 1) {
        pr.run<F, P>(rk, rp0, rp1, min, shift, Rk, Ra, Rb);
        ps.run<F, P>(sk, sp0, sp1, min, shift, Sk, Sa, Sb);
        bk = Rk; ba = Ra; bb = Rb; pk = Sk; pa = Sa; pb = Sb;
      } else if (variant == 2) {
        ps.run<F, P>(sk, sp0, sp1, min, shift, Sk, Sa, Sb);
        pk = Sk; pa = Sa; pb = Sb;
      }
      CK(cudaEventRecord(e[1]));
      table(bk, ba, bb, nr);
      CK(cudaEventRecord(e[2]));
      join(pk, pa, pb);
      CK(cudaEventRecord(e[3]));
      phases(e, rep, tp, tb, tj, tot);
    }
    unsigned long long rows = 0, nbad = 0; uint32_t rpt = 0;
    outcome(cursor, repeat, bad, [&](int64_t n) { check<P><<<2048, 256>>>(o0, o1, o2, o3, n, bad); }, rows, nbad, rpt);
    double floor_bytes = (double)(nr + ns) * 4 * (1 + P) + (double)ns * 4 * 2 * P;
    double fl = floor_bytes / copy_gbs / 1e6;
    printf("RESULT P=%d F=%d nr=2^%d %-6s total %.3f ms (partition %.3f, table %.3f, probe %.3f) rows %llu bad %llu repeat %u floor %.3f ms ratio %.2f\n",
           P, F, bits, names[variant], med(tot), med(tp), med(tb), med(tj), rows, nbad, rpt, fl, med(tot) / fl);
  }
  // the scatter alone (S), for its share of the copy rate
  {
    std::vector<float> ts;
    for (int rep = 0; rep < 9; rep++) {
      CK(cudaEventRecord(e[0])); ps.run<F, P>(sk, sp0, sp1, min, shift, Sk, Sa, Sb); CK(cudaEventRecord(e[1])); CK(cudaEventSynchronize(e[1]));
      float a; cudaEventElapsedTime(&a, e[0], e[1]); if (rep >= 2) ts.push_back(a);
    }
    double bytes = (double)ns * 4 * (1 + P) * 2;
    printf("PARTITION P=%d F=%d S rows %lld: %.3f ms, %.0f GB/s moved (%.0f%% of copy)\n", P, F, (long long)ns, med(ts), bytes / med(ts) / 1e6, 100.0 * bytes / med(ts) / 1e6 / copy_gbs);
  }
  cudaFree(rk); cudaFree(rp0); cudaFree(rp1); cudaFree(sk); cudaFree(sp0); cudaFree(sp1);
  cudaFree(Rk); cudaFree(Ra); cudaFree(Rb); cudaFree(Sk); cudaFree(Sa); cudaFree(Sb);
  cudaFree(t0); cudaFree(t1); cudaFree(bm); cudaFree(o0); cudaFree(o1); cudaFree(o2); cudaFree(o3); cudaFree(cub_tmp);
  cudaFree(pr.counts); cudaFree(pr.offsets); cudaFree(pr.tmp); cudaFree(ps.counts); cudaFree(ps.offsets); cudaFree(ps.tmp);
  CK(cudaGetLastError());
}

template <int F>
void run_slots(int bits, int64_t nr, int64_t ns, double copy_gbs) {
  uint32_t *rk, *rp0, *rp1, *sk, *sp0, *sp1;
  CK(cudaMalloc(&rk, 4 * nr)); CK(cudaMalloc(&rp0, 4 * nr)); CK(cudaMalloc(&rp1, 4 * nr));
  CK(cudaMalloc(&sk, 4 * ns)); CK(cudaMalloc(&sp0, 4 * ns)); CK(cudaMalloc(&sp1, 4 * ns));
  gen<<<2048, 256>>>(rk, rp0, rp1, nr, bits, sk, sp0, sp1, ns);
  uint32_t *Rk, *Ra, *Sk, *Sa;
  CK(cudaMalloc(&Rk, 4 * nr)); CK(cudaMalloc(&Ra, 4 * nr)); CK(cudaMalloc(&Sk, 4 * ns)); CK(cudaMalloc(&Sa, 4 * ns));
  uint32_t span = (uint32_t)nr, min = 0;
  int shift = bits - digit_bits<F>();
  uint2 *t; uint32_t *repeat; unsigned long long *cursor, *bad;
  CK(cudaMalloc(&t, 8ull * span)); CK(cudaMalloc(&repeat, 4)); CK(cudaMalloc(&cursor, 8)); CK(cudaMalloc(&bad, 8));
  uint32_t *o0, *o2; CK(cudaMalloc(&o0, 4 * ns)); CK(cudaMalloc(&o2, 4 * ns));
  Partitioner pr, ps; pr.init<F>(nr); ps.init<F>(ns);
  cudaEvent_t e[4]; for (auto &x : e) CK(cudaEventCreate(&x));
  const char *names[] = {"slots_own", "slots_own_exch", "slots_none"};
  for (int variant = 0; variant < 3; variant++) {
    std::vector<float> tot, tp, tb, tj;
    for (int rep = 0; rep < 9; rep++) {
      CK(cudaEventRecord(e[0]));
      const uint32_t *bk = rk, *ba = rp0, *pk = sk, *pa = sp0;
      if (variant < 2) {
        pr.run<F, 1>(rk, rp0, rp1, min, shift, Rk, Ra, nullptr);
        ps.run<F, 1>(sk, sp0, sp1, min, shift, Sk, Sa, nullptr);
        bk = Rk; ba = Ra; pk = Sk; pa = Sa;
      }
      CK(cudaEventRecord(e[1]));
      CK(cudaMemsetAsync(t, 0xFF, 8ull * span)); CK(cudaMemsetAsync(repeat, 0, 4));
      build_slots<<<132 * 8, 256>>>(bk, ba, nr, min, span, t, variant == 1, repeat);
      CK(cudaEventRecord(e[2]));
      CK(cudaMemsetAsync(cursor, 0, 8));
      probe_slots<<<(int)((ns + TILE - 1) / TILE), TPB>>>(pk, pa, ns, min, span, t, cursor, o0, o2);
      CK(cudaEventRecord(e[3]));
      phases(e, rep, tp, tb, tj, tot);
    }
    unsigned long long rows = 0, nbad = 0; uint32_t rpt = 0;
    outcome(cursor, repeat, bad, [&](int64_t n) { check<1><<<2048, 256>>>(o0, nullptr, o2, nullptr, n, bad); }, rows, nbad, rpt);
    double fl = ((double)(nr + ns) * 8 + (double)ns * 8) / copy_gbs / 1e6;
    printf("RESULT P=1 F=%d nr=2^%d %-14s total %.3f ms (partition %.3f, table %.3f, probe %.3f) rows %llu bad %llu repeat %u ratio %.2f\n",
           F, bits, names[variant], med(tot), med(tp), med(tb), med(tj), rows, nbad, rpt, med(tot) / fl);
  }
  cudaFree(rk); cudaFree(rp0); cudaFree(rp1); cudaFree(sk); cudaFree(sp0); cudaFree(sp1); cudaFree(Rk); cudaFree(Ra); cudaFree(Sk); cudaFree(Sa);
  cudaFree(t); cudaFree(o0); cudaFree(o2); cudaFree(pr.counts); cudaFree(pr.offsets); cudaFree(pr.tmp); cudaFree(ps.counts); cudaFree(ps.offsets); cudaFree(ps.tmp);
  CK(cudaGetLastError());
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  // copy bandwidth: 1 GiB device to device, read + write counted
  double copy_gbs;
  {
    size_t n = 1ull << 30; void *a, *b; CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
    cudaEvent_t x, y; cudaEventCreate(&x); cudaEventCreate(&y);
    std::vector<float> v;
    for (int i = 0; i < 7; i++) { cudaEventRecord(x); cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice); cudaEventRecord(y); cudaEventSynchronize(y); float t; cudaEventElapsedTime(&t, x, y); v.push_back(t); }
    copy_gbs = 2.0 * n / med(v) / 1e6;
    printf("copy %.0f GB/s\n", copy_gbs);
    cudaFree(a); cudaFree(b);
  }
  const int64_t nr = 1ll << 26, ns = 1ll << 27;
  if (getenv("FIRST")) {
    run_case<8, 1>(26, nr, ns, copy_gbs); run_case<16, 1>(26, nr, ns, copy_gbs); run_case<32, 1>(26, nr, ns, copy_gbs); run_case<64, 1>(26, nr, ns, copy_gbs);
    run_case<16, 2>(26, nr, ns, copy_gbs); run_case<32, 2>(26, nr, ns, copy_gbs); run_case<64, 2>(26, nr, ns, copy_gbs);
  }
  run_slots<16>(26, nr, ns, copy_gbs); run_slots<32>(26, nr, ns, copy_gbs); run_slots<64>(26, nr, ns, copy_gbs);
  return 0;
}
