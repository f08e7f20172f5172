//===- PTXEmitter.cpp - GPU kernels of a planned module as PTX ------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The path TOOLCHAIN.md found to work with Debian's MLIR 19: the kernels'
// gpu.module gets an NVVM target (nvvm-attach-target), its scf, arith, math
// and gpu ops go to the NVVM and LLVM dialects (math through libdevice), and
// gpu-module-to-binary{format=isa} runs LLVM's NVPTX back end, leaving the
// PTX text in a gpu.binary.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/PTXEmitter.h"

#include "dt/Conversion/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

using namespace mlir;

/// The kernels link libdevice's math functions (expf, tanhf, ...).
std::string dt::findCudaToolkit() {
  SmallVector<std::string> candidates;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *v = std::getenv(var))
      candidates.push_back(v);
  if (llvm::ErrorOr<std::string> ptxas = llvm::sys::findProgramByName("ptxas"))
    candidates.push_back(
        llvm::sys::path::parent_path(llvm::sys::path::parent_path(*ptxas))
            .str());
  candidates.push_back("/usr/local/cuda");
  for (const std::string &dir : candidates)
    if (llvm::sys::fs::exists(dir + "/nvvm/libdevice/libdevice.10.bc"))
      return dir;
  return "";
}

FailureOr<std::string> dt::emitKernelsPTX(ModuleOp planned, StringRef chip,
                                          int64_t unroll,
                                          ArrayRef<MergedKernel> merged) {
  MLIRContext *ctx = planned.getContext();
  std::string toolkit = findCudaToolkit();
  if (toolkit.empty())
    return emitError(planned.getLoc())
               << "GPU kernels need the CUDA toolkit's libdevice "
                  "(nvvm/libdevice/libdevice.10.bc) for their math functions; "
                  "set CUDA_HOME to the toolkit (looked in $CUDA_HOME, "
                  "$CUDA_PATH, $CUDA_ROOT, beside ptxas and in /usr/local/cuda)",
           failure();
  DialectRegistry registry;
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadDialect<gpu::GPUDialect, NVVM::NVVMDialect>();

  OwningOpRef<ModuleOp> module = planned.clone();
  PassManager pm(ctx);
  ConvertFusedToGPUOptions options;
  options.unroll = unroll;
  pm.addPass(createConvertFusedToGPU(options));
  if (failed(pm.run(*module)))
    return failure();
  // The GPU plan's launches of several small kernels at once.
  if (!merged.empty())
    for (auto kernels : module->getOps<gpu::GPUModuleOp>())
      if (failed(mergeKernels(kernels, merged)))
        return failure();

  // Only the kernels go on: the host functions stay for the CPU path.
  OwningOpRef<ModuleOp> device = ModuleOp::create(planned.getLoc());
  (*device)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     UnitAttr::get(ctx));
  for (auto kernels : llvm::to_vector(module->getOps<gpu::GPUModuleOp>())) {
    kernels->remove();
    device->push_back(kernels);
  }

  PassManager nvvm(ctx);
  GpuNVVMAttachTargetOptions target;
  target.chip = chip.str();
  target.optLevel = 3;
  nvvm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &inGpu = nvvm.nest<gpu::GPUModuleOp>();
  inGpu.addPass(createConvertSCFToCFPass());
  inGpu.addPass(createConvertGpuOpsToNVVMOps());
  nvvm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = toolkit;
  nvvm.addPass(createGpuModuleToBinaryPass(binary));
  if (failed(nvvm.run(*device)))
    return failure();

  std::string ptx;
  for (auto binaryOp : device->getOps<gpu::BinaryOp>())
    for (Attribute object : binaryOp.getObjects())
      // The serializer ends the text with a NUL for the driver's loader.
      ptx += llvm::cast<gpu::ObjectAttr>(object)
                 .getObject()
                 .getValue()
                 .rtrim('\0')
                 .str();
  return ptx;
}
