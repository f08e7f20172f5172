//===- dtrt/cuda/collectives.h - Collectives over GPU memory ----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The collectives of a GPU plan run on device buffers, queued on the step's
// stream, between groups of mesh axes exactly as dtrt/comm.h defines them
// (the group of a call, a rank's index in it, the blocks of a reduce-scatter
// or all-gather). Two engines:
//
//  - NCCL, loaded with dlopen (a program must start where there is none):
//    one communicator over the world, made from an ncclUniqueId that rank 0
//    draws and the host communicator hands to every rank, then one split per
//    set of axes the plan uses. The communicators are non-blocking, so no
//    call ever waits unbounded: a rank that waits past the timeout for its
//    step, or that NCCL reports a failure to, aborts them and says which
//    collective it was in, and the launcher ends the others.
//  - The host engine: each collective copies its bytes to pinned host
//    memory, runs on the host communicator (OpenMPI) and copies back. It is
//    slow (the stream waits for every collective); it serves where NCCL is
//    missing and lets several ranks share one GPU, which NCCL refuses.
//
// `--collectives nccl|host` picks one; by default NCCL when it loads, else
// the host engine, saying why.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_COLLECTIVES_H
#define DTRT_CUDA_COLLECTIVES_H

#include "dtrt/comm.h"
#include "dtrt/device.h" // CollectiveEngine

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtrt::cuda {

class DeviceCollectives {
public:
  virtual ~DeviceCollectives();

  /// "NCCL 2.28.3", "OpenMPI through host memory": the start-up line's.
  virtual std::string engine() const = 0;

  /// Communicator's collectives on device pointers, queued on `stream`
  /// (the host engine waits for the stream first and returns when done).
  virtual Status allReduceSum(const void *src, void *dst, int64_t count,
                              DType type, AxisMask axes, std::string_view what,
                              cudaStream_t stream) = 0;
  virtual Status reduceScatterSum(const void *src, void *dst, int64_t count,
                                  DType type, AxisMask axes,
                                  std::string_view what,
                                  cudaStream_t stream) = 0;
  virtual Status allGather(const void *src, void *dst, int64_t count,
                           DType type, AxisMask axes, std::string_view what,
                           cudaStream_t stream) = 0;
  virtual Status allToAll(const void *src, void *dst, int64_t count, DType type,
                          AxisMask axes, std::string_view what,
                          cudaStream_t stream) = 0;

  /// Waits for everything queued on `stream`, at most the timeout once the
  /// stream holds a collective; a stall or a failure of the engine aborts
  /// it and is the error, naming the last collective queued.
  virtual Status synchronize(cudaStream_t stream) = 0;

  const Mesh &mesh() const { return host_.mesh(); }
  int rank() const { return host_.rank(); }

protected:
  explicit DeviceCollectives(Communicator &host) : host_(host) {}
  Communicator &host_;
};

/// The engine for a plan whose collectives run over each set of `groups`
/// (every rank passes the same sets: NCCL makes their communicators
/// together). `obstacle` says why this rank cannot use NCCL ("" when it
/// can: ranks that share a GPU cannot); `note` receives why Auto fell back
/// to the host engine.
Expected<std::unique_ptr<DeviceCollectives>>
openDeviceCollectives(CollectiveEngine engine, Communicator &host,
                      std::vector<AxisMask> groups,
                      std::chrono::milliseconds timeout,
                      const std::string &obstacle, std::string *note);

/// NCCL's engine alone (nccl.cpp). Every rank first says whether it can
/// use NCCL (it loaded, and `obstacle` is empty); when one cannot, all fail
/// with `*unavailable` set, before any starts NCCL (so they may all fall
/// back to the host engine).
Expected<std::unique_ptr<DeviceCollectives>>
openNcclCollectives(Communicator &host, std::vector<AxisMask> groups,
                    std::chrono::milliseconds timeout,
                    const std::string &obstacle, bool *unavailable);

/// The host engine alone.
std::unique_ptr<DeviceCollectives> openHostCollectives(Communicator &host);

} // namespace dtrt::cuda

#endif // DTRT_CUDA_COLLECTIVES_H
