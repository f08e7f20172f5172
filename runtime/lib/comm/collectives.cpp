//===- collectives.cpp - The C entry points of generated collectives ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/collectives.h"
#include "dtrt/comm.h"
#include "dtrt/trace.h"

#include "queue.h"

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
/// Seconds the rank's thread spent in the program's collectives (waiting for
/// the slowest member included) or waiting for asynchronous ones: the
/// communication a step does not hide.
double programCommSeconds = 0;

/// Adds the lifetime of one call on the rank's thread to programCommSeconds.
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

/// The program's collectives in issue order (queue.h); made with the
/// communicator.
std::unique_ptr<CollectiveQueue> programQueue;

CollectiveQueue &queue() {
  if (!programQueue)
    fail(Error("internal error: a collective ran before the runtime set up "
               "its communicator"));
  return *programQueue;
}

/// Runs collective `id` (`run`) now, after the asynchronous ones before it.
void runNow(std::function<Status()> run) {
  Timed timed;
  queue().runInOrder(std::move(run));
}

/// Starts collective `id`; it runs beside the rank's work until dtrt_wait.
/// A communicator that only its own thread may call runs it now.
void startAsync(Communicator &c, int32_t id, std::function<Status()> run) {
  if (!c.callableFromAnyThread())
    return runNow(std::move(run));
  queue().start(id, std::move(run));
}

} // namespace

void setProgramCommunicator(Communicator *c, std::vector<std::string> names) {
  // The queue's thread ends (its collectives all waited for) before the
  // communicator it calls can.
  programQueue.reset();
  programComm = c;
  programNames = std::move(names);
  programCommSeconds = 0;
  if (c)
    programQueue = std::make_unique<CollectiveQueue>(
        [](const Error &e) { fail(e); });
}

Status checkCollectivesDone(const char *entry) {
  int64_t running = programQueue ? programQueue->pending() : 0;
  if (running == 0)
    return Status::ok();
  return Error(fmt::format("internal error: {} returned with {} asynchronous "
                           "collective(s) not waited for; the program breaks "
                           "the ABI, please report it",
                           entry, running));
}

Communicator *programCommunicator() { return programComm; }

double programCollectiveSeconds() { return programCommSeconds; }

void addProgramCollectiveSeconds(double seconds) {
  programCommSeconds += seconds;
}

} // namespace dtrt

using namespace dtrt;

namespace {

/// Issues collective `id`: now, or (`async`) started beside the rank's work.
/// The call is checked on the rank's thread either way.
void issue(bool async, Communicator &c, int32_t id,
           std::function<Status()> run) {
  // A traced step records when the collective itself ran, on whichever
  // thread ran it.
  if (Tracer *t = programTracer(); t && t->recording())
    run = [t, id, run = std::move(run)] {
      int64_t begin = steadyNanos();
      Status s = run();
      t->collective(id, begin, steadyNanos());
      return s;
    };
  if (async)
    startAsync(c, id, std::move(run));
  else
    runNow(std::move(run));
}

void allReduce(bool async, const void *src, void *dst, int64_t count,
               int32_t dtype, int32_t axes, int32_t id) {
  Communicator &c = comm("all-reduce");
  issue(async, c, id, [=, &c] {
    return c.allReduceSum(src, dst, count, DType(dtype), AxisMask(axes),
                          nameOf(id));
  });
}

void reduceScatter(bool async, const void *src, void *dst, int64_t count,
                   int64_t group, int32_t dtype, int32_t axes, int32_t id) {
  Communicator &c = comm("reduce-scatter");
  checkGroup(c, "reduce-scatter", group, axes, id);
  issue(async, c, id, [=, &c] {
    return c.reduceScatterSum(src, dst, count, DType(dtype), AxisMask(axes),
                              nameOf(id));
  });
}

void allGather(bool async, const void *src, void *dst, int64_t count,
               int64_t group, int32_t dtype, int32_t axes, int32_t id) {
  Communicator &c = comm("all-gather");
  checkGroup(c, "all-gather", group, axes, id);
  issue(async, c, id, [=, &c] {
    return c.allGather(src, dst, count, DType(dtype), AxisMask(axes),
                       nameOf(id));
  });
}

void allToAll(bool async, const void *src, void *dst, int64_t count,
              int64_t group, int32_t dtype, int32_t axes, int32_t id) {
  Communicator &c = comm("all-to-all");
  checkGroup(c, "all-to-all", group, axes, id);
  issue(async, c, id, [=, &c] {
    return c.allToAll(src, dst, count, DType(dtype), AxisMask(axes),
                      nameOf(id));
  });
}

} // namespace

extern "C" void dtrt_all_reduce(const void *src, void *dst, int64_t count,
                                int32_t dtype, int32_t axes, int32_t id) {
  allReduce(false, src, dst, count, dtype, axes, id);
}
extern "C" void dtrt_all_reduce_start(const void *src, void *dst,
                                      int64_t count, int32_t dtype,
                                      int32_t axes, int32_t id) {
  allReduce(true, src, dst, count, dtype, axes, id);
}

extern "C" void dtrt_reduce_scatter(const void *src, void *dst, int64_t count,
                                    int64_t group, int32_t dtype, int32_t axes,
                                    int32_t id) {
  reduceScatter(false, src, dst, count, group, dtype, axes, id);
}
extern "C" void dtrt_reduce_scatter_start(const void *src, void *dst,
                                          int64_t count, int64_t group,
                                          int32_t dtype, int32_t axes,
                                          int32_t id) {
  reduceScatter(true, src, dst, count, group, dtype, axes, id);
}

extern "C" void dtrt_all_gather(const void *src, void *dst, int64_t count,
                                int64_t group, int32_t dtype, int32_t axes,
                                int32_t id) {
  allGather(false, src, dst, count, group, dtype, axes, id);
}
extern "C" void dtrt_all_gather_start(const void *src, void *dst,
                                      int64_t count, int64_t group,
                                      int32_t dtype, int32_t axes,
                                      int32_t id) {
  allGather(true, src, dst, count, group, dtype, axes, id);
}

extern "C" void dtrt_all_to_all(const void *src, void *dst, int64_t count,
                                int64_t group, int32_t dtype, int32_t axes,
                                int32_t id) {
  allToAll(false, src, dst, count, group, dtype, axes, id);
}
extern "C" void dtrt_all_to_all_start(const void *src, void *dst,
                                      int64_t count, int64_t group,
                                      int32_t dtype, int32_t axes,
                                      int32_t id) {
  allToAll(true, src, dst, count, group, dtype, axes, id);
}

extern "C" void dtrt_wait(int32_t id) {
  Timed timed;
  queue().wait(id);
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
  int64_t groupSize = c.mesh().groupSize(AxisMask(axes));
  if (count * groupSize < total)
    fail(Error(fmt::format("internal error: shard copy of '{}': {} shards of "
                           "{} do not cover {} elements",
                           nameOf(id), groupSize, count, total)));
  auto [begin, end] =
      c.mesh().shardRange(c.rank(), AxisMask(axes), total, count);
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
