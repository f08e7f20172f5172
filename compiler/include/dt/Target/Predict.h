//===- Predict.h - What a step should take on this machine ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc --report` predicts an optimizer step of one rank before anything runs,
// by the cost model the running program's verdict uses (dtrt/roofline.h):
// every op that is a span of a trace at the roofline of the sgemm peak and
// the copy bandwidth (a product or attention that a run timed on its own
// sizes at that time), every collective's ring traffic at the all-reduce
// bandwidth, no overlap credited. The rates are what the emitted programs
// measured on this machine (dtrt/peaks_cache.h) for the threads and ranks a
// run of this program gets here; until one has run, there is no prediction,
// and the report says how to get one.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_PREDICT_H
#define DT_TARGET_PREDICT_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dt {

/// What a step is priced at.
struct MachineRates {
  double peakFlops = 0, memoryBytesPerS = 0;
  /// The all-reduce bus bandwidth; none for one rank, or not measured yet.
  std::optional<double> linkBytesPerS;
  /// Seconds a call of the kernel calls a run timed (dt::timedKernel).
  std::map<std::pair<std::string, std::vector<int64_t>>, double> kernelSeconds;
  /// The threads of each of `ranks` ranks on this machine, and the cache.
  int threads = 0, ranks = 0;
  std::string cachePath;
};

/// This machine's rates for `ranks` ranks sharing it, each with the threads
/// a run gets by default (the CPUs this process may use, divided among the
/// ranks); when none were measured, `missing` says what to do.
struct RatesLookup {
  std::optional<MachineRates> rates;
  std::string missing;
};
RatesLookup cachedRates(int ranks);

/// One optimizer step of the module's rank: its compute and, with a link
/// bandwidth, its communication (seconds); in a pipeline, pipeline rank 0's,
/// and its bubble, the rest of the step, waiting for the other stages.
struct StepPrediction {
  double compute = 0, comm = 0, bubble = 0;
  /// The pipeline's schedule, in words; empty without one.
  std::string pipeline;
  double seconds() const { return compute + comm + bubble; }
  /// Ops and collectives a step; of the ops, the kernel calls priced at
  /// their own measured time.
  int64_t ops = 0, collectives = 0, timedCalls = 0;
};
/// Fails with a reason (`why`) for programs the model does not cover:
/// programs compiled without spans (--no-spans: the op list it prices).
std::optional<StepPrediction> predictStep(mlir::ModuleOp module,
                                          const MachineRates &rates,
                                          std::string &why);

} // namespace dt

#endif // DT_TARGET_PREDICT_H
