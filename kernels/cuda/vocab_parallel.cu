//===- vocab_parallel.cu - embeddings and cross-entropy over class blocks -===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The vocabulary-parallel kernels of kernels/cpu/vocab_parallel.c on the GPU.
// A rank's block starts at `first`, a device scalar the runtime computes per
// rank, so every launch reads it from memory rather than taking it by value.
//
// The lookup is embedding.cu's with ids outside the block reading zeros; its
// gradient is embedding.cu's too (embedding_grad.cuh, over the block's rows:
// the CPU kernel's sums bit for bit, with no atomics). The class statistics
// take one block per row (a first-maximum reduction, then the sum of
// exponentials); the kernels from the statistics combine a row's blocks in one
// thread, in the CPU's order, and the loss's mean and the count of hits go
// through `scratch` (one value per row) and one block that adds them in a fixed
// order, in double (labelled.cuh), as cross_entropy.cu does. Rows labelled < 0
// are not counted.
//
// Products that the CPU kernels store before adding to them are written with
// __fmul_rn, which nvcc does not fuse into a multiply-add: the same roundings
// as the CPU's.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "embedding_grad.cuh"
#include "labelled.cuh"
#include "reduce.cuh"

#include <algorithm>

namespace {

constexpr int kThreads = 256, kSumThreads = dtk::kLabelledThreads;
enum { kMax = 0, kSum = 1, kTarget = 2, kArgMax = 3, kStats = 4 };

__device__ void checkId(int32_t id, int64_t total) {
  if (id < 0 || id >= total)
    __trap(); // reported as a launch failure at the next synchronisation
}

__device__ void checkLabel(int32_t label, int64_t total) {
  if (label >= total)
    __trap(); // reported as a launch failure at the next synchronisation
}

/// The block's classes that are real: those before `total` (the others pad an
/// uneven last block).
__device__ int64_t validClasses(int64_t first, int64_t classes, int64_t total) {
  int64_t valid = total - first < classes ? total - first : classes;
  return valid < 0 ? 0 : valid;
}

__global__ void embeddingShard(const float *table, const int32_t *ids,
                               float *out, const int64_t *first, int64_t count,
                               int64_t total, int64_t width) {
  int64_t i = blockIdx.x;
  int32_t id = ids[i];
  checkId(id, total);
  int64_t row = int64_t(id) - *first;
  float *o = out + i * width; // (width)
  if (row >= 0 && row < count)
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      o[j] = table[row * width + j];
  else
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      o[j] = 0.0f;
}

/// A value and its index; `at` < 0: none seen.
struct ArgMax {
  float value;
  int64_t at;
};

/// Whether `b` wins over `a`: the larger value, of equal ones the first.
__device__ bool beats(ArgMax b, ArgMax a) {
  return b.at >= 0 &&
         (a.at < 0 || b.value > a.value || (b.value == a.value && b.at < a.at));
}

__device__ ArgMax warpArgMax(ArgMax v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    ArgMax o{__shfl_xor_sync(0xffffffffu, v.value, offset),
             __shfl_xor_sync(0xffffffffu, v.at, offset)};
    if (beats(o, v))
      v = o;
  }
  return v;
}

/// The first maximum of row[0, n) over the block; every thread gets it.
/// `values` and `indices` hold 32 entries. Synchronises the block.
__device__ ArgMax blockArgMax(const float *row, int64_t n, float *values,
                              int64_t *indices) {
  ArgMax v{-INFINITY, -1};
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    if (v.at < 0 || row[j] > v.value) // a later equal value loses
      v = ArgMax{row[j], j};
  v = warpArgMax(v);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    values[warp] = v.value;
    indices[warp] = v.at;
  }
  __syncthreads();
  int warps = blockDim.x / 32;
  v = lane < warps ? ArgMax{values[lane], indices[lane]}
                   : ArgMax{-INFINITY, -1};
  return warpArgMax(v);
}

