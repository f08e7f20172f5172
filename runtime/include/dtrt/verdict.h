//===- dtrt/verdict.h - Where a step's time goes, and why -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Every rank measures, per step, its step time, the part spent staging input,
// the part inside the program's collectives (waiting for the other ranks
// included) and, in a pipeline, the part idle between its passes. The ranks
// exchange these after every step (with the step times they exchange
// anyway), so every rank can split its step into parts that add up to it:
//
//   compute         what is left: the program's own work
//   input           staging micro-batches into the arena
//   communication   the time no rank could avoid in the collectives: the least
//                   any rank spent there (the last to arrive waits for nobody)
//   straggler wait  the rest of this rank's collective time: waiting for
//                   the last rank to arrive
//   bubble          a pipeline rank's idle time between passes
//
// The largest part names the bound. When ranks wait for one another, the rank
// that waits least is the one they wait for (it arrives last at every
// collective); comparing its compute and input with the others' says why.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_VERDICT_H
#define DTRT_VERDICT_H

#include "dtrt/comm.h"
#include "dtrt/manifest.h"
#include "dtrt/peaks_cache.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dtrt {

/// One rank's times, summed over the steps a verdict covers (seconds).
struct RankTimes {
  double step = 0, input = 0, comm = 0, bubble = 0;
};

/// What the compiler's cost model and the measured peaks say a step of this
/// rank should take (seconds).
struct PredictedStep {
  /// In a pipeline, `bubble` is the rest of the step, waiting for the other
  /// stages.
  double compute = 0, comm = 0, bubble = 0;
  double total() const { return compute + comm + bubble; }
};

struct Verdict {
  int64_t steps = 0;
  /// The parts of `rank`'s mean step; they add up to `step`.
  int rank = 0;
  double step = 0, compute = 0, input = 0, comm = 0, stragglerWait = 0,
         bubble = 0;
  /// "compute-bound", "communication-bound", "input-bound",
  /// "straggler-bound", "bubble-bound".
  std::string bound;
  /// The rank the others wait for (-1: none worth naming), how late it
  /// arrives at the collectives on average per step, and why.
  int straggler = -1;
  double lateness = 0;
  std::string why;
  std::optional<PredictedStep> predicted;
};

/// What one optimizer step of this rank should take, from the compiler's
/// counts and the measured peaks: each op of the step's entry points (the
/// manifest's spans) at the roofline, the slower of its FLOPs at `peakFlops`
/// and its bytes at `memoryBytesPerS`, a kernel call that was timed on its
/// own sizes at that time (`kernelSeconds`, dtrt/peaks.h); each collective's
/// ring traffic at `linkBytesPerS` (none for one rank). Overlap is not
/// credited: this is the step with every collective exposed. A pipeline's
/// step is pipeline rank 0's (the verdict's): each stage's passes, with the
/// messages they send over the link, run in the schedule's order
/// (dtrt/pipeline_timing.h), as `dtc --report` predicts it.
PredictedStep
predictStep(const Manifest &m, const Mesh &mesh, double peakFlops,
            double memoryBytesPerS, std::optional<double> linkBytesPerS,
            const std::map<KernelCall, double> &kernelSeconds = {});

/// The verdict on `steps` steps of the ranks' summed `times` (indexed by
/// rank), from `rank`'s point of view. `groups` (indexed by rank, numbered
/// from 0; empty: one group) says which ranks meet in collectives: a
/// pipeline's stages do not (each stage's ranks reduce among themselves), so
/// the last to arrive and the wait for it are found within each group.
Verdict judge(const std::vector<RankTimes> &times, int64_t steps, int rank,
              std::optional<PredictedStep> predicted = std::nullopt,
              const std::vector<int> &groups = {});

/// One line: "verdict (steps 1-100): communication-bound: 41 % of rank 0's
/// 12.3 ms step is communication (predicted 12 %); compute 45 %, ...".
std::string describe(const Verdict &v, int64_t firstStep);

/// The verdict as a record of timing.jsonl (docs/operations.md): its parts
/// in seconds, the bound, the straggler, the prediction and `describe`'s line.
nlohmann::ordered_json toJson(const Verdict &v, int64_t firstStep);

} // namespace dtrt

#endif // DTRT_VERDICT_H
