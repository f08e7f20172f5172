//===- conv2d.cu - 2-D convolution and its gradients through a product ----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_conv2d{,_input_grad,_weight_grad}_f32 on the GPU as one matrix product
// per group, which the caller's `gemm` runs (cuBLAS, in the runtime): the
// windows of every sample are unrolled into `col`, laid out [C kh kw, N, P]
// (P = oh ow), so that a group's rows are one matrix whose columns run over
// all samples, and the output is taken as [O, N, P], then put in NCHW order:
//
//   forward        Y'[g]   = W[g] col[g]          (og x N P)
//   input grad     dcol[g] = W[g]^T dY'[g]        (K x N P), then summed back
//                                                 into the image (col2im)
//   weight grad    dW[g]   = dY'[g] col[g]^T      (og x K)
//
// with K = C / groups kh kw. Summing the unrolled windows back takes a thread
// per input element, which gathers its (ki, kj) taps in order: no atomics,
// so every run gives the same bits (the product's own are cuBLAS's).
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

namespace {

constexpr int kThreads = 256;

struct Conv {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
};

unsigned blocks(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

/// col[(cc kh + ki) kw + kj][s][oy ow + ox] = x[s][cc][oy sh - ph + ki dh]
/// [ox sw - pw + kj dw], or 0 in the padding.
__global__ void unroll(const float *x, float *col, Conv v) {
  int64_t P = v.oh * v.ow, total = v.c * v.kh * v.kw * v.n * P;
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= total)
    return;
  int64_t p = k % P, s = (k / P) % v.n, row = k / (P * v.n);
  int64_t kj = row % v.kw, ki = (row / v.kw) % v.kh, cc = row / (v.kh * v.kw);
  int64_t y = (p / v.ow) * v.sh - v.ph + ki * v.dh,
          xx = (p % v.ow) * v.sw - v.pw + kj * v.dw;
  col[k] = y >= 0 && y < v.h && xx >= 0 && xx < v.w
               ? x[((s * v.c + cc) * v.h + y) * v.w + xx]
               : 0.0f;
}

/// dx[s][cc][y][x] = the sum over the taps (ki, kj), in order, of the
/// unrolled gradient of the output position that tap reads it from.
__global__ void rollBack(const float *dcol, float *dx, Conv v) {
  int64_t total = v.n * v.c * v.h * v.w, P = v.oh * v.ow;
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= total)
    return;
  int64_t xx = k % v.w, y = (k / v.w) % v.h, cc = (k / (v.w * v.h)) % v.c,
          s = k / (v.w * v.h * v.c);
  float sum = 0.0f;
  for (int64_t ki = 0; ki < v.kh; ++ki) {
    int64_t top = y + v.ph - ki * v.dh;
    if (top < 0 || top % v.sh)
      continue;
    int64_t oy = top / v.sh;
    if (oy >= v.oh)
      continue;
    for (int64_t kj = 0; kj < v.kw; ++kj) {
      int64_t left = xx + v.pw - kj * v.dw;
      if (left < 0 || left % v.sw)
        continue;
      int64_t ox = left / v.sw;
      if (ox >= v.ow)
        continue;
      int64_t row = (cc * v.kh + ki) * v.kw + kj;
      sum += dcol[(row * v.n + s) * P + oy * v.ow + ox];
    }
  }
  dx[k] = sum;
}

/// dst[b][a][i] = src[a][b][i] for src [A, B, I].
__global__ void swapOuter(const float *src, float *dst, int64_t a, int64_t b,
                          int64_t inner) {
  int64_t total = a * b * inner;
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= total)
    return;
  int64_t i = k % inner, bi = (k / inner) % b, ai = k / (inner * b);
  dst[(bi * a + ai) * inner + i] = src[k];
}

Conv sizes(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh,
           int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw,
           int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups) {
  return {n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups};
}

/// The scratch's two parts: the unrolled windows, then an output-sized
/// [O, N, P] buffer.
float *unrolled(float *scratch) { return scratch; }
float *outputs(float *scratch, const Conv &v) {
  return scratch + v.c * v.kh * v.kw * v.n * v.oh * v.ow;
}

} // namespace

#define DTK_CUDA_CONV_SIZES                                                    \
  int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh,           \
      int64_t kw, int64_t oh, int64_t ow, int64_t sh, int64_t sw, int64_t ph,  \
      int64_t pw, int64_t dh, int64_t dw, int64_t groups
#define DTK_CUDA_CONV                                                          \
  n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups

extern "C" int64_t dtk_cuda_conv2d_scratch_floats(DTK_CUDA_CONV_SIZES) {
  (void)h, (void)w, (void)sh, (void)sw, (void)ph, (void)pw, (void)dh, (void)dw,
      (void)groups;
  return (c * kh * kw + o) * n * oh * ow;
}

extern "C" int dtk_cuda_conv2d_f32(const float *x, const float *wt, float *y,
                                   float *scratch, DTK_CUDA_CONV_SIZES,
                                   dtk_cuda_gemm gemm, void *ctx,
                                   dtk_stream stream) {
  Conv v = sizes(DTK_CUDA_CONV);
  int64_t P = oh * ow, K = c / groups * kh * kw, og = o / groups;
  if (n * o * P == 0)
    return 0;
  float *col = unrolled(scratch), *out = outputs(scratch, v);
  unroll<<<blocks(c * kh * kw * n * P), kThreads, 0, stream>>>(x, col, v);
  if (int e = gemm(ctx, wt, col, out, groups, og, n * P, K, 0, 0, 0))
    return e;
  swapOuter<<<blocks(o * n * P), kThreads, 0, stream>>>(out, y, o, n, P);
  return 0;
}

extern "C" int dtk_cuda_conv2d_input_grad_f32(const float *dy, const float *wt,
                                              float *dx, float *scratch,
                                              DTK_CUDA_CONV_SIZES,
                                              dtk_cuda_gemm gemm, void *ctx,
                                              dtk_stream stream) {
  Conv v = sizes(DTK_CUDA_CONV);
  int64_t P = oh * ow, K = c / groups * kh * kw, og = o / groups;
  if (n * c * h * w == 0)
    return 0;
  float *dcol = unrolled(scratch), *grad = outputs(scratch, v);
  swapOuter<<<blocks(n * o * P), kThreads, 0, stream>>>(dy, grad, n, o, P);
  if (int e = gemm(ctx, wt, grad, dcol, groups, K, n * P, og, 1, 0, 0))
    return e;
  rollBack<<<blocks(n * c * h * w), kThreads, 0, stream>>>(dcol, dx, v);
  return 0;
}

extern "C" int dtk_cuda_conv2d_weight_grad_f32(const float *x, const float *dy,
                                               float *dwt, float *scratch,
                                               DTK_CUDA_CONV_SIZES,
                                               dtk_cuda_gemm gemm, void *ctx,
                                               dtk_stream stream) {
  Conv v = sizes(DTK_CUDA_CONV);
  int64_t P = oh * ow, K = c / groups * kh * kw, og = o / groups;
  if (o * K == 0)
    return 0;
  float *col = unrolled(scratch), *grad = outputs(scratch, v);
  unroll<<<blocks(c * kh * kw * n * P), kThreads, 0, stream>>>(x, col, v);
  swapOuter<<<blocks(n * o * P), kThreads, 0, stream>>>(dy, grad, n, o, P);
  // No samples (n P = 0): the product of nothing, zero.
  return gemm(ctx, grad, col, dwt, groups, og, K, n * P, 0, 1, 0);
}
