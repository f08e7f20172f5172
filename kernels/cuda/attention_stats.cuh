//===- attention_stats.cuh - attention gradient's row statistics -*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// FlashAttention-2's preprocessing for attention's gradient. Every query row
// i needs two numbers: its log-sum-exp, which the forward kernels stored
// beside O, and D_i = sum_j P_ij dP_ij, which equals dO_i . O_i because
// O_i = sum_j P_ij v_j and dP_ij = dO_i . v_j. One warp a row reads both and
// writes the pair into the gradient's scratch, where the query side and the
// key side of every family of kernels read them: no kernel makes a pass over
// the keys for the statistics alone.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_ATTENTION_STATS_CUH
#define DTK_CUDA_ATTENTION_STATS_CUH

#include "dtk/cuda_kernels.h"
#include "reduce.cuh"

#include <cuda_bf16.h>

namespace dtk {

__device__ inline float toFloat(float x) { return x; }
__device__ inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

/// Where slice s's row i starts in an operand of layout `l`.
__device__ inline int64_t rowAt(const dtk_attention_layout &l, int64_t s,
                                int64_t i) {
  return s / l.heads * l.batch + s % l.heads * l.head + i * l.row;
}

/// stats[2 r] = lse[r] * unit and stats[2 r + 1] = dO_r . O_r for the
/// slices x t query rows r, a warp each. `unit` is 1 for kernels that work
/// in natural logarithms, log2(e) for those that work in base 2.
template <typename In>
__global__ void attentionRowStats(const In *o, dtk_attention_layout lo,
                                  const In *dout, dtk_attention_layout ldo,
                                  const float *lse, float *stats, int64_t rows,
                                  int64_t t, int64_t d, float unit) {
  int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows)
    return;
  int lane = int(threadIdx.x % 32);
  const In *x = o + rowAt(lo, r / t, r % t),
           *g = dout + rowAt(ldo, r / t, r % t);
  float sum = 0.0f;
  for (int64_t c = lane; c < d; c += 32)
    sum += toFloat(x[c]) * toFloat(g[c]);
  sum = warpReduce(sum, Sum{});
  if (lane == 0) {
    stats[2 * r] = lse[r] * unit;
    stats[2 * r + 1] = sum;
  }
}

/// Launches attentionRowStats over slices x t rows on `stream`.
template <typename In>
void launchAttentionRowStats(const In *o, dtk_attention_layout lo,
                             const In *dout, dtk_attention_layout ldo,
                             const float *lse, float *stats, int64_t slices,
                             int64_t t, int64_t d, float unit,
                             dtk_stream stream) {
  constexpr int kWarps = 8;
  int64_t rows = slices * t;
  auto blocks = unsigned((rows + kWarps - 1) / kWarps);
  attentionRowStats<In><<<blocks, kWarps * 32, 0, stream>>>(
      o, lo, dout, ldo, lse, stats, rows, t, d, unit);
}

/// The [slices, t, d] layout.
inline dtk_attention_layout packedRows(int64_t t, int64_t d) {
  return dtk_attention_layout{1, t * d, 0, d};
}

} // namespace dtk

#endif // DTK_CUDA_ATTENTION_STATS_CUH
