//===- cross_entropy.cu - softmax cross-entropy, its gradient, accuracy ---===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_cross_entropy_f32, dtk_cross_entropy_grad_f32 and
// dtk_count_correct_f32 on the GPU: one block per row for its log-sum-exp
// (in one pass: the loss reads the logits once, its gradient twice) or its
// arg-max, and the mean over labelled rows by one block that adds the rows'
// values in a fixed order (in double, as the CPU kernel does), through
// `scratch` (one float per row) rather than atomics. Rows labelled < 0 are
// not counted. The loss and its gradient also read 16-bit logits as the f32
// values they widen to, and the gradient may write 16-bit values rounded to
// nearest: what a mixed-precision program's widening and narrowing around
// them compute, without their passes over the logits (the GPU plan's "in"
// and "out"), in rows a pitch apart where the plan says ("ld"). Where
// nothing between the loss and its gradient reads the loss, one launch
// computes both (the plan's "cross_entropy_with_grad"): the gradient's
// kernel writes each row's loss beside its gradient, and the logits are
// read twice instead of three times. A thread
// takes a row's elements eight at a time, with 16-byte loads (and, for the
// gradient, stores) where the row is 16-byte aligned, in an order that
// neither the type nor the alignment changes: the same bits either way.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "convert.cuh"
#include "labelled.cuh"
#include "reduce.cuh"

