//===- attention_bf16.cu - attention on bf16 tensor cores ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtk_cuda_attention_bf16 and dtk_cuda_attention_grad_bf16: attention.cu's
// algorithm (FlashAttention's online softmax, whose forward stores each
// row's log-sum-exp; the gradient's row statistics from that and O
// (attention_stats.cuh), then a query-side kernel for dQ, one pass over the
// keys, and a key-side kernel for dK and dV, so nothing is summed with
// atomics and every run gives the same bits) with every product an
// mma.sync m16n8k16 on bf16 operands with f32 sums, and the scores kept in
// registers as FlashAttention-2 keeps them.
//
// The plan takes these only when Q, K, V (and dO) are bf16 values widened to
// f32, so the operands convert to bf16 exactly as they enter shared memory.
// The probabilities P and their gradients dS round to bf16 before P V,
// P^T dO, dS K and dS^T Q, as FlashAttention does: the program keeps its
// activations in bf16 anyway. (f16 programs keep attention_tf32.cu: their dS
// may leave f16's range under loss scaling.)
//
// A block of four warps takes 64 rows (queries, or keys for the key side);
// each warp owns 16, so a row's softmax lives in the four lanes of a quad
// that hold it (mma's accumulator layout) and needs two shuffles. The
// forward kernel's warps own two such groups for heads of 32 and 64 (128
// rows a block). Counting bytes and products, shared memory's bandwidth, not
// the tensor cores, bounds a warp of one group; a second group halves the
// bytes per product (dtk_cuda_attention_warp_rows(16) keeps one, to compare).
// The gradient's kernels hold twice the scores and could not keep a second
// group in registers. The other side streams through shared memory 64 rows at a
// time, by cp.async into two buffers, so the next tile's copies are in flight
// while the warps work on this one (pipelined(); dtk_cuda_attention_pipeline(0)
// turns that off). Row-major tiles serve every product: X^T operands read rows
// directly, and the right-hand operands of P V-like products load transposed
// with ldmatrix.trans. Heads must be a multiple of 16 wide and at most 128;
// others, and operands not 16-byte aligned, take the TF32 kernels.
//
// The _typed entry points also take Q, K, V and dO stored as bf16 (a bf16
// program's activations where they lie, without the widenings before) and
// write O, dQ, dK and dV as bf16 rounded to nearest (what the narrowings
// after would have stored), for heads of 32, 64 or 128. The _strided ones
// take each operand in a layout of its own (dtk_attention_layout): a head's
// rows where a [B, T, H, D] tensor holds them, so that the transposes of the
// heads before and after attention need not run.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

#include "attention_stats.cuh"

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace {

constexpr int kRows = 64; // rows per block and per streamed tile
constexpr int kThreads = 128;
constexpr int kColumnTiles = kRows / 8; // of a warp's 16 x 64 scores
constexpr int kDepthTiles = kRows / 16; // of the same scores as an operand
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

using bf16 = __nv_bfloat16;
/// A warp's 16 x 64 scores: column tile n's accumulator (mma's C layout:
/// lane's rows g and g + 8, columns 8n + 2 (lane % 4) and the next).
using Scores = float[kColumnTiles][4];
/// The same 16 x 64 values as four 16 x 16 left operands (mma's A layout).
using Operand = uint32_t[kDepthTiles][4];

/// The row stride, in elements, of a d-wide bf16 tile: a multiple of 8
/// (ldmatrix reads 16-byte rows) and d / 2 + 4 words, which is 4 modulo 8,
/// so the eight rows one fragment load touches fall in distinct banks.
template <int D> constexpr int kStride = D + 8;

__device__ uint32_t pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t w;
  memcpy(&w, &v, sizeof w);
  return w;
}

/// c += a b for a 16 x 16 left operand and a 16 x 8 right one.
__device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                    uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Four 8 x 8 matrices of shared memory by one ldmatrix: lane l addresses
/// row l % 8 of matrix l / 8 at `row`, and gets, of each matrix, the two
/// elements of row l / 4 at columns 2 (l % 4) and the next (mma's fragment
/// layout).
__device__ void loadMatrices(uint32_t (&m)[4], const bf16 *row) {
  auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
               "{%0, %1, %2, %3}, [%4];"
               : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
               : "r"(address)
               : "memory");
}

/// The 16 x 16 left operand at `s` (a row-major tile of stride ld):
/// matrices (rows 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
/// One instruction where four 32-bit loads were.
__device__ void loadLeft(uint32_t (&a)[4], const bf16 *s, int ld, int lane) {
  int m = lane / 8;
  loadMatrices(a, s + ((m & 1) * 8 + lane % 8) * ld + (m >> 1) * 8);
}

/// Two 16 x 8 right operands X^T, X being the two 8 x 16 blocks at `x`
/// (rows 0-7 and 8-15, of stride ld): their rows are the operands'
/// columns. b[0], b[1] are the first's, b[2], b[3] the second's: matrices
/// (rows 0-7, columns 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
__device__ void loadRightTransposedPair(uint32_t (&b)[4], const bf16 *x, int ld,
                                        int lane) {
  int m = lane / 8;
  loadMatrices(b, x + ((m >> 1) * 8 + lane % 8) * ld + (m & 1) * 8);
}

