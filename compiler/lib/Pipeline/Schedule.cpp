//===- Schedule.cpp - static pipeline schedules ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Pipeline/Schedule.h"
#include "dtrt/pipeline_timing.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace dt::pipeline;

llvm::StringRef dt::pipeline::toString(Kind kind) {
  switch (kind) {
  case Kind::GPipe:
    return "gpipe";
  case Kind::OneFOneB:
    return "1f1b";
  case Kind::Interleaved:
    return "interleaved";
  }
  llvm_unreachable("unknown schedule");
}

double Schedule::bubble() const {
  int64_t busy = 2 * microbatches * chunks;
  return slots ? double(slots - busy) / double(slots) : 0.0;
}

double Schedule::bubbleFormula() const {
  return double(ranks - 1) / double(chunks * microbatches + ranks - 1);
}

std::vector<int64_t> Schedule::peakInFlight() const {
  std::vector<int64_t> peaks;
  for (const std::vector<Action> &actions : perRank) {
    int64_t live = 0, peak = 0;
    for (const Action &a : actions) {
      live += a.forward ? 1 : -1;
      peak = std::max(peak, live);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

int64_t Schedule::peakInFlight(int64_t stage) const {
  int64_t live = 0, peak = 0;
  for (const Action &a : perRank[size_t(stage % ranks)])
    if (a.stage == stage) {
      live += a.forward ? 1 : -1;
      peak = std::max(peak, live);
    }
  return peak;
}

std::vector<double> Schedule::idleWith(const std::vector<double> &forward,
                                       const std::vector<double> &backward) const {
  return dtrt::idleFractions(dtrt::runPipeline(perRank, size_t(ranks * chunks),
                                               size_t(microbatches), forward,
                                               backward));
}

std::optional<Kind> dt::pipeline::parseKind(llvm::StringRef name) {
  for (Kind k : {Kind::GPipe, Kind::OneFOneB, Kind::Interleaved})
    if (name == toString(k))
      return k;
  return std::nullopt;
}

namespace {

/// Rank r's passes in order, slots not yet set.
std::vector<Action> rankOrder(Kind kind, int64_t p, int64_t m, int64_t v,
                              int64_t r) {
  std::vector<Action> order;
  auto pass = [&](bool forward, int64_t mb, int64_t chunk) {
    order.push_back({forward, mb, chunk * p + r, 0});
  };
  if (kind == Kind::GPipe) {
    for (int64_t mb = 0; mb < m; ++mb)
      pass(true, mb, 0);
    for (int64_t mb = 0; mb < m; ++mb)
      pass(false, mb, 0);
    return order;
  }
  // 1F1B, and its interleaved form over the m * v (micro-batch, chunk) passes
  // of each direction: the k-th runs chunk (k mod pv) / p (reversed going
  // backward) on micro-batch (k / pv) p + k mod p.
  int64_t total = m * v;
  auto chunkOf = [&](int64_t k, bool forward) {
    int64_t c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto microbatchOf = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
  int64_t warmup = kind == Kind::OneFOneB
                       ? std::min(p - r - 1, m)
                       : (m == p ? total
                                 : std::min((p - r - 1) * 2 + (v - 1) * p,
                                            total));
  for (int64_t k = 0; k < warmup; ++k)
    pass(true, microbatchOf(k), chunkOf(k, true));
  for (int64_t i = 0; i < total - warmup; ++i) {
    pass(true, microbatchOf(warmup + i), chunkOf(warmup + i, true));
    pass(false, microbatchOf(i), chunkOf(i, false));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    pass(false, microbatchOf(k), chunkOf(k, false));
  return order;
}

} // namespace

llvm::Expected<Schedule> dt::pipeline::buildSchedule(Kind kind, int64_t ranks,
                                                     int64_t microbatches,
                                                     int64_t chunks) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (ranks < 1 || microbatches < 1 || chunks < 1)
    return error("a pipeline needs at least one rank, micro-batch and chunk");
  if ((kind == Kind::Interleaved) != (chunks > 1))
    return error("only the interleaved schedule runs several chunks per rank");
  if (kind == Kind::Interleaved && microbatches % ranks != 0)
    return error(llvm::formatv("the interleaved schedule needs a number of "
                               "micro-batches that the {0} pipeline ranks "
                               "divide, not {1}",
                               ranks, microbatches));
  Schedule s;
  s.kind = kind;
  s.ranks = ranks;
  s.microbatches = microbatches;
  s.chunks = chunks;
  for (int64_t r = 0; r < ranks; ++r)
    s.perRank.push_back(rankOrder(kind, ranks, microbatches, chunks, r));

  // Run the orders: in each slot every rank starts its next pass if what it
  // needs finished in an earlier slot. Finish times are slot + 1; -1: not run.
  int64_t stages = ranks * chunks;
  std::vector<std::vector<int64_t>> doneF(
      size_t(stages), std::vector<int64_t>(size_t(microbatches), -1));
  std::vector<std::vector<int64_t>> doneB = doneF;
  auto finished = [](int64_t at, int64_t slot) { return at >= 0 && at <= slot; };
  std::vector<size_t> next(size_t(ranks), 0);
  size_t remaining = size_t(2 * microbatches * chunks * ranks);
  int64_t bound = 4 * (2 * microbatches * chunks + 2 * stages) + 8;
  for (int64_t slot = 0; remaining > 0; ++slot) {
    if (slot > bound)
      return error("internal error: the pipeline schedule deadlocks");
    for (int64_t r = 0; r < ranks; ++r) {
      if (next[size_t(r)] == s.perRank[size_t(r)].size())
        continue;
      Action &a = s.perRank[size_t(r)][next[size_t(r)]];
      size_t st = size_t(a.stage), mb = size_t(a.microbatch);
      bool ready =
          a.forward
              ? a.stage == 0 || finished(doneF[st - 1][mb], slot)
              : finished(doneF[st][mb], slot) &&
                    (a.stage == stages - 1 || finished(doneB[st + 1][mb], slot));
      if (!ready)
        continue;
      a.slot = slot;
      (a.forward ? doneF : doneB)[st][mb] = slot + 1;
      ++next[size_t(r)];
      --remaining;
      s.slots = slot + 1;
    }
  }
  return s;
}

std::string dt::pipeline::formatSchedule(const Schedule &s,
                                         llvm::StringRef axis) {
  auto label = [&](const Action &a) {
    std::string text = llvm::formatv("{0}{1}", a.forward ? "F" : "B",
                                     a.microbatch);
    if (s.chunks > 1)
      text += llvm::formatv(".{0}", a.stage / s.ranks).str();
    return text;
  };
  std::vector<std::vector<std::string>> cells(
      size_t(s.ranks), std::vector<std::string>(size_t(s.slots), "."));
  size_t width = 1;
  for (auto [r, actions] : llvm::enumerate(s.perRank))
    for (const Action &a : actions) {
      cells[r][size_t(a.slot)] = label(a);
      width = std::max(width, cells[r][size_t(a.slot)].size());
    }
  width = std::max(width, std::to_string(s.slots - 1).size());
  std::string rowLabel = (axis + "=" + llvm::Twine(s.ranks - 1)).str();
  auto pad = [](std::string text, size_t n) {
    return std::string(n > text.size() ? n - text.size() : 0, ' ') + text;
  };

  std::string out = llvm::formatv(
      "schedule: {0}, {1} rank{2} on axis '{3}'{4}, {5} micro-batch{6} per "
      "step; one slot per pass of one micro-batch through one stage\n",
      toString(s.kind), s.ranks, s.ranks == 1 ? "" : "s", axis,
      s.chunks > 1 ? llvm::formatv(" with {0} chunks each", s.chunks).str()
                   : std::string(),
      s.microbatches, s.microbatches == 1 ? "" : "es");
  out += pad("slot", rowLabel.size());
  for (int64_t t = 0; t < s.slots; ++t)
    out += " " + pad(std::to_string(t), width);
  out += "\n";
  for (int64_t r = 0; r < s.ranks; ++r) {
    out += pad((axis + "=" + llvm::Twine(r)).str(), rowLabel.size());
    for (const std::string &cell : cells[size_t(r)])
      out += " " + pad(cell, width);
    out += "\n";
  }
  out += llvm::formatv("bubble: {0:F1}% of {1} slots idle on each rank "
                       "((p - 1) / (v m + p - 1) = {2:F1}%)\n",
                       100.0 * s.bubble(), s.slots, 100.0 * s.bubbleFormula());
  out += "in flight: at most";
  for (auto [r, peak] : llvm::enumerate(s.peakInFlight()))
    out += llvm::formatv("{0} {1}={2}: {3}", r ? "," : "", axis, r, peak);
  out += " micro-batches of activations held\n";
  return out;
}
