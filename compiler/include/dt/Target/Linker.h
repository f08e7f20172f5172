//===- Linker.h - links an object file with the runtime ---------*- C++ -*-===//
//
// Runs the system C++ driver to link generated code with libdtrt (which owns
// main), libdtkernels and their dependencies into an executable.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_LINKER_H
#define DT_TARGET_LINKER_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace dt {

/// Which build of the runtime libraries a program links.
enum class RuntimeFlavor {
  /// libdtrt.a and libdtkernels.a, for this machine's CPU.
  Native,
  /// Their AddressSanitizer and UBSan builds (libdtrt-checked.a,
  /// libdtkernels-checked.a), with the sanitizers' runtimes: dtc --checked.
  Checked,
  /// libdtkernels-portable.a, for any x86-64 CPU with AVX2 (x86-64-v3):
  /// packaged programs, which run on machines other than this one.
  Portable,
};

/// Links `object` into the executable `output`. `argv0` locates the runtime
/// libraries (`<dir of dtc>/../lib`). On failure, `error` says what went
/// wrong.
mlir::LogicalResult linkExecutable(llvm::StringRef object,
                                   llvm::StringRef output, const char *argv0,
                                   RuntimeFlavor flavor, std::string &error);

} // namespace dt

#endif // DT_TARGET_LINKER_H
