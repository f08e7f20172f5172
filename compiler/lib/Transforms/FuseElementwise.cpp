//===- FuseElementwise.cpp - group elementwise ops into dt.fused ----------===//
//
// Greedy producer-consumer fusion of a straight-line body. The algorithm:
//
//   1. Walk ops in order. An elementwise op X starts a group; it joins (and
//      merges) the groups of its elementwise producers that have X's shape,
//      provided every value those groups make that is used outside them is used
//      *after* X. The fused op will sit where the group's last op is, so that
//      rule is exactly what keeps every use after its definition; no cycle can
//      form.
//   2. `dt.broadcast_to` of a value into a group's shape is absorbed: the group
//      takes the smaller value as an operand and broadcasts it in its loop (the
//      broadcast op stays only if something else uses it). Splat constants are
//      cloned into the body.
//   3. Each group becomes one dt.fused at its last op; values used outside are
//      yielded. Singletons become dt.fused too, and so does a broadcast that
//      nothing absorbed, so that lowering has a single elementwise form.
//
// Last, step 6 lets a region that repeats a live earlier one's work read its
// value instead (mergeTwins).
//
// Two refinements keep intermediate values out of memory:
//   0. Before grouping, a cheap elementwise op (one or two operands) whose
//      every user could fuse with it is duplicated, one copy per user:
//      recomputing it in each consumer's loop is cheaper than writing it out
//      and reading it back.
//   4. A sum (dt.reduce_sum over all, the leading or the trailing axes, or
//      both around kept ones) whose operand is the one value a group makes is
//      absorbed too: the group becomes a dt.fused with reduce_axes, and the
//      summed values never reach memory. Around kept axes (a batch norm's
//      statistics over N, H and W) the group may also read one value per kept
//      element (the channel's mean).
//   5. A widening (a 16-bit value converted to f32) that only such a sum
//      reads does not join the group of a 16-bit value written out anyway:
//      it starts its own group, which absorbs the sum. The sum then reads the
//      16-bit values (a bias gradient of a bf16 program: 2 bytes an element
//      read, instead of 4 written beside them and read back). Nor does one
//      that only a kernel able to read 16-bit data reads, whatever else
//      reads the 16-bit value (a layer norm's x: dt/Transforms/
//      ZeroCopyInfo.h): the group writes the 16-bit values, a GPU plan
//      leaves the widening out and the kernel reads them (2 bytes an element
//      written and 2 read, instead of 4 and 4), while the CPU makes one more
//      pass, the widening's. Likewise nothing joins the narrowing of the one
//      result of such a kernel that can write 16-bit data (a layer norm
//      gradient's dx): the kernel writes the 16-bit values itself on a GPU.
//      And a parameter's 16-bit copy that several widenings read (the
//      forward's product and the backward's) is neither copied into them
//      (step 0) nor joined by them: it is written once and kept, and on a
//      GPU the products read it where it lies, one pass a parameter
//      instead of one a use.
//
// Pattern: relu(x @ w + broadcast(b)) => fused(mm, b) { add; relu }
// Pattern: reduce_sum(g * g)            => fused(g) {reduce_axes} { mul }
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"
#include "dt/Transforms/ZeroCopyInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"

namespace dt {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && llvm::cast<DenseElementsAttr>(c.getValue()).isSplat();
}

/// Elementwise ops that fusion groups (constants are cloned, never grouped).
bool isFusible(Operation *op) {
  return llvm::isa<ScalarizableOpInterface>(op) && !llvm::isa<ConstantOp>(op) &&
         op->getNumResults() == 1;
}

/// A sum a fused region can end in: of floats, over all, the leading or the
/// trailing axes, or both around kept ones (what lowering vectorises).
bool isFusibleReduction(Operation *op) {
  auto r = llvm::dyn_cast_or_null<ReduceSumOp>(op);
  if (!r || !llvm::isa<FloatType>(r.getType().getElementType()))
    return false;
  ArrayRef<int64_t> axes = r.getAxes();
  int64_t rank = shapeOf(r.getInput()).size();
  if (axes.empty())
    return false;
  bool leading =
      axes.front() == 0 && axes.back() == static_cast<int64_t>(axes.size()) - 1;
  bool trailing = axes.back() == rank - 1 &&
                  axes.front() == rank - static_cast<int64_t>(axes.size());
  return leading || trailing ||
         reducesAround(reductionRuns(shapeOf(r.getInput()), axes));
}

