//===- blas.cpp - cuBLAS, loaded when a GPU is used -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/blas.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace dtrt::cuda {

/// The entry points used, by their exported names.
struct Blas::Api {
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*setStream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*setMathMode)(cublasHandle_t, cublasMath_t);
  cublasStatus_t (*setWorkspace)(cublasHandle_t, void *, size_t);
  const char *(*statusString)(cublasStatus_t);
  cublasStatus_t (*sgemmStridedBatched)(cublasHandle_t, cublasOperation_t,
                                        cublasOperation_t, int, int, int,
                                        const float *, const float *, int,
                                        long long, const float *, int,
                                        long long, const float *, float *, int,
                                        long long, int);
  cublasStatus_t (*gemmStridedBatchedEx)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
      const void *, const void *, cudaDataType, int, long long, const void *,
      cudaDataType, int, long long, const void *, void *, cudaDataType, int,
      long long, int, cublasComputeType_t, cublasGemmAlgo_t);
};

namespace {

template <typename F> bool bind(void *library, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(library, name));
  return fn != nullptr;
}

} // namespace

Expected<std::unique_ptr<Blas>> Blas::open(cudaStream_t stream) {
  // The major version of the toolkit dt was built with: its cuBLAS's ABI.
  std::string soname = fmt::format("libcublas.so.{}", CUDA_VERSION / 1000);
  std::vector<std::string> candidates{soname};
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/lib64/" + soname);
  candidates.push_back("/usr/local/cuda/lib64/" + soname);
  std::unique_ptr<Blas> blas(new Blas);
  std::string tried;
  for (const std::string &path : candidates) {
    blas->library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (blas->library_)
      break;
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  if (!blas->library_)
    return Error(fmt::format(
        "cannot load cuBLAS ({}), which the GPU backend's matrix products "
        "need: install the CUDA {} toolkit's libraries or put them on "
        "LD_LIBRARY_PATH; tried:{}",
        soname, CUDA_VERSION / 1000, tried));
  blas->api_ = std::make_unique<Api>();
  Api &api = *blas->api_;
  if (!bind(blas->library_, "cublasCreate_v2", api.create) ||
      !bind(blas->library_, "cublasDestroy_v2", api.destroy) ||
      !bind(blas->library_, "cublasSetStream_v2", api.setStream) ||
      !bind(blas->library_, "cublasSetMathMode", api.setMathMode) ||
      !bind(blas->library_, "cublasSetWorkspace_v2", api.setWorkspace) ||
      !bind(blas->library_, "cublasGetStatusString", api.statusString) ||
      !bind(blas->library_, "cublasSgemmStridedBatched",
            api.sgemmStridedBatched) ||
      !bind(blas->library_, "cublasGemmStridedBatchedEx",
            api.gemmStridedBatchedEx))
    return Error(
        fmt::format("{} lacks an entry point dt uses: {}", soname, dlerror()));
  cublasStatus_t s = api.create(&blas->handle_);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api.setStream(blas->handle_, stream);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api.setMathMode(blas->handle_, CUBLAS_DEFAULT_MATH);
  // A workspace of its own (32 MiB, what cuBLAS advises for Hopper): a
  // product captured in a CUDA graph must not allocate one.
  if (s == CUBLAS_STATUS_SUCCESS) {
    constexpr size_t kWorkspace = size_t(32) << 20;
    cudaError_t e = cudaMalloc(&blas->workspace_, kWorkspace);
    if (e != cudaSuccess)
      return Error(fmt::format("cannot allocate cuBLAS's workspace: {}",
                               cudaGetErrorString(e)));
    s = api.setWorkspace(blas->handle_, blas->workspace_, kWorkspace);
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    return Error(fmt::format("cuBLAS cannot start: {}", api.statusString(s)));
  return blas;
}

Blas::~Blas() {
  if (handle_)
    api_->destroy(handle_);
  if (workspace_)
    cudaFree(workspace_);
  // The library stays loaded: its own teardown runs at exit.
}

Status Blas::matmul(const void *a, const void *b, void *c, int64_t batch,
                    int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                    bool accumulate, Operands operands, Operands result) {
  if (result != Operands::F32 && result != operands)
    return Error("a product's 16-bit result must have its operands' type");
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX)
    return Error(fmt::format("a product of {} x {} x {} (batch {}) exceeds "
                             "cuBLAS's 32-bit sizes",
                             m, n, k, batch));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  // operands swap and keep their own transposes.
  const float one = 1.0f, zero = 0.0f;
  int lda = int(transA ? m : k), ldb = int(transB ? k : n);
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const float *beta = accumulate ? &one : &zero;
  cublasStatus_t s;
  if (operands == Operands::F32) {
    s = api_->sgemmStridedBatched(handle_, opB, opA, int(n), int(m), int(k),
                                  &one, static_cast<const float *>(b), ldb,
                                  k * n, static_cast<const float *>(a), lda,
                                  m * k, beta, static_cast<float *>(c), int(n),
                                  m * n, int(batch));
  } else {
    // TF32 keeps 10 of f32's 23 mantissa bits: exact for 16-bit values
    // only, which is what the plan's flag promises; 16-bit operands multiply
    // exactly into the f32 sums.
    cudaDataType type = operands == Operands::BF16  ? CUDA_R_16BF
                        : operands == Operands::F16 ? CUDA_R_16F
                                                    : CUDA_R_32F;
    cublasComputeType_t compute = operands == Operands::TF32
                                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
    // A 16-bit result is the f32 sums rounded to nearest, as the CPU's
    // narrowing after its f32 product rounds them.
    cudaDataType out = result == Operands::F32 ? CUDA_R_32F : type;
    s = api_->gemmStridedBatchedEx(handle_, opB, opA, int(n), int(m), int(k),
                                   &one, b, type, ldb, k * n, a, type, lda,
                                   m * k, beta, c, out, int(n), m * n,
                                   int(batch), compute, CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    static const char *const kinds[] = {"sgemm", "TF32 gemm", "bf16 gemm",
                                        "f16 gemm"};
    return Error(fmt::format("cuBLAS {} ({} x {} x {}, batch {}): {}",
                             kinds[int(operands)], m, n, k, batch,
                             api_->statusString(s)));
  }
  return Status::ok();
}

} // namespace dtrt::cuda
