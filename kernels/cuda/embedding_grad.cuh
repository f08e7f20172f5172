//===- embedding_grad.cuh - an embedding's deterministic gradient -*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The gradient of a lookup in a table, or in a block of its rows (vocabulary
// parallelism: the rows [first, first + count) of `total`): the sum of the
// rows of dout that looked up each table row. Scattering with atomics would
// add them in a different order every run; here each thread block owns a
// range of table rows and scans the ids in order (a warp ballot per 32 ids),
// so the sums are the CPU kernel's, bit for bit.
//
// Every block reads every id, so the blocks are few (a few per
// multiprocessor, each owning many rows: GPT-2's 50 257 rows take about
// 500 blocks, not the 5 000 that 32 KiB of rows each would make) and the ids
// are staged in shared memory, 8 192 at a time, before the warps scan them.
// A warp owns a share of the columns and keeps, per lane, the running sums of
// the row its last hits fell in: a frequent token's many hits add up in
// registers, and a row goes back to memory only when the warp's hits move to
// another one; a warp loads the dO rows of up to 8 hits before it adds the
// first, so a frequent token's hits do not wait on memory one by one (byte-
// level text puts every hit in a few blocks: on an H200, GPT-2's two tables
// took 2.9 ms a step this way, 5.1 with one hit at a time). Tables of rows up
// to 16 384 wide, few enough rows for that, sum in shared memory instead
// (embeddingGradShared), so that a move to another row does not wait for
// that row's sums to come back from global memory. embedding.cu and
// vocab_parallel.cu launch it.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_EMBEDDING_GRAD_CUH
#define DTK_CUDA_EMBEDDING_GRAD_CUH

#include <algorithm>
#include <cstdint>

