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
// The forward also stores each row's log-sum-exp, m + log(l).
//
// Backward splits as FlashAttention-2 does, so that nothing is summed with
// atomics. First each query row's log-sum-exp and D = rowsum(dO * O) go into
// `scratch` (attention_stats.cuh); then a block per query row computes dQ,
// and a block per key row sums its dK and dV over the query rows that see
// it, both reading those statistics. With P = softmax(S), S = Q K^T / sqrt(d):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = dS K / sqrt(d),
//   dK = dS^T Q / sqrt(d).
//
// Heads of up to 128 take the tiled kernels: a block of four warps holds a
// tile of 32 query rows (or, for dK and dV, 32 keys) and walks the other side
// in tiles of 32 staged in shared memory, each warp owning 8 rows and its
// lanes the 32 keys (or queries) of a tile for the dot products and the
// columns for the accumulations, so every K and V row is read from global
// memory once per 32 query rows. Wider heads take the first, simpler kernels,
// a block per row, each thread forming its dot products alone. Both are f32
// on CUDA cores, not tensor cores.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "attention_stats.cuh"
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

__global__ void attentionForward(const float *q, const float *k, const float *v,
                                 float *o, float *lse, int64_t t, int64_t d,
                                 int32_t causal, float scale) {
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
  if (threadIdx.x == 0)
    lse[row] = m + logf(l);
}

/// Per query row: dQ, from its log-sum-exp and D in `stats`.
__global__ void attentionQueryGrad(const float *q, const float *k,
                                   const float *v, const float *dout, float *dq,
                                   const float *stats, int64_t t, int64_t d,
                                   int32_t causal, float scale) {
  __shared__ float qi[kMaxD], doi[kMaxD], ds[kTile];
  if (d > kMaxD)
    __trap();
  int64_t row = blockIdx.x, i = row % t, base = (row / t) * t * d;
  loadRow(qi, q + base + i * d, d);
  loadRow(doi, dout + base + i * d, d);
  __syncthreads();
  int64_t visible = causal ? i + 1 : t;
  float lse = stats[2 * row], D = stats[2 * row + 1];
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

//===----------------------------------------------------------------------===//
// Tiled kernels (heads of up to kTiledMaxD)
//===----------------------------------------------------------------------===//

constexpr int kRows = 32;  // query rows (or keys) per block = lanes per warp
constexpr int kWarps = 4;  // warps per block, each owning kRows / kWarps rows
constexpr int kOwn = kRows / kWarps;
constexpr int kTiledMaxD = 128;
constexpr int kCols = kTiledMaxD / 32; // accumulator columns per lane
constexpr unsigned kFull = 0xffffffffu;

/// Lets `kernel` take `bytes` of dynamic shared memory (above 48 KiB it must
/// ask; the H100 has up to 227 KiB).
template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int(bytes));
}

/// Rows [first, first + kRows) of a [t, d] matrix into shared memory with row
/// stride `stride`; rows past t are zeros.
__device__ void loadTile(float *dst, const float *src, int64_t first,
                         int64_t t, int64_t d, int64_t stride) {
  for (int64_t e = threadIdx.x; e < kRows * d; e += blockDim.x) {
    int64_t r = e / d, c = e % d;
    dst[r * stride + c] = first + r < t ? src[(first + r) * d + c] : 0.0f;
  }
}

__device__ float dotShared(const float *a, const float *b, int64_t d) {
  float s = 0.0f;
  for (int64_t c = 0; c < d; ++c)
    s += a[c] * b[c];
  return s;
}

__device__ bool sees(int64_t i, int64_t j, int64_t t, int32_t causal) {
  return i < t && j < t && (!causal || j <= i);
}

