// The C peer: a stand-in for another GPU library that speaks the Arrow C Device Data Interface,
// for gpujoin-arrow's tests. It knows nothing of gpujoin: it has its own copy of the spec's
// structure definitions (below, under the spec's canonical guards) and uses only the CUDA
// runtime.
//
// - gj_peer_layout: sizes and field offsets of the structures as this C++ compiler lays them out.
// - gj_peer_consume / gj_peer_consume_child: consume an ArrowDeviceArray of a struct type (move
//   it, wait on its sync event, run a kernel over every child, release it).
// - gj_peer_produce: produce a struct array {id: int64 with nulls, name: utf8 with nulls} in the
//   peer's own cudaMalloc'ed buffers, with its own release callbacks, counted per array.
//
// Every function returns 0 on success or a negative GJ_PEER_E_* code.

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {

// ---- The Arrow C Data Interface and C Device Data Interface structures (from the spec) --------

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  // Array type description
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;

  // Release callback
  void (*release)(struct ArrowSchema*);
  // Opaque producer-specific data
  void* private_data;
};

struct ArrowArray {
  // Array data description
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;

  // Release callback
  void (*release)(struct ArrowArray*);
  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_DATA_INTERFACE

#ifndef ARROW_C_DEVICE_DATA_INTERFACE
#define ARROW_C_DEVICE_DATA_INTERFACE

typedef int32_t ArrowDeviceType;

#define ARROW_DEVICE_CPU 1
#define ARROW_DEVICE_CUDA 2
#define ARROW_DEVICE_CUDA_HOST 3

struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  ArrowDeviceType device_type;
  void* sync_event;

  // reserved bytes for future expansion
  int64_t reserved[3];
};

#endif  // ARROW_C_DEVICE_DATA_INTERFACE

// ---- The peer's own API ----------------------------------------------------------------------

#define GJ_PEER_E_RELEASED -1     // the array (or a child) was already released
#define GJ_PEER_E_DEVICE_TYPE -2  // not ARROW_DEVICE_CUDA
#define GJ_PEER_E_NOT_STRUCT -3   // the schema is not a struct ("+s")
#define GJ_PEER_E_CHILDREN -4     // children of the array and of the schema differ, or a bad index
#define GJ_PEER_E_FORMAT -5       // a child format the peer does not read
#define GJ_PEER_E_CUDA -6         // a CUDA runtime call failed
#define GJ_PEER_E_BUFFERS -7      // a buffer count that does not match the format

// What the peer computed over one child (its valid rows, the parent's offset and length applied).
struct gj_peer_stats {
  int64_t rows;   // rows read
  int64_t nulls;  // rows whose validity bit is 0
  int64_t sum;    // integers, dates, timestamps, decimals (low 64 bits): wrapping sum as int64
  int64_t bytes;  // strings: total bytes of the valid strings
  int64_t trues;  // booleans: valid rows that are true
  double fsum;    // floats: sum of the valid values
};

}  // extern "C"