/// Row r's statistics over the block's classes: stats[k * rows + r].
__global__ void classStats(const float *logits, const int32_t *labels,
                           float *stats, int64_t rows, int64_t classes,
                           const int64_t *first, int64_t total) {
  __shared__ float shared[32];
  __shared__ int64_t indices[32];
  int64_t r = blockIdx.x;
  int32_t label = labels[r];
  float mx = -INFINITY, sum = 0.0f, target = 0.0f, arg = -1.0f;
  if (label >= 0) {
    checkLabel(label, total);
    int64_t f = *first, valid = validClasses(f, classes, total);
    const float *row = logits + r * classes; // (classes)
    ArgMax best = blockArgMax(row, valid, shared, indices);
    if (best.at >= 0) { // the same in every thread
      mx = best.value;
      arg = float(f + best.at);
      float s = 0.0f;
      for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
        s += expf(row[j] - mx);
      sum = dtk::blockSum(s, shared);
    }
    int64_t at = int64_t(label) - f;
    if (at >= 0 && at < valid)
      target = row[at];
  }
  if (threadIdx.x == 0) {
    stats[kMax * rows + r] = mx;
    stats[kSum * rows + r] = sum;
    stats[kTarget * rows + r] = target;
    stats[kArgMax * rows + r] = arg;
  }
}

/// The statistic k of block b at row r.
__device__ float stat(const float *stats, int64_t b, int k, int64_t rows,
                      int64_t r) {
  return stats[(b * kStats + k) * rows + r];
}

/// log(sum of exp) over every block's classes at row r, and the label's
/// logit: vocab_parallel.c's global_lse, in its order.
__device__ float globalLse(const float *stats, int64_t blocks, int64_t rows,
                           int64_t r, float *target) {
  float mx = -INFINITY;
  for (int64_t b = 0; b < blocks; ++b)
    mx = fmaxf(mx, stat(stats, b, kMax, rows, r));
  float sum = 0.0f, t = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    float m = stat(stats, b, kMax, rows, r);
    if (m != -INFINITY)
      sum += __fmul_rn(stat(stats, b, kSum, rows, r), expf(m - mx));
    t += stat(stats, b, kTarget, rows, r);
  }
  if (target)
    *target = t;
  return mx + logf(sum);
}

/// Each row's loss (0 for unlabelled rows), one thread a row.
__global__ void rowLossesFromStats(const float *stats, const int32_t *labels,
                                   float *rowLoss, int64_t blocks,
                                   int64_t rows) {
  int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= rows)
    return;
  if (labels[r] < 0) {
    rowLoss[r] = 0.0f;
    return;
  }
  float target;
  float lse = globalLse(stats, blocks, rows, r, &target);
  rowLoss[r] = lse - target;
}

/// Whether each row's first maximum over all blocks is its label, one thread
/// a row: the smallest index among the blocks whose maximum is the largest.
__global__ void rowHitsFromStats(const float *stats, const int32_t *labels,
                                 float *hit, int64_t blocks, int64_t rows) {
  int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= rows)
    return;
  int32_t label = labels[r];
  if (label < 0) {
    hit[r] = 0.0f;
    return;
  }
  float mx = -INFINITY, best = -1.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    float m = stat(stats, b, kMax, rows, r);
    float at = stat(stats, b, kArgMax, rows, r);
    if (at < 0.0f)
      continue;
    if (best < 0.0f || m > mx || (m == mx && at < best)) {
      mx = m;
      best = at;
    }
  }
  hit[r] = best >= 0.0f && int64_t(best) == label ? 1.0f : 0.0f;
}

