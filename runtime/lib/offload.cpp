//===- offload.cpp - The optimizer in host memory -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// See dtrt/offload.h. The mirror is an anonymous mapping as large as the
// arena: only what the host touches (the state, the mirrored ranges, the
// update's transient values) is ever backed by memory.
//
//===----------------------------------------------------------------------===//

#include "dtrt/offload.h"

#include "dtrt/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace dtrt {

namespace {

class OffloadDevice;
/// The process's offloading device, for the plain-function dt_apply_step.
OffloadDevice *active = nullptr;

class OffloadDevice final : public Device {
public:
  OffloadDevice(std::unique_ptr<Device> inner, OffloadSplit split)
      : inner_(std::move(inner)), split_(std::move(split)) {
    active = this;
  }
  ~OffloadDevice() override {
    if (active == this)
      active = nullptr;
  }

  std::string describe() const override {
    // Once the arena is there: what each side holds of it.
    if (base_)
      return fmt::format("{}; the optimizer in host memory ({} of the arena "
                         "there, {} on the device)",
                         inner_->describe(),
                         formatBytes(double(split_.hostBytes)),
                         formatBytes(double(deviceBytes_)));
    return fmt::format("{}; the optimizer in host memory ({})",
                       inner_->describe(),
                       formatBytes(double(split_.hostBytes)));
  }
  Backend backend() const override { return inner_->backend(); }
  // Half of the arena is not the device's: every write goes through copyIn.
  bool hostAddressable() const override { return false; }

