//===- ZeroCopyInfo.cpp - conversions a GPU can do without ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/ZeroCopyInfo.h"
#include "dt/Dialect/DT/IR/DTOps.h"

#include "llvm/ADT/Sequence.h"

using namespace mlir;

namespace dt {

Value viewRoot(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  return v;
}

namespace {

Type elementOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getElementType();
}

bool isSixteenBit(Type t) { return t.isBF16() || t.isF16(); }

/// The 16-bit type a widening (a dt.fused of one result, widenedFrom it)
/// widens from, or null for any other op.
Type widening(Operation *op) {
  auto fused = llvm::dyn_cast_or_null<FusedOp>(op);
  return fused && fused->getNumResults() == 1 ? widenedFrom(fused->getResult(0))
                                              : Type();
}

/// Every use of `v`, through reshapes.
void usesOf(Value v, SmallVectorImpl<OpOperand *> &uses) {
  for (OpOperand &use : v.getUses()) {
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(use.getOwner()))
      usesOf(reshape.getResult(), uses);
    else
      uses.push_back(&use);
  }
}

bool isProduct(Operation *op) { return llvm::isa<MatmulOp, MatmulBiasOp>(op); }

bool isAttention(Operation *op) {
  return llvm::isa<AttentionOp, AttentionGradOp>(op);
}

} // namespace

SmallVector<Value> activationOperands(Operation *op) {
  SmallVector<Value> operands(op->getOperands());
  if (auto grad = llvm::dyn_cast<AttentionGradOp>(op))
    llvm::erase(operands, grad.getLse());
  return operands;
}

Type widenedFrom(Value v) {
  v = viewRoot(v);
  auto fused = v.getDefiningOp<FusedOp>();
  if (!fused || fused.isReduction() || !elementOf(v).isF32())
    return {};
  Value yielded = fused.getBody().front().getTerminator()->getOperand(
      llvm::cast<OpResult>(v).getResultNumber());
  auto convert = yielded.getDefiningOp<ConvertOp>();
  if (!convert)
    return {};
  Type from = elementOf(convert.getInput());
  return isSixteenBit(from) ? from : Type();
}

Type narrowedOperands(Operation *op,
                      const llvm::DenseSet<Operation *> &narrowed) {
  if (!isProduct(op))
    return {};
  Operation *lhs = viewRoot(op->getOperand(0)).getDefiningOp(),
            *rhs = viewRoot(op->getOperand(1)).getDefiningOp();
  if (!narrowed.contains(lhs) || !narrowed.contains(rhs))
    return {};
  Type type = widening(lhs);
  return type == widening(rhs) ? type : Type();
}

llvm::DenseSet<Operation *> narrowedWidenings(ModuleOp module) {
  llvm::DenseSet<Operation *> narrowed;
  for (auto entry : module.getOps<func::FuncOp>())
    if (!entry.isExternal())
      for (Operation &op : entry.getBody().front())
        if (widening(&op))
          narrowed.insert(&op);
  // Drop a widening with a use other than a product's lhs or rhs, or used
  // with an operand that is not narrowed alike, until none changes. A
  // product's bias of its operands' 16-bit type is read so too (cuBLASLt's
  // epilogue).
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : llvm::to_vector(narrowed)) {
      SmallVector<OpOperand *> uses;
      usesOf(op->getResult(0), uses);
      bool keep = !uses.empty() && llvm::all_of(uses, [&](OpOperand *use) {
        Type half = narrowedOperands(use->getOwner(), narrowed);
        if (use->getOperandNumber() < 2)
          return bool(half);
        return llvm::isa<MatmulBiasOp>(use->getOwner()) &&
               use->getOperandNumber() == 2 && half && half == widening(op);
      });
      if (!keep) {
        narrowed.erase(op);
        changed = true;
      }
    }
  }
  return narrowed;
}

