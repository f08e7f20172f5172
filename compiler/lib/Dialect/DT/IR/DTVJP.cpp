//===- DTVJP.cpp - vector-Jacobian products of dt ops ---------------------===//
//
// DifferentiableOpInterface: given the adjoint of each result, every
// differentiable op builds the adjoints of the operands the autodiff pass asks
// for. Products are written with dt ops themselves, so backward graphs are
// ordinary dt IR that fusion, sharding and memory planning see like any other.
// Each rule is checked against central finite differences in float64 by
// test/unit/dialect/VJPTest.cpp.
//
// Conventions: `g` is the adjoint of the (first) result, `y` the result itself.
// Rules only build what `needed` asks for; the adjoint of a non-float operand
// is always null.
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTBuilder.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace dt;

namespace {
using Emit = DTBuilder;

bool isFloatTensor(Value v) {
  return llvm::isa<FloatType>(
      llvm::cast<RankedTensorType>(v.getType()).getElementType());
}

/// Appends the adjoints of a unary op whose operand adjoint is `f()`.
template <typename Fn>
LogicalResult unary(Operation *, ArrayRef<bool> needed, ValueRange grads,
                    SmallVectorImpl<Value> &out, Fn f) {
  out.push_back(needed[0] && grads[0] ? f(grads[0]) : Value());
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) { return e.neg(g); });
}

LogicalResult ReluOp::buildVJP(OpBuilder &b, ValueRange grads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    return e.mul(g, b.create<StepOp>(getLoc(), getInput()));
  });
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ValueRange grads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    return e.mul(g, b.create<GeluDerivOp>(getLoc(), getInput()));
  });
}

LogicalResult GeluErfOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    return e.mul(g, b.create<GeluErfDerivOp>(getLoc(), getInput()));
  });
}

LogicalResult TanhOp::buildVJP(OpBuilder &b, ValueRange grads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    Value y = getResult();
    return e.mul(g, e.sub(e.like(y, 1), e.mul(y, y)));
  });
}

LogicalResult SigmoidOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    Value y = getResult();
    return e.mul(g, e.mul(y, e.sub(e.like(y, 1), y)));
  });
}

LogicalResult ExpOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out,
               [&](Value g) { return e.mul(g, getResult()); });
}

LogicalResult LogOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out,
               [&](Value g) { return e.div(g, getInput()); });
}

LogicalResult SqrtOp::buildVJP(OpBuilder &b, ValueRange grads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    Value y = getResult();
    return e.div(e.mul(g, e.like(y, 0.5)), y);
  });
}

LogicalResult ConvertOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  // Only float-to-float conversions carry a derivative: the adjoint converts
  // back.
  if (!isFloatTensor(getInput()) || !isFloatTensor(getResult())) {
    out.push_back(Value());
    return success();
  }
  return unary(*this, needed, grads, out, [&](Value g) {
    return b.create<ConvertOp>(getLoc(), getInput().getType(), g).getResult();
  });
}

LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  out.push_back(needed[0] ? g : Value());
  out.push_back(needed[1] ? g : Value());
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  Value g = grads[0];
  out.push_back(needed[0] ? g : Value());
  out.push_back(needed[1] && g ? e.neg(g) : Value());
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  Value g = grads[0];
  out.push_back(needed[0] && g ? e.mul(g, getRhs()) : Value());
  out.push_back(needed[1] && g ? e.mul(g, getLhs()) : Value());
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  // d(a/b) = g/b, -g a/b^2 = -(g/b) * y
  Emit e{b, getLoc()};
  Value g = grads[0];
  Value gOverB = g ? e.div(g, getRhs()) : Value();
  out.push_back(needed[0] ? gOverB : Value());
  out.push_back(needed[1] && g ? e.neg(e.mul(gOverB, getResult())) : Value());
  return success();
}

LogicalResult PowOp::buildVJP(OpBuilder &b, ValueRange grads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log a.
  Emit e{b, getLoc()};
  Value g = grads[0], a = getLhs(), p = getRhs();
  Value da, db;
  if (g && needed[0]) {
    Value aPow = b.create<PowOp>(getLoc(), a, e.sub(p, e.like(p, 1)));
    da = e.mul(g, e.mul(p, aPow));
  }
  if (g && needed[1])
    db = e.mul(g, e.mul(getResult(), b.create<LogOp>(getLoc(), a)));
  out.push_back(da);
  out.push_back(db);
  return success();
}

/// maximum and minimum route the adjoint to the selected operand; on a tie, to
/// the rhs.
static LogicalResult selectVJP(Operation *op, OpBuilder &b,
                               Value chosenIfPositive, Value other,
                               ValueRange grads, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &out) {
  Emit e{b, op->getLoc()};
  Value g = grads[0];
  Value da, db;
  if (g) {
    Value sel = b.create<StepOp>(op->getLoc(), e.sub(chosenIfPositive, other));
    da = e.mul(g, sel);
    db = e.sub(g, da);
  }
  out.push_back(needed[0] ? da : Value());
  out.push_back(needed[1] ? db : Value());
  return success();
}

