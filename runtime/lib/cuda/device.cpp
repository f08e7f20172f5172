//===- device.cpp - the arena in GPU memory, the steps on the GPU ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `--backend cuda` (or auto on a machine with a GPU): the rank's arena is one
// cudaMalloc on the GPU of its local rank, and its entry points are the GPU
// plan's, replayed by the Executor. The loader, the loop and the
// checkpointer move bytes through copyIn and copyOut as they do on the host.
// Entry points are plain functions (dtrt/abi.h), so they reach the executor
// through the one CUDA device a process opens; a failure inside one stops
// the program with the CUDA runtime's words, as a kernel fault does on the
// CPU.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/device.h"

#include "dtrt/collectives.h" // programCommunicator
#include "dtrt/cuda/executor.h"
#include "dtrt/cuda/peaks.h"
#include "dtrt/report.h"

#include <fmt/format.h>

#include <algorithm>

#include <cstdio>
#include <optional>
#include <cstdlib>
#include <string>

namespace dtrt::cuda {

namespace {

class CudaDevice;
/// The process's CUDA device, for the entry points.
CudaDevice *active = nullptr;

[[noreturn]] void die(const Error &e) {
  std::fflush(stdout);
  fmt::print(stderr, "error: on the GPU: {}\n", e.message());
  std::fflush(stderr);
  // The other ranks would wait for this one in their collectives: end them
  // too, as a kernel fault on the CPU does.
  if (Communicator *comm = programCommunicator(); comm && comm->worldSize() > 1)
    comm->abort(e.exitCode());
  std::exit(e.exitCode());
}

class CudaDevice final : public Device {
public:
  CudaDevice(int ordinal, std::string name,
             std::unique_ptr<Executor> executor)
      : ordinal_(ordinal), name_(std::move(name)),
        executor_(std::move(executor)) {
    active = this;
  }
  ~CudaDevice() override {
    executor_.reset();
    if (active == this)
      active = nullptr;
  }

  std::string describe() const override {
    size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    std::string engine = executor_->collectivesEngine();
    return fmt::format("cuda:{} ({}, {}{})", ordinal_, name_,
                       formatBytes(double(total)),
                       engine.empty() ? "" : "; collectives: " + engine);
  }
  Backend backend() const override { return Backend::Cuda; }

  std::optional<DevicePeaks> measurePeaks(const std::string &precision,
                                          bool writeCache) override {
    Expected<DevicePeaks> p = gpuPeaks(executor_->blas(), executor_->stream(),
                                       name_, precision, writeCache);
    if (!p) {
      // The datasheet's figure still serves MFU.
      fmt::print(stderr, "warning: the GPU's peaks were not measured: {}\n",
                 p.error().message());
      return std::nullopt;
    }
    return *p;
  }

  std::optional<double> peakFlops(const std::string &precision) const override {
    // Dense peaks in TFLOP/s, 16-bit tensor cores and f32 CUDA cores, from the
    // vendor's data sheets (../shared/notes/gpu-figures.md has the 16-bit
    // ones and their sources); the most specific name first.
    struct Peak {
      const char *name;
      double half, single;
    };
    static const Peak kPeaks[] = {
        {"H100 PCIe", 756, 51},  {"H100 NVL", 835, 60},
        {"H100", 989, 67},       {"H200", 989, 67},
        {"A100", 312, 19.5},     {"L40S", 362, 91.6},
    };
    bool half = precision == "bf16" || precision == "f16";
    for (const Peak &p : kPeaks)
      if (name_.find(p.name) != std::string::npos)
        return (half ? p.half : p.single) * 1e12;
    return std::nullopt;
  }

  Expected<char *> allocate(size_t bytes, size_t align) override {
    // The plan's arena may end later: split reductions keep their counters
    // and partial sums past the planned one (docs/abi.md).
    bytes = std::max(bytes, size_t(executor_->arenaBytes()));
    // cudaMalloc aligns to at least 256 bytes.
    if (align > 256)
      return Error(fmt::format("the arena's alignment of {} bytes exceeds "
                               "what cudaMalloc gives (256)",
                               align));
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (e == cudaSuccess)
      e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) {
      // The products' algorithms are chosen while the arena holds nothing:
      // timing them (DTRT_CUDA_PRODUCTS=tuned, the default) runs them
      // there, as cuDNN's attention runs once, and then it is cleared
      // again.
      if (Status s = executor_->tuneProducts(static_cast<char *>(p)); !s) {
        cudaFree(p);
        return s.error();
      }
      // cuDNN's attention plans compile their kernels now, not inside the
      // first step's CUDA graph capture.
      if (Status s = executor_->prepareAttention(static_cast<char *>(p)); !s) {
        cudaFree(p);
        return s.error();
      }
      e = cudaMemset(p, 0, bytes);
    }
    if (e != cudaSuccess) {
      size_t freeBytes = 0, total = 0;
      cudaMemGetInfo(&freeBytes, &total);
      return cudaFailure(
          fmt::format("cannot allocate the arena of {} on {} ({} free of "
                      "{}); a smaller micro_batch, recompute or ZeRO "
                      "shrinks it (dtc --report shows the plan)",
                      formatBytes(double(bytes)), name_,
                      formatBytes(double(freeBytes)),
                      formatBytes(double(total))),
          e);
    }
    return static_cast<char *>(p);
  }

