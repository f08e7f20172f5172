//===- column_sums.cu - a bias's gradient, where cuBLASLt does not do it --===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A GPU plan asks cuBLASLt to sum dY over its rows (a bias's gradient) in the
// epilogue of the weight gradient's product dY^T x (dtrt/cuda/blas.h's
// Epilogue::BiasGrad). Where cuBLASLt has no algorithm for that, or the
// classic API computes the products, this kernel sums the columns after the
// product: a block per 32 columns, its 8 row lanes each adding every 8th row
// in order, then the lanes in order, so the same bits every run. It reads dY
// once more, which is what the epilogue saves; it is the fallback, not the
// fast path.
//
//===----------------------------------------------------------------------===//

#include "convert.cuh"
#include "dtk/cuda_kernels.h"

namespace {

constexpr int kColumns = 32, kRowLanes = 8;

__global__ void columnSums(dtk::AnyData x, int64_t rows, int64_t cols,
                           int64_t ld, float *sums) {
  __shared__ float lanes[kRowLanes][kColumns + 1];
  int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes)
      acc += x[r * ld + c];
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols)
    return;
  float sum = 0.0f;
  for (int k = 0; k < kRowLanes; ++k)
    sum += lanes[k][threadIdx.x];
  sums[c] = sum;
}

} // namespace

extern "C" void dtk_cuda_column_sums_typed(const void *x, int type,
                                           int64_t rows, int64_t cols,
                                           int64_t ld, float *sums,
                                           dtk_stream stream) {
  if (cols == 0)
    return;
  unsigned blocks = unsigned((cols + kColumns - 1) / kColumns);
  columnSums<<<blocks, dim3(kColumns, kRowLanes), 0, stream>>>(
      dtk::AnyData{x, type}, rows, cols, ld, sums);
}
