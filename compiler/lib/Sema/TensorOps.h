//===- TensorOps.h - Tensor arithmetic of the evaluator ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The tensor side of `+ - * / @` and unary minus, and the helpers every
// tensor builtin shares: computing a result type, checking dtypes, and (in a
// trace) emitting the op with its operands broadcast to exactly the shapes the
// op takes.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_TENSOROPS_H
#define DT_LIB_SEMA_TENSOROPS_H

#include "Eval.h"

namespace dt::sema {

/// Tensor operations for one evaluator.
class TensorOps {
public:
  TensorOps(Evaluator &ev, llvm::StringRef scope)
      : ev(ev), ctx(ev.ctx), scope(scope) {}

  /// `lhs op rhs` where at least one side is a tensor.
  FailureOr<EvalValue> binary(ast::BinaryOp op, const EvalValue &lhs,
                              const EvalValue &rhs, llvm::SMLoc loc);
  /// `-x` for a tensor.
  EvalValue neg(const EvalValue &x, llvm::SMLoc loc);

  /// Emits `kind` when tracing and returns tensors of `results`' types.
  /// Without an emitter (checking), returns the types with no handles.
  std::vector<EvalValue> emit(PrimOp kind, llvm::ArrayRef<EvalValue> operands,
                              const PrimAttrs &attrs,
                              llvm::ArrayRef<EvalValue> results,
                              llvm::SMLoc loc);
  /// One-result form of emit().
  EvalValue emit1(PrimOp kind, llvm::ArrayRef<EvalValue> operands,
                  const PrimAttrs &attrs, DType dtype, Shape shape,
                  llvm::SMLoc loc);
  /// `x` broadcast to `shape` (an op only when tracing and shapes differ).
  EvalValue broadcastTo(const EvalValue &x, const Shape &shape,
                        llvm::SMLoc loc);
  /// A scalar as a rank-0 tensor of `dtype`.
  FailureOr<EvalValue> scalarTensor(const EvalValue &scalar, DType dtype,
                                    llvm::SMLoc loc);
  /// Reshapes `x` to `shape` (an op only when tracing and shapes differ).
  EvalValue reshape(const EvalValue &x, const Shape &shape, llvm::SMLoc loc);
  /// The shared body of broadcastTo and reshape.
  EvalValue toShape(PrimOp kind, const EvalValue &x, const Shape &shape,
                    llvm::SMLoc loc);

  /// Requires a float tensor; reports `what needs a floating-point tensor`.
  LogicalResult requireFloat(const EvalValue &x, llvm::StringRef what,
                             llvm::SMLoc loc);
  /// The concrete type of a traced tensor.
  TensorType concreteType(DType dtype, const Shape &shape) const;

  bool tracing() const { return ev.emitter != nullptr; }
  SymContext &syms() { return ctx.syms; }

private:
  FailureOr<EvalValue> matmul(const EvalValue &lhs, const EvalValue &rhs,
                              llvm::SMLoc loc);

  Evaluator &ev;
  SemaContext &ctx;
  llvm::StringRef scope;
};

/// Normalises `axis` (negative counts from the end) for a rank; reports and
/// fails when out of range.
FailureOr<int64_t> normalizeAxis(SemaContext &ctx, int64_t axis, size_t rank,
                                 llvm::SMLoc loc, llvm::StringRef what);

} // namespace dt::sema

#endif // DT_LIB_SEMA_TENSOROPS_H
