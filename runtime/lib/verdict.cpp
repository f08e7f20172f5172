//===- verdict.cpp - Where a step's time goes, and why --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/verdict.h"

#include "dtrt/pipeline_timing.h"
#include "dtrt/roofline.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <utility>

namespace dtrt {

namespace {

/// A straggler is named when the others wait for it at least this share of
/// the step, and at least this long (below it, timer noise).
constexpr double kStragglerShare = 0.05, kStragglerSeconds = 1e-4;

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// "1.6x the others'" or, when the others spend nothing there, how much more.
std::string comparedWith(double mine, double others) {
  if (others > 1e-9)
    return fmt::format("{:.1f}x the others'", mine / others);
  return fmt::format("{:.2f} ms more than the others'", (mine - others) * 1e3);
}

/// One call of each entry point, priced: its ops, the collectives it issues
/// and, in a pipeline, the messages it sends.
class Pricer {
public:
  Pricer(const Manifest &m, const Mesh &mesh, double peakFlops,
         double memoryBytesPerS, std::optional<double> linkBytesPerS,
         const std::map<KernelCall, double> &kernelSeconds)
      : m_(m), link_(linkBytesPerS) {
    for (const SpanDesc &s : m.spans) {
      if (s.collective >= 0)
        continue;
      auto timed =
          s.kernel ? kernelSeconds.find(*s.kernel) : kernelSeconds.end();
      costs_[s.entry].compute +=
          timed != kernelSeconds.end()
              ? timed->second
              : rooflineSeconds(s.flops, s.bytes, peakFlops, memoryBytesPerS);
    }
    if (!link_)
      return;
    for (const CollectiveDesc &c : m.collectives) {
      AxisMask axes = 0;
      for (const std::string &name : c.axes)
        for (size_t a = 0; a < mesh.axisCount(); ++a)
          if (mesh.axisName(a) == name)
            axes |= AxisMask(1) << a;
      costs_[c.entry].comm +=
          ringTrafficBytes(c.kind, double(mesh.groupSize(axes)),
                           double(c.bytes)) /
          *link_;
    }
  }

  /// Entry points that ran once a step or more, and what a call costs.
  const std::map<std::string, PassCost> &entries() const { return costs_; }