namespace {

constexpr int kThreads = 256, kSumThreads = dtk::kLabelledThreads;

__device__ void checkLabel(int32_t label, int64_t classes) {
  if (label >= classes)
    __trap(); // reported as a launch failure at the next synchronisation
}

using dtk::narrow;
using dtk::widen;

/// Elements a thread takes at a time: 16 bytes of bf16 or f16, 32 of f32.
constexpr int kSlot = 8;

template <typename T> __device__ bool aligned16(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// Slot g's kSlot elements of `row`, as stored: with 16-byte loads where
/// the row is 16-byte aligned, else one at a time. The same values either
/// way.
template <typename In>
__device__ void loadSlot(In (&v)[kSlot], const In *row, int64_t g,
                         bool aligned) {
  const In *at = row + g * kSlot;
  if (aligned) {
    constexpr int words = int(kSlot * sizeof(In) / 16);
#pragma unroll
    for (int w = 0; w < words; ++w) {
      uint4 word = reinterpret_cast<const uint4 *>(at)[w];
      memcpy(v + w * (kSlot / words), &word, sizeof word);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kSlot; ++i)
      v[i] = at[i];
  }
}

/// f(j, row[j] as f32) for this thread's elements of a row: slots of kSlot
/// consecutive elements, g = thread, thread + blockDim, ..., each in order,
/// a slot's loads issued before the first is used (one 2-byte load in flight
/// a thread left a block per row far below the device's bandwidth); then
/// the elements past the last whole slot, one a thread. The order of f's calls,
/// and so the bits of any sum they make, depends on neither the element
/// type nor the row's alignment: a bf16 row gives the bits of its f32
/// widening, a pitched row those of a packed one.
template <typename In, typename F>
__device__ void forRow(const In *row, int64_t n, F &&f) {
  const int64_t step = blockDim.x, slots = n / kSlot;
  bool aligned = aligned16(row);
  for (int64_t g = threadIdx.x; g < slots; g += step) {
    In a[kSlot];
    loadSlot(a, row, g, aligned);
#pragma unroll
    for (int i = 0; i < kSlot; ++i)
      f(g * kSlot + i, widen(a[i]));
  }
  for (int64_t j = slots * kSlot + threadIdx.x; j < n; j += step)
    f(j, widen(row[j]));
}

/// log(sum(exp(row))) in one pass over the row (the online softmax's
/// statistics): each thread keeps its largest value m and sum(exp(x - m)),
/// rescaling the sum when m grows; the block then takes the largest m and
/// adds every thread's sum rescaled to it. A second pass for the sum alone
/// would read the row again (50 257 values a row in GPT-2).
template <typename In>
__device__ float logSumExp(const In *row, int64_t n, float *shared) {
  float m = -INFINITY, s = 0.0f;
  forRow(row, n, [&](int64_t, float x) {
    if (x > m) {
      s = s * expf(m - x) + 1.0f; // m = -inf at first: 0 * 0 + 1
      m = x;
    } else if (x > -INFINITY) { // exp(-inf - -inf) would be NaN
      s += expf(x - m);
    }
  });
  float mx = dtk::blockMax(m, shared);
  // A thread that saw nothing (a row narrower than the block) adds nothing.
  float mine = m == -INFINITY ? 0.0f : s * expf(m - mx);
  return mx + logf(dtk::blockSum(mine, shared));
}

template <typename In>
__global__ void rowLosses(const In *logits, int64_t ld, const int32_t *labels,
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
  const In *row = logits + r * ld; // (classes)
  float lse = logSumExp(row, classes, shared);
  if (threadIdx.x == 0)
    rowLoss[r] = lse - widen(row[label]);
}

// dlogits = (softmax - onehot) * dloss / count on labelled rows, 0 elsewhere;
// with `rowLoss`, each row's loss too, as rowLosses computes it (the same
// log-sum-exp: the same bits).
template <typename In, typename Out>
__global__ void rowGrads(const In *logits, int64_t ld, const int32_t *labels,
                         const float *dloss, const float *count, Out *dlogits,
                         int64_t ldOut, int64_t classes, float *rowLoss) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  int32_t label = labels[r];
  Out *d = dlogits + r * ldOut; // (classes)
  if (label < 0) {
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      d[j] = narrow<Out>(0.0f);
    if (rowLoss && threadIdx.x == 0)
      rowLoss[r] = 0.0f;
    return;
  }
  checkLabel(label, classes);
  const In *row = logits + r * ld;
  float scale = *count > 0 ? *dloss / *count : 0.0f;
  float lse = logSumExp(row, classes, shared);
  if (rowLoss && threadIdx.x == 0)
    rowLoss[r] = lse - widen(row[label]);
  auto grad = [&](int64_t j, float x) {
    return narrow<Out>(expf(x - lse) * scale - (j == label ? scale : 0.0f));
  };
  if constexpr (sizeof(In) == sizeof(Out)) {
    if (aligned16(row) && aligned16(d)) {
      // Slots of 16-bit (f32) values in, the same out: each slot stored
      // with one (two) 16-byte stores, where 2-byte stores would leave each
      // warp's store spread over 512 bytes.
      constexpr int words = int(kSlot * sizeof(Out) / 16);
      int64_t slots = classes / kSlot;
      for (int64_t g = threadIdx.x; g < slots; g += blockDim.x) {
        In x[kSlot];
        loadSlot(x, row, g, true);
        Out y[kSlot];
#pragma unroll
        for (int i = 0; i < kSlot; ++i)
          y[i] = grad(g * kSlot + i, widen(x[i]));
#pragma unroll
        for (int w = 0; w < words; ++w) {
          uint4 word;
          memcpy(&word, y + w * (kSlot / words), sizeof word);
          reinterpret_cast<uint4 *>(d + g * kSlot)[w] = word;
        }
      }
      for (int64_t j = slots * kSlot + threadIdx.x; j < classes;
           j += blockDim.x)
        d[j] = grad(j, widen(row[j]));
      return;
    }
  }
  forRow(row, classes, [&](int64_t j, float x) { d[j] = grad(j, x); });
}

/// The logits' rows lie `ld` elements apart (classes, or a pitch past it).
template <typename In>
void crossEntropy(const In *logits, int64_t ld, const int32_t *labels,
                  float *loss, float *scratch, int64_t rows, int64_t classes,
                  dtk_stream stream) {
  if (rows > 0)
    rowLosses<<<unsigned(rows), kThreads, 0, stream>>>(logits, ld, labels,
                                                       scratch, classes);
  dtk::sumLabelled<<<1, kSumThreads, 0, stream>>>(scratch, labels, loss, rows,
                                                  /*mean=*/true);
}

/// The gradient; with `loss`, the loss too, its rows' values in scratch
/// after the count.
template <typename In, typename Out>
void crossEntropyGrad(const In *logits, int64_t ld, const int32_t *labels,
                      const float *dloss, Out *dlogits, int64_t ldOut,
                      float *scratch, int64_t rows, int64_t classes,
                      float *loss, dtk_stream stream) {
  dtk::countLabelled<<<1, kSumThreads, 0, stream>>>(labels, scratch, rows);
  float *rowLoss = loss ? scratch + 1 : nullptr;
  if (rows > 0)
    rowGrads<<<unsigned(rows), kThreads, 0, stream>>>(
        logits, ld, labels, dloss, scratch, dlogits, ldOut, classes, rowLoss);
  if (loss)
    dtk::sumLabelled<<<1, kSumThreads, 0, stream>>>(rowLoss, labels, loss, rows,
                                                    /*mean=*/true);
}

template <typename In>
void crossEntropyGradTo(const In *logits, int64_t ld, const int32_t *labels,
                        const float *dloss, void *dlogits, int out,
                        int64_t ldOut, float *scratch, int64_t rows,
                        int64_t classes, float *loss, dtk_stream stream) {
  if (out == DTK_CUDA_BF16)
    crossEntropyGrad(logits, ld, labels, dloss,
                     static_cast<__nv_bfloat16 *>(dlogits), ldOut, scratch,
                     rows, classes, loss, stream);
  else if (out == DTK_CUDA_F16)
    crossEntropyGrad(logits, ld, labels, dloss, static_cast<__half *>(dlogits),
                     ldOut, scratch, rows, classes, loss, stream);
  else
    crossEntropyGrad(logits, ld, labels, dloss, static_cast<float *>(dlogits),
                     ldOut, scratch, rows, classes, loss, stream);
}

/// crossEntropyGradTo over logits of type `in`.
void crossEntropyGradOf(const void *logits, int in, int64_t ld,
                        const int32_t *labels, const float *dloss,
                        void *dlogits, int out, int64_t ldOut, float *scratch,
                        int64_t rows, int64_t classes, float *loss,
                        dtk_stream stream) {
  if (in == DTK_CUDA_BF16)
    crossEntropyGradTo(static_cast<const __nv_bfloat16 *>(logits), ld, labels,
                       dloss, dlogits, out, ldOut, scratch, rows, classes, loss,
                       stream);
  else if (in == DTK_CUDA_F16)
    crossEntropyGradTo(static_cast<const __half *>(logits), ld, labels, dloss,
                       dlogits, out, ldOut, scratch, rows, classes, loss,
                       stream);
  else
    crossEntropyGradTo(static_cast<const float *>(logits), ld, labels, dloss,
                       dlogits, out, ldOut, scratch, rows, classes, loss,
                       stream);
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
  forRow(row, classes, [&](int64_t j, float x) {
    if (at == classes || x > best) { // a later equal value loses
      best = x;
      at = j;
    }
  });
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
  crossEntropy(logits, classes, labels, loss, scratch, rows, classes, stream);
}

extern "C" void dtk_cuda_cross_entropy_grad_f32(
    const float *logits, const int32_t *labels, const float *dloss,
    float *dlogits, float *scratch, int64_t rows, int64_t classes,
    dtk_stream stream) {
  crossEntropyGrad(logits, classes, labels, dloss, dlogits, classes, scratch,
                   rows, classes, static_cast<float *>(nullptr), stream);
}

extern "C" void dtk_cuda_cross_entropy_pitched(
    const void *logits, int in, int64_t ld, const int32_t *labels, float *loss,
    float *scratch, int64_t rows, int64_t classes, dtk_stream stream) {
  if (in == DTK_CUDA_BF16)
    crossEntropy(static_cast<const __nv_bfloat16 *>(logits), ld, labels, loss,
                 scratch, rows, classes, stream);
  else if (in == DTK_CUDA_F16)
    crossEntropy(static_cast<const __half *>(logits), ld, labels, loss, scratch,
                 rows, classes, stream);
  else
    crossEntropy(static_cast<const float *>(logits), ld, labels, loss, scratch,
                 rows, classes, stream);
}

extern "C" void dtk_cuda_cross_entropy_typed(const void *logits, int in,
                                             const int32_t *labels, float *loss,
                                             float *scratch, int64_t rows,
                                             int64_t classes,
                                             dtk_stream stream) {
  dtk_cuda_cross_entropy_pitched(logits, in, classes, labels, loss, scratch,
                                 rows, classes, stream);
}

extern "C" void dtk_cuda_cross_entropy_grad_pitched(
    const void *logits, int in, int64_t ld, const int32_t *labels,
    const float *dloss, void *dlogits, int out, int64_t ldOut, float *scratch,
    int64_t rows, int64_t classes, dtk_stream stream) {
  crossEntropyGradOf(logits, in, ld, labels, dloss, dlogits, out, ldOut,
                     scratch, rows, classes, nullptr, stream);
}

extern "C" void dtk_cuda_cross_entropy_with_grad_pitched(
    const void *logits, int in, int64_t ld, const int32_t *labels,
    const float *dloss, void *dlogits, int out, int64_t ldOut, float *loss,
    float *scratch, int64_t rows, int64_t classes, dtk_stream stream) {
  crossEntropyGradOf(logits, in, ld, labels, dloss, dlogits, out, ldOut,
                     scratch, rows, classes, loss, stream);
}

extern "C" void dtk_cuda_cross_entropy_grad_typed(
    const void *logits, int in, const int32_t *labels, const float *dloss,
    void *dlogits, int out, float *scratch, int64_t rows, int64_t classes,
    dtk_stream stream) {
  dtk_cuda_cross_entropy_grad_pitched(logits, in, classes, labels, dloss,
                                      dlogits, out, classes, scratch, rows,
                                      classes, stream);
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
