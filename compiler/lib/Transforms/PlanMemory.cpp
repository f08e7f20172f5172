//===- PlanMemory.cpp - static arena offsets for every tensor -------------===//
//
// Every tensor of a rank lives at a byte offset in one arena fixed at compile
// time. The algorithm:
//
//   1. Persistent region: the globals, in order, each 64-byte aligned; in a
//      pipeline, those one pipeline rank holds alone (`dt.pp_rank`) after
//      the others, every rank's from the same offset, since a rank's arena
//      never holds another's. With `offload = "optimizer"` the globals only
//      @apply_step touches come first, and `dt.host_bytes` marks their end:
//      they live in host memory alone, the device holding the arena from
//      there on (dt/Transforms/OffloadInfo.h).
//   2. Storage per entry point: a dt.load result *is* its global's buffer, a
//      dt.reshape result is its operand's buffer and a dt.wait result its
//      asynchronous collective's (the operands a dt.wait keeps are read there,
//      so they live until the collective is done). A value stored into a global
//      is computed directly into the global's buffer when the function stores
//      that global once and no read of the old value can happen after the
//      value's producer runs (the producer itself may read it when it is a
//      dt.fused region reading the same element it writes, as optimizer updates
//      do); otherwise the store copies. A load whose value is read after a
//      store to its global gets a buffer of its own (the lowering copies into
//      it).
//      A global that is a ring of slots (`dt.slots`, a pipeline stage's
//      stash) takes that many aligned copies; the offsets of its values are
//      slot 0's, and lowering adds the offset of the slot the entry point
//      is called for.
//   3. Transient region: the other values get offsets after the persistent
//      region by liveness over the straight-line body, best fit among free
//      blocks; entry points share the region, which is as large as the
//      hungriest of them needs. For a program that also runs on a GPU
//      (`gpu-zero-copies`), liveness counts the reads a GPU's zero copies
//      add (dt/Transforms/ZeroCopyInfo.h): a product, the loss, a norm or
//      bf16 attention reading a widening's 16-bit source, and such an op
//      writing into the narrowings after it while its operands are still
//      read.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/OffloadInfo.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"
#include "dt/Transforms/ZeroCopyInfo.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <map>

namespace dt {
#define GEN_PASS_DEF_PLANMEMORY
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

constexpr int64_t kAlign = 64;

/// The largest arena a rank can address: the user address space of a 64-bit
/// process (x86-64 and AArch64 give 128 TiB). Sema bounds every tensor to
/// 2^40 elements, so offsets stay far from overflowing int64 below this.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 47;

/// The error for a plan that outgrows kMaxArenaBytes at `op`.
LogicalResult tooLarge(Operation *op, int64_t bytes) {
  return op->emitError("the memory plan needs more than ")
         << (bytes >> 40) << " TiB per rank here, more than a 64-bit process "
         << "can address; use a smaller model, batch or micro_batch, or shard "
            "it over more ranks";
}

int64_t alignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

int64_t byteSize(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return std::max<int64_t>(1, t.getNumElements() * ((bits + 7) / 8));
}

/// First-fit-by-size allocator over the transient region.
class Allocator {
public:
  explicit Allocator(int64_t base) : top(base) {}

  int64_t allocate(int64_t bytes) {
    bytes = alignUp(bytes);
    // Best fit: the smallest free block that holds `bytes`.
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= bytes &&
          (best == free.end() || it->second < best->second))
        best = it;
    if (best == free.end()) {
      int64_t offset = top;
      top += bytes;
      return offset;
    }
    int64_t offset = best->first, size = best->second;
    free.erase(best);
    if (size > bytes)
      free[offset + bytes] = size - bytes;
    return offset;
  }

  void release(int64_t offset, int64_t bytes) {
    bytes = alignUp(bytes);
    auto [it, inserted] = free.emplace(offset, bytes);
    (void)inserted;
    // Coalesce with the neighbours.
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }

