//===- embedding.cu - table lookups and their gradient --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_embedding_f32 and dtk_embedding_grad_f32 on the GPU. The gradient sums
// the rows of dout that looked up each table row. Scattering with atomics
// would add them in a different order every run; here each block owns a few
// table rows and scans the ids in order (a warp ballot per 32 ids), so the
// sums are the CPU kernel's, bit for bit, at the cost of reading the ids once
// per block (they stay in cache: a GPT-2 step's 16 384 ids are 64 KiB).
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include <algorithm>

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

__device__ void checkId(int32_t id, int64_t count) {
  if (id < 0 || id >= count)
    __trap(); // reported as a launch failure at the next synchronisation
}

__global__ void embedding(const float *table, const int32_t *ids, float *out,
                          int64_t count, int64_t width) {
  int64_t i = blockIdx.x;
  int32_t id = ids[i];
  checkId(id, count);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    out[i * width + j] = table[int64_t(id) * width + j];
}

/// Rows [v0, v0 + rows) of dtable, summed in shared memory. Each warp owns a
/// share of the columns and walks the ids 32 at a time: a ballot says which
/// of them fall in the block's rows, and the warp adds those dO rows in
/// index order, so each element sums its terms as the CPU kernel does (the
/// same bits).
__global__ void embeddingGrad(const int32_t *ids, const float *dout,
                              float *dtable, int64_t n, int64_t count,
                              int64_t width, int64_t rows) {
  extern __shared__ float acc[]; // [rows][width]
  int64_t v0 = blockIdx.x * rows;
  int64_t mine = min(rows, count - v0);
  if (blockIdx.x == 0)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      checkId(ids[i], count);
  for (int64_t e = threadIdx.x; e < mine * width; e += blockDim.x)
    acc[e] = 0.0f;
  __syncthreads();
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t share = (width + kWarps - 1) / kWarps;
  int64_t first = warp * share, end = min(width, first + share);
  for (int64_t i0 = 0; i0 < n; i0 += 32) {
    int64_t r = i0 + lane < n ? int64_t(ids[i0 + lane]) - v0 : -1;
    unsigned hits = __ballot_sync(0xffffffffu, r >= 0 && r < mine);
    while (hits) {
      int b = __ffs(hits) - 1;
      hits &= hits - 1;
      int64_t row = __shfl_sync(0xffffffffu, r, b);
      const float *src = dout + (i0 + b) * width;
      for (int64_t c = first + lane; c < end; c += 32)
        acc[row * width + c] += src[c];
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < mine * width; e += blockDim.x)
    dtable[v0 * width + e] = acc[e];
}

} // namespace

extern "C" void dtk_cuda_embedding_f32(const float *table, const int32_t *ids,
                                       float *out, int64_t n, int64_t count,
                                       int64_t width, dtk_stream stream) {
  if (n > 0)
    embedding<<<unsigned(n), kThreads, 0, stream>>>(table, ids, out, count,
                                                    width);
}

extern "C" void dtk_cuda_embedding_grad_f32(const int32_t *ids,
                                            const float *dout, float *dtable,
                                            int64_t n, int64_t count,
                                            int64_t width, dtk_stream stream) {
  if (count <= 0 || width <= 0)
    return;
  // As many table rows per block as 32 KiB of shared memory holds (at least
  // one: a row of up to 12 288 floats fits the 48 KiB default).
  int64_t rows = std::max<int64_t>(1, (32 * 1024 / 4) / width);
  rows = std::min<int64_t>(rows, count);
  size_t bytes = size_t(rows * width) * sizeof(float);
  if (bytes > 48 * 1024)
    cudaFuncSetAttribute(embeddingGrad,
                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int(bytes));
  int64_t blocks = (count + rows - 1) / rows;
  embeddingGrad<<<unsigned(blocks), kThreads, bytes, stream>>>(
      ids, dout, dtable, n, count, width, rows);
}
