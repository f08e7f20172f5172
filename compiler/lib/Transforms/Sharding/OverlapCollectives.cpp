//===- OverlapCollectives.cpp - Collectives that run beside compute -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A collective whose result is first needed some ops after it is issued can
// run while those ops compute, as DDP overlaps gradient sums with the rest of
// backward. The algorithm, per entry point, after dt-bucket-collectives has
// put every collective as early as its operands allow:
//
//   1. For each all-reduce, reduce-scatter, all-gather and all-to-all, the
//      ops that only rearrange its result (the split of a bucket, reshapes,
//      slices, transposes) sink to just before the first op that uses what
//      they make (for gradients, the stores that dt-bucket-collectives put at
//      the end). Then, if some op between the collective and the first user
//      of its result does work (anything but views, constants, loads, stores
//      and other collectives), the collective is marked `dt.async`.
//   2. A dt.wait goes just before that first user; it takes the collective's
//      result and operands, and every use of the result becomes a use of the
//      wait's. The operands stay alive (and unwritten) until the wait, which
//      dt-plan-memory sees as a read of them; the result's buffer is the
//      collective's, from its start.
//
// The runtime runs asynchronous collectives in issue order on a
// communication thread (runtime/lib/comm/collectives.cpp), so every rank still
// issues the same sequence; dt-verify-collectives checks the waits.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

namespace dt {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVES
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// Collectives that move data between ranks (a shard copy is local).
bool isExchange(Operation *op) {
  const char *kind = collectiveKind(op);
  return kind && StringRef(kind) != "shard";
}

/// Ops that take no time worth hiding a collective behind: views, constants,
/// the moves of values in and out of globals, and other collectives.
bool isFree(Operation *op) {
  return isa<ReshapeOp, ConstantOp, ShardStartOp, WaitOp, SplitOp, SliceOp,
             LoadOp, StoreOp>(op) ||
         isExchange(op);
}

/// Moves the ops that only rearrange `c`'s result (the split of a bucket,
/// reshapes, slices, transposes) down to just before the first op that uses
/// what they make, in their order, so that the result is needed as late as
/// the program allows.
void sinkLayoutUsers(Operation *c) {
  SmallVector<Operation *> chain;
  SmallVector<Value> todo(c->getResults().begin(), c->getResults().end());
  Operation *firstUse = nullptr;
  while (!todo.empty()) {
    Value v = todo.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user->getBlock() != c->getBlock())
        return;
      if (!isa<SplitOp, ReshapeOp, SliceOp, TransposeOp>(user)) {
        if (!firstUse || user->isBeforeInBlock(firstUse))
          firstUse = user;
        continue;
      }
      if (!llvm::is_contained(chain, user)) {
        chain.push_back(user);
        todo.append(user->getResults().begin(), user->getResults().end());
      }
    }
  }
  if (!firstUse)
    return;
  llvm::sort(chain, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  for (Operation *op : chain)
    if (op->isBeforeInBlock(firstUse))
      op->moveBefore(firstUse);
}

struct OverlapCollectivesPass
    : public dt::impl::OverlapCollectivesBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(module.getContext());
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        continue;
      SmallVector<Operation *> collectives;
      for (Operation &op : fn.getBody().front())
        if (isExchange(&op) && !op.hasAttr(kAsyncAttr))
          collectives.push_back(&op);
      for (Operation *c : collectives) {
        sinkLayoutUsers(c);
        Value result = c->getResult(0);
        Operation *first = nullptr;
        for (Operation *user : result.getUsers())
          if (!first || user->isBeforeInBlock(first))
            first = user;
        if (!first)
          continue;
        bool work = false;
        for (Operation *op = c->getNextNode(); op != first && !work;
             op = op->getNextNode())
          work = !isFree(op);
        if (!work)
          continue;
        c->setAttr(kAsyncAttr, b.getUnitAttr());
        b.setInsertionPoint(first);
        auto wait = b.create<WaitOp>(c->getLoc(), result.getType(), result,
                                     c->getOperands());
        result.replaceAllUsesExcept(wait.getResult(), wait);
      }
    }
  }
};

} // namespace