Value unconvert(Value v, Type element) {
  auto convert = v ? v.getDefiningOp<ConvertOp>() : ConvertOp();
  return convert && convert.getType().getElementType() == element
             ? convert.getInput()
             : Value();
}

Operation *geluEpilogueOf(Operation *op, bool &grad) {
  if (!isProduct(op) || !op->hasOneUse())
    return nullptr;
  Value p = op->getResult(0);
  auto type = llvm::cast<RankedTensorType>(p.getType());
  auto region = llvm::dyn_cast<FusedOp>(*op->user_begin());
  if (type.getRank() != 2 || !type.getElementType().isF32() || !region ||
      region.isReduction() || region.getInputs().front() != p)
    return nullptr;
  Type half = elementOf(region.getResult(0)), f32 = type.getElementType();
  if (!isSixteenBit(half) || llvm::any_of(region.getResultTypes(), [&](Type t) {
        return t != type.clone(half);
      }))
    return nullptr;
  Block &body = region.getBody().front();
  Value sums = body.getArgument(0);
  ValueRange yielded = body.getTerminator()->getOperands();
  size_t ops = body.getOperations().size();
  if (region.getInputs().size() == 1 && yielded.size() == 2 && ops == 4) {
    Value activation = unconvert(yielded[1], half);
    auto gelu = activation ? activation.getDefiningOp<GeluOp>() : GeluOp();
    grad = false;
    return unconvert(yielded[0], half) == sums && gelu &&
                   gelu.getInput() == sums
               ? region
               : nullptr;
  }
  if (!llvm::isa<MatmulOp>(op) || region.getInputs().size() != 2 ||
      elementOf(region.getInputs()[1]) != half || yielded.size() != 1 ||
      ops != 5)
    return nullptr;
  Value product = unconvert(yielded[0], half);
  auto mul = product ? product.getDefiningOp<MulOp>() : MulOp();
  Value other = !mul                   ? Value()
                : mul.getLhs() == sums ? mul.getRhs()
                : mul.getRhs() == sums ? mul.getLhs()
                                       : Value();
  auto derivative = other ? other.getDefiningOp<GeluDerivOp>() : GeluDerivOp();
  grad = true;
  return derivative &&
                 unconvert(derivative.getInput(), f32) == body.getArgument(1)
             ? region
             : nullptr;
}

Value summedRows(Operation *r) {
  auto region = llvm::dyn_cast_or_null<FusedOp>(r);
  if (!region || !region.isReduction() || region->getNumOperands() != 1 ||
      region->getNumResults() != 1)
    return {};
  // sum over all axes but the last of widen(x), x 16-bit: [C] f32.
  Value x = region->getOperand(0);
  auto in = llvm::cast<RankedTensorType>(x.getType());
  auto out = llvm::cast<RankedTensorType>(region.getResult(0).getType());
  ArrayRef<int64_t> axes = *region.getReduceAxes();
  if (!isSixteenBit(in.getElementType()) || !out.getElementType().isF32() ||
      in.getRank() < 2 || out.getShape() != in.getShape().take_back() ||
      !llvm::equal(axes, llvm::seq<int64_t>(0, in.getRank() - 1)))
    return {};
  Block &body = region.getBody().front();
  return unconvert(body.getTerminator()->getOperand(0), out.getElementType()) ==
                 body.getArgument(0)
             ? x
             : Value();
}

bool sumsProductRows(Operation *r, Operation *p) {
  Value x = summedRows(r);
  auto mm = llvm::dyn_cast_or_null<MatmulOp>(p);
  if (!x || !mm || !mm.getTransposeLhs())
    return false;
  // p = matmul(widen(x viewed [K, C])^T, ...): [C, N].
  auto c = llvm::cast<RankedTensorType>(mm.getType()).getShape();
  Operation *widen = viewRoot(mm.getLhs()).getDefiningOp();
  return c.size() == 2 && c[0] == shapeOf(x).back() && isWidening(widen) &&
         viewRoot(widen->getOperand(0)) == viewRoot(x);
}

