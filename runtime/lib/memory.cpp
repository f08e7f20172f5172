//===- memory.cpp - How much host memory a rank may use -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/memory.h"
#include "dtrt/report.h"

#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace dtrt {

namespace {

/// The first number in `path`, or nullopt (missing file, "max").
std::optional<uint64_t> readNumber(const std::string &path) {
  std::ifstream in(path);
  uint64_t v;
  if (in >> v)
    return v;
  return std::nullopt;
}

/// A "Key:  N kB" line of /proc/meminfo, in bytes.
std::optional<uint64_t> meminfo(const std::string &key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") != 0)
      continue;
    std::istringstream fields(line.substr(key.size() + 1));
    uint64_t kib;
    if (fields >> kib)
      return kib * 1024;
  }
  return std::nullopt;
}

} // namespace

HostMemory queryHostMemory() {
  HostMemory m;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  m.limit = pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize)
                                      : UINT64_MAX;
  m.limitSource = "this machine's memory";
  // cgroup v2, then v1 (whose "no limit" is a huge number, above the RAM).
  for (const char *path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"})
    if (std::optional<uint64_t> limit = readNumber(path);
        limit && *limit < m.limit) {
      m.limit = *limit;
      m.limitSource = fmt::format("the cgroup's limit ({})", path);
    }
  m.available = meminfo("MemAvailable");
  if (m.available && *m.available > m.limit)
    m.available = m.limit;
  return m;
}

Status checkArenaFits(uint64_t arenaBytes, const HostMemory &memory,
                      const std::string &program) {
  if (arenaBytes > memory.limit)
    return Error(fmt::format(
        "the memory plan needs an arena of {} on this rank, but {} is {}: it "
        "cannot run here. Lower micro_batch (activations grow with it), "
        "shard the model over more ranks (a parallel block), or run on a "
        "machine with more memory; dtc --report shows the plan",
        formatBytes(double(arenaBytes)), memory.limitSource,
        formatBytes(double(memory.limit))));
  if (memory.available && arenaBytes > *memory.available)
    fmt::print(stderr,
               "{}: warning: the memory plan needs an arena of {} but only {} "
               "of memory is available now; the run may be slowed by swapping "
               "or killed by the OOM killer\n",
               program, formatBytes(double(arenaBytes)),
               formatBytes(double(*memory.available)));
  return Status::ok();
}

} // namespace dtrt
