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

__global__ void embeddingGrad(const int32_t *ids, const float *dout,
                              float *dtable, int64_t n, int64_t count,
                              int64_t width) {
  int64_t v = blockIdx.x;
  if (v == 0)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      checkId(ids[i], count);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      if (ids[i] == v)
        acc += dout[i * width + j];
    dtable[v * width + j] = acc;
  }
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
  if (count > 0)
    embeddingGrad<<<unsigned(count), kThreads, 0, stream>>>(ids, dout, dtable,
                                                            n, count, width);
}
