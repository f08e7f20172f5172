//===- dtrt/checkpoint.h - Atomic, verified checkpoints ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A checkpoint is a directory `ROOT/step_00000200/` holding
//   tensors.bin    the bytes of every `param` and `state` buffer (the
//                  optimizer state and the `step` counter included), each at
//                  a 64-byte aligned offset, in manifest order;
//   manifest.json  the format version, the program's name, the run position
//                  (step, epoch, step within the epoch, seed, data-order
//                  seed, elapsed time) and per tensor its name, role, dtype,
//                  shape, offset, byte size and CRC32.
// That is everything that decides the rest of the run, so a resumed run
// continues bit for bit (docs/operations.md).
//
// A sharded program (format version 2) writes, instead of tensors.bin, one
// shard_RRRRR.bin per rank with the pieces of the tensors that rank is the
// writer of (one rank per piece; replicated pieces are written once), and
// shard_RRRRR.json with their offsets and CRCs; manifest.json then holds the
// mesh and, per tensor, its whole shape, its layout and its pieces. Rank 0
// writes manifest.json only after every rank has made its pieces durable,
// and publishes the directory by one rename: a job that loses a rank while
// checkpointing leaves no checkpoint rather than a partial one.
//
// Loading maps elements through the layouts, so a checkpoint loads into any
// mesh and ZeRO level of the same program (4 ranks to 2, or to 1, and back):
// each rank reads the pieces that hold its elements, checks their CRCs, and
// copies what it needs.
//
// Writing is atomic: the directory is assembled as ROOT/.tmp-step_00000200,
// every file and the directory are fsynced, and one rename publishes it. A
// directory without a readable manifest.json (or a .tmp-* leftover of a
// killed write) is not a checkpoint and is never picked by --resume auto.
// Reading verifies the program, every tensor's name, dtype and shape, the
// file size and every CRC before the run continues.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CHECKPOINT_H
#define DTRT_CHECKPOINT_H

#include "dtrt/arena.h"
#include "dtrt/comm.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtrt {

/// The versions of the checkpoint layout written and read here: programs of
/// one rank write version 1, sharded programs version 2.
inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr int kShardedCheckpointFormatVersion = 2;

/// Where a run stands: saved in every checkpoint beside the tensors.
struct TrainPosition {
  /// Optimizer steps taken (equal to the arena's `step` buffer).
  int64_t step = 0;
  /// The run's planned total steps.
  int64_t totalSteps = 0;
  /// The epoch the next step belongs to and the steps already taken in it.
  int64_t epoch = 0, epochStep = 0;
  int64_t stepsPerEpoch = 0;
  /// The train seed (initialisation and data order).
  uint64_t seed = 0;
  /// The size of the train source the data order was computed for.
  int64_t trainSamples = 0;
  /// Training time before this checkpoint, over all resumed runs.
  double elapsedSeconds = 0;
  /// The mesh it was written on (no axes: one rank).
  MeshSpec mesh;
};

/// A complete checkpoint on disk.
struct CheckpointRef {
  std::string path;
  int64_t step = 0;
};

/// "step_00000200".
std::string checkpointName(int64_t step);

/// Writes a checkpoint of the arena's param and state buffers at
/// `position.step` into `root` (created if needed), atomically. Refuses to
/// replace an existing checkpoint of the same step. Returns its path. In a
/// sharded program every rank calls it (it is collective over `comm`), with
/// its mesh coordinates.
Expected<std::string> writeCheckpoint(const std::string &root, Arena &arena,
                                      const TrainPosition &position,
                                      Communicator *comm = nullptr,
                                      const std::vector<int> &coords = {});

/// The complete checkpoints in `root`, oldest first (none if `root` does not
/// exist).
Expected<std::vector<CheckpointRef>> listCheckpoints(const std::string &root);

/// The `step_*` directories in `root` that are not complete checkpoints (no
/// readable manifest.json), with the step their names give; oldest first.
Expected<std::vector<CheckpointRef>>
listIncompleteCheckpoints(const std::string &root);

/// Verifies the checkpoint in `dir` against the arena's program and loads
/// this rank's shard of its tensors into the arena (the rank at `coords` of
/// the program's mesh; whatever mesh the checkpoint was written on). On error
/// the arena may be partly overwritten.
Expected<TrainPosition> loadCheckpoint(const std::string &dir, Arena &arena,
                                       const std::vector<int> &coords = {});

/// Whether every rank succeeded at `stage` (collective over `comm`): a rank
/// that failed returns its own error, the others name the rank that failed,
/// followed by `outcome` ("no checkpoint was written").
Status agreeAcrossRanks(Communicator &comm, const Status &mine,
                        const char *stage, const char *outcome);

/// Whether the rank at `coords` writes its piece of `b` to a file all ranks
/// share: the rank at coordinate 0 of every mesh axis the buffer is not
/// split over (one writer per piece), except on the pipeline axis for a
/// buffer one pipeline rank holds: that rank.
bool writesPiece(const BufferDesc &b, const std::vector<int> &coords,
                 int pipelineAxis);

/// Deletes all but the newest `keep` complete checkpoints (keep 0: none).
Status pruneCheckpoints(const std::string &root, int64_t keep);

/// Deletes `.tmp-*` leftovers of checkpoint writes that were killed.
Status removeCheckpointLeftovers(const std::string &root);

} // namespace dtrt

#endif // DTRT_CHECKPOINT_H
