//===- layer_norm.cu - layer norm and its gradients -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_layer_norm_f32 and dtk_layer_norm_grad_f32 on the GPU. Forward and the
// input gradient take one block per row (two block sums for the statistics,
// two for the gradient's means). The weight and bias gradients sum over rows,
// which a second kernel does column by column from the statistics the first
// left in `stats`: 32 columns per block, 8 rows at a time, summed in a fixed
// order, so no atomics and the same bits every run.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "reduce.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kColumns = 32, kRowLanes = 8;

/// The mean and 1/std of row `xr` (biased variance, two passes as the CPU
/// kernel does).
__device__ void rowStats(const float *xr, int64_t cols, float eps,
                         float *shared, float &mean, float &rstd) {
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    s += xr[j];
  mean = dtk::blockSum(s, shared) / float(cols);
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float d = xr[j] - mean;
    ss += d * d;
  }
  rstd = 1.0f / sqrtf(dtk::blockSum(ss, shared) / float(cols) + eps);
}

__global__ void layerNorm(const float *x, const float *w, const float *b,
                          float *y, int64_t cols, float eps) {
  __shared__ float shared[32];
  const float *xr = x + blockIdx.x * cols; // (cols)
  float *yr = y + blockIdx.x * cols;
  float mean, rstd;
  rowStats(xr, cols, eps, shared, mean, rstd);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w
__global__ void layerNormInputGrad(const float *x, const float *w,
                                   const float *dy, float *dx, float *stats,
                                   int64_t cols, float eps) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  const float *xr = x + r * cols, *dyr = dy + r * cols; // (cols)
  float *dxr = dx + r * cols;
  float mean, rstd;
  rowStats(xr, cols, eps, shared, mean, rstd);
  float sd = 0.0f, sdx = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float d = dyr[j] * w[j];
    sd += d;
    sdx += d * ((xr[j] - mean) * rstd);
  }
  float md = dtk::blockSum(sd, shared) / float(cols);
  float mdx = dtk::blockSum(sdx, shared) / float(cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float xhat = (xr[j] - mean) * rstd;
    dxr[j] = rstd * (dyr[j] * w[j] - md - xhat * mdx);
  }
  if (threadIdx.x == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

__global__ void layerNormParamGrad(const float *x, const float *dy,
                                   const float *stats, float *dw, float *db,
                                   int64_t rows, int64_t cols) {
  __shared__ float partW[kRowLanes][kColumns + 1], partB[kRowLanes][kColumns + 1];
  int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  float accW = 0.0f, accB = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
      float g = dy[r * cols + c];
      accW += g * ((x[r * cols + c] - stats[2 * r]) * stats[2 * r + 1]);
      accB += g;
    }
  partW[threadIdx.y][threadIdx.x] = accW;
  partB[threadIdx.y][threadIdx.x] = accB;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) {
      sw += partW[k][threadIdx.x];
      sb += partB[k][threadIdx.x];
    }
    dw[c] = sw;
    db[c] = sb;
  }
}

} // namespace

extern "C" void dtk_cuda_layer_norm_f32(const float *x, const float *w,
                                        const float *b, float *y, int64_t rows,
                                        int64_t cols, float eps,
                                        dtk_stream stream) {
  if (rows == 0)
    return;
  layerNorm<<<unsigned(rows), kThreads, 0, stream>>>(x, w, b, y, cols, eps);
}

extern "C" void dtk_cuda_layer_norm_grad_f32(const float *x, const float *w,
                                             const float *dy, float *dx,
                                             float *dw, float *db, float *stats,
                                             int64_t rows, int64_t cols,
                                             float eps, dtk_stream stream) {
  if (rows > 0)
    layerNormInputGrad<<<unsigned(rows), kThreads, 0, stream>>>(
        x, w, dy, dx, stats, cols, eps);
  unsigned blocks = unsigned((cols + kColumns - 1) / kColumns);
  if (blocks > 0)
    layerNormParamGrad<<<blocks, dim3(kColumns, kRowLanes), 0, stream>>>(
        x, dy, stats, dw, db, rows, cols);
}
