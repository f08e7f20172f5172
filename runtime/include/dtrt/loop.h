//===- dtrt/loop.h - The training loop --------------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One optimizer step is: for each of `accumulation` micro-batches, stage it
// into in/train.* and call dt_grad_step, reading out/loss; write
// in/total_steps; call dt_apply_step, which advances the arena's `step`
// counter; read out/lr and out/grad_norm. The data position is derived from
// that counter (epoch = step / steps_per_epoch, the batch within the epoch =
// step % steps_per_epoch), so a run restored from a checkpoint continues
// exactly where the checkpoint was taken.
//
// Between steps the loop logs (progress line, metrics record), evaluates,
// checkpoints, and honours stop requests (dtrt/signals.h). At the end it
// evaluates once more and writes a final checkpoint.
//
// The ranks of a sharded program run the same loop in step: after every step
// they exchange their step times and whether a stop signal reached them, so
// that the slowest rank is known (metrics) and a SIGTERM delivered to any one
// rank stops all of them at the same step, with one checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_LOOP_H
#define DTRT_LOOP_H

#include "dtrt/abi.h"
#include "dtrt/arena.h"
#include "dtrt/checkpoint.h"
#include "dtrt/comm.h"
#include "dtrt/config.h"
#include "dtrt/data/batch.h"
#include "dtrt/metrics.h"
#include "dtrt/pipeline.h"
#include "dtrt/tensorboard.h"
#include "dtrt/trace.h"
#include "dtrt/verdict.h"

#include <optional>

namespace dtrt {

/// Everything the loop works with; set up by runProgram.
struct TrainSetup {
  const Program *program = nullptr;
  const RunConfig *config = nullptr;
  Arena *arena = nullptr;
  const DataSource *trainSource = nullptr;
  BatchStager *trainStager = nullptr;
  /// Null when there is no evaluation.
  const DataSource *evalSource = nullptr;
  BatchStager *evalStager = nullptr;
  /// Null when no log directory is set (and on every rank but the first).
  MetricsLog *metrics = nullptr;
  /// The first rank's timing.jsonl in the log directory (every rank's
  /// times, the verdicts, memory); null when `metrics` is.
  MetricsLog *timing = nullptr;
  /// TensorBoard: the job's scalars (the first rank's) and this rank's
  /// timings; null without --tensorboard.
  EventWriter *tensorboard = nullptr, *tensorboardRank = nullptr;
  /// The device's peak FLOP/s in the program's precision (measured on the
  /// host, a table's on a GPU), when known: what MFU divides by.
  std::optional<double> peakFlops;
  /// What a step should take (dtrt/verdict.h), when the peaks are known.
  std::optional<PredictedStep> predicted;
  /// --trace: this rank's tracer; null without.
  Tracer *tracer = nullptr;
  /// The collectives between the ranks; null for a program of one rank.
  Communicator *comm = nullptr;
  /// This rank's mesh coordinates (empty for one rank).
  std::vector<int> coords;
  /// A pipelined program's runner of this rank's passes (null otherwise).
  PipelineRunner *pipeline = nullptr;
  int64_t stepsPerEpoch = 0;
  int64_t totalSteps = 0;
  /// Training time spent by the runs this one resumes.
  double elapsedBefore = 0.0;
  /// The step of the checkpoint this run resumed from, if any.
  std::optional<int64_t> resumedStep;
};

/// Trains from the arena's current step to the end, or to a stop request.
/// Returns the process exit code (0, or 130/143 after a stop) or an error.
Expected<int> runTraining(const TrainSetup &setup);

} // namespace dtrt

#endif // DTRT_LOOP_H
