//===- LowerToLLVM.cpp - the dt-lower-to-llvm pipeline --------------------===//
//
// After convert-dt-to-kernels the module holds loops over memref views (scf
// with vector and scalar arith/math, and linalg), and kernel calls; this
// pipeline takes it to the LLVM dialect with upstream conversions. Memref
// arguments use the bare-pointer convention, so an entry point is `void
// dt_name(char *arena)` in C. Both pipelines end with dt-verify-arena.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void dt::buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createApproximateMath());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // Second line of defence: constant arena offsets after the upstream
  // conversions (which fold offsets into GEPs) still lie in their buffers.
  pm.addPass(dt::createVerifyArena());
}

void dt::buildLowerToKernelsPipeline(OpPassManager &pm, bool checked) {
  pm.addPass(dt::createConvertDTToKernels());
  pm.addPass(dt::createVerifyArena());
  if (checked)
    pm.addPass(dt::createCheckArena());
}

void dt::registerLowerToLLVMPipeline() {
  PassPipelineRegistration<>(
      "dt-lower-to-llvm",
      "Lowers convert-dt-to-kernels output to the LLVM dialect",
      buildLowerToLLVMPipeline);
}
