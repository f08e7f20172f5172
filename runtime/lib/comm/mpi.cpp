//===- mpi.cpp - The OpenMPI engine of the communicator -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One MPI sub-communicator per set of mesh axes, split from the world once at
// start (MPI_Comm_split is itself collective, so doing it lazily would make
// the first use of a group a hidden extra collective).
//
// Collectives are MPI's blocking calls, which use its tuned algorithms; a
// blocking call waits forever when a peer hangs, and a job that hangs is worse
// than one that stops with a message, so each call runs under a watchdog: a
// thread that never calls MPI and, when a collective has been in flight
// longer than the timeout, prints what it waited for and ends this process
// with exit 1, after which mpirun (and dtrun, which runs it) ends every rank.
// The non-blocking calls with a polled wait were the first design: OpenMPI's
// non-blocking collectives progress only inside MPI_Test, and were 4-8x slower
// than MPI_Allreduce on buffers of 4 MiB and more (bench/allreduce.cpp).
//
//===----------------------------------------------------------------------===//

#include "dtrt/comm.h"
#include "mpi_world.h"

#include <fmt/format.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dtrt {
namespace {

MPI_Datatype mpiType(DType type) {
  switch (type) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::BF16:
  case DType::F16:
    // MPI has no 16-bit float type to sum; mixed precision reduces in f32
    // (dt-widen-compute makes every partial sum an f32 kernel's result).
    return MPI_DATATYPE_NULL;
  }
  return MPI_DATATYPE_NULL;
}

/// The MPI type that moves elements of `type` unchanged (gathers and
/// exchanges add nothing up, so 16-bit floats travel as 16-bit integers).
MPI_Datatype mpiMoveType(DType type) {
  if (type == DType::BF16 || type == DType::F16)
    return MPI_UINT16_T;
  return mpiType(type);
}

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return std::string(text, size_t(length));
}

/// Ends the process when a collective stays in flight longer than the
/// timeout. `begin`/`end` are two uncontended lock round trips per call; the
/// thread wakes a few times per timeout period.
class Watchdog {
public:
  /// `describe(kind, axes, what)` makes the message, only when one fires.
  using Describe =
      std::function<std::string(const char *, AxisMask, const std::string &)>;
  Watchdog(std::chrono::milliseconds timeout, Describe describe)
      : timeout_(timeout), describe_(std::move(describe)),
        thread_([this] { run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  void setTimeout(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mutex_);
    timeout_ = timeout;
  }

  /// A collective starts. Copying the name reuses the string's storage, so a
  /// call allocates nothing once names have been seen.
  void begin(const char *kind, AxisMask axes, std::string_view what) {
    std::lock_guard<std::mutex> lock(mutex_);
    kind_ = kind;
    axes_ = axes;
    what_.assign(what.data(), what.size());
    start_ = std::chrono::steady_clock::now();
    inFlight_ = true;
  }
  void end() {
    std::lock_guard<std::mutex> lock(mutex_);
    inFlight_ = false;
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    // The timeout may grow for a while (IoWait), never below the one the
    // period was chosen for: checking often is only cheaper than needed.
    auto period = std::max(std::chrono::milliseconds(20), timeout_ / 10);
    while (!stop_) {
      wake_.wait_for(lock, period);
      if (!inFlight_ || std::chrono::steady_clock::now() - start_ <= timeout_)
        continue;
      std::string message = describe_(kind_, axes_, what_);
      std::fprintf(stderr, "error: %s\n", message.c_str());
      std::fflush(stderr);
      // Not MPI_Abort: only the main thread may call MPI. A rank that exits
      // non-zero makes mpirun end the job.
      std::_Exit(kExitFault);
    }
  }

  std::chrono::milliseconds timeout_;
  Describe describe_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool inFlight_ = false;
  std::chrono::steady_clock::time_point start_;
  const char *kind_ = "";
  AxisMask axes_ = 0;
  std::string what_;
  std::thread thread_;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(Mesh mesh, int rank, std::chrono::milliseconds timeout,
                  MPI_Comm world, std::vector<MPI_Comm> groups)
      : Communicator(std::move(mesh), rank), timeout_(timeout),
        stepTimeout_(timeout), world_(world), groups_(std::move(groups)),
        watchdog_(timeout, [this](const char *kind, AxisMask axes,
                                  const std::string &what) {
          return timeoutMessage(kind, axes, what);
        }) {}

  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    for (MPI_Comm &comm : groups_)
      if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    if (world_ != MPI_COMM_WORLD)
      MPI_Comm_free(&world_);
    MPI_Finalize();
  }