/// Two 16 x 8 right operands side by side: the 16 x 16 block at `x` (rows of
/// stride ld) as it is, by ldmatrix.trans: matrices (rows 0-7, columns 0-7),
/// (8-15, 0-7), (0-7, 8-15), (8-15, 8-15), lane l addressing row l % 8 of
/// matrix l / 8. b[0], b[1] are columns 0-7; b[2], b[3] columns 8-15.
__device__ void loadRightPair(uint32_t (&b)[4], const bf16 *x, int ld,
                              int lane) {
  int m = lane / 8;
  const bf16 *p = x + ((m & 1) * 8 + lane % 8) * ld + (m >> 1) * 8;
  auto address = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
               "{%0, %1, %2, %3}, [%4];"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(address)
               : "memory");
}

/// s[r] = a_r x^T for R groups of 16 rows of `a` (a_r starting 16 r rows
/// in) against the 64 rows of `x`, all d deep. Each fragment of x loads once
/// for the R groups: shared memory's bandwidth, not the tensor cores, bounds
/// a warp of one group.
template <int D, int R>
__device__ void scoresOf(Scores (&s)[R], const bf16 *a, const bf16 *x,
                         int lane) {
  constexpr int ld = kStride<D>;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < kColumnTiles; ++n)
      s[r][n][0] = s[r][n][1] = s[r][n][2] = s[r][n][3] = 0.0f;
#pragma unroll
  for (int k0 = 0; k0 < D; k0 += 16) {
    uint32_t fa[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r)
      loadLeft(fa[r], a + 16 * r * ld + k0, ld, lane);
#pragma unroll
    for (int n = 0; n < kColumnTiles; n += 2) {
      uint32_t fb[4];
      loadRightTransposedPair(fb, x + n * 8 * ld + k0, ld, lane);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        mma(s[r][n], fa[r], fb[0], fb[1]);
        mma(s[r][n + 1], fa[r], fb[2], fb[3]);
      }
    }
  }
}

/// s = a x^T: the 16 rows of `a` against the 64 rows of `x`, both d deep.
template <int D>
__device__ void scores(Scores &s, const bf16 *a, const bf16 *x, int lane) {
  scoresOf<D, 1>(*reinterpret_cast<Scores(*)[1]>(&s), a, x, lane);
}

/// acc[r] += p[r] x for R of a warp's 16 x 64 operands and the 64 x D tile
/// at `x`, each fragment of x loaded once for the R.
template <int D, int R>
__device__ void accumulateOf(float (&acc)[R][D / 8][4], const Operand (&p)[R],
                             const bf16 *x, int lane) {
  constexpr int ld = kStride<D>;
#pragma unroll
  for (int kc = 0; kc < kDepthTiles; ++kc)
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t fb[4];
      loadRightPair(fb, x + kc * 16 * ld + n * 8, ld, lane);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        mma(acc[r][n], p[r][kc], fb[0], fb[1]);
        mma(acc[r][n + 1], p[r][kc], fb[2], fb[3]);
      }
    }
}

/// acc += p x: a warp's 16 x 64 operand times the 64 x D tile at `x`.
template <int D>
__device__ void accumulate(float (&acc)[D / 8][4], const Operand &p,
                           const bf16 *x, int lane) {
  using Acc = float[1][D / 8][4];
  accumulateOf<D, 1>(*reinterpret_cast<Acc *>(&acc),
                     *reinterpret_cast<const Operand(*)[1]>(&p), x, lane);
}

/// Scores (C layout) as left operands (A layout), rounded to bf16: columns
/// 16 kc .. 16 kc + 15 are column tiles 2 kc and 2 kc + 1.
__device__ void asOperand(Operand &a, const Scores &s) {
#pragma unroll
  for (int kc = 0; kc < kDepthTiles; ++kc) {
    a[kc][0] = pack(s[2 * kc][0], s[2 * kc][1]);
    a[kc][1] = pack(s[2 * kc][2], s[2 * kc][3]);
    a[kc][2] = pack(s[2 * kc + 1][0], s[2 * kc + 1][1]);
    a[kc][3] = pack(s[2 * kc + 1][2], s[2 * kc + 1][3]);
  }
}

/// Rows [first, first + Rows) of a t x D f32 (or bf16) matrix whose rows
/// lie `stride` elements apart into a bf16 tile; rows past t are zeros. f32
/// values are bf16 already: exact.
template <int D, typename In, int Rows = kRows>
__device__ void loadTile(bf16 *dst, const In *src, int64_t first, int64_t t,
                         int64_t stride) {
  constexpr int ld = kStride<D>;
  if constexpr (std::is_same_v<In, bf16>) {
    // Eight elements, 16 bytes, at a time: rows of D (a multiple of 8)
    // bf16 from a 16-byte aligned base, into tile rows of 16-byte strides.
    constexpr int octets = D / 8;
    for (int e = threadIdx.x; e < Rows * octets; e += kThreads) {
      int r = e / octets, c = (e % octets) * 8;
      *reinterpret_cast<uint4 *>(dst + r * ld + c) =
          first + r < t
              ? *reinterpret_cast<const uint4 *>(src + (first + r) * stride + c)
              : make_uint4(0, 0, 0, 0);
    }
  } else {
    constexpr int quads = D / 4;
    for (int e = threadIdx.x; e < Rows * quads; e += kThreads) {
      int r = e / quads, c = (e % quads) * 4;
      float4 x = first + r < t ? *reinterpret_cast<const float4 *>(
                                     src + (first + r) * stride + c)
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *reinterpret_cast<uint2 *>(dst + r * ld + c) =
          make_uint2(pack(x.x, x.y), pack(x.z, x.w));
    }
  }
}

