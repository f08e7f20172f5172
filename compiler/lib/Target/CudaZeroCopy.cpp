//===- CudaZeroCopy.cpp - conversions a GPU plan leaves out ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "CudaZeroCopy.h"

#include "dt/Conversion/GPUKernels.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/ZeroCopyInfo.h"

using namespace mlir;

namespace dt {

namespace {

/// Bytes [first, second) of the arena.
using Range = std::pair<int64_t, int64_t>;

bool overlap(Range a, Range b) {
  return a.first < b.second && b.first < a.second;
}

int64_t bytesOf(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  return std::max<int64_t>(1, t.getNumElements() *
                                  ((t.getElementTypeBitWidth() + 7) / 8));
}

Range rangeOf(Value v) {
  int64_t at = plannedOffset(v);
  return {at, at + bytesOf(v.getType())};
}

Value root(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  return v;
}

/// The bytes `op` writes when its launch runs (a load or store that the
/// plan could not place in its global's buffer is a copy; a reshape or a
/// wait writes nothing of its own).
SmallVector<Range> writesOf(Operation *op) {
  SmallVector<Range> ranges;
  if (llvm::isa<ReshapeOp, WaitOp, func::ReturnOp>(op))
    return ranges;
  if (auto store = llvm::dyn_cast<StoreOp>(op)) {
    GlobalOp g = lookupGlobal(op, store.getGlobal());
    if (g && g.getOffset()) {
      int64_t at = int64_t(*g.getOffset());
      ranges.push_back({at, at + bytesOf(g.getType())});
    }
    return ranges;
  }
  if (!op->getAttr("dt.offsets"))
    return ranges;
  for (Value r : op->getResults())
    ranges.push_back(rangeOf(r));
  return ranges;
}

} // namespace

Value ZeroCopies::readFrom(Value v) const {
  auto it = bypassed.find(root(v).getDefiningOp());
  return it == bypassed.end() ? v : it->second;
}

ZeroCopies ZeroCopies::find(func::FuncOp fn,
                            const llvm::DenseSet<Operation *> &narrowed) {
  ZeroCopies z;
  Block &block = fn.getBody().front();
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> position;
  for (Operation &op : block) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  auto writesBetween = [&](size_t from, size_t to, Range range) {
    for (size_t p = from; p <= to; ++p)
      for (Range w : writesOf(ops[p]))
        if (overlap(w, range))
          return true;
    return false;
  };
  ZeroCopyCandidates candidates = ZeroCopyCandidates::find(fn, narrowed);

  // A widening's readers read the 16-bit tensor where it lies when nothing
  // from the widening to its last reader (that reader's results included)
  // writes over the tensor, which the memory plan may have let die at the
  // widening.
  auto safe = [&](Operation *op) {
    SmallVector<Operation *> users;
    readersOf(op->getResult(0), users);
    size_t last = position[op];
    for (Operation *user : users)
      last = std::max(last, position.lookup(user));
    return !writesBetween(position[op] + 1, last, rangeOf(op->getOperand(0)));
  };
  for (Operation *op : candidates.forReaders)
    if (safe(op))
      z.bypassed[op] = op->getOperand(0);

  // Attention takes all its inputs so or none: the safe, 16-byte aligned
  // candidates shrink again until each one's readers take all their inputs
  // from them.
  auto aligned = [](Value v) { return plannedOffset(v) % 16 == 0; };
  llvm::DenseSet<Operation *> sources;
  for (Operation *op : candidates.forAttention)
    if (aligned(op->getOperand(0)) && safe(op))
      sources.insert(op);
  keepWholeAttention(sources);
  for (Operation *op : sources) {
    z.bypassed[op] = op->getOperand(0);
    SmallVector<Operation *> users;
    readersOf(op->getResult(0), users);
    z.typedIn.insert(users.begin(), users.end());
  }

  // An op writes results into its narrowings' buffers when those, which
  // the plan placed when the op's operands might be dead, overlap nothing
  // the op reads (a bypassed widening's buffer is never touched) or writes
  // itself, nor each other, and, for attention, are 16-byte aligned.
  for (const ZeroCopyCandidates::Writer &w : candidates.writers) {
    bool clear = true;
    for (auto [i, pair] : llvm::enumerate(w.into)) {
      Range range = rangeOf(pair.second->getResult(0));
      for (Value operand : w.op->getOperands())
        clear &= !overlap(range, rangeOf(z.readFrom(operand)));
      for (Value result : w.op->getResults())
        if (llvm::none_of(w.into, [&](auto &p) { return p.first == result; }))
          clear &= !overlap(range, rangeOf(result));
      for (auto &other : ArrayRef(w.into).drop_front(i + 1))
        clear &= !overlap(range, rangeOf(other.second->getResult(0)));
      if (llvm::isa<AttentionOp, AttentionGradOp>(w.op))
        clear &= aligned(pair.second->getResult(0));
    }
    if (!clear)
      continue;
    for (auto [result, narrowing] : w.into) {
      z.narrowedInto[result] = narrowing;
      z.narrowings.insert(narrowing);
    }
  }
  return z;
}

} // namespace dt
