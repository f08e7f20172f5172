//===- DTScalar.cpp - scalar bodies of dt's elementwise ops ---------------===//
//
// ScalarizableOpInterface: each elementwise op builds the arith/math
// computation of its elements, on scalars or on vectors of `lanes` elements
// (arith and math ops accept both; only constants need to know which). Fusion
// lowering stitches these into the body of a single loop nest, so a chain such
// as `relu(x @ w + b)` or a whole AdamW update becomes one vectorised pass over
// memory.
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace dt;

namespace {
/// Small arithmetic helpers over scalars, or vectors, of one type, float or
/// integer.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;
  Type type; // the element type, or a vector of it

  Type elementType() const { return getElementTypeOrSelf(type); }
  bool isFloat() const { return llvm::isa<FloatType>(elementType()); }
  Value constant(double v) {
    TypedAttr scalar = isFloat() ? TypedAttr(b.getFloatAttr(elementType(), v))
                                 : TypedAttr(b.getIntegerAttr(
                                       elementType(), static_cast<int64_t>(v)));
    if (auto vec = llvm::dyn_cast<VectorType>(type))
      return b.create<arith::ConstantOp>(loc,
                                         DenseElementsAttr::get(vec, scalar));
    return b.create<arith::ConstantOp>(loc, scalar);
  }
  Value add(Value x, Value y) {
    return isFloat() ? b.create<arith::AddFOp>(loc, x, y).getResult()
                     : b.create<arith::AddIOp>(loc, x, y).getResult();
  }
  Value sub(Value x, Value y) {
    return isFloat() ? b.create<arith::SubFOp>(loc, x, y).getResult()
                     : b.create<arith::SubIOp>(loc, x, y).getResult();
  }
  Value mul(Value x, Value y) {
    return isFloat() ? b.create<arith::MulFOp>(loc, x, y).getResult()
                     : b.create<arith::MulIOp>(loc, x, y).getResult();
  }
  Value div(Value x, Value y) {
    return isFloat() ? b.create<arith::DivFOp>(loc, x, y).getResult()
                     : b.create<arith::DivSIOp>(loc, x, y).getResult();
  }
  Value select(arith::CmpFPredicate p, Value x, Value y, Value ifTrue,
               Value ifFalse) {
    Value c = b.create<arith::CmpFOp>(loc, p, x, y);
    return b.create<arith::SelectOp>(loc, c, ifTrue, ifFalse);
  }
};

// GPT-2's GELU: 0.5 x (1 + tanh(k (x + c x^3))) with k = sqrt(2/pi), c =
// 0.044715.
constexpr double kGeluK = 0.7978845608028654;
constexpr double kGeluC = 0.044715;
// The exact GELU's constants: 1 / sqrt(2) and 1 / sqrt(2 pi).
constexpr double kSqrtHalf = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
} // namespace

static ScalarBuilder scalars(OpBuilder &b, Location loc, Value v) {
  return {b, loc, v.getType()};
}

/// `elem`, or a vector of `lanes` of it.
static Type lanesOf(Type elem, unsigned lanes) {
  return lanes > 1 ? Type(VectorType::get({lanes}, elem)) : elem;
}

Value ConstantOp::buildScalar(OpBuilder &b, Location loc, ValueRange,
                              unsigned lanes) {
  auto splat = llvm::cast<DenseElementsAttr>(getValue());
  assert(splat.isSplat() && "fusion only absorbs splat constants");
  auto scalar = llvm::cast<TypedAttr>(splat.getSplatValue<Attribute>());
  if (lanes > 1)
    return b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(VectorType::get({lanes}, scalar.getType()),
                                    scalar));
  return b.create<arith::ConstantOp>(loc, scalar);
}

Value NegOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  ScalarBuilder s = scalars(b, loc, ops[0]);
  if (s.isFloat())
    return b.create<arith::NegFOp>(loc, ops[0]);
  return s.sub(s.constant(0), ops[0]);
}

Value ReluOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                          unsigned) {
  ScalarBuilder s = scalars(b, loc, ops[0]);
  // x > 0 ? x : 0 (NaN stays NaN, as PyTorch's relu).
  return s.select(arith::CmpFPredicate::UGT, ops[0], s.constant(0), ops[0],
                  s.constant(0));
}

Value GeluOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                          unsigned) {
  ScalarBuilder s = scalars(b, loc, ops[0]);
  Value x = ops[0];
  Value x3 = s.mul(s.mul(x, x), x);
  Value inner =
      s.mul(s.constant(kGeluK), s.add(x, s.mul(s.constant(kGeluC), x3)));
  Value t = b.create<math::TanhOp>(loc, inner);
  return s.mul(s.mul(s.constant(0.5), x), s.add(s.constant(1), t));
}

