//===- pool2d.cu - 2-D max and average pooling and their gradients --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_{max,avg}_pool2d{,_grad}_f32 on the GPU, with the CPU kernels'
// semantics and bits: max pooling skips the padding and takes a window's
// first largest input in row-major order (NaN winning); average pooling
// divides by the whole window. The forward passes take a thread per output.
// The gradients take a thread per input, which gathers the windows that hold
// it in the CPU kernel's order (row-major over the outputs), so the shares
// of overlapping windows add up in the same order: no atomics, the CPU's
// bits.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

namespace {

constexpr int kThreads = 256;

struct Pool {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
};

/// Whether input f replaces `value` as a window's choice (the CPU's `beats`).
__device__ bool beats(float f, float value) {
  return f > value || (f != f && value == value);
}

/// The flat index in its plane of window (i, j)'s first largest input, or -1
/// when the window lies in the padding.
__device__ int64_t argmax(const Pool &p, const float *plane, int64_t i,
                          int64_t j) {
  int64_t y = i * p.sh - p.ph, x = j * p.sw - p.pw;
  int64_t y0 = max(y, int64_t(0)), y1 = min(y + p.kh, p.h);
  int64_t x0 = max(x, int64_t(0)), x1 = min(x + p.kw, p.w);
  int64_t best = -1;
  float value = 0.0f;
  for (int64_t r = y0; r < y1; ++r)
    for (int64_t c = x0; c < x1; ++c) {
      float f = plane[r * p.w + c];
      if (best < 0 || beats(f, value)) {
        best = r * p.w + c;
        value = f;
      }
    }
  return best;
}

/// The outputs along one dimension whose windows hold input `at`: [*lo, *hi).
__device__ void windowsHolding(int64_t at, int64_t k, int64_t s, int64_t pad,
                               int64_t out, int64_t *lo, int64_t *hi) {
  // Window i covers [i s - pad, i s - pad + k): it holds `at` when
  // i s <= at + pad < i s + k.
  int64_t top = at + pad;
  int64_t first = top - k + 1 <= 0 ? 0 : (top - k + 1 + s - 1) / s;
  *lo = first;
  *hi = min(out, top / s + 1);
}

__global__ void maxPool(const float *x, float *y, Pool p) {
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= p.planes * p.oh * p.ow)
    return;
  int64_t q = k / (p.oh * p.ow), i = (k / p.ow) % p.oh, j = k % p.ow;
  const float *plane = x + q * p.h * p.w;
  int64_t at = argmax(p, plane, i, j);
  y[k] = at < 0 ? -INFINITY : plane[at];
}

__global__ void maxPoolGrad(const float *x, const float *dy, float *dx,
                            Pool p) {
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= p.planes * p.h * p.w)
    return;
  int64_t q = k / (p.h * p.w), at = k % (p.h * p.w);
  int64_t r = at / p.w, c = at % p.w;
  const float *plane = x + q * p.h * p.w, *g = dy + q * p.oh * p.ow;
  int64_t i0, i1, j0, j1;
  windowsHolding(r, p.kh, p.sh, p.ph, p.oh, &i0, &i1);
  windowsHolding(c, p.kw, p.sw, p.pw, p.ow, &j0, &j1);
  float sum = 0.0f;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j)
      if (argmax(p, plane, i, j) == at)
        sum += g[i * p.ow + j];
  dx[k] = sum;
}

__global__ void avgPool(const float *x, float *y, Pool p) {
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= p.planes * p.oh * p.ow)
    return;
  int64_t q = k / (p.oh * p.ow), i = (k / p.ow) % p.oh, j = k % p.ow;
  const float *plane = x + q * p.h * p.w;
  int64_t y0 = i * p.sh - p.ph, x0 = j * p.sw - p.pw;
  float sum = 0.0f;
  for (int64_t r = max(y0, int64_t(0)); r < min(y0 + p.kh, p.h); ++r)
    for (int64_t c = max(x0, int64_t(0)); c < min(x0 + p.kw, p.w); ++c)
      sum += plane[r * p.w + c];
  y[k] = sum * (1.0f / float(p.kh * p.kw));
}

__global__ void avgPoolGrad(const float *dy, float *dx, Pool p) {
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= p.planes * p.h * p.w)
    return;
  int64_t q = k / (p.h * p.w), at = k % (p.h * p.w);
  int64_t i0, i1, j0, j1;
  windowsHolding(at / p.w, p.kh, p.sh, p.ph, p.oh, &i0, &i1);
  windowsHolding(at % p.w, p.kw, p.sw, p.pw, p.ow, &j0, &j1);
  const float *g = dy + q * p.oh * p.ow;
  float scale = 1.0f / float(p.kh * p.kw), sum = 0.0f;
  // Each share rounded before it is added, as the CPU kernel (ISO C, no
  // contraction) does: a fused multiply-add would change the last bit.
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j)
      sum = __fadd_rn(sum, __fmul_rn(g[i * p.ow + j], scale));
  dx[k] = sum;
}

unsigned blocks(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

} // namespace

#define DTK_CUDA_POOL_SIZES                                                    \
  int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t kh,    \
      int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,              \
      dtk_stream stream
#define DTK_CUDA_POOL                                                          \
  { planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw }

extern "C" void dtk_cuda_max_pool2d_f32(const float *x, float *y,
                                        DTK_CUDA_POOL_SIZES) {
  if (planes * oh * ow > 0)
    maxPool<<<blocks(planes * oh * ow), kThreads, 0, stream>>>(
        x, y, Pool DTK_CUDA_POOL);
}

extern "C" void dtk_cuda_max_pool2d_grad_f32(const float *x, const float *dy,
                                             float *dx, DTK_CUDA_POOL_SIZES) {
  if (planes * h * w > 0)
    maxPoolGrad<<<blocks(planes * h * w), kThreads, 0, stream>>>(
        x, dy, dx, Pool DTK_CUDA_POOL);
}

extern "C" void dtk_cuda_avg_pool2d_f32(const float *x, float *y,
                                        DTK_CUDA_POOL_SIZES) {
  if (planes * oh * ow > 0)
    avgPool<<<blocks(planes * oh * ow), kThreads, 0, stream>>>(
        x, y, Pool DTK_CUDA_POOL);
}

extern "C" void dtk_cuda_avg_pool2d_grad_f32(const float *dy, float *dx,
                                             DTK_CUDA_POOL_SIZES) {
  if (planes * h * w > 0)
    avgPoolGrad<<<blocks(planes * h * w), kThreads, 0, stream>>>(
        dy, dx, Pool DTK_CUDA_POOL);
}