  Expected<char *> allocate(size_t bytes, size_t align) override {
    size_t host = size_t(split_.hostBytes);
    if (base_)
      return Error("an offloading device holds one arena");
    if (bytes <= host)
      return Error(fmt::format("the arena of {} bytes ends before its device "
                               "part, which starts at {}",
                               bytes, host));
    size_t page = size_t(sysconf(_SC_PAGE_SIZE));
    mirrorBytes_ = std::max<size_t>((bytes + page - 1) / page * page, page);
    void *m = mmap(nullptr, mirrorBytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      return Error(fmt::format("cannot map {} of host memory for the "
                               "offloaded optimizer: {}",
                               formatBytes(double(bytes)),
                               std::strerror(errno)));
    mirror_ = static_cast<char *>(m);
    deviceBytes_ = bytes - host;
    Expected<char *> memory = inner_->allocate(deviceBytes_, align);
    if (!memory) {
      munmap(mirror_, mirrorBytes_);
      mirror_ = nullptr;
      return memory.error();
    }
    // The arena's base lies `host` bytes before the device's memory; no
    // entry point that runs there reads below it (dtc placed only the
    // update's globals there). Integer arithmetic: the address is outside
    // any object.
    uintptr_t at = reinterpret_cast<uintptr_t>(*memory);
    if (at < host) {
      inner_->release(*memory);
      munmap(mirror_, mirrorBytes_);
      mirror_ = nullptr;
      return Error("the device's memory lies too low in the address space "
                   "to offload the optimizer");
    }
    base_ = reinterpret_cast<char *>(at - host);
    pinMirroredRanges(page);
    return base_;
  }

  void release(char *memory) override {
    if (memory != base_ || !base_)
      return;
    for (char *p : pinned_)
      inner_->unpinHost(p);
    pinned_.clear();
    inner_->release(base_ + split_.hostBytes);
    munmap(mirror_, mirrorBytes_);
    base_ = mirror_ = nullptr;
  }

  void copyIn(char *dst, const void *src, size_t bytes) override {
    route(dst, bytes, [&](size_t off, size_t n, bool device) {
      const char *from = static_cast<const char *>(src) + (off - offsetOf(dst));
      if (!device) {
        std::memcpy(mirror_ + off, from, n);
        return;
      }
      inner_->copyIn(base_ + off, from, n);
      // The host's copy of a mirrored range stays the same.
      forEachMirrored(off, n, [&](size_t lo, size_t hi) {
        std::memcpy(mirror_ + lo, from + (lo - off), hi - lo);
      });
    });
  }

  void copyOut(void *dst, const char *src, size_t bytes) override {
    route(src, bytes, [&](size_t off, size_t n, bool device) {
      char *to = static_cast<char *>(dst) + (off - offsetOf(src));
      if (device)
        inner_->copyOut(to, base_ + off, n);
      else
        std::memcpy(to, mirror_ + off, n);
    });
  }

  void zero(char *dst, size_t bytes) override {
    route(dst, bytes, [&](size_t off, size_t n, bool device) {
      if (device) {
        inner_->zero(base_ + off, n);
        forEachMirrored(off, n, [&](size_t lo, size_t hi) {
          std::memset(mirror_ + lo, 0, hi - lo);
        });
      } else {
        std::memset(mirror_ + off, 0, n);
      }
    });
  }
  void synchronize() override { inner_->synchronize(); }
  std::optional<size_t> residentBytes(const char *memory) const override {
    return memory == base_ ? inner_->residentBytes(base_ + split_.hostBytes)
                           : std::nullopt;
  }
  bool pinHost(void *host, size_t bytes) override {
    return inner_->pinHost(host, bytes);
  }
  void unpinHost(void *host) override { inner_->unpinHost(host); }
  std::optional<DevicePeaks> measurePeaks(const std::string &precision,
                                          bool writeCache) override {
    return inner_->measurePeaks(precision, writeCache);
  }
  std::optional<double> peakFlops(const std::string &precision) const override {
    return inner_->peakFlops(precision);
  }

  Expected<Program> programFor(const Program &cpu) override {
    if (!cpu.applyStep)
      return Error("the program has no dt_apply_step to run on the host");
    // The device's plan has no update of its own (dtc leaves it out).
    Program rest = cpu;
    rest.applyStep = nullptr;
    Expected<Program> onDevice = inner_->programFor(rest);
    if (!onDevice)
      return onDevice.error();
    hostApply_ = cpu.applyStep;
    onDevice->applyStep = &applyOnHost;
    return onDevice;
  }

private:
  /// dt_apply_step: the gradients down, the update on the host, the
  /// parameters up.
  static void applyOnHost(char *arena) { active->apply(arena); }
  void apply(char *arena) {
    (void)arena; // base_: one arena per process
    for (auto [offset, bytes] : split_.down)
      inner_->copyOut(mirror_ + offset, base_ + offset, size_t(bytes));
    hostApply_(mirror_);
    for (auto [offset, bytes] : split_.up)
      inner_->copyIn(base_ + offset, mirror_ + offset, size_t(bytes));
    // What the update cleared on the host, the device clears itself.
    for (auto [offset, bytes] : split_.zero)
      inner_->zero(base_ + offset, size_t(bytes));
  }

  size_t offsetOf(const char *p) const {
    return size_t(reinterpret_cast<uintptr_t>(p) -
                  reinterpret_cast<uintptr_t>(base_));
  }

  /// Calls fn(offset, bytes, onDevice) for the host's and the device's
  /// parts of [p, p + bytes).
  template <typename Fn> void route(const char *p, size_t bytes, Fn fn) {
    size_t off = offsetOf(p), end = off + bytes,
           host = size_t(split_.hostBytes);
    if (off < host)
      fn(off, std::min(end, host) - off, false);
    if (end > host) {
      size_t from = std::max(off, host);
      fn(from, end - from, true);
    }
  }

  /// Calls fn(lo, hi) for each part of [off, off + bytes) that the host
  /// mirrors.
  template <typename Fn> void forEachMirrored(size_t off, size_t bytes, Fn fn) {
    size_t end = off + bytes;
    for (auto [offset, n] : split_.mirrored) {
      size_t lo = std::max(off, size_t(offset)),
             hi = std::min(end, size_t(offset + n));
      if (lo < hi)
        fn(lo, hi);
    }
  }

  /// The copies of every step go through pinned memory when the device can
  /// pin it: each mirrored range, in whole pages (those of neighbouring
  /// ranges pinned once). Only those: pinning commits the pages.
  void pinMirroredRanges(size_t page) {
    std::vector<std::pair<size_t, size_t>> spans;
    for (auto [offset, bytes] : split_.mirrored) {
      size_t lo = size_t(offset) / page * page,
             hi = std::min((size_t(offset + bytes) + page - 1) / page * page,
                           mirrorBytes_);
      if (!spans.empty() && lo <= spans.back().second)
        spans.back().second = std::max(spans.back().second, hi);
      else
        spans.push_back({lo, hi});
    }
    for (auto [lo, hi] : spans)
      if (inner_->pinHost(mirror_ + lo, hi - lo))
        pinned_.push_back(mirror_ + lo);
  }

  std::unique_ptr<Device> inner_;
  OffloadSplit split_;
  char *base_ = nullptr, *mirror_ = nullptr;
  std::vector<char *> pinned_;
  size_t mirrorBytes_ = 0, deviceBytes_ = 0;
  Program::Entry hostApply_ = nullptr;
};

} // namespace

std::unique_ptr<Device> offloadOptimizer(std::unique_ptr<Device> device,
                                         const OffloadSplit &split) {
  return std::make_unique<OffloadDevice>(std::move(device), split);
}

} // namespace dtrt