/// loadTile, asynchronously where it can: bf16 rows go to shared memory by
/// cp.async, 16 bytes a copy, without passing through registers (rows past
/// t are zero-filled: a copy of no bytes), and land once the thread has
/// waited for their group (pipelined() below); f32 rows convert on the way,
/// so they take loadTile itself.
template <int D, typename In>
__device__ void loadTileAsync(bf16 *dst, const In *src, int64_t first,
                              int64_t t, int64_t stride) {
  if constexpr (std::is_same_v<In, bf16>) {
    constexpr int ld = kStride<D>, octets = D / 8;
    // Not unrolled: the copies' addresses, hoisted out of the kernels' loops,
    // would hold registers the products need.
#pragma unroll 1
    for (int e = threadIdx.x; e < kRows * octets; e += kThreads) {
      int r = e / octets, c = (e % octets) * 8;
      bool in = first + r < t;
      const bf16 *from = in ? src + (first + r) * stride + c : src;
      auto to =
          static_cast<uint32_t>(__cvta_generic_to_shared(dst + r * ld + c));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                   :
                   : "r"(to), "l"(from), "r"(in ? 16 : 0)
                   : "memory");
    }
  } else {
    loadTile<D>(dst, src, first, t, stride);
  }
}

/// Runs body(b, x0) for the tiles x0 = from, from + kRows, ... below `end`,
/// whose operands load(b, x0) loads into buffer b (0 or 1; loadTileAsync,
/// or plain stores to shared memory). With `prefetch`, tile x0 + kRows's
/// copies are in flight while body works on tile x0, in the other buffer;
/// without, each tile loads into buffer 0 once the last is done (the
/// kernels before the pipeline, kept to compare: dtk_cuda_attention_pipeline).
template <typename Load, typename Body>
__device__ void pipelined(int64_t from, int64_t end, bool prefetch, Load &&load,
                          Body &&body) {
  // With prefetch, tile `from` is loaded ahead: each step then loads the
  // next tile into the other buffer; without, each step loads its own tile.
  // One place issues every load (each is a copy of the loops' code).
  int64_t ahead = prefetch ? kRows : 0;
  int b = 0;
  for (int64_t x0 = from - ahead; x0 < end; x0 += kRows) {
    __syncthreads(); // every warp is done with the buffer loaded next
    int64_t next = x0 + ahead;
    if (next < end) {
      load(prefetch ? b ^ 1 : 0, next);
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
    if (x0 < from) { // the first tile, ahead of the pipeline
      b ^= 1;
      continue;
    }
    if (next < end && prefetch)
      asm volatile("cp.async.wait_group 1;" ::: "memory"); // tile x0's
    else
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads(); // tile x0 is in its buffer for every thread
    body(prefetch ? b : 0, x0);
    b ^= 1;
  }
}

/// Adds `x` over the quad of lanes that hold one accumulator row.
__device__ float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

__device__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ bool sees(int64_t i, int64_t j, int64_t t, int32_t causal) {
  return i < t && j < t && (!causal || j <= i);
}

/// Whether queries [i0, i0 + rows) all see keys [j0, j0 + cols): a tile off
/// the causal diagonal and inside t, where no score needs its mask. The
/// test is one per warp and tile; only the diagonal's and the edge's tiles
/// then pay for a position check per score (on an H200, Nsight Compute
/// found the forward kernel's integer pipeline its busiest, at 18
/// instructions per tensor-core one, when every score was checked).
__device__ bool allSee(int64_t i0, int rows, int64_t j0, int cols, int64_t t,
                       int32_t causal) {
  return i0 + rows <= t && j0 + cols <= t && (!causal || j0 + cols - 1 <= i0);
}

/// 2^x in one MUFU.EX2, flushing results below 2^-126 to 0 (a probability
/// that small rounds to 0 in bf16 anyway), where exp2f adds instructions
/// around the same MUFU.EX2 to give subnormal results.
__device__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// The operands' layouts, in the order of the entry point's pointers.
struct Layouts {
  dtk_attention_layout of[8];
};

/// Where a thread stands: the block's slice and first row, and the lane's
/// accumulator rows (g and g + 8 of its warp's 16) and first column within
/// a column tile.
struct Place {
  int64_t slice, first, row[2];
  int lane, warp, column;
  /// Where the slice starts in an operand of layout `l`.
  __device__ int64_t at(const dtk_attention_layout &l) const {
    return slice / l.heads * l.batch + slice % l.heads * l.head;
  }
};

/// Where a thread stands in a block of R kRows rows, each warp owning R
/// groups of 16: the lane's rows in group r.
template <int R> __device__ Place placeOfGroup(int64_t t, int r) {
  int64_t tiles = (t + R * kRows - 1) / (R * kRows);
  Place p;
  p.slice = blockIdx.x / tiles;
  p.first = int64_t(blockIdx.x % tiles) * R * kRows;
  p.lane = int(threadIdx.x % 32);
  p.warp = int(threadIdx.x / 32);
  p.column = (p.lane % 4) * 2;
  p.row[0] = p.first + 16 * (R * p.warp + r) + p.lane / 4;
  p.row[1] = p.row[0] + 8;
  return p;
}

template <int D> __device__ Place placeOf(int64_t t) {
  return placeOfGroup<1>(t, 0);
}

/// Element e of column tile n of an accumulator: its column within the
/// tile of 64, and which of the lane's two rows it is on.
__device__ int columnOf(const Place &p, int n, int e) {
  return n * 8 + p.column + (e & 1);
}

/// Stores a lane's share of `acc` times `scale` into the rows of the
/// slice's t x D matrix in `out`, `layout`'s rows, one row per divisor in
/// `by` (1 for none); into bf16 `out`, each f32 value rounded to nearest.
template <int D, typename Out>
__device__ void storeRows(Out *out, const dtk_attention_layout &layout,
                          const float (&acc)[D / 8][4], const Place &p,
                          int64_t t, float scale, const float (&by)[2]) {
  out += p.at(layout);
  for (int h = 0; h < 2; ++h) {
    if (p.row[h] >= t)
      continue;
    float f = scale / by[h];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      float lo = acc[n][2 * h] * f, hi = acc[n][2 * h + 1] * f;
      Out *at = out + p.row[h] * layout.row + n * 8 + p.column;
      if constexpr (std::is_same_v<Out, bf16>)
        *reinterpret_cast<__nv_bfloat162 *>(at) = __floats2bfloat162_rn(lo, hi);
      else
        *reinterpret_cast<float2 *>(at) = make_float2(lo, hi);
    }
  }
}

