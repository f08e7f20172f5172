//===- collectives.cpp - GPU collectives: the engine, the host one --------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/collectives.h"

#include "dtrt/cuda/library.h" // cudaFailure

#include <fmt/format.h>

namespace dtrt::cuda {

DeviceCollectives::~DeviceCollectives() = default;

namespace {

/// Bytes of `count` elements of `type`.
size_t bytesOf(int64_t count, DType type) {
  return size_t(count) * dtypeSize(type);
}

/// Stages every collective through pinned host memory and the host
/// communicator. The stream is drained before the copy out and after the
/// copy back, so the buffers are free when a call returns.
class HostCollectives final : public DeviceCollectives {
public:
  explicit HostCollectives(Communicator &host) : DeviceCollectives(host) {}
  ~HostCollectives() override {
    for (char *b : {in_, out_})
      if (b)
        cudaFreeHost(b);
  }

  std::string engine() const override {
    return host_.engine() + " through host memory";
  }

  Status allReduceSum(const void *src, void *dst, int64_t count, DType type,
                      AxisMask axes, std::string_view what,
                      cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type);
    if (Status s = stageIn(src, bytes, stream); !s)
      return s;
    if (Status s = host_.allReduceSum(in_, in_, count, type, axes, what); !s)
      return s;
    return stageOut(in_, dst, bytes, stream);
  }

  Status reduceScatterSum(const void *src, void *dst, int64_t count, DType type,
                          AxisMask axes, std::string_view what,
                          cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type);
    int group = mesh().groupSize(axes & mesh().allAxes());
    if (Status s = stageIn(src, bytes * size_t(group), stream); !s)
      return s;
    if (Status s = reserve(out_, outBytes_, bytes); !s)
      return s;
    if (Status s = host_.reduceScatterSum(in_, out_, count, type, axes, what);
        !s)
      return s;
    return stageOut(out_, dst, bytes, stream);
  }

  Status allGather(const void *src, void *dst, int64_t count, DType type,
                   AxisMask axes, std::string_view what,
                   cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type);
    int group = mesh().groupSize(axes & mesh().allAxes());
    if (Status s = stageIn(src, bytes, stream); !s)
      return s;
    if (Status s = reserve(out_, outBytes_, bytes * size_t(group)); !s)
      return s;
    if (Status s = host_.allGather(in_, out_, count, type, axes, what); !s)
      return s;
    return stageOut(out_, dst, bytes * size_t(group), stream);
  }

  Status allToAll(const void *src, void *dst, int64_t count, DType type,
                  AxisMask axes, std::string_view what,
                  cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type) *
                   size_t(mesh().groupSize(axes & mesh().allAxes()));
    if (Status s = stageIn(src, bytes, stream); !s)
      return s;
    if (Status s = reserve(out_, outBytes_, bytes); !s)
      return s;
    if (Status s = host_.allToAll(in_, out_, count, type, axes, what); !s)
      return s;
    return stageOut(out_, dst, bytes, stream);
  }

  Status synchronize(cudaStream_t stream) override {
    // The host communicator's own watchdog bounds every collective; the
    // stream holds kernels only.
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
      return cudaFailure("a GPU step failed", e);
    return Status::ok();
  }

private:
  /// Grows pinned buffer `b` (of `have` bytes) to at least `bytes`.
  Status reserve(char *&b, size_t &have, size_t bytes) {
    if (bytes <= have)
      return Status::ok();
    if (b)
      cudaFreeHost(b);
    b = nullptr;
    have = 0;
    cudaError_t e = cudaMallocHost(reinterpret_cast<void **>(&b), bytes);
    if (e != cudaSuccess)
      return cudaFailure(fmt::format("cannot pin {} bytes of host memory for "
                                     "the collectives",
                                     bytes),
                         e);
    have = bytes;
    return Status::ok();
  }

  Status stageIn(const void *src, size_t bytes, cudaStream_t stream) {
    if (Status s = reserve(in_, inBytes_, bytes); !s)
      return s;
    cudaError_t e =
        cudaMemcpyAsync(in_, src, bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
      return cudaFailure("a collective's copy to the host failed (the step "
                         "before it may have faulted)",
                         e);
    return Status::ok();
  }

  Status stageOut(const char *from, void *dst, size_t bytes,
                  cudaStream_t stream) {
    cudaError_t e =
        cudaMemcpyAsync(dst, from, bytes, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
      return cudaFailure("a collective's copy back to the GPU failed", e);
    return Status::ok();
  }

  char *in_ = nullptr, *out_ = nullptr;
  size_t inBytes_ = 0, outBytes_ = 0;
};

} // namespace

std::unique_ptr<DeviceCollectives>
openHostCollectives(Communicator &host, std::chrono::milliseconds) {
  return std::make_unique<HostCollectives>(host);
}

Expected<std::unique_ptr<DeviceCollectives>>
openDeviceCollectives(CollectiveEngine engine, Communicator &host,
                      std::vector<AxisMask> groups,
                      std::chrono::milliseconds timeout,
                      const std::string &obstacle, std::string *note) {
  if (engine == CollectiveEngine::Host)
    return openHostCollectives(host, timeout);
  // Whether NCCL is there is agreed by every rank before any starts it, so
  // all fall back alike.
  bool unavailable = false;
  Expected<std::unique_ptr<DeviceCollectives>> nccl = openNcclCollectives(
      host, std::move(groups), timeout, obstacle, &unavailable);
  if (nccl || engine == CollectiveEngine::Nccl || !unavailable)
    return nccl;
  if (note)
    *note = nccl.error().message();
  return openHostCollectives(host, timeout);
}

} // namespace dtrt::cuda