  int64_t end() const { return top; }

private:
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t top;
};

struct PlanMemoryPass : public dt::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(module.getContext());

    // 1. Persistent region: the globals every rank uses, then those of one
    // pipeline rank, each rank's from the same offset.
    int64_t cursor = 0;
    llvm::StringMap<int64_t> globalOffset;
    auto place = [&](GlobalOp g, int64_t &at) {
      at = alignUp(at);
      g.setOffset(at);
      globalOffset[g.getSymName()] = at;
      int64_t bytes = byteSize(g.getType());
      // A ring of slots: one copy per slot, each aligned.
      if (auto slots = g->getAttrOfType<IntegerAttr>(names::kSlotsAttr)) {
        g->setAttr(names::kSlotBytesAttr, b.getI64IntegerAttr(alignUp(bytes)));
        bytes = alignUp(bytes) * slots.getInt();
      }
      at += bytes;
      if (at > kMaxArenaBytes)
        return tooLarge(g, at);
      return success();
    };
    llvm::DenseSet<Operation *> placed;
    if (std::optional<OffloadInfo> offload = OffloadInfo::get(module)) {
      for (GlobalOp g : offload->hostOnly) {
        if (failed(place(g, cursor)))
          return signalPassFailure();
        placed.insert(g);
      }
      cursor = alignUp(cursor);
      module->setAttr(names::kHostBytesAttr, b.getI64IntegerAttr(cursor));
    }
    for (GlobalOp g : module.getOps<GlobalOp>())
      if (pipelineRankOf(g) < 0 && !placed.contains(g) &&
          failed(place(g, cursor)))
        return signalPassFailure();
    std::map<int64_t, int64_t> ownCursor;
    for (GlobalOp g : module.getOps<GlobalOp>())
      if (int64_t r = pipelineRankOf(g); r >= 0) {
        int64_t &at = ownCursor.insert({r, cursor}).first->second;
        if (failed(place(g, at)))
          return signalPassFailure();
      }
    for (auto [rank, end] : ownCursor)
      cursor = std::max(cursor, end);
    int64_t persistent = alignUp(cursor);

    int64_t arena = persistent;
    if (gpuZeroCopies)
      narrowed = narrowedWidenings(module);
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError("dt-plan-memory needs single-block functions");
        return signalPassFailure();
      }
      // A pipeline rank's function touches its own globals and the shared
      // ones only: the others' bytes are not theirs in its arena.
      if (int64_t rank = pipelineRankOf(fn); rank >= 0) {
        WalkResult walk = fn.walk([&](Operation *op) {
          FlatSymbolRefAttr sym;
          if (auto load = dyn_cast<LoadOp>(op))
            sym = load.getGlobalAttr();
          else if (auto store = dyn_cast<StoreOp>(op))
            sym = store.getGlobalAttr();
          GlobalOp g = sym ? lookupGlobal(module, sym.getValue()) : GlobalOp();
          if (g && pipelineRankOf(g) >= 0 && pipelineRankOf(g) != rank) {
            op->emitError("internal error: a function of pipeline rank ")
                << rank << " uses '" << g.getSymName() << "' of rank "
                << pipelineRankOf(g);
            return WalkResult::interrupt();
          }
          return WalkResult::advance();
        });
        if (walk.wasInterrupted())
          return signalPassFailure();
      }
      FailureOr<int64_t> end = planFunction(fn, globalOffset, persistent);
      if (failed(end))
        return signalPassFailure();
      // What this entry point needs beyond the persistent region (reports).
      fn->setAttr("dt.transient_bytes",
                  b.getI64IntegerAttr(alignUp(*end) - persistent));
      arena = std::max(arena, *end);
    }
    module->setAttr("dt.persistent_bytes", b.getI64IntegerAttr(persistent));
    module->setAttr("dt.arena_bytes", b.getI64IntegerAttr(alignUp(arena)));
  }

  FailureOr<int64_t> planFunction(func::FuncOp fn,
                                  const llvm::StringMap<int64_t> &globalOffset,
                                  int64_t base) {
    Block &block = fn.getBody().front();
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : block)
      position[&op] = position.size();

    // The value whose buffer a value uses (itself, or what it is a view of).
    llvm::DenseMap<Value, Value> rootOf;
    auto root = [&](Value v) {
      auto it = rootOf.find(v);
      return it == rootOf.end() ? v : it->second;
    };
    // A dt.wait's result is its asynchronous collective's buffer, which the
    // collective writes from where it starts.
    for (Operation &op : block) {
      if (auto r = llvm::dyn_cast<ReshapeOp>(op))
        rootOf[r.getResult()] = root(r.getInput());
      if (auto w = llvm::dyn_cast<WaitOp>(op))
        rootOf[w.getResult()] = root(w.getPending());
    }

    // Last position at which a buffer is read, over all its views.
    llvm::DenseMap<Value, unsigned> lastUse;
    for (Operation &op : block)
      for (Value v : op.getOperands()) {
        unsigned &slot = lastUse[root(v)];
        slot = std::max(slot, position[&op]);
      }

    if (gpuZeroCopies)
      extendForZeroCopies(fn, position, root, lastUse);

    // Loads and stores per global.
    llvm::StringMap<SmallVector<LoadOp>> loads;
    llvm::StringMap<SmallVector<StoreOp>> stores;
    for (Operation &op : block) {
      if (auto l = llvm::dyn_cast<LoadOp>(op))
        loads[l.getGlobal()].push_back(l);
      if (auto s = llvm::dyn_cast<StoreOp>(op))
        stores[s.getGlobal()].push_back(s);
    }

    // 2. Storage: which values live in a global's buffer.
    llvm::DenseMap<Value, int64_t> fixed; // root value -> offset of its global
    for (auto &entry : loads) {
      StringRef name = entry.getKey();
      unsigned firstStore = ~0u;
      for (StoreOp s : stores.lookup(name))
        firstStore = std::min(firstStore, position[s]);
      for (LoadOp l : entry.getValue())
        if (lastUse.lookup(l.getResult()) < firstStore ||
            position[l] > firstStore)
          fixed[l.getResult()] = globalOffset.lookup(name);
      // Otherwise the load keeps its old value past a store: it gets its own
      // buffer.
    }
    for (auto &entry : stores) {
      StringRef name = entry.getKey();
      if (entry.getValue().size() != 1)
        continue;
      StoreOp store = entry.getValue().front();
      Value v = store.getValue();
      Operation *producer = v.getDefiningOp();
      if (!producer || llvm::isa<LoadOp, ReshapeOp, WaitOp>(producer) ||
          fixed.count(v))
        continue;
      if (llvm::any_of(loads.lookup(name), [&](LoadOp l) {
            return !oldValueDeadAt(l, producer, position[store], position);
          }))
        continue;
      fixed[v] = globalOffset.lookup(name);
    }

    // 3. Transient buffers by liveness.
    Allocator alloc(base);
    std::multimap<unsigned, std::pair<int64_t, int64_t>>
        expiring; // last use -> block
    OpBuilder b(fn.getContext());
    for (Operation &op : block) {
      unsigned pos = position[&op];
      // Buffers whose last read was before this op are free again.
      while (!expiring.empty() && expiring.begin()->first < pos) {
        alloc.release(expiring.begin()->second.first,
                      expiring.begin()->second.second);
        expiring.erase(expiring.begin());
      }
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults()) {
        Value rt = root(r);
        if (auto it = fixed.find(rt); it != fixed.end()) {
          offsets.push_back(it->second);
          continue;
        }
        if (rt != r) { // a view: its root was planned when it was defined
          offsets.push_back(
              llvm::cast<IntegerAttr>(
                  llvm::cast<ArrayAttr>(rt.getDefiningOp()->getAttr(
                      "dt.offsets"))[llvm::cast<OpResult>(rt)
                                         .getResultNumber()])
                  .getInt());
          continue;
        }
        // Room for rows a pitch apart, or for rows past the end, which a
        // GPU plan may lay out or a padded product read.
        if (int64_t pitch = rowPitch.lookup(&op))
          op.setAttr(kPitchAttr, b.getI64IntegerAttr(pitch));
        if (int64_t rows = rowRoom.lookup(&op))
          op.setAttr(kRowsAttr, b.getI64IntegerAttr(rows));
        int64_t bytes = plannedBytes(r);
        int64_t offset = alloc.allocate(bytes);
        if (alloc.end() > kMaxArenaBytes)
          return tooLarge(&op, alloc.end());
        offsets.push_back(offset);
        expiring.insert({std::max(pos, lastUse.lookup(r)), {offset, bytes}});
      }
      op.setAttr("dt.offsets", b.getI64ArrayAttr(offsets));
    }
    return alloc.end();
  }

  /// Lengthens `lastUse` by the reads a GPU plan's zero copies add: a
  /// candidate widening's 16-bit source is read by the widening's readers,
  /// an op that could write into the narrowings after it (or the head
  /// merges and concat after those) still reads its operands (or, for a
  /// candidate widening, its source), and has written its other results,
  /// when they are placed, a head split's input is read by the attention
  /// after it (and so is the input of a split whose pieces those are), and a
  /// forward attention's merged O by its gradients.
  template <typename Root>
  void extendForZeroCopies(func::FuncOp fn,
                           llvm::DenseMap<Operation *, unsigned> &position,
                           Root root,
                           llvm::DenseMap<Value, unsigned> &lastUse) {
    ZeroCopyCandidates c = ZeroCopyCandidates::find(fn, narrowed);
    for (auto [narrowing, pitch] : c.pitches)
      rowPitch[narrowing] = pitch;
    for (auto [region, rows] : c.rowRooms)
      rowRoom[region] = rows;
    auto extend = [&](Value v, unsigned until) {
      unsigned &slot = lastUse[root(v)];
      slot = std::max(slot, until);
    };
    // A forward attention's narrowed O -> its head merge's result: its
    // gradients read O back where the merge's buffer holds it, so whatever
    // keeps O alive keeps that buffer too.
    llvm::DenseMap<Value, Value> savedIn;
    for (const ZeroCopyCandidates::Writer &w : c.writers)
      if (!w.savedReads.empty())
        for (auto [pair, merge] : llvm::zip(w.into, w.merges))
          savedIn[root(pair.second->getResult(0))] = merge->getResult(0);
    auto extendRead = [&](Value v, unsigned until) {
      extend(v, until);
      if (Value merged = savedIn.lookup(root(v)))
        extend(merged, until);
    };
    llvm::DenseSet<Operation *> widenings;
    for (auto *list : {&c.forReaders, &c.forAttention})
      for (Operation *w : *list) {
        widenings.insert(w);
        extendRead(w->getOperand(0), lastUse.lookup(root(w->getResult(0))));
      }
    // A head split's input, read untransposed by the attention after it.
    llvm::DenseSet<Operation *> splits(c.headReads.begin(), c.headReads.end());
    for (Operation *split : c.headReads) {
      SmallVector<Operation *> widened, readers;
      readersOf(split->getResult(0), widened);
      for (Operation *w : widened)
        readersOf(w->getResult(0), readers);
      unsigned until = 0;
      for (Operation *reader : readers)
        until = std::max(until, position[reader]);
      extend(split->getOperand(0), until);
    }
    for (const ZeroCopyCandidates::Writer &w : c.writers) {
      // Until the last buffer it might write into is placed: a narrowing's,
      // a head merge's or their concat's.
      unsigned until = 0;
      for (auto [result, narrowing] : w.into)
        until = std::max(until, position[narrowing]);
      for (Operation *merge : w.merges)
        until = std::max(until, position[merge]);
      if (w.concat)
        until = std::max(until, position[w.concat]);
      for (Value operand : w.op->getOperands()) {
        Operation *def = root(operand).getDefiningOp();
        Value read = widenings.contains(def) ? def->getOperand(0) : operand;
        extendRead(read, until);
        if (Operation *split = root(read).getDefiningOp();
            splits.contains(split))
          extend(split->getOperand(0), until);
      }
      // And what it writes besides (a layer norm gradient's dw and db).
      for (Value result : w.op->getResults())
        if (llvm::none_of(w.into, [&](auto &p) { return p.first == result; }))
          extend(result, until);
    }
    // A product whose epilogue writes the region after it (GELU, or a
    // bias's gradient beside the product): what it reads lives until the
    // region's results are placed.
    auto readUntilRegion = [&](Operation *product, Operation *region) {
      for (Value operand : product->getOperands()) {
        Operation *def = root(operand).getDefiningOp();
        extendRead(widenings.contains(def) ? def->getOperand(0) : operand,
                   position[region]);
      }
    };
    for (const ZeroCopyCandidates::Epilogue &e : c.epilogues)
      readUntilRegion(e.product, e.region);
    // A bias's gradient is written beside the product's own result, which
    // must not share its bytes.
    for (const ZeroCopyCandidates::BiasGrad &g : c.biasGrads) {
      readUntilRegion(g.product, g.region);
      extend(g.product->getResult(0), position[g.region]);
    }
    // A split's input, read in place of its pieces for as long as they are
    // (those extended above).
    for (Operation *split : c.splitReads) {
      unsigned until = 0;
      for (Value piece : split->getResults())
        until = std::max(until, lastUse.lookup(root(piece)));
      extend(split->getOperand(0), until);
    }
  }

  llvm::DenseSet<Operation *> narrowed; // narrowedWidenings of the module
  /// Narrowings whose buffers get room for a row pitch (gpu-zero-copies:
  /// ZeroCopyCandidates::pitches).
  llvm::DenseMap<Operation *, int64_t> rowPitch;
  /// Regions whose result's buffer gets room for more rows
  /// (ZeroCopyCandidates::rowRooms).
  llvm::DenseMap<Operation *, int64_t> rowRoom;

  /// Whether the old value read by `load` is dead once `producer` (whose result
  /// the store at `storeAt` writes) runs: every read of it happens before, or
  /// is `producer` itself reading it elementwise (a dt.fused region reads and
  /// writes the same element, so updating in place is safe). A load after the
  /// store reads the new value anyway.
  static bool oldValueDeadAt(LoadOp load, Operation *producer, unsigned storeAt,
                             llvm::DenseMap<Operation *, unsigned> &position) {
    unsigned at = position[producer];
    if (position[load] > storeAt)
      return true;
    if (position[load] > at)
      return false; // it would read the buffer after the producer overwrote it
    SmallVector<Value> views{load.getResult()};
    for (unsigned i = 0; i < views.size(); ++i)
      for (Operation *user : views[i].getUsers()) {
        if (auto r = llvm::dyn_cast<ReshapeOp>(user)) {
          views.push_back(r.getResult());
          continue;
        }
        if (position[user] < at)
          continue;
        auto fused = llvm::dyn_cast<FusedOp>(user);
        if (user == producer && fused && !fused.isReduction() &&
            shapeOf(views[i]) == fused.getIterationShape())
          continue;
        return false;
      }
    return true;
  }
};

} // namespace

int64_t dt::plannedOffset(Value v) {
  auto result = llvm::cast<OpResult>(v);
  auto offsets = result.getOwner()->getAttrOfType<ArrayAttr>("dt.offsets");
  return llvm::cast<IntegerAttr>(offsets[result.getResultNumber()]).getInt();
}