bool typedAttentionCapable(Operation *op) {
  if (!isAttention(op))
    return false;
  Value q = op->getOperand(0);
  Type from = widenedFrom(q);
  return from && from.isBF16() &&
         llvm::all_of(activationOperands(op),
                      [&](Value v) { return widenedFrom(v) == from; }) &&
         typedAttentionWidth(
             llvm::cast<RankedTensorType>(q.getType()).getShape().back());
}

void keepWholeAttention(llvm::DenseSet<Operation *> &widenings) {
  auto allInputs = [&](Operation *attention) {
    return llvm::all_of(activationOperands(attention), [&](Value v) {
      return widenings.contains(viewRoot(v).getDefiningOp());
    });
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : llvm::to_vector(widenings)) {
      SmallVector<Operation *> users;
      readersOf(op->getResult(0), users);
      if (!llvm::all_of(users, allInputs)) {
        widenings.erase(op);
        changed = true;
      }
    }
  }
}

void readersOf(Value v, SmallVectorImpl<Operation *> &users) {
  for (Operation *user : v.getUsers()) {
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(user))
      readersOf(reshape.getResult(), users);
    else
      users.push_back(user);
  }
}

bool isWidening(Operation *op) {
  return pureConversionTo(op) && elementOf(op->getResult(0)).isF32() &&
         isSixteenBit(elementOf(op->getOperand(0)));
}

bool isHeadTranspose(Operation *op) {
  auto t = llvm::dyn_cast_or_null<TransposeOp>(op);
  return t && t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// The one reader of `v` (through reshapes), or null.
static Operation *onlyReader(Value v) {
  SmallVector<Operation *> users;
  readersOf(v, users);
  return users.size() == 1 ? users.front() : nullptr;
}

/// Whether `op` widens the bf16 O that attention gradients read, and only
/// they: their `result` operand.
static bool widensSavedResult(Operation *op) {
  if (!isWidening(op) || !elementOf(op->getOperand(0)).isBF16())
    return false;
  SmallVector<Operation *> users;
  readersOf(op->getResult(0), users);
  return !users.empty() && llvm::all_of(users, [&](Operation *user) {
    auto grad = llvm::dyn_cast<AttentionGradOp>(user);
    return grad && viewRoot(grad.getResult()) == op->getResult(0) &&
           llvm::count_if(grad->getOperands(), [&](Value v) {
             return viewRoot(v) == op->getResult(0);
           }) == 1;
  });
}

/// For bf16 attention writer `w`: each narrowing's head merge, and the
/// concat along the last dimension that reads all of them, if any. Besides
/// its merge, a forward's O may be read by widenings for the gradients that
/// take it back (`savedReads`).
static void findMerges(ZeroCopyCandidates::Writer &w) {
  if (!isAttention(w.op))
    return;
  SmallVector<Operation *> merges, saved;
  for (auto [result, narrowing] : w.into) {
    SmallVector<Operation *> readers;
    readersOf(narrowing->getResult(0), readers);
    Operation *merge = nullptr;
    for (Operation *reader : readers) {
      if (isHeadTranspose(reader) && !merge)
        merge = reader;
      else if (llvm::isa<AttentionOp>(w.op) && widensSavedResult(reader))
        saved.push_back(reader);
      else
        return;
    }
    if (!merge)
      return;
    merges.push_back(merge);
  }
  w.merges = merges;
  w.savedReads = saved;
  // A concat of [B, T, H * D] views of the merges, along the last axis.
  auto concat = llvm::dyn_cast_or_null<ConcatOp>(
      onlyReader(merges.front()->getResult(0)));
  if (!concat || concat.getInputs().size() != merges.size() ||
      int64_t(concat.getAxis()) !=
          llvm::cast<RankedTensorType>(concat.getResult().getType()).getRank() -
              1)
    return;
  for (Value in : concat.getInputs()) {
    Operation *merge = viewRoot(in).getDefiningOp();
    auto shape = llvm::cast<RankedTensorType>(in.getType()).getShape();
    if (!llvm::is_contained(merges, merge) || shape.size() != 3 ||
        onlyReader(merge->getResult(0)) != concat)
      return;
  }
  w.concat = concat;
}

bool takesRowPitch(Operation *op) {
  if (llvm::isa<CrossEntropyOp, CrossEntropyGradOp>(op))
    return true;
  return llvm::isa<MatmulOp>(op) &&
         llvm::cast<RankedTensorType>(op->getResult(0).getType()).getRank() ==
             2;
}

int64_t pitchedBytes(RankedTensorType type, int64_t pitch) {
  return type.getNumElements() / type.getShape().back() * pitch *
         (type.getElementTypeBitWidth() / 8);
}

int64_t plannedBytes(Value v) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  int64_t bytes = std::max<int64_t>(
      1, type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8));
  Operation *def = viewRoot(v).getDefiningOp();
  if (!def || type.getRank() == 0)
    return bytes;
  if (auto pitch = def->getAttrOfType<IntegerAttr>(kPitchAttr))
    return pitchedBytes(type, pitch.getInt());
  // Rows of the region's own result, which a view may reshape.
  if (auto rows = def->getAttrOfType<IntegerAttr>(kRowsAttr))
    return bytes /
           llvm::cast<RankedTensorType>(viewRoot(v).getType()).getDimSize(0) *
           rows.getInt();
  return bytes;
}

