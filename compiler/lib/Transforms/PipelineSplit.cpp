//===- PipelineSplit.cpp - one forward and one backward per stage ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Cuts @grad_step, whose ops carry their stage (`dt.stage`) and direction
// (`dt.backward`), into `@pipe_fwd_S` and `@pipe_bwd_S` for every virtual
// stage S. The runtime runs them in the schedule's order, one micro-batch at a
// time, so whatever one of them reads from another travels through a `pipe`
// global:
//
//   - forward S -> forward T > S: leaves in `pipe/sK/send/I` at every stage K
//     from S to T - 1 and arrives in `pipe/sK+1/recv/I` (relayed stage by
//     stage: the runtime only ever talks to neighbours);
//   - backward T -> backward S < T: the same downwards, `gsend` and `grecv`;
//   - forward -> backward of one stage S: forward stores it in
//     `pipe/sS/stash/I`, a ring of as many slots as the schedule keeps
//     micro-batches of stage S in flight (`dt.slots`); the runtime sets
//     `pipe/sS/slot` to the micro-batch's slot before its forward and its
//     backward, since other micro-batches' forwards run in between.
//
// Loads of parameters and optimizer state (they change only in @apply_step),
// constants, and the views and conversions of those (a transposed weight, a
// broadcast bias) are repeated in every function that reads them, rather than
// sent; so are loads of the batch, in
// forwards (the runtime stages each micro-batch before every forward that
// reads it) but not in backwards, which run after later micro-batches were
// staged and take the batch from the stash.
//
// Anything else crossing (a backward value read by forward, a later stage's
// forward value read by an earlier backward) cannot be scheduled: an internal
// error at the op.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace dt {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// A function of the split: stage S's forward (2S) or backward (2S + 1).
using FnId = int64_t;
FnId forwardOf(int64_t stage) { return 2 * stage; }
FnId backwardOf(int64_t stage) { return 2 * stage + 1; }
int64_t stageOfFn(FnId f) { return f / 2; }
bool isForward(FnId f) { return f % 2 == 0; }

class Splitter {
public:
  /// `eval`: `grad` is @eval_step, whose stages have a forward only.
  Splitter(ModuleOp module, func::FuncOp grad, const PipelineInfo &info,
           bool eval)
      : module(module), grad(grad), info(info), eval(eval),
        b(module.getContext()) {}

  LogicalResult run() {
    if (failed(place()) || failed(analyse()))
      return failure();
    FailureOr<pipeline::Schedule> schedule = buildSchedule(module, info);
    if (failed(schedule))
      return failure();
    build(*schedule);
    grad.erase();
    return success();
  }

private:
  ModuleOp module;
  func::FuncOp grad;
  const PipelineInfo &info;
  bool eval;
  OpBuilder b;

  /// The function of every op that has one (ops that are repeated where
  /// needed have none unless autodiff tagged them).
  llvm::DenseMap<Operation *, FnId> fnOf;
  /// Values forward carries: the last stage that needs each.
  llvm::MapVector<Value, int64_t> forwardTo;
  /// Values backward carries: the first stage that needs each.
  llvm::MapVector<Value, int64_t> backwardTo;
  /// Per stage, the forward values its backward reads.
  std::vector<llvm::SetVector<Value>> stash;
  /// Per boundary K (stage K to K + 1): forward's values across it, and
  /// backward's (stage K + 1 to K).
  std::vector<SmallVector<Value>> forwardAcross, backwardAcross;

