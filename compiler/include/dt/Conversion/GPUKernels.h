//===- GPUKernels.h - which planned ops become generated GPU kernels -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// convert-dt-fused-to-gpu generates one kernel per planned op that is
// elementwise or moves data (fused regions, transposes, splits and concats,
// slices and pads, sums over axes, iota, splat constants, the learning-rate
// schedule); libraries and kernels/cuda do the rest. The PTX emitter, the
// GPU plan (dt/Target/CudaPlan.h) and the tests that run kernels one by one
// must agree on which ops those are and what each kernel is called: this is
// where they do.
//
//===----------------------------------------------------------------------===//

#ifndef DT_CONVERSION_GPUKERNELS_H
#define DT_CONVERSION_GPUKERNELS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace dt {

class ScheduleOp;

/// Threads per block of every generated kernel's launch (the runtime's
/// KernelLibrary launches them so; docs/abi.md). A reduction's kernel sums
/// in workgroup memory of this many elements.
inline constexpr int64_t kGpuThreadsPerBlock = 256;

/// Whether the kernel of a reduction of `outputs` sums of `perOutput` terms
/// each gives every output a block (rather than a thread).
inline bool reducesByBlock(int64_t outputs, int64_t perOutput) {
  (void)outputs;
  return perOutput >= 32;
}

/// Whether convert-dt-fused-to-gpu makes a kernel of `op`.
bool isGeneratedKernelOp(mlir::Operation *op);

/// Calls `fn(op, name)` for every such op of every entry point, in order;
/// the kernel of the n-th in entry point `E` is called `E_k<n>`.
void forEachGeneratedKernel(
    mlir::ModuleOp module,
    llvm::function_ref<void(mlir::Operation *op, const std::string &name)> fn);

/// How many elements the kernel of `op` walks in its longest grid-stride
/// loop: a launch of that many threads has one element each.
int64_t launchElements(mlir::Operation *op);

/// The learning rate of schedule `s` at step `step` of `total` (both f64),
/// in f64: what the CPU lowering and the GPU kernel compute, as the
/// interpreter does.
mlir::Value buildScheduleRate(mlir::OpBuilder &b, mlir::Location loc,
                              ScheduleOp s, mlir::Value step,
                              mlir::Value total);

} // namespace dt

#endif // DT_CONVERSION_GPUKERNELS_H
