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

using Range = ArenaRange;

int64_t bytesOf(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  return std::max<int64_t>(1, t.getNumElements() *
                                  ((t.getElementTypeBitWidth() + 7) / 8));
}

/// The row pitch the memory plan gave `v`'s buffer room for (through
/// reshapes), or 0.
int64_t pitchRoom(Value v) {
  Operation *def = viewRoot(v).getDefiningOp();
  auto pitch = def ? def->getAttrOfType<IntegerAttr>(kPitchAttr) : nullptr;
  return pitch ? pitch.getInt() : 0;
}

Range rangeOf(Value v) { return arenaRangeOf(v); }

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

/// The layout of the heads of [B, T, H, D] tensor `bthd` (a head split's
/// input or a merge's result) in a buffer whose rows are `row` elements
/// wide (0: H * D, the tensor's own).
std::array<int64_t, 4> headLayout(Value bthd, int64_t row) {
  ArrayRef<int64_t> s = llvm::cast<RankedTensorType>(bthd.getType()).getShape();
  int64_t t = s[1], heads = s[2], d = s[3];
  if (row == 0)
    row = heads * d;
  return {heads, t * row, d, row};
}

} // namespace

ArenaRange arenaRangeOf(Value v) {
  int64_t at = plannedOffset(v);
  return {at, at + plannedBytes(v)};
}

