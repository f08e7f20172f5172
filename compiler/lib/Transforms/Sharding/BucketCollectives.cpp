//===- BucketCollectives.cpp - Small collectives travel together ----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A transformer's gradients are a few large matrices and many small vectors
// (biases, norm gains); each collective costs a latency, so the small ones are
// bucketed, as DDP and DeepSpeed do. The algorithm, per entry point:
//
//   0. Sums (with the reshapes and pads that only feed them) move up to just
//      after their operands, and stores of collectives' results down to the
//      end (unless the global is read again), so that collectives that can
//      travel together are neighbours. All-gathers stay before their use.
//   1. Over the collectives in program order, a collective joins the open
//      bucket when it has the bucket's kind, axes and element type, its
//      operand is small (at most 256 KiB and `bucket-bytes`), the bucket
//      stays within `bucket-bytes`, and no member's result is used before this
//      collective's place (the bucket is issued there, once its last operand
//      is ready). Otherwise the bucket is closed and a new one opened.
//   2. A closed bucket of two or more is issued after its last member as one
//      collective on the concatenation of the members' operands, and its
//      result is split back into theirs:
//        all-reduce:     flat operands end to end;
//        reduce-scatter: each operand viewed as [k, block], joined along the
//                        blocks, so that every rank's part of the bucket is
//                        one block of it (its blocks of every member);
//        all-gather:     flat operands end to end; the gathered [k, bucket]
//                        is split along the bucket into [k, block] pieces.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"
#include "dt/Dialect/DT/IR/DTBuilder.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

namespace dt {
#define GEN_PASS_DEF_BUCKETCOLLECTIVES
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

int64_t bytesOf(Value v) {
  return tensorType(v).getNumElements() *
         elementBytes(tensorType(v).getElementType());
}

/// What members of one bucket share.
struct Key {
  StringRef kind;
  ArrayRef<int16_t> axes;
  Type element;
  bool operator==(const Key &o) const {
    return kind == o.kind && axes == o.axes && element == o.element;
  }
};

std::optional<Key> keyOf(Operation *op) {
  std::optional<ArrayRef<int16_t>> axes = collectiveAxes(op);
  if (!axes)
    return std::nullopt;
  Type element = tensorType(op->getOperand(0)).getElementType();
  if (auto r = dyn_cast<mesh::AllReduceOp>(op))
    return r.getReduction() == mesh::ReductionKind::Sum
               ? std::optional<Key>(Key{"all-reduce", *axes, element})
               : std::nullopt;
  if (auto r = dyn_cast<mesh::ReduceScatterOp>(op))
    return r.getReduction() == mesh::ReductionKind::Sum &&
                   r.getScatterAxis().isZero()
               ? std::optional<Key>(Key{"reduce-scatter", *axes, element})
               : std::nullopt;
  if (auto g = dyn_cast<mesh::AllGatherOp>(op))
    return g.getGatherAxis().isZero()
               ? std::optional<Key>(Key{"all-gather", *axes, element})
               : std::nullopt;
  return std::nullopt;
}

/// Operands above this size do not join buckets: a collective's latency is
/// worth a few microseconds, copying 256 KiB in and out of a bucket about as
/// much.
constexpr int64_t kLargeBytes = int64_t(256) << 10;

class FunctionBuckets {
public:
  FunctionBuckets(func::FuncOp fn, int64_t limit, ArrayRef<int64_t> meshShape)
      : fn(fn), limit(limit), meshShape(meshShape), b(fn.getContext()) {}

  void run() {
    schedule();
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : fn.getBody().front())
      position[&op] = position.size();
    auto firstUse = [&](Operation *op) {
      unsigned first = ~0u;
      for (Operation *user : op->getResult(0).getUsers())
        first = std::min(first, position.lookup(user));
      return first;
    };

