//===- TensorOps.cpp - Tensor arithmetic of the evaluator -----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Elementwise ops: the result shape is the NumPy broadcast of the operands;
// scalars adopt the tensor's dtype (an integer tensor does not take a
// non-integral constant). When tracing, each operand whose shape differs from
// the result gets an explicit BroadcastTo, and scalars become rank-0
// constants first. Matrix products follow numpy.matmul: vectors are promoted
// by a reshape, leading dims broadcast, and a 2-D right operand stays shared.
//
//===----------------------------------------------------------------------===//

#include "TensorOps.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace dt;
using namespace dt::sema;

FailureOr<int64_t> sema::normalizeAxis(SemaContext &ctx, int64_t axis,
                                       size_t rank, llvm::SMLoc loc,
                                       llvm::StringRef what) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    ctx.error(loc, what + " axis " + std::to_string(axis) +
                       " is out of range for a tensor of rank " +
                       std::to_string(rank));
    return llvm::failure();
  }
  return axis < 0 ? axis + r : axis;
}

TensorType TensorOps::concreteType(DType dtype, const Shape &shape) const {
  TensorType type;
  type.dtype = dtype;
  if (auto dims = shape.getConcrete())
    type.shape = *dims;
  return type;
}

std::vector<EvalValue> TensorOps::emit(PrimOp kind,
                                       llvm::ArrayRef<EvalValue> operands,
                                       const PrimAttrs &attrs,
                                       llvm::ArrayRef<EvalValue> results,
                                       llvm::SMLoc loc) {
  std::vector<EvalValue> out(results.begin(), results.end());
  if (!tracing())
    return out;
  llvm::SmallVector<TraceValue, 4> handles;
  for (const EvalValue &operand : operands)
    handles.push_back(operand.handle);
  llvm::SmallVector<TensorType, 1> types;
  for (const EvalValue &result : results)
    types.push_back(concreteType(result.dtype, result.shape));
  llvm::SmallVector<TraceValue, 1> made =
      ev.emitter->op(kind, handles, attrs, types, loc, scope);
  for (size_t i = 0; i < out.size() && i < made.size(); ++i)
    out[i].handle = made[i];
  return out;
}

EvalValue TensorOps::emit1(PrimOp kind, llvm::ArrayRef<EvalValue> operands,
                           const PrimAttrs &attrs, DType dtype, Shape shape,
                           llvm::SMLoc loc) {
  EvalValue result = EvalValue::getTensor(dtype, std::move(shape));
  return emit(kind, operands, attrs, {result}, loc)[0];
}

/// BroadcastTo or Reshape of `x` to `shape`: an op only when tracing and the
/// shapes differ.
EvalValue TensorOps::toShape(PrimOp kind, const EvalValue &x,
                             const Shape &shape, llvm::SMLoc loc) {
  if (!tracing())
    return EvalValue::getTensor(x.dtype, shape);
  auto from = x.shape.getConcrete(), to = shape.getConcrete();
  if (from && to && *from == *to)
    return x;
  PrimAttrs attrs;
  if (to)
    attrs.shape = *to;
  return emit1(kind, {x}, attrs, x.dtype, shape, loc);
}

EvalValue TensorOps::broadcastTo(const EvalValue &x, const Shape &shape,
                                 llvm::SMLoc loc) {
  return toShape(PrimOp::BroadcastTo, x, shape, loc);
}

EvalValue TensorOps::reshape(const EvalValue &x, const Shape &shape,
                             llvm::SMLoc loc) {
  return toShape(PrimOp::Reshape, x, shape, loc);
}

FailureOr<EvalValue> TensorOps::scalarTensor(const EvalValue &scalar,
                                             DType dtype, llvm::SMLoc loc) {
  EvalValue result = EvalValue::getTensor(dtype, Shape::scalar());
  if (scalar.kind == EvalValue::Kind::Float && !isFloat(dtype)) {
    ctx.error(loc, "a number cannot be combined with an integer tensor (" +
                       toString(dtype) + "); use an integer");
    return llvm::failure();
  }
  if (!tracing())
    return result;
  if (scalar.kind == EvalValue::Kind::Int) {
    std::optional<int64_t> c = ctx.syms.resolve(scalar.intValue).getConstant();
    result.handle =
        isFloat(dtype)
            ? ev.emitter->constant(static_cast<double>(c.value_or(0)), dtype)
            : ev.emitter->constant(c.value_or(0), dtype);
  } else {
    result.handle = ev.emitter->constant(scalar.floatValue.value_or(0), dtype);
  }
  return result;
}

LogicalResult TensorOps::requireFloat(const EvalValue &x, llvm::StringRef what,
                                      llvm::SMLoc loc) {
  if (isFloat(x.dtype))
    return llvm::success();
  ctx.error(loc, what + " needs a floating-point tensor, not " +
                     str(x.dtype, x.shape, ctx.syms));
  return llvm::failure();
}

EvalValue TensorOps::neg(const EvalValue &x, llvm::SMLoc loc) {
  return emit1(PrimOp::Neg, {x}, {}, x.dtype, x.shape, loc);
}

