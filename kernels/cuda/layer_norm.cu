//===- layer_norm.cu - layer norm and its gradients -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_layer_norm_f32 and dtk_layer_norm_grad_f32 on the GPU, and RMS norm
// (LLaMA's: the mean taken as zero, no bias), which the same kernels compute
// with `Rms` set. Forward and the input gradient take one block per row (two
// block sums for the statistics, two for the gradient's means). The weight
// and bias gradients sum over rows, from the statistics the first kernel left
// in `stats`: a block per 32 columns and 256 rows (8 rows at a time) leaves
// partial sums in `stats` after them, and a last kernel adds each column's
// partials in order, so no atomics and the same bits every run.
//
// The _typed entry points (layer and RMS norm) read x, and the gradient dy, as
// bf16 or f16 data (the values a widening before them gives) and may write y,
// or the gradient dx, as 16-bit data (what a narrowing after them stores): the
// GPU plan's "in", "grad_in" and "out", which leave those conversions'
// passes out (convert.cuh).
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "convert.cuh"
#include "reduce.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kColumns = 32, kRowLanes = 8;
constexpr int64_t kChunkRows = 256; // dtk_cuda_layer_norm_grad_f32's contract

using dtk::AnyData;
using dtk::AnyOut;
using dtk::put;
using dtk::widen;

// The kernels take their x, dy, y and dx as f32 pointers (the _f32 entry
// points) or as AnyData and AnyOut (the _typed ones): two instantiations of
// each rather than one per pairing of types.

/// The mean and 1/std of row `xr` (biased variance, two passes as the CPU
/// kernel does); with `Rms`, the mean is taken as zero.
template <bool Rms, typename X>
__device__ void rowStats(X xr, int64_t cols, float eps, float *shared,
                         float &mean, float &rstd) {
  mean = 0.0f;
  if (!Rms) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      s += widen(xr[j]);
    mean = dtk::blockSum(s, shared) / float(cols);
  }
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float d = widen(xr[j]) - mean;
    ss += d * d;
  }
  rstd = 1.0f / sqrtf(dtk::blockSum(ss, shared) / float(cols) + eps);
}

/// `b` is null with `Rms`.
template <bool Rms, typename X, typename Y>
__global__ void layerNorm(X x, const float *w, const float *b, Y y,
                          int64_t cols, float eps) {
  __shared__ float shared[32];
  X xr = x + blockIdx.x * cols; // (cols)
  Y yr = y + blockIdx.x * cols;
  float mean, rstd;
  rowStats<Rms>(xr, cols, eps, shared, mean, rstd);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    put(yr, j, (widen(xr[j]) - mean) * rstd * w[j] + (Rms ? 0.0f : b[j]));
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w
// (RMS norm: without the mean(dxhat) term, its xhat being uncentred)
template <bool Rms, typename X, typename DY, typename DX>
__global__ void layerNormInputGrad(X x, const float *w, DY dy, DX dx,
                                   float *stats, int64_t cols, float eps) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  X xr = x + r * cols; // (cols)
  DY dyr = dy + r * cols;
  DX dxr = dx + r * cols;
  float mean, rstd;
  rowStats<Rms>(xr, cols, eps, shared, mean, rstd);
  float sd = 0.0f, sdx = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float d = widen(dyr[j]) * w[j];
    sd += d;
    sdx += d * ((widen(xr[j]) - mean) * rstd);
  }
  // (Rms is the same for the whole block, so every thread takes the sum.)
  float md = Rms ? 0.0f : dtk::blockSum(sd, shared) / float(cols);
  float mdx = dtk::blockSum(sdx, shared) / float(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float xhat = (widen(xr[j]) - mean) * rstd;
    put(dxr, j, rstd * (widen(dyr[j]) * w[j] - md - xhat * mdx));
  }
  if (threadIdx.x == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

/// Block (x, y): columns [32x, 32x + 32) over rows [256y, 256y + 256),
/// eight rows at a time, summed in a fixed order into `partW` and `partB`
/// (row y of each, `cols` wide; `partB` null for RMS norm).
template <typename X, typename DY>
__global__ void layerNormParamPartials(X x, DY dy, const float *stats,
                                       float *partW, float *partB, int64_t rows,
                                       int64_t cols) {
  __shared__ float lanesW[kRowLanes][kColumns + 1],
      lanesB[kRowLanes][kColumns + 1];
  int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  int64_t first = int64_t(blockIdx.y) * kChunkRows;
  int64_t end = min(rows, first + kChunkRows);
  float accW = 0.0f, accB = 0.0f;
  if (c < cols)
    for (int64_t r = first + threadIdx.y; r < end; r += kRowLanes) {
      float g = widen(dy[r * cols + c]);
      accW += g * ((widen(x[r * cols + c]) - stats[2 * r]) * stats[2 * r + 1]);
      accB += g;
    }
  lanesW[threadIdx.y][threadIdx.x] = accW;
  lanesB[threadIdx.y][threadIdx.x] = accB;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) {
      sw += lanesW[k][threadIdx.x];
      sb += lanesB[k][threadIdx.x];
    }
    partW[blockIdx.y * cols + c] = sw;
    if (partB)
      partB[blockIdx.y * cols + c] = sb;
  }
}