/// O for R x 64 query rows, each warp owning R groups of 16 (two for narrow
/// heads: each fragment of K and V then serves two groups' products). A row
/// visits the same key tiles, in the same order, whatever R is, so the bits
/// are the same. `scale2` is the softmax scale times log2(e): the kernels
/// work in base 2.
// One group of 16 rows a warp on bf16 inputs fits 128 registers (12 bytes
// spilled for heads of 64): four blocks a multiprocessor, 16 warps, where
// two groups a warp (234 registers) leave 8 to hide the softmax's latencies.
// Which is faster is for a GPU to say (DTRT_CUDA_ATTENTION_WARP_ROWS=16).
template <int D, int R, typename In, typename Out>
__global__ void
__launch_bounds__(kThreads,
                  R == 1 && D <= 64 && std::is_same_v<In, bf16> ? 4 : 1)
    forwardKernel(const In *q, const In *k, const In *v, Out *o, float *lse,
                  Layouts layouts, int64_t t, int32_t causal, float scale2,
                  bool prefetch) {
  constexpr int ld = kStride<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  // Q, then K and V twice over (pipelined()'s two buffers).
  bf16 *qs = reinterpret_cast<bf16 *>(smem), *kv = qs + R * kRows * ld;
  auto ks = [&](int b) { return kv + 2 * b * kRows * ld; };
  auto vs = [&](int b) { return kv + (2 * b + 1) * kRows * ld; };
  Place g[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    g[r] = placeOfGroup<R>(t, r);
  const Place &p = g[0];
  // Each operand's slice, found once (a division by the heads).
  const dtk_attention_layout &lq = layouts.of[0], &lk = layouts.of[1],
                             &lv = layouts.of[2];
  const In *kSlice = k + p.at(lk), *vSlice = v + p.at(lv);
  const bf16 *qw = qs + 16 * R * p.warp * ld;
  loadTile<D, In, R * kRows>(qs, q + p.at(lq), p.first, t, lq.row);
  float acc[R][D / 8][4] = {};
  // The lane's rows' running maxima and its share of their sums (the
  // quad's lanes see the same maxima, so their partial sums add up).
  float m[R][2], l[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
    m[r][0] = m[r][1] = -INFINITY, l[r][0] = l[r][1] = 0.0f;
  int64_t end = causal ? min(t, p.first + R * kRows) : t;
  // Under the causal mask, key tiles past the warp's last row are all
  // masked for it: it skips them (with R = 1 no block loads such a tile).
  int64_t last = p.first + 16 * R * (p.warp + 1) - 1;
  auto load = [&](int b, int64_t j0) {
    loadTileAsync<D>(ks(b), kSlice, j0, t, lk.row);
    loadTileAsync<D>(vs(b), vSlice, j0, t, lv.row);
  };
  pipelined(0, end, prefetch, load, [&](int b, int64_t j0) {
    if (causal && j0 > last)
      return;
    Scores s[R];
    scoresOf<D, R>(s, qw, ks(b), p.lane);
    Operand pa[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float mNew[2] = {m[r][0], m[r][1]};
      bool all =
          allSee(p.first + 16 * (R * p.warp + r), 16, j0, kRows, t, causal);
#pragma unroll
      for (int n = 0; n < kColumnTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[r][n][e] * scale2;
          if (!all && !sees(g[r].row[e / 2], j0 + columnOf(p, n, e), t, causal))
            x = -INFINITY;
          s[r][n][e] = x;
          mNew[e / 2] = fmaxf(mNew[e / 2], x);
        }
      // A row that has seen nothing yet subtracts 0: its -inf scores give
      // 2^-inf = 0, as they must, rather than NaN.
      float base[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mNew[h] = quadMax(mNew[h]);
        float shrink = mNew[h] == -INFINITY ? 1.0f : exp2f(m[r][h] - mNew[h]);
        m[r][h] = mNew[h];
        base[h] = mNew[h] == -INFINITY ? 0.0f : mNew[h];
        l[r][h] *= shrink;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          acc[r][n][2 * h] *= shrink;
          acc[r][n][2 * h + 1] *= shrink;
        }
      }
#pragma unroll
      for (int n = 0; n < kColumnTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = fastExp2(s[r][n][e] - base[e / 2]);
          s[r][n][e] = x;
          l[r][e / 2] += x;
        }
      asOperand(pa[r], s[r]);
    }
    accumulateOf<D, R>(acc, pa, vs(b), p.lane);
  });
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float sum[2] = {quadSum(l[r][0]), quadSum(l[r][1])};
    storeRows<D>(o, layouts.of[3], acc[r], g[r], t, 1.0f, sum);
    // The log-sum-exp in natural units: m and log2 l are base 2.
    if (p.lane % 4 == 0)
      for (int h = 0; h < 2; ++h)
        if (g[r].row[h] < t)
          lse[p.slice * t + g[r].row[h]] = (m[r][h] + log2f(sum[h])) * kLn2;
  }
}

