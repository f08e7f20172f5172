//===- attention.cu - fused attention, forward and backward ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_attention_f32 and dtk_attention_grad_f32 on the GPU with
// FlashAttention's algorithm: the t x t scores never reach global memory.
// Forward gives each query row a block that walks the keys in tiles of
// kTile, keeping a running maximum m and sum l of the exponentials and an
// output accumulator that is rescaled by exp(m_old - m_new) whenever the
// maximum grows (the online softmax).
//
// Backward splits as FlashAttention-2 does, so that nothing is summed with
// atomics: a block per query row recomputes its log-sum-exp and
// D = rowsum(dO * O) = sum_j p_j (dO . v_j), then dQ; a block per key row
// then sums its dK and dV over the query rows that see it, reading the query
// rows' statistics from `scratch`. With P = softmax(S), S = Q K^T / sqrt(d):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = dS K / sqrt(d),
//   dK = dS^T Q / sqrt(d).
//
// This first version favours being right over being fast: each thread takes
// one key (or query) of a tile and forms its dot products alone, in f32, not
// on tensor cores.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "reduce.cuh"

namespace {

constexpr int kTile = 128;             // keys (or queries) per tile = threads
constexpr int kMaxD = 256;             // head dimension bound
constexpr int kPer = kMaxD / kTile;    // accumulator columns per thread

__device__ float dot(const float *a, const float *b, int64_t d) {
  float s = 0.0f;
  for (int64_t c = 0; c < d; ++c)
    s += a[c] * b[c];
  return s;
}

/// Loads row `src` of d floats into shared `dst`.
__device__ void loadRow(float *dst, const float *src, int64_t d) {
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
    dst[c] = src[c];
}

__global__ void attentionForward(const float *q, const float *k,
                                 const float *v, float *o, int64_t t,
                                 int64_t d, int32_t causal, float scale) {
  __shared__ float qi[kMaxD], p[kTile], shared[32];
  if (d > kMaxD)
    __trap();
  int64_t row = blockIdx.x, i = row % t, base = (row / t) * t * d;
  loadRow(qi, q + base + i * d, d);
  __syncthreads();
  int64_t visible = causal ? i + 1 : t;
  float m = -INFINITY, l = 0.0f, acc[kPer] = {};
  for (int64_t j0 = 0; j0 < visible; j0 += kTile) {
    int64_t j = j0 + threadIdx.x;
    float s = j < visible ? dot(qi, k + base + j * d, d) * scale : -INFINITY;
    float mNew = fmaxf(m, dtk::blockMax(s, shared));
    float pj = j < visible ? expf(s - mNew) : 0.0f;
    p[threadIdx.x] = pj;
    float correction = expf(m - mNew);
    l = l * correction + dtk::blockSum(pj, shared); // synchronises: p is ready
    int64_t n = min(int64_t(kTile), visible - j0);
    for (int a = 0; a < kPer; ++a) {
      int64_t c = threadIdx.x + a * kTile;
      if (c >= d)
        break;
      float sum = 0.0f;
      for (int64_t jj = 0; jj < n; ++jj)
        sum += p[jj] * v[base + (j0 + jj) * d + c];
      acc[a] = acc[a] * correction + sum;
    }
    m = mNew;
    __syncthreads(); // before the next tile overwrites p
  }
  for (int a = 0; a < kPer; ++a) {
    int64_t c = threadIdx.x + a * kTile;
    if (c < d)
      o[base + i * d + c] = acc[a] / l;
  }
}

/// Per query row: its log-sum-exp and D into `stats`, and dQ.
__global__ void attentionQueryGrad(const float *q, const float *k,
                                   const float *v, const float *dout,
                                   float *dq, float *stats, int64_t t,
                                   int64_t d, int32_t causal, float scale) {
  __shared__ float qi[kMaxD], doi[kMaxD], ds[kTile], shared[32];
  if (d > kMaxD)
    __trap();
  int64_t row = blockIdx.x, i = row % t, base = (row / t) * t * d;
  loadRow(qi, q + base + i * d, d);
  loadRow(doi, dout + base + i * d, d);
  __syncthreads();
  int64_t visible = causal ? i + 1 : t;
  // The log-sum-exp of the row's scores, online over tiles.
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = 0; j0 < visible; j0 += kTile) {
    int64_t j = j0 + threadIdx.x;
    float s = j < visible ? dot(qi, k + base + j * d, d) * scale : -INFINITY;
    float mNew = fmaxf(m, dtk::blockMax(s, shared));
    float e = j < visible ? expf(s - mNew) : 0.0f;
    l = l * expf(m - mNew) + dtk::blockSum(e, shared);
    m = mNew;
  }
  float lse = m + logf(l);
  // D = sum_j p_j (dO . v_j).
  float dsum = 0.0f;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
    float pj = expf(dot(qi, k + base + j * d, d) * scale - lse);
    dsum += pj * dot(doi, v + base + j * d, d);
  }
  float D = dtk::blockSum(dsum, shared);
  // dQ = scale * sum_j p_j (dO . v_j - D) k_j.
  float acc[kPer] = {};
  for (int64_t j0 = 0; j0 < visible; j0 += kTile) {
    int64_t j = j0 + threadIdx.x;
    float dsj = 0.0f;
    if (j < visible) {
      float pj = expf(dot(qi, k + base + j * d, d) * scale - lse);
      dsj = pj * (dot(doi, v + base + j * d, d) - D);
    }
    ds[threadIdx.x] = dsj;
    __syncthreads();
    int64_t n = min(int64_t(kTile), visible - j0);
    for (int a = 0; a < kPer; ++a) {
      int64_t c = threadIdx.x + a * kTile;
      if (c >= d)
        break;
      for (int64_t jj = 0; jj < n; ++jj)
        acc[a] += ds[jj] * k[base + (j0 + jj) * d + c];
    }
    __syncthreads();
  }
  for (int a = 0; a < kPer; ++a) {
    int64_t c = threadIdx.x + a * kTile;
    if (c < d)
      dq[base + i * d + c] = acc[a] * scale;
  }
  if (threadIdx.x == 0) {
    stats[2 * row] = lse;
    stats[2 * row + 1] = D;
  }
}

