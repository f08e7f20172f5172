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
    return staged(src, bytes, dst, bytes, stream, [&](char *in, char *out) {
      return host_.allReduceSum(in, out, count, type, axes, what);
    });
  }

  Status reduceScatterSum(const void *src, void *dst, int64_t count, DType type,
                          AxisMask axes, std::string_view what,
                          cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type);
    return staged(src, bytes * groupOf(axes), dst, bytes, stream,
                  [&](char *in, char *out) {
                    return host_.reduceScatterSum(in, out, count, type, axes,
                                                  what);
                  });
  }

  Status allGather(const void *src, void *dst, int64_t count, DType type,
                   AxisMask axes, std::string_view what,
                   cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type);
    return staged(src, bytes, dst, bytes * groupOf(axes), stream,
                  [&](char *in, char *out) {
                    return host_.allGather(in, out, count, type, axes, what);
                  });
  }

  Status allToAll(const void *src, void *dst, int64_t count, DType type,
                  AxisMask axes, std::string_view what,
                  cudaStream_t stream) override {
    size_t bytes = bytesOf(count, type) * groupOf(axes);
    return staged(src, bytes, dst, bytes, stream, [&](char *in, char *out) {
      return host_.allToAll(in, out, count, type, axes, what);
    });
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

  size_t groupOf(AxisMask axes) const {
    return size_t(mesh().groupSize(axes & mesh().allAxes()));
  }

  /// Copies `inBytes` of `src` to the pinned input buffer, runs `collective`
  /// from it into the pinned output buffer, and copies `outBytes` of that to
  /// `dst`, draining the stream after each copy.
  template <typename Collective>
  Status staged(const void *src, size_t inBytes, void *dst, size_t outBytes,
                cudaStream_t stream, Collective collective) {
    if (Status s = reserve(in_, inBytes_, inBytes); !s)
      return s;
    if (Status s = reserve(out_, outBytes_, outBytes); !s)
      return s;
    cudaError_t e =
        cudaMemcpyAsync(in_, src, inBytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
      return cudaFailure("a collective's copy to the host failed (the step "
                         "before it may have faulted)",
                         e);
    if (Status s = collective(in_, out_); !s)
      return s;
    e = cudaMemcpyAsync(dst, out_, outBytes, cudaMemcpyHostToDevice, stream);
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

std::unique_ptr<DeviceCollectives> openHostCollectives(Communicator &host) {
  return std::make_unique<HostCollectives>(host);
}

Expected<std::unique_ptr<DeviceCollectives>>
openDeviceCollectives(CollectiveEngine engine, Communicator &host,
                      std::vector<AxisMask> groups,
                      std::chrono::milliseconds timeout,
                      const std::string &obstacle, std::string *note) {
  if (engine == CollectiveEngine::Host)
    return openHostCollectives(host);
  // Whether NCCL is there is agreed by every rank before any starts it, so
  // all fall back alike.
  bool unavailable = false;
  Expected<std::unique_ptr<DeviceCollectives>> nccl = openNcclCollectives(
      host, std::move(groups), timeout, obstacle, &unavailable);
  if (nccl || engine == CollectiveEngine::Nccl || !unavailable)
    return nccl;
  if (note)
    *note = nccl.error().message();
  return openHostCollectives(host);
}

} // namespace dtrt::cuda