LogicalResult MaximumOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  return selectVJP(*this, b, getLhs(), getRhs(), grads, needed, out);
}

LogicalResult MinimumOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  return selectVJP(*this, b, getRhs(), getLhs(), grads, needed, out);
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult BroadcastToOp::buildVJP(OpBuilder &b, ValueRange grads,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &out) {
  // Sum over the dimensions broadcasting created or expanded, then restore the
  // operand's shape (expanded dims of size 1 come back as such).
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    ArrayRef<int64_t> from = shapeOf(getInput()), to = shapeOf(getResult());
    int64_t lead = to.size() - from.size();
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < static_cast<int64_t>(to.size()); ++i)
      if (i < lead || (from[i - lead] == 1 && to[i] != 1))
        axes.push_back(i);
    return e.reshape(e.sum(g, axes), from);
  });
}

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out,
               [&](Value g) { return e.reshape(g, shapeOf(getInput())); });
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  return unary(*this, needed, grads, out, [&](Value g) {
    ArrayRef<int64_t> perm = getPerm();
    SmallVector<int64_t> inverse(perm.size());
    for (auto [i, p] : llvm::enumerate(perm))
      inverse[p] = i;
    return b
        .create<TransposeOp>(getLoc(), getInput().getType(), g,
                             b.getDenseI64ArrayAttr(inverse))
        .getResult();
  });
}

LogicalResult SplitOp::buildVJP(OpBuilder &b, ValueRange grads,
                                ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &out) {
  // The pieces' adjoints joined again; a piece nobody used contributes zeros.
  if (!needed[0] || llvm::all_of(grads, [](Value g) { return !g; })) {
    out.push_back(Value());
    return success();
  }
  Emit e{b, getLoc()};
  SmallVector<Value> pieces;
  for (auto [r, g] : llvm::zip(getResults(), grads))
    pieces.push_back(g ? g : e.like(r, 0));
  out.push_back(
      b.create<ConcatOp>(getLoc(), getInput().getType(), pieces, getAxis()));
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ValueRange grads,
                                ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  if (!g || !needed[0]) {
    out.push_back(Value());
    return success();
  }
  // Zeros before and after the kept range, the gradient in between.
  Emit e{b, getLoc()};
  auto in = llvm::cast<RankedTensorType>(getInput().getType());
  int64_t axis = getAxis(), start = getStart();
  int64_t kept = llvm::cast<RankedTensorType>(g.getType()).getDimSize(axis);
  int64_t after = in.getDimSize(axis) - start - kept;
  auto zeros = [&](int64_t n) {
    SmallVector<int64_t> shape(in.getShape());
    shape[axis] = n;
    return e.splat(RankedTensorType::get(shape, in.getElementType()), 0.0);
  };
  SmallVector<Value> pieces;
  if (start > 0)
    pieces.push_back(zeros(start));
  pieces.push_back(g);
  if (after > 0)
    pieces.push_back(zeros(after));
  out.push_back(
      pieces.size() == 1
          ? g
          : b.create<ConcatOp>(getLoc(), in, pieces, axis).getResult());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ValueRange grads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  if (!g || llvm::none_of(needed, [](bool n) { return n; })) {
    out.append(getInputs().size(), Value());
    return success();
  }
  auto split =
      b.create<SplitOp>(getLoc(), getInputs().getTypes(), g, getAxis());
  for (auto [i, r] : llvm::enumerate(split.getResults()))
    out.push_back(needed[i] ? r : Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and linear algebra
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    return e.unreduce(g, getAxes(), getInput().getType());
  });
}

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ValueRange grads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &out) {
  // With op(X) = X or X^T: C = op(A) op(B). Each case keeps the adjoints in A's
  // and B's stored layouts, so no transpose is ever materialised:
  //   C = A B      dA = dC B^T      dB = A^T dC
  //   C = A B^T    dA = dC B        dB = dC^T A
  //   C = A^T B    dA = B dC^T      dB = A dC
  //   C = A^T B^T  dA = B^T dC^T    dB = dC^T A^T
  Emit e{b, getLoc()};
  Value g = grads[0], a = getLhs(), bb = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Type aType = a.getType(), bType = bb.getType();
  Value da, db;
  if (g && needed[0]) {
    if (!ta)
      da = e.matmul(g, bb, false, !tb, aType);
    else
      da = e.matmul(bb, g, tb, true, aType);
  }
  if (g && needed[1]) {
    if (!tb)
      db = e.matmul(a, g, !ta, false, bType);
    else
      db = e.matmul(g, a, true, ta, bType);
  }
  out.push_back(da);
  out.push_back(db);
  return success();
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  // dx = y * (g - sum(g * y, axis)) = g*y - y * sum(g*y, axis)
  Emit e{b, getLoc()};
  return unary(*this, needed, grads, out, [&](Value g) {
    Value y = getResult();
    Value gy = e.mul(g, y);
    int64_t axis = getAxis();
    Value s = e.unreduce(e.sum(gy, {axis}), {axis}, getType());
    return e.sub(gy, e.mul(y, s));
  });
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  if (!g || llvm::none_of(needed, [](bool n) { return n; })) {
    out.append(3, Value());
    return success();
  }
  auto grad = b.create<LayerNormGradOp>(
      getLoc(), getInput().getType(), getWeight().getType(),
      getBias().getType(), getInput(), getWeight(), g, getEpsAttr());
  out.push_back(needed[0] ? grad.getInputGrad() : Value());
  out.push_back(needed[1] ? grad.getWeightGrad() : Value());
  out.push_back(needed[2] ? grad.getBiasGrad() : Value());
  return success();
}