  /// Whether `v` can be computed again in a function of this direction rather
  /// than moved: made from constants, parameters and state alone (and the
  /// batch, into a forward).
  bool repeatable(Value v, bool forward) {
    llvm::DenseMap<Value, bool> &cache = forward ? intoForward : intoBackward;
    if (auto it = cache.find(v); it != cache.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    bool ok = false;
    if (!def) {
      ok = false;
    } else if (auto load = dyn_cast<LoadOp>(def)) {
      GlobalOp g = lookupGlobal(module, load.getGlobal());
      ok = g && (g.getRole() == Role::param || g.getRole() == Role::state ||
                 (forward && g.getRole() == Role::input));
    } else if (isa<ConstantOp, IotaOp>(def)) {
      ok = true;
    } else if (isa<BroadcastToOp, ReshapeOp, TransposeOp, ConvertOp>(def)) {
      // Views and conversions are cheap to repeat; computations are not.
      ok = llvm::all_of(def->getOperands(),
                        [&](Value o) { return repeatable(o, forward); });
    }
    cache[v] = ok;
    return ok;
  }
  llvm::DenseMap<Value, bool> intoForward, intoBackward;

  LogicalResult place() {
    for (Operation &op : grad.getBody().front().without_terminator()) {
      int64_t stage = stageOf(&op);
      if (stage < 0) {
        bool free = llvm::all_of(op.getResults(), [&](Value r) {
          return repeatable(r, true) && repeatable(r, false);
        });
        if (free && op.getNumResults() > 0)
          continue;
        return op.emitError("internal error: dt-pipeline-split found an op "
                            "of no pipeline stage");
      }
      if (stage >= info.numStages())
        return op.emitError("internal error: pipeline stage ")
                   << stage << " of " << info.numStages(),
               failure();
      fnOf[&op] = op.hasAttr(names::kBackwardAttr) ? backwardOf(stage)
                                                   : forwardOf(stage);
    }
    return success();
  }

  /// Where each value that crosses between functions must go.
  LogicalResult analyse() {
    int64_t stages = info.numStages();
    stash.resize(size_t(stages));
    for (Operation &body : grad.getBody().front().without_terminator()) {
      auto placed = fnOf.find(&body);
      if (placed == fnOf.end())
        continue;
      Operation *op = &body;
      FnId user = placed->second;
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        auto it = def ? fnOf.find(def) : fnOf.end();
        if (it != fnOf.end() && it->second == user)
          continue;
        if (repeatable(v, isForward(user)))
          continue;
        if (it == fnOf.end())
          return op->emitError("internal error: dt-pipeline-split cannot "
                               "bring an operand into pipeline stage ")
                     << stageOfFn(user),
                 failure();
        FnId from = it->second;
        int64_t s = stageOfFn(from), t = stageOfFn(user);
        if (isForward(from) && isForward(user) && t > s) {
          int64_t &to = forwardTo.insert({v, t}).first->second;
          to = std::max(to, t);
        } else if (isForward(from) && !isForward(user) && t >= s) {
          stash[size_t(t)].insert(v);
          if (t > s) {
            int64_t &to = forwardTo.insert({v, t}).first->second;
            to = std::max(to, t);
          }
        } else if (!isForward(from) && !isForward(user) && t < s) {
          int64_t &to = backwardTo.insert({v, t}).first->second;
          to = std::min(to, t);
        } else {
          InFlightDiagnostic d =
              op->emitError("internal error: this op of the ")
              << (isForward(user) ? "forward" : "backward") << " of pipeline "
              << "stage " << t << " reads a value of the "
              << (isForward(from) ? "forward" : "backward") << " of stage "
              << s << ", which no schedule can provide";
          d.attachNote(def->getLoc()) << "the value";
          return failure();
        }
      }
    }
    // Boundaries in the order the values are computed, so that sender and
    // receiver list them alike.
    llvm::DenseMap<Operation *, int64_t> order;
    for (Operation &op : grad.getBody().front())
      order[&op] = int64_t(order.size());
    auto position = [&](Value v) { return order.lookup(v.getDefiningOp()); };
    forwardAcross.resize(size_t(stages));
    backwardAcross.resize(size_t(stages));
    SmallVector<std::pair<Value, int64_t>> forward(forwardTo.begin(),
                                                   forwardTo.end()),
        backward(backwardTo.begin(), backwardTo.end());
    auto byPosition = [&](const auto &x, const auto &y) {
      return position(x.first) < position(y.first);
    };
    llvm::sort(forward, byPosition);
    llvm::sort(backward, byPosition);
    for (auto [v, to] : forward)
      for (int64_t k = stageOfFn(fnOf[v.getDefiningOp()]); k < to; ++k)
        forwardAcross[size_t(k)].push_back(v);
    for (auto [v, to] : backward)
      for (int64_t k = to; k < stageOfFn(fnOf[v.getDefiningOp()]); ++k)
        backwardAcross[size_t(k)].push_back(v);
    return success();
  }

