//===- dtrt/comm.h - Collectives between the ranks of a mesh ----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The one communicator interface of the runtime (DESIGN.md, "One communicator
// interface"). The partitioner turns a global train step into a per-rank
// program whose collectives run over *groups of mesh axes*: a data-parallel
// gradient all-reduce runs over {dp}, a Megatron all-reduce over {tp}, a ZeRO
// all-gather over the data axes. Generated code names a group by a bit mask of
// axes (bit i = axis i of the mesh, outermost first), never by ranks, so the
// same program runs on any engine behind this interface: OpenMPI between CPU
// ranks today, NCCL between GPUs later.
//
// Ranks are laid out row-major over the mesh: the innermost axis gets
// neighbouring ranks (one node's GPUs). The group of a call is the ranks whose
// coordinates agree with the caller's on every axis outside the mask; a rank's
// index in its group is its row-major index over the masked axes.
//
// Collectives never hang: an engine waits at most its timeout for the other
// ranks and then ends this rank with a message naming the collective and its
// group, after which the launcher ends the others.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_COMM_H
#define DTRT_COMM_H

#include "dtrt/error.h"
#include "dtrt/manifest.h" // DType: a collective moves elements of arena buffers
#include "dtrt/rendezvous.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrt {

/// A set of mesh axes: bit i is axis i (outermost first).
using AxisMask = uint32_t;

/// The device mesh of a program: named axes with sizes, outermost first.
class Mesh {
public:
  /// The mesh of one rank (no axes).
  Mesh() = default;
  /// Checks names (non-empty, distinct) and sizes (>= 1), at most 16 axes.
  static Expected<Mesh> create(std::vector<std::string> names,
                               std::vector<int> sizes);

  int worldSize() const;
  size_t axisCount() const { return names_.size(); }
  const std::string &axisName(size_t axis) const { return names_[axis]; }
  int axisSize(size_t axis) const { return sizes_[axis]; }
  /// All axes.
  AxisMask allAxes() const { return (AxisMask(1) << names_.size()) - 1; }

  /// The coordinates of `rank`, one per axis.
  std::vector<int> coordinates(int rank) const;
  /// The number of ranks in a group over `axes`.
  int groupSize(AxisMask axes) const;
  /// `rank`'s index in its group over `axes`.
  int indexInGroup(int rank, AxisMask axes) const;
  /// Which group over `axes` `rank` belongs to: its row-major index over the
  /// axes outside the mask (equal for exactly the members of one group).
  int groupColor(int rank, AxisMask axes) const;
  /// The elements [first, last) of a value of `total` elements that `rank`
  /// holds when it is cut over `axes` into blocks of `each` (the last ones
  /// short or empty): a take_shard's, on the CPU and on the GPU.
  std::pair<int64_t, int64_t> shardRange(int rank, AxisMask axes, int64_t total,
                                         int64_t each) const;
  /// The world ranks of `rank`'s group over `axes`, in group-index order.
  std::vector<int> group(int rank, AxisMask axes) const;

  /// "dp=4, tp=2" (the program's `mesh` key), "one rank" for no axes.
  std::string describe() const;
  /// "{dp}" or "{dp, tp}": the axes of a mask.
  std::string describeAxes(AxisMask axes) const;

private:
  std::vector<std::string> names_;
  std::vector<int> sizes_;
};


/// The collectives a per-rank program issues. Buffers are plain memory (arena
/// offsets in emitted programs); `count` is in elements; `what` names the
/// value for messages ("grad/fc1.weight"). Sums are elementwise.
class Communicator {
public:
  virtual ~Communicator();

  const Mesh &mesh() const { return mesh_; }
  int rank() const { return rank_; }
  int worldSize() const { return mesh_.worldSize(); }
  /// The engine, for start-up lines: "one rank", "OpenMPI 4.1.4".
  virtual std::string engine() const = 0;

