//===- Passes.h - dt lowering passes ----------------------------*- C++ -*-===//
//
// The lowering passes and the `dt-lower-to-llvm` pipeline that runs them with
// the upstream conversions to the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#ifndef DT_CONVERSION_PASSES_H
#define DT_CONVERSION_PASSES_H

#include "dt/Conversion/GPUKernels.h" // kGpuUnroll, an option's default

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::arith {
class ArithDialect;
}
namespace mlir::func {
class FuncDialect;
}
namespace mlir::gpu {
class GPUDialect;
}
namespace mlir::linalg {
class LinalgDialect;
}
namespace mlir::LLVM {
class LLVMDialect;
}
namespace mlir::math {
class MathDialect;
}
namespace mlir::memref {
class MemRefDialect;
}
namespace mlir::scf {
class SCFDialect;
}
namespace mlir::vector {
class VectorDialect;
}

namespace dt {

#define GEN_PASS_DECL
#include "dt/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dt/Conversion/Passes.h.inc"

/// Adds convert-dt-to-kernels and dt-verify-arena: planned dt entry points to
/// loops and kernel calls whose every arena access was checked against the
/// plan; with `checked`, dt-check-arena adds the run-time checks of
/// dtc --checked.
void buildLowerToKernelsPipeline(mlir::OpPassManager &pm, bool checked = false);

/// Adds the passes from convert-dt-to-kernels output to the LLVM dialect:
/// linalg to loops, math approximations, and the upstream conversions to LLVM,
/// with memref arguments passed as bare pointers (entry points are `void
/// dt_name(char *arena)`), and dt-verify-arena on the result.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm);

/// Registers the `dt-lower-to-llvm` pipeline (the passes themselves are
/// registered by registerDTConversionPasses()).
void registerLowerToLLVMPipeline();

} // namespace dt

#endif // DT_CONVERSION_PASSES_H
