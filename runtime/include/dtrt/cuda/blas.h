//===- dtrt/cuda/blas.h - cuBLAS, loaded when a GPU is used -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The products of a GPU plan go through cuBLAS, which the runtime opens with
// dlopen when it makes the CUDA executor: an emitted program must start on a
// machine without the CUDA libraries, so it cannot link them. Looked for as
// libcublas.so.<major of the toolkit dt was built with> on the loader's path,
// then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_BLAS_H
#define DTRT_CUDA_BLAS_H

#include "dtrt/error.h"

#include <cublas_v2.h>

#include <memory>

namespace dtrt::cuda {

class Blas {
public:
  /// Opens cuBLAS and makes a handle on `stream`. Products are computed in
  /// f32 (no TF32): the GPU's losses are the CPU's to rounding.
  static Expected<std::unique_ptr<Blas>> open(cudaStream_t stream);
  ~Blas();

  /// dtk_matmul_f32's contract on device pointers: C = op(A) op(B) for
  /// `batch` consecutive row-major matrices; op(A) is M x K, op(B) K x N.
  /// With `accumulate`, C += instead of C =. With `tf32`, the operands are
  /// 16-bit values and the product takes TF32 tensor cores (exact products,
  /// f32 sums).
  Status matmul(const float *a, const float *b, float *c, int64_t batch,
                int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                bool accumulate, bool tf32);

private:
  Blas() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void *library_ = nullptr;
  cublasHandle_t handle_ = nullptr;
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_BLAS_H
