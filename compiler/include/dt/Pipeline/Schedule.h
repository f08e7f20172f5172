//===- Schedule.h - static pipeline schedules -------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Design note. A pipeline schedule is the order in which each rank of the
// pipeline axis runs the forward and backward passes of its stages over the
// micro-batches of one optimizer step. It is static: the stages, the
// micro-batch count and the schedule kind are constants of the program, so the
// compiler computes it, prints it (`dtc --emit=schedule`), costs it (its
// bubble, the activations each stage holds) and, once pipelines are generated,
// emits each rank's sends, receives and passes in this order.
//
// Each rank's order is the published one (GPipe: every forward, then every
// backward; 1F1B as in PipeDream-Flush and Megatron-LM; interleaved 1F1B with
// `chunks` model chunks per rank, Megatron-LM's virtual stages). Time slots
// come from running those orders against their dependencies (a stage's forward
// needs the previous stage's, its backward the next stage's and its own
// forward), one slot per pass, forward and backward alike.
//
//===----------------------------------------------------------------------===//

#ifndef DT_PIPELINE_SCHEDULE_H
#define DT_PIPELINE_SCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dt::pipeline {

enum class Kind { GPipe, OneFOneB, Interleaved };

/// `gpipe`, `1f1b`, `interleaved`.
llvm::StringRef toString(Kind kind);

/// One pass of one micro-batch through one (virtual) stage.
struct Action {
  bool forward = true;
  int64_t microbatch = 0;
  /// The virtual stage, chunk * ranks + rank: the model's stages in order.
  int64_t stage = 0;
  /// When it runs.
  int64_t slot = 0;
};

struct Schedule {
  Kind kind = Kind::OneFOneB;
  int64_t ranks = 1, microbatches = 1, chunks = 1;
  /// Each rank's actions in the order it runs them.
  std::vector<std::vector<Action>> perRank;
  /// Slots from the first pass to the last.
  int64_t slots = 0;

  /// The fraction of rank-slots with nothing to do.
  double bubble() const;
  /// The published formula, (p - 1) / (v m + p - 1).
  double bubbleFormula() const;
  /// Per rank, the most micro-batches whose forward has run and backward has
  /// not: the activations the rank holds at once, in micro-batches of one
  /// stage.
  std::vector<int64_t> peakInFlight() const;
  /// The most micro-batches of (virtual) stage `stage` in flight at once on
  /// its rank: the stash slots its activations need.
  int64_t peakInFlight(int64_t stage) const;
  /// Per rank, the idle fraction of its step when the forward of stage s
  /// takes `forward[s]` and its backward `backward[s]` and messages take no
  /// time: the ranks' orders run against the passes' dependencies, each pass
  /// as soon as its inputs exist. Equal stages give bubble(); a slower stage
  /// makes its neighbours wait. (The emitted program makes the same
  /// prediction from its measured pass times, dtrt::scheduleIdle.)
  std::vector<double> idleWith(const std::vector<double> &forward,
                               const std::vector<double> &backward) const;
};

/// Parses `gpipe`, `1f1b` or `interleaved`.
std::optional<Kind> parseKind(llvm::StringRef name);

/// The schedule of `kind` for `ranks` pipeline ranks, `microbatches` per step
/// and `chunks` stages per rank (1 unless interleaved). Interleaving needs
/// chunks >= 2 and a micro-batch count that the ranks divide.
llvm::Expected<Schedule> buildSchedule(Kind kind, int64_t ranks,
                                       int64_t microbatches, int64_t chunks);

/// The schedule as a table, a row per rank and a column per slot
/// (`F3` forward of micro-batch 3, `B3` its backward, `F3.1` in chunk 1 when
/// interleaved, `.` idle), with its bubble and in-flight micro-batches.
/// `axis` names the pipeline axis in the row labels.
std::string formatSchedule(const Schedule &schedule, llvm::StringRef axis);

} // namespace dt::pipeline

#endif // DT_PIPELINE_SCHEDULE_H
