//===- ObjectEmitter.h - LLVM dialect to a native object file ---*- C++ -*-===//
//
// Translates a module in the LLVM dialect to LLVM IR, embeds the manifest as
// the `dt_manifest` symbol, optimises at -O3 for the target CPU and writes an
// object file, all in-process.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_OBJECTEMITTER_H
#define DT_TARGET_OBJECTEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace dt {

struct CodegenOptions {
  /// The CPU to generate code for; "native" means the host's CPU and features.
  std::string cpu = "native";
  /// The program's GPU kernels (PTX) and launch sequence (JSON), or "" and
  /// the JSON {"unsupported": why} (dt/Target/CudaPlan.h).
  std::string cudaImage, cudaPlan;
};

/// Translates, embeds `manifest` and optimises; prints the LLVM IR to `os`.
mlir::LogicalResult emitLLVMIR(mlir::ModuleOp module, llvm::StringRef manifest,
                               const CodegenOptions &options,
                               llvm::raw_ostream &os);

/// Translates, embeds `manifest`, optimises and writes an object file to
/// `path`.
mlir::LogicalResult emitObjectFile(mlir::ModuleOp module,
                                   llvm::StringRef manifest,
                                   const CodegenOptions &options,
                                   llvm::StringRef path);

} // namespace dt

#endif // DT_TARGET_OBJECTEMITTER_H
