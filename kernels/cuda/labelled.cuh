//===- labelled.cuh - sums over the labelled rows -----------------*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A cross-entropy's mean and an accuracy's count are over the rows whose
// label is >= 0 (Hugging Face's -100 labels are not counted). One block adds
// them in a fixed order, in double, so the result is the same every run.
// cross_entropy.cu and vocab_parallel.cu launch these with 1024 threads.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_LABELLED_CUH
#define DTK_CUDA_LABELLED_CUH

#include "reduce.cuh"

#include <cstdint>

namespace dtk {
namespace {

constexpr int kLabelledThreads = 1024;

/// out = sum of values over rows labelled >= 0, divided by their number when
/// `mean`; one block.
__global__ void sumLabelled(const float *values, const int32_t *labels,
                            float *out, int64_t rows, bool mean) {
  __shared__ double shared[32];
  double s = 0.0, n = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (labels[r] >= 0) {
      s += values[r];
      n += 1.0;
    }
  s = blockSum(s, shared);
  n = blockSum(n, shared);
  if (threadIdx.x == 0)
    *out = mean ? (n > 0 ? float(s / n) : 0.0f) : float(s);
}

/// *count = the number of rows labelled >= 0; one block.
__global__ void countLabelled(const int32_t *labels, float *count,
                              int64_t rows) {
  __shared__ float shared[32];
  float n = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    n += labels[r] >= 0 ? 1.0f : 0.0f;
  n = blockSum(n, shared);
  if (threadIdx.x == 0)
    *count = n;
}

} // namespace
} // namespace dtk

#endif // DTK_CUDA_LABELLED_CUH
