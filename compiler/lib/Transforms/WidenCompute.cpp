//===- WidenCompute.cpp - 16-bit storage, f32 arithmetic ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// After dt-autocast and dt-autodiff the train step computes on bf16 (or f16)
// tensors. The CPU has no 16-bit arithmetic worth using and the kernels take
// f32, so this pass makes 16 bits a storage format: each computing op gets its
// 16-bit operands converted to f32 just before it and its results converted
// back just after it. Fusion then folds the conversions into the elementwise
// loops (a load widens, a store narrows), and a kernel reads an f32 copy that
// lives only around its call, so what is kept between forward and backward is
// still 16-bit. Results round to 16 bits once per op, as PyTorch's bf16 ops
// do.
//
// The pass must see each use's own conversion: it runs after CSE, which would
// merge backward's widening of an activation with forward's and keep the f32
// copy alive between them.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace dt {
#define GEN_PASS_DEF_WIDENCOMPUTE
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

bool isNarrowFloat(Type t) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(t);
  return tensor && (tensor.getElementType().isBF16() ||
                    tensor.getElementType().isF16());
}

/// Ops that move or name 16-bit data without computing on it.
bool keepsStorageType(Operation &op) {
  return llvm::isa<LoadOp, StoreOp, ConstantOp, ConvertOp, ReshapeOp,
                   TransposeOp, BroadcastToOp, SplitOp, ConcatOp>(op) ||
         op.hasTrait<OpTrait::IsTerminator>();
}

struct WidenComputePass
    : public dt::impl::WidenComputeBase<WidenComputePass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>())
      widen(fn);
  }

  void widen(func::FuncOp fn) {
    Type f32 = Float32Type::get(fn.getContext());
    // Values made of constants alone: their f32 originals are exact.
    llvm::DenseSet<Value> constant;
    OpBuilder b(fn.getContext());
    for (Operation &op : llvm::make_early_inc_range(fn.getOps())) {
      if (llvm::isa<ConstantOp>(op) ||
          (op.getNumOperands() &&
           llvm::all_of(op.getOperands(),
                        [&](Value v) { return constant.contains(v); })))
        constant.insert(op.result_begin(), op.result_end());
      if (keepsStorageType(op) ||
          (llvm::none_of(op.getOperandTypes(), isNarrowFloat) &&
           llvm::none_of(op.getResultTypes(), isNarrowFloat)))
        continue;
      b.setInsertionPoint(&op);
      for (OpOperand &use : op.getOpOperands()) {
        Value v = use.get();
        if (!isNarrowFloat(v.getType()))
          continue;
        auto narrowed = v.getDefiningOp<ConvertOp>();
        if (narrowed && constant.contains(narrowed.getInput()) &&
            narrowed.getInput().getType() ==
                llvm::cast<RankedTensorType>(v.getType()).clone(f32)) {
          use.set(narrowed.getInput());
          if (narrowed->use_empty()) {
            constant.erase(narrowed.getResult()); // its address may be reused
            narrowed->erase();
          }
        } else
          use.set(b.create<ConvertOp>(
              v.getLoc(), llvm::cast<RankedTensorType>(v.getType()).clone(f32),
              v));
      }
      b.setInsertionPointAfter(&op);
      for (OpResult r : op.getResults()) {
        if (!isNarrowFloat(r.getType()))
          continue;
        auto narrow = llvm::cast<RankedTensorType>(r.getType());
        r.setType(narrow.clone(f32));
        auto back = b.create<ConvertOp>(r.getLoc(), narrow, r);
        r.replaceAllUsesExcept(back, back);
      }
    }
  }
};

} // namespace
