//===- embedding.cu - table lookups and their gradient --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_embedding_f32 and dtk_embedding_grad_f32 on the GPU. The gradient sums
// the rows of dout that looked up each table row. Scattering with atomics
// would add them in a different order every run; here each block owns one
// table row and scans the ids in order, so the sums are the CPU kernel's, bit
// for bit, at the cost of reading the ids once per table row (they stay in
// cache: a GPT-2 step's 8192 ids are 32 KiB).
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include <algorithm>

namespace {

constexpr int kThreads = 256;

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

/// Rows [v0, v0 + rows) of dtable: the block walks every id in order once and
/// adds the dO rows of the ids in its range into shared memory, so each
/// element sums its terms in index order, as the CPU kernel does (the same
/// bits), and the ids are read once per `rows` table rows, not once per row.
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
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = int64_t(ids[i]) - v0;
    if (r < 0 || r >= mine)
      continue; // the same for every thread: no divergence
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      acc[r * width + j] += dout[i * width + j];
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
