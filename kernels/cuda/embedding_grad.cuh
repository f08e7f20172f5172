//===- embedding_grad.cuh - an embedding's deterministic gradient -*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The gradient of a lookup in a table, or in a block of its rows (vocabulary
// parallelism: the rows [first, first + count) of `total`): the sum of the
// rows of dout that looked up each table row. Scattering with atomics would
// add them in a different order every run; here each thread block owns a few
// table rows and scans the ids in order (a warp ballot per 32 ids), so the
// sums are the CPU kernel's, bit for bit, at the cost of reading the ids once
// per block (they stay in cache: a GPT-2 step's 16 384 ids are 64 KiB).
// embedding.cu and vocab_parallel.cu launch it.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_EMBEDDING_GRAD_CUH
#define DTK_CUDA_EMBEDDING_GRAD_CUH

#include <algorithm>
#include <cstdint>

namespace dtk {
namespace {

constexpr int kGradThreads = 256, kGradWarps = kGradThreads / 32;

/// Rows [v0, v0 + rows) of dtable (the table's rows *first + v0, ...; a
/// null `first` is 0), summed in shared memory. Each warp owns a share of
/// the columns and walks the ids 32 at a time: a ballot says which of them
/// fall in the block's rows, and the warp adds those dO rows in index
/// order, so each element sums its terms as the CPU kernel does. An id
/// outside [0, total) traps.
__global__ void embeddingGradRows(const int32_t *ids, const float *dout,
                                  float *dtable, int64_t n,
                                  const int64_t *first, int64_t count,
                                  int64_t total, int64_t width, int64_t rows) {
  extern __shared__ float acc[]; // [rows][width]
  int64_t v0 = blockIdx.x * rows;
  int64_t mine = min(rows, count - v0);
  int64_t base = (first ? *first : 0) + v0; // the block's first row's id
  if (blockIdx.x == 0)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      if (ids[i] < 0 || ids[i] >= total)
        __trap(); // reported as a launch failure at the next synchronisation
  for (int64_t e = threadIdx.x; e < mine * width; e += blockDim.x)
    acc[e] = 0.0f;
  __syncthreads();
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t share = (width + kGradWarps - 1) / kGradWarps;
  int64_t c0 = warp * share, end = min(width, c0 + share);
  for (int64_t i0 = 0; i0 < n; i0 += 32) {
    int64_t r = i0 + lane < n ? int64_t(ids[i0 + lane]) - base : -1;
    unsigned hits = __ballot_sync(0xffffffffu, r >= 0 && r < mine);
    while (hits) {
      int b = __ffs(hits) - 1;
      hits &= hits - 1;
      int64_t row = __shfl_sync(0xffffffffu, r, b);
      const float *src = dout + (i0 + b) * width;
      for (int64_t c = c0 + lane; c < end; c += 32)
        acc[row * width + c] += src[c];
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < mine * width; e += blockDim.x)
    dtable[v0 * width + e] = acc[e];
}

/// Launches embeddingGradRows over the `count` rows of dtable.
inline void launchEmbeddingGrad(const int32_t *ids, const float *dout,
                                float *dtable, int64_t n, const int64_t *first,
                                int64_t count, int64_t total, int64_t width,
                                cudaStream_t stream) {
  if (count <= 0 || width <= 0)
    return;
  // As many table rows per block as 32 KiB of shared memory holds (at least
  // one: a row of up to 12 288 floats fits the 48 KiB default).
  int64_t rows = std::max<int64_t>(1, (32 * 1024 / 4) / width);
  rows = std::min<int64_t>(rows, count);
  size_t bytes = size_t(rows * width) * sizeof(float);
  if (bytes > 48 * 1024)
    cudaFuncSetAttribute(embeddingGradRows,
                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int(bytes));
  int64_t blocks = (count + rows - 1) / rows;
  embeddingGradRows<<<unsigned(blocks), kGradThreads, bytes, stream>>>(
      ids, dout, dtable, n, first, count, total, width, rows);
}

} // namespace
} // namespace dtk

#endif // DTK_CUDA_EMBEDDING_GRAD_CUH