  /// dst = sum over the group of src; `src == dst` is allowed.
  virtual Status allReduceSum(const void *src, void *dst, int64_t count,
                              DType type, AxisMask axes,
                              std::string_view what) = 0;
  /// src holds groupSize blocks of `count` elements; dst (`count` elements)
  /// = sum over the group of block indexInGroup. src and dst must not overlap.
  virtual Status reduceScatterSum(const void *src, void *dst, int64_t count,
                                  DType type, AxisMask axes,
                                  std::string_view what) = 0;
  /// dst holds groupSize blocks of `count` elements; block i = src of the
  /// group's rank i. src and dst must not overlap.
  virtual Status allGather(const void *src, void *dst, int64_t count,
                           DType type, AxisMask axes,
                           std::string_view what) = 0;
  /// src and dst hold groupSize blocks of `count` elements; block j of dst =
  /// block indexInGroup of the src of the group's rank j (a transpose of
  /// blocks across the group). src and dst must not overlap.
  virtual Status allToAll(const void *src, void *dst, int64_t count,
                          DType type, AxisMask axes,
                          std::string_view what) = 0;
  /// Point to point along one axis, for pipeline stages: sends `sendCount`
  /// elements of `send` to the rank `sendStep` places along `axis` (+1: the
  /// next stage, -1: the previous one; 0: sends nothing) and receives
  /// `recvCount` elements into `recv` from the rank `recvStep` places along
  /// it (0: receives nothing), both at once, so that neighbours that send to
  /// each other (activations forward, gradients back) never wait on each
  /// other. `axis` is one axis (a mask of one bit); a step past either end of
  /// it is an error. Elements move unchanged.
  virtual Status exchange(const void *send, int64_t sendCount, int sendStep,
                          void *recv, int64_t recvCount, int recvStep,
                          DType type, AxisMask axis, std::string_view what) = 0;
  /// Pipeline messages, for schedules in which a stage sends one micro-batch
  /// while its neighbour is still busy with another: `send` hands `count`
  /// elements of `src` to the rank `step` places along `axis` (around it: the
  /// last rank's +1 is the first, as interleaved stages need) and returns at
  /// once, having copied them, so `src` may be overwritten. `tag` (0 to
  /// 32767) tells messages between two ranks apart. `receive` waits (at most
  /// the timeout) for the message with `tag` from the rank `step` places
  /// along `axis` (-1: the previous stage). `finishSends` waits until every
  /// message sent has been taken. A schedule whose every receive is answered
  /// by a send that does not wait for the receiver never deadlocks.
  virtual Status send(const void *src, int64_t count, DType type,
                      AxisMask axis, int step, int tag,
                      std::string_view what) = 0;
  virtual Status receive(void *dst, int64_t count, DType type, AxisMask axis,
                         int step, int tag, std::string_view what) = 0;
  virtual Status finishSends(std::string_view what) = 0;
  /// Every rank of the world reaches this point.
  virtual Status barrier(std::string_view what) = 0;
  /// How long a collective waits for the other ranks before the engine
  /// ends the job (zero: no limit), and setting it.
  virtual std::chrono::milliseconds timeout() const { return {}; }
  virtual void setTimeout(std::chrono::milliseconds timeout) { (void)timeout; }
  /// The limit of the waits around file input and output (checkpoints,
  /// exports, pretrained weights; IoWait): a rank may write its part of a
  /// checkpoint for minutes while the others wait, far longer than a step.
  std::chrono::milliseconds ioTimeout() const { return ioTimeout_; }
  void setIoTimeout(std::chrono::milliseconds t) { ioTimeout_ = t; }
  /// Whether a thread other than the one that made it may call it (one
  /// thread at a time): asynchronous collectives need it.
  virtual bool callableFromAnyThread() const { return true; }
  /// Ends every rank of the job with `exitCode` after this rank printed why.
  [[noreturn]] virtual void abort(int exitCode) = 0;

protected:
  Communicator(Mesh mesh, int rank) : mesh_(std::move(mesh)), rank_(rank) {}

  /// Checks what every engine requires of a call (known dtype, count >= 0,
  /// axes in the mesh); `kind` names the collective in the message.
  Status checkCall(const char *kind, int64_t count, DType type, AxisMask axes,
                   std::string_view what) const;

  /// The peers of an exchange: for each step, the peer's index in this
  /// rank's group along `axis` (-1 for a step of 0). Checks the call as
  /// checkCall does, that `axis` is one axis and that the steps stay on it.
  struct ExchangePeers {
    int sendTo = -1, recvFrom = -1;
  };
  /// The index in this rank's group along `axis` of the rank `step` places
  /// along it, around the axis; checks the call as checkCall does, and the
  /// tag.
  Expected<int> ringPeer(const char *kind, int64_t count, DType type,
                         AxisMask axis, int step, int tag,
                         std::string_view what) const;
  Expected<ExchangePeers> exchangePeers(int64_t sendCount, int sendStep,
                                        int64_t recvCount, int recvStep,
                                        DType type, AxisMask axis,
                                        std::string_view what) const;

private:
  Mesh mesh_;
  int rank_;
  std::chrono::milliseconds ioTimeout_{std::chrono::minutes(30)};
};

/// For its lifetime, `comm`'s collectives wait up to its I/O timeout (never
/// less than they did): the scope of a collective that waits for the other
/// ranks' reading or writing.
class IoWait {
public:
  explicit IoWait(Communicator &comm) : comm_(comm), before_(comm.timeout()) {
    if (before_.count() > 0 && comm.ioTimeout() > before_)
      comm.setTimeout(comm.ioTimeout());
  }
  ~IoWait() {
    if (before_.count() > 0)
      comm_.setTimeout(before_);
  }
  IoWait(const IoWait &) = delete;
  IoWait &operator=(const IoWait &) = delete;

private:
  Communicator &comm_;
  std::chrono::milliseconds before_;
};

/// A world of one rank over `mesh` (whose axes must all have size 1):
/// collectives are copies. Single-rank programs use it, so their generated code
/// is the same as a sharded program's.
Expected<std::unique_ptr<Communicator>> makeLocalCommunicator(Mesh mesh = {});

/// The OpenMPI engine: initialises MPI if needed (joining the ranks at `meet`
/// when no MPI launcher started them), checks that the world has
/// mesh.worldSize() ranks (otherwise says how to launch), and builds one
/// sub-communicator per set of axes. A collective waits at most `timeout` for
/// the other ranks of its group; then a watchdog thread prints what it waited
/// for and ends the process with exit 1. Destroying the communicator finalizes MPI.
Expected<std::unique_ptr<Communicator>>
makeMpiCommunicator(Mesh mesh, std::chrono::milliseconds timeout,
                    const std::optional<Rendezvous> &meet = std::nullopt);

} // namespace dtrt

#endif // DTRT_COMM_H