/// dlogits = (softmax - onehot) * dloss / count over the block's classes on
/// labelled rows, the log-sum-exp from every block's stats; 0 on unlabelled
/// rows and padding columns.
__global__ void rowGradsShard(const float *logits, const int32_t *labels,
                              const float *stats, const float *dloss,
                              const float *count, float *dlogits,
                              int64_t blocks, int64_t rows, int64_t classes,
                              const int64_t *first, int64_t total) {
  int64_t r = blockIdx.x;
  int32_t label = labels[r];
  float *d = dlogits + r * classes; // (classes)
  if (label < 0) {
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      d[j] = 0.0f;
    return;
  }
  checkLabel(label, total);
  int64_t f = *first, valid = validClasses(f, classes, total);
  int64_t at = int64_t(label) - f;
  const float *row = logits + r * classes;
  float scale = *count > 0 ? *dloss / *count : 0.0f;
  float lse = globalLse(stats, blocks, rows, r, nullptr);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    float g = 0.0f;
    if (j < valid) {
      g = __fmul_rn(expf(row[j] - lse), scale);
      if (j == at)
        g -= scale;
    }
    d[j] = g;
  }
}

unsigned rowBlocks(int64_t rows) {
  return unsigned((rows + kThreads - 1) / kThreads);
}

} // namespace

extern "C" void dtk_cuda_embedding_shard_f32(const float *table,
                                             const int32_t *ids, float *out,
                                             int64_t n, const int64_t *first,
                                             int64_t count, int64_t total,
                                             int64_t width, dtk_stream stream) {
  if (n > 0)
    embeddingShard<<<unsigned(n), kThreads, 0, stream>>>(table, ids, out, first,
                                                         count, total, width);
}

extern "C" void dtk_cuda_embedding_grad_shard_f32(
    const int32_t *ids, const float *dout, float *dtable, int64_t n,
    const int64_t *first, int64_t count, int64_t total, int64_t width,
    dtk_stream stream) {
  dtk::launchEmbeddingGrad(ids, dout, dtable, n, first, count, total, width,
                           stream);
}

extern "C" void dtk_cuda_class_stats_f32(const float *logits,
                                         const int32_t *labels, float *stats,
                                         int64_t rows, int64_t classes,
                                         const int64_t *first, int64_t total,
                                         dtk_stream stream) {
  if (rows > 0)
    classStats<<<unsigned(rows), kThreads, 0, stream>>>(
        logits, labels, stats, rows, classes, first, total);
}

extern "C" void dtk_cuda_cross_entropy_stats_f32(const float *stats,
                                                 const int32_t *labels,
                                                 float *loss, float *scratch,
                                                 int64_t blocks, int64_t rows,
                                                 dtk_stream stream) {
  if (rows > 0)
    rowLossesFromStats<<<rowBlocks(rows), kThreads, 0, stream>>>(
        stats, labels, scratch, blocks, rows);
  dtk::sumLabelled<<<1, kSumThreads, 0, stream>>>(scratch, labels, loss, rows,
                                                  /*mean=*/true);
}

extern "C" void dtk_cuda_cross_entropy_grad_shard_f32(
    const float *logits, const int32_t *labels, const float *stats,
    const float *dloss, float *dlogits, float *scratch, int64_t blocks,
    int64_t rows, int64_t classes, const int64_t *first, int64_t total,
    dtk_stream stream) {
  dtk::countLabelled<<<1, kSumThreads, 0, stream>>>(labels, scratch, rows);
  if (rows > 0 && classes > 0)
    rowGradsShard<<<unsigned(rows), kThreads, 0, stream>>>(
        logits, labels, stats, dloss, scratch, dlogits, blocks, rows, classes,
        first, total);
}

extern "C" void dtk_cuda_count_correct_stats_f32(const float *stats,
                                                 const int32_t *labels,
                                                 float *correct, float *scratch,
                                                 int64_t blocks, int64_t rows,
                                                 dtk_stream stream) {
  if (rows > 0)
    rowHitsFromStats<<<rowBlocks(rows), kThreads, 0, stream>>>(
        stats, labels, scratch, blocks, rows);
  dtk::sumLabelled<<<1, kSumThreads, 0, stream>>>(scratch, labels, correct,
                                                  rows,
                                                  /*mean=*/false);
}
