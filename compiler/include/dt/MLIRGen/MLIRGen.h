//===- MLIRGen.h - checked job to the dt dialect ----------------*- C++ -*-===//
//
// MLIRGen turns a Job that Sema accepted into a dt module, the global view of
// the training step before differentiation:
//
//   - a `dt.global param` per parameter (with its initialiser) and a `dt.global
//   input`
//     per data field the loss reads (`in/train.x`, `in/eval.y`, ...);
//   - `func.func @loss() -> tensor<f32>`: the loss over one micro-batch of the
//   train
//     source, which dt-autodiff differentiates;
//   - `func.func @eval_step()`, when the job has an eval source: the loss over
//   one eval
//     batch into `out/eval_loss`, and for classifiers the correct count into
//     `out/eval_correct`;
//   - the recipe as module attributes (`dt.optimizer`, `dt.schedule`,
//   `dt.clip`,
//     `dt.accumulation`) and the run's description for the manifest (`dt.job`).
//
// The computation comes from Sema's tracer (Trace.h); MLIRGen only maps each
// primitive op to dt ops. Features the code generator does not have yet are
// rejected here with a located error.
//
//===----------------------------------------------------------------------===//

#ifndef DT_MLIRGEN_MLIRGEN_H
#define DT_MLIRGEN_MLIRGEN_H

#include "dt/Sema/Job.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace dt {

/// Builds the dt module of `job`; errors are reported through the context's
/// diagnostic handler at source locations, and null is returned.
mlir::OwningOpRef<mlir::ModuleOp>
mlirGen(mlir::MLIRContext &context, const Job &job, llvm::StringRef sourcePath);

} // namespace dt

#endif // DT_MLIRGEN_MLIRGEN_H