  /// A pipe global of stage `stage` shaped like `v`.
  GlobalOp pipeGlobal(int64_t stage, StringRef kind, size_t index, Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    std::string name =
        ("pipe/s" + Twine(stage) + "/" + kind + "/" + Twine(index)).str();
    GlobalOp g = *getOrCreateGlobal(module, name, type, Role::pipe);
    g->setAttr(names::kPipelineRankAttr,
               b.getI64IntegerAttr(info.rankOf(stage)));
    // Activations and their gradients hold samples along their first
    // dimension, as the batch does: the data axes split them alike.
    if (type.getRank() > 0)
      g->setAttr(names::kBatchAttr, b.getUnitAttr());
    return g;
  }

  struct Function {
    func::FuncOp fn;
    IRMapping mapping;
    /// Where values from elsewhere are loaded from.
    llvm::DenseMap<Value, GlobalOp> incoming;
  };

  /// `v` in `f`: computed there, repeated, or loaded from where it arrives.
  Value get(Value v, FnId id, Function &f) {
    if (Value mapped = f.mapping.lookupOrNull(v))
      return mapped;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(f.fn.getBody().front().getTerminator());
    if (auto it = f.incoming.find(v); it != f.incoming.end()) {
      Value loaded =
          b.create<LoadOp>(v.getLoc(), v.getType(), it->second.getSymName());
      f.mapping.map(v, loaded);
      return loaded;
    }
    // Repeated: its operands first (they are repeatable too).
    Operation *def = v.getDefiningOp();
    assert(def && repeatable(v, isForward(id)) && "analysed as repeatable");
    for (Value o : def->getOperands())
      get(o, id, f);
    Operation *copy = b.clone(*def, f.mapping);
    copy->removeAttr(names::kStageAttr);
    copy->removeAttr(names::kBackwardAttr);
    return f.mapping.lookup(v);
  }