namespace {

enum Kind { K_SIGNED, K_UNSIGNED, K_BOOL, K_UTF8, K_LARGE_UTF8, K_F32, K_F64 };

struct Col {
  int kind;
  int width;  // bytes per value (fixed-width kinds)
  const uint8_t* validity;
  const uint8_t* values;
  const uint8_t* offsets;
  int64_t offset;
  int64_t len;
};

// Accumulators of one child: nulls, sum, bytes, trues (unsigned, wrapping), fsum.
struct Acc {
  unsigned long long nulls, sum, bytes, trues;
  double fsum;
};

__device__ long long load_signed(const uint8_t* p, int width) {
  switch (width) {
    case 1: return *(const int8_t*)p;
    case 2: return *(const int16_t*)p;
    case 4: return *(const int32_t*)p;
    default: return *(const long long*)p;  // 8 bytes, or the low half of a decimal128
  }
}

__device__ unsigned long long load_unsigned(const uint8_t* p, int width) {
  switch (width) {
    case 1: return *(const uint8_t*)p;
    case 2: return *(const uint16_t*)p;
    case 4: return *(const uint32_t*)p;
    default: return *(const unsigned long long*)p;
  }
}

__global__ void stats_kernel(Col c, Acc* acc) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < c.len; i += stride) {
    int64_t j = c.offset + i;
    bool valid = c.validity == nullptr || ((c.validity[j >> 3] >> (j & 7)) & 1);
    if (!valid) {
      atomicAdd(&acc->nulls, 1ULL);
      continue;
    }
    switch (c.kind) {
      case K_SIGNED:
        atomicAdd(&acc->sum, (unsigned long long)load_signed(c.values + j * c.width, c.width));
        break;
      case K_UNSIGNED:
        atomicAdd(&acc->sum, load_unsigned(c.values + j * c.width, c.width));
        break;
      case K_BOOL:
        if ((c.values[j >> 3] >> (j & 7)) & 1) atomicAdd(&acc->trues, 1ULL);
        break;
      case K_UTF8: {
        const int32_t* o = (const int32_t*)c.offsets;
        atomicAdd(&acc->bytes, (unsigned long long)(o[j + 1] - o[j]));
        break;
      }
      case K_LARGE_UTF8: {
        const long long* o = (const long long*)c.offsets;
        atomicAdd(&acc->bytes, (unsigned long long)(o[j + 1] - o[j]));
        break;
      }
      case K_F32:
        atomicAdd(&acc->fsum, (double)*(const float*)(c.values + j * 4));
        break;
      case K_F64:
        atomicAdd(&acc->fsum, *(const double*)(c.values + j * 8));
        break;
    }
  }
}