/// Whether `operand` (right-aligned to `shape`) varies along the kept
/// dimensions of a sum around them only, and along all of them: a batch
/// norm's per-channel mean or scale, which the lowering reads once per kept
/// element.
bool alongKeptOnly(ArrayRef<int64_t> operand, ArrayRef<int64_t> shape,
                   ArrayRef<int64_t> axes) {
  if (operand.size() > shape.size())
    return false;
  size_t lead = shape.size() - operand.size();
  for (auto [d, size] : llvm::enumerate(shape)) {
    int64_t o = d < lead ? 1 : operand[d - lead];
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(d));
    if (o != (reduced ? 1 : size))
      return false;
  }
  return true;
}

/// Step 5: whether `op` widens a 16-bit value for a kernel that reads 16-bit
/// data alone, or, when the value is read elsewhere too, for a sum alone.
bool widensForOneReader(Operation *op) {
  auto convert = llvm::dyn_cast<ConvertOp>(op);
  if (!convert || !convert.getType().getElementType().isF32() ||
      !convert.getResult().hasOneUse())
    return false;
  Type from = llvm::cast<RankedTensorType>(convert.getInput().getType())
                  .getElementType();
  if (!from.isBF16() && !from.isF16())
    return false;
  Operation *reader = *convert.getResult().getUsers().begin();
  if (readsSixteenBit(reader, convert.getResult()))
    return true;
  return isFusibleReduction(reader) && !convert.getInput().hasOneUse();
}

/// Step 5: whether `op` only narrows to 16 bits the result of a kernel that
/// can write it as 16-bit data (no consumer joins it).
bool narrowsForOneWriter(Operation *op) {
  auto convert = llvm::dyn_cast<ConvertOp>(op);
  if (!convert || !convert.getInput().hasOneUse() ||
      !writesSixteenBit(convert.getInput()))
    return false;
  Type to = convert.getType().getElementType();
  return to.isBF16() || to.isF16();
}

/// Steps 0 and 5: whether `op` narrows a loaded global (a parameter) to 16
/// bits for several widenings back to f32 for products (the forward's and
/// the backward's): it is not copied into each of them, and they do not
/// join it.
/// The 16-bit copy is then written once and kept, and each widening is a
/// region of its own, which a GPU plan leaves out where products read it
/// (their operands' 16-bit copies where they lie); on the CPU that is one
/// pass more, the copy's.
bool narrowsLoadForWidenings(Operation *op) {
  auto convert = llvm::dyn_cast_or_null<ConvertOp>(op);
  if (!convert || !convert.getInput().getDefiningOp<LoadOp>())
    return false;
  Type to = convert.getType().getElementType();
  if ((!to.isBF16() && !to.isF16()) || convert->hasOneUse())
    return false;
  // A product padded to 16-byte extents (dt/Target's CudaPadding.h) reads
  // and zeroes rows past the operand: the memory plan gives a kept copy
  // room for them (ZeroCopyCandidates::rowRooms: GPT-2's 50 257-row table),
  // but a copy has no room for columns past a row it lays out packed.
  if (convert.getType().getRank() < 2 ||
      convert.getType().getShape().back() % 8 != 0)
    return false;
  // Widenings for products alone, which read the 16-bit copy on a GPU (a
  // layer norm's weight, widened for a kernel that reads f32, stays copied
  // into each widening: a kept copy would add a pass).
  return llvm::all_of(convert->getUsers(), [](Operation *user) {
    auto widen = llvm::dyn_cast<ConvertOp>(user);
    return widen && widen.getType().getElementType().isF32() &&
           !widen->use_empty() &&
           llvm::all_of(widen->getUsers(),
                        [](Operation *u) { return llvm::isa<MatmulOp>(u); });
  });
}

/// Step 0: one copy of a cheap elementwise op per user, when every user could
/// fuse it. Not when a user is a widening that step 5 keeps out of regions
/// (for a kernel that reads 16-bit data, a layer norm's x): the value is then
/// written anyway, and reading it costs no more than recomputing it from its
/// operands (GPT-2's residual sum x + attn, which the second residual add
/// recomputed from x and attn while the norm read it written).
void duplicateCheapProducers(Block &block) {
  SmallVector<Operation *> candidates;
  for (Operation &op : block)
    if (isFusible(&op) && op.getNumOperands() <= 2 &&
        !narrowsLoadForWidenings(&op))
      candidates.push_back(&op);
  for (Operation *op : llvm::reverse(candidates)) {
    llvm::SetVector<Operation *> users(op->getUsers().begin(),
                                       op->getUsers().end());
    if (users.size() < 2 || users.size() > 4)
      continue;
    ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
    bool allFuse = llvm::all_of(users, [&](Operation *u) {
      return (isFusible(u) && !widensForOneReader(u) &&
              shapeOf(u->getResult(0)) == shape) ||
             isFusibleReduction(u);
    });
    if (!allFuse)
      continue;
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    for (Operation *user : users.getArrayRef().drop_front())
      user->replaceUsesOfWith(op->getResult(0), b.clone(*op)->getResult(0));
  }
}