  /// The stage functions; `schedule` says how many micro-batches each stage
  /// keeps in flight (the slots of its stash).
  void build(const pipeline::Schedule &schedule) {
    int64_t stages = info.numStages();
    MLIRContext *ctx = module.getContext();
    std::vector<Function> fns(size_t(2 * stages));
    b.setInsertionPointAfter(grad);
    auto symbolList = [&](ArrayRef<GlobalOp> globals) {
      SmallVector<Attribute> list;
      for (GlobalOp g : globals)
        list.push_back(b.getStringAttr(g.getSymName()));
      return b.getArrayAttr(list);
    };
    for (int64_t s = 0; s < stages; ++s)
      for (bool forward : {true, false}) {
        if (eval && !forward)
          continue;
        FnId id = forward ? forwardOf(s) : backwardOf(s);
        StringRef kind = eval ? "pipe_eval" : forward ? "pipe_fwd" : "pipe_bwd";
        std::string name = (kind + "_" + Twine(s)).str();
        auto fn = b.create<func::FuncOp>(grad.getLoc(), name,
                                         FunctionType::get(ctx, {}, {}));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(fn.addEntryBlock());
        b.create<func::ReturnOp>(grad.getLoc());
        fn->setAttr("dt.entry",
                    b.getStringAttr(kind + ".c" + Twine(s / info.ranks)));
        fn->setAttr("dt.ranks", b.getDenseI64ArrayAttr(
                                    info.worldRanksAt(info.rankOf(s))));
        fn->setAttr(names::kStageAttr, b.getI64IntegerAttr(s));
        fn->setAttr(names::kPipelineRankAttr,
                    b.getI64IntegerAttr(info.rankOf(s)));
        fns[size_t(id)].fn = fn;
        b.setInsertionPointAfter(fn);
      }

    // What each function receives, sends and stashes.
    std::vector<SmallVector<GlobalOp>> sends(fns.size()), recvs(fns.size());
    auto stashes = std::vector<SmallVector<GlobalOp>>(size_t(stages));
    for (int64_t k = 0; k + 1 < stages; ++k) {
      for (auto [i, v] : llvm::enumerate(forwardAcross[size_t(k)])) {
        sends[size_t(forwardOf(k))].push_back(
            pipeGlobal(k, eval ? "esend" : "send", i, v));
        GlobalOp in = pipeGlobal(k + 1, eval ? "erecv" : "recv", i, v);
        recvs[size_t(forwardOf(k + 1))].push_back(in);
        fns[size_t(forwardOf(k + 1))].incoming[v] = in;
      }
      for (auto [i, v] : llvm::enumerate(backwardAcross[size_t(k)])) {
        sends[size_t(backwardOf(k + 1))].push_back(
            pipeGlobal(k + 1, "gsend", i, v));
        GlobalOp in = pipeGlobal(k, "grecv", i, v);
        recvs[size_t(backwardOf(k))].push_back(in);
        fns[size_t(backwardOf(k))].incoming[v] = in;
      }
    }
    // A stage's stash holds every micro-batch its schedule keeps in flight,
    // each in its own slot: the runtime names the slot, nothing is copied.
    for (int64_t s = 0; s < stages; ++s) {
      if (stash[size_t(s)].empty())
        continue;
      GlobalOp index = *getOrCreateGlobal(
          module, ("pipe/s" + Twine(s) + "/slot").str(),
          RankedTensorType::get({}, b.getI64Type()), Role::pipe);
      index->setAttr(names::kPipelineRankAttr,
                     b.getI64IntegerAttr(info.rankOf(s)));
      for (auto [i, v] : llvm::enumerate(stash[size_t(s)])) {
        GlobalOp g = pipeGlobal(s, "stash", i, v);
        g->setAttr(names::kSlotsAttr,
                   b.getI64IntegerAttr(schedule.peakInFlight(s)));
        g->setAttr(names::kSlotIndexAttr,
                   FlatSymbolRefAttr::get(index.getSymNameAttr()));
        stashes[size_t(s)].push_back(g);
        fns[size_t(backwardOf(s))].incoming[v] = g;
      }
    }

    // Bodies in program order.
    for (Operation &op : grad.getBody().front().without_terminator()) {
      auto it = fnOf.find(&op);
      if (it == fnOf.end())
        continue;
      Function &f = fns[size_t(it->second)];
      for (Value v : op.getOperands())
        get(v, it->second, f);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(f.fn.getBody().front().getTerminator());
      Operation *copy = b.clone(op, f.mapping);
      copy->removeAttr(names::kStageAttr);
      copy->removeAttr(names::kBackwardAttr);
    }

    // Sends and stashes at the end of each function.
    auto storeAll = [&](FnId id, ArrayRef<Value> values,
                        ArrayRef<GlobalOp> globals) {
      Function &f = fns[size_t(id)];
      for (auto [v, target] : llvm::zip(values, globals)) {
        GlobalOp g = target;
        Value local = get(v, id, f);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(f.fn.getBody().front().getTerminator());
        b.create<StoreOp>(v.getLoc(), local, g.getSymName());
      }
    };
    for (int64_t s = 0; s < stages; ++s) {
      if (s + 1 < stages) {
        storeAll(forwardOf(s), forwardAcross[size_t(s)],
                 sends[size_t(forwardOf(s))]);
        storeAll(backwardOf(s + 1), backwardAcross[size_t(s)],
                 sends[size_t(backwardOf(s + 1))]);
      }
      storeAll(forwardOf(s), stash[size_t(s)].getArrayRef(),
               stashes[size_t(s)]);
    }
    for (auto [id, f] : llvm::enumerate(fns)) {
      if (!f.fn)
        continue;
      f.fn->setAttr("dt.pipe_send", symbolList(sends[id]));
      f.fn->setAttr("dt.pipe_recv", symbolList(recvs[id]));
      f.fn->setAttr("dt.pipe_stash", symbolList(stashes[id / 2]));
    }
  }
};

struct PipelineSplitPass
    : public dt::impl::PipelineSplitBase<PipelineSplitPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::optional<PipelineInfo>> info = PipelineInfo::get(module);
    if (failed(info))
      return signalPassFailure();
    if (!*info)
      return;
    auto grad = module.lookupSymbol<func::FuncOp>(names::kGradStep);
    if (!grad) {
      module.emitError("dt-pipeline-split needs a function @grad_step");
      return signalPassFailure();
    }
    if (failed(Splitter(module, grad, **info, /*eval=*/false).run()))
      return signalPassFailure();
    if (auto evalFn = module.lookupSymbol<func::FuncOp>(names::kEvalStep))
      if (failed(Splitter(module, evalFn, **info, /*eval=*/true).run()))
        signalPassFailure();
  }
};

} // namespace
