//===- FuseEpilogues.cpp - fold a bias and GELU into the product ----------===//
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
// A mixed-precision program narrows the product to 16 bits first, and its
// regions add the 16-bit bias to the widened 16-bit product:
//
//   h = narrow(mm);  fused(h, b16) { s = add(widen(a0), widen(a1)) ... }
//     => h = narrow(mm_bias(x, w, widen(b16)));  fused(h) { widen(a0) ... }
//
// The bias is then added to the f32 sums before the one rounding, as
// PyTorch's addmm does under autocast, rather than to the rounded product
// and rounded again; a region that only added the bias goes away (the qkv
// product's, before its split), which on a GPU is a full pass over the
// product less (cuBLASLt adds the bias in its epilogue).
//
// GELU after a narrowed product is taken from the f32 sums too, and so is
// its gradient by a narrowed product, as cuBLASLt's GELU epilogues compute
// them (dt/Transforms/ZeroCopyInfo.h's geluEpilogueOf says which form):
//
//   h = narrow(mm);  fused(h) { narrow(gelu(widen(a0))) }
//     => h, a = fused(mm) { narrow(a0), narrow(gelu(a0)) }
//   d = narrow(mm);  fused(pre, d) { narrow(widen(a1) *
//                                         widen(narrow(gelu_deriv(widen(a0)))))
//                                         }
//     => fused(mm, pre) { narrow(a0 * gelu_deriv(widen(a1))) }
//
// Each drops roundings (one forward, two backward). On a GPU the product
// then writes the region's results itself, and the region and its pass over
// the product go (CudaZeroCopy.h).
//
// A bias's gradient, the sum of dY over its rows, moves to right after the
// product of the weight's gradient, dY^T x, which reads the same dY: on a
// GPU cuBLASLt's BGRADB epilogue computes the sum as it reads dY for the
// product, and the region's pass over dY goes. Everywhere else only the
// order changes.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"
#include "dt/Transforms/ZeroCopyInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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

/// The region that only narrows `mm` (a product) to 16 bits, when that is
/// its one use.
FusedOp narrowingOf(Operation *mm) {
  if (!mm->hasOneUse())
    return {};
  auto fused = llvm::dyn_cast<FusedOp>(*mm->user_begin());
  if (!fused || fused.isReduction() || fused.getInputs().size() != 1 ||
      fused.getNumResults() != 1)
    return {};
  Block &body = fused.getBody().front();
  auto convert = llvm::dyn_cast<ConvertOp>(body.front());
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (!convert || convert.getInput() != body.getArgument(0) ||
      yield.getValues().size() != 1 ||
      yield.getValues().front() != convert.getResult())
    return {};
  Type half = convert.getType().getElementType();
  return half.isBF16() || half.isF16() ? fused : FusedOp();
}

Type elementOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getElementType();
}

/// `v` widened to f32 from `half` in a region's body: the 16-bit value, or
/// null.
Value widenedFrom(Value v, Type half) {
  auto convert = v.getDefiningOp<ConvertOp>();
  if (!convert || !convert.getType().getElementType().isF32() ||
      convert.getInput().getType() != convert.getType().clone(half))
    return {};
  return convert.getInput();
}

/// The bias that every use of the product `p` adds to it first, or null;
/// `uses` are those uses, in regions. A bias is a vector of the product's
/// last dimension and element type, broadcast over its rows. With `half`
/// (a mixed-precision program's narrowed product), the regions add the
/// widened bias to the widened product, both of that 16-bit type.
Value commonBias(Value p, Type half, SmallVectorImpl<OpOperand *> &uses) {
  int64_t n = shapeOf(p).back();
  Type elem = elementOf(p);
  if (p.use_empty() || !collectUses(p, n, uses))
    return {};
  // The value a region adds: `v` itself, or its widening from `half`.
  auto added = [&](Value v) { return half ? widenedFrom(v, half) : v; };
  Value bias;
  for (OpOperand *use : uses) {
    auto fused = llvm::cast<FusedOp>(use->getOwner());
    Block &body = fused.getBody().front();
    BlockArgument product = body.getArgument(use->getOperandNumber());
    if (product.use_empty())
      return {};
    SmallVector<Value> sums; // what the additions read for the product
    if (!half)
      sums.push_back(product);
    else
      for (Operation *widening : product.getUsers()) {
        if (widening->getNumResults() != 1)
          return {};
        sums.push_back(widening->getResult(0));
      }
    for (Value sum : sums) {
      if (added(sum) != product || sum.use_empty())
        return {};
      for (Operation *user : sum.getUsers()) {
        auto add = llvm::dyn_cast<AddOp>(user);
        if (!add)
          return {};
        Value other = add.getLhs() == sum ? add.getRhs() : add.getLhs();
        auto arg = llvm::dyn_cast_or_null<BlockArgument>(added(other));
        if (!arg || arg == product || arg.getOwner() != &body)
          return {};
        Value b = fused.getInputs()[arg.getArgNumber()];
        auto t = llvm::cast<RankedTensorType>(b.getType());
        if (t.getShape() != ArrayRef<int64_t>{n} ||
            t.getElementType() != elem || (bias && b != bias))
          return {};
        bias = b;
      }
    }
  }
  return bias;
}

