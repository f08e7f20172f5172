//===- dtrt/pipeline.h - Running a pipeline rank's schedule -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A pipelined program has, instead of dt_grad_step, a forward and a backward
// entry point per virtual stage, and the manifest's `pipeline` lists each
// pipeline rank's passes in the schedule's order (docs/abi.md, "Pipelines").
// The runner plays this rank's list for one optimizer step: before a pass it
// receives what the neighbouring stage sent (activations from the previous
// stage, gradients from the next), after it it sends its own; a forward's
// stash (what the same micro-batch's backward reads) is a ring in the arena
// with a slot per micro-batch the schedule keeps in flight: the runner writes
// the micro-batch's slot number into the stage's slot index before its
// forward and its backward, and the entry points address that slot. Nothing
// is copied.
// Sends do not wait for the receiver, so a rank busy with another
// micro-batch never holds its neighbour up and no order of passes that the
// schedule allows can deadlock.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_PIPELINE_H
#define DTRT_PIPELINE_H

#include "dtrt/abi.h"
#include "dtrt/arena.h"
#include "dtrt/comm.h"
#include "dtrt/error.h"

#include <functional>
#include <map>
#include <vector>

namespace dtrt {

/// The schedule's idle fraction, (p - 1) / (v m + p - 1) for p pipeline
/// ranks of v virtual stages each and m micro-batches.
double scheduleBubble(const PipelineSpec &spec);

/// Before MPI starts: lets Open MPI's shared-memory transport send a
/// pipeline's messages (up to 4 MiB) whole when they are posted. Larger ones
/// move in fragments, each only while the sender is inside MPI, and a stage
/// that posts a send and goes on computing would hold its neighbour up for a
/// whole pass. So would a whole message that finds no free fragment in the
/// sender's shared-memory segment: the segment grows to hold them when
/// /dev/shm has room for the `localRanks` ranks of this machine (else a
/// warning says so). A user's own settings of these parameters win.
void sendPipelineMessagesEagerly(const Manifest &manifest, int localRanks);

/// Per pipeline rank, the idle fraction of `spec`'s schedule when the
/// forward of virtual stage s takes `forward[s]` and its backward
/// `backward[s]` (any unit) and messages take no time: each rank runs its
/// passes in the manifest's order, each as soon as its inputs exist (a
/// forward after the previous stage's forward of the same micro-batch, a
/// backward after the next stage's backward and its own forward). With
/// equal stages it is scheduleBubble's figure; unequal stages add the time
/// the faster ranks wait for the slowest.
std::vector<double> scheduleIdle(const PipelineSpec &spec,
                                 const std::vector<double> &forward,
                                 const std::vector<double> &backward);

class PipelineRunner {
public:
  /// The runner of the rank at `coords` (its mesh coordinates).
  static Expected<PipelineRunner> create(const Program &program, Arena &arena,
                                         Communicator &comm,
                                         const std::vector<int> &coords);

  /// Runs this rank's passes of one step. `stageBatch(mb)` stages
  /// micro-batch `mb` into the input buffers (before each forward that reads
  /// the batch). Returns the sum of the micro-batches' losses on the ranks of
  /// the last stage, 0 elsewhere.
  Expected<double> step(const std::function<void(int64_t)> &stageBatch);

  /// Whether the program evaluates through the stages.
  bool evaluates() const;
  /// Runs this rank's stages' evaluation forward over the eval batch staged
  /// in `in/eval.*`, passing activations between the stages; the last
  /// stage's ranks then hold the batch's `out/eval_*`.
  Status evalBatch();

  /// This pipeline rank's @apply_step.
  Program::Entry apply() const { return apply_; }
  /// Whether this rank runs the last stage (and so knows the loss).
  bool holdsLoss() const { return holdsLoss_; }
  int pipelineRank() const { return ppRank_; }
  /// Seconds spent inside passes, and in whole steps, since the start: the
  /// rank's idle fraction is 1 - busy / total.
  double busySeconds() const { return busy_; }
  double stepSeconds() const { return total_; }
  /// Of the idle time: waiting for messages.
  double waitSeconds() const { return wait_; }
  /// The bytes of this rank's stash rings (in the arena).
  size_t stashBytes() const;
  /// Per virtual stage, the seconds this rank has spent in its forward and
  /// backward passes since the start (0 for other ranks' stages). Every stage
  /// runs as many passes of each, so the sums weigh the stages as their
  /// means do.
  const std::vector<double> &forwardSeconds() const { return forwardTime_; }
  const std::vector<double> &backwardSeconds() const { return backwardTime_; }

private:
  struct Stage {
    Program::Entry forward = nullptr, backward = nullptr, eval = nullptr;
    bool readsBatch = false;
    std::vector<const BufferDesc *> send, recv, gradSend, gradRecv, stash,
        evalSend, evalRecv;
    /// The i64 the entry points read to find their stash slot.
    const BufferDesc *slotIndex = nullptr;
    std::vector<bool> slotUsed;
    /// Micro-batch -> its stash slot, while its backward is pending.
    std::map<int64_t, int64_t> slotOf;
  };

  /// Tells stage `st`'s entry points to use stash slot `slot`.
  void useSlot(Stage &st, int64_t slot);
  /// Runs a stage's entry point, counting its time as busy and as the
  /// stage's.
  Status run(Program::Entry entry, const char *what, double &stageSeconds);

  Status pass(const PipelineAction &a,
              const std::function<void(int64_t)> &stageBatch, double &loss);
  int tag(bool forward, int64_t stage, int64_t microbatch) const;

  Arena *arena_ = nullptr;
  Communicator *comm_ = nullptr;
  const PipelineSpec *spec_ = nullptr;
  AxisMask axis_ = 0;
  int ppRank_ = 0;
  bool holdsLoss_ = false;
  const BufferDesc *lossBuf_ = nullptr;
  /// `in/micro_index` (programs with dropout): set to a forward's micro-batch
  /// before it runs, so that its masks are the ones a run without a pipeline
  /// draws; its backward takes the forward's value from the stash.
  const BufferDesc *microBuf_ = nullptr;
  Program::Entry apply_ = nullptr;
  std::vector<Stage> stages_;
  double busy_ = 0, total_ = 0, wait_ = 0;
  std::vector<double> forwardTime_, backwardTime_;
};

} // namespace dtrt

#endif // DTRT_PIPELINE_H
