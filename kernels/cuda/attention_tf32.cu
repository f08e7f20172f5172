//===- attention_tf32.cu - attention on tensor cores, for 16-bit inputs ---===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_cuda_attention_tf32 and dtk_cuda_attention_grad_tf32: the algorithm
// of attention.cu (FlashAttention's online softmax forward, which stores
// each row's log-sum-exp; the rows' statistics from attention_stats.cuh, a
// query-side kernel for dQ and a key-side kernel for dK and dV, so nothing is
// summed with atomics) with every product on tensor cores through
// WMMA's TF32 fragments (16 x 16 x 8, f32 sums).
//
// The plan takes these only when Q, K, V (and dO) are 16-bit values widened
// to f32: TF32 holds their mantissas, so S = Q K^T and dO V^T are exact
// products summed in f32. The probabilities P and their gradients dS round
// to TF32 (10 mantissa bits) before P V, P^T dO, dS K and dS^T Q: finer than
// the bf16 that the program keeps its activations in.
//
// A block of four warps takes 64 rows (queries, or keys for the key side);
// each warp owns 16 of them, so the softmax of a row needs only its warp.
// The other side streams through shared memory in tiles of 64 rows. Heads
// must be a multiple of 16 wide and at most 128; others, and operands not
// 16-byte aligned, take attention.cu's CUDA-core kernels.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "attention_stats.cuh"
#include "reduce.cuh"

#include <mma.h>

#include <cstdint>