LogicalResult RopeOp::buildVJP(OpBuilder &b, ValueRange grads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &out) {
  // A rotation: its gradient is the inverse rotation of the adjoint.
  return unary(*this, needed, grads, out, [&](Value g) -> Value {
    return b.create<RopeOp>(getLoc(), g, getThetaAttr(),
                            getInverse() ? UnitAttr() : b.getUnitAttr(),
                            getScalingAttr());
  });
}

LogicalResult Conv2dOp::buildVJP(OpBuilder &b, ValueRange grads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  out.append(2, Value());
  if (!g)
    return success();
  if (needed[0])
    out[0] = b.create<Conv2dInputGradOp>(
        getLoc(), getInput().getType(), g, getWeight(), getStrideAttr(),
        getPaddingAttr(), getDilationAttr(), getGroupsAttr());
  if (needed[1])
    out[1] = b.create<Conv2dWeightGradOp>(
        getLoc(), getWeight().getType(), getInput(), g, getStrideAttr(),
        getPaddingAttr(), getDilationAttr(), getGroupsAttr());
  return success();
}

LogicalResult MaxPool2dOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  return unary(*this, needed, grads, out, [&](Value g) -> Value {
    return b.create<MaxPool2dGradOp>(getLoc(), getInput().getType(),
                                     getInput(), g, getKernelAttr(),
                                     getStrideAttr(), getPaddingAttr());
  });
}

LogicalResult AvgPool2dOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  return unary(*this, needed, grads, out, [&](Value g) -> Value {
    return b.create<AvgPool2dGradOp>(getLoc(), getInput().getType(), g,
                                     getKernelAttr(), getStrideAttr(),
                                     getPaddingAttr());
  });
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  // Linear with a mask that does not depend on x: the same dropout of the
  // adjoint. The step, micro-batch and offsets get no gradient.
  out.append(getNumOperands(), Value());
  if (grads[0] && needed[0])
    out[0] = b.create<DropoutOp>(getLoc(), grads[0], getStep(), getMicro(),
                                 getFirsts(), getPAttr(), getSeedAttr(),
                                 getSiteAttr(), getShapeAttr());
  return success();
}

LogicalResult RMSNormOp::buildVJP(OpBuilder &b, ValueRange grads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  if (!g || llvm::none_of(needed, [](bool n) { return n; })) {
    out.append(2, Value());
    return success();
  }
  auto grad = b.create<RMSNormGradOp>(getLoc(), getInput().getType(),
                                      getWeight().getType(), getInput(),
                                      getWeight(), g, getEpsAttr());
  out.push_back(needed[0] ? grad.getInputGrad() : Value());
  out.push_back(needed[1] ? grad.getWeightGrad() : Value());
  return success();
}

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  out.push_back(needed[0] && g
                    ? b.create<EmbeddingGradOp>(getLoc(), getTable().getType(),
                                                getIds(), g)
                          .getResult()
                    : Value());
  out.push_back(Value()); // integer ids
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange grads,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &out) {
  Value g = grads[0];
  out.push_back(needed[0] && g ? b.create<CrossEntropyGradOp>(
                                      getLoc(), getLogits().getType(),
                                      getLogits(), getLabels(), g)
                                     .getResult()
                               : Value());
  out.push_back(Value()); // integer labels
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ValueRange grads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  // The log-sum-exp is a statistic for the gradient, which nothing
  // differentiates through (its adjoint would be P K / sqrt(D)).
  if (grads.size() > 1 && grads[1])
    return emitOpError("the log-sum-exp of attention has no gradient rule; "
                       "only its result O may reach the loss");
  Value g = grads[0];
  if (!g || llvm::none_of(needed, [](bool n) { return n; })) {
    out.append(3, Value());
    return success();
  }
  Type t = getResult().getType();
  auto grad = b.create<AttentionGradOp>(getLoc(), t, t, t, getQuery(), getKey(),
                                        getValue(), getResult(), getLse(), g,
                                        getCausal());
  for (auto [i, r] : llvm::enumerate(grad.getResults()))
    out.push_back(needed[i] ? r : Value());
  return success();
}