/// For 64 query rows: dQ = scale sum_j p_j (dO . v_j - D) k_j, in one pass
/// over the keys, from each row's base-2 log-sum-exp and D in `stats`.
template <int D, typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    queryGradKernel(const In *q, const In *k, const In *v, const In *dout,
                    Out *dq, const float *stats, Layouts layouts, int64_t t,
                    int32_t causal, float scale, float scale2, bool prefetch) {
  constexpr int ld = kStride<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  // Q and dO, then K and V twice over (pipelined()'s two buffers).
  bf16 *qs = reinterpret_cast<bf16 *>(smem), *dos = qs + kRows * ld,
       *kv = dos + kRows * ld;
  auto ks = [&](int b) { return kv + 2 * b * kRows * ld; };
  auto vs = [&](int b) { return kv + (2 * b + 1) * kRows * ld; };
  Place p = placeOf<D>(t);
  const dtk_attention_layout &lq = layouts.of[0], &lk = layouts.of[1],
                             &lv = layouts.of[2], &ldo = layouts.of[4];
  const In *kSlice = k + p.at(lk), *vSlice = v + p.at(lv);
  const bf16 *qw = qs + 16 * p.warp * ld, *dow = dos + 16 * p.warp * ld;
  loadTile<D>(qs, q + p.at(lq), p.first, t, lq.row);
  loadTile<D>(dos, dout + p.at(ldo), p.first, t, ldo.row);
  int64_t end = causal ? min(t, p.first + kRows) : t;

  // The scores S (scaled, base 2, -inf where masked) and dP = dO V^T of key
  // tile j0, in buffer b.
  auto load = [&](int b, int64_t j0) {
    loadTileAsync<D>(ks(b), kSlice, j0, t, lk.row);
    loadTileAsync<D>(vs(b), vSlice, j0, t, lv.row);
  };
  int64_t warpFirst = p.first + 16 * p.warp;
  auto both = [&](Scores &s, Scores &dp, int b, int64_t j0) {
    scores<D>(s, qw, ks(b), p.lane);
    scores<D>(dp, dow, vs(b), p.lane);
    bool all = allSee(warpFirst, 16, j0, kRows, t, causal);
#pragma unroll
    for (int n = 0; n < kColumnTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] *= scale2;
        if (!all && !sees(p.row[e / 2], j0 + columnOf(p, n, e), t, causal))
          s[n][e] = -INFINITY;
      }
  };

  // Each row's base-2 log-sum-exp and D, as attentionRowStats left them.
  float lse[2], dot[2];
  for (int h = 0; h < 2; ++h) {
    bool in = p.row[h] < t; // rows past t see nothing: their P is 0
    lse[h] = in ? stats[2 * (p.slice * t + p.row[h])] : 0.0f;
    dot[h] = in ? stats[2 * (p.slice * t + p.row[h]) + 1] : 0.0f;
  }

  // dQ: dS = P (dP - D) a tile at a time, times the keys.
  float acc[D / 8][4] = {};
  pipelined(0, end, prefetch, load, [&](int b, int64_t j0) {
    Scores s, dp;
    both(s, dp, b, j0);
#pragma unroll
    for (int n = 0; n < kColumnTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // A masked score is -inf and its lse finite (0 for rows past t):
        // its probability is 0.
        int h = e / 2;
        dp[n][e] = fastExp2(s[n][e] - lse[h]) * (dp[n][e] - dot[h]);
      }
    Operand ds;
    asOperand(ds, dp);
    accumulate<D>(acc, ds, ks(b), p.lane);
  });
  float one[2] = {1.0f, 1.0f};
  storeRows<D>(dq, layouts.of[5], acc, p, t, scale, one);
}

