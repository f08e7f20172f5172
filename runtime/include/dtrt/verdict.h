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
// that waits least in a step is the one they waited for (it arrived last);
// the rank last in most steps of a window, and in at least half, is the
// straggler, and comparing its compute and input with the others' says why.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_VERDICT_H
#define DTRT_VERDICT_H

#include "dtrt/comm.h"
#include "dtrt/manifest.h"
#include "dtrt/peaks_cache.h"

#include <map>
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

/// Who the other ranks of a group waited for at one step's collectives: the
/// rank that spent least time there (it arrived last), and how long the
/// others spent there beyond it, on average.
struct LastArrival {
  int rank = -1;
  double lateness = 0;
};

/// What the steps of a verdict's window say one by one, which their sums
/// cannot: who arrived last at each step's collectives, and the time no rank
/// avoided there (the least any rank of a group spent in them, step by step:
/// a rank stalled once waits least in that step only).
struct Arrivals {
  /// At most kKept of the late arrivals (one per step and group whose wait
  /// is above noise: 5 % of the group's median step, and 0.1 ms), for the
  /// rank's median lateness: every one while there are no more, then a
  /// uniform sample of them all (reservoir sampling, the same on every
  /// run), so that a whole run's verdict holds bounded memory.
  static constexpr size_t kKept = 4096;
  std::vector<LastArrival> last;
  /// Late arrivals by rank, all of them.
  std::map<int, int64_t> lateSteps;
  /// Per group (numbered as judge()'s `groups`), the least collective time of
  /// its ranks, summed over the steps.
  std::vector<double> leastComm;

  /// Adds one step: the ranks' times in it (indexed by rank).
  void add(const std::vector<RankTimes> &step, const std::vector<int> &groups);
  void clear() {
    last.clear();
    lateSteps.clear();
    leastComm.clear();
    seen_ = 0;
  }

private:
  void keep(const LastArrival &a);
  /// Late arrivals offered to `last` so far.
  int64_t seen_ = 0;
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
  /// arrives at the collectives (the median over the steps it arrived last;
  /// without per-step arrivals, the mean over all steps), in how many of the
  /// steps it did, and why.
  int straggler = -1;
  double lateness = 0;
  int64_t lateSteps = 0;
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
/// `arrivals`, the same steps one by one, split the collective time by the
/// steps themselves and name the straggler by them: the rank that arrived
/// last in most of them, and in at least half, so that one long stall of a
/// rank (the machine holding it up once) does not make it the straggler of
/// a window. Without them, the sums decide: the rank the others waited for
/// longest on average.
Verdict judge(const std::vector<RankTimes> &times, int64_t steps, int rank,
              std::optional<PredictedStep> predicted = std::nullopt,
              const std::vector<int> &groups = {},
              const Arrivals *arrivals = nullptr);

/// One line: "verdict (steps 1-100): communication-bound: rank 0's 12.3 ms
/// step is compute 45 %, communication 41 %, ...; rank 3 arrives 1.40 ms
/// late at the collectives of 97 of 100 steps (its compute takes 1.6x the
/// others')".
std::string describe(const Verdict &v, int64_t firstStep);

/// The verdict as a record of timing.jsonl (docs/operations.md): its parts
/// in seconds, the bound, the straggler, the prediction and `describe`'s line.
nlohmann::ordered_json toJson(const Verdict &v, int64_t firstStep);

} // namespace dtrt

#endif // DTRT_VERDICT_H