  /// A pipeline pass (`function` as the manifest's stages name it, "dt_"
  /// first) and the messages it sends.
  PassCost pass(const std::string &function,
                const std::vector<std::string> &sends) const {
    auto it =
        costs_.find(function.substr(function.rfind("dt_", 0) == 0 ? 3 : 0));
    PassCost c = it == costs_.end() ? PassCost{} : it->second;
    if (link_)
      for (const std::string &name : sends)
        if (const BufferDesc *b = m_.find(name))
          c.comm += double(b->bytes) / *link_;
    return c;
  }

private:
  const Manifest &m_;
  std::optional<double> link_;
  std::map<std::string, PassCost> costs_;
};

} // namespace

PredictedStep predictStep(const Manifest &m, const Mesh &mesh, double peakFlops,
                          double memoryBytesPerS,
                          std::optional<double> linkBytesPerS,
                          const std::map<KernelCall, double> &kernelSeconds) {
  Pricer pricer(m, mesh, peakFlops, memoryBytesPerS, linkBytesPerS,
                kernelSeconds);
  PredictedStep p;
  if (!m.pipeline) {
    for (const auto &[entry, cost] : pricer.entries()) {
      double calls = double(m.callsPerStep(entry));
      p.compute += calls * cost.compute;
      p.comm += calls * cost.comm;
    }
    return p;
  }
  // A pipeline's step as pipeline rank 0 (the verdict's) sees it.
  const PipelineSpec &spec = *m.pipeline;
  std::vector<PassCost> forward, backward, apply;
  for (const PipelineStage &s : spec.stages) {
    forward.push_back(pricer.pass(s.forward, s.send));
    backward.push_back(pricer.pass(s.backward, s.gradSend));
  }
  for (const std::string &a : spec.apply)
    apply.push_back(pricer.pass(a, {}));
  PipelineRankStep step = predictPipelineRank(spec.actions, spec.stages.size(),
                                              size_t(spec.microbatches),
                                              forward, backward, apply, 0);
  p.compute = step.compute;
  p.comm = step.comm;
  p.bubble = step.bubble;
  return p;
}

Verdict judge(const std::vector<RankTimes> &times, int64_t steps, int rank,
              std::optional<PredictedStep> predicted,
              const std::vector<int> &groups, const Arrivals *arrivals) {
  Verdict v;
  v.steps = steps;
  v.rank = rank;
  v.predicted = predicted;
  if (steps <= 0 || times.empty() || rank < 0 || size_t(rank) >= times.size())
    return v;
  double n = double(steps);
  std::vector<RankTimes> mean;
  for (const RankTimes &t : times)
    mean.push_back({t.step / n, t.input / n, t.comm / n, t.bubble / n});
  auto computeOf = [](const RankTimes &t) {
    return std::max(0.0, t.step - t.input - t.comm - t.bubble);
  };

  // Ranks meet in the collectives of their group only.
  auto groupOf = [&](size_t r) {
    return groups.size() == mean.size() ? groups[r] : 0;
  };
  // In each group, the collective time no rank avoided: the last to arrive
  // waits least.
  auto lastOf = [&](int group) {
    int last = -1;
    for (size_t r = 0; r < mean.size(); ++r)
      if (groupOf(r) == group &&
          (last < 0 || mean[r].comm < mean[size_t(last)].comm))
        last = int(r);
    return last;
  };
  const RankTimes &me = mean[size_t(rank)];
  int myGroup = groupOf(size_t(rank));
  double transfer =
      arrivals && size_t(myGroup) < arrivals->leastComm.size()
          ? std::min(me.comm, arrivals->leastComm[size_t(myGroup)] / n)
          : mean[size_t(lastOf(myGroup))].comm;
  v.step = me.step;
  v.input = me.input;
  v.bubble = me.bubble;
  v.comm = transfer;
  v.stragglerWait = me.comm - transfer;
  v.compute = computeOf(me);

  const std::pair<const char *, double> parts[] = {
      {"compute-bound", v.compute},
      {"communication-bound", v.comm},
      {"input-bound", v.input},
      {"straggler-bound", v.stragglerWait},
      {"bubble-bound", v.bubble}};
  v.bound = std::max_element(std::begin(parts), std::end(parts),
                             [](const auto &a, const auto &b) {
                               return a.second < b.second;
                             })
                ->first;

  // How long the others of each group wait for its last rank at the
  // collectives, per step; the group that waits longest says whether any
  // straggler is worth naming.
  int last = -1;
  double waited = 0;
  for (size_t g = 0; g < mean.size(); ++g) {
    int candidate = lastOf(int(g));
    if (candidate < 0)
      continue;
    double arrived = mean[size_t(candidate)].comm, wait = 0;
    size_t others = 0;
    for (size_t r = 0; r < mean.size(); ++r)
      if (groupOf(r) == int(g) && int(r) != candidate) {
        wait += mean[r].comm - arrived;
        ++others;
      }
    if (!others)
      continue;
    wait /= double(others);
    if (last < 0 || wait > waited) {
      last = candidate;
      waited = wait;
    }
  }
  if (last < 0 || waited < kStragglerSeconds ||
      waited < kStragglerShare * me.step)
    return v;
  double lateness = waited;
  int64_t lateSteps = steps;
  if (arrivals) {
    // By the steps: the rank last in most of them (the longer median
    // lateness breaking a tie), named only when that is at least half.
    std::map<int, std::vector<double>> late;
    for (const LastArrival &a : arrivals->last)
      late[a.rank].push_back(a.lateness);
    auto medianOf = [&](int r) {
      auto it = late.find(r);
      return it == late.end() ? 0.0 : median(it->second);
    };
    int best = -1;
    for (const auto &[r, n] : arrivals->lateSteps) {
      int64_t bestSteps = best < 0 ? 0 : arrivals->lateSteps.at(best);
      if (best < 0 || n > bestSteps ||
          (n == bestSteps && medianOf(r) > medianOf(best)))
        best = r;
    }
    if (best < 0 || arrivals->lateSteps.at(best) * 2 < steps)
      return v;
    last = best;
    lateness = medianOf(best);
    lateSteps = arrivals->lateSteps.at(best);
  }
  v.straggler = last;
  v.lateness = lateness;
  v.lateSteps = lateSteps;
  std::vector<double> inputs, computes;
  for (size_t r = 0; r < mean.size(); ++r)
    if (groupOf(r) == groupOf(size_t(last)) && int(r) != last) {
      inputs.push_back(mean[r].input);
      computes.push_back(computeOf(mean[r]));
    }
  const RankTimes &s = mean[size_t(last)];
  double extraInput = s.input - median(inputs),
         extraCompute = computeOf(s) - median(computes);
  v.why =
      extraInput > extraCompute
          ? "its input staging takes " + comparedWith(s.input, median(inputs))
          : "its compute takes " + comparedWith(computeOf(s), median(computes));
  return v;
}

void Arrivals::add(const std::vector<RankTimes> &step,
                   const std::vector<int> &groups) {
  auto groupOf = [&](size_t r) {
    return groups.size() == step.size() ? groups[r] : 0;
  };
  int count = 0;
  for (size_t r = 0; r < step.size(); ++r)
    count = std::max(count, groupOf(r) + 1);
  if (leastComm.size() < size_t(count))
    leastComm.resize(size_t(count), 0.0);
  std::vector<double> steps;
  for (int g = 0; g < count; ++g) {
    int lastRank = -1;
    steps.clear();
    for (size_t r = 0; r < step.size(); ++r)
      if (groupOf(r) == g) {
        steps.push_back(step[r].step);
        if (lastRank < 0 || step[r].comm < step[size_t(lastRank)].comm)
          lastRank = int(r);
      }
    if (lastRank < 0)
      continue;
    double least = step[size_t(lastRank)].comm;
    leastComm[size_t(g)] += least;
    if (steps.size() < 2)
      continue;
    double wait = 0;
    for (size_t r = 0; r < step.size(); ++r)
      if (groupOf(r) == g && int(r) != lastRank)
        wait += step[r].comm - least;
    wait /= double(steps.size() - 1);
    if (wait >= kStragglerSeconds && wait >= kStragglerShare * median(steps)) {
      ++lateSteps[lastRank];
      keep({lastRank, wait});
    }
  }
}

void Arrivals::keep(const LastArrival &a) {
  int64_t seen = seen_++;
  if (last.size() < kKept) {
    last.push_back(a);
    return;
  }
  // Algorithm R: the n-th (from 0) replaces a kept one with probability
  // kKept / (n + 1), at an index drawn by SplitMix64 from n: a fixed
  // sequence, so a rerun keeps the same sample.
  uint64_t z = uint64_t(seen) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  uint64_t j = z % uint64_t(seen + 1);
  if (j < kKept)
    last[size_t(j)] = a;
}

std::string describe(const Verdict &v, int64_t firstStep) {
  if (v.steps <= 0 || v.step <= 0)
    return "";
  auto share = [&](double part) { return 100.0 * part / v.step; };
  std::string predicted;
  if (v.predicted) {
    double total = v.predicted->total();
    if (total > 0)
      predicted = fmt::format(
          "; predicted {:.3g} ms a step (compute {:.0f} %, communication "
          "{:.0f} %{}), measured {:.3g}x that",
          total * 1e3, 100.0 * v.predicted->compute / total,
          100.0 * v.predicted->comm / total,
          v.predicted->bubble > 0
              ? fmt::format(", pipeline bubble {:.0f} %",
                            100.0 * v.predicted->bubble / total)
              : "",
          v.step / total);
  }
  std::string text = fmt::format(
      "verdict (steps {}-{}): {}: rank {}'s {:.3g} ms step is compute {:.0f} "
      "%, communication {:.0f} %, straggler wait {:.0f} %, input {:.0f} %",
      firstStep + 1, firstStep + v.steps, v.bound, v.rank, v.step * 1e3,
      share(v.compute), share(v.comm), share(v.stragglerWait), share(v.input));
  if (v.bubble > 0)
    text += fmt::format(", pipeline bubble {:.0f} %", share(v.bubble));
  text += predicted;
  if (v.straggler >= 0)
    text += fmt::format(
        "; rank {} arrives {:.2f} ms late at the collectives of {} ({})",
        v.straggler, v.lateness * 1e3,
        v.lateSteps >= v.steps
            ? std::string("every step")
            : fmt::format("{} of {} steps", v.lateSteps, v.steps),
        v.why);
  return text;
}

nlohmann::ordered_json toJson(const Verdict &v, int64_t firstStep) {
  nlohmann::ordered_json j = {
      {"first_step", firstStep + 1},
      {"steps", v.steps},
      {"rank", v.rank},
      {"bound", v.bound},
      {"step_s", v.step},
      {"compute_s", v.compute},
      {"comm_s", v.comm},
      {"straggler_wait_s", v.stragglerWait},
      {"input_s", v.input},
      {"bubble_s", v.bubble},
  };
  if (v.straggler >= 0) {
    j["straggler"] = v.straggler;
    j["lateness_s"] = v.lateness;
    j["late_steps"] = v.lateSteps;
    j["why"] = v.why;
  }
  if (v.predicted) {
    j["predicted_compute_s"] = v.predicted->compute;
    j["predicted_comm_s"] = v.predicted->comm;
    j["predicted_bubble_s"] = v.predicted->bubble;
  }
  j["text"] = describe(v, firstStep);
  return j;
}

} // namespace dtrt
