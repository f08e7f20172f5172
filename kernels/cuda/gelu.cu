//===- gelu.cu - GELU after a product, where cuBLASLt does not do it ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A GPU plan asks cuBLASLt to compute GELU, or GELU's gradient, in a
// product's epilogue (dtrt/cuda/blas.h's Epilogue). Where cuBLASLt has no
// algorithm for that, or the classic API computes the products, the product
// is rounded to C's type first and these kernels finish the epilogue: the
// activation from the pre-activation the product wrote, or the product
// multiplied in place by the derivative at the pre-activation. The formula
// is dt.gelu's (the tanh approximation) and dt.gelu_deriv's, in f32.
//
//===----------------------------------------------------------------------===//

#include "convert.cuh"
#include "dtk/cuda_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr float kK = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kC = 0.044715f;

__global__ void geluFrom(dtk::AnyData pre, dtk::AnyOut out, int64_t total,
                         bool grad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float x = pre[i];
    float t = tanhf(kK * (x + kC * (x * x * x)));
    if (!grad) {
      put(out, i, 0.5f * x * (1.0f + t));
      continue;
    }
    float derivative =
        0.5f * (1.0f + t) +
        0.5f * x * ((1.0f - t * t) * (kK * (1.0f + 3.0f * kC * x * x)));
    // The product, rounded to C's type, times the derivative.
    put(out, i, dtk::AnyData{out.p, out.type}[i] * derivative);
  }
}

} // namespace

extern "C" void dtk_cuda_gelu_typed(const void *pre, void *out, int type,
                                    int64_t total, int grad,
                                    dtk_stream stream) {
  if (total == 0)
    return;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  geluFrom<<<unsigned(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(
      dtk::AnyData{pre, type}, dtk::AnyOut{out, type}, total, grad != 0);
}