bool starts_with(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

// The kind, width and buffer count of an Arrow format string; false for a format the peer skips.
bool kind_of(const char* f, int* kind, int* width, int64_t* n_buffers) {
  *n_buffers = 2;
  struct { const char* f; int kind; int width; } fixed[] = {
      {"c", K_SIGNED, 1},   {"s", K_SIGNED, 2},   {"i", K_SIGNED, 4},   {"l", K_SIGNED, 8},
      {"C", K_UNSIGNED, 1}, {"S", K_UNSIGNED, 2}, {"I", K_UNSIGNED, 4}, {"L", K_UNSIGNED, 8},
      {"f", K_F32, 4},      {"g", K_F64, 8},      {"tdD", K_SIGNED, 4}, {"tdm", K_SIGNED, 8},
  };
  for (auto& e : fixed) {
    if (strcmp(f, e.f) == 0) {
      *kind = e.kind;
      *width = e.width;
      return true;
    }
  }
  if (strcmp(f, "b") == 0) {
    *kind = K_BOOL;
    *width = 0;
    return true;
  }
  if (strcmp(f, "u") == 0 || strcmp(f, "U") == 0) {
    *kind = f[0] == 'u' ? K_UTF8 : K_LARGE_UTF8;
    *width = 0;
    *n_buffers = 3;
    return true;
  }
  if (starts_with(f, "ts")) {  // tss:, tsm:, tsu:, tsn: with or without a time zone
    *kind = K_SIGNED;
    *width = 8;
    return true;
  }
  if (starts_with(f, "d:") && strchr(f + 2, ',') != nullptr) {  // decimal128 (no bit width given)
    const char* w = strchr(strchr(f + 2, ',') + 1, ',');
    if (w != nullptr && strcmp(w + 1, "128") != 0) return false;
    *kind = K_SIGNED;
    *width = 16;
    return true;
  }
  return false;
}

// Computes the stats of `n` children described by `cols` on `stream` and waits for them.
int run_stats(cudaStream_t stream, const std::vector<Col>& cols, gj_peer_stats* out) {
  size_t n = cols.size();
  if (n == 0) return 0;
  Acc* acc = nullptr;
  if (cudaMallocAsync((void**)&acc, n * sizeof(Acc), stream) != cudaSuccess) return GJ_PEER_E_CUDA;
  cudaMemsetAsync(acc, 0, n * sizeof(Acc), stream);
  for (size_t k = 0; k < n; ++k) {
    if (cols[k].len > 0) stats_kernel<<<64, 256, 0, stream>>>(cols[k], acc + k);
  }
  std::vector<Acc> host(n);
  cudaMemcpyAsync(host.data(), acc, n * sizeof(Acc), cudaMemcpyDeviceToHost, stream);
  cudaFreeAsync(acc, stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess) return GJ_PEER_E_CUDA;
  for (size_t k = 0; k < n; ++k) {
    out[k].rows = cols[k].len;
    out[k].nulls = (int64_t)host[k].nulls;
    out[k].sum = (int64_t)host[k].sum;
    out[k].bytes = (int64_t)host[k].bytes;
    out[k].trues = (int64_t)host[k].trues;
    out[k].fsum = host[k].fsum;
  }
  return 0;
}

// The column a child describes, with the parent's offset and length applied.
int col_of(const ArrowArray* child, const ArrowSchema* schema, const ArrowArray* parent, Col* c) {
  if (child == nullptr || child->release == nullptr) return GJ_PEER_E_RELEASED;
  int64_t n_buffers;
  if (!kind_of(schema->format, &c->kind, &c->width, &n_buffers)) return GJ_PEER_E_FORMAT;
  if (child->n_buffers != n_buffers) return GJ_PEER_E_BUFFERS;
  c->validity = (const uint8_t*)child->buffers[0];
  if (n_buffers == 3) {
    c->offsets = (const uint8_t*)child->buffers[1];
    c->values = (const uint8_t*)child->buffers[2];
  } else {
    c->offsets = nullptr;
    c->values = (const uint8_t*)child->buffers[1];
  }
  c->offset = child->offset + parent->offset;
  c->len = parent->length;
  return 0;
}

// Moves `*in` into `*moved` (bitwise copy, source marked released) and checks what every
// consumer function needs; on failure the moved array is released.
int take(ArrowDeviceArray* in, const ArrowSchema* schema, ArrowDeviceArray* moved) {
  if (in == nullptr || in->array.release == nullptr) return GJ_PEER_E_RELEASED;
  *moved = *in;
  in->array.release = nullptr;
  int rc = 0;
  if (moved->device_type != ARROW_DEVICE_CUDA) rc = GJ_PEER_E_DEVICE_TYPE;
  else if (schema == nullptr || strcmp(schema->format, "+s") != 0) rc = GJ_PEER_E_NOT_STRUCT;
  else if (schema->n_children != moved->array.n_children) rc = GJ_PEER_E_CHILDREN;
  else if (cudaSetDevice((int)moved->device_id) != cudaSuccess) rc = GJ_PEER_E_CUDA;
  if (rc != 0) moved->array.release(&moved->array);
  return rc;
}

// A new stream of the peer, made to wait on the array's sync event (a cudaEvent_t*).
int stream_after(const ArrowDeviceArray* a, cudaStream_t* stream) {
  if (cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking) != cudaSuccess) return GJ_PEER_E_CUDA;
  if (a->sync_event != nullptr && cudaStreamWaitEvent(*stream, *(cudaEvent_t*)a->sync_event, 0) != cudaSuccess) {
    cudaStreamDestroy(*stream);
    return GJ_PEER_E_CUDA;
  }
  return 0;
}

}  // namespace

