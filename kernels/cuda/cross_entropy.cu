//===- cross_entropy.cu - softmax cross-entropy, its gradient, accuracy ---===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_cross_entropy_f32, dtk_cross_entropy_grad_f32 and
// dtk_count_correct_f32 on the GPU: one block per row for its log-sum-exp (or
// arg-max), and the mean over labelled rows by one block that adds the rows'
// values in a fixed order (in double, as the CPU kernel does), through
// `scratch` (one float per row) rather than atomics. Rows labelled < 0 are
// not counted.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "labelled.cuh"
#include "reduce.cuh"

namespace {

constexpr int kThreads = 256, kSumThreads = dtk::kLabelledThreads;

__device__ void checkLabel(int32_t label, int64_t classes) {
  if (label >= classes)
    __trap(); // reported as a launch failure at the next synchronisation
}

/// log(sum(exp(row))), the maximum subtracted first.
__device__ float logSumExp(const float *row, int64_t n, float *shared) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    mx = fmaxf(mx, row[j]);
  mx = dtk::blockMax(mx, shared);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    s += expf(row[j] - mx);
  return mx + logf(dtk::blockSum(s, shared));
}

__global__ void rowLosses(const float *logits, const int32_t *labels,
                          float *rowLoss, int64_t classes) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  int32_t label = labels[r];
  if (label < 0) {
    if (threadIdx.x == 0)
      rowLoss[r] = 0.0f;
    return;
  }
  checkLabel(label, classes);
  const float *row = logits + r * classes; // (classes)
  float lse = logSumExp(row, classes, shared);
  if (threadIdx.x == 0)
    rowLoss[r] = lse - row[label];
}

// dlogits = (softmax - onehot) * dloss / count on labelled rows, 0 elsewhere.
__global__ void rowGrads(const float *logits, const int32_t *labels,
                         const float *dloss, const float *count,
                         float *dlogits, int64_t classes) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  int32_t label = labels[r];
  float *d = dlogits + r * classes; // (classes)
  if (label < 0) {
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      d[j] = 0.0f;
    return;
  }
  checkLabel(label, classes);
  const float *row = logits + r * classes;
  float scale = *count > 0 ? *dloss / *count : 0.0f;
  float lse = logSumExp(row, classes, shared);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    d[j] = expf(row[j] - lse) * scale - (j == label ? scale : 0.0f);
}

// Whether each row's arg-max (its first maximum) is its label.
__global__ void rowHits(const float *logits, const int32_t *labels,
                        float *hit, int64_t classes) {
  __shared__ float values[kThreads];
  __shared__ int64_t indices[kThreads];
  int64_t r = blockIdx.x;
  const float *row = logits + r * classes;
  float best = -INFINITY;
  int64_t at = classes; // past the end: no maximum seen
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    if (at == classes || row[j] > best) { // a later equal value loses
      best = row[j];
      at = j;
    }
  values[threadIdx.x] = best;
  indices[threadIdx.x] = at;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      float v = values[threadIdx.x + stride];
      int64_t i = indices[threadIdx.x + stride];
      float u = values[threadIdx.x];
      int64_t k = indices[threadIdx.x];
      // The larger value wins; of equal ones, the first.
      if (i < classes && (k == classes || v > u || (v == u && i < k))) {
        values[threadIdx.x] = v;
        indices[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    hit[r] = labels[r] >= 0 && indices[0] == labels[r] ? 1.0f : 0.0f;
}

} // namespace

extern "C" void dtk_cuda_cross_entropy_f32(const float *logits,
                                           const int32_t *labels, float *loss,
                                           float *scratch, int64_t rows,
                                           int64_t classes, dtk_stream stream) {
  if (rows > 0)
    rowLosses<<<unsigned(rows), kThreads, 0, stream>>>(logits, labels, scratch,
                                                       classes);
  dtk::sumLabelled<<<1, kSumThreads, 0, stream>>>(scratch, labels, loss, rows,
                                                  /*mean=*/true);
}

extern "C" void dtk_cuda_cross_entropy_grad_f32(
    const float *logits, const int32_t *labels, const float *dloss,
    float *dlogits, float *scratch, int64_t rows, int64_t classes,
    dtk_stream stream) {
  dtk::countLabelled<<<1, kSumThreads, 0, stream>>>(labels, scratch, rows);
  if (rows > 0)
    rowGrads<<<unsigned(rows), kThreads, 0, stream>>>(logits, labels, dloss,
                                                      scratch, dlogits,
                                                      classes);
}

extern "C" void dtk_cuda_count_correct_f32(const float *logits,
                                           const int32_t *labels,
                                           float *correct, float *scratch,
                                           int64_t rows, int64_t classes,
                                           dtk_stream stream) {
  if (rows > 0)
    rowHits<<<unsigned(rows), kThreads, 0, stream>>>(logits, labels, scratch,
                                                     classes);
  dtk::sumLabelled<<<1, kSumThreads, 0, stream>>>(scratch, labels, correct,
                                                  rows,
                                                  /*mean=*/false);
}
