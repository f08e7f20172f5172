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

#include "convert.cuh"
#include "dtk/cuda_kernels.h"

namespace {

constexpr int kThreads = 256;

__global__ void fillRows(const float *bias, float *c, int64_t total, int64_t n,
                         bool add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    c[i] = add ? c[i] + bias[i % n] : bias[i % n];
}

__global__ void fillRowsTyped(dtk::AnyData bias, dtk::AnyOut c, int64_t total,
                              int64_t n, bool add) {
  // `add` with an f32 C only.
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    put(c, i, add ? static_cast<float *>(c.p)[i] + bias[i % n] : bias[i % n]);
}

} // namespace

extern "C" void dtk_cuda_fill_rows_typed(const void *bias, int bias_type,
                                         void *c, int c_type, int64_t rows,
                                         int64_t n, int add,
                                         dtk_stream stream) {
  if (c_type == DTK_CUDA_F32 && bias_type == DTK_CUDA_F32) {
    dtk_cuda_fill_rows_f32(static_cast<const float *>(bias),
                           static_cast<float *>(c), rows, n, add, stream);
    return;
  }
  int64_t total = rows * n;
  if (total == 0 || (add && c_type != DTK_CUDA_F32))
    return; // a 16-bit C is not accumulated into (Blas refuses it)
  int64_t blocks = (total + kThreads - 1) / kThreads;
  fillRowsTyped<<<unsigned(blocks < 65536 ? blocks : 65536), kThreads, 0,
                  stream>>>(dtk::AnyData{bias, bias_type},
                            dtk::AnyOut{c, c_type}, total, n, add != 0);
}

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