FailureOr<EvalValue> TensorOps::binary(ast::BinaryOp op, const EvalValue &lhs,
                                       const EvalValue &rhs, llvm::SMLoc loc) {
  if (op == ast::BinaryOp::MatMul) {
    if (!lhs.isTensor() || !rhs.isTensor()) {
      ctx.error(loc, "'@' needs two tensors; use '*' to scale by a number");
      return llvm::failure();
    }
    return matmul(lhs, rhs, loc);
  }

  // Scalars take the tensor's dtype.
  DType dtype = lhs.isTensor() ? lhs.dtype : rhs.dtype;
  if (lhs.isTensor() && rhs.isTensor() && lhs.dtype != rhs.dtype) {
    ctx.error(loc, "'" + ast::spell(op) + "' of tensors of different types: " +
                       str(lhs.dtype, lhs.shape, ctx.syms) + " and " +
                       str(rhs.dtype, rhs.shape, ctx.syms));
    return llvm::failure();
  }
  EvalValue a = lhs, b = rhs;
  for (EvalValue *side : {&a, &b}) {
    if (side->isTensor())
      continue;
    if (!side->isNumber()) {
      ctx.error(loc, "'" + ast::spell(op) + "' cannot combine a tensor with " +
                         describe(*side, ctx.syms));
      return llvm::failure();
    }
    FailureOr<EvalValue> t = scalarTensor(*side, dtype, loc);
    if (failed(t))
      return llvm::failure();
    *side = *t;
  }

  std::pair<SymExpr, SymExpr> mismatch;
  std::optional<Shape> shape =
      broadcastShapes(a.shape, b.shape, ctx.syms, &mismatch);
  if (!shape) {
    ctx.error(loc, "'" + ast::spell(op) + "' of " +
                       str(a.dtype, a.shape, ctx.syms) + " and " +
                       str(b.dtype, b.shape, ctx.syms) +
                       ": the shapes do not broadcast (" +
                       ctx.syms.str(mismatch.first) + " vs " +
                       ctx.syms.str(mismatch.second) + ")");
    return llvm::failure();
  }
  a = broadcastTo(a, *shape, loc);
  b = broadcastTo(b, *shape, loc);
  PrimOp kind = op == ast::BinaryOp::Add   ? PrimOp::Add
                : op == ast::BinaryOp::Sub ? PrimOp::Sub
                : op == ast::BinaryOp::Mul ? PrimOp::Mul
                                           : PrimOp::Div;
  return emit1(kind, {a, b}, {}, dtype, *shape, loc);
}

FailureOr<EvalValue> TensorOps::matmul(const EvalValue &lhs,
                                       const EvalValue &rhs, llvm::SMLoc loc) {
  if (lhs.dtype != rhs.dtype) {
    ctx.error(loc, "'@' of tensors of different types: " +
                       str(lhs.dtype, lhs.shape, ctx.syms) + " and " +
                       str(rhs.dtype, rhs.shape, ctx.syms));
    return llvm::failure();
  }
  if (failed(requireFloat(lhs, "'@'", loc)))
    return llvm::failure();
  std::string why;
  std::optional<Shape> shape = matmulShape(lhs.shape, rhs.shape, ctx.syms, why);
  if (!shape) {
    ctx.error(loc, "matrix product of " + str(lhs.dtype, lhs.shape, ctx.syms) +
                       " and " + str(rhs.dtype, rhs.shape, ctx.syms) + ": " +
                       why);
    return llvm::failure();
  }
  if (!tracing())
    return EvalValue::getTensor(lhs.dtype, *shape);

  // Promote vectors to matrices, broadcast batch dims, multiply, demote.
  EvalValue a = lhs, b = rhs;
  bool aVector = a.shape.dims.size() == 1, bVector = b.shape.dims.size() == 1;
  if (aVector) {
    Shape s;
    s.dims = {SymExpr(1), a.shape.dims[0]};
    a = reshape(a, s, loc);
  }
  if (bVector) {
    Shape s;
    s.dims = {b.shape.dims[0], SymExpr(1)};
    b = reshape(b, s, loc);
  }
  Shape out;
  out.dims.assign(shape->dims.begin(), shape->dims.end());
  if (aVector)
    out.dims.insert(out.dims.end() - (bVector ? 0 : 1), SymExpr(1));
  if (bVector)
    out.dims.push_back(SymExpr(1));
  size_t batchRank = out.dims.size() - 2;
  auto withBatch = [&](const EvalValue &x) {
    Shape s;
    s.dims.assign(out.dims.begin(), out.dims.begin() + batchRank);
    s.dims.append(x.shape.dims.end() - 2, x.shape.dims.end());
    return s;
  };
  a = broadcastTo(a, withBatch(a), loc);
  if (b.shape.dims.size() > 2 || batchRank == 0)
    b = broadcastTo(b, withBatch(b), loc);
  EvalValue product = emit1(PrimOp::MatMul, {a, b}, {}, lhs.dtype, out, loc);
  return reshape(product, *shape, loc);
}
