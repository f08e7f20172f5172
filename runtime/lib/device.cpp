//===- device.cpp - The host device ---------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The host device: the arena is an anonymous mapping of host memory (zeroed
// by the kernel) and copies are memcpy. A CUDA device would implement the same
// interface with cudaMalloc/cudaMemcpy and pick its GPU from
// Launch::localRank.
//
//===----------------------------------------------------------------------===//

#include "dtrt/device.h"

#include "dtrt/report.h"

#if defined(DTRT_HAVE_CUDA) && !defined(DTRT_CHECKED)
#include "dtrt/cuda/device.h"
#endif
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>
#include <fmt/format.h>
#include <map>
#include <sys/mman.h>
#include <unistd.h>

namespace dtrt {

Expected<Backend> parseBackend(std::string_view name) {
  if (name == "cpu")
    return Backend::Cpu;
  if (name == "cuda")
    return Backend::Cuda;
  if (name == "auto")
    return Backend::Auto;
  return Error(fmt::format("--backend {} is not cpu, cuda or auto", name),
               kExitUsage);
}

Expected<CollectiveEngine> parseCollectiveEngine(std::string_view name) {
  if (name == "auto")
    return CollectiveEngine::Auto;
  if (name == "nccl")
    return CollectiveEngine::Nccl;
  if (name == "host")
    return CollectiveEngine::Host;
  return Error(fmt::format("--collectives {} is not auto, nccl or host", name),
               kExitUsage);
}

void Device::zero(char *deviceDst, size_t bytes) {
  static const std::vector<char> zeros(size_t(1) << 20);
  for (size_t done = 0; done < bytes; done += zeros.size())
    copyIn(deviceDst + done, zeros.data(),
           std::min(zeros.size(), bytes - done));
}

namespace {

class HostDevice final : public Device {
public:
  /// `unusedGpu`: why auto did not take the machine's GPU, for the banner.
  explicit HostDevice(std::string unusedGpu = "")
      : unusedGpu_(std::move(unusedGpu)) {}
  std::string describe() const override {
    return unusedGpu_.empty() ? "cpu (host memory)"
                              : "cpu (host memory; " + unusedGpu_ + ")";
  }
  Backend backend() const override { return Backend::Cpu; }

  Expected<char *> allocate(size_t bytes, size_t align) override {
    // Anonymous pages come zero-filled from the kernel as they are first
    // touched, so the arena costs no time to clear and no memory for the
    // parts a run never uses.
    size_t page = size_t(sysconf(_SC_PAGE_SIZE));
    if (align > page)
      return Error(fmt::format("the arena's alignment of {} bytes exceeds the "
                               "page size ({})",
                               align, page));
    size_t rounded = std::max<size_t>((bytes + page - 1) / page * page, page);
    void *p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return Error(fmt::format("cannot allocate the arena of {} bytes ({}) in "
                               "host memory: {}",
                               bytes, formatBytes(double(bytes)),
                               std::strerror(errno)));
    // Large arenas are mostly matrices streamed by BLAS: huge pages spare
    // TLB misses. Only advice; the kernel may decline.
    madvise(p, rounded, MADV_HUGEPAGE);
    sizes_[static_cast<char *>(p)] = rounded;
    return static_cast<char *>(p);
  }

  void release(char *memory) override {
    auto it = sizes_.find(memory);
    if (it == sizes_.end())
      return;
    munmap(memory, it->second);
    sizes_.erase(it);
  }

  std::optional<size_t> residentBytes(const char *memory) const override {
    auto it = sizes_.find(const_cast<char *>(memory));
    if (it == sizes_.end())
      return std::nullopt;
    size_t page = size_t(sysconf(_SC_PAGE_SIZE));
    std::vector<unsigned char> pages(it->second / page);
    if (mincore(const_cast<char *>(memory), it->second, pages.data()) != 0)
      return std::nullopt;
    size_t resident = 0;
    for (unsigned char p : pages)
      resident += p & 1;
    return resident * page;
  }

  void copyIn(char *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  void copyOut(void *dst, const char *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  void zero(char *dst, size_t bytes) override { std::memset(dst, 0, bytes); }

private:
  std::string unusedGpu_;
  std::map<char *, size_t> sizes_;
};

} // namespace

std::string whyNoGpuCode(const Program *program) {
#if !defined(DTRT_HAVE_CUDA) || defined(DTRT_CHECKED)
  (void)program;
#ifdef DTRT_CHECKED
  return "a checked program (dtc --checked) runs on the CPU";
#else
  return "this program's runtime (libdtrt) was built without the CUDA toolkit";
#endif
#else
  if (!program || !program->cudaPlan || !*program->cudaPlan ||
      !program->cudaImage)
    return "it was built without GPU code";
  auto plan = nlohmann::json::parse(program->cudaPlan, nullptr, false);
  if (plan.is_discarded() || !plan.is_object())
    return "its GPU plan is malformed";
  if (plan.contains("unsupported"))
    return plan.value("unsupported", std::string("unsupported"));
  return "";
#endif
}

Expected<std::unique_ptr<Device>>
openDevice(Backend backend, const Launch &launch, const Program *program,
           const CollectiveSetup &collectives) {
  std::string unusedGpu;
  if (backend != Backend::Cpu) {
    GpuProbe gpus = probeGpus();
    std::string why = whyNoGpuCode(program);
#if defined(DTRT_HAVE_CUDA) && !defined(DTRT_CHECKED)
    if (gpus.count > 0 && why.empty()) {
      Expected<std::unique_ptr<Device>> gpu =
          cuda::openCudaDevice(launch, *program, collectives);
      if (gpu || backend == Backend::Cuda) {
        if (!gpu)
          return Error(gpu.error().message() + "; or run with --backend cpu",
                       gpu.error().exitCode());
        return gpu;
      }
      why = gpu.error().message(); // auto: the CPU, saying why
    }
#endif
    if (backend == Backend::Cuda) {
      if (gpus.count == 0)
        return Error(fmt::format("--backend cuda: no GPU is present ({}); "
                                 "run with --backend cpu",
                                 gpus.why),
                     kExitUsage);
      return Error(fmt::format("--backend cuda: {} GPU{} present ({}), but "
                               "this program has no GPU code: {}; run with "
                               "--backend cpu",
                               gpus.count, gpus.count == 1 ? " is" : "s are",
                               gpus.name, why),
                   kExitUsage);
    }
    if (gpus.count > 0)
      unusedGpu = fmt::format("{} unused: {}", gpus.name, why);
  }
  (void)launch; // the host device is the same for every local rank
  (void)collectives; // the host's collectives are the communicator's
  return std::unique_ptr<Device>(std::make_unique<HostDevice>(unusedGpu));
}

} // namespace dtrt
