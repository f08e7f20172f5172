//===- collectives.cpp - The C entry points of generated collectives ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/collectives.h"
#include "dtrt/comm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dtrt {
namespace {

Communicator *programComm = nullptr;

/// Prints why and ends the job: generated code has no way to recover.
[[noreturn]] void fail(const Error &error) {
  std::fprintf(stderr, "error: %s\n", error.message().c_str());
  std::fflush(stderr);
  if (programComm)
    programComm->abort(kExitFault);
  std::_Exit(kExitFault);
}

Communicator &comm(const char *kind) {
  if (!programComm)
    fail(Error(fmt::format("internal error: a {} ran before the runtime set "
                           "up its communicator",
                           kind)));
  return *programComm;
}

void check(Status status) {
  if (!status)
    fail(status.error());
}

} // namespace

void setProgramCommunicator(Communicator *c) { programComm = c; }

} // namespace dtrt

using namespace dtrt;

extern "C" void dtrt_all_reduce(const void *src, void *dst, int64_t count,
                                int32_t dtype, int32_t axes,
                                const char *what) {
  check(comm("all-reduce").allReduceSum(src, dst, count, DType(dtype),
                                        AxisMask(axes), what));
}

extern "C" void dtrt_reduce_scatter(const void *src, void *dst, int64_t count,
                                    int32_t dtype, int32_t axes,
                                    const char *what) {
  check(comm("reduce-scatter")
            .reduceScatterSum(src, dst, count, DType(dtype), AxisMask(axes),
                              what));
}

extern "C" void dtrt_all_gather(const void *src, void *dst, int64_t count,
                                int32_t dtype, int32_t axes,
                                const char *what) {
  check(comm("all-gather").allGather(src, dst, count, DType(dtype),
                                     AxisMask(axes), what));
}

extern "C" void dtrt_take_shard(const void *src, void *dst, int64_t total,
                                int64_t count, int32_t dtype, int32_t axes,
                                const char *what) {
  Communicator &c = comm("shard copy");
  size_t bytes = dtypeSize(DType(dtype));
  if (bytes == 0 || count < 0 || total < 0 ||
      (AxisMask(axes) & ~c.mesh().allAxes()))
    fail(Error(fmt::format("internal error: shard copy of '{}' with dtype "
                           "{}, total {}, count {}, axes {:#x}",
                           what, dtype, total, count, axes)));
  int64_t index = c.mesh().indexInGroup(c.rank(), AxisMask(axes));
  int64_t groupSize = c.mesh().groupSize(AxisMask(axes));
  if (count * groupSize < total)
    fail(Error(fmt::format("internal error: shard copy of '{}': {} shards of "
                           "{} do not cover {} elements",
                           what, groupSize, count, total)));
  int64_t begin = std::min(total, index * count);
  int64_t end = std::min(total, begin + count);
  const char *from = static_cast<const char *>(src) + begin * bytes;
  std::memcpy(dst, from, size_t(end - begin) * bytes);
  std::memset(static_cast<char *>(dst) + (end - begin) * bytes, 0,
              size_t(count - (end - begin)) * bytes);
}
