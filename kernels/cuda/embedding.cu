//===- embedding.cu - table lookups and their gradient --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_embedding_f32 and dtk_embedding_grad_f32 on the GPU; the gradient is
// embedding_grad.cuh's, deterministic (the CPU kernel's sums, bit for bit).
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "embedding_grad.cuh"

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
  dtk::launchEmbeddingGrad(ids, dout, dtable, n, nullptr, count, count, width,
                           stream);
}