Value ZeroCopies::readFrom(Value v) const {
  auto it = bypassed.find(viewRoot(v).getDefiningOp());
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

  // Attention reads its dO untransposed, where the head split before it
  // reads it, when it reads all its inputs as bf16 and nothing from the
  // split to the attention writes over that tensor (the attention's
  // results are placed apart from it below), with strides the kernels take.
  auto stridesAligned = [](const std::array<int64_t, 4> &l) {
    return l[1] % 8 == 0 && l[2] % 8 == 0 && l[3] % 8 == 0;
  };
  for (Operation *split : candidates.headReads) {
    SmallVector<Operation *> widenings, readers;
    readersOf(split->getResult(0), widenings);
    if (widenings.size() != 1 || !z.bypassed.count(widenings.front()))
      continue;
    readersOf(widenings.front()->getResult(0), readers);
    if (readers.size() != 1 || !z.typedIn.contains(readers.front()))
      continue;
    Value in = split->getOperand(0);
    Strided strided{in, 0, headLayout(in, 0)};
    if (!aligned(in) || !stridesAligned(strided.layout) ||
        writesBetween(position[split] + 1, position[readers.front()],
                      rangeOf(in)))
      continue;
    z.readStrided[split->getResult(0)] = strided;
    z.merged.insert(split);
  }
  // And where all pieces of a split along the last axis are read so, each
  // where the split's input holds it, rows as wide as that input's (the
  // qkv split: Q, K and V where their product wrote them), when nothing
  // from the split to the last attention reading them writes over it.
  for (Operation *split : candidates.splitReads) {
    Value in = split->getOperand(0);
    int64_t width =
        llvm::cast<RankedTensorType>(in.getType()).getShape().back();
    SmallVector<std::pair<Value, Strided>> pieces;
    size_t last = position[split];
    bool all = aligned(in) && z.pitchOf(in) == 0;
    int64_t start = 0;
    for (Value piece : split->getResults()) {
      SmallVector<Operation *> heads;
      readersOf(piece, heads);
      for (Operation *head : heads) {
        Value bthd = head->getOperand(0), read = head->getResult(0);
        all &= z.merged.contains(head) && z.readStrided.count(read) &&
               start % 8 == 0;
        Strided strided{in, start, headLayout(bthd, width)};
        all &= stridesAligned(strided.layout);
        pieces.push_back({read, strided});
        SmallVector<Operation *> widenings, readers;
        readersOf(read, widenings);
        for (Operation *w : widenings)
          readersOf(w->getResult(0), readers);
        for (Operation *reader : readers)
          last = std::max(last, position.lookup(reader));
      }
      start += llvm::cast<RankedTensorType>(piece.getType()).getShape().back();
    }
    if (!all || writesBetween(position[split] + 1, last, rangeOf(in)))
      continue;
    for (auto &[read, strided] : pieces)
      z.readStrided[read] = strided;
    z.merged.insert(split);
  }
  // The bytes attention (or any op) reads for `operand` on the GPU.
  auto readRange = [&](Value operand) {
    Value v = z.readFrom(operand);
    auto it = z.readStrided.find(viewRoot(v));
    return rangeOf(it == z.readStrided.end() ? v : it->second.at);
  };

  // A product computes its region's GELU in its epilogue when the region's
  // results (which the product writes in its place) overlap nothing the
  // product reads, lie 16-byte aligned, in rows of a multiple of 8 elements
  // (cuBLASLt's leading dimension for the pre-activation).
  for (const ZeroCopyCandidates::Epilogue &e : candidates.epilogues) {
    SmallVector<Range> reads;
    bool fits = true;
    for (Value operand : e.product->getOperands())
      reads.push_back(readRange(operand));
    if (e.grad) {
      Value pre = e.region->getOperand(1);
      fits &= aligned(pre) && z.pitchOf(pre) == 0;
      reads.push_back(rangeOf(viewRoot(pre)));
    }
    for (Value result : e.region->getResults()) {
      fits &= aligned(result) &&
              llvm::cast<RankedTensorType>(result.getType()).getShape().back() %
                      8 ==
                  0;
      for (Range read : reads)
        fits &= !overlap(rangeOf(result), read);
    }
    if (!fits)
      continue;
    z.epilogues[e.product] = e.region;
    z.epilogueRegions.insert(e.region);
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
        clear &= !overlap(range, readRange(operand));
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

    // Attention reading bf16 writes further still: into its head merges'
    // buffers, or their concat's, with [B, T, H, D] strides, when those
    // (placed after the op's operands, which the plan keeps alive until
    // then) overlap nothing it reads, nor each other, and are aligned.
    if (w.merges.empty() || !z.typedIn.contains(w.op))
      continue;
    SmallVector<Strided> outs;
    for (Operation *merge : w.merges) {
      if (!w.concat) {
        outs.push_back(
            {merge->getResult(0), 0, headLayout(merge->getResult(0), 0)});
        continue;
      }
      // Its place along the concat's last axis.
      int64_t start = 0;
      for (Value in : llvm::cast<ConcatOp>(w.concat).getInputs()) {
        if (viewRoot(in).getDefiningOp() == merge)
          break;
        start += llvm::cast<RankedTensorType>(in.getType()).getShape().back();
      }
      Value whole = w.concat->getResult(0);
      int64_t width =
          llvm::cast<RankedTensorType>(whole.getType()).getShape().back();
      outs.push_back({whole, start, headLayout(merge->getResult(0), width)});
    }
    bool fits = true;
    for (auto [i, out] : llvm::enumerate(outs)) {
      Range range = rangeOf(out.at);
      fits &=
          aligned(out.at) && out.offset % 8 == 0 && stridesAligned(out.layout);
      for (Value operand : w.op->getOperands())
        fits &= !overlap(range, readRange(operand));
      if (!w.concat)
        for (const Strided &other : ArrayRef(outs).drop_front(i + 1))
          fits &= !overlap(range, rangeOf(other.at));
    }
    // A forward's O that its gradients read back: then only where the
    // merge's buffer holds it, so each must read it so (bf16, through a
    // widening left out) and nothing from the merge to it may write there.
    // Else the forward writes its narrowing's buffer, which they read.
    for (Operation *saved : w.savedReads) {
      SmallVector<Operation *> grads;
      readersOf(saved->getResult(0), grads);
      fits &= z.bypassed.count(saved) > 0;
      for (Operation *grad : grads)
        fits &= z.typedIn.contains(grad) &&
                !writesBetween(position[w.merges.front()] + 1, position[grad],
                               rangeOf(outs.front().at));
    }
    if (!fits)
      continue;
    for (auto [pair, merge, out] : llvm::zip(w.into, w.merges, outs)) {
      z.writtenStrided[pair.first] = out;
      z.merged.insert(merge);
      if (!w.savedReads.empty())
        z.readStrided[pair.second->getResult(0)] = out;
    }
    if (w.concat)
      z.merged.insert(w.concat);
  }

  // A weight gradient's product writes its bias's gradient in BGRADB's
  // epilogue when that (f32, placed after the product, whose operands and
  // result the plan keeps alive until then) overlaps nothing the product
  // reads or writes, and is 16-byte aligned, and the product reads its A
  // as 16-bit data where it lies (cuBLASLt sums what it reads).
  for (const ZeroCopyCandidates::BiasGrad &g : candidates.biasGrads) {
    Value sums = g.region->getResult(0);
    Operation *into = z.narrowingOf(g.product->getResult(0));
    bool fits =
        aligned(sums) && !z.epilogues.count(g.product) &&
        z.readFrom(g.product->getOperand(0)) != g.product->getOperand(0) &&
        !overlap(rangeOf(sums),
                 rangeOf(into ? into->getResult(0) : g.product->getResult(0)));
    for (Value operand : g.product->getOperands())
      fits &= !overlap(rangeOf(sums), readRange(operand));
    if (!fits)
      continue;
    z.biasGrads[g.product] = g.region;
    z.epilogueRegions.insert(g.region);
  }

  // A narrowing's buffer with room for a row pitch is laid out so when its
  // writer writes it (a product of one batch, the loss's gradient) and
  // every reader reads it where it lies: products of one batch and the
  // loss, through widenings left out. A generated kernel anywhere near it
  // keeps the rows packed.
  llvm::DenseMap<Operation *, Operation *> writerOf; // narrowing -> op
  for (auto [result, narrowing] : z.narrowedInto)
    writerOf[narrowing] = result.getDefiningOp();
  // The value's readers' kernels take its rows a pitch apart: a product
  // reads either operand so, the loss its logits (operand 0).
  auto readsPitched = [](Operation *op, Value v) {
    return takesRowPitch(op) &&
           (llvm::isa<MatmulOp>(op) || viewRoot(op->getOperand(0)) == v);
  };
  for (Operation *narrowing : z.narrowings) {
    int64_t pitch = pitchRoom(narrowing->getResult(0));
    Operation *writer = writerOf.lookup(narrowing);
    if (!pitch || !writer || !takesRowPitch(writer))
      continue;
    SmallVector<Operation *> readers;
    readersOf(narrowing->getResult(0), readers);
    bool all = !readers.empty();
    for (Operation *reader : readers) {
      if (!z.bypassed.count(reader)) {
        all = false;
        break;
      }
      SmallVector<Operation *> users;
      readersOf(reader->getResult(0), users);
      for (Operation *user : users)
        all &= readsPitched(user, reader->getResult(0));
    }
    if (all)
      z.pitched[narrowing->getResult(0)] = pitch;
  }
  return z;
}

int64_t ZeroCopies::pitchOf(Value v) const {
  return pitched.lookup(viewRoot(v));
}

} // namespace dt