bool readsSixteenBit(Operation *user, Value v) {
  // The operands the op's kernels read in any type.
  SmallVector<unsigned, 2> typed;
  if (llvm::isa<CrossEntropyOp, CrossEntropyGradOp, LayerNormOp, RMSNormOp>(
          user))
    typed = {0}; // the logits, x
  else if (llvm::isa<LayerNormGradOp, RMSNormGradOp>(user))
    typed = {0, 2}; // x, dy
  else
    return false;
  bool reads = false;
  for (OpOperand &operand : user->getOpOperands())
    if (viewRoot(operand.get()) == v) {
      if (!llvm::is_contained(typed, operand.getOperandNumber()))
        return false;
      reads = true;
    }
  return reads;
}

bool writesSixteenBit(Value v) {
  auto result = llvm::dyn_cast<OpResult>(v);
  return result && result.getResultNumber() == 0 &&
         llvm::isa<CrossEntropyGradOp, LayerNormOp, LayerNormGradOp, RMSNormOp,
                   RMSNormGradOp>(result.getOwner());
}

/// The results of `op` that it could write as 16-bit data into a
/// narrowing after it, and the type they must have (null: any 16-bit
/// one); none for other ops.
std::pair<SmallVector<Value>, Type>
narrowableResults(Operation *op, const llvm::DenseSet<Operation *> &narrowed) {
  if (isProduct(op)) {
    if (Type half = narrowedOperands(op, narrowed))
      return {{op->getResult(0)}, half};
  } else if (isAttention(op)) {
    // The forward's O (its log-sum-exp stays f32), the gradient's three.
    SmallVector<Value> results(op->getResults());
    if (auto forward = llvm::dyn_cast<AttentionOp>(op))
      results = {forward.getResult()};
    if (typedAttentionCapable(op))
      return {results, Builder(op->getContext()).getBF16Type()};
  } else if (op->getNumResults() > 0 && writesSixteenBit(op->getResult(0))) {
    return {{op->getResult(0)}, Type()}; // dlogits, y, dx
  }
  return {};
}

