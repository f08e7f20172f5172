//===- layer_norm.cu - layer norm and its gradients -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_layer_norm_f32 and dtk_layer_norm_grad_f32 on the GPU, and RMS norm
// (LLaMA's: the mean taken as zero, no bias), which the same kernels compute
// with `Rms` set. Forward and the input gradient take a warp per row for
// rows of up to 1024 (the row in registers, its sums by shuffles: no
// barriers), and one block per row for wider rows (two block sums for the
// statistics, two for the gradient's means). A block per 768-wide row meant
// three elements a thread and eight barriers a row: on an H200 GPT-2's 25
// layer norm gradients took 3.3 ms of a step of 16 x 1024 tokens (with the
// weight gradients' partial sums), about 1.2 TB/s by the cost model. The weight
// and bias gradients sum over rows in chunks of 64: the warp kernel adds its
// rows' terms as it goes (x and dy read once) and its block's warps in order;
// for wider rows a block per 32 columns and 64 rows (8 rows at a time) reads
// them again with the statistics the first kernel left in `stats`. Either
// leaves a chunk's partial sums in `stats` after the statistics, and a last
// kernel adds each column's partials in order, so no atomics and the same
// bits every run.
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

#include <type_traits>

namespace {

constexpr int kThreads = 256;
constexpr int kColumns = 32, kRowLanes = 8;
// Rows a weight gradient's partial sum covers: dtk_cuda_layer_norm_grad_f32's
// scratch contract. 64 gives GPT-2's 16 384 rows 256 blocks of the warp
// kernel, two a multiprocessor.
constexpr int64_t kChunkRows = 64;

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

/// A row of up to 32 E columns as a warp holds it: lane l has columns l,
/// l + 32, ..., as f32, and zeros past `cols`.
template <int E, typename X>
__device__ void loadRow(float (&v)[E], X xr, int64_t cols, int lane) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    int64_t j = lane + 32 * e;
    v[e] = j < cols ? widen(xr[j]) : 0.0f;
  }
}

/// The warp's sum, in every lane (the same butterfly order in each).
__device__ float warpSum(float v) { return dtk::warpReduce(v, dtk::Sum{}); }

/// rowStats for a row a warp holds (loadRow): the mean and 1/std, two
/// passes over the registers.
template <int E, bool Rms>
__device__ void warpRowStats(const float (&v)[E], int64_t cols, int lane,
                             float eps, float &mean, float &rstd) {
  mean = 0.0f;
  if (!Rms) {
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e)
      s += v[e];
    mean = warpSum(s) / float(cols);
  }
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (lane + 32 * e < cols) {
      float d = v[e] - mean;
      ss += d * d;
    }
  rstd = 1.0f / sqrtf(warpSum(ss) / float(cols) + eps);
}

/// layerNorm with a warp per row of up to 32 E columns; kThreads / 32 rows
/// a block.
template <int E, bool Rms, typename X, typename Y>
__global__ void __launch_bounds__(kThreads)
    layerNormWarps(X x, const float *w, const float *b, Y y, int64_t rows,
                   int64_t cols, float eps) {
  int lane = int(threadIdx.x % 32);
  int64_t r = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (r >= rows) // the whole warp: no barrier follows
    return;
  float v[E];
  loadRow(v, x + r * cols, cols, lane);
  float mean, rstd;
  warpRowStats<E, Rms>(v, cols, lane, eps, mean, rstd);
  Y yr = y + r * cols;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    int64_t j = lane + 32 * e;
    if (j < cols)
      put(yr, j, (v[e] - mean) * rstd * w[j] + (Rms ? 0.0f : b[j]));
  }
}

/// Both gradients of rows [64 b, 64 b + 64) (block b, kChunkRows rows),
/// each warp taking 8 of them in order, a row of up to 32 E columns in
/// registers: dx as layerNormInputGrad computes it, and the weight and bias
/// gradients' sums over the block's rows (each warp's rows in order, then
/// the warps in order), row b of `partW` and `partB` (null for RMS norm), as
/// layerNormParamPartials leaves them. x and dy are read once.
template <int E, bool Rms, typename X, typename DY, typename DX>
__global__ void __launch_bounds__(kThreads)
    layerNormGradWarps(X x, const float *w, DY dy, DX dx, float *partW,
                       float *partB, int64_t rows, int64_t cols, float eps) {
  constexpr int kWarps = kThreads / 32, kWarpRows = int(kChunkRows) / kWarps;
  __shared__ float lanes[kWarps][32 * E];
  int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  float accW[E] = {}, accB[E] = {};
  for (int i = 0; i < kWarpRows; ++i) {
    int64_t r = int64_t(blockIdx.x) * kChunkRows + warp * kWarpRows + i;
    if (r >= rows) // the same for the whole warp
      break;
    float v[E], g[E];
    loadRow(v, x + r * cols, cols, lane);
    loadRow(g, dy + r * cols, cols, lane);
    float mean, rstd;
    warpRowStats<E, Rms>(v, cols, lane, eps, mean, rstd);
    // v becomes xhat and g dxhat = dy * w, as the block kernel computes
    // them; the weight and bias gradients take dy * xhat and dy first.
    float sd = 0.0f, sdx = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      int64_t j = lane + 32 * e;
      if (j < cols) {
        v[e] = (v[e] - mean) * rstd;
        accW[e] += g[e] * v[e];
        accB[e] += g[e];
        g[e] *= w[j];
        sd += g[e];
        sdx += g[e] * v[e];
      }
    }
    float md = Rms ? 0.0f : warpSum(sd) / float(cols);
    float mdx = warpSum(sdx) / float(cols);
    DX dxr = dx + r * cols;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      int64_t j = lane + 32 * e;
      if (j < cols)
        put(dxr, j, rstd * (g[e] - md - v[e] * mdx));
    }
  }
  // The warps' sums added in warp order, one column a thread.
  auto combine = [&](const float(&acc)[E], float *part) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      lanes[warp][lane + 32 * e] = acc[e];
    __syncthreads();
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      float sum = 0.0f;
      for (int k = 0; k < kWarps; ++k)
        sum += lanes[k][c];
      part[blockIdx.x * cols + c] = sum;
    }
    __syncthreads(); // `lanes` is free again
  };
  combine(accW, partW);
  if (partB)
    combine(accB, partB);
}

