//===- dtrt/pipeline_timing.h - A schedule run against pass times -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// How long a pipeline's step takes when each stage's forward and backward
// pass take given times: every rank runs its passes in the schedule's order,
// each as soon as the rank is free and its input exists (a forward the
// previous stage's forward of the same micro-batch, a backward the next
// stage's backward, or the last stage's own forward), then its optimizer
// step. Shared by the compiler (`dtc --report`'s prediction, `--emit=schedule`'s
// idle time with unequal stages) and the runtime (the verdict's predicted
// step and bubble, the idle time its measured pass times imply), so that they
// agree.
//
// `Action` is any type with `forward`, `microbatch` and `stage` (the virtual
// stage) members: the compiler's dt::pipeline::Action, the manifest's
// dtrt::PipelineAction.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_PIPELINE_TIMING_H
#define DTRT_PIPELINE_TIMING_H

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dtrt {

/// When each rank's passes end, and how long they ran.
struct PipelineTimes {
  /// Per rank: when its last pass ends, and the seconds its passes took.
  std::vector<double> end, busy;
  /// When the last pass of any rank ends.
  double makespan = 0;
};

/// Runs the ranks' passes (`perRank[r]`, in order) against the stages'
/// `forward[s]` and `backward[s]` seconds. The schedule must be valid (every
/// order can make progress), as the compiler builds them.
template <typename Action>
PipelineTimes runPipeline(const std::vector<std::vector<Action>> &perRank,
                          size_t stages, size_t microbatches,
                          const std::vector<double> &forward,
                          const std::vector<double> &backward) {
  size_t ranks = perRank.size();
  // When each pass ends (negative: not yet run).
  std::vector<double> fwdEnd(stages * microbatches, -1),
      bwdEnd(stages * microbatches, -1);
  PipelineTimes t{std::vector<double>(ranks, 0), std::vector<double>(ranks, 0),
                  0};
  std::vector<size_t> next(ranks, 0);
  // Each round runs every rank's next passes whose inputs exist; a valid
  // schedule always has one, so at most (passes) rounds.
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < ranks; ++r)
      for (; next[r] < perRank[r].size(); ++next[r]) {
        const Action &a = perRank[r][next[r]];
        size_t s = size_t(a.stage), at = s * microbatches + size_t(a.microbatch);
        double ready = a.forward ? (s == 0 ? 0 : fwdEnd[at - microbatches])
                       : fwdEnd[at] < 0    ? -1
                       : s + 1 == stages   ? fwdEnd[at]
                                           : bwdEnd[at + microbatches];
        if (ready < 0)
          break;
        double cost = a.forward ? forward[s] : backward[s];
        t.end[r] = std::max(t.end[r], ready) + cost;
        (a.forward ? fwdEnd : bwdEnd)[at] = t.end[r];
        t.busy[r] += cost;
        progress = true;
      }
  }
  for (double e : t.end)
    t.makespan = std::max(t.makespan, e);
  return t;
}

/// Per rank, the fraction of the passes' span it spends idle.
inline std::vector<double> idleFractions(const PipelineTimes &t) {
  std::vector<double> idle;
  for (double b : t.busy)
    idle.push_back(t.makespan > 0 ? 1 - b / t.makespan : 0);
  return idle;
}

/// A pass's (or an optimizer step's) predicted seconds: its ops and the
/// messages and collectives it waits for.
struct PassCost {
  double compute = 0, comm = 0;
  double total() const { return compute + comm; }
};

/// One pipeline rank's predicted step: its compute and communication, and the
/// bubble, the rest of the step, in which it waits for other stages.
struct PipelineRankStep {
  double compute = 0, comm = 0, bubble = 0;
};

/// Rank `rank`'s step when stage s's passes cost `forward[s]` and
/// `backward[s]` and rank r's optimizer step `apply[r]`: the step ends when
/// the last rank has run its passes and its optimizer step.
template <typename Action>
PipelineRankStep
predictPipelineRank(const std::vector<std::vector<Action>> &perRank,
                    size_t stages, size_t microbatches,
                    const std::vector<PassCost> &forward,
                    const std::vector<PassCost> &backward,
                    const std::vector<PassCost> &apply, size_t rank) {
  std::vector<double> f, b;
  for (const PassCost &c : forward)
    f.push_back(c.total());
  for (const PassCost &c : backward)
    b.push_back(c.total());
  PipelineTimes t = runPipeline(perRank, stages, microbatches, f, b);
  double step = 0;
  for (size_t r = 0; r < perRank.size(); ++r)
    step = std::max(step, t.end[r] + apply[r].total());
  PipelineRankStep p;
  for (const Action &a : perRank[rank]) {
    const PassCost &c = (a.forward ? forward : backward)[size_t(a.stage)];
    p.compute += c.compute;
    p.comm += c.comm;
  }
  p.compute += apply[rank].compute;
  p.comm += apply[rank].comm;
  p.bubble = std::max(0.0, step - p.compute - p.comm);
  return p;
}

} // namespace dtrt

#endif // DTRT_PIPELINE_TIMING_H