/// Erases the ops of `body` nothing reads any more, and a narrowing of a
/// widening of the same 16-bit value (an exact round trip) becomes that
/// value.
void cleanUp(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(body))
    if (auto narrow = llvm::dyn_cast<ConvertOp>(op))
      if (auto widen = narrow.getInput().getDefiningOp<ConvertOp>())
        if (widen.getInput().getType() == narrow.getType() &&
            widen.getType().getElementType().getIntOrFloatBitWidth() >
                narrow.getType().getElementType().getIntOrFloatBitWidth())
          narrow.getResult().replaceAllUsesWith(widen.getInput());
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty())
      op.erase();
}

/// Erases `op` when nothing reads its results but reshapes that nothing
/// reads either (erased too).
void eraseUnread(Operation *op) {
  for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
    if (llvm::isa<ReshapeOp>(user))
      eraseUnread(user);
  if (op->use_empty())
    op->erase();
}

/// Whether `op` is a region that narrows to `half` the GELU of its one
/// input widened from `half`: fused(h) { narrow(gelu(widen(h))) }.
bool isGeluOfWidened(Operation *op, Type half) {
  auto fused = llvm::dyn_cast<FusedOp>(op);
  if (!fused || fused.isReduction() || fused.getInputs().size() != 1 ||
      fused.getNumResults() != 1)
    return false;
  Block &body = fused.getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  Value narrowed = unconvert(yield.getValues().front(), half);
  auto gelu = narrowed ? narrowed.getDefiningOp<GeluOp>() : GeluOp();
  Type f32 = Float32Type::get(op->getContext());
  return gelu && unconvert(gelu.getInput(), f32) == body.getArgument(0) &&
         body.getOperations().size() == 4;
}