namespace {

using namespace nvcuda;

constexpr int kRows = 64; // rows per block and per streamed tile
constexpr int kWarps = 4; // each owns kRows / kWarps = 16 rows
constexpr int kThreads = kWarps * 32;
constexpr int kMaxD = 128;
constexpr int kMaxN = kMaxD / 16; // output fragments per warp row
constexpr int kLdS = kRows + 4;   // row stride of a 64-wide score tile
constexpr unsigned kFull = 0xffffffffu;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                             wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32,
                              wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32,
                             wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

template <typename Frag> __device__ void toTf32(Frag &f) {
  for (int e = 0; e < f.num_elements; ++e)
    f.x[e] = wmma::__float_to_tf32(f.x[e]);
}

/// The row stride of a d-wide tile in shared memory: a multiple of 4 floats
/// (WMMA's rule) that staggers rows across banks.
__host__ __device__ int strideOf(int64_t d) { return int(d) + 4; }

/// Rows [first, first + kRows) of a [t, d] matrix into `dst` (stride ld);
/// rows past t are zeros. d is a multiple of 16 and `src` 16-byte aligned.
__device__ void loadTile(float *dst, const float *src, int64_t first, int64_t t,
                         int64_t d, int ld) {
  int quads = int(d / 4);
  for (int e = threadIdx.x; e < kRows * quads; e += blockDim.x) {
    int r = e / quads, c = (e % quads) * 4;
    float4 x =
        first + r < t
            ? *reinterpret_cast<const float4 *>(src + (first + r) * d + c)
            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    *reinterpret_cast<float4 *>(dst + r * ld + c) = x;
  }
}

/// out[16 x 64] (stride kLdS) = a[16 x depth] b^T, b being 64 rows of
/// `depth`: the scores of a warp's 16 rows against a tile.
__device__ void timesTransposed(float *out, const float *a, int lda,
                                const float *b, int ldb, int64_t depth) {
  FragC acc[kRows / 16];
  for (int n = 0; n < kRows / 16; ++n)
    wmma::fill_fragment(acc[n], 0.0f);
  for (int64_t kk = 0; kk < depth; kk += 8) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk, lda);
    toTf32(fa);
    for (int n = 0; n < kRows / 16; ++n) {
      FragBT fb;
      wmma::load_matrix_sync(fb, b + n * 16 * ldb + kk, ldb);
      toTf32(fb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
  for (int n = 0; n < kRows / 16; ++n)
    wmma::store_matrix_sync(out + n * 16, acc[n], kLdS, wmma::mem_row_major);
}

/// acc[n] += a[16 x 64] (stride kLdS) b[64 x d] for the d / 16 column
/// blocks n of b: a warp's probabilities (or their gradients) times a tile.
__device__ void accumulateTimes(FragC (&acc)[kMaxN], const float *a,
                                const float *b, int ldb, int64_t d) {
  for (int kk = 0; kk < kRows; kk += 8) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk, kLdS);
    toTf32(fa);
#pragma unroll
    for (int n = 0; n < kMaxN; ++n) {
      if (n * 16 >= d)
        break;
      FragB fb;
      wmma::load_matrix_sync(fb, b + kk * ldb + n * 16, ldb);
      toTf32(fb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

__device__ bool sees(int64_t i, int64_t j, int64_t t, int32_t causal) {
  return i < t && j < t && (!causal || j <= i);
}

/// The 64 rows of one slice that a block takes, and its thread's place.
struct BlockRows {
  int64_t slice, first, base;
  int lane, warp;
};

__device__ BlockRows blockRows(int64_t t, int64_t d) {
  int64_t tiles = (t + kRows - 1) / kRows;
  int64_t slice = blockIdx.x / tiles;
  return {slice, int64_t(blockIdx.x % tiles) * kRows, slice * t * d,
          int(threadIdx.x % 32), int(threadIdx.x / 32)};
}

/// One tile of row r's online softmax: `s` holds the lane's two scores
/// (-inf where masked), `e` gets exp(s - the new maximum), lane r keeps the
/// running maximum `m`, and the result is the factor by which the row's
/// earlier sums shrink.
__device__ float onlineSoftmax(float &m, int r, const float (&s)[2],
                               float (&e)[2]) {
  float mOld = __shfl_sync(kFull, m, r);
  float mNew = fmaxf(mOld, dtk::warpReduce(fmaxf(s[0], s[1]), dtk::Max{}));
  for (int h = 0; h < 2; ++h)
    e[h] = s[h] == -INFINITY ? 0.0f : expf(s[h] - mNew);
  if (int(threadIdx.x % 32) == r)
    m = mNew;
  return mNew == -INFINITY ? 1.0f : expf(mOld - mNew);
}

/// O for 64 query rows.
__global__ void __launch_bounds__(kThreads)
    forwardKernel(const float *q, const float *k, const float *v, float *o,
                  float *lse, int64_t t, int64_t d, int32_t causal,
                  float scale) {
  extern __shared__ __align__(128) float smem[];
  int ld = strideOf(d);
  float *qs = smem, *ks = qs + kRows * ld, *vs = ks + kRows * ld,
        *os = vs + kRows * ld, *ss = os + kRows * ld;
  auto [slice, i0, base, lane, warp] = blockRows(t, d);
  float *qw = qs + 16 * warp * ld, *ow = os + 16 * warp * ld,
        *sw = ss + 16 * warp * kLdS;
  loadTile(qs, q + base, i0, t, d, ld);
  for (int64_t e = threadIdx.x; e < kRows * ld; e += blockDim.x)
    os[e] = 0.0f;
  // Lane r < 16 holds row r's running maximum and sum.
  float m = -INFINITY, l = 0.0f;
  int64_t end = causal ? min(t, i0 + kRows) : t;
  for (int64_t j0 = 0; j0 < end; j0 += kRows) {
    __syncthreads(); // every warp is done with the previous tile
    loadTile(ks, k + base, j0, t, d, ld);
    loadTile(vs, v + base, j0, t, d, ld);
    __syncthreads();
    timesTransposed(sw, qw, ld, ks, ld, d);
    __syncwarp();
    for (int r = 0; r < 16; ++r) {
      int64_t i = i0 + 16 * warp + r;
      float s[2], p[2];
      for (int h = 0; h < 2; ++h) {
        int c = lane + 32 * h;
        s[h] =
            sees(i, j0 + c, t, causal) ? sw[r * kLdS + c] * scale : -INFINITY;
      }
      float correction = onlineSoftmax(m, r, s, p);
      for (int h = 0; h < 2; ++h)
        sw[r * kLdS + lane + 32 * h] = p[h];
      float sum = dtk::warpReduce(p[0] + p[1], dtk::Sum{});
      if (lane == r)
        l = l * correction + sum;
      for (int64_t c = lane; c < d; c += 32)
        ow[r * ld + c] *= correction;
    }
    __syncwarp();
    FragC acc[kMaxN];
#pragma unroll
    for (int n = 0; n < kMaxN; ++n)
      if (n * 16 < d)
        wmma::load_matrix_sync(acc[n], ow + n * 16, ld, wmma::mem_row_major);
    accumulateTimes(acc, sw, vs, ld, d);
#pragma unroll
    for (int n = 0; n < kMaxN; ++n)
      if (n * 16 < d)
        wmma::store_matrix_sync(ow + n * 16, acc[n], ld, wmma::mem_row_major);
    __syncwarp();
  }
  for (int r = 0; r < 16; ++r) {
    int64_t i = i0 + 16 * warp + r;
    float lr = __shfl_sync(kFull, l, r);
    if (i >= t)
      break;
    for (int64_t c = lane; c < d; c += 32)
      o[base + i * d + c] = ow[r * ld + c] / lr;
    if (lane == r)
      lse[slice * t + i] = m + logf(l);
  }
}

/// For 64 query rows: dQ = scale sum_j p_j (dO . v_j - D) k_j, from each
/// row's log-sum-exp and D in `stats`.
__global__ void __launch_bounds__(kThreads)
    queryGradKernel(const float *q, const float *k, const float *v,
                    const float *dout, float *dq, const float *stats, int64_t t,
                    int64_t d, int32_t causal, float scale) {
  extern __shared__ __align__(128) float smem[];
  int ld = strideOf(d);
  float *qs = smem, *dos = qs + kRows * ld, *ks = dos + kRows * ld,
        *vs = ks + kRows * ld, *ss = vs + kRows * ld, *dps = ss + kRows * kLdS;
  auto [slice, i0, base, lane, warp] = blockRows(t, d);
  float *qw = qs + 16 * warp * ld, *dow = dos + 16 * warp * ld,
        *sw = ss + 16 * warp * kLdS, *dpw = dps + 16 * warp * kLdS;
  loadTile(qs, q + base, i0, t, d, ld);
  loadTile(dos, dout + base, i0, t, d, ld);
  int64_t end = causal ? min(t, i0 + kRows) : t;
  // Lane r < 16 holds row r's statistics.
  int64_t own = i0 + 16 * warp + lane;
  bool in = lane < 16 && own < t;
  float lse = in ? stats[2 * (slice * t + own)] : 0.0f,
        D = in ? stats[2 * (slice * t + own) + 1] : 0.0f;

  // dS = P (dP - D) a tile at a time, times the keys.
  FragC acc[kMaxN];
  for (int n = 0; n < kMaxN; ++n)
    wmma::fill_fragment(acc[n], 0.0f);
  for (int64_t j0 = 0; j0 < end; j0 += kRows) {
    __syncthreads(); // every warp is done with the previous tile
    loadTile(ks, k + base, j0, t, d, ld);
    loadTile(vs, v + base, j0, t, d, ld);
    __syncthreads();
    timesTransposed(sw, qw, ld, ks, ld, d);
    timesTransposed(dpw, dow, ld, vs, ld, d);
    __syncwarp();
    for (int r = 0; r < 16; ++r) {
      int64_t i = i0 + 16 * warp + r;
      float lseR = __shfl_sync(kFull, lse, r), dR = __shfl_sync(kFull, D, r);
      for (int h = 0; h < 2; ++h) {
        int c = lane + 32 * h;
        float ds = 0.0f;
        if (sees(i, j0 + c, t, causal))
          ds = expf(sw[r * kLdS + c] * scale - lseR) * (dpw[r * kLdS + c] - dR);
        sw[r * kLdS + c] = ds;
      }
    }
    __syncwarp();
    accumulateTimes(acc, sw, ks, ld, d);
  }
  // The warp's own query rows are free now: stage dQ there.
  __syncwarp();
#pragma unroll
  for (int n = 0; n < kMaxN; ++n)
    if (n * 16 < d)
      wmma::store_matrix_sync(qw + n * 16, acc[n], ld, wmma::mem_row_major);
  __syncwarp();
  for (int r = 0; r < 16; ++r) {
    int64_t i = i0 + 16 * warp + r;
    if (i >= t)
      break;
    for (int64_t c = lane; c < d; c += 32)
      dq[base + i * d + c] = qw[r * ld + c] * scale;
  }
}

/// For 64 keys: dV_j = sum_i p_ij dO_i and dK_j = scale sum_i ds_ij q_i over
/// the query tiles that see them, reading each query row's statistics.
__global__ void __launch_bounds__(kThreads)
    keyGradKernel(const float *q, const float *k, const float *v,
                  const float *dout, const float *stats, float *dk, float *dv,
                  int64_t t, int64_t d, int32_t causal, float scale) {
  extern __shared__ __align__(128) float smem[];
  int ld = strideOf(d);
  float *ks = smem, *vs = ks + kRows * ld, *qs = vs + kRows * ld,
        *dos = qs + kRows * ld, *pt = dos + kRows * ld,
        *dst = pt + kRows * kLdS, *lse = dst + kRows * kLdS, *Ds = lse + kRows;
  auto [slice, j0, base, lane, warp] = blockRows(t, d);
  float *kw = ks + 16 * warp * ld, *vw = vs + 16 * warp * ld,
        *pw = pt + 16 * warp * kLdS, *dsw = dst + 16 * warp * kLdS;
  loadTile(ks, k + base, j0, t, d, ld);
  loadTile(vs, v + base, j0, t, d, ld);
  FragC accK[kMaxN], accV[kMaxN];
  for (int n = 0; n < kMaxN; ++n) {
    wmma::fill_fragment(accK[n], 0.0f);
    wmma::fill_fragment(accV[n], 0.0f);
  }
  for (int64_t i0 = causal ? j0 : 0; i0 < t; i0 += kRows) {
    __syncthreads();
    loadTile(qs, q + base, i0, t, d, ld);
    loadTile(dos, dout + base, i0, t, d, ld);
    for (int e = threadIdx.x; e < kRows; e += blockDim.x) {
      bool in = i0 + e < t;
      lse[e] = in ? stats[2 * (slice * t + i0 + e)] : 0.0f;
      Ds[e] = in ? stats[2 * (slice * t + i0 + e) + 1] : 0.0f;
    }
    __syncthreads();
    // Transposed scores: the warp's 16 keys against 64 query rows.
    timesTransposed(pw, kw, ld, qs, ld, d);
    timesTransposed(dsw, vw, ld, dos, ld, d);
    __syncwarp();
    for (int r = 0; r < 16; ++r) {
      int64_t j = j0 + 16 * warp + r;
      for (int h = 0; h < 2; ++h) {
        int c = lane + 32 * h;
        float p = 0.0f, ds = 0.0f;
        if (sees(i0 + c, j, t, causal)) {
          p = expf(pw[r * kLdS + c] * scale - lse[c]);
          ds = p * (dsw[r * kLdS + c] - Ds[c]);
        }
        pw[r * kLdS + c] = p;
        dsw[r * kLdS + c] = ds;
      }
    }
    __syncwarp();
    accumulateTimes(accV, pw, dos, ld, d);
    accumulateTimes(accK, dsw, qs, ld, d);
  }
  // The warp's own key and value rows are free now: stage dK and dV there.
  __syncwarp();
  for (int n = 0; n < kMaxN && n * 16 < d; ++n) {
    wmma::store_matrix_sync(kw + n * 16, accK[n], ld, wmma::mem_row_major);
    wmma::store_matrix_sync(vw + n * 16, accV[n], ld, wmma::mem_row_major);
  }
  __syncwarp();
  for (int r = 0; r < 16; ++r) {
    int64_t j = j0 + 16 * warp + r;
    if (j >= t)
      break;
    for (int64_t c = lane; c < d; c += 32) {
      dk[base + j * d + c] = kw[r * ld + c] * scale;
      dv[base + j * d + c] = vw[r * ld + c];
    }
  }
}

/// Whether the tensor-core kernels take these operands.
bool fits(int64_t d, std::initializer_list<const float *> operands) {
  if (d % 16 != 0 || d > kMaxD || d == 0)
    return false;
  for (const float *p : operands)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       int(bytes));
}

} // namespace

extern "C" void dtk_cuda_attention_tf32(const float *q, const float *k,
                                        const float *v, float *o, float *lse,
                                        int64_t slices, int64_t t, int64_t d,
                                        int32_t causal, dtk_stream stream) {
  if (!fits(d, {q, k, v, o})) {
    dtk_cuda_attention_f32(q, k, v, o, lse, slices, t, d, causal, stream);
    return;
  }
  if (slices * t == 0)
    return;
  int64_t tiles = (t + kRows - 1) / kRows;
  size_t bytes = sizeof(float) * size_t(4 * kRows * strideOf(d) + kRows * kLdS);
  allowShared(forwardKernel, bytes);
  forwardKernel<<<unsigned(slices * tiles), kThreads, bytes, stream>>>(
      q, k, v, o, lse, t, d, causal, 1.0f / sqrtf(float(d)));
}

extern "C" void
dtk_cuda_attention_grad_tf32(const float *q, const float *k, const float *v,
                             const float *o, const float *lse,
                             const float *dout, float *dq, float *dk, float *dv,
                             float *scratch, int64_t slices, int64_t t,
                             int64_t d, int32_t causal, dtk_stream stream) {
  if (!fits(d, {q, k, v, dout, dq, dk, dv})) {
    dtk_cuda_attention_grad_f32(q, k, v, o, lse, dout, dq, dk, dv, scratch,
                                slices, t, d, causal, stream);
    return;
  }
  if (slices * t == 0)
    return;
  int64_t tiles = (t + kRows - 1) / kRows;
  float scale = 1.0f / sqrtf(float(d));
  dtk::launchAttentionRowStats(o, dtk::packedRows(t, d), dout,
                               dtk::packedRows(t, d), lse, scratch, slices, t,
                               d, 1.0f, stream);
  size_t queryBytes =
      sizeof(float) * size_t(4 * kRows * strideOf(d) + 2 * kRows * kLdS);
  allowShared(queryGradKernel, queryBytes);
  queryGradKernel<<<unsigned(slices * tiles), kThreads, queryBytes, stream>>>(
      q, k, v, dout, dq, scratch, t, d, causal, scale);
  size_t keyBytes = queryBytes + sizeof(float) * 2 * kRows;
  allowShared(keyGradKernel, keyBytes);
  keyGradKernel<<<unsigned(slices * tiles), kThreads, keyBytes, stream>>>(
      q, k, v, dout, scratch, dk, dv, t, d, causal, scale);
}
