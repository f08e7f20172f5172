//===- DTOps.h - dt dialect operations --------------------------*- C++ -*-===//
//
// The operations, enums and interfaces of the dt dialect, generated from
// DTOps.td and DTInterfaces.td, plus small helpers shared by their
// implementations and the passes.
//
//===----------------------------------------------------------------------===//

#ifndef DT_DIALECT_DT_IR_DTOPS_H
#define DT_DIALECT_DT_IR_DTOPS_H

#include "dt/Dialect/DT/IR/DTDialect.h"
#include "dt/Dialect/DT/IR/ShardingRule.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dt/Dialect/DT/IR/DTInterfaces.h.inc"
#include "dt/Dialect/DT/IR/DTOpsEnums.h.inc"

#define GET_OP_CLASSES
#include "dt/Dialect/DT/IR/DTOps.h.inc"

namespace dt {

/// The static shape of a ranked tensor value.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

/// Whether `from` broadcasts to `to` under NumPy rules (right-aligned, 1 or
/// equal).
bool isBroadcastable(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);

/// A splat constant of `type` holding `value` (converted to the element type).
mlir::Value createSplat(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type, double value);

/// The global a symbol names, or null.
GlobalOp lookupGlobal(mlir::Operation *from, llvm::StringRef name);

} // namespace dt

#endif // DT_DIALECT_DT_IR_DTOPS_H
