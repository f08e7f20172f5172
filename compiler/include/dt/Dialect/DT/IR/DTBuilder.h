//===- DTBuilder.h - terse construction of dt ops ---------------*- C++ -*-===//
//
// Code that writes dt IR by hand (the VJP rules, the optimizer pass, MLIRGen)
// reads like the formula it implements when each op is one short call at a
// fixed location: `e.sub(p, e.mul(lr, g))`. This is that helper.
//
//===----------------------------------------------------------------------===//

#ifndef DT_DIALECT_DT_IR_DTBUILDER_H
#define DT_DIALECT_DT_IR_DTBUILDER_H

#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/IR/Builders.h"

namespace dt {

/// Builds dt ops with `b` at `loc`.
struct DTBuilder {
  mlir::OpBuilder &b;
  mlir::Location loc;

  using Value = mlir::Value;

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value sqrt(Value x) { return b.create<SqrtOp>(loc, x); }

  /// A splat constant of `type`.
  Value splat(mlir::RankedTensorType type, double v) {
    return createSplat(b, loc, type, v);
  }
  /// A splat constant of `like`'s type.
  Value like(Value like, double v) {
    return splat(llvm::cast<mlir::RankedTensorType>(like.getType()), v);
  }

  /// `x` with another shape (no op when the shape is already that).
  Value reshape(Value x, llvm::ArrayRef<int64_t> shape) {
    auto t = llvm::cast<mlir::RankedTensorType>(x.getType());
    if (t.getShape() == shape)
      return x;
    return b.create<ReshapeOp>(
        loc, mlir::RankedTensorType::get(shape, t.getElementType()), x);
  }
  /// `x` broadcast to `type` (no op when it already has that type).
  Value broadcast(Value x, mlir::Type type) {
    if (x.getType() == type)
      return x;
    return b.create<BroadcastToOp>(loc, type, x);
  }

  Value matmul(Value x, Value y, bool transposeLhs, bool transposeRhs,
               mlir::Type resultType) {
    auto op = b.create<MatmulOp>(loc, resultType, x, y);
    op.setTransposeLhs(transposeLhs);
    op.setTransposeRhs(transposeRhs);
    return op;
  }

  /// `x` summed over `axes`, which disappear.
  Value sum(Value x, llvm::ArrayRef<int64_t> axes) {
    if (axes.empty())
      return x;
    auto t = llvm::cast<mlir::RankedTensorType>(x.getType());
    llvm::SmallVector<int64_t> kept;
    for (auto [i, d] : llvm::enumerate(t.getShape()))
      if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
        kept.push_back(d);
    return b.create<ReduceSumOp>(
        loc, mlir::RankedTensorType::get(kept, t.getElementType()), x,
        b.getDenseI64ArrayAttr(axes));
  }
  /// `x` summed over all its elements: a 0-d tensor.
  Value sumAll(Value x) {
    llvm::SmallVector<int64_t> all;
    for (int64_t i = 0,
                 e = llvm::cast<mlir::RankedTensorType>(x.getType()).getRank();
         i < e; ++i)
      all.push_back(i);
    return sum(x, all);
  }
  /// `x`, the result of summing `axes` of a `full` tensor, broadcast back to
  /// `full`'s shape. The summed axes come back as size-1 dimensions unless they
  /// were leading ones, which broadcasting adds by itself.
  Value unreduce(Value x, llvm::ArrayRef<int64_t> axes,
                 mlir::RankedTensorType full) {
    int64_t leading = 0;
    while (leading < static_cast<int64_t>(axes.size()) &&
           axes[leading] == leading)
      ++leading;
    if (leading != static_cast<int64_t>(axes.size())) {
      llvm::SmallVector<int64_t> kept(full.getShape().drop_front(leading));
      for (int64_t a : axes.drop_front(leading))
        kept[a - leading] = 1;
      x = reshape(x, kept);
    }
    return broadcast(x, full);
  }

  Value load(GlobalOp g) {
    return b.create<LoadOp>(loc, g.getType(), g.getSymName());
  }
  void store(Value v, GlobalOp g) { b.create<StoreOp>(loc, v, g.getSymName()); }
};

} // namespace dt

#endif // DT_DIALECT_DT_IR_DTBUILDER_H