  std::chrono::milliseconds timeout() const override { return timeout_; }
  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_ = timeout;
    watchdog_.setTimeout(timeout);
  }

  std::string engine() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, size_t(length));
    // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
    return text.substr(0, text.find(','));
  }

  Status allReduceSum(const void *src, void *dst, int64_t count, DType type,
                      AxisMask axes, std::string_view what) override {
    if (Status s = checkCall("all-reduce", count, type, axes, what); !s)
      return s;
    if (Status s = checkType("all-reduce", type, what); !s)
      return s;
    // MPI counts are ints: sum a large buffer in pieces, all ranks cutting it
    // the same way.
    const int64_t piece = INT_MAX / 2;
    size_t bytes = dtypeSize(type);
    for (int64_t done = 0; done < count; done += piece) {
      int n = int(std::min(piece, count - done));
      const char *in = static_cast<const char *>(src) + done * bytes;
      char *out = static_cast<char *>(dst) + done * bytes;
      watchdog_.begin("all-reduce", axes, what);
      int rc = MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, n,
                             mpiType(type), MPI_SUM, groups_[axes]);
      watchdog_.end();
      if (Status s = result(rc, "all-reduce", what); !s)
        return s;
    }
    return Status::ok();
  }

  Status reduceScatterSum(const void *src, void *dst, int64_t count,
                          DType type, AxisMask axes,
                          std::string_view what) override {
    if (Status s = checkBlockCall("reduce-scatter", count, type, axes, what); !s)
      return s;
    watchdog_.begin("reduce-scatter", axes, what);
    int rc = MPI_Reduce_scatter_block(src, dst, int(count), mpiType(type),
                                      MPI_SUM, groups_[axes]);
    watchdog_.end();
    return result(rc, "reduce-scatter", what);
  }

  Status allGather(const void *src, void *dst, int64_t count, DType type,
                   AxisMask axes, std::string_view what) override {
    if (Status s = checkBlockCall("all-gather", count, type, axes, what,
                                  /*sums=*/false);
        !s)
      return s;
    watchdog_.begin("all-gather", axes, what);
    int rc = MPI_Allgather(src, int(count), mpiMoveType(type), dst, int(count),
                           mpiMoveType(type), groups_[axes]);
    watchdog_.end();
    return result(rc, "all-gather", what);
  }

  Status allToAll(const void *src, void *dst, int64_t count, DType type,
                  AxisMask axes, std::string_view what) override {
    if (Status s = checkBlockCall("all-to-all", count, type, axes, what,
                                  /*sums=*/false);
        !s)
      return s;
    watchdog_.begin("all-to-all", axes, what);
    int rc = MPI_Alltoall(src, int(count), mpiMoveType(type), dst, int(count),
                          mpiMoveType(type), groups_[axes]);
    watchdog_.end();
    return result(rc, "all-to-all", what);
  }

  bool callableFromAnyThread() const override {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level >= MPI_THREAD_SERIALIZED;
  }

  Status exchange(const void *send, int64_t sendCount, int sendStep,
                  void *recv, int64_t recvCount, int recvStep, DType type,
                  AxisMask axis, std::string_view what) override {
    Expected<ExchangePeers> peers = exchangePeers(
        sendCount, sendStep, recvCount, recvStep, type, axis, what);
    if (!peers)
      return peers.error();
    if (sendCount > INT_MAX || recvCount > INT_MAX)
      return Error(fmt::format("exchange of '{}': {} elements are more than "
                               "one MPI message holds",
                               what, std::max(sendCount, recvCount)));
    // MPI_Sendrecv pairs the two directions, so neighbours sending to each
    // other cannot deadlock; MPI_PROC_NULL makes a missing side a no-op.
    constexpr int kTag = 7;
    watchdog_.begin("exchange", axis, what);
    int rc = MPI_Sendrecv(
        send, int(sendCount), mpiMoveType(type),
        peers->sendTo < 0 ? MPI_PROC_NULL : peers->sendTo, kTag, recv,
        int(recvCount), mpiMoveType(type),
        peers->recvFrom < 0 ? MPI_PROC_NULL : peers->recvFrom, kTag,
        groups_[axis], MPI_STATUS_IGNORE);
    watchdog_.end();
    return result(rc, "exchange", what);
  }

  Status send(const void *src, int64_t count, DType type, AxisMask axis,
              int step, int tag, std::string_view what) override {
    Expected<int> peer = ringPeer("send", count, type, axis, step, tag, what);
    if (!peer)
      return peer.error();
    if (count > INT_MAX)
      return Error(fmt::format("send of '{}': {} elements are more than one "
                               "MPI message holds",
                               what, count));
    // Taken messages free their copies as later sends come.
    while (!sends_.empty()) {
      int done = 0;
      MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done)
        break;
      sends_.pop_front();
    }
    PendingSend &p = sends_.emplace_back();
    const char *bytes = static_cast<const char *>(src);
    p.data.assign(bytes, bytes + count * int64_t(dtypeSize(type)));
    p.what = what;
    p.axis = axis;
    return result(MPI_Isend(p.data.data(), int(count), mpiMoveType(type),
                            *peer, tag, groups_[axis], &p.request),
                  "send", what);
  }

  Status receive(void *dst, int64_t count, DType type, AxisMask axis, int step,
                 int tag, std::string_view what) override {
    Expected<int> peer =
        ringPeer("receive", count, type, axis, step, tag, what);
    if (!peer)
      return peer.error();
    if (count > INT_MAX)
      return Error(fmt::format("receive of '{}': {} elements are more than "
                               "one MPI message holds",
                               what, count));
    watchdog_.begin("receive", axis, what);
    int rc = MPI_Recv(dst, int(count), mpiMoveType(type), *peer, tag,
                      groups_[axis], MPI_STATUS_IGNORE);
    watchdog_.end();
    return result(rc, "receive", what);
  }

  Status finishSends(std::string_view what) override {
    while (!sends_.empty()) {
      PendingSend &p = sends_.front();
      watchdog_.begin("send", p.axis, p.what);
      int rc = MPI_Wait(&p.request, MPI_STATUS_IGNORE);
      watchdog_.end();
      if (rc != MPI_SUCCESS)
        return result(rc, "send", p.what);
      sends_.pop_front();
    }
    return Status::ok();
  }

  Status barrier(std::string_view what) override {
    watchdog_.begin("barrier", mesh().allAxes(), what);
    int rc = MPI_Barrier(groups_[mesh().allAxes()]);
    watchdog_.end();
    return result(rc, "barrier", what);
  }

  [[noreturn]] void abort(int exitCode) override {
    MPI_Abort(groups_[mesh().allAxes()], exitCode);
    std::_Exit(exitCode); // MPI_Abort does not return; this is for safety.
  }

