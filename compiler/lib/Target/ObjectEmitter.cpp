//===- ObjectEmitter.cpp - LLVM dialect to a native object file -----------===//
//
// The last compiler stage, in-process: MLIR's LLVM-dialect module is translated
// to LLVM IR, the manifest is added as a constant C string, LLVM's -O3 pipeline
// runs with the target machine's cost model (so the fused loops are vectorised
// for this CPU), and the code generator writes a position-independent object
// file (Debian links PIE).
//
//===----------------------------------------------------------------------===//

#include "dt/Target/ObjectEmitter.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;

namespace {

std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const dt::CodegenOptions &options, std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::string triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string cpu = options.cpu, features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures f;
    for (auto &feature : llvm::sys::getHostCPUFeatures())
      f.AddFeature(feature.first(), feature.second);
    features = f.getString();
  }
  llvm::TargetOptions targetOptions;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

/// `dt_entries`: every entry point (`void dt_NAME(char *arena)`) by name, and
/// `dt_entry_count`, so that the runtime finds the variable set of entry
/// points a program has (a pipeline's stages) without naming each symbol.
void addEntryTable(llvm::Module &m) {
  llvm::LLVMContext &ctx = m.getContext();
  auto *ptr = llvm::PointerType::getUnqual(ctx);
  auto *entryType = llvm::StructType::get(ctx, {ptr, ptr});
  std::vector<llvm::Constant *> entries;
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || !f.getName().starts_with("dt_") ||
        f.arg_size() != 1 || !f.getReturnType()->isVoidTy())
      continue;
    llvm::Constant *name = llvm::ConstantDataArray::getString(ctx, f.getName());
    auto *nameVar = new llvm::GlobalVariable(
        m, name->getType(), /*isConstant=*/true,
        llvm::GlobalValue::PrivateLinkage, name, "dt_entry_name");
    entries.push_back(llvm::ConstantStruct::get(entryType, {nameVar, &f}));
  }
  auto *tableType = llvm::ArrayType::get(entryType, entries.size());
  new llvm::GlobalVariable(m, tableType, /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(tableType, entries),
                           "dt_entries");
  auto *i64 = llvm::Type::getInt64Ty(ctx);
  new llvm::GlobalVariable(m, i64, /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i64, entries.size()),
                           "dt_entry_count");
}

/// Translates, adds the manifest, and optimises; null (with an error emitted)
/// on failure.
std::unique_ptr<llvm::Module>
buildOptimizedModule(ModuleOp module, llvm::StringRef manifest,
                     const dt::CodegenOptions &options, llvm::TargetMachine &tm,
                     llvm::LLVMContext &llvmContext) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "dt");
  if (!llvmModule) {
    module.emitError("translation to LLVM IR failed");
    return nullptr;
  }
  llvmModule->setDataLayout(tm.createDataLayout());
  llvmModule->setTargetTriple(tm.getTargetTriple().str());

  llvm::Constant *text =
      llvm::ConstantDataArray::getString(llvmContext, manifest, true);
  new llvm::GlobalVariable(*llvmModule, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text,
                           "dt_manifest");
  // The GPU code (dt/Target/CudaPlan.h): the kernels' PTX and the launch
  // sequence, empty strings in a program without it.
  for (auto [name, value] :
       {std::pair{"dt_cuda_image", llvm::StringRef(options.cudaImage)},
        std::pair{"dt_cuda_plan", llvm::StringRef(options.cudaPlan)}}) {
    llvm::Constant *bytes =
        llvm::ConstantDataArray::getString(llvmContext, value, true);
    new llvm::GlobalVariable(*llvmModule, bytes->getType(), /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage, bytes, name);
  }
  addEntryTable(*llvmModule);

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // Loops are vectorised by dt's own lowering (explicit vectors with a scalar
  // remainder): LLVM's loop vectoriser and unroller would only re-vectorise
  // remainders and multiply compile time.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = false;
  tuning.LoopUnrolling = false;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3)
      .run(*llvmModule, mam);
  return llvmModule;
}

} // namespace

/// The optimised LLVM module of `module` and the target machine it is for.
static LogicalResult prepare(ModuleOp module, llvm::StringRef manifest,
                             const dt::CodegenOptions &options,
                             llvm::LLVMContext &llvmContext,
                             std::unique_ptr<llvm::TargetMachine> &tm,
                             std::unique_ptr<llvm::Module> &llvmModule) {
  std::string error;
  tm = createTargetMachine(options, error);
  if (!tm)
    return module.emitError("no code generator for this machine: ") << error;
  llvmModule = buildOptimizedModule(module, manifest, options, *tm, llvmContext);
  return success(llvmModule != nullptr);
}

LogicalResult dt::emitLLVMIR(ModuleOp module, llvm::StringRef manifest,
                             const CodegenOptions &options,
                             llvm::raw_ostream &os) {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> llvmModule;
  if (failed(prepare(module, manifest, options, llvmContext, tm, llvmModule)))
    return failure();
  llvmModule->print(os, nullptr);
  return success();
}

LogicalResult dt::emitObjectFile(ModuleOp module, llvm::StringRef manifest,
                                 const CodegenOptions &options,
                                 llvm::StringRef path) {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> llvmModule;
  if (failed(prepare(module, manifest, options, llvmContext, tm, llvmModule)))
    return failure();

  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return module.emitError("cannot write '") << path << "': " << ec.message();
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, out, nullptr,
                              llvm::CodeGenFileType::ObjectFile))
    return module.emitError("this target cannot emit object files");
  codegen.run(*llvmModule);
  out.flush();
  return success();
}