/// O for 32 query rows: each warp's 8 rows run the online softmax over key
/// tiles, a lane per key for the scores and per column for the output.
__global__ void tiledForward(const float *q, const float *k, const float *v,
                             float *o, float *lse, int64_t t, int64_t d,
                             int32_t causal, float scale) {
  extern __shared__ float smem[];
  float *qs = smem, *ks = qs + kRows * d, *vs = ks + kRows * (d + 1);
  int64_t tiles = (t + kRows - 1) / kRows;
  int64_t slice = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kRows;
  int64_t base = slice * t * d;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  loadTile(qs, q + base, i0, t, d, d);
  float m[kOwn], l[kOwn], acc[kOwn][kCols];
  for (int r = 0; r < kOwn; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    for (int a = 0; a < kCols; ++a)
      acc[r][a] = 0.0f;
  }
  int64_t end = causal ? min(t, i0 + kRows) : t;
  for (int64_t j0 = 0; j0 < end; j0 += kRows) {
    __syncthreads(); // the previous tile is done with
    loadTile(ks, k + base, j0, t, d, d + 1);
    loadTile(vs, v + base, j0, t, d, d);
    __syncthreads();
    for (int r = 0; r < kOwn; ++r) {
      int row = warp * kOwn + r;
      int64_t i = i0 + row, j = j0 + lane;
      bool ok = sees(i, j, t, causal);
      float s = ok ? dotShared(qs + row * d, ks + lane * (d + 1), d) * scale
                   : -INFINITY;
      float mNew = fmaxf(m[r], dtk::warpReduce(s, dtk::Max{}));
      float p = ok ? expf(s - mNew) : 0.0f;
      float correction = mNew == -INFINITY ? 1.0f : expf(m[r] - mNew);
      l[r] = l[r] * correction + dtk::warpReduce(p, dtk::Sum{});
      float sum[kCols] = {};
      for (int c = 0; c < kRows; ++c) {
        float pc = __shfl_sync(kFull, p, c);
        for (int a = 0; a < kCols; ++a) {
          int64_t col = lane + 32 * a;
          if (col < d)
            sum[a] += pc * vs[c * d + col];
        }
      }
      for (int a = 0; a < kCols; ++a)
        acc[r][a] = acc[r][a] * correction + sum[a];
      m[r] = mNew;
    }
  }
  for (int r = 0; r < kOwn; ++r) {
    int64_t i = i0 + warp * kOwn + r;
    for (int a = 0; a < kCols; ++a) {
      int64_t col = lane + 32 * a;
      if (i < t && col < d)
        o[base + i * d + col] = acc[r][a] / l[r];
    }
    if (i < t && lane == 0)
      lse[slice * t + i] = m[r] + logf(l[r]);
  }
}

/// For 32 query rows: dQ = scale (sum_j p dOv k_j - D sum_j p k_j), both
/// sums in one pass, from each row's log-sum-exp and D in `stats`.
__global__ void tiledQueryGrad(const float *q, const float *k, const float *v,
                               const float *dout, float *dq, const float *stats,
                               int64_t t, int64_t d, int32_t causal,
                               float scale) {
  extern __shared__ float smem[];
  float *qs = smem, *dos = qs + kRows * d, *ks = dos + kRows * d,
        *vs = ks + kRows * (d + 1);
  int64_t tiles = (t + kRows - 1) / kRows;
  int64_t slice = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kRows;
  int64_t base = slice * t * d;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  loadTile(qs, q + base, i0, t, d, d);
  loadTile(dos, dout + base, i0, t, d, d);
  int64_t end = causal ? min(t, i0 + kRows) : t;
  float lse[kOwn], D[kOwn];
  for (int r = 0; r < kOwn; ++r) {
    int64_t i = i0 + warp * kOwn + r;
    lse[r] = i < t ? stats[2 * (slice * t + i)] : 0.0f;
    D[r] = i < t ? stats[2 * (slice * t + i) + 1] : 0.0f;
  }
  // sum_j p dOv k_j and sum_j p k_j.
  float pdk[kOwn][kCols] = {}, pk[kOwn][kCols] = {};
  for (int64_t j0 = 0; j0 < end; j0 += kRows) {
    __syncthreads();
    loadTile(ks, k + base, j0, t, d, d + 1);
    loadTile(vs, v + base, j0, t, d, d + 1);
    __syncthreads();
    for (int r = 0; r < kOwn; ++r) {
      int row = warp * kOwn + r;
      int64_t i = i0 + row, j = j0 + lane;
      bool ok = sees(i, j, t, causal);
      float p = 0.0f, dov = 0.0f;
      if (ok) {
        p = expf(dotShared(qs + row * d, ks + lane * (d + 1), d) * scale -
                 lse[r]);
        dov = dotShared(dos + row * d, vs + lane * (d + 1), d);
      }
      float pd = p * dov;
      for (int c = 0; c < kRows; ++c) {
        float pc = __shfl_sync(kFull, p, c), pdc = __shfl_sync(kFull, pd, c);
        for (int a = 0; a < kCols; ++a) {
          int64_t col = lane + 32 * a;
          if (col < d) {
            float kc = ks[c * (d + 1) + col];
            pdk[r][a] += pdc * kc;
            pk[r][a] += pc * kc;
          }
        }
      }
    }
  }
  for (int r = 0; r < kOwn; ++r) {
    int64_t i = i0 + warp * kOwn + r;
    if (i >= t)
      continue;
    for (int a = 0; a < kCols; ++a) {
      int64_t col = lane + 32 * a;
      if (col < d)
        dq[base + i * d + col] = (pdk[r][a] - D[r] * pk[r][a]) * scale;
    }
  }
}