private:
  /// Refuses element types MPI cannot sum.
  Status checkType(const char *kind, DType type, std::string_view what) const {
    if (mpiType(type) != MPI_DATATYPE_NULL)
      return Status::ok();
    return Error(fmt::format("{} of '{}': the MPI engine does not sum {} "
                             "elements",
                             kind, what, dtypeName(type)));
  }

  /// What a reduce-scatter, all-gather or all-to-all needs: a valid call, of
  /// a type MPI sums where it `sums`, and a block that is one MPI count.
  Status checkBlockCall(const char *kind, int64_t count, DType type,
                        AxisMask axes, std::string_view what,
                        bool sums = true) const {
    if (Status s = checkCall(kind, count, type, axes, what); !s)
      return s;
    if (Status s = sums ? checkType(kind, type, what) : Status::ok(); !s)
      return s;
    if (count <= INT_MAX)
      return Status::ok();
    return Error(fmt::format("{} of '{}': a shard of {} elements is over "
                             "MPI's 2^31 - 1; this build does not split "
                             "such shards yet",
                             kind, what, count));
  }

  Status result(int rc, const char *kind, std::string_view what) const {
    if (rc == MPI_SUCCESS)
      return Status::ok();
    return Error(fmt::format("rank {}: {} of '{}' failed: {}", rank(), kind,
                             what, mpiError(rc)));
  }

  std::string timeoutMessage(const char *kind, AxisMask axes,
                             std::string_view what) const {
    std::vector<int> members = mesh().group(rank(), axes);
    std::string others;
    for (int r : members)
      if (r != rank())
        others += fmt::format("{}{}", others.empty() ? "" : ", ", r);
    return fmt::format(
        "rank {}: {} of '{}' over {} waited {:.0f} s for rank(s) {} without "
        "an answer: one of them died or hangs (their own messages, or the "
        "launcher's, say which; {} sets the limit); stopping every rank",
        rank(), kind, what, mesh().describeAxes(axes),
        std::chrono::duration<double>(timeout_).count(), others,
        timeout_ > stepTimeout_ ? "--io-timeout" : "--timeout");
  }

  /// A message handed to MPI_Isend, with its own copy of the data.
  struct PendingSend {
    std::vector<char> data;
    MPI_Request request = MPI_REQUEST_NULL;
    std::string what;
    AxisMask axis = 0;
  };
  std::deque<PendingSend> sends_;

  /// The limit now, and the one the communicator was made with (a longer
  /// one is an IoWait's).
  std::chrono::milliseconds timeout_, stepTimeout_;
  MPI_Comm world_;
  /// Indexed by axis mask.
  std::vector<MPI_Comm> groups_;
  Watchdog watchdog_;
};

} // namespace

