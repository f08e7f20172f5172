//===- device.cpp - The host device ---------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The host device: the arena is ordinary, aligned, zeroed host memory and
// copies are memcpy. A CUDA device would implement the same interface with
// cudaMalloc/cudaMemcpy and pick its GPU from Launch::localRank.
//
//===----------------------------------------------------------------------===//

#include "dtrt/device.h"

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

namespace dtrt {

Expected<Backend> parseBackend(std::string_view name) {
  if (name == "cpu")
    return Backend::Cpu;
  if (name == "cuda")
    return Backend::Cuda;
  return Error(fmt::format("--backend {} is not cpu or cuda", name),
               kExitUsage);
}

namespace {

class HostDevice final : public Device {
public:
  std::string describe() const override { return "cpu (host memory)"; }

  Expected<char *> allocate(size_t bytes, size_t align) override {
    // aligned_alloc wants a size that is a multiple of the alignment.
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (!p)
      return Error(fmt::format("cannot allocate the arena of {} bytes ({:.1f} "
                               "MiB) in host memory",
                               bytes, double(bytes) / (1 << 20)));
    std::memset(p, 0, rounded);
    return static_cast<char *>(p);
  }

  void release(char *memory) override { std::free(memory); }

  void copyIn(char *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  void copyOut(void *dst, const char *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
};

} // namespace

Expected<std::unique_ptr<Device>> openDevice(Backend backend,
                                             const Launch &launch) {
  (void)launch; // the host device is the same for every local rank
  if (backend == Backend::Cuda)
    return Error("--backend cuda: this build of libdtrt has no CUDA backend "
                 "yet; run with --backend cpu",
                 kExitUsage);
  return std::unique_ptr<Device>(std::make_unique<HostDevice>());
}

} // namespace dtrt