/// For 64 keys: dV_j = sum_i p_ij dO_i and dK_j = scale sum_i ds_ij q_i over
/// the query tiles that see them, reading each query row's statistics.
// Three blocks a multiprocessor for heads up to 64 wide, as before the
// pipeline (whose copies' addresses cost registers).
template <int D, typename In, typename Out>
__global__ void __launch_bounds__(kThreads, D <= 64 ? 3 : 1)
    keyGradKernel(const In *q, const In *k, const In *v, const In *dout,
                  const float *stats, Out *dk, Out *dv, Layouts layouts,
                  int64_t t, int32_t causal, float scale, float scale2,
                  bool prefetch) {
  constexpr int ld = kStride<D>;
  extern __shared__ __align__(16) unsigned char smem[];
  // K and V, then Q and dO twice over (pipelined()'s two buffers), then the
  // query rows' statistics twice over.
  bf16 *ks = reinterpret_cast<bf16 *>(smem), *vs = ks + kRows * ld,
       *qdo = vs + kRows * ld;
  auto qs = [&](int b) { return qdo + 2 * b * kRows * ld; };
  auto dos = [&](int b) { return qdo + (2 * b + 1) * kRows * ld; };
  // Each query row's (log-sum-exp, D) as the query side left them, by
  // cp.async too (8 bytes a row; rows past t zero-filled).
  float *statsTile = reinterpret_cast<float *>(qdo + 4 * kRows * ld);
  auto rowStats = [&](int b) { return statsTile + 2 * b * kRows; };
  // The lane's rows are keys here, its columns queries.
  Place p = placeOf<D>(t);
  const dtk_attention_layout &lq = layouts.of[0], &lk = layouts.of[1],
                             &lv = layouts.of[2], &ldo = layouts.of[4];
  const In *qSlice = q + p.at(lq), *doSlice = dout + p.at(ldo);
  const bf16 *kw = ks + 16 * p.warp * ld, *vw = vs + 16 * p.warp * ld;
  loadTile<D>(ks, k + p.at(lk), p.first, t, lk.row);
  loadTile<D>(vs, v + p.at(lv), p.first, t, lv.row);
  float accK[D / 8][4] = {}, accV[D / 8][4] = {};
  const float *sliceStats = stats + 2 * p.slice * t;
  auto load = [&](int b, int64_t i0) {
    loadTileAsync<D>(qs(b), qSlice, i0, t, lq.row);
    loadTileAsync<D>(dos(b), doSlice, i0, t, ldo.row);
    for (int e = threadIdx.x; e < kRows; e += kThreads) {
      bool in = i0 + e < t;
      const float *from = in ? sliceStats + 2 * (i0 + e) : sliceStats;
      auto to =
          static_cast<uint32_t>(__cvta_generic_to_shared(rowStats(b) + 2 * e));
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
                   :
                   : "r"(to), "l"(from), "r"(in ? 8 : 0)
                   : "memory");
    }
  };
  pipelined(causal ? p.first : 0, t, prefetch, load, [&](int b, int64_t i0) {
    // Transposed: the warp's 16 keys against 64 queries. S^T becomes P^T
    // in place, then dP^T becomes dS^T.
    const float *st = rowStats(b); // (lse, D) of each of the 64 queries
    Scores pt, dst;
    scores<D>(pt, kw, qs(b), p.lane);
    scores<D>(dst, vw, dos(b), p.lane);
    // The warp's 16 keys are seen by all 64 queries off the diagonal.
    bool all = allSee(i0, kRows, p.first + 16 * p.warp, 16, t, causal);
#pragma unroll
    for (int n = 0; n < kColumnTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int c = columnOf(p, n, e);
        float x = fastExp2(pt[n][e] * scale2 - st[2 * c]);
        if (!all && !sees(i0 + c, p.row[e / 2], t, causal))
          x = 0.0f;
        pt[n][e] = x;
        dst[n][e] = x * (dst[n][e] - st[2 * c + 1]);
      }
    Operand a;
    asOperand(a, pt);
    accumulate<D>(accV, a, dos(b), p.lane);
    asOperand(a, dst);
    accumulate<D>(accK, a, qs(b), p.lane);
  });
  float one[2] = {1.0f, 1.0f};
  storeRows<D>(dk, layouts.of[6], accK, p, t, scale, one);
  storeRows<D>(dv, layouts.of[7], accV, p, t, 1.0f, one);
}

/// Calls f with std::integral_constant<int, d> for the widths these kernels
/// take; false for any other.
template <typename F> bool withWidth(int64_t d, F &&f) {
  switch (d) {
#define DTK_WIDTH(w)                                                           \
  case w:                                                                      \
    f(std::integral_constant<int, w>{});                                       \
    return true;
    DTK_WIDTH(16)
    DTK_WIDTH(32)
    DTK_WIDTH(48)
    DTK_WIDTH(64)
    DTK_WIDTH(80)
    DTK_WIDTH(96)
    DTK_WIDTH(112)
    DTK_WIDTH(128)
#undef DTK_WIDTH
  default:
    return false;
  }
}

bool aligned(std::initializer_list<const void *> operands) {
  for (const void *p : operands)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

/// `count` layouts whose strides keep every row 16-byte aligned (in
/// elements of either type: 8 bf16 or f32) and whose heads are positive.
bool aligned(const dtk_attention_layout *layouts, int count) {
  for (int i = 0; i < count; ++i) {
    const dtk_attention_layout &l = layouts[i];
    if (l.heads < 1 || l.batch % 8 || l.head % 8 || l.row % 8)
      return false;
  }
  return true;
}

/// `count` layouts into Layouts.
Layouts layoutsOf(const dtk_attention_layout *layouts, int count) {
  Layouts out{};
  for (int i = 0; i < count; ++i)
    out.of[i] = layouts[i];
  return out;
}

/// Every operand of `count` in the [slices, t, d] layout.
Layouts contiguous(int64_t t, int64_t d, int count) {
  Layouts out{};
  for (int i = 0; i < count; ++i)
    out.of[i] = dtk::packedRows(t, d);
  return out;
}

template <typename Kernel> void allowShared(Kernel kernel, size_t bytes) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       int(bytes));
}

template <int D> constexpr size_t tileBytes() {
  return sizeof(bf16) * kRows * kStride<D>;
}

/// Whether the kernels load the next tile while they work on this one
/// (dtk_cuda_attention_pipeline).
bool prefetchTiles = true;

