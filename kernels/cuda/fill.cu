//===- fill.cu - a bias in every row, before a product adds to it ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dt.matmul_bias on the GPU is this fill, then cuBLAS accumulating the
// product into it (beta = 1), as the CPU kernel does with OpenBLAS. A product
// that accumulates into C already adds the bias to what C holds.
//
//===----------------------------------------------------------------------===//

#include "dtk/cuda_kernels.h"

namespace {

constexpr int kThreads = 256;

__global__ void fillRows(const float *bias, float *c, int64_t total, int64_t n,
                         bool add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    c[i] = add ? c[i] + bias[i % n] : bias[i % n];
}

} // namespace

extern "C" void dtk_cuda_fill_rows_f32(const float *bias, float *c,
                                       int64_t rows, int64_t n, int add,
                                       dtk_stream stream) {
  int64_t total = rows * n;
  if (total == 0)
    return;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  fillRows<<<unsigned(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(
      bias, c, total, n, add != 0);
}
