//===- Predict.cpp - What a step should take on this machine --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// See dt/Target/Predict.h.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/Predict.h"
#include "dt/Analysis/Cost.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Pipeline/Schedule.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"
#include "dtrt/peaks_cache.h"
#include "dtrt/pipeline_timing.h"
#include "dtrt/roofline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;

namespace dt {

RatesLookup cachedRates(int ranks) {
  RatesLookup out;
  // The threads a run of `ranks` ranks here gets by default.
  int threads = std::max(1, dtrt::availableCpus() / std::max(1, ranks));
  std::string dir = dtrt::peaksCacheDir();
  std::string path = dir.empty() ? "" : dir + "/peaks.json";
  std::string cpu = dtrt::cpuModel();
  nlohmann::json cache =
      path.empty() ? nlohmann::json::object() : dtrt::readPeaksCache(path);
  std::optional<dtrt::CachedPeaks> peaks =
      dtrt::findCachedPeaks(cache, cpu, threads, ranks);
  if (!peaks) {
    out.missing = llvm::formatv(
        "no peaks measured on this machine ({0}) for {1} thread{2} x {3} "
        "rank{4} yet: a run of the program measures them when it starts and "
        "caches them in {5}; run it once (a few steps will do) and ask again",
        cpu, threads, threads == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s",
        path.empty() ? "$DT_CACHE_DIR/peaks.json" : path);
    return out;
  }
  MachineRates r;
  r.peakFlops = peaks->gemmFlops;
  r.memoryBytesPerS = peaks->copyBytesPerS;
  r.threads = threads;
  r.ranks = ranks;
  r.cachePath = path;
  if (ranks > 1)
    r.linkBytesPerS = dtrt::findCachedLink(cache, cpu, ranks);
  for (const auto &[call, seconds] :
       dtrt::findCachedKernels(cache, cpu, threads, ranks))
    r.kernelSeconds[{call.kernel, call.args}] = seconds;
  out.rates = r;
  return out;
}

namespace {

/// One call of an entry point, priced: its ops (and the messages it sends)
/// and collectives.
struct Priced {
  dtrt::PassCost cost;
  int64_t ops = 0, collectives = 0, timedCalls = 0;
};

} // namespace

/// Prices one call of `fn`; sets `spans` when it has any.
static Priced price(func::FuncOp fn, const MeshInfo &mesh,
                    const MachineRates &rates, bool &spans) {
  Priced q;
  for (Operation &op : fn.getBody().front()) {
    if (!op.hasAttr(names::kSpanAttr))
      continue;
    spans = true;
    if (const char *kind = collectiveKind(&op)) {
      double group = 1;
      ArrayRef<int16_t> axes = collectiveAxes(&op).value();
      for (int16_t a : axes)
        group *= double(mesh.size(a));
      auto in = cast<RankedTensorType>(op.getOperand(0).getType());
      double bytes = double(in.getNumElements()) *
                     double((in.getElementTypeBitWidth() + 7) / 8);
      ++q.collectives;
      if (rates.linkBytesPerS)
        q.cost.comm +=
            dtrt::ringTrafficBytes(kind, group, bytes) / *rates.linkBytesPerS;
      continue;
    }
    ++q.ops;
    std::optional<TimedKernel> kernel = timedKernel(&op);
    auto timed = kernel
                     ? rates.kernelSeconds.find({kernel->kernel, kernel->args})
                     : rates.kernelSeconds.end();
    if (timed != rates.kernelSeconds.end()) {
      ++q.timedCalls;
      q.cost.compute += timed->second;
      continue;
    }
    Cost c = costOf(&op);
    q.cost.compute += dtrt::rooflineSeconds(c.flops, c.bytes, rates.peakFlops,
                                            rates.memoryBytesPerS);
  }
  // A pipeline pass's messages to its neighbour stage, over the link.
  if (auto sends = fn->getAttrOfType<ArrayAttr>("dt.pipe_send");
      sends && rates.linkBytesPerS)
    for (auto name : sends.getAsValueRange<StringAttr>())
      if (GlobalOp g = lookupGlobal(fn, name)) {
        auto t = cast<RankedTensorType>(g.getType());
        q.cost.comm += double(t.getNumElements()) *
                       double((t.getElementTypeBitWidth() + 7) / 8) /
                       *rates.linkBytesPerS;
      }
  return q;
}

static void add(StepPrediction &p, const Priced &q, int64_t calls) {
  p.compute += double(calls) * q.cost.compute;
  p.comm += double(calls) * q.cost.comm;
  p.ops += calls * q.ops;
  p.collectives += calls * q.collectives;
  p.timedCalls += calls * q.timedCalls;
}

/// A pipeline's step as pipeline rank 0 (the verdict's) sees it: each
/// stage's passes priced once, run in the schedule's order
/// (dtrt/pipeline_timing.h); the rest of the step is its bubble.
static LogicalResult predictPipeline(ModuleOp module, const MeshInfo &mesh,
                                     const MachineRates &rates,
                                     StepPrediction &p, bool &spans,
                                     std::string &why) {
  FailureOr<std::optional<PipelineInfo>> info = PipelineInfo::get(module);
  if (failed(info) || !*info) {
    why = "the module's pipeline is malformed";
    return failure();
  }
  FailureOr<pipeline::Schedule> schedule = buildSchedule(module, **info);
  if (failed(schedule)) {
    why = "the module's pipeline schedule cannot be built";
    return failure();
  }
  size_t stages = size_t((*info)->numStages()), ranks = size_t((*info)->ranks);
  std::vector<Priced> forward(stages), backward(stages), apply(ranks);
  for (size_t s = 0; s < stages; ++s)
    for (auto [prefix, passes] : {std::pair{"pipe_fwd_", &forward},
                                  std::pair{"pipe_bwd_", &backward}}) {
      auto fn = module.lookupSymbol<func::FuncOp>((prefix + Twine(s)).str());
      if (!fn) {
        why = llvm::formatv("the module lacks @{0}{1}", prefix, s).str();
        return failure();
      }
      (*passes)[s] = price(fn, mesh, rates, spans);
    }
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() && fn.getSymName().starts_with("apply_step")) {
      int64_t r = pipelineRankOf(fn);
      if (r >= 0 && size_t(r) < ranks)
        apply[size_t(r)] = price(fn, mesh, rates, spans);
    }
  auto costs = [](const std::vector<Priced> &priced) {
    std::vector<dtrt::PassCost> out;
    for (const Priced &q : priced)
      out.push_back(q.cost);
    return out;
  };
  dtrt::PipelineRankStep step = dtrt::predictPipelineRank(
      schedule->perRank, stages, size_t(schedule->microbatches), costs(forward),
      costs(backward), costs(apply), 0);
  for (const pipeline::Action &a : schedule->perRank[0])
    add(p, (a.forward ? forward : backward)[size_t(a.stage)], 1);
  add(p, apply[0], 1);
  p.compute = step.compute;
  p.comm = step.comm;
  p.bubble = step.bubble;
  p.pipeline = llvm::formatv("{0}, {1} stage{2} x {3} micro-batches, as "
                             "pipeline rank 0 runs it",
                             (*info)->schedule, stages, stages == 1 ? "" : "s",
                             schedule->microbatches)
                   .str();
  return success();
}

std::optional<StepPrediction>
predictStep(ModuleOp module, const MachineRates &rates, std::string &why) {
  FailureOr<MeshInfo> mesh = MeshInfo::get(module);
  if (failed(mesh)) {
    why = "the module has no valid mesh";
    return std::nullopt;
  }
  StepPrediction p;
  bool spans = false;
  if (module->hasAttr(names::kPipelineAttr)) {
    if (failed(predictPipeline(module, *mesh, rates, p, spans, why)))
      return std::nullopt;
  } else {
    int64_t micro = 1;
    if (auto a = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
      micro = a.getInt();
    for (auto fn : module.getOps<func::FuncOp>()) {
      StringRef entry = fn.getSymName();
      int64_t calls = dtrt::entryCallsPerStep(
          std::string_view(entry.data(), entry.size()), micro);
      if (!fn.isExternal() && calls)
        add(p, price(fn, *mesh, rates, spans), calls);
    }
  }
  if (!spans) {
    why = "the program was compiled without spans (--no-spans), the op list "
          "the prediction prices";
    return std::nullopt;
  }
  return p;
}

} // namespace dt