ZeroCopyCandidates
ZeroCopyCandidates::find(func::FuncOp fn,
                         const llvm::DenseSet<Operation *> &narrowed) {
  ZeroCopyCandidates c;
  Block &block = fn.getBody().front();

  // Widenings of narrowed products, or that only ops reading 16-bit data
  // read (the loss's logits, the norms' x and dy).
  for (Operation &op : block) {
    if (!isWidening(&op))
      continue;
    SmallVector<Operation *> users;
    readersOf(op.getResult(0), users);
    if (narrowed.contains(&op) ||
        (!users.empty() && llvm::all_of(users, [&](Operation *user) {
          return readsSixteenBit(user, op.getResult(0));
        })))
      c.forReaders.push_back(&op);
  }

  // Widenings of bf16 that only bf16 attention reads, all its inputs or
  // none: the candidates shrink until each one's readers take all their
  // inputs so.
  llvm::DenseSet<Operation *> sources;
  for (Operation &op : block) {
    if (!isWidening(&op) || !elementOf(op.getOperand(0)).isBF16())
      continue;
    SmallVector<Operation *> users;
    readersOf(op.getResult(0), users);
    if (!users.empty() && llvm::all_of(users, typedAttentionCapable))
      sources.insert(&op);
  }
  keepWholeAttention(sources);
  // In program order, so that what follows is deterministic.
  for (Operation &op : block)
    if (sources.contains(&op))
      c.forAttention.push_back(&op);

  // Ops whose 16-bit results could go straight into the narrowings after
  // them: a product into one to its operands' type (cuBLAS writes no
  // other), bf16 attention into ones to bf16, all its results or none, and
  // the loss's gradient and the norms' y or dx into one to any 16-bit type.
  // Between the op and its narrowings there may be only reshapes and each
  // other.
  llvm::DenseMap<Operation *, size_t> position;
  SmallVector<Operation *> ops;
  for (Operation &op : block) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  for (Operation *op : ops) {
    auto [results, half] = narrowableResults(op, narrowed);
    if (results.empty())
      continue;
    Writer writer;
    writer.op = op;
    for (Value result : results) {
      SmallVector<Operation *> users;
      readersOf(result, users);
      Operation *narrowing = users.size() == 1 ? users.front() : nullptr;
      Type to = narrowing ? pureConversionTo(narrowing) : Type();
      if (!to || !isSixteenBit(to) || (half && to != half))
        break;
      writer.into.push_back({result, narrowing});
    }
    if (writer.into.size() != results.size())
      continue;
    // Between the op and the last op it writes for, only reshapes and the
    // chain itself: nothing else reads or writes while its results go
    // straight to where the chain ends.
    auto adjacent = [&](ArrayRef<Operation *> chain) {
      size_t end = position[op];
      for (Operation *link : chain)
        end = std::max(end, position[link]);
      for (size_t p = position[op] + 1; p < end; ++p)
        if (!llvm::isa<ReshapeOp>(ops[p]) && !llvm::is_contained(chain, ops[p]))
          return false;
      return true;
    };
    SmallVector<Operation *> chain;
    for (auto [result, narrowing] : writer.into)
      chain.push_back(narrowing);
    if (!adjacent(chain))
      continue;
    findMerges(writer);
    llvm::append_range(chain, writer.merges);
    if (writer.concat)
      chain.push_back(writer.concat);
    if (!adjacent(chain)) {
      writer.merges.clear();
      writer.concat = nullptr;
      writer.savedReads.clear();
    }
    c.writers.push_back(std::move(writer));
  }

  // Rows of a product's (or the loss gradient's) 16-bit result that a
  // pitch would align: a product of one batch, which cuBLAS takes with any
  // leading dimension.
  for (const Writer &w : c.writers) {
    if (!takesRowPitch(w.op))
      continue;
    for (auto [result, narrowing] : w.into) {
      auto type =
          llvm::cast<RankedTensorType>(narrowing->getResult(0).getType());
      int64_t bytes = type.getElementTypeBitWidth() / 8;
      int64_t cols = type.getShape().back(), align = 16 / bytes;
      // Rows of 64 or more: the padding stays under an eighth of a row.
      if (type.getRank() >= 2 && isSixteenBit(type.getElementType()) &&
          cols % align != 0 && cols >= 8 * align)
        c.pitches.push_back({narrowing, (cols + align - 1) / align * align});
    }
  }

  // Matrices that products alone read through the widenings they leave
  // out, whose rows a padded product may read past: 64 rows or more, as
  // with pitches, so that the room stays under an eighth of them.
  llvm::DenseSet<Operation *> roomy;
  for (Operation *widening : c.forReaders) {
    SmallVector<Operation *> readers;
    readersOf(widening->getResult(0), readers);
    if (!llvm::all_of(readers, [](Operation *r) { return isa<MatmulOp>(r); }))
      continue;
    Value source = widening->getOperand(0);
    auto region = source.getDefiningOp<FusedOp>();
    auto type = llvm::cast<RankedTensorType>(source.getType());
    if (!region || region->getNumResults() != 1 || type.getRank() != 2 ||
        !isSixteenBit(type.getElementType()) || type.getShape()[0] % 8 == 0 ||
        type.getShape()[0] < 64 || !roomy.insert(region).second)
      continue;
    c.rowRooms.push_back({region, (type.getShape()[0] + 7) / 8 * 8});
  }

  // Head splits that only one bf16 attention reads (through a widening it
  // reads bf16): its dO, which it could read untransposed.
  llvm::DenseSet<Operation *> forAttention(c.forAttention.begin(),
                                           c.forAttention.end());
  for (Operation &op : block) {
    if (!isHeadTranspose(&op) || !elementOf(op.getResult(0)).isBF16())
      continue;
    Operation *widening = onlyReader(op.getResult(0));
    if (!forAttention.contains(widening))
      continue;
    Operation *reader = onlyReader(widening->getResult(0));
    if (reader && isAttention(reader))
      c.headReads.push_back(&op);
  }

  // Products whose GELU (or its gradient) the region right after them
  // computes, in their operands' 16-bit type.
  for (Operation &op : block) {
    bool grad = false;
    Operation *region = geluEpilogueOf(&op, grad);
    if (!region ||
        narrowedOperands(&op, narrowed) != elementOf(region->getResult(0)))
      continue;
    bool adjacent = true;
    for (Operation *between = op.getNextNode(); between != region;
         between = between->getNextNode())
      adjacent &= llvm::isa<ReshapeOp>(between);
    if (adjacent)
      c.epilogues.push_back({&op, region, grad});
  }

  // Narrowed weight-gradient products whose A's sums over k (a bias's
  // gradient) the region right after them computes, with nothing but
  // reshapes between.
  for (Operation &op : block) {
    Operation *region = op.getNextNode();
    while (region && llvm::isa<ReshapeOp>(region))
      region = region->getNextNode();
    if (region && sumsProductRows(region, &op) &&
        narrowedOperands(&op, narrowed) == elementOf(region->getOperand(0)))
      c.biasGrads.push_back({&op, region});
  }

  // Splits along the last axis whose pieces only those head splits read.
  llvm::DenseSet<Operation *> heads(c.headReads.begin(), c.headReads.end());
  for (Operation &op : block) {
    auto split = llvm::dyn_cast<SplitOp>(&op);
    if (!split || !elementOf(split.getInput()).isBF16() ||
        int64_t(split.getAxis()) !=
            llvm::cast<RankedTensorType>(split.getInput().getType()).getRank() -
                1)
      continue;
    bool onlyHeads = true;
    for (Value piece : split.getResults()) {
      SmallVector<Operation *> readers;
      readersOf(piece, readers);
      onlyHeads &=
          !readers.empty() && llvm::all_of(readers, [&](Operation *reader) {
            return heads.contains(reader);
          });
    }
    if (onlyHeads)
      c.splitReads.push_back(split);
  }
  return c;
}

} // namespace dt
