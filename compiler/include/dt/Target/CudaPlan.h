//===- CudaPlan.h - a planned program's GPU launch sequence -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// On a GPU an entry point is a fixed sequence of launches over the arena:
// generated kernels (convert-dt-fused-to-gpu), kernels/cuda's hand-written
// ones, cuBLAS products and device-to-device copies, every address a constant
// offset from the arena's base. The compiler writes that sequence as JSON
// (docs/abi.md, "The GPU plan"), the program carries it beside the kernels'
// PTX, and the runtime's CUDA executor replays it. Like a CUDA graph, which
// is what it will be captured as, it has no host decisions in it.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_CUDAPLAN_H
#define DT_TARGET_CUDAPLAN_H

#include "dt/Conversion/GPUKernels.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace dt {

/// A program's GPU code, or why it has none.
struct CudaCode {
  /// The generated kernels as PTX for sm_90 (empty when `unsupported`).
  std::string ptx;
  /// The launch sequence of every entry point, as JSON.
  std::string plan;
  /// Why the program cannot run on a GPU ("file:line:col: what"), or empty.
  std::string unsupported;
  /// The kernels of the plan's launches of several small kernels at once,
  /// which the PTX has beside their members'.
  std::vector<MergedKernel> merged;
};

/// The GPU launch sequence of a planned module's entry points, or the first
/// op it cannot launch (in `unsupported`), for generated kernels built with
/// `unroll` (which decides their vector groups: launchElements); with
/// `merge`, independent small kernels share launches (`merged`). Emits no
/// diagnostics.
CudaCode buildCudaPlan(mlir::ModuleOp planned, int64_t unroll = kGpuUnroll,
                       bool merge = true);

/// buildCudaPlan plus the kernels' PTX (dt/Target/PTXEmitter.h, `unroll`
/// elements a thread at a time); a failure of either is a reason in
/// `unsupported`, not an error: the program still runs on the CPU.
CudaCode buildCudaCode(mlir::ModuleOp planned, int64_t unroll = kGpuUnroll,
                       bool merge = true);

} // namespace dt

#endif // DT_TARGET_CUDAPLAN_H
