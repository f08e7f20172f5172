//===- Report.h - What each rank's program costs ----------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dtc --report` states, from the planned program of one rank, the memory
// every rank holds (parameters, gradients, optimizer state, activations, the
// input and output buffers, the arena that holds them all) beside the whole
// model's, and every collective with the bytes each rank moves per optimizer
// step, and what a step should take on this machine (dt/Target/Predict.h).
// `--report=json` writes the same as JSON (docs/operations.md): tests and
// tools read the `ranks` list.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_REPORT_H
#define DT_TARGET_REPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace dt {

/// What the report's prediction needs of the job beyond the module.
struct ReportJob {
  /// The run's optimizer steps, when known before it opens its data.
  std::optional<int64_t> steps;
  /// Why they are not (epochs over a source whose size is known only then).
  std::string stepsUnknown;
  int64_t samplesPerStep = 0;
  /// Tokens of a sample, for token sources (0 otherwise).
  int64_t tokensPerSample = 0;
  /// Each deploy block's `price_per_hour` (per instance) and its hosts.
  struct Price {
    std::string target;
    double perHour = 0;
    int64_t hosts = 1;
  };
  std::vector<Price> prices;
};

/// Prints the report of a planned (and, on a mesh, partitioned) module: as
/// text, or as JSON when `json` is set; with `job`, the predicted step, the
/// throughput, the time to finish and the cost (dt/Target/Predict.h).
mlir::LogicalResult printReport(mlir::ModuleOp module, bool json,
                                llvm::raw_ostream &os,
                                const ReportJob *job = nullptr);

} // namespace dt

#endif // DT_TARGET_REPORT_H