extern "C" {

// Writes up to `n` numbers to `out` and returns how many there are:
// sizeof(ArrowArray) and the offsets of its 10 fields in order, sizeof(ArrowDeviceArray) and the
// offsets of its 5 fields, sizeof(ArrowSchema), alignof(ArrowDeviceArray).
int64_t gj_peer_layout(int64_t* out, int64_t n) {
  const int64_t v[] = {
      (int64_t)sizeof(ArrowArray),
      (int64_t)offsetof(ArrowArray, length),
      (int64_t)offsetof(ArrowArray, null_count),
      (int64_t)offsetof(ArrowArray, offset),
      (int64_t)offsetof(ArrowArray, n_buffers),
      (int64_t)offsetof(ArrowArray, n_children),
      (int64_t)offsetof(ArrowArray, buffers),
      (int64_t)offsetof(ArrowArray, children),
      (int64_t)offsetof(ArrowArray, dictionary),
      (int64_t)offsetof(ArrowArray, release),
      (int64_t)offsetof(ArrowArray, private_data),
      (int64_t)sizeof(ArrowDeviceArray),
      (int64_t)offsetof(ArrowDeviceArray, array),
      (int64_t)offsetof(ArrowDeviceArray, device_id),
      (int64_t)offsetof(ArrowDeviceArray, device_type),
      (int64_t)offsetof(ArrowDeviceArray, sync_event),
      (int64_t)offsetof(ArrowDeviceArray, reserved),
      (int64_t)sizeof(ArrowSchema),
      (int64_t)alignof(ArrowDeviceArray),
  };
  int64_t count = (int64_t)(sizeof(v) / sizeof(v[0]));
  for (int64_t i = 0; i < n && i < count; ++i) out[i] = v[i];
  return count;
}

// Consumes `in` (a struct array described by `schema`): moves it out (marking `*in` released),
// waits on its sync event on a stream of its own, computes the stats of every child into
// `out[0 .. n_out)` (n_out must be the number of children), then calls the release callback.
int gj_peer_consume(ArrowDeviceArray* in, const ArrowSchema* schema, gj_peer_stats* out, int64_t n_out) {
  ArrowDeviceArray a;
  int rc = take(in, schema, &a);
  if (rc != 0) return rc;
  std::vector<Col> cols((size_t)a.array.n_children);
  if (n_out != a.array.n_children) rc = GJ_PEER_E_CHILDREN;
  for (int64_t k = 0; rc == 0 && k < a.array.n_children; ++k) {
    rc = col_of(a.array.children[k], schema->children[k], &a.array, &cols[(size_t)k]);
  }
  cudaStream_t stream = nullptr;
  if (rc == 0) rc = stream_after(&a, &stream);
  if (rc == 0) {
    rc = run_stats(stream, cols, out);
    cudaStreamDestroy(stream);
  }
  a.array.release(&a.array);
  return rc;
}

// Consumes child `child` of `in` alone, the way the spec allows: moves the array out, waits on
// its sync event, moves the child out, releases the parent at once, then reads the child (which
// must still be alive) and releases it.
int gj_peer_consume_child(ArrowDeviceArray* in, const ArrowSchema* schema, int64_t child, gj_peer_stats* out) {
  ArrowDeviceArray a;
  int rc = take(in, schema, &a);
  if (rc != 0) return rc;
  if (child < 0 || child >= a.array.n_children || a.array.children[child]->release == nullptr) {
    a.array.release(&a.array);
    return child < 0 || child >= a.array.n_children ? GJ_PEER_E_CHILDREN : GJ_PEER_E_RELEASED;
  }
  cudaStream_t stream = nullptr;
  rc = stream_after(&a, &stream);
  // Move the child out, then release the parent (its sync event with it: the wait is queued).
  ArrowArray c = *a.array.children[child];
  a.array.children[child]->release = nullptr;
  ArrowArray parent = a.array;  // the parent's offset and length, read before the release
  parent.release = nullptr;
  a.array.release(&a.array);
  if (rc == 0) {
    Col col;
    rc = col_of(&c, schema->children[child], &parent, &col);
    if (rc == 0) rc = run_stats(stream, std::vector<Col>{col}, out);
    cudaStreamDestroy(stream);
  }
  c.release(&c);
  return rc;
}

}  // extern "C"

// ---- The producer ------------------------------------------------------------------------------

