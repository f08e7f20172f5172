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
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Transforms/Passes.h"
#include "dtrt/peaks_cache.h"
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

std::optional<StepPrediction> predictStep(ModuleOp module,
                                          const MachineRates &rates,
                                          std::string &why) {
  if (module->hasAttr(names::kPipelineAttr)) {
    why = "pipelined programs are not predicted yet (the schedule's overlap "
          "of stages is not modelled)";
    return std::nullopt;
  }
  FailureOr<MeshInfo> mesh = MeshInfo::get(module);
  if (failed(mesh)) {
    why = "the module has no valid mesh";
    return std::nullopt;
  }
  int64_t micro = 1;
  if (auto a = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
    micro = a.getInt();
  StepPrediction p;
  bool spans = false;
  for (auto fn : module.getOps<func::FuncOp>()) {
    StringRef entry = fn.getSymName();
    int64_t calls = dtrt::entryCallsPerStep(
        std::string_view(entry.data(), entry.size()), micro);
    if (fn.isExternal() || !calls)
      continue;
    for (Operation &op : fn.getBody().front()) {
      if (!op.hasAttr(names::kSpanAttr))
        continue;
      spans = true;
      if (const char *kind = collectiveKind(&op)) {
        double group = 1;
        ArrayRef<int16_t> axes = collectiveAxes(&op).value();
        for (int16_t a : axes)
          group *= double(mesh->size(a));
        auto in = cast<RankedTensorType>(op.getOperand(0).getType());
        double bytes = double(in.getNumElements()) *
                       double((in.getElementTypeBitWidth() + 7) / 8);
        p.collectives += calls;
        if (rates.linkBytesPerS)
          p.comm += double(calls) * dtrt::ringTrafficBytes(kind, group, bytes) /
                    *rates.linkBytesPerS;
        continue;
      }
      Cost c = costOf(&op);
      p.ops += calls;
      std::optional<TimedKernel> kernel = timedKernel(&op);
      auto timed =
          kernel ? rates.kernelSeconds.find({kernel->kernel, kernel->args})
                 : rates.kernelSeconds.end();
      if (timed != rates.kernelSeconds.end()) {
        p.timedCalls += calls;
        p.compute += double(calls) * timed->second;
        continue;
      }
      p.compute += double(calls) * dtrt::rooflineSeconds(c.flops, c.bytes,
                                                         rates.peakFlops,
                                                         rates.memoryBytesPerS);
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
