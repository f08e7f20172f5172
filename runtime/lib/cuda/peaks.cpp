//===- peaks.cpp - What this GPU does, measured ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The GPU's half of dtrt/peaks.h: a cuBLAS product in the program's
// precision (bf16 operands summed in f32 for a 16-bit program, as its
// products run; f32 otherwise) and a copy within the device, timed with CUDA
// events, a few hundred milliseconds, then cached per GPU model in the peaks
// cache:
//
//   "GPU | NAME | cuBLAS TYPE": {"gpu", "gemm_type", "gemm_flops",
//                                "copy_bytes_per_s", "gemm_size"}
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/peaks.h"

#include "dtrt/cuda/library.h" // cudaFailure
#include "dtrt/peaks.h"

#include <fmt/format.h>

#include <algorithm>

namespace dtrt::cuda {

namespace {

/// Device memory freed on every path out.
struct DeviceBytes {
  void *p = nullptr;
  ~DeviceBytes() {
    if (p)
      cudaFree(p);
  }
};

/// The best milliseconds of `reps` runs of `f` on `stream` (after one to
/// warm up), timed with events.
template <typename F>
Expected<float> bestOf(int reps, cudaStream_t stream, F f) {
  cudaEvent_t begin = nullptr, end = nullptr;
  cudaError_t e = cudaEventCreate(&begin);
  if (e == cudaSuccess)
    e = cudaEventCreate(&end);
  if (e != cudaSuccess)
    return cudaFailure("cannot make the events that time the GPU", e);
  float best = -1;
  Status status = Status::ok();
  for (int r = 0; r <= reps && status; ++r) {
    cudaEventRecord(begin, stream);
    status = f();
    cudaEventRecord(end, stream);
    if (status && (e = cudaEventSynchronize(end)) != cudaSuccess)
      status = cudaFailure("timing the GPU failed", e);
    float ms = 0;
    if (status && r > 0 && cudaEventElapsedTime(&ms, begin, end) == cudaSuccess)
      best = best < 0 ? ms : std::min(best, ms);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  if (!status)
    return status.error();
  if (best <= 0)
    return Error("the GPU's timings were empty");
  return best;
}

/// Measures `p` now on `blas`'s stream.
Status measure(Blas &blas, cudaStream_t stream, DevicePeaks &p) {
  bool half = p.gemmType == "bf16";
  // Big enough to run near the peak, small enough to time in milliseconds:
  // 2 x 8192^3 FLOPs at bf16 rates, 2 x 4096^3 at f32's.
  int64_t n = p.gemmSize = half ? 8192 : 4096;
  size_t operand = size_t(n * n) * (half ? 2 : 4);
  DeviceBytes a, b, c;
  cudaError_t e = cudaMalloc(&a.p, operand);
  if (e == cudaSuccess)
    e = cudaMalloc(&b.p, operand);
  if (e == cudaSuccess)
    e = cudaMalloc(&c.p, size_t(n * n) * 4);
  // Zeros: the products' speed does not depend on the values.
  if (e == cudaSuccess)
    e = cudaMemset(a.p, 0, operand);
  if (e == cudaSuccess)
    e = cudaMemset(b.p, 0, operand);
  if (e != cudaSuccess)
    return cudaFailure("cannot allocate the GPU's peak measurement", e);
  Expected<float> gemm = bestOf(5, stream, [&] {
    return blas.matmul(a.p, b.p, static_cast<float *>(c.p), 1, n, n, n, false,
                       false, false, half ? Operands::BF16 : Operands::F32);
  });
  if (!gemm)
    return gemm.error();
  p.gemmFlops = 2.0 * double(n) * double(n) * double(n) / (*gemm / 1e3);
  // A copy of 512 MiB within the device: it reads and writes each byte.
  size_t bytes = size_t(512) << 20;
  DeviceBytes from, to;
  e = cudaMalloc(&from.p, bytes);
  if (e == cudaSuccess)
    e = cudaMalloc(&to.p, bytes);
  if (e != cudaSuccess)
    return cudaFailure("cannot allocate the GPU's copy measurement", e);
  Expected<float> copy = bestOf(5, stream, [&]() -> Status {
    cudaError_t err =
        cudaMemcpyAsync(to.p, from.p, bytes, cudaMemcpyDeviceToDevice, stream);
    if (err != cudaSuccess)
      return cudaFailure("a copy within the GPU failed", err);
    return Status::ok();
  });
  if (!copy)
    return copy.error();
  p.copyBytesPerS = 2.0 * double(bytes) / (*copy / 1e3);
  return Status::ok();
}

} // namespace

std::string gpuPeaksKey(const std::string &gpu, const std::string &type) {
  return fmt::format("GPU | {} | cuBLAS {}", gpu, type);
}

Expected<DevicePeaks> gpuPeaks(Blas &blas, cudaStream_t stream,
                               const std::string &gpu,
                               const std::string &precision, bool writeCache) {
  DevicePeaks p;
  p.gemmType = precision == "bf16" || precision == "f16" ? "bf16" : "f32";
  std::string key = gpuPeaksKey(gpu, p.gemmType);
  std::string dir = peaksCacheDir();
  if (!dir.empty()) {
    p.cachePath = dir + "/peaks.json";
    nlohmann::json cache = readPeaksCache(p.cachePath);
    auto it = cache.find(key);
    if (it != cache.end() && it->is_object() &&
        it->value("gemm_flops", 0.0) > 0 &&
        it->value("copy_bytes_per_s", 0.0) > 0) {
      p.gemmFlops = it->value("gemm_flops", 0.0);
      p.copyBytesPerS = it->value("copy_bytes_per_s", 0.0);
      p.gemmSize = it->value("gemm_size", 0);
      p.cached = true;
      return p;
    }
  }
  if (Status s = measure(blas, stream, p); !s)
    return s.error();
  if (writeCache)
    p.cachePath = addToPeaksCache({{key,
                                    {{"gpu", gpu},
                                     {"gemm_type", p.gemmType},
                                     {"gemm_flops", p.gemmFlops},
                                     {"copy_bytes_per_s", p.copyBytesPerS},
                                     {"gemm_size", p.gemmSize}}}});
  else
    p.cachePath.clear();
  return p;
}

} // namespace dtrt::cuda
