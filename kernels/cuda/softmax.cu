//===- softmax.cu - softmax along one dimension ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_softmax_f32 on the GPU: one block per line of x viewed as
// [outer, n, inner] (n values with stride inner), three passes over the line:
// its maximum, the exponentials and their sum, the division.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "reduce.cuh"

namespace {

constexpr int kThreads = 256;

__global__ void softmax(const float *x, float *y, int64_t n, int64_t inner) {
  __shared__ float shared[32];
  int64_t line = blockIdx.x, o = line / inner, i = line % inner;
  const float *xs = x + o * n * inner + i; // (n) with stride inner
  float *ys = y + o * n * inner + i;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    mx = fmaxf(mx, xs[j * inner]);
  mx = dtk::blockMax(mx, shared);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    float e = expf(xs[j * inner] - mx);
    ys[j * inner] = e;
    sum += e;
  }
  float inv = 1.0f / dtk::blockSum(sum, shared);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    ys[j * inner] *= inv;
}

} // namespace

extern "C" void dtk_cuda_softmax_f32(const float *x, float *y, int64_t outer,
                                     int64_t n, int64_t inner,
                                     dtk_stream stream) {
  if (outer * inner == 0)
    return;
  softmax<<<unsigned(outer * inner), kThreads, 0, stream>>>(x, y, n, inner);
}

extern "C" const char *dtk_cuda_last_error(void) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}