struct FuseElementwisePass
    : public dt::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("dt-fuse-elementwise needs a single-block function");
      return signalPassFailure();
    }
    fuse(fn.getBody().front());
  }

  void fuse(Block &block) {
    duplicateCheapProducers(block);

    // Position of each op, for the "used after" rule.
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : block)
      position[&op] = position.size();

    // 1. Grouping, as equivalence classes of ops.
    llvm::EquivalenceClasses<Operation *> groups;
    auto leader = [&](Operation *op) { return groups.getLeaderValue(op); };
    auto members = [&](Operation *op) {
      return SmallVector<Operation *>(
          groups.member_begin(groups.findValue(leader(op))),
          groups.member_end());
    };
    // Whether every use outside `op`'s group, other than by `joining`, is after
    // `joining`.
    auto usedOnlyAfter = [&](Operation *op, Operation *joining) {
      Operation *lead = leader(op);
      for (Operation *m : members(op))
        for (Operation *user : m->getUsers()) {
          if (user == joining || ((groups.findValue(user) != groups.end()) &&
                                  leader(user) == lead))
            continue;
          if (position[user] <= position[joining])
            return false;
        }
      return true;
    };

    SmallVector<Operation *> fusible;
    for (Operation &op : block) {
      if (!isFusible(&op))
        continue;
      fusible.push_back(&op);
      groups.insert(&op);
      if (widensForOneReader(&op) ||
          (op.getNumOperands() == 1 &&
           narrowsLoadForWidenings(op.getOperand(0).getDefiningOp())))
        continue;
      ArrayRef<int64_t> shape = shapeOf(op.getResult(0));
      for (Value operand : op.getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || !(groups.findValue(producer) != groups.end()) ||
            leader(producer) == leader(&op) || narrowsForOneWriter(producer) ||
            shapeOf(producer->getResult(0)) != shape ||
            !usedOnlyAfter(producer, &op))
          continue;
        groups.unionSets(producer, &op);
      }
    }

    // 2-3. One dt.fused per group, each at its last op.
    llvm::SetVector<Operation *> leaders;
    for (Operation *op : fusible)
      leaders.insert(leader(op));
    SmallVector<SmallVector<Operation *>> toBuild;
    for (Operation *lead : leaders) {
      SmallVector<Operation *> ops = members(lead);
      llvm::sort(ops, [&](Operation *a, Operation *b) {
        return position[a] < position[b];
      });
      toBuild.push_back(std::move(ops));
    }
    for (ArrayRef<Operation *> ops : toBuild)
      materialize(ops, reductionOf(ops));

    // Broadcasts and constants that fused regions absorbed may now be dead;
    // broadcasts that something else still needs become copies of their own.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (llvm::isa<BroadcastToOp, ConstantOp>(op) && op.use_empty())
        op.erase();
    SmallVector<Operation *> broadcasts;
    for (Operation &op : block)
      if (llvm::isa<BroadcastToOp>(op))
        broadcasts.push_back(&op);
    for (Operation *bc : broadcasts)
      materialize({bc});
    mergeTwins(block);
  }

  /// Step 6: a region that computes what an earlier one computes, from the
  /// same operands, while the earlier one's value is still live, reads that
  /// value instead (the copies step 0 made for consumers that did not fuse
  /// them: a residual sum that a layer norm's widening and backward both
  /// read). A twin made after the first one's last use stays: it is a
  /// recomputation, which keeps memory free in between.
  static void mergeTwins(Block &block) {
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : block)
      position[&op] = position.size();
    auto lastUse = [&](Operation *op) {
      unsigned last = position[op];
      for (Operation *user : op->getUsers())
        last = std::max(last, position[block.findAncestorOpInBlock(*user)]);
      return last;
    };
    llvm::DenseMap<Value, SmallVector<FusedOp>> byFirstInput;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto fused = llvm::dyn_cast<FusedOp>(op);
      if (!fused || fused.getInputs().empty())
        continue;
      SmallVector<FusedOp> &seen = byFirstInput[fused.getInputs().front()];
      FusedOp twin;
      for (FusedOp earlier : seen)
        if (position[fused] <= lastUse(earlier) &&
            OperationEquivalence::isEquivalentTo(
                earlier, fused, OperationEquivalence::IgnoreLocations)) {
          twin = earlier;
          break;
        }
      if (!twin) {
        seen.push_back(fused);
        continue;
      }
      fused->replaceAllUsesWith(twin);
      fused.erase();
    }
  }

  /// Step 4: the sum a group can end in: the only user of the only value the
  /// group makes, when every operand the group reads has the group's shape or
  /// is a scalar.
  static ReduceSumOp reductionOf(ArrayRef<Operation *> ops) {
    llvm::SmallPtrSet<Operation *, 16> inGroup(ops.begin(), ops.end());
    Value out;
    for (Operation *op : ops)
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (!inGroup.count(user)) {
            if (out && out != r)
              return {};
            out = r;
          }
    if (!out || !out.hasOneUse() ||
        !isFusibleReduction(*out.getUsers().begin()))
      return {};
    auto sum = llvm::cast<ReduceSumOp>(*out.getUsers().begin());
    ArrayRef<int64_t> shape = shapeOf(out);
    // Around kept axes, an operand may also be one value per kept element.
    bool around = reducesAround(reductionRuns(shape, sum.getAxes()));
    for (Operation *op : ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && inGroup.count(def))
          continue;
        if (auto bc = v.getDefiningOp<BroadcastToOp>())
          v = bc.getInput();
        if (!shapeOf(v).empty() && shapeOf(v) != shape && !isSplatConstant(v) &&
            !(around && alongKeptOnly(shapeOf(v), shape, sum.getAxes())))
          return {};
      }
    return sum;
  }

  /// Replaces `ops` (in program order, one shape) by one dt.fused at the last
  /// of them; with `reduction`, the fused op also does that sum of the group's
  /// value.
  void materialize(ArrayRef<Operation *> ops, ReduceSumOp reduction = {}) {
    llvm::SmallPtrSet<Operation *, 16> inGroup(ops.begin(), ops.end());
    Operation *lastOp = ops.back();
    ArrayRef<int64_t> shape = shapeOf(lastOp->getResult(0));

    // What an outside operand really is: broadcasts from outside the group are
    // seen through (the region broadcasts its operands itself).
    std::function<Value(Value)> source = [&](Value v) -> Value {
      if (auto bc = v.getDefiningOp<BroadcastToOp>(); bc && !inGroup.count(bc))
        return source(bc.getInput());
      return v;
    };
    llvm::SetVector<Value> inputs;
    for (Operation *op : ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        Value s = source(v);
        if ((def && inGroup.count(def)) || isSplatConstant(s))
          continue;
        inputs.insert(s);
      }

    SmallVector<Value> outputs;
    for (Operation *op : ops)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(),
                         [&](Operation *u) { return !inGroup.count(u); }))
          outputs.push_back(r);

    OpBuilder b(lastOp);
    Location loc = lastOp->getLoc();
    SmallVector<Type> resultTypes(ValueRange(outputs).getTypes());
    if (reduction)
      resultTypes = {reduction.getType()};
    auto fused = b.create<FusedOp>(loc, resultTypes, inputs.getArrayRef(),
                                   reduction ? reduction.getAxesAttr()
                                             : DenseI64ArrayAttr());
    Block *body = new Block();
    fused.getBody().push_back(body);
    IRMapping map;
    for (Value in : inputs) {
      Type elem = llvm::cast<RankedTensorType>(in.getType()).getElementType();
      map.map(in, body->addArgument(RankedTensorType::get(shape, elem),
                                    in.getLoc()));
    }
    OpBuilder inner = OpBuilder::atBlockEnd(body);
    // The body's value for an operand: mapped, seen through a broadcast, or a
    // constant.
    std::function<Value(Value)> bodyValue = [&](Value v) -> Value {
      if (Value m = map.lookupOrNull(v))
        return m;
      if (auto bc = v.getDefiningOp<BroadcastToOp>())
        return bodyValue(bc.getInput());
      auto c = v.getDefiningOp<ConstantOp>();
      auto splat = llvm::cast<DenseElementsAttr>(c.getValue());
      auto t = RankedTensorType::get(shape, splat.getElementType());
      Value clone = inner.create<ConstantOp>(
          c.getLoc(),
          DenseElementsAttr::get(t, splat.getSplatValue<Attribute>()));
      map.map(v, clone);
      return clone;
    };
    for (Operation *op : ops) {
      if (auto bc = llvm::dyn_cast<BroadcastToOp>(op)) {
        map.map(bc.getResult(), bodyValue(bc.getInput()));
        continue;
      }
      for (Value v : op->getOperands())
        map.map(v, bodyValue(v));
      inner.clone(*op, map);
    }
    SmallVector<Value> yielded;
    for (Value r : outputs)
      yielded.push_back(map.lookup(r));
    inner.create<YieldOp>(loc, yielded);

    if (reduction) {
      reduction.replaceAllUsesWith(fused.getResult(0));
      reduction.erase();
    } else {
      for (auto [r, f] : llvm::zip(outputs, fused.getResults()))
        r.replaceAllUsesWith(f);
    }
    for (Operation *op : llvm::reverse(ops))
      op->erase();
  }
};

} // namespace