/// Per key row j: dV_j = sum_i p_ij dO_i and dK_j = scale * sum_i ds_ij q_i
/// over the query rows i that see key j.
__global__ void attentionKeyGrad(const float *q, const float *k,
                                 const float *v, const float *dout,
                                 const float *stats, float *dk, float *dv,
                                 int64_t t, int64_t d, int32_t causal,
                                 float scale) {
  __shared__ float kj[kMaxD], vj[kMaxD], p[kTile], ds[kTile];
  if (d > kMaxD)
    __trap();
  int64_t row = blockIdx.x, j = row % t, slice = row / t, base = slice * t * d;
  loadRow(kj, k + base + j * d, d);
  loadRow(vj, v + base + j * d, d);
  __syncthreads();
  int64_t first = causal ? j : 0;
  float accK[kPer] = {}, accV[kPer] = {};
  for (int64_t i0 = first; i0 < t; i0 += kTile) {
    int64_t i = i0 + threadIdx.x;
    float pi = 0.0f, dsi = 0.0f;
    if (i < t) {
      const float *st = stats + 2 * (slice * t + i);
      pi = expf(dot(q + base + i * d, kj, d) * scale - st[0]);
      dsi = pi * (dot(dout + base + i * d, vj, d) - st[1]);
    }
    p[threadIdx.x] = pi;
    ds[threadIdx.x] = dsi;
    __syncthreads();
    int64_t n = min(int64_t(kTile), t - i0);
    for (int a = 0; a < kPer; ++a) {
      int64_t c = threadIdx.x + a * kTile;
      if (c >= d)
        break;
      for (int64_t ii = 0; ii < n; ++ii) {
        accV[a] += p[ii] * dout[base + (i0 + ii) * d + c];
        accK[a] += ds[ii] * q[base + (i0 + ii) * d + c];
      }
    }
    __syncthreads();
  }
  for (int a = 0; a < kPer; ++a) {
    int64_t c = threadIdx.x + a * kTile;
    if (c < d) {
      dv[base + j * d + c] = accV[a];
      dk[base + j * d + c] = accK[a] * scale;
    }
  }
}

} // namespace

extern "C" void dtk_cuda_attention_f32(const float *q, const float *k,
                                       const float *v, float *o,
                                       int64_t slices, int64_t t, int64_t d,
                                       int32_t causal, dtk_stream stream) {
  if (slices * t == 0)
    return;
  attentionForward<<<unsigned(slices * t), kTile, 0, stream>>>(
      q, k, v, o, t, d, causal, 1.0f / sqrtf(float(d)));
}

extern "C" void dtk_cuda_attention_grad_f32(
    const float *q, const float *k, const float *v, const float *dout,
    float *dq, float *dk, float *dv, float *scratch, int64_t slices, int64_t t,
    int64_t d, int32_t causal, dtk_stream stream) {
  if (slices * t == 0)
    return;
  float scale = 1.0f / sqrtf(float(d));
  attentionQueryGrad<<<unsigned(slices * t), kTile, 0, stream>>>(
      q, k, v, dout, dq, scratch, t, d, causal, scale);
  attentionKeyGrad<<<unsigned(slices * t), kTile, 0, stream>>>(
      q, k, v, dout, scratch, dk, dv, t, d, causal, scale);
}