/// The groups of 16 query rows a forward warp owns where its heads allow two
/// (dtk_cuda_attention_warp_rows).
int warpGroups = 2;

/// Calls f with the widths the typed kernels take, as withWidth does: the
/// heads models use (each width and type pairing is three more kernels).
template <typename F> bool withTypedWidth(int64_t d, F &&f) {
  switch (d) {
  case 32:
    f(std::integral_constant<int, 32>{});
    return true;
  case 64:
    f(std::integral_constant<int, 64>{});
    return true;
  case 128:
    f(std::integral_constant<int, 128>{});
    return true;
  default:
    return false;
  }
}

/// Calls f(In{}, Out{}) as null pointers of the stored types; false for a
/// type other than DTK_CUDA_F32 or DTK_CUDA_BF16.
template <typename F> bool withTypes(int in, int out, F &&f) {
  auto withOut = [&](auto input) {
    if (out == DTK_CUDA_F32)
      f(input, static_cast<float *>(nullptr));
    else
      f(input, static_cast<bf16 *>(nullptr));
  };
  if ((in != DTK_CUDA_F32 && in != DTK_CUDA_BF16) ||
      (out != DTK_CUDA_F32 && out != DTK_CUDA_BF16))
    return false;
  if (in == DTK_CUDA_F32)
    withOut(static_cast<const float *>(nullptr));
  else
    withOut(static_cast<const bf16 *>(nullptr));
  return true;
}

/// The element type of a (const) pointer type.
template <typename P>
using Element = std::remove_const_t<std::remove_pointer_t<P>>;

/// Calls launch(width, In *, Out *) (null pointers of the stored types) for
/// the kernels `in`, `out` and `d` ask for: f32 with f32 at every width
/// withWidth takes, other pairings at withTypedWidth's. 0 when launched.
template <typename F> int dispatch(int in, int out, int64_t d, F &&launch) {
  if (in == DTK_CUDA_F32 && out == DTK_CUDA_F32)
    return withWidth(d,
                     [&](auto width) {
                       launch(width, static_cast<const float *>(nullptr),
                              static_cast<float *>(nullptr));
                     })
               ? 0
               : 1;
  bool launched = false;
  bool width = withTypedWidth(d, [&](auto width) {
    launched = withTypes(in, out, [&](auto input, auto output) {
      launch(width, input, output);
    });
  });
  return width && launched ? 0 : 1;
}

template <int D, int R, typename In, typename Out>
void forwardRows(const void *q, const void *k, const void *v, void *o,
                 float *lse, const Layouts &layouts, int64_t slices, int64_t t,
                 int32_t causal, float scale2, dtk_stream stream) {
  // Q's R tiles, and K and V in two buffers each.
  constexpr size_t bytes = (R + 4) * tileBytes<D>();
  auto kernel = forwardKernel<D, R, In, Out>;
  allowShared(kernel, bytes);
  auto blocks = unsigned(slices * ((t + R * kRows - 1) / (R * kRows)));
  kernel<<<blocks, kThreads, bytes, stream>>>(
      static_cast<const In *>(q), static_cast<const In *>(k),
      static_cast<const In *>(v), static_cast<Out *>(o), lse, layouts, t,
      causal, scale2, prefetchTiles);
}

template <int D, typename In, typename Out>
void forward(const void *q, const void *k, const void *v, void *o, float *lse,
             const Layouts &layouts, int64_t slices, int64_t t, int32_t causal,
             float scale2, dtk_stream stream) {
  // Two groups of 16 rows a warp where the accumulators leave the registers
  // for them (heads of 32 and 64, GPT-2's); 128-wide heads would spill.
  if constexpr (D == 32 || D == 64)
    if (warpGroups == 2)
      return forwardRows<D, 2, In, Out>(q, k, v, o, lse, layouts, slices, t,
                                        causal, scale2, stream);
  forwardRows<D, 1, In, Out>(q, k, v, o, lse, layouts, slices, t, causal,
                             scale2, stream);
}

template <int D, typename In, typename Out>
void backward(const void *q, const void *k, const void *v, const void *o,
              const float *lse, const void *dout, void *dq, void *dk, void *dv,
              float *scratch, const Layouts &layouts, int64_t slices, int64_t t,
              int32_t causal, float scale, float scale2, dtk_stream stream) {
  auto in = [](const void *x) { return static_cast<const In *>(x); };
  auto out = [](void *x) { return static_cast<Out *>(x); };
  // Each query row's log-sum-exp (base 2, the kernels' units) and D; O is
  // an input here, stored as the others are.
  dtk::launchAttentionRowStats(in(o), layouts.of[3], in(dout), layouts.of[4],
                               lse, scratch, slices, t, D, kLog2e, stream);
  auto blocks = unsigned(slices * ((t + kRows - 1) / kRows));
  // Q and dO (K and V), then K and V (Q and dO) in two buffers each, and
  // for the key side the query rows' statistics twice.
  constexpr size_t queryBytes = 6 * tileBytes<D>();
  allowShared(queryGradKernel<D, In, Out>, queryBytes);
  queryGradKernel<D, In, Out><<<blocks, kThreads, queryBytes, stream>>>(
      in(q), in(k), in(v), in(dout), out(dq), scratch, layouts, t, causal,
      scale, scale2, prefetchTiles);
  constexpr size_t keyBytes = queryBytes + 4 * kRows * sizeof(float);
  allowShared(keyGradKernel<D, In, Out>, keyBytes);
  keyGradKernel<D, In, Out><<<blocks, kThreads, keyBytes, stream>>>(
      in(q), in(k), in(v), in(dout), scratch, out(dk), out(dv), layouts, t,
      causal, scale, scale2, prefetchTiles);
}

} // namespace