namespace {

constexpr int kMaxTokens = 4096;
std::atomic<int64_t> g_next_token{0};
std::atomic<int> g_released[kMaxTokens];  // base-structure releases per produced array
std::atomic<int> g_freed[kMaxTokens];     // device buffers freed per produced array

// The device memory and event of one produced array, shared by the parent and its children
// (a child moved out keeps the buffers alive after the parent's release).
struct Shared {
  std::atomic<int> refs;
  int64_t token;
  void* device[5];  // id values, id validity, name offsets, name bytes, name validity
  cudaEvent_t* event;
  cudaStream_t stream;
};

void unref(Shared* s) {
  if (s->refs.fetch_sub(1) != 1) return;
  for (void* p : s->device) cudaFree(p);
  cudaEventDestroy(*s->event);
  free(s->event);
  cudaStreamDestroy(s->stream);
  g_freed[s->token % kMaxTokens].fetch_add(1);
  delete s;
}

struct ChildPrivate {
  Shared* shared;
  const void* buffers[3];
};

struct ParentPrivate {
  Shared* shared;
  const void* buffers[1];
  ArrowArray* children[2];
};

void release_child(ArrowArray* a) {
  if (a == nullptr || a->release == nullptr) return;
  ChildPrivate* p = (ChildPrivate*)a->private_data;
  unref(p->shared);
  delete p;
  a->release = nullptr;
}

void release_parent(ArrowArray* a) {
  if (a == nullptr || a->release == nullptr) return;
  ParentPrivate* p = (ParentPrivate*)a->private_data;
  for (ArrowArray* c : p->children) {
    if (c->release != nullptr) c->release(c);
    delete c;
  }
  g_released[p->shared->token % kMaxTokens].fetch_add(1);
  unref(p->shared);
  delete p;
  a->release = nullptr;
}

void release_schema(ArrowSchema* s) {
  if (s == nullptr || s->release == nullptr) return;
  for (int64_t i = 0; i < s->n_children; ++i) {
    if (s->children[i]->release != nullptr) s->children[i]->release(s->children[i]);
    delete s->children[i];
  }
  delete[] s->children;
  s->release = nullptr;
}

void release_leaf_schema(ArrowSchema* s) { s->release = nullptr; }

// id[j] = j * 7 - 3, null when j % 3 == 1; stored from physical element 1 (child offset 1).
__global__ void fill_id(long long* values, uint8_t* validity, int64_t n) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
    values[j + 1] = j * 7 - 3;
  }
  // One thread a validity byte: physical bit k is logical element k - 1.
  int64_t bytes = (n + 1 + 7) / 8;
  for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < bytes; b += stride) {
    uint8_t v = 0;
    for (int64_t k = b * 8; k < b * 8 + 8; ++k) {
      int64_t j = k - 1;
      if (j >= 0 && j < n && j % 3 != 1) v |= (uint8_t)(1u << (k & 7));
    }
    validity[b] = v;
  }
}

}  // namespace

