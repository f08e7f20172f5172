//===- KernelFootprint.h - the bytes each kernel call touches ---*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Generated code calls the kernels of kernels/include/dtk/kernels.h with
// pointers into the arena and sizes as integers. This table states, for each
// kernel, how many bytes it may read or write through each pointer argument as
// a function of those sizes, exactly as the kernels' contracts say. The arena
// verifier (dt-verify-arena) checks every call against the memory plan with
// it, and checked programs (dtc --checked) check the same spans at run time.
// A kernel added to kernels.h without a row here cannot be called: the
// verifier rejects the call.
//
//===----------------------------------------------------------------------===//

#ifndef DT_CONVERSION_KERNELFOOTPRINT_H
#define DT_CONVERSION_KERNELFOOTPRINT_H

#include "mlir/IR/ValueRange.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dt {

/// The bytes a call to `kernel` may touch through each of its pointer
/// arguments, in argument order. `args[i]` is argument i's value when it is an
/// integer constant and std::nullopt otherwise (pointers, unknown values).
/// Fails, saying why in `why`, for an unknown kernel, a wrong argument count, a
/// size that is not a constant, or a footprint that overflows 64 bits.
mlir::FailureOr<llvm::SmallVector<int64_t>>
kernelFootprint(llvm::StringRef kernel,
                llvm::ArrayRef<std::optional<int64_t>> args, std::string &why);

/// kernelFootprint of a call with operands `args`: integer constants (arith
/// or llvm) are read, pointers and other values are unknown.
mlir::FailureOr<llvm::SmallVector<int64_t>>
kernelFootprint(llvm::StringRef kernel, mlir::ValueRange args,
                std::string &why);

/// Whether `name` is a kernel of kernels/include/dtk/kernels.h.
bool isKernel(llvm::StringRef name);

} // namespace dt

#endif // DT_CONVERSION_KERNELFOOTPRINT_H