/// dw and db (null for RMS norm): each column's partial sums, chunk by
/// chunk in order.
__global__ void layerNormParamSum(const float *partW, const float *partB,
                                  float *dw, float *db, int64_t chunks,
                                  int64_t cols) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  float sw = 0.0f, sb = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) {
    sw += partW[k * cols + c];
    if (partB)
      sb += partB[k * cols + c];
  }
  dw[c] = sw;
  if (db)
    db[c] = sb;
}

/// Both gradients; `db` is null for RMS norm, whose scratch then holds no
/// bias partials.
template <bool Rms, typename X, typename DY, typename DX>
void normGrad(X x, const float *w, DY dy, DX dx, float *dw, float *db,
              float *stats, int64_t rows, int64_t cols, float eps,
              dtk_stream stream) {
  if (rows > 0)
    layerNormInputGrad<Rms><<<unsigned(rows), kThreads, 0, stream>>>(
        x, w, dy, dx, stats, cols, eps);
  if (cols == 0)
    return;
  // The rows' sums go by chunks of kChunkRows over the whole GPU, then
  // chunk by chunk per column (rows == 0: no chunks, zero gradients).
  int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  float *partW = stats + 2 * rows,
        *partB = Rms ? nullptr : partW + chunks * cols;
  unsigned columnBlocks = unsigned((cols + kColumns - 1) / kColumns);
  if (chunks > 0)
    layerNormParamPartials<<<dim3(columnBlocks, unsigned(chunks)),
                             dim3(kColumns, kRowLanes), 0, stream>>>(
        x, dy, stats, partW, partB, rows, cols);
  layerNormParamSum<<<unsigned((cols + kThreads - 1) / kThreads), kThreads, 0,
                      stream>>>(partW, partB, dw, db, chunks, cols);
}

} // namespace

extern "C" void dtk_cuda_layer_norm_f32(const float *x, const float *w,
                                        const float *b, float *y, int64_t rows,
                                        int64_t cols, float eps,
                                        dtk_stream stream) {
  if (rows == 0)
    return;
  layerNorm<false>
      <<<unsigned(rows), kThreads, 0, stream>>>(x, w, b, y, cols, eps);
}

extern "C" void dtk_cuda_layer_norm_grad_f32(const float *x, const float *w,
                                             const float *dy, float *dx,
                                             float *dw, float *db, float *stats,
                                             int64_t rows, int64_t cols,
                                             float eps, dtk_stream stream) {
  normGrad<false>(x, w, dy, dx, dw, db, stats, rows, cols, eps, stream);
}

extern "C" void dtk_cuda_layer_norm_typed(const void *x, int in, const float *w,
                                          const float *b, void *y, int out,
                                          int64_t rows, int64_t cols, float eps,
                                          dtk_stream stream) {
  if (rows > 0)
    layerNorm<false><<<unsigned(rows), kThreads, 0, stream>>>(
        AnyData{x, in}, w, b, AnyOut{y, out}, cols, eps);
}

extern "C" void
dtk_cuda_layer_norm_grad_typed(const void *x, int in, const float *w,
                               const void *dy, int grad, void *dx, int out,
                               float *dw, float *db, float *stats, int64_t rows,
                               int64_t cols, float eps, dtk_stream stream) {
  normGrad<false>(AnyData{x, in}, w, AnyData{dy, grad}, AnyOut{dx, out}, dw, db,
                  stats, rows, cols, eps, stream);
}

extern "C" void dtk_cuda_rms_norm_typed(const void *x, int in, const float *w,
                                        void *y, int out, int64_t rows,
                                        int64_t cols, float eps,
                                        dtk_stream stream) {
  if (rows > 0)
    layerNorm<true><<<unsigned(rows), kThreads, 0, stream>>>(
        AnyData{x, in}, w, static_cast<const float *>(nullptr), AnyOut{y, out},
        cols, eps);
}

extern "C" void dtk_cuda_rms_norm_grad_typed(const void *x, int in,
                                             const float *w, const void *dy,
                                             int grad, void *dx, int out,
                                             float *dw, float *stats,
                                             int64_t rows, int64_t cols,
                                             float eps, dtk_stream stream) {
  normGrad<true>(AnyData{x, in}, w, AnyData{dy, grad}, AnyOut{dx, out}, dw,
                 static_cast<float *>(nullptr), stats, rows, cols, eps, stream);
}

extern "C" void dtk_cuda_rms_norm_f32(const float *x, const float *w, float *y,
                                      int64_t rows, int64_t cols, float eps,
                                      dtk_stream stream) {
  if (rows == 0)
    return;
  layerNorm<true>
      <<<unsigned(rows), kThreads, 0, stream>>>(x, w, nullptr, y, cols, eps);
}

extern "C" void dtk_cuda_rms_norm_grad_f32(const float *x, const float *w,
                                           const float *dy, float *dx,
                                           float *dw, float *stats,
                                           int64_t rows, int64_t cols,
                                           float eps, dtk_stream stream) {
  normGrad<true>(x, w, dy, dx, dw, nullptr, stats, rows, cols, eps, stream);
}