extern "C" {

// How many times the base structure of produced array `token` was released (1 when all went well).
int gj_peer_released_count(int64_t token) { return g_released[token % kMaxTokens].load(); }

// How many times the device buffers of produced array `token` were freed (1 once the parent and
// every child were released).
int gj_peer_freed_count(int64_t token) { return g_freed[token % kMaxTokens].load(); }

// Produces into `out` and `schema_out` a struct array of `rows` rows {id: int64, name: utf8},
// both nullable, read from element `parent_offset` of its children (the parent's offset):
// logical child element j holds id j * 7 - 3 (null when j % 3 == 1) and name: j % 7 letters
// 'a' + (j + k) % 26 for k = 0.. (null when j % 5 == 2). The id child is itself offset by one
// element. `device_id` is what the array claims (-1: the current device). The token to ask
// gj_peer_released_count about goes to `*token`.
int gj_peer_produce(int64_t rows, int64_t parent_offset, int64_t device_id, ArrowDeviceArray* out, ArrowSchema* schema_out,
                    int64_t* token) {
  if (rows < 0 || parent_offset < 0) return GJ_PEER_E_CHILDREN;
  int64_t n = rows + parent_offset;
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) return GJ_PEER_E_CUDA;

  // Strings on the host: offsets (int32), bytes, validity.
  std::vector<int32_t> offsets(1, 0);
  std::vector<char> bytes;
  std::vector<uint8_t> name_valid((size_t)(n + 7) / 8 + 1, 0);
  int64_t name_nulls = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (j % 5 == 2) {
      ++name_nulls;
    } else {
      name_valid[(size_t)(j >> 3)] |= (uint8_t)(1u << (j & 7));
      for (int64_t k = 0; k < j % 7; ++k) bytes.push_back((char)('a' + (j + k) % 26));
    }
    offsets.push_back((int32_t)bytes.size());
  }
  int64_t id_nulls = 0;
  for (int64_t j = 0; j < n; ++j) id_nulls += j % 3 == 1;

  Shared* s = new Shared();
  s->refs = 3;  // the parent and two children
  s->token = g_next_token.fetch_add(1);
  for (void*& p : s->device) p = nullptr;
  s->event = (cudaEvent_t*)malloc(sizeof(cudaEvent_t));
  size_t sizes[5] = {(size_t)(n + 1) * 8, (size_t)(n + 1 + 7) / 8 + 1, offsets.size() * 4, bytes.size() + 1,
                     name_valid.size()};
  bool ok = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking) == cudaSuccess &&
            cudaEventCreateWithFlags(s->event, cudaEventDisableTiming) == cudaSuccess;
  for (int i = 0; ok && i < 5; ++i) ok = cudaMalloc(&s->device[i], sizes[i]) == cudaSuccess;
  if (ok) {
    // The strings synchronously (the host vectors go away), the ids by a kernel left running:
    // a consumer sees them only by waiting on the sync event.
    ok = cudaMemcpy(s->device[2], offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(s->device[3], bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(s->device[4], name_valid.data(), name_valid.size(), cudaMemcpyHostToDevice) == cudaSuccess;
    fill_id<<<32, 256, 0, s->stream>>>((long long*)s->device[0], (uint8_t*)s->device[1], n);
    ok = ok && cudaGetLastError() == cudaSuccess && cudaEventRecord(*s->event, s->stream) == cudaSuccess;
  }
  if (!ok) {
    s->refs = 1;
    unref(s);
    return GJ_PEER_E_CUDA;
  }

  ParentPrivate* pp = new ParentPrivate();
  pp->shared = s;
  pp->buffers[0] = nullptr;
  ChildPrivate* ids = new ChildPrivate{s, {s->device[1], s->device[0], nullptr}};
  ChildPrivate* names = new ChildPrivate{s, {s->device[4], s->device[2], s->device[3]}};
  pp->children[0] = new ArrowArray{n, id_nulls, 1, 2, 0, ids->buffers, nullptr, nullptr, &release_child, ids};
  pp->children[1] = new ArrowArray{n, name_nulls, 0, 3, 0, names->buffers, nullptr, nullptr, &release_child, names};

  memset(out, 0, sizeof(*out));
  out->array = ArrowArray{rows, 0, parent_offset, 1, 2, pp->buffers, pp->children, nullptr, &release_parent, pp};
  out->device_id = device_id >= 0 ? device_id : current;
  out->device_type = ARROW_DEVICE_CUDA;
  out->sync_event = s->event;

  ArrowSchema** kids = new ArrowSchema*[2];
  kids[0] = new ArrowSchema{"l", "id", nullptr, ARROW_FLAG_NULLABLE, 0, nullptr, nullptr, &release_leaf_schema, nullptr};
  kids[1] = new ArrowSchema{"u", "name", nullptr, ARROW_FLAG_NULLABLE, 0, nullptr, nullptr, &release_leaf_schema, nullptr};
  *schema_out = ArrowSchema{"+s", "", nullptr, 0, 2, kids, nullptr, &release_schema, nullptr};
  *token = s->token;
  return 0;
}

}  // extern "C"
