//===- dtrt/memory.h - How much host memory a rank may use ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The arena's size is fixed at compile time, so whether it fits can be said
// before the first step instead of by the OOM killer halfway through it. The
// limit is the smaller of the machine's memory and the cgroup's (what a
// container, a Slurm job or a Kubernetes pod is allowed); what is available is
// the kernel's estimate of memory that can be had without swapping.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_MEMORY_H
#define DTRT_MEMORY_H

#include "dtrt/error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dtrt {

struct HostMemory {
  /// The most this process may use: physical memory, or the cgroup's limit.
  uint64_t limit = 0;
  /// "this machine's memory" or "the cgroup limit (memory.max)".
  std::string limitSource;
  /// MemAvailable from /proc/meminfo, if the kernel reports it.
  std::optional<uint64_t> available;
};

/// Reads the machine's and the cgroup's memory figures.
HostMemory queryHostMemory();

/// An error when `arenaBytes` cannot fit in `memory.limit`; a warning on
/// stderr when it exceeds what is available now. `program` names the program
/// in messages.
Status checkArenaFits(uint64_t arenaBytes, const HostMemory &memory,
                      const std::string &program);

} // namespace dtrt

#endif // DTRT_MEMORY_H