Value GeluDerivOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                               unsigned) {
  // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c
  // x^3)).
  ScalarBuilder s = scalars(b, loc, ops[0]);
  Value x = ops[0];
  Value x2 = s.mul(x, x);
  Value inner = s.mul(s.constant(kGeluK),
                      s.add(x, s.mul(s.constant(kGeluC), s.mul(x2, x))));
  Value t = b.create<math::TanhOp>(loc, inner);
  Value left = s.mul(s.constant(0.5), s.add(s.constant(1), t));
  Value sech2 = s.sub(s.constant(1), s.mul(t, t));
  Value dInner = s.mul(s.constant(kGeluK),
                       s.add(s.constant(1), s.mul(s.constant(3 * kGeluC), x2)));
  return s.add(left, s.mul(s.mul(s.constant(0.5), x), s.mul(sech2, dInner)));
}

Value GeluErfOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                             unsigned) {
  // 0.5 x (1 + erf(x / sqrt 2)).
  ScalarBuilder s = scalars(b, loc, ops[0]);
  Value x = ops[0];
  Value erf = b.create<math::ErfOp>(loc, s.mul(x, s.constant(kSqrtHalf)));
  return s.mul(s.mul(s.constant(0.5), x), s.add(s.constant(1), erf));
}

Value GeluErfDerivOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                                  unsigned) {
  // d/dx = Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) /
  // sqrt(2 pi).
  ScalarBuilder s = scalars(b, loc, ops[0]);
  Value x = ops[0];
  Value erf = b.create<math::ErfOp>(loc, s.mul(x, s.constant(kSqrtHalf)));
  Value cdf = s.mul(s.constant(0.5), s.add(s.constant(1), erf));
  Value pdf =
      s.mul(s.constant(kInvSqrt2Pi),
            b.create<math::ExpOp>(loc, s.mul(s.constant(-0.5), s.mul(x, x))));
  return s.add(cdf, s.mul(x, pdf));
}

Value TanhOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                          unsigned) {
  return b.create<math::TanhOp>(loc, ops[0]);
}

Value SigmoidOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                             unsigned) {
  ScalarBuilder s = scalars(b, loc, ops[0]);
  Value e = b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, ops[0]));
  return s.div(s.constant(1), s.add(s.constant(1), e));
}

Value ExpOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return b.create<math::ExpOp>(loc, ops[0]);
}

Value LogOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return b.create<math::LogOp>(loc, ops[0]);
}

Value SqrtOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                          unsigned) {
  return b.create<math::SqrtOp>(loc, ops[0]);
}

Value StepOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                          unsigned) {
  ScalarBuilder s = scalars(b, loc, ops[0]);
  return s.select(arith::CmpFPredicate::OGT, ops[0], s.constant(0),
                  s.constant(1), s.constant(0));
}

Value ConvertOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                             unsigned lanes) {
  Type from = getElementTypeOrSelf(ops[0].getType());
  Type toElem = getType().getElementType();
  Type to = lanesOf(toElem, lanes);
  auto fromF = llvm::dyn_cast<FloatType>(from);
  auto toF = llvm::dyn_cast<FloatType>(toElem);
  if (from == toElem)
    return ops[0];
  if (fromF && toF)
    return fromF.getWidth() < toF.getWidth()
               ? b.create<arith::ExtFOp>(loc, to, ops[0]).getResult()
               : b.create<arith::TruncFOp>(loc, to, ops[0]).getResult();
  if (!fromF && toF)
    return b.create<arith::SIToFPOp>(loc, to, ops[0]);
  if (fromF && !toF)
    return b.create<arith::FPToSIOp>(loc, to, ops[0]);
  unsigned fw = from.getIntOrFloatBitWidth(),
           tw = toElem.getIntOrFloatBitWidth();
  return fw < tw ? b.create<arith::ExtSIOp>(loc, to, ops[0]).getResult()
                 : b.create<arith::TruncIOp>(loc, to, ops[0]).getResult();
}

Value AddOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return scalars(b, loc, ops[0]).add(ops[0], ops[1]);
}

Value SubOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return scalars(b, loc, ops[0]).sub(ops[0], ops[1]);
}

Value MulOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return scalars(b, loc, ops[0]).mul(ops[0], ops[1]);
}

Value DivOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return scalars(b, loc, ops[0]).div(ops[0], ops[1]);
}

Value PowOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops, unsigned) {
  return b.create<math::PowFOp>(loc, ops[0], ops[1]);
}

Value MaximumOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                             unsigned) {
  if (llvm::isa<FloatType>(getElementTypeOrSelf(ops[0].getType())))
    return b.create<arith::MaximumFOp>(loc, ops[0], ops[1]);
  return b.create<arith::MaxSIOp>(loc, ops[0], ops[1]);
}

Value SelectOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                            unsigned) {
  ScalarBuilder s = scalars(b, loc, ops[0]);
  Value zero = s.constant(0);
  Value taken =
      s.isFloat()
          ? b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, ops[0],
                                    zero)
                .getResult()
          : b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, ops[0], zero)
                .getResult();
  return b.create<arith::SelectOp>(loc, taken, ops[1], ops[2]);
}

Value MinimumOp::buildScalar(OpBuilder &b, Location loc, ValueRange ops,
                             unsigned) {
  if (llvm::isa<FloatType>(getElementTypeOrSelf(ops[0].getType())))
    return b.create<arith::MinimumFOp>(loc, ops[0], ops[1]);
  return b.create<arith::MinSIOp>(loc, ops[0], ops[1]);
}
