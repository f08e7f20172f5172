//===- CudaZeroCopy.cpp - conversions a GPU plan leaves out ---------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "CudaZeroCopy.h"

#include "dt/Conversion/GPUKernels.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Transforms/Passes.h"

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

bool isSixteenBit(Type t) { return t.isBF16() || t.isF16(); }

Type elementOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getElementType();
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

void usesOf(Value v, SmallVectorImpl<Operation *> &users) {
  for (Operation *user : v.getUsers()) {
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(user))
      usesOf(reshape.getResult(), users);
    else
      users.push_back(user);
  }
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

  // Widenings whose products read the 16-bit tensor where it lies: nothing
  // from the widening to its last product (that product's result included)
  // may write over the tensor, which the memory plan let die at the
  // widening.
  // (The loss's kernels read 16-bit logits too: a widening only they read
  // is left out as well.)
  auto readsLogits = [](Operation *user, Value v) {
    return llvm::isa<CrossEntropyOp, CrossEntropyGradOp>(user) &&
           root(user->getOperand(0)) == v;
  };
  auto isWidening = [](Operation *op) {
    return pureConversionTo(op) && elementOf(op->getResult(0)).isF32() &&
           isSixteenBit(elementOf(op->getOperand(0)));
  };
  auto safe = [&](Operation *op, ArrayRef<Operation *> users) {
    size_t last = position[op];
    for (Operation *user : users)
      last = std::max(last, position.lookup(user));
    return !writesBetween(position[op] + 1, last, rangeOf(op->getOperand(0)));
  };
  for (Operation *op : ops) {
    if (!isWidening(op))
      continue;
    SmallVector<Operation *> users;
    usesOf(op->getResult(0), users);
    if (!narrowed.contains(op) &&
        (users.empty() || !llvm::all_of(users, [&](Operation *user) {
           return readsLogits(user, op->getResult(0));
         })))
      continue;
    if (safe(op, users))
      z.bypassed[op] = op->getOperand(0);
  }

  // Attention on bf16 tensor cores reads bf16 where it lies when every
  // input is a safe widening of an aligned bf16 tensor that only such
  // attention reads: the candidates shrink until each one's readers take
  // all their inputs so.
  auto attention = [](Operation *op) {
    return llvm::isa<AttentionOp, AttentionGradOp>(op);
  };
  auto typedCapable = [&](Operation *op) {
    Value q = op->getOperand(0);
    return widenedFrom(q) && widenedFrom(q).isBF16() &&
           llvm::all_of(
               op->getOperands(),
               [&](Value v) { return widenedFrom(v) == widenedFrom(q); }) &&
           typedAttentionWidth(
               llvm::cast<RankedTensorType>(q.getType()).getShape().back());
  };
  auto aligned = [](Value v) { return plannedOffset(v) % 16 == 0; };
  llvm::DenseSet<Operation *> sources;
  for (Operation *op : ops) {
    if (!isWidening(op) || !elementOf(op->getOperand(0)).isBF16() ||
        !aligned(op->getOperand(0)))
      continue;
    SmallVector<Operation *> users;
    usesOf(op->getResult(0), users);
    if (!users.empty() && llvm::all_of(users, attention) &&
        llvm::all_of(users, typedCapable) && safe(op, users))
      sources.insert(op);
  }
  auto allInputs = [&](Operation *a) {
    return llvm::all_of(a->getOperands(), [&](Value v) {
      return sources.contains(root(v).getDefiningOp());
    });
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : llvm::to_vector(sources)) {
      SmallVector<Operation *> users;
      usesOf(op->getResult(0), users);
      if (!llvm::all_of(users, allInputs)) {
        sources.erase(op);
        changed = true;
      }
    }
  }
  for (Operation *op : sources) {
    z.bypassed[op] = op->getOperand(0);
    SmallVector<Operation *> users;
    usesOf(op->getResult(0), users);
    z.typedIn.insert(users.begin(), users.end());
  }

  // Ops whose 16-bit results go straight into the narrowings after them:
  // a product into one to its operands' type (cuBLAS writes no other), the
  // loss's gradient into one to any 16-bit type, and bf16 attention into
  // aligned ones to bf16, all its results or none. Between the op and its
  // narrowings there may be only reshapes and each other. The narrowings'
  // buffers, which the plan placed when the op's operands might be dead,
  // must not overlap what the op reads (a bypassed widening's buffer is
  // never touched), nor each other.
  for (Operation *op : ops) {
    Type half; // the type every narrowing must have; null: any 16-bit one
    if (auto product = llvm::dyn_cast<MatmulOp>(op)) {
      if (!(half = narrowedOperands(product, narrowed)))
        continue;
    } else if (attention(op)) {
      if (!typedCapable(op))
        continue;
      half = Builder(op->getContext()).getBF16Type();
    } else if (!llvm::isa<CrossEntropyGradOp>(op)) {
      continue;
    }
    SmallVector<Operation *> into;
    for (Value result : op->getResults()) {
      SmallVector<Operation *> users;
      usesOf(result, users);
      Operation *narrowing = users.size() == 1 ? users.front() : nullptr;
      Type to = narrowing ? pureConversionTo(narrowing) : Type();
      if (!to || !isSixteenBit(to) || (half && to != half) ||
          (attention(op) && !aligned(narrowing->getResult(0))))
        break;
      into.push_back(narrowing);
    }
    if (into.size() != op->getNumResults())
      continue;
    size_t end = position[op];
    for (Operation *narrowing : into)
      end = std::max(end, position[narrowing]);
    bool clear = true;
    for (size_t p = position[op] + 1; p < end; ++p)
      clear &= llvm::isa<ReshapeOp>(ops[p]) || llvm::is_contained(into, ops[p]);
    for (auto [i, narrowing] : llvm::enumerate(into)) {
      Range range = rangeOf(narrowing->getResult(0));
      for (Value operand : op->getOperands())
        clear &= !overlap(range, rangeOf(z.readFrom(operand)));
      for (Operation *other : ArrayRef<Operation *>(into).drop_front(i + 1))
        clear &= !overlap(range, rangeOf(other->getResult(0)));
    }
    if (!clear)
      continue;
    for (auto [result, narrowing] : llvm::zip(op->getResults(), into)) {
      z.narrowedInto[result] = narrowing;
      z.narrowings.insert(narrowing);
    }
  }
  return z;
}

} // namespace dt