namespace {

int launchForward(const void *q, const void *k, const void *v, void *o,
                  float *lse, int in, int out, const Layouts &layouts,
                  int64_t slices, int64_t t, int64_t d, int32_t causal,
                  dtk_stream stream) {
  if (slices * t == 0)
    return 0;
  if (!aligned({q, k, v, o}))
    return 1;
  float scale2 = kLog2e / sqrtf(float(d));
  return dispatch(in, out, d, [&](auto width, auto input, auto output) {
    forward<decltype(width)::value, Element<decltype(input)>,
            Element<decltype(output)>>(q, k, v, o, lse, layouts, slices, t,
                                       causal, scale2, stream);
  });
}

int launchBackward(const void *q, const void *k, const void *v, const void *o,
                   const float *lse, const void *dout, void *dq, void *dk,
                   void *dv, int in, int out, const Layouts &layouts,
                   float *scratch, int64_t slices, int64_t t, int64_t d,
                   int32_t causal, dtk_stream stream) {
  if (slices * t == 0)
    return 0;
  if (!aligned({q, k, v, o, dout, dq, dk, dv}))
    return 1;
  float scale = 1.0f / sqrtf(float(d)), scale2 = kLog2e * scale;
  return dispatch(in, out, d, [&](auto width, auto input, auto output) {
    backward<decltype(width)::value, Element<decltype(input)>,
             Element<decltype(output)>>(q, k, v, o, lse, dout, dq, dk, dv,
                                        scratch, layouts, slices, t, causal,
                                        scale, scale2, stream);
  });
}

} // namespace

extern "C" void dtk_cuda_attention_pipeline(int on) { prefetchTiles = on != 0; }

extern "C" void dtk_cuda_attention_warp_rows(int rows) {
  warpGroups = rows == 16 ? 1 : 2;
}

extern "C" int dtk_cuda_attention_bf16_typed(const void *q, const void *k,
                                             const void *v, void *o, float *lse,
                                             int in, int out, int64_t slices,
                                             int64_t t, int64_t d,
                                             int32_t causal,
                                             dtk_stream stream) {
  return launchForward(q, k, v, o, lse, in, out, contiguous(t, d, 4), slices, t,
                       d, causal, stream);
}

extern "C" int dtk_cuda_attention_grad_bf16_typed(
    const void *q, const void *k, const void *v, const void *o,
    const float *lse, const void *dout, void *dq, void *dk, void *dv, int in,
    int out, float *scratch, int64_t slices, int64_t t, int64_t d,
    int32_t causal, dtk_stream stream) {
  return launchBackward(q, k, v, o, lse, dout, dq, dk, dv, in, out,
                        contiguous(t, d, 8), scratch, slices, t, d, causal,
                        stream);
}

extern "C" int dtk_cuda_attention_bf16_strided(
    const void *q, const void *k, const void *v, void *o, float *lse, int in,
    int out, const dtk_attention_layout *layouts, int64_t slices, int64_t t,
    int64_t d, int32_t causal, dtk_stream stream) {
  if (!aligned(layouts, 4))
    return 1;
  return launchForward(q, k, v, o, lse, in, out, layoutsOf(layouts, 4), slices,
                       t, d, causal, stream);
}

extern "C" int dtk_cuda_attention_grad_bf16_strided(
    const void *q, const void *k, const void *v, const void *o,
    const float *lse, const void *dout, void *dq, void *dk, void *dv, int in,
    int out, const dtk_attention_layout *layouts, float *scratch,
    int64_t slices, int64_t t, int64_t d, int32_t causal, dtk_stream stream) {
  if (!aligned(layouts, 8))
    return 1;
  return launchBackward(q, k, v, o, lse, dout, dq, dk, dv, in, out,
                        layoutsOf(layouts, 8), scratch, slices, t, d, causal,
                        stream);
}

extern "C" void dtk_cuda_attention_bf16(const float *q, const float *k,
                                        const float *v, float *o, float *lse,
                                        int64_t slices, int64_t t, int64_t d,
                                        int32_t causal, dtk_stream stream) {
  if (dtk_cuda_attention_bf16_typed(q, k, v, o, lse, DTK_CUDA_F32, DTK_CUDA_F32,
                                    slices, t, d, causal, stream) != 0)
    dtk_cuda_attention_tf32(q, k, v, o, lse, slices, t, d, causal, stream);
}

extern "C" void
dtk_cuda_attention_grad_bf16(const float *q, const float *k, const float *v,
                             const float *o, const float *lse,
                             const float *dout, float *dq, float *dk, float *dv,
                             float *scratch, int64_t slices, int64_t t,
                             int64_t d, int32_t causal, dtk_stream stream) {
  if (dtk_cuda_attention_grad_bf16_typed(q, k, v, o, lse, dout, dq, dk, dv,
                                         DTK_CUDA_F32, DTK_CUDA_F32, scratch,
                                         slices, t, d, causal, stream) != 0)
    dtk_cuda_attention_grad_tf32(q, k, v, o, lse, dout, dq, dk, dv, scratch,
                                 slices, t, d, causal, stream);
}
