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
// step. `--report=json` writes the same as JSON (docs/operations.md): tests
// and tools read the `ranks` list.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_REPORT_H
#define DT_TARGET_REPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace dt {

/// Prints the report of a planned (and, on a mesh, partitioned) module: as
/// text, or as JSON when `json` is set.
mlir::LogicalResult printReport(mlir::ModuleOp module, bool json,
                                llvm::raw_ostream &os);

} // namespace dt

#endif // DT_TARGET_REPORT_H
