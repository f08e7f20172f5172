//===- dtrt/arena.h - The one allocation of a rank's state ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The arena is `arena.bytes` of zeroed device memory whose base address is
// passed to every entry point; the manifest's buffers are named regions of
// it. The runtime reads and writes buffers only through this class, which
// copies through the Device, so the same code serves host and GPU arenas.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_ARENA_H
#define DTRT_ARENA_H

#include "dtrt/device.h"
#include "dtrt/manifest.h"

#include <cstdint>

namespace dtrt {

/// A rank's arena: owns the memory, reads and writes named buffers.
class Arena {
public:
  /// Allocates the arena the manifest describes on `device` (zero-filled).
  static Expected<Arena> create(Device &device, const Manifest &manifest);

  Arena(Arena &&other) noexcept;
  Arena &operator=(Arena &&) = delete;
  Arena(const Arena &) = delete;
  ~Arena();

  /// The base address the entry points take.
  char *base() { return base_; }
  const Manifest &manifest() const { return *manifest_; }
  Device &device() { return *device_; }

  /// The buffer itself when the arena is host memory (the CPU backend), to
  /// fill in place; null when it lives on a device and takes a copy.
  char *hostData(const BufferDesc &buffer) {
    return device_->hostAddressable() ? base_ + buffer.offset : nullptr;
  }

  /// Copies `buffer.bytes` host bytes from `src` into the buffer.
  void write(const BufferDesc &buffer, const void *src);
  /// Copies the buffer's bytes into `dst` (`buffer.bytes` long).
  void read(const BufferDesc &buffer, void *dst) const;
  /// Copies bytes [from, from + bytes) of the buffer into `dst`.
  void readPart(const BufferDesc &buffer, size_t from, size_t bytes,
                void *dst) const;
  /// Copies `bytes` host bytes from `src` into the buffer at byte `from`.
  void writePart(const BufferDesc &buffer, size_t from, size_t bytes,
                 const void *src);

  /// Bytes of the arena backed by memory now, when the device can tell.
  std::optional<size_t> residentBytes() const {
    return device_->residentBytes(base_);
  }

  /// Reads a scalar f32/i32/i64 buffer as a double.
  double readScalar(const BufferDesc &buffer) const;
  /// Reads a scalar i64 buffer.
  int64_t readI64(const BufferDesc &buffer) const;
  /// Writes a scalar i64 buffer.
  void writeI64(const BufferDesc &buffer, int64_t value);

private:
  Arena(Device &device, const Manifest &manifest, char *base)
      : device_(&device), manifest_(&manifest), base_(base) {}

  Device *device_;
  const Manifest *manifest_;
  char *base_;
};

} // namespace dtrt

#endif // DTRT_ARENA_H