#if DTRT_CHECKED
extern "C" void __lsan_do_leak_check();
#endif

Expected<std::unique_ptr<Communicator>>
makeMpiCommunicator(Mesh mesh, std::chrono::milliseconds timeout,
                    const std::optional<Rendezvous> &meet) {
#if DTRT_CHECKED
  // Open MPI allocates state it never frees, from threads and libraries whose
  // frames LeakSanitizer cannot name, so no suppression separates its leaks
  // from ours: check for leaks now, before MPI starts, which also ends leak
  // checking. A checked program of several ranks still checks every access.
  __lsan_do_leak_check();
#endif
  Expected<MPI_Comm> world = openMpiWorld(meet);
  if (!world)
    return world.error();
  // Errors come back as codes, so that messages name the collective.
  MPI_Comm_set_errhandler(*world, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(*world, &rank);
  MPI_Comm_size(*world, &size);
  if (size != mesh.worldSize())
    return Error(fmt::format(
        "this program's mesh ({}) has {} ranks, but it was started with {}: "
        "start it as `dtrun -n {} ./program` or `mpirun -n {} ./program`",
        mesh.describe(), mesh.worldSize(), size, mesh.worldSize(),
        mesh.worldSize()));

  std::vector<MPI_Comm> groups(size_t(mesh.allAxes()) + 1, MPI_COMM_NULL);
  for (AxisMask axes = 0; axes <= mesh.allAxes(); ++axes) {
    int rc = MPI_Comm_split(*world, mesh.groupColor(rank, axes),
                            mesh.indexInGroup(rank, axes), &groups[axes]);
    if (rc != MPI_SUCCESS)
      return Error(fmt::format("rank {}: cannot make the communicator of "
                               "axes {}: {}",
                               rank, mesh.describeAxes(axes), mpiError(rc)));
    MPI_Comm_set_errhandler(groups[axes], MPI_ERRORS_RETURN);
  }
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(std::move(mesh), rank, timeout, *world,
                          std::move(groups)));
}

} // namespace dtrt
