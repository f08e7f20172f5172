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

namespace dt {
/// The sizes of a 2-D convolution (dt.conv2d and its gradients): input
/// [n, c, h, w], weight [o, c / groups, kh, kw], result [n, o, oh, ow].
struct Conv2dShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
  int64_t stride[2], padding[2], dilation[2], groups;
  /// The output size along one spatial dimension (0: height, 1: width), or
  /// a value below 1 when the window does not fit.
  int64_t outputSize(int dim) const;
};

/// How dt.dropout's kernels find a local element's global index g (its
/// index in the optimizer step's batch): the local tensor is walked as
/// nested runs, outermost first, run r of runs[r].first elements whose
/// indices step by runs[r].second (a dimension joins its inner neighbour's
/// run when that one is whole, so only split dimensions start runs); the
/// first element's index is micro * elements + sum of firsts[i] *
/// strides[i].
struct DropoutIndexing {
  llvm::SmallVector<std::pair<int64_t, int64_t>, 4> runs;
  llvm::SmallVector<int64_t, 4> strides;
  int64_t elements = 0;
};
} // namespace dt

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

/// A run of a sum's dimensions that it reduces, or keeps, of `size` elements.
struct ReductionRun {
  bool reduced;
  int64_t size;
};

/// A sum of `shape` over `axes` as runs of reduced and kept dimensions; a
/// dimension of one joins the run before it (a leading one, the run after).
/// [reduced, kept, reduced] is a batch norm's statistics over N, H and W
/// around C.
llvm::SmallVector<ReductionRun, 4> reductionRuns(llvm::ArrayRef<int64_t> shape,
                                                 llvm::ArrayRef<int64_t> axes);

/// Whether the runs reduce the leading and the trailing dimensions around
/// kept ones.
inline bool reducesAround(llvm::ArrayRef<ReductionRun> runs) {
  return runs.size() == 3 && runs[0].reduced;
}

/// A splat constant of `type` holding `value` (converted to the element type).
mlir::Value createSplat(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::RankedTensorType type, double value);

/// The global a symbol names, or null.
GlobalOp lookupGlobal(mlir::Operation *from, llvm::StringRef name);

/// The element type `op` converts its one operand to, when that is all it
/// does (a dt.fused of one operand and one result of the same shape that
/// yields a dt.convert of the operand), or null.
mlir::Type pureConversionTo(mlir::Operation *op);

} // namespace dt

#endif // DT_DIALECT_DT_IR_DTOPS_H
