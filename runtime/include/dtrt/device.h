//===- dtrt/device.h - Where the arena lives --------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The arena lives in one device's memory and the entry points run there. The
// runtime never dereferences arena memory directly: it copies host data in
// (staged batches, initial parameters, restored checkpoints) and out (losses,
// checkpoint bytes) through the Device, so that a CUDA device, whose arena is
// device memory, slots in without touching the loader, the loop or the
// checkpointer. The host and, where the CUDA toolkit was found, a GPU
// (dtrt/cuda/device.h) implement it.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_DEVICE_H
#define DTRT_DEVICE_H

#include "dtrt/abi.h"
#include "dtrt/error.h"
#include "dtrt/launch.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dtrt {

/// The `--backend` choices. Auto is the GPU when the runtime has a GPU
/// backend and the machine a GPU, else the CPU; openDevice resolves it.
enum class Backend { Cpu, Cuda, Auto };

/// What the machine offers for --backend cuda.
struct GpuProbe {
  int count = 0;
  /// The first device's name, when there is one.
  std::string name;
  /// Why there is none (the CUDA runtime's words), when there is none.
  std::string why;
};
GpuProbe probeGpus();

/// Parses "cpu" / "cuda" / "auto".
Expected<Backend> parseBackend(std::string_view name);

/// The `--collectives` choices: what carries a GPU plan's collectives
/// (dtrt/cuda/collectives.h). Auto is NCCL where it loads on every rank,
/// else the host engine.
enum class CollectiveEngine { Auto, Nccl, Host };
/// Parses "auto" / "nccl" / "host".
Expected<CollectiveEngine> parseCollectiveEngine(std::string_view name);

class Communicator;
/// What a GPU needs for a sharded program's collectives.
struct CollectiveSetup {
  /// The rank's communicator (null: one rank).
  Communicator *host = nullptr;
  CollectiveEngine engine = CollectiveEngine::Auto;
  /// How long a step may wait for its collectives.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

/// What a device measured of itself (dtrt/peaks.h's host figures, on a
/// GPU): FLOP/s of a product of `gemmSize`^3 in `gemmType` ("bf16": 16-bit
/// operands summed in f32, as a bf16 or f16 program's products; "f32"), and
/// bytes per second of a large copy within the device (read + write).
struct DevicePeaks {
  double gemmFlops = 0, copyBytesPerS = 0;
  int gemmSize = 0;
  std::string gemmType;
  /// Whether the figures came from the cache, and its path ("" if none).
  bool cached = false;
  std::string cachePath;
};

/// Memory and execution for one rank.
class Device {
public:
  virtual ~Device() = default;

  /// "cpu (host memory)", "cuda:0 (NVIDIA ...)".
  virtual std::string describe() const = 0;
  /// Which backend this is (never Auto).
  virtual Backend backend() const = 0;
  /// `bytes` of zero-filled memory aligned to `align`.
  virtual Expected<char *> allocate(size_t bytes, size_t align) = 0;
  /// Releases what allocate returned.
  virtual void release(char *memory) = 0;
  /// Copies host memory into device memory.
  virtual void copyIn(char *deviceDst, const void *hostSrc, size_t bytes) = 0;
  /// Copies device memory into host memory.
  virtual void copyOut(void *hostDst, const char *deviceSrc, size_t bytes) = 0;
  /// Sets `bytes` of device memory to zeros (by default, copies of a zeroed
  /// host buffer).
  virtual void zero(char *deviceDst, size_t bytes);
  /// Whether the arena's bytes are host memory the runtime may fill in place
  /// (base + offset), rather than through copyIn.
  virtual bool hostAddressable() const { return backend() == Backend::Cpu; }
  /// Page-locks host memory that copies to and from the device use every
  /// step, so that they run at the link's speed; false where that means
  /// nothing (the host) or fails. unpinHost undoes it.
  virtual bool pinHost(void *host, size_t bytes) {
    (void)host;
    (void)bytes;
    return false;
  }
  virtual void unpinHost(void *host) { (void)host; }
  /// Waits for the device's queued work (a no-op on the host).
  virtual void synchronize() {}
  /// How many bytes of an allocation are backed by memory now (pages the
  /// program touched), when the device can tell.
  virtual std::optional<size_t> residentBytes(const char *memory) const {
    (void)memory;
    return std::nullopt;
  }
  /// The device's peak FLOP/s for arithmetic in `precision` (f32, bf16,
  /// f16), when known: what MFU divides by.
  /// Measures (or reads from the peaks cache) what the device does for a
  /// program computing in `precision`, and caches it when `writeCache`; the
  /// host's peaks are dtrt/peaks.h's, so none here.
  virtual std::optional<DevicePeaks> measurePeaks(const std::string &precision,
                                                  bool writeCache) {
    (void)precision;
    (void)writeCache;
    return std::nullopt;
  }
  virtual std::optional<double> peakFlops(const std::string &precision) const {
    (void)precision;
    return std::nullopt;
  }
  /// The entry points that run on this device: the program's own on the
  /// host, its GPU plan's on a GPU.
  virtual Expected<Program> programFor(const Program &program) {
    return program;
  }
};

/// Opens the device `backend` names for this rank: auto is the GPU when
/// there is one and `program` carries GPU code, else the host. Fails with a
/// usage error, saying why, when cuda is asked for and cannot be had.
Expected<std::unique_ptr<Device>>
openDevice(Backend backend, const Launch &launch,
           const Program *program = nullptr,
           const CollectiveSetup &collectives = {});

/// Why `program` cannot run on a GPU ("" when it can).
std::string whyNoGpuCode(const Program *program);

} // namespace dtrt

#endif // DTRT_DEVICE_H
