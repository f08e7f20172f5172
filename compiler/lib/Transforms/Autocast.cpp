//===- Autocast.cpp - the loss computed in 16-bit precision ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `precision = bf16 | f16` makes activations 16-bit while parameters, their
// gradients and the optimizer stay f32. This pass does it on the forward
// functions MLIRGen built in f32, before dt-autodiff: it converts every f32
// load of a parameter or input to the 16-bit type and lets each op compute in
// the type of its operands. Autodiff then differentiates through the
// conversions, so backward runs in 16 bits too and a parameter's gradient
// comes back to f32 through the VJP of its load's conversion.
//
// Two kinds of value keep f32: the loss (the loss ops' result is an f32 scalar,
// and whatever the loss expression computes from it is f32), and the result
// of a `dt.convert`, whose type is what its builder asked for (MLIRGen pins
// mse's operands to f32 that way). In @loss, loads of `@buffer` parameters
// stay f32 too, so batch norm's running statistics move in f32. Values made of constants alone are *weak*:
// they take the type of whatever they meet, as Python scalars do in PyTorch,
// so `x * 0.5` stays 16-bit and `loss * 0.5` stays f32.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace dt {
#define GEN_PASS_DEF_AUTOCAST
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

FloatType floatElement(Type t) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(t);
  return tensor ? llvm::dyn_cast<FloatType>(tensor.getElementType())
                : FloatType();
}

/// `v` converted to element type `to` just before `before` (or `v`).
Value convertTo(OpBuilder &b, Value v, Type to) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  if (type.getElementType() == to)
    return v;
  return b.create<ConvertOp>(v.getLoc(), type.clone(to), v);
}

struct AutocastPass : public dt::impl::AutocastBase<AutocastPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto precision = module->getAttrOfType<StringAttr>("dt.precision");
    if (!precision || precision.getValue() == "f32")
      return;
    Builder types(module.getContext());
    Type low;
    if (precision.getValue() == "bf16")
      low = types.getBF16Type();
    else if (precision.getValue() == "f16")
      low = types.getF16Type();
    else {
      module.emitError("dt.precision must be \"f32\", \"bf16\" or \"f16\", not \"")
          << precision.getValue() << "\"";
      return signalPassFailure();
    }
    for (StringRef name : {names::kLossFn, names::kEvalStep})
      if (auto fn = module.lookupSymbol<func::FuncOp>(name))
        cast(fn, low);
  }

  void cast(func::FuncOp fn, Type low) {
    Type f32 = Float32Type::get(fn.getContext());
    llvm::DenseSet<Value> weak;
    OpBuilder b(fn.getContext());
    for (Operation &op : llvm::make_early_inc_range(fn.getOps())) {
      b.setInsertionPoint(&op);
      if (auto load = llvm::dyn_cast<LoadOp>(op)) {
        if (floatElement(load.getType()) != f32)
          continue;
        // Running statistics accumulate in f32 (the ops that move them have
        // a strong f32 operand); eval normalises by them in 16 bits.
        GlobalOp global = lookupGlobal(load, load.getGlobal());
        if (global && global->hasAttr(names::kBufferParamAttr) &&
            fn.getSymName() == names::kLossFn)
          continue;
        // One conversion per use: the adjoints of a parameter used twice (a
        // tied embedding) then meet at its f32 load and are summed in f32. CSE
        // merges the copies after autodiff.
        b.setInsertionPointAfter(load);
        for (OpOperand &use :
             llvm::make_early_inc_range(load.getResult().getUses()))
          use.set(convertTo(b, load.getResult(), low));
        continue;
      }
      if (auto store = llvm::dyn_cast<StoreOp>(op)) {
        GlobalOp global = lookupGlobal(store, store.getGlobal());
        if (global && global.getTensorType() != store.getValue().getType())
          store.getValueMutable().assign(convertTo(
              b, store.getValue(), global.getTensorType().getElementType()));
        continue;
      }
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, want] : llvm::enumerate(fn.getResultTypes()))
          if (ret.getOperand(i).getType() != want)
            ret.setOperand(i, convertTo(b, ret.getOperand(i),
                                        llvm::cast<RankedTensorType>(want)
                                            .getElementType()));
        continue;
      }
      bool allWeak = llvm::all_of(op.getOperands(),
                                  [&](Value v) { return weak.contains(v); });
      if (llvm::isa<ConstantOp>(op) || (op.getNumOperands() && allWeak)) {
        weak.insert(op.result_begin(), op.result_end());
        continue;
      }
      // Conversions keep the type they were built for; the loss ops give f32.
      if (llvm::isa<ConvertOp, CrossEntropyOp, CountCorrectOp>(op))
        continue;

      // The op computes in f32 if a strong operand is f32, else in 16 bits.
      bool anyFloat = false, strongF32 = false;
      for (Value v : op.getOperands())
        if (FloatType e = floatElement(v.getType())) {
          anyFloat = true;
          strongF32 |= e == f32 && !weak.contains(v);
        }
      if (!anyFloat)
        continue;
      Type compute = strongF32 ? f32 : low;
      for (OpOperand &use : op.getOpOperands())
        if (floatElement(use.get().getType()))
          use.set(convertTo(b, use.get(), compute));
      for (OpResult r : op.getResults()) {
        // Attention's log-sum-exp stays f32, the statistics' precision.
        if (auto a = llvm::dyn_cast<AttentionOp>(op); a && r == a.getLse())
          continue;
        if (floatElement(r.getType()))
          r.setType(llvm::cast<RankedTensorType>(r.getType()).clone(compute));
      }
    }
  }
};

} // namespace