/// Calls f with std::integral_constant<int, E> for rows of `cols` (E
/// columns a lane: 8, 16, 24 or 32); false for rows wider than 1024, which
/// take a block each.
template <typename F> bool withRowWidth(int64_t cols, F &&f) {
  if (cols <= 256)
    f(std::integral_constant<int, 8>{});
  else if (cols <= 512)
    f(std::integral_constant<int, 16>{});
  else if (cols <= 768)
    f(std::integral_constant<int, 24>{});
  else if (cols <= 1024)
    f(std::integral_constant<int, 32>{});
  else
    return false;
  return true;
}

/// The forward over `rows`: a warp per row where rows are narrow enough,
/// else a block per row.
template <bool Rms, typename X, typename Y>
void norm(X x, const float *w, const float *b, Y y, int64_t rows, int64_t cols,
          float eps, dtk_stream stream) {
  if (rows == 0)
    return;
  unsigned blocks = unsigned((rows + kThreads / 32 - 1) / (kThreads / 32));
  if (!withRowWidth(cols, [&](auto e) {
        layerNormWarps<decltype(e)::value, Rms>
            <<<blocks, kThreads, 0, stream>>>(x, w, b, y, rows, cols, eps);
      }))
    layerNorm<Rms>
        <<<unsigned(rows), kThreads, 0, stream>>>(x, w, b, y, cols, eps);
}

/// Block (x, y): rows [64x, 64x + 64) of columns [32y, 32y + 32), eight
/// rows at a time, summed in a fixed order into `partW` and `partB` (row x
/// of each, `cols` wide; `partB` null for RMS norm). The chunks go along x,
/// whose 2^31 blocks hold any batch (y's 65 535 would stop at 4 M rows).
template <typename X, typename DY>
__global__ void layerNormParamPartials(X x, DY dy, const float *stats,
                                       float *partW, float *partB, int64_t rows,
                                       int64_t cols) {
  __shared__ float lanesW[kRowLanes][kColumns + 1],
      lanesB[kRowLanes][kColumns + 1];
  int64_t c = int64_t(blockIdx.y) * kColumns + threadIdx.x;
  int64_t first = int64_t(blockIdx.x) * kChunkRows;
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
    partW[blockIdx.x * cols + c] = sw;
    if (partB)
      partB[blockIdx.x * cols + c] = sb;
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
  if (cols == 0)
    return;
  // The rows' sums go by chunks of kChunkRows over the whole GPU, then
  // chunk by chunk per column (rows == 0: no chunks, zero gradients).
  int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  float *partW = stats + 2 * rows,
        *partB = Rms ? nullptr : partW + chunks * cols;
  // Rows up to 1024 wide: one kernel, a warp per row (x and dy read once);
  // wider ones a block per row for dx, then the partial sums.
  bool warps = chunks > 0 && withRowWidth(cols, [&](auto e) {
                 layerNormGradWarps<decltype(e)::value, Rms>
                     <<<unsigned(chunks), kThreads, 0, stream>>>(
                         x, w, dy, dx, partW, partB, rows, cols, eps);
               });
  if (!warps && chunks > 0) {
    layerNormInputGrad<Rms><<<unsigned(rows), kThreads, 0, stream>>>(
        x, w, dy, dx, stats, cols, eps);
    unsigned columnBlocks = unsigned((cols + kColumns - 1) / kColumns);
    layerNormParamPartials<<<dim3(unsigned(chunks), columnBlocks),
                             dim3(kColumns, kRowLanes), 0, stream>>>(
        x, dy, stats, partW, partB, rows, cols);
  }
  layerNormParamSum<<<unsigned((cols + kThreads - 1) / kThreads), kThreads, 0,
                      stream>>>(partW, partB, dw, db, chunks, cols);
}

} // namespace

extern "C" void dtk_cuda_layer_norm_f32(const float *x, const float *w,
                                        const float *b, float *y, int64_t rows,
                                        int64_t cols, float eps,
                                        dtk_stream stream) {
  norm<false>(x, w, b, y, rows, cols, eps, stream);
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
  norm<false>(AnyData{x, in}, w, b, AnyOut{y, out}, rows, cols, eps, stream);
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
  norm<true>(AnyData{x, in}, w, static_cast<const float *>(nullptr),
             AnyOut{y, out}, rows, cols, eps, stream);
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
  norm<true>(x, w, static_cast<const float *>(nullptr), y, rows, cols, eps,
             stream);
}

extern "C" void dtk_cuda_rms_norm_grad_f32(const float *x, const float *w,
                                           const float *dy, float *dx,
                                           float *dw, float *stats,
                                           int64_t rows, int64_t cols,
                                           float eps, dtk_stream stream) {
  normGrad<true>(x, w, dy, dx, dw, nullptr, stats, rows, cols, eps, stream);
}
