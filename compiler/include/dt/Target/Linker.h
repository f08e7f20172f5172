//===- Linker.h - links an object file with the runtime ----------*- C++
//-*-===//
//
// Runs the system C++ driver to link generated code with libdtrt (which owns
// main), libdtkernels and their dependencies into an executable.
//
//===----------------------------------------------------------------------------===//

#ifndef DT_TARGET_LINKER_H
#define DT_TARGET_LINKER_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace dt {

/// Links `object` into the executable `output`. `argv0` locates the runtime
/// libraries (`<dir of dtc>/../lib`); `checked` takes their AddressSanitizer
/// and UBSan builds (libdtrt-checked.a, libdtkernels-checked.a) and links with
/// the sanitizers' runtimes. On failure, `error` says what went wrong.
mlir::LogicalResult linkExecutable(llvm::StringRef object,
                                   llvm::StringRef output, const char *argv0,
                                   bool checked, std::string &error);

} // namespace dt

#endif // DT_TARGET_LINKER_H
