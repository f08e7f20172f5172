//===- PTXEmitter.h - GPU kernels of a planned module as PTX ----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_PTXEMITTER_H
#define DT_TARGET_PTXEMITTER_H

#include "dt/Conversion/GPUKernels.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace dt {

/// The CUDA toolkit whose libdevice the kernels link, or "" when none is
/// found ($CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, beside ptxas, /usr/local/cuda).
std::string findCudaToolkit();

/// The PTX (for `chip`, sm_90 by default) of the GPU kernels of a planned
/// module: one kernel per elementwise or data-movement op
/// (convert-dt-fused-to-gpu, dt/Conversion/GPUKernels.h), taken
/// through NVVM by MLIR's gpu pipeline, each thread taking `unroll`
/// elements at a time (convert-dt-fused-to-gpu's option). `planned` is not
/// changed. Needs nothing from CUDA: the NVPTX back end is LLVM's; ptxas
/// can check the result.
mlir::FailureOr<std::string>
emitKernelsPTX(mlir::ModuleOp planned, llvm::StringRef chip = "sm_90",
               int64_t unroll = kGpuUnroll,
               llvm::ArrayRef<MergedKernel> merged = {});

} // namespace dt

#endif // DT_TARGET_PTXEMITTER_H
