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
// took 2.9 ms a step this way, 5.1 with one hit at a time). embedding.cu and vocab_parallel.cu launch it.
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
  int64_t v0 = blockIdx.x * rows;
  int64_t mine = min(rows, count - v0);
  int64_t base = (first ? *first : 0) + v0; // the block's first row's id
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t share = (width + kGradWarps - 1) / kGradWarps;
  int64_t c0 = warp * share, end = min(width, c0 + share);
  float *table = dtable + v0 * width;
  // Each lane zeroes the elements it will add to, so no other thread's
  // stores need to be waited for.
  for (int64_t r = 0; r < mine; ++r)
    for (int64_t c = c0 + lane; c < end; c += 32)
      table[r * width + c] = 0.0f;
  int64_t perLane = (share + 31) / 32;
  for (int64_t j0 = 0; j0 < perLane; j0 += kGradColumns) {
    // This pass's columns: c0 + lane + 32 (j0 + j), those before `end`.
    int64_t col[kGradColumns];
    bool in[kGradColumns];
#pragma unroll
    for (int j = 0; j < kGradColumns; ++j) {
      col[j] = c0 + lane + 32 * (j0 + j);
      in[j] = col[j] < end;
    }
    int64_t current = -1; // the row whose sums `sum` holds
    float sum[kGradColumns] = {};
    auto flush = [&] {
      if (current >= 0)
#pragma unroll
        for (int j = 0; j < kGradColumns; ++j)
          if (in[j])
            table[current * width + col[j]] = sum[j];
    };
    for (int64_t s0 = 0; s0 < n; s0 += kGradIds) {
      int64_t len = min(kGradIds, n - s0);
      __syncthreads(); // every warp is done with the last ids staged
      for (int64_t i = threadIdx.x; i < len; i += kGradThreads) {
        int32_t id = ids[s0 + i];
        if (blockIdx.x == 0 && j0 == 0 && (id < 0 || id >= total))
          __trap(); // reported as a launch failure at the next synchronisation
        staged[i] = id;
      }
      __syncthreads();
      for (int64_t i0 = 0; i0 < len; i0 += 32) {
        int64_t r = i0 + lane < len ? int64_t(staged[i0 + lane]) - base : -1;
        unsigned hits = __ballot_sync(0xffffffffu, r >= 0 && r < mine);
        while (hits) {
          // Up to kGradAhead hits' dO loads issued before any is added: a
          // frequent token's hits, one after another, would otherwise wait
          // for memory once each.
          int64_t rowOf[kGradAhead];
          float term[kGradAhead][kGradColumns];
          int taken = 0;
#pragma unroll
          for (int h = 0; h < kGradAhead; ++h) {
            if (!hits) // the same for every lane: `hits` is a ballot
              break;
            int b = __ffs(hits) - 1;
            hits &= hits - 1;
            rowOf[h] = __shfl_sync(0xffffffffu, r, b);
            const float *src = dout + (s0 + i0 + b) * width;
#pragma unroll
            for (int j = 0; j < kGradColumns; ++j)
              term[h][j] = in[j] ? src[col[j]] : 0.0f;
            taken = h + 1;
          }
#pragma unroll
          for (int h = 0; h < kGradAhead; ++h) {
            if (h >= taken)
              break;
            if (rowOf[h] != current) { // the lanes agree: rows are shuffled
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
        }
      }
    }
    flush();
  }
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
  int64_t blocks =
      std::min<int64_t>(count, int64_t(kGradBlocksPerSM) * multiprocessors());
  int64_t rows = (count + blocks - 1) / blocks;
  blocks = (count + rows - 1) / rows;
  embeddingGradRows<<<unsigned(blocks), kGradThreads, 0, stream>>>(
      ids, dout, dtable, n, first, count, total, width, rows);
}

} // namespace
} // namespace dtk

#endif // DTK_CUDA_EMBEDDING_GRAD_CUH
