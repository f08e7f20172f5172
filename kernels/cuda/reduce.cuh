//===- reduce.cuh - block-wide reductions ----------------------*- CUDA -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Sums and maxima over a thread block: warp shuffles, then one value per warp
// through shared memory. The order of the additions depends only on the block
// size, so a kernel that uses them is deterministic.
//
//===----------------------------------------------------------------------===//

#ifndef DTK_CUDA_REDUCE_CUH
#define DTK_CUDA_REDUCE_CUH

namespace dtk {

template <typename T, typename Op> __device__ T warpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Every thread of the block gets op over the block's values. `shared` holds
/// 32 values; blockDim.x is a multiple of 32. Synchronises the block.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T identity, T *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpReduce(v, op);
  __syncthreads(); // `shared` may still be read by a previous reduction
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  int warps = blockDim.x / 32;
  v = lane < warps ? shared[lane] : identity;
  return warpReduce(v, op);
}

struct Sum {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ inline float blockSum(float v, float *shared) {
  return blockReduce(v, Sum{}, 0.0f, shared);
}
__device__ inline double blockSum(double v, double *shared) {
  return blockReduce(v, Sum{}, 0.0, shared);
}
__device__ inline float blockMax(float v, float *shared) {
  return blockReduce(v, Max{}, -INFINITY, shared);
}

} // namespace dtk

#endif // DTK_CUDA_REDUCE_CUH