/// For 32 keys: dV_j = sum_i p_ij dO_i and dK_j = scale sum_i ds_ij q_i over
/// the query tiles that see them, a lane per query row for p and ds.
__global__ void tiledKeyGrad(const float *q, const float *k, const float *v,
                             const float *dout, const float *stats, float *dk,
                             float *dv, int64_t t, int64_t d, int32_t causal,
                             float scale) {
  extern __shared__ float smem[];
  float *ks = smem, *vs = ks + kRows * d, *qs = vs + kRows * d,
        *dos = qs + kRows * (d + 1), *lse = dos + kRows * (d + 1),
        *Ds = lse + kRows;
  int64_t tiles = (t + kRows - 1) / kRows;
  int64_t slice = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * kRows;
  int64_t base = slice * t * d;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  loadTile(ks, k + base, j0, t, d, d);
  loadTile(vs, v + base, j0, t, d, d);
  float accK[kOwn][kCols] = {}, accV[kOwn][kCols] = {};
  for (int64_t i0 = causal ? j0 : 0; i0 < t; i0 += kRows) {
    __syncthreads();
    loadTile(qs, q + base, i0, t, d, d + 1);
    loadTile(dos, dout + base, i0, t, d, d + 1);
    for (int e = threadIdx.x; e < kRows; e += blockDim.x) {
      bool in = i0 + e < t;
      lse[e] = in ? stats[2 * (slice * t + i0 + e)] : 0.0f;
      Ds[e] = in ? stats[2 * (slice * t + i0 + e) + 1] : 0.0f;
    }
    __syncthreads();
    for (int r = 0; r < kOwn; ++r) {
      int key = warp * kOwn + r;
      int64_t j = j0 + key, i = i0 + lane;
      bool ok = sees(i, j, t, causal);
      float p = 0.0f, ds = 0.0f;
      if (ok) {
        p = expf(dotShared(qs + lane * (d + 1), ks + key * d, d) * scale -
                 lse[lane]);
        ds = p * (dotShared(dos + lane * (d + 1), vs + key * d, d) - Ds[lane]);
      }
      for (int c = 0; c < kRows; ++c) {
        float pc = __shfl_sync(kFull, p, c), dsc = __shfl_sync(kFull, ds, c);
        for (int a = 0; a < kCols; ++a) {
          int64_t col = lane + 32 * a;
          if (col < d) {
            accV[r][a] += pc * dos[c * (d + 1) + col];
            accK[r][a] += dsc * qs[c * (d + 1) + col];
          }
        }
      }
    }
  }
  for (int r = 0; r < kOwn; ++r) {
    int64_t j = j0 + warp * kOwn + r;
    for (int a = 0; a < kCols; ++a) {
      int64_t col = lane + 32 * a;
      if (j < t && col < d) {
        dv[base + j * d + col] = accV[r][a];
        dk[base + j * d + col] = accK[r][a] * scale;
      }
    }
  }
}

} // namespace

extern "C" void dtk_cuda_attention_f32(const float *q, const float *k,
                                       const float *v, float *o, float *lse,
                                       int64_t slices, int64_t t, int64_t d,
                                       int32_t causal, dtk_stream stream) {
  if (slices * t == 0)
    return;
  float scale = 1.0f / sqrtf(float(d));
  if (d <= kTiledMaxD) {
    int64_t tiles = (t + kRows - 1) / kRows;
    size_t bytes =
        sizeof(float) * size_t(kRows * d + kRows * (d + 1) + kRows * d);
    allowShared(tiledForward, bytes);
    tiledForward<<<unsigned(slices * tiles), kWarps * 32, bytes, stream>>>(
        q, k, v, o, lse, t, d, causal, scale);
    return;
  }
  attentionForward<<<unsigned(slices * t), kTile, 0, stream>>>(
      q, k, v, o, lse, t, d, causal, scale);
}

extern "C" void dtk_cuda_attention_grad_f32(const float *q, const float *k,
                                            const float *v, const float *o,
                                            const float *lse, const float *dout,
                                            float *dq, float *dk, float *dv,
                                            float *scratch, int64_t slices,
                                            int64_t t, int64_t d,
                                            int32_t causal, dtk_stream stream) {
  if (slices * t == 0)
    return;
  float scale = 1.0f / sqrtf(float(d));
  dtk::launchAttentionRowStats(o, dtk::packedRows(t, d), dout,
                               dtk::packedRows(t, d), lse, scratch, slices, t,
                               d, 1.0f, stream);
  if (d <= kTiledMaxD) {
    int64_t tiles = (t + kRows - 1) / kRows;
    size_t queryBytes =
        sizeof(float) * size_t(2 * kRows * d + 2 * kRows * (d + 1));
    allowShared(tiledQueryGrad, queryBytes);
    tiledQueryGrad<<<unsigned(slices * tiles), kWarps * 32, queryBytes,
                     stream>>>(q, k, v, dout, dq, scratch, t, d, causal, scale);
    size_t keyBytes = sizeof(float) *
                      size_t(2 * kRows * d + 2 * kRows * (d + 1) + 2 * kRows);
    allowShared(tiledKeyGrad, keyBytes);
    tiledKeyGrad<<<unsigned(slices * tiles), kWarps * 32, keyBytes, stream>>>(
        q, k, v, dout, scratch, dk, dv, t, d, causal, scale);
    return;
  }
  attentionQueryGrad<<<unsigned(slices * t), kTile, 0, stream>>>(
      q, k, v, dout, dq, scratch, t, d, causal, scale);
  attentionKeyGrad<<<unsigned(slices * t), kTile, 0, stream>>>(
      q, k, v, dout, scratch, dk, dv, t, d, causal, scale);
}
