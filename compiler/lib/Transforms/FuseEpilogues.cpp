//===- FuseEpilogues.cpp - fold a product's bias into the product ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// After dt-fuse-elementwise, every `x @ w + b` is a dt.matmul whose result a
// dt.fused region reads and adds a broadcast bias to. BLAS computes
// C = alpha A B + beta C: with C filled with the bias rows and beta = 1, the
// library adds the bias in the pass it makes over C anyway, and the region no
// longer reads the bias or makes the sum. The rewrite needs every use of the
// product to be such a region, each adding the same bias before anything else
// reads the product (the backward pass recomputes `x @ w + b` from the
// product, so a forward region and its recomputing twin both qualify):
// otherwise some use would need the product without its bias.
//
// A region that did nothing but the addition forwards its operand and goes
// away, which removes one full pass over the product (the Linear layers whose
// outputs feed a split, a reshape or a hand-written kernel).
//
// Pattern: fused(mm, b) { s = add(a0, a1); relu(s) }
//            => fused(mm_bias(x, w, b)) { relu(a0) }
// Pattern: fused(mm, b) { s = add(a0, a1); yield s }  =>  mm_bias(x, w, b)
// Pattern: fused(reshape(mm), b) { add(a0, a1) ... } when the reshape keeps the
//          rows (MLIRGen's flattened `x[B, T, C] @ w`) => reshape(mm_bias(...))
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace dt {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// The regions that read `value`, directly or through reshapes that keep its
/// rows (the last dimension, `n`): MLIRGen flattens `x[B, T, C] @ w` into a
/// 2-D product and reshapes it back. False when something else reads it.
bool collectUses(Value value, int64_t n, SmallVectorImpl<OpOperand *> &uses) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
      if (shapeOf(reshape.getResult()).back() != n ||
          !collectUses(reshape.getResult(), n, uses))
        return false;
      continue;
    }
    auto fused = llvm::dyn_cast<FusedOp>(user);
    if (!fused || fused.getIterationShape() != shapeOf(value))
      return false;
    uses.push_back(&use);
  }
  return true;
}

/// The bias that every use of `mm` adds to it first, or null; `uses` are
/// those uses, in regions. A bias is a vector of the product's last dimension
/// and element type, broadcast over its rows.
Value commonBias(MatmulOp mm, SmallVectorImpl<OpOperand *> &uses) {
  int64_t n = shapeOf(mm.getResult()).back();
  Type elem = mm.getType().getElementType();
  if (mm->use_empty() || !collectUses(mm.getResult(), n, uses))
    return {};
  Value bias;
  for (OpOperand *use : uses) {
    auto fused = llvm::cast<FusedOp>(use->getOwner());
    Block &body = fused.getBody().front();
    BlockArgument product = body.getArgument(use->getOperandNumber());
    if (product.use_empty())
      return {};
    for (Operation *user : product.getUsers()) {
      auto add = llvm::dyn_cast<AddOp>(user);
      if (!add)
        return {};
      Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
      auto arg = llvm::dyn_cast<BlockArgument>(other);
      if (!arg || arg == product || arg.getOwner() != &body)
        return {};
      Value b = fused.getInputs()[arg.getArgNumber()];
      auto t = llvm::cast<RankedTensorType>(b.getType());
      if (t.getShape() != ArrayRef<int64_t>{n} || t.getElementType() != elem ||
          (bias && b != bias))
        return {};
      bias = b;
    }
  }
  return bias;
}

/// Drops what `fused` no longer needs: results that forward one of its
/// operands unchanged (their users read the operand), then operands the body
/// does not read. The whole op goes when no result is left.
void simplify(FusedOp fused) {
  Block &body = fused.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (!fused.isReduction())
    for (auto [result, value] :
         llvm::zip(fused.getResults(), yield.getValues()))
      if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
        Value input = fused.getInputs()[arg.getArgNumber()];
        if (input.getType() == result.getType())
          result.replaceAllUsesWith(input);
      }

  SmallVector<Value> keptValues;
  SmallVector<Value> keptResults;
  for (auto [result, value] :
       llvm::zip(fused.getResults(), yield.getValues()))
    if (fused.isReduction() || !result.use_empty()) {
      keptResults.push_back(result);
      keptValues.push_back(value);
    }
  if (keptResults.empty()) {
    fused.erase();
    return;
  }
  yield->setOperands(keptValues);

  SmallVector<Value> keptInputs;
  llvm::BitVector unused(body.getNumArguments());
  for (BlockArgument arg : body.getArguments()) {
    if (arg.use_empty())
      unused.set(arg.getArgNumber());
    else
      keptInputs.push_back(fused.getInputs()[arg.getArgNumber()]);
  }
  if (unused.none() && keptResults.size() == fused.getNumResults())
    return;

  OpBuilder b(fused);
  auto rebuilt = b.create<FusedOp>(fused.getLoc(),
                                   ValueRange(keptResults).getTypes(),
                                   keptInputs, fused.getReduceAxesAttr());
  rebuilt->setDiscardableAttrs(fused->getDiscardableAttrDictionary());
  rebuilt.getBody().takeBody(fused.getBody());
  rebuilt.getBody().front().eraseArguments(unused);
  for (auto [from, to] : llvm::zip(keptResults, rebuilt.getResults()))
    from.replaceAllUsesWith(to);
  fused.erase();
}

/// Moves the reshapes of `value` (and theirs) after its definition when they
/// were before it: the product may have moved past them, after the bias.
void followDefinition(Value value) {
  Operation *def = value.getDefiningOp();
  for (Operation *user : llvm::make_early_inc_range(value.getUsers()))
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(user)) {
      if (reshape->isBeforeInBlock(def))
        reshape->moveAfter(def);
      followDefinition(reshape.getResult());
    }
}

struct FuseEpiloguesPass
    : public dt::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    SmallVector<MatmulOp> products;
    fn.walk([&](MatmulOp mm) { products.push_back(mm); });
    for (MatmulOp mm : products) {
      SmallVector<OpOperand *> uses;
      if (Value bias = commonBias(mm, uses))
        fold(mm, bias, uses);
    }
  }

  /// Replaces `mm` by the product with `bias` and removes the additions
  /// from the regions that `uses` enter.
  void fold(MatmulOp mm, Value bias, ArrayRef<OpOperand *> uses) {
    // Every use reads the bias too, so just after the later of the product
    // and the bias's definition still precedes them all (and the reshapes
    // between, which read only the product).
    OpBuilder b(mm);
    Operation *def = bias.getDefiningOp();
    if (def && def->getBlock() == mm->getBlock() && mm->isBeforeInBlock(def))
      b.setInsertionPointAfter(def);
    auto folded = b.create<MatmulBiasOp>(
        mm.getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(), bias,
        mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
    folded->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
    mm.getResult().replaceAllUsesWith(folded.getResult());
    mm.erase();
    followDefinition(folded.getResult());

    llvm::SetVector<Operation *> users;
    for (OpOperand *use : uses) {
      auto fused = llvm::cast<FusedOp>(use->getOwner());
      BlockArgument product =
          fused.getBody().front().getArgument(use->getOperandNumber());
      for (Operation *add : llvm::make_early_inc_range(product.getUsers())) {
        add->getResult(0).replaceAllUsesWith(product);
        add->erase();
      }
      users.insert(fused);
    }
    for (Operation *fused : users)
      simplify(llvm::cast<FusedOp>(fused));
  }
};

} // namespace
