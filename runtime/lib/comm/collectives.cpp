//===- collectives.cpp - The C entry points of generated collectives ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/collectives.h"
#include "dtrt/comm.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dtrt {
namespace {

Communicator *programComm = nullptr;
std::vector<std::string> programNames;
/// Seconds spent inside the program's collectives (waiting for the slowest
/// member included): what a step spends communicating.
double programCommSeconds = 0;

/// Adds the lifetime of one collective call to programCommSeconds.
class Timed {
public:
  Timed() : start_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    programCommSeconds += std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start_)
                              .count();
  }

private:
  std::chrono::steady_clock::time_point start_;
};

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

/// The name of collective `id`, for messages.
std::string nameOf(int32_t id) {
  if (id >= 0 && size_t(id) < programNames.size())
    return programNames[size_t(id)];
  return fmt::format("collective #{}", id);
}

/// Fails when the program was compiled for groups of another size than the
/// mesh gives `axes` (a program run on a mesh it was not compiled for).
void checkGroup(Communicator &c, const char *kind, int64_t group,
                int32_t axes, int32_t id) {
  int size = c.mesh().groupSize(AxisMask(axes) & c.mesh().allAxes());
  if ((AxisMask(axes) & ~c.mesh().allAxes()) || group != size)
    fail(Error(fmt::format("internal error: the {} of '{}' was compiled for "
                           "a group of {} ranks over axes {:#x}, but the mesh "
                           "({}) gives {}",
                           kind, nameOf(id), group, axes, c.mesh().describe(),
                           size)));
}

} // namespace

void setProgramCommunicator(Communicator *c, std::vector<std::string> names) {
  programComm = c;
  programNames = std::move(names);
  programCommSeconds = 0;
}

double programCollectiveSeconds() { return programCommSeconds; }

} // namespace dtrt

using namespace dtrt;

extern "C" void dtrt_all_reduce(const void *src, void *dst, int64_t count,
                                int32_t dtype, int32_t axes, int32_t id) {
  Timed timed;
  check(comm("all-reduce").allReduceSum(src, dst, count, DType(dtype),
                                        AxisMask(axes), nameOf(id)));
}

extern "C" void dtrt_reduce_scatter(const void *src, void *dst, int64_t count,
                                    int64_t group, int32_t dtype, int32_t axes,
                                    int32_t id) {
  Timed timed;
  Communicator &c = comm("reduce-scatter");
  checkGroup(c, "reduce-scatter", group, axes, id);
  check(c.reduceScatterSum(src, dst, count, DType(dtype), AxisMask(axes),
                           nameOf(id)));
}

extern "C" void dtrt_all_gather(const void *src, void *dst, int64_t count,
                                int64_t group, int32_t dtype, int32_t axes,
                                int32_t id) {
  Timed timed;
  Communicator &c = comm("all-gather");
  checkGroup(c, "all-gather", group, axes, id);
  check(c.allGather(src, dst, count, DType(dtype), AxisMask(axes), nameOf(id)));
}

extern "C" void dtrt_all_to_all(const void *src, void *dst, int64_t count,
                                int64_t group, int32_t dtype, int32_t axes,
                                int32_t id) {
  Timed timed;
  Communicator &c = comm("all-to-all");
  checkGroup(c, "all-to-all", group, axes, id);
  check(c.allToAll(src, dst, count, DType(dtype), AxisMask(axes), nameOf(id)));
}

extern "C" void dtrt_take_shard(const void *src, void *dst, int64_t total,
                                int64_t count, int32_t dtype, int32_t axes,
                                int32_t id) {
  Communicator &c = comm("shard copy");
  size_t bytes = dtypeSize(DType(dtype));
  if (bytes == 0 || count < 0 || total < 0 ||
      (AxisMask(axes) & ~c.mesh().allAxes()))
    fail(Error(fmt::format("internal error: shard copy of '{}' with dtype "
                           "{}, total {}, count {}, axes {:#x}",
                           nameOf(id), dtype, total, count, axes)));
  int64_t index = c.mesh().indexInGroup(c.rank(), AxisMask(axes));
  int64_t groupSize = c.mesh().groupSize(AxisMask(axes));
  if (count * groupSize < total)
    fail(Error(fmt::format("internal error: shard copy of '{}': {} shards of "
                           "{} do not cover {} elements",
                           nameOf(id), groupSize, count, total)));
  int64_t begin = std::min(total, index * count);
  int64_t end = std::min(total, begin + count);
  const char *from = static_cast<const char *>(src) + begin * bytes;
  std::memcpy(dst, from, size_t(end - begin) * bytes);
  std::memset(static_cast<char *>(dst) + (end - begin) * bytes, 0,
              size_t(count - (end - begin)) * bytes);
}

extern "C" int64_t dtrt_mesh_coord(int32_t axis) {
  Communicator &c = comm("shard offset");
  if (axis < 0 || size_t(axis) >= c.mesh().axisCount())
    fail(Error(fmt::format("internal error: the program asked for the "
                           "coordinate along axis {} of the mesh ({})",
                           axis, c.mesh().describe())));
  return c.mesh().coordinates(c.rank())[size_t(axis)];
}
