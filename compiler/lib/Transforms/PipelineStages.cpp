//===- PipelineStages.cpp - which pipeline stage computes each op ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Tags every op of @loss with the virtual stage that computes it (`dt.stage`).
// Two sweeps:
//
//   1. Forward, anchoring: an op inside a stage's layers (MLIRGen names every
//      op after its layer) belongs to that stage; an op reading an anchored
//      value belongs to the latest stage among its operands, so the final norm,
//      the head and the loss follow the last stage. A stage's op that reads a
//      later stage's value means the stages are not in the order the model
//      computes them: an error at the op.
//   2. Backward, placing the rest: what no stage anchors (loads, constants,
//      the embedding before the first stage) goes to the earliest stage that
//      uses it, and is copied for every later stage that uses it too. After
//      this, every use is inside the user's stage or crosses from an earlier
//      stage's anchored value, and a tied parameter has one load per stage, so
//      dt-autodiff gives each stage its own part of the gradient.
//
// A parameter whose loads all sit on one pipeline rank's stages gets
// `dt.pp_rank`: the other ranks need not hold it.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>
#include <set>

namespace dt {
#define GEN_PASS_DEF_PIPELINESTAGES
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

struct PipelineStagesPass
    : public dt::impl::PipelineStagesBase<PipelineStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::optional<PipelineInfo>> info = PipelineInfo::get(module);
    if (failed(info))
      return signalPassFailure();
    if (!*info)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(names::kLossFn);
    if (!fn) {
      module.emitError("dt-pipeline-stages needs a function @loss");
      return signalPassFailure();
    }
    if (failed(assign(module, fn, **info, /*isLoss=*/true)))
      return signalPassFailure();
    // Evaluation runs the same layers through the same stages.
    if (auto eval = module.lookupSymbol<func::FuncOp>(names::kEvalStep))
      if (failed(assign(module, eval, **info, /*isLoss=*/false)))
        signalPassFailure();
  }

  LogicalResult assign(ModuleOp module, func::FuncOp fn,
                       const PipelineInfo &info, bool isLoss) {
    Block &body = fn.getBody().front();
    OpBuilder b(fn.getContext());
    auto tag = [&](Operation *op, int64_t stage) {
      op->setAttr(names::kStageAttr, b.getI64IntegerAttr(stage));
    };

    // 1. Anchoring, in program order.
    llvm::DenseMap<Operation *, int64_t> anchored;
    for (Operation &op : body.without_terminator()) {
      int64_t latest = -1;
      Operation *latestOp = nullptr;
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp())
          if (auto it = anchored.find(def);
              it != anchored.end() && it->second > latest) {
            latest = it->second;
            latestOp = def;
          }
      int64_t own = info.stageOfLayer(layerOf(op.getLoc()));
      if (own >= 0 && own < latest) {
        InFlightDiagnostic d =
            op.emitError("this op of pipeline stage ")
            << own << " reads a value of stage " << latest
            << ", which runs after it: list the stages in the order the "
               "model computes them";
        d.attachNote(latestOp->getLoc()) << "the value of stage " << latest;
        return failure();
      }
      int64_t stage = std::max(own, latest);
      if (stage >= 0)
        anchored[&op] = stage;
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    int64_t last = info.numStages() - 1;
    if (Operation *def = isLoss ? ret.getOperand(0).getDefiningOp() : nullptr) {
      auto it = anchored.find(def);
      int64_t lossStage = it == anchored.end() ? 0 : it->second;
      if (lossStage != last)
        return def->emitError("the loss is computed in pipeline stage ")
                   << lossStage << ", but backward starts in the last stage ("
                   << last << "): the last stage must hold the model's "
                   << "last layer",
               failure();
    }

    // 2. The rest, in reverse: the earliest user's stage, a copy for each
    // other stage that uses it.
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops)) {
      if (auto it = anchored.find(op); it != anchored.end()) {
        tag(op, it->second);
        continue;
      }
      // The stages of the uses, each with the operands using it.
      std::map<int64_t, SmallVector<OpOperand *>> uses;
      for (Value r : op->getResults())
        for (OpOperand &use : r.getUses()) {
          Operation *user = use.getOwner();
          int64_t s = isa<func::ReturnOp>(user) ? last : stageOf(user);
          uses[s < 0 ? 0 : s].push_back(&use);
        }
      if (uses.empty()) {
        tag(op, 0);
        continue;
      }
      tag(op, uses.begin()->first);
      if (uses.size() > 1 && !isMemoryEffectFree(op) && !isa<LoadOp>(op))
        return op->emitError("internal error: an op with side effects is "
                             "used by several pipeline stages");
      b.setInsertionPointAfter(op);
      for (auto it = std::next(uses.begin()); it != uses.end(); ++it) {
        Operation *copy = b.clone(*op);
        tag(copy, it->first);
        for (OpOperand *use : it->second)
          use->set(copy->getResult(
              cast<OpResult>(use->get()).getResultNumber()));
      }
    }

    // Parameters held by one pipeline rank (the loss reads them all).
    if (!isLoss)
      return success();
    llvm::MapVector<Operation *, std::set<int64_t>> ranksOf;
    fn.walk([&](LoadOp load) {
      if (GlobalOp g = lookupGlobal(module, load.getGlobal());
          g && g.getRole() == Role::param)
        ranksOf[g.getOperation()].insert(info.rankOf(stageOf(load)));
    });
    for (auto &[param, ranks] : ranksOf)
      if (ranks.size() == 1)
        param->setAttr(names::kPipelineRankAttr,
                       b.getI64IntegerAttr(*ranks.begin()));
    return success();
  }
};

} // namespace