namespace dtk {
namespace {

constexpr int kGradThreads = 256, kGradWarps = kGradThreads / 32;
/// Ids staged in shared memory at a time (32 KiB).
constexpr int64_t kGradIds = 8192;
/// Columns a lane sums in registers in one pass over the ids; wider shares
/// take more passes.
constexpr int kGradColumns = 4;
/// Hits whose dO rows a warp loads before it adds the first of them.
constexpr int kGradAhead = 8;
/// Blocks per multiprocessor: each reads every id, so more would only read
/// them more often.
constexpr int kGradBlocksPerSM = 4;

/// Where a thread of either kernel stands: its block's rows [v0, v0 +
/// mine) (the table's rows base, ...), its warp's share of the columns
/// [c0, end), and lane `lane`'s columns c0 + lane + 32 j.
struct GradPlace {
  int64_t v0, mine, base, c0, end, perLane;
  int lane;
  __device__ GradPlace(const int64_t *first, int64_t count, int64_t width,
                       int64_t rows) {
    v0 = blockIdx.x * rows;
    mine = min(rows, count - v0);
    base = (first ? *first : 0) + v0; // the block's first row's id
    lane = threadIdx.x % 32;
    int64_t share = (width + kGradWarps - 1) / kGradWarps;
    c0 = (threadIdx.x / 32) * share;
    end = min(width, c0 + share);
    perLane = (share + 31) / 32;
  }
  /// The pass from column j0 of the lane's: c0 + lane + 32 (j0 + j), those
  /// before `end`.
  __device__ void columns(int64_t j0, int64_t (&col)[kGradColumns],
                          bool (&in)[kGradColumns]) const {
#pragma unroll
    for (int j = 0; j < kGradColumns; ++j) {
      col[j] = c0 + lane + 32 * (j0 + j);
      in[j] = col[j] < end;
    }
  }
};

/// Ids [s0, s0 + len) into `staged`, by the whole block; `check`: an id
/// outside [0, total) traps (one block checks them all).
__device__ void stageIds(int32_t *staged, const int32_t *__restrict__ ids,
                         int64_t s0, int64_t len, int64_t total, bool check) {
  for (int64_t i = threadIdx.x; i < len; i += kGradThreads) {
    int32_t id = ids[s0 + i];
    if (check && (id < 0 || id >= total))
      __trap(); // reported as a launch failure at the next synchronisation
    staged[i] = id;
  }
}

/// Takes up to kGradAhead of the ballot's `hits` (ids at..at + 31, lane b's
/// row r), in index order: each one's row and its dO row's columns `col`,
/// all loaded before any is added, so that a frequent token's hits, one
/// after another, do not wait for memory once each. Returns how many.
__device__ int takeHits(unsigned &hits, int64_t r, int64_t at,
                        const float *__restrict__ dout, int64_t width,
                        const int64_t (&col)[kGradColumns],
                        const bool (&in)[kGradColumns],
                        int64_t (&rowOf)[kGradAhead],
                        float (&term)[kGradAhead][kGradColumns]) {
  int taken = 0;
#pragma unroll
  for (int h = 0; h < kGradAhead; ++h) {
    if (!hits) // the same for every lane: `hits` is a ballot
      break;
    int b = __ffs(hits) - 1;
    hits &= hits - 1;
    rowOf[h] = __shfl_sync(0xffffffffu, r, b);
    const float *src = dout + (at + b) * width;
#pragma unroll
    for (int j = 0; j < kGradColumns; ++j)
      term[h][j] = in[j] ? src[col[j]] : 0.0f;
    taken = h + 1;
  }
  return taken;
}

/// Scans ids [0, n), `chunk` at a time staged in `staged` by the block,
/// and calls add(rowOf, term, taken) for each batch of takeHits' hits in the
/// block's rows (an id's row is id - base, counted if in [0, mine)), in
/// index order. Every thread of the block calls it (it synchronises).
template <typename Add>
__device__ void scanHits(int32_t *staged, int64_t chunk,
                         const int32_t *__restrict__ ids, int64_t n,
                         int64_t total, bool check, int64_t base, int64_t mine,
                         const float *__restrict__ dout, int64_t width,
                         const int64_t (&col)[kGradColumns],
                         const bool (&in)[kGradColumns], Add &&add) {
  int lane = threadIdx.x % 32;
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    int64_t len = min(chunk, n - s0);
    __syncthreads(); // every warp is done with the last ids staged
    stageIds(staged, ids, s0, len, total, check);
    __syncthreads();
    for (int64_t i0 = 0; i0 < len; i0 += 32) {
      int64_t r = i0 + lane < len ? int64_t(staged[i0 + lane]) - base : -1;
      unsigned hits = __ballot_sync(0xffffffffu, r >= 0 && r < mine);
      while (hits) {
        int64_t rowOf[kGradAhead];
        float term[kGradAhead][kGradColumns];
        int taken =
            takeHits(hits, r, s0 + i0, dout, width, col, in, rowOf, term);
        add(rowOf, term, taken);
      }
    }
  }
}

/// Rows [v0, v0 + rows) of dtable (the table's rows *first + v0, ...; a
/// null `first` is 0). Each warp owns a share of the columns; lane `lane`
/// of it sums columns c0 + lane + 32 j. The rows are zeroed, then each hit
/// (an id in the block's rows, in index order) adds its dO row: into
/// registers while the hits stay in one row, through memory when they move,
/// so each element still sums its terms in index order from 0, as the CPU
/// kernel does. An id outside [0, total) traps.
__global__ void __launch_bounds__(kGradThreads)
    embeddingGradRows(const int32_t *__restrict__ ids,
                      const float *__restrict__ dout,
                      float *__restrict__ dtable, int64_t n,
                      const int64_t *first, int64_t count, int64_t total,
                      int64_t width, int64_t rows) {
  __shared__ int32_t staged[kGradIds];
  GradPlace g(first, count, width, rows);
  int64_t mine = g.mine;
  float *table = dtable + g.v0 * width;
  // Each lane zeroes the elements it will add to, so no other thread's
  // stores need to be waited for.
  for (int64_t r = 0; r < mine; ++r)
    for (int64_t c = g.c0 + g.lane; c < g.end; c += 32)
      table[r * width + c] = 0.0f;
  for (int64_t j0 = 0; j0 < g.perLane; j0 += kGradColumns) {
    int64_t col[kGradColumns];
    bool in[kGradColumns];
    g.columns(j0, col, in);
    int64_t current = -1; // the row whose sums `sum` holds
    float sum[kGradColumns] = {};
    auto flush = [&] {
      if (current >= 0)
#pragma unroll
        for (int j = 0; j < kGradColumns; ++j)
          if (in[j])
            table[current * width + col[j]] = sum[j];
    };
    scanHits(staged, kGradIds, ids, n, total, blockIdx.x == 0 && j0 == 0,
             g.base, mine, dout, width, col, in,
             [&](const int64_t(&rowOf)[kGradAhead],
                 const float(&term)[kGradAhead][kGradColumns], int taken) {
#pragma unroll
               for (int h = 0; h < kGradAhead; ++h) {
                 if (h >= taken)
                   break;
                 if (rowOf[h] != current) { // the lanes agree: rows shuffled
                   flush();
                   current = rowOf[h];
#pragma unroll
                   for (int j = 0; j < kGradColumns; ++j)
                     sum[j] = in[j] ? table[current * width + col[j]] : 0.0f;
                 }
#pragma unroll
                 for (int j = 0; j < kGradColumns; ++j)
                   sum[j] += term[h][j];
               }
             });
    flush();
  }
}

/// The bytes of running sums a block of embeddingGradShared keeps in shared
/// memory (its rows times the width, f32), and the ids it stages at a time.
constexpr int64_t kGradSharedBytes = 64 * 1024;
constexpr int64_t kGradSharedIds = 4096;

/// embeddingGradRows with the block's rows summed in shared memory: a hit
/// adds its dO row to the row's sums there, so a hit in another row than
/// the last costs no round trip to global memory (byte-level text moves row
/// at almost every hit, and each move waited on the flushed row's reload).
/// Blocks own as many rows as kGradSharedBytes holds (21 of GPT-2's 768
/// wide); the columns, the passes and the order of each element's additions
/// are embeddingGradRows', so the bits are the CPU's.
__global__ void __launch_bounds__(kGradThreads)
    embeddingGradShared(const int32_t *__restrict__ ids,
                        const float *__restrict__ dout,
                        float *__restrict__ dtable, int64_t n,
                        const int64_t *first, int64_t count, int64_t total,
                        int64_t width, int64_t rows) {
  extern __shared__ float sums[]; // rows x width, then the staged ids
  int32_t *staged = reinterpret_cast<int32_t *>(sums + rows * width);
  GradPlace g(first, count, width, rows);
  int64_t mine = g.mine;
  for (int64_t i = threadIdx.x; i < mine * width; i += kGradThreads)
    sums[i] = 0.0f;
  for (int64_t j0 = 0; j0 < g.perLane; j0 += kGradColumns) {
    int64_t col[kGradColumns];
    bool in[kGradColumns];
    g.columns(j0, col, in);
    scanHits(staged, kGradSharedIds, ids, n, total, blockIdx.x == 0 && j0 == 0,
             g.base, mine, dout, width, col, in,
             [&](const int64_t(&rowOf)[kGradAhead],
                 const float(&term)[kGradAhead][kGradColumns], int taken) {
#pragma unroll
               for (int h = 0; h < kGradAhead; ++h) {
                 if (h >= taken)
                   break;
                 float *row = sums + rowOf[h] * width;
#pragma unroll
                 for (int j = 0; j < kGradColumns; ++j)
                   if (in[j])
                     row[col[j]] += term[h][j];
               }
             });
  }
  __syncthreads();
  float *table = dtable + g.v0 * width;
  for (int64_t i = threadIdx.x; i < mine * width; i += kGradThreads)
    table[i] = sums[i];
}

/// The current device's multiprocessors (one GPU per rank), asked once per
/// device: a launch may come while the step's graph is being captured.
inline int multiprocessors() {
  static int counts[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return 132; // an H100's; only the grid's size depends on it
  int &count = counts[device % 64];
  if (count <= 0 &&
      (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) !=
           cudaSuccess ||
       count <= 0))
    count = 132;
  return count;
}

/// Launches embeddingGradRows over the `count` rows of dtable.
inline void launchEmbeddingGrad(const int32_t *ids, const float *dout,
                                float *dtable, int64_t n, const int64_t *first,
                                int64_t count, int64_t total, int64_t width,
                                cudaStream_t stream) {
  if (count <= 0 || width <= 0)
    return;
  // Every block scans every id, so the shared-memory kernel's blocks (few
  // rows each) pay off only while they stay within a few times the other
  // kernel's: GPT-2's 50 257 x 768 table takes 2 394 of them (4.5 times
  // 528 on 132 multiprocessors), a LLaMA's 32 000 x 4 096 would take 8 000
  // (15 times) and keeps the kernel that sums in registers.
  int64_t fewBlocks =
      std::min<int64_t>(count, int64_t(kGradBlocksPerSM) * multiprocessors());
  if (int64_t rows = kGradSharedBytes / (width * 4);
      rows > 0 && (count + rows - 1) / rows <= 8 * fewBlocks) {
    size_t bytes = size_t(rows * width * 4 + kGradSharedIds * 4);
    static bool allowed = false; // over 48 KiB needs asking, once
    if (!allowed) {
      cudaFuncSetAttribute(embeddingGradShared,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(kGradSharedBytes + kGradSharedIds * 4));
      allowed = true;
    }
    int64_t blocks = (count + rows - 1) / rows;
    embeddingGradShared<<<unsigned(blocks), kGradThreads, bytes, stream>>>(
        ids, dout, dtable, n, first, count, total, width, rows);
    return;
  }
  int64_t blocks = fewBlocks;
  int64_t rows = (count + blocks - 1) / blocks;
  blocks = (count + rows - 1) / rows;
  embeddingGradRows<<<unsigned(blocks), kGradThreads, 0, stream>>>(
      ids, dout, dtable, n, first, count, total, width, rows);
}

} // namespace
} // namespace dtk

#endif // DTK_CUDA_EMBEDDING_GRAD_CUH