/// When `op` is the region of GELU's gradient in a mixed-precision backward
/// pass that reads `dy` (the narrowed product), of 16-bit type `half`:
/// fused(pre, dy) { narrow(widen(dy) * widen(narrow(gelu_deriv(widen(pre)))))
/// }, the pre-activation it reads; else null.
Value geluGradInput(Operation *op, Value dy, Type half) {
  auto fused = llvm::dyn_cast<FusedOp>(op);
  if (!fused || fused.isReduction() || fused.getInputs().size() != 2 ||
      fused.getNumResults() != 1 || elementOf(fused.getResult(0)) != half)
    return {};
  Block &body = fused.getBody().front();
  Type f32 = Float32Type::get(op->getContext());
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  Value product = unconvert(yield.getValues().front(), half);
  auto mul = product ? product.getDefiningOp<MulOp>() : MulOp();
  if (!mul || body.getOperations().size() != 8)
    return {};
  for (auto [gradient, derivative] : {std::pair(mul.getLhs(), mul.getRhs()),
                                      std::pair(mul.getRhs(), mul.getLhs())}) {
    auto dyArg =
        llvm::dyn_cast_or_null<BlockArgument>(unconvert(gradient, f32));
    Value rounded = unconvert(unconvert(derivative, f32), half);
    auto deriv = rounded ? rounded.getDefiningOp<GeluDerivOp>() : GeluDerivOp();
    auto preArg = llvm::dyn_cast_or_null<BlockArgument>(
        deriv ? unconvert(deriv.getInput(), f32) : Value());
    if (!dyArg || !preArg || dyArg == preArg ||
        viewRoot(fused.getInputs()[dyArg.getArgNumber()]) != dy)
      continue;
    Value pre = fused.getInputs()[preArg.getArgNumber()];
    if (elementOf(pre) == half && shapeOf(pre) == shapeOf(fused.getResult(0)))
      return pre;
  }
  return {};
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
      if (Value bias = commonBias(mm.getResult(), Type(), uses)) {
        fold(mm, bias, uses);
        continue;
      }
      uses.clear();
      if (FusedOp narrowing = narrowingOf(mm))
        if (Value bias = commonBias(narrowing.getResult(0),
                                    elementOf(narrowing.getResult(0)), uses))
          foldHalf(mm, narrowing, bias, uses);
    }
    // Then GELU and its gradient after narrowed products, biased or not.
    SmallVector<Operation *> narrowed;
    fn.walk([&](Operation *op) {
      if (llvm::isa<MatmulOp, MatmulBiasOp>(op))
        narrowed.push_back(op);
    });
    for (Operation *mm : narrowed)
      if (FusedOp narrowing = narrowingOf(mm))
        if (!foldGelu(mm, narrowing))
          foldGeluGrad(mm, narrowing);
    sinkBiasGradients(fn.getBody().front());
  }

  /// Moves each bias gradient's sum of dY (a region that sumsProductRows)
  /// to right after the weight gradient's product that reads the same dY,
  /// with whatever reads the sum before that product, so that on a GPU the
  /// product's epilogue can compute it (ZeroCopyCandidates::biasGrads).
  /// Only the order changes; the moved ops are all free of side effects.
  static void sinkBiasGradients(Block &block) {
    SmallVector<std::pair<Operation *, Value>> sums; // the sum, its dY
    for (Operation &op : block)
      if (Value dy = summedRows(&op))
        sums.push_back({&op, dy});
    for (auto [sum, dy] : sums) {
      // The first product after the sum that reads its dY: through the
      // widenings that read dY (through reshapes).
      Operation *product = nullptr;
      SmallVector<Operation *> widenings;
      readersOf(viewRoot(dy), widenings);
      for (Operation *widening : widenings) {
        if (!isWidening(widening))
          continue;
        SmallVector<Operation *> readers;
        readersOf(widening->getResult(0), readers);
        for (Operation *reader : readers)
          if (reader->getBlock() == &block && sum->isBeforeInBlock(reader) &&
              sumsProductRows(sum, reader) &&
              (!product || reader->isBeforeInBlock(product)))
            product = reader;
      }
      if (!product)
        continue;
      // The sum and what reads it, transitively, before the product.
      llvm::SetVector<Operation *> moved;
      moved.insert(sum);
      bool movable = true;
      for (Operation *op = sum->getNextNode(); op != product && movable;
           op = op->getNextNode())
        if (llvm::any_of(op->getOperands(), [&](Value v) {
              return moved.contains(v.getDefiningOp());
            })) {
          // (A region computes on its operands alone.)
          movable = llvm::isa<FusedOp>(op) || isMemoryEffectFree(op);
          moved.insert(op);
        }
      // The product reading the sum (it never does) would keep it first.
      movable &= llvm::none_of(product->getOperands(), [&](Value v) {
        return moved.contains(v.getDefiningOp());
      });
      if (!movable)
        continue;
      Operation *after = product;
      for (Operation *op : moved) {
        op->moveAfter(after);
        after = op;
      }
    }
  }

  /// GELU of the narrowed product: the regions that compute it (through
  /// reshapes of the narrowing) are replaced by a second result of one
  /// region that narrows the product's f32 sums and their GELU. Returns
  /// whether there was one.
  bool foldGelu(Operation *mm, FusedOp narrowing) {
    Type half = elementOf(narrowing.getResult(0));
    SmallVector<Operation *> readers, gelus;
    readersOf(narrowing.getResult(0), readers);
    for (Operation *reader : readers)
      if (isGeluOfWidened(reader, half))
        gelus.push_back(reader);
    if (gelus.empty())
      return false;
    Location loc = gelus.front()->getLoc();
    OpBuilder b(narrowing);
    Type narrowType = narrowing.getResult(0).getType();
    auto both =
        b.create<FusedOp>(loc, TypeRange{narrowType, narrowType},
                          ValueRange{mm->getResult(0)}, DenseI64ArrayAttr());
    Block *body =
        b.createBlock(&both.getBody(), {}, {mm->getResult(0).getType()}, {loc});
    Value sums = body->getArgument(0);
    Value pre = b.create<ConvertOp>(loc, narrowType, sums);
    Value gelu = b.create<ConvertOp>(loc, narrowType,
                                     b.create<GeluOp>(loc, sums).getResult());
    b.create<YieldOp>(loc, ValueRange{pre, gelu});
    narrowing.getResult(0).replaceAllUsesWith(both.getResult(0));
    narrowing.erase();
    for (Operation *old : gelus) {
      b.setInsertionPoint(old);
      Value view = both.getResult(1);
      if (view.getType() != old->getResult(0).getType())
        view = b.create<ReshapeOp>(old->getLoc(), old->getResult(0).getType(),
                                   view);
      old->getResult(0).replaceAllUsesWith(view);
      old->erase();
    }
    return true;
  }

  /// The gradient of GELU by the narrowed product (backward's dY w^T): the
  /// region that multiplies the widened product by GELU's rounded
  /// derivative, when the narrowing has no other reader, becomes one that
  /// multiplies the f32 sums by the derivative, right after the product.
  void foldGeluGrad(Operation *mm, FusedOp narrowing) {
    Type half = elementOf(narrowing.getResult(0));
    SmallVector<Operation *> readers;
    readersOf(narrowing.getResult(0), readers);
    Value pre =
        readers.size() == 1
            ? geluGradInput(readers.front(), narrowing.getResult(0), half)
            : Value();
    // The pre-activation must be there before the product.
    Operation *preDef = pre ? pre.getDefiningOp() : nullptr;
    if (!pre || (preDef && (preDef->getBlock() != mm->getBlock() ||
                            !preDef->isBeforeInBlock(mm))))
      return;
    Operation *old = readers.front();
    Location loc = old->getLoc();
    OpBuilder b(narrowing);
    auto productType = llvm::cast<RankedTensorType>(mm->getResult(0).getType());
    Type preType = productType.clone(half);
    if (pre.getType() != preType)
      pre = b.create<ReshapeOp>(loc, preType, pre);
    auto grad = b.create<FusedOp>(loc, TypeRange{preType},
                                  ValueRange{mm->getResult(0), pre},
                                  DenseI64ArrayAttr());
    Block *body =
        b.createBlock(&grad.getBody(), {}, {productType, preType}, {loc, loc});
    Value derivative = b.create<GeluDerivOp>(
        loc, b.create<ConvertOp>(loc, productType, body->getArgument(1))
                 .getResult());
    Value product = b.create<MulOp>(loc, body->getArgument(0), derivative);
    b.create<YieldOp>(
        loc,
        ValueRange{b.create<ConvertOp>(loc, preType, product).getResult()});
    b.setInsertionPointAfter(grad);
    Value view = grad.getResult(0);
    if (view.getType() != old->getResult(0).getType())
      view = b.create<ReshapeOp>(loc, old->getResult(0).getType(), view);
    old->getResult(0).replaceAllUsesWith(view);
    old->erase();
    eraseUnread(narrowing);
  }

  /// The mixed-precision fold: `mm` with the widened 16-bit `bias`, and the
  /// regions that `uses` enter read the narrowed sum without adding it.
  void foldHalf(MatmulOp mm, FusedOp narrowing, Value bias,
                ArrayRef<OpOperand *> uses) {
    // The widened bias, then the product, after both the product and the
    // bias; the narrowing (and its reshapes) follow, before every use,
    // which reads the bias too.
    OpBuilder b(mm);
    Operation *def = bias.getDefiningOp();
    if (def && def->getBlock() == mm->getBlock() && mm->isBeforeInBlock(def))
      b.setInsertionPointAfter(def);
    auto biasType = llvm::cast<RankedTensorType>(bias.getType());
    auto wideType = biasType.clone(b.getF32Type());
    auto wide = b.create<FusedOp>(mm.getLoc(), TypeRange{wideType},
                                  ValueRange{bias}, DenseI64ArrayAttr());
    Block *body = b.createBlock(&wide.getBody(), {}, {biasType}, {mm.getLoc()});
    auto widen =
        b.create<ConvertOp>(mm.getLoc(), wideType, body->getArgument(0));
    b.create<YieldOp>(mm.getLoc(), ValueRange{widen.getResult()});
    b.setInsertionPointAfter(wide);
    auto folded = b.create<MatmulBiasOp>(
        mm.getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(), wide.getResult(0),
        mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
    folded->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
    mm.getResult().replaceAllUsesWith(folded.getResult());
    mm.erase();
    if (narrowing->isBeforeInBlock(folded))
      narrowing->moveAfter(folded);
    followDefinition(narrowing.getResult(0));

    llvm::SetVector<Operation *> users;
    for (OpOperand *use : uses) {
      auto fused = llvm::cast<FusedOp>(use->getOwner());
      Block &regionBody = fused.getBody().front();
      BlockArgument product = regionBody.getArgument(use->getOperandNumber());
      for (Operation *widening : product.getUsers())
        for (Operation *add :
             llvm::make_early_inc_range(widening->getUsers())) {
          add->getResult(0).replaceAllUsesWith(widening->getResult(0));
          add->erase();
        }
      cleanUp(regionBody);
      users.insert(fused);
    }
    for (Operation *fused : users)
      simplify(llvm::cast<FusedOp>(fused));
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
