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

/// What a GPU plan says about a product's (or attention's) operands: plain
/// f32; f32 holding 16-bit values ("tf32": TF32 tensor cores are exact for
/// them); or stored as 16-bit values ("half").
enum class Operands { F32, TF32, BF16, F16 };

class Blas {
public:
  /// Opens cuBLAS and makes a handle on `stream`. Products of f32 operands
  /// are computed in f32 (no TF32): the GPU's losses are the CPU's to
  /// rounding.
  static Expected<std::unique_ptr<Blas>> open(cudaStream_t stream);
  ~Blas();

  /// dtk_matmul_f32's contract on device pointers: C = op(A) op(B) for
  /// `batch` consecutive row-major matrices; op(A) is M x K, op(B) K x N.
  /// With `accumulate`, C += instead of C =. With Operands::TF32, the f32
  /// operands hold 16-bit values and the product takes TF32 tensor cores;
  /// with BF16 or F16, `a` and `b` point at 16-bit elements. Either way the
  /// products are exact and summed in f32. `c` holds f32, or with `result`
  /// BF16 or F16 (the operands' type) the sums rounded to it.
  Status matmul(const void *a, const void *b, void *c, int64_t batch, int64_t m,
                int64_t n, int64_t k, bool transA, bool transB, bool accumulate,
                Operands operands, Operands result = Operands::F32);

private:
  Blas() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void *library_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  void *workspace_ = nullptr;
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_BLAS_H
