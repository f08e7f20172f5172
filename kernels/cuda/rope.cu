//===- rope.cu - rotary position embedding --------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_rope_f32 on the GPU, in the CPU kernel's two steps: the angles' cosines
// and sines are tabulated first ([T, D/2] each, in double, then rounded, as
// Hugging Face's rotary embedding caches them), so the table is the CPU's to
// the last bit wherever the device's double cos and sin round as glibc's
// do; then a thread per pair (i, i + D/2) of a row rotates it.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"
#include "dtk/rope_scaling.h"

namespace {

constexpr int kThreads = 256;

/// Thread (p, i): the angle of position p and pair i.
__global__ void ropeTable(float *cosT, float *sinT, int64_t t, int64_t d,
                          float theta, float factor, float lowFreqFactor,
                          float highFreqFactor, float original) {
  int64_t half = d / 2;
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= t * half)
    return;
  int64_t p = k / half, i = k % half;
  // Hugging Face's inv_freq, 1 / theta^(2i/D), rounded to float as it keeps it.
  double base = 1.0 / pow(double(theta), double(2 * i) / double(d));
  float invFreq = float(
      dtk_rope_scaled(base, factor, lowFreqFactor, highFreqFactor, original));
  double angle = double(float(p) * invFreq);
  cosT[k] = float(cos(angle));
  sinT[k] = float(sin(angle));
}

/// Thread k: pair k % (D/2) of row k / (D/2) (rows are [outer, T] in order).
__global__ void ropeRotate(const float *x, float *y, const float *cosT,
                           const float *sinT, int64_t rows, int64_t t,
                           int64_t d, float sign) {
  int64_t half = d / 2;
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * half)
    return;
  int64_t r = k / half, i = k % half;
  int64_t at = (r % t) * half + i;
  float c = cosT[at], sn = sign * sinT[at];
  float lo = x[r * d + i], hi = x[r * d + i + half];
  y[r * d + i] = lo * c - hi * sn;
  y[r * d + i + half] = hi * c + lo * sn;
}

unsigned blocks(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

} // namespace

extern "C" void dtk_cuda_rope_f32(const float *x, float *y, float *table,
                                  int64_t outer, int64_t t, int64_t d,
                                  float theta, float factor,
                                  float low_freq_factor, float high_freq_factor,
                                  float original, int32_t inverse,
                                  dtk_stream stream) {
  int64_t half = d / 2;
  if (outer == 0 || t == 0 || half == 0)
    return;
  float *cosT = table, *sinT = table + t * half;
  ropeTable<<<blocks(t * half), kThreads, 0, stream>>>(
      cosT, sinT, t, d, theta, factor, low_freq_factor, high_freq_factor,
      original);
  ropeRotate<<<blocks(outer * t * half), kThreads, 0, stream>>>(
      x, y, cosT, sinT, outer * t, t, d, inverse ? -1.0f : 1.0f);
}