    SmallVector<SmallVector<Operation *>> buckets;
    SmallVector<Operation *> open;
    std::optional<Key> openKey;
    int64_t openBytes = 0;
    auto close = [&] {
      if (open.size() > 1)
        buckets.push_back(open);
      open.clear();
      openKey.reset();
      openBytes = 0;
    };
    for (Operation &op : fn.getBody().front()) {
      std::optional<Key> key = keyOf(&op);
      if (!key)
        continue;
      // A large collective travels alone: sharing a latency saves less than
      // copying it into a bucket and out again costs.
      int64_t bytes = bytesOf(op.getOperand(0));
      if (bytes > std::min(limit, kLargeBytes)) {
        continue;
      }
      bool fits = openKey && *openKey == *key && openBytes + bytes <= limit &&
                  llvm::all_of(open, [&](Operation *member) {
                    return firstUse(member) > position[&op];
                  });
      if (!fits)
        close();
      open.push_back(&op);
      openKey = key;
      openBytes += bytes;
    }
    close();
    for (ArrayRef<Operation *> bucket : buckets)
      issue(bucket);
  }

private:
  /// Moves collectives as early and the stores of their results as late as
  /// the program allows, so that those that can share a bucket are
  /// neighbours: the reduce-scatters of an optimizer step's gradients all
  /// follow the gradients' loads, and the all-gathers of its parameters all
  /// precede the stores at the end.
  void schedule() {
    Block &body = fn.getBody().front();
    // Collectives with the layout ops that only feed them, as early as their
    // inputs allow, in program order (every rank moves them alike).
    // All-gathers stay where the partitioner put them, before their first
    // use: moved up, a ZeRO-3 parameter gathered for backward would be whole
    // from the start of the step, which is what ZeRO-3 saves.
    SmallVector<Operation *> collectives;
    for (Operation &op : body)
      if (keyOf(&op) && !isa<mesh::AllGatherOp>(op))
        collectives.push_back(&op);
    // Chains that can go to the very top keep their order there.
    Operation *top = nullptr;
    for (Operation *c : collectives) {
      SmallVector<Operation *> chain{c};
      Operation *op = c->getOperand(0).getDefiningOp();
      for (; op && isa<PadOp, ReshapeOp, TransposeOp>(op) && op->hasOneUse();
           op = op->getOperand(0).getDefiningOp())
        chain.push_back(op);
      // A load that only feeds the chain goes along, as far up as no store
      // to its global before it allows.
      auto load = dyn_cast_or_null<LoadOp>(op);
      if (load && load->hasOneUse())
        chain.push_back(load);
      else
        load = nullptr;
      Operation *first = chain.back();
      Operation *after = nullptr;
      for (Value v : first->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (!after || after->isBeforeInBlock(def))
            after = def;
      if (load)
        for (Operation *prev = load->getPrevNode(); prev;
             prev = prev->getPrevNode())
          if (auto store = dyn_cast<StoreOp>(prev);
              store && store.getGlobal() == load.getGlobal()) {
            after = prev;
            break;
          }
      bool toTop = !after;
      if (toTop)
        after = top;
      for (Operation *op : llvm::reverse(chain)) {
        if (after)
          op->moveAfter(after);
        else
          op->moveBefore(&body.front());
        after = op;
      }
      if (toTop)
        top = c;
    }
    // Stores of collective results, as late as no later load of their global
    // forbids.
    // The layout ops between a collective and the store of its result (a
    // slice dropping padding, the transposes of a blocked dimension) go
    // along.
    SmallVector<SmallVector<Operation *>> sinks;
    for (Operation &op : body) {
      auto store = dyn_cast<StoreOp>(op);
      if (!store)
        continue;
      SmallVector<Operation *> chain{store};
      Operation *def = store.getValue().getDefiningOp();
      for (; def && isa<ReshapeOp, SliceOp, TransposeOp>(def) &&
             def->hasOneUse();
           def = def->getOperand(0).getDefiningOp())
        chain.push_back(def);
      if (def && keyOf(def))
        sinks.push_back(chain);
    }
    Operation *end = body.getTerminator();
    for (ArrayRef<Operation *> chain : sinks) {
      auto store = cast<StoreOp>(chain.front());
      bool readLater = false;
      for (Operation *op = store->getNextNode(); op; op = op->getNextNode())
        if (auto load = dyn_cast<LoadOp>(op))
          readLater |= load.getGlobal() == store.getGlobal();
      if (readLater)
        continue;
      for (Operation *op : llvm::reverse(chain))
        op->moveBefore(end);
    }
  }

  /// Issues `members` as one collective after the last of them.
  void issue(ArrayRef<Operation *> members) {
    Operation *last = members.back();
    b.setInsertionPointAfter(last);
    Location loc = last->getLoc();
    DTBuilder e{b, loc};
    Key key = *keyOf(last);
    Type element = key.element;
    int64_t group = 1;
    for (int16_t a : key.axes)
      group *= meshShape[a];
    auto flat = [&](Value v) {
      return e.reshape(v, {tensorType(v).getNumElements()});
    };
    auto meshRef = FlatSymbolRefAttr::get(b.getContext(), MeshInfo::kSymbol);
    auto axesAttr = b.getDenseI16ArrayAttr(SmallVector<int16_t>(key.axes));
    auto sum = mesh::ReductionKindAttr::get(b.getContext(),
                                           mesh::ReductionKind::Sum);
    std::string what = llvm::formatv("a bucket of {0} {1}s", members.size(),
                                     key.kind)
                           .str();

    // Each member's part of the bucket: its whole flat operand (all-reduce,
    // all-gather) or its per-rank block (reduce-scatter).
    SmallVector<Value> parts;
    SmallVector<int64_t> sizes;
    int64_t total = 0;
    for (Operation *m : members) {
      Value in = m->getOperand(0);
      int64_t n = tensorType(in).getNumElements();
      if (key.kind == "reduce-scatter") {
        parts.push_back(e.reshape(in, {group, n / group}));
        sizes.push_back(n / group);
      } else {
        parts.push_back(flat(in));
        sizes.push_back(n);
      }
      total += sizes.back();
    }
    auto type = [&](ArrayRef<int64_t> shape) {
      return RankedTensorType::get(shape, element);
    };

    // The collective's result, cut back into the members' results: along
    // `dim` of `whole`, whose other dimensions are `lead`.
    SmallVector<Value> results;
    auto cut = [&](Value whole, ArrayRef<int64_t> lead, int64_t dim) {
      SmallVector<Type> pieces;
      for (int64_t n : sizes) {
        SmallVector<int64_t> shape(lead);
        shape.push_back(n);
        pieces.push_back(type(shape));
      }
      auto split = b.create<SplitOp>(loc, pieces, whole, dim);
      results.assign(split.getResults().begin(), split.getResults().end());
    };
    Operation *c;
    if (key.kind == "all-reduce") {
      Value joined = b.create<ConcatOp>(loc, type({total}), parts, 0);
      c = b.create<mesh::AllReduceOp>(loc, type({total}), meshRef, axesAttr,
                                      joined, sum);
      cut(c->getResult(0), {}, 0);
    } else if (key.kind == "reduce-scatter") {
      Value joined = b.create<ConcatOp>(loc, type({group, total}), parts, 1);
      Value rows = e.reshape(joined, {group * total});
      c = b.create<mesh::ReduceScatterOp>(loc, type({total}), meshRef,
                                          axesAttr, rows, sum,
                                          b.getIndexAttr(0));
      cut(c->getResult(0), {}, 0);
    } else {
      Value joined = b.create<ConcatOp>(loc, type({total}), parts, 0);
      c = b.create<mesh::AllGatherOp>(loc, type({group * total}), meshRef,
                                      axesAttr, joined, b.getIndexAttr(0));
      cut(e.reshape(c->getResult(0), {group, total}), {group}, 1);
    }
    c->setAttr(layout::kWhat, b.getStringAttr(what));
    for (auto [m, r] : llvm::zip(members, results)) {
      Value shaped = e.reshape(r, tensorType(m->getResult(0)).getShape());
      m->getResult(0).replaceAllUsesWith(shaped);
    }
    for (Operation *m : members)
      m->erase();
  }

  func::FuncOp fn;
  int64_t limit;
  ArrayRef<int64_t> meshShape;
  OpBuilder b;
};

struct BucketCollectivesPass
    : public dt::impl::BucketCollectivesBase<BucketCollectivesPass> {
  using BucketCollectivesBase::BucketCollectivesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module.lookupSymbol<mesh::MeshOp>(MeshInfo::kSymbol);
    if (!mesh || bucketBytes <= 0)
      return;
    for (func::FuncOp fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && fn.getBody().hasOneBlock())
        FunctionBuckets(fn, bucketBytes, mesh.getShape()).run();
  }
};

} // namespace
