//===- library.cpp - generated GPU kernels, loaded and launched -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/library.h"

#include <algorithm>
#include <utility>

namespace dtrt::cuda {

namespace {
// Threads per block of a generated kernel: every thread walks the same
// grid-stride loop, so the size only trades occupancy against tail waste.
constexpr int kThreads = 256;
// Blocks per multiprocessor beyond which a grid-stride loop gains nothing.
constexpr int kBlocksPerSM = 8;
} // namespace

Error cudaFailure(const std::string &what, cudaError_t e) {
  return Error(what + ": " + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ")");
}

Expected<KernelLibrary> KernelLibrary::load(const std::string &image) {
  // The driver's JIT log says which line of a PTX it refused.
  char log[4096] = {0};
  cudaJitOption options[] = {cudaJitErrorLogBuffer,
                             cudaJitErrorLogBufferSizeBytes};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof log))};
  KernelLibrary library;
  cudaError_t e = cudaLibraryLoadData(&library.library_, image.c_str(),
                                      options, values, 2, nullptr, nullptr, 0);
  if (e != cudaSuccess) {
    Error error = cudaFailure("cannot load the generated GPU kernels", e);
    if (log[0])
      error = Error(error.message() + "; the driver's JIT says:\n" + log);
    return error;
  }
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess)
    cudaDeviceGetAttribute(&library.multiprocessors_,
                           cudaDevAttrMultiProcessorCount, device);
  return library;
}

KernelLibrary::KernelLibrary(KernelLibrary &&other) noexcept
    : library_(std::exchange(other.library_, nullptr)),
      multiprocessors_(other.multiprocessors_) {}

KernelLibrary &KernelLibrary::operator=(KernelLibrary &&other) noexcept {
  std::swap(library_, other.library_);
  std::swap(multiprocessors_, other.multiprocessors_);
  return *this;
}

KernelLibrary::~KernelLibrary() {
  if (library_)
    cudaLibraryUnload(library_);
}

Expected<cudaKernel_t> KernelLibrary::kernel(const std::string &name) const {
  cudaKernel_t k = nullptr;
  cudaError_t e = cudaLibraryGetKernel(&k, library_, name.c_str());
  if (e != cudaSuccess)
    return cudaFailure("no generated kernel '" + name + "'", e);
  return k;
}

Status KernelLibrary::launch(cudaKernel_t k, char *arena, int64_t elements,
                             cudaStream_t stream) const {
  int64_t wanted = std::max<int64_t>(1, (elements + kThreads - 1) / kThreads);
  return launchBlocks(
      k, arena,
      std::min<int64_t>(wanted, int64_t(multiprocessors_) * kBlocksPerSM),
      stream);
}

Status KernelLibrary::launchBlocks(cudaKernel_t k, char *arena, int64_t count,
                                   cudaStream_t stream) const {
  unsigned blocks = unsigned(std::max<int64_t>(1, count));
  void *args[] = {&arena};
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void *>(k),
                                   dim3(blocks), dim3(kThreads), args, 0,
                                   stream);
  if (e != cudaSuccess)
    return cudaFailure("cannot launch a generated kernel", e);
  return Status::ok();
}

} // namespace dtrt::cuda