  void release(char *memory) override { cudaFree(memory); }

  bool pinHost(void *host, size_t bytes) override {
    if (cudaHostRegister(host, bytes, cudaHostRegisterDefault) == cudaSuccess)
      return true;
    cudaGetLastError(); // not an error of the step's launches
    return false;
  }
  void unpinHost(void *host) override { cudaHostUnregister(host); }

  // The copies wait for the stream first, through the executor: a step
  // whose collectives stall then ends with a message, not in cudaMemcpy.
  void copyIn(char *dst, const void *src, size_t bytes) override {
    synchronize();
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "a copy in");
  }
  void copyOut(void *dst, const char *src, size_t bytes) override {
    synchronize();
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "a copy out");
  }
  void zero(char *dst, size_t bytes) override {
    synchronize();
    check(cudaMemset(dst, 0, bytes), "clearing part");
  }
  void synchronize() override {
    if (Status s = executor_->synchronize(); !s)
      die(s.error());
  }

  Expected<Program> programFor(const Program &cpu) override {
    Program gpu = cpu;
    for (auto [slot, name] :
         {std::pair{&gpu.gradStep, "grad_step"},
          std::pair{&gpu.applyStep, "apply_step"},
          std::pair{&gpu.evalStep, "eval_step"}}) {
      if (!*slot)
        continue;
      if (!executor_->has(name))
        return Error(fmt::format("the program's GPU plan lacks {}", name));
    }
    gpu.gradStep = cpu.gradStep ? &run<kGrad> : nullptr;
    gpu.applyStep = cpu.applyStep ? &run<kApply> : nullptr;
    gpu.evalStep = cpu.evalStep ? &run<kEval> : nullptr;
    // A pipeline's stages are refused when the plan is made.
    gpu.entries = nullptr;
    gpu.entryCount = 0;
    return gpu;
  }

private:
  static constexpr const char kGrad[] = "grad_step", kApply[] = "apply_step",
                              kEval[] = "eval_step";
  template <const char *Name> static void run(char *arena) {
    if (Status s = active->executor_->run(Name, arena); !s)
      die(s.error());
  }

  void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
      die(cudaFailure(fmt::format("{} of the arena failed (the step before "
                                  "it may have faulted)",
                                  what),
                      e));
  }

  int ordinal_;
  std::string name_;
  std::unique_ptr<Executor> executor_;
};

} // namespace

Expected<std::unique_ptr<Device>>
openCudaDevice(const Launch &launch, const Program &program,
               const CollectiveSetup &collectives) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return Error("no GPU is present");
  int ordinal = launch.localRank % count;
  if ((e = cudaSetDevice(ordinal)) != cudaSuccess)
    return cudaFailure(fmt::format("cannot use GPU {}", ordinal), e);
  cudaDeviceProp props;
  if ((e = cudaGetDeviceProperties(&props, ordinal)) != cudaSuccess)
    return cudaFailure(fmt::format("cannot query GPU {}", ordinal), e);
  ExecutorSetup setup;
  setup.manifest = program.manifest ? program.manifest : "";
  setup.collectives = collectives;
  // NCCL refuses two ranks of one communicator on one GPU.
  if (launch.localWorldSize > count)
    setup.ncclObstacle = fmt::format(
        "the {} ranks on this machine share its {} GPU{}, which NCCL "
        "refuses",
        launch.localWorldSize, count, count == 1 ? "" : "s");
  Expected<std::unique_ptr<Executor>> executor =
      Executor::create(program.cudaImage, program.cudaPlan, setup);
  if (!executor)
    return executor.error();
  return std::unique_ptr<Device>(
      std::make_unique<CudaDevice>(ordinal, props.name, std::move(*executor)));
}

} // namespace dtrt::cuda
