//===- Autodiff.cpp - reverse-mode differentiation of the loss ------------===//
//
// Turns `@loss` into the `@grad_step` entry point. The algorithm:
//
//   1. Activity analysis. A value is *varied* when it depends on a parameter
//      load and *useful* when the loss depends on it; only ops with a varied
//      operand and a useful result are differentiated, and only the operand
//      adjoints that lead back to a parameter are requested (`needed`), so no
//      gradient of input data is ever built.
//   2. Reverse sweep. Walking the body backwards from the loss (adjoint 1),
//      each active op builds its VJP through DifferentiableOpInterface at the
//      end of the function; adjoints reaching one value from several uses are
//      summed. An attention gradient transposes Q, K and V into heads again
//      rather than keeping the forward's transposed copies
//      (retakeHeadTransposes).
//   3. Gradients. The adjoint of every parameter load (summed over loads of one
//      parameter) is stored into `grad/P`, or added to it under gradient
//      accumulation. The loss is stored into `out/loss`. A frozen parameter
//      (`dt.frozen`) is a constant: it is never varied and has no gradient.
//
// In a pipelined program (@loss's ops carry `dt.stage`, dt-pipeline-stages),
// every op the sweep builds is marked `dt.backward` and takes the stage of the
// op it differentiates, and each stage adds its own part of a parameter's
// gradient (dt-pipeline-split then cuts the function at those marks).
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace dt {
#define GEN_PASS_DEF_AUTODIFF
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

FailureOr<GlobalOp> dt::getOrCreateGlobal(ModuleOp module, StringRef name,
                                          RankedTensorType type, Role role) {
  if (auto existing = lookupGlobal(module, name)) {
    if (existing.getType() != type || existing.getRole() != role)
      return existing.emitError("global '")
                 << name << "' exists with another type or role",
             failure();
    return existing;
  }
  // Globals stay together at the top of the module, in creation order.
  OpBuilder b(module.getContext());
  GlobalOp last;
  for (auto g : module.getOps<GlobalOp>())
    last = g;
  if (last)
    b.setInsertionPointAfter(last);
  else
    b.setInsertionPointToStart(module.getBody());
  return b.create<GlobalOp>(module.getLoc(), name, type, role,
                            /*init=*/DictionaryAttr(),
                            /*offset=*/IntegerAttr(), /*sharding=*/nullptr,
                            /*global_type=*/nullptr);
}

std::optional<LossScaling> dt::getLossScaling(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(names::kLossScaleAttr);
  if (!dict)
    return std::nullopt;
  LossScaling s{65536.0, 2000};
  if (auto init = dict.getAs<FloatAttr>("init"))
    s.init = init.getValueAsDouble();
  if (auto interval = dict.getAs<IntegerAttr>("growth_interval"))
    s.growthInterval = interval.getInt();
  return s;
}

FailureOr<Value> dt::buildLossScale(OpBuilder &b, Location loc, ModuleOp module,
                                    const LossScaling &scaling) {
  auto f32 = RankedTensorType::get({}, b.getF32Type());
  FailureOr<GlobalOp> exp =
      getOrCreateGlobal(module, names::kScaleExp, f32, Role::state);
  if (failed(exp))
    return failure();
  Value e = b.create<LoadOp>(loc, f32, exp->getSymName());
  Value two = createSplat(b, loc, f32, 2.0);
  return b
      .create<MulOp>(loc, createSplat(b, loc, f32, scaling.init),
                     b.create<PowOp>(loc, two, e))
      .getResult();
}

void dt::setOwner(GlobalOp global, GlobalOp param) {
  global->setAttr(names::kOwnerAttr,
                  FlatSymbolRefAttr::get(param.getSymNameAttr()));
}

GlobalOp dt::getOwner(GlobalOp global) {
  auto owner = global->getAttrOfType<FlatSymbolRefAttr>(names::kOwnerAttr);
  return owner ? lookupGlobal(global, owner.getValue()) : GlobalOp();
}

namespace {

bool isFloatTensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && llvm::isa<FloatType>(t.getElementType());
}

/// Clones the forward of recomputed layers into backward on demand.
class Recomputer {
public:
  Recomputer(ModuleOp module, ArrayRef<Operation *> forward) {
    auto paths = module->getAttrOfType<ArrayAttr>(names::kRecomputeAttr);
    if (!paths)
      return;
    for (Operation *op : forward) {
      StringRef layer = layerOf(op->getLoc());
      // The outermost listed layer that contains the op: a layer and one of
      // its sublayers are recomputed together.
      StringRef best;
      for (auto path : paths.getAsValueRange<StringAttr>())
        if (!layer.empty() &&
            (layer == path ||
             (layer.starts_with(path) && layer[path.size()] == '.')) &&
            (best.empty() || path.size() < best.size()))
          best = path;
      if (!best.empty()) {
        groupOf[op] = best;
        groups[best].ops.push_back(op);
      }
    }
  }

  /// The op whose VJP stands for `op`'s: `op` itself, or its copy in the
  /// recomputed forward of its layer, which is cloned at `b`'s insertion point
  /// the first time one of the layer's ops asks.
  Operation *forVJP(Operation *op, OpBuilder &b) {
    StringRef layer = groupOf.lookup(op);
    if (layer.empty())
      return op;
    Group &group = groups[layer];
    if (!group.cloned) {
      group.cloned = true;
      for (Operation *original : group.ops) {
        Operation *copy = b.clone(*original, group.mapping);
        copy->setAttr(names::kRecomputedAttr, b.getStringAttr(layer));
        group.mapping.map(original, copy);
        copies.push_back(copy);
      }
    }
    return group.mapping.lookup(op);
  }

  /// Erases the copies no VJP used.
  void eraseUnused() {
    for (Operation *copy : llvm::reverse(copies))
      if (copy->use_empty())
        copy->erase();
  }

private:
  struct Group {
    SmallVector<Operation *> ops;
    IRMapping mapping;
    bool cloned = false;
  };
  llvm::DenseMap<Operation *, StringRef> groupOf;
  llvm::StringMap<Group> groups;
  SmallVector<Operation *> copies;
};

/// Gives the attention gradients built after `after` (up to `end`) head
/// transposes of their own for Q, K and V: each operand that is a forward
/// head transpose ([B, T, H, D] to [B, H, T, D]) read by no other backward
/// op is transposed again from the same tensor just before the gradient
/// (marked recomputed, so that CSE keeps the copy). The memory is about the
/// same: the untransposed tensor lives until backward instead of its
/// transposed copy, which exists again only around the gradient. And each
/// transpose then has one attention for its reader, so on a
/// GPU neither launches: the bf16 kernels read the heads where the
/// untransposed tensor holds them (dt/Target's CudaZeroCopy, head reads),
/// which they cannot do for a copy that two attentions read.
void retakeHeadTransposes(Operation *after, Operation *end,
                          const llvm::DenseSet<Operation *> &forward) {
  Operation *first = after ? after->getNextNode() : &end->getBlock()->front();
  for (Operation *op = first; op != end; op = op->getNextNode()) {
    auto grad = llvm::dyn_cast<AttentionGradOp>(op);
    if (!grad)
      continue;
    llvm::SmallDenseMap<Operation *, Operation *> copies;
    for (OpOperand &use : grad->getOpOperands().take_front(3)) {
      auto transpose = use.get().getDefiningOp<TransposeOp>();
      if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3} ||
          !forward.contains(transpose) ||
          transpose->hasAttr(names::kRecomputedAttr) ||
          llvm::any_of(transpose->getUsers(), [&](Operation *user) {
            return user != grad && !forward.contains(user);
          }))
        continue;
      Operation *&copy = copies[transpose];
      if (!copy) {
        OpBuilder b(grad);
        copy = b.clone(*transpose);
        copy->setAttr(names::kRecomputedAttr,
                      b.getStringAttr(layerOf(transpose->getLoc())));
      }
      use.set(copy->getResult(0));
    }
  }
}

struct AutodiffPass : public dt::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto loss = module.lookupSymbol<func::FuncOp>(names::kLossFn);
    if (!loss) {
      module.emitError("dt-autodiff needs a function @loss");
      return signalPassFailure();
    }
    if (failed(differentiate(module, loss)))
      signalPassFailure();
  }

  LogicalResult differentiate(ModuleOp module, func::FuncOp fn) {
    auto resultType =
        fn.getNumResults() == 1
            ? llvm::dyn_cast<RankedTensorType>(fn.getResultTypes()[0])
            : RankedTensorType();
    if (!fn.getBody().hasOneBlock() || fn.getNumArguments() != 0 ||
        !resultType || resultType.getRank() != 0 ||
        !llvm::isa<FloatType>(resultType.getElementType()))
      return fn.emitError(
          "@loss must take no arguments, have one block and return one "
          "float scalar tensor");
    Block &body = fn.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    Value lossValue = ret.getOperand(0);

    // 1. Activity analysis.
    llvm::DenseSet<Value> varied, useful;
    for (Operation &op : body.without_terminator()) {
      bool fromParam = false;
      if (auto load = llvm::dyn_cast<LoadOp>(op)) {
        // A frozen parameter is a constant to differentiation.
        GlobalOp g = lookupGlobal(module, load.getGlobal());
        fromParam = g && g.getRole() == Role::param &&
                    !g->hasAttr(names::kFrozenAttr);
      } else {
        fromParam = llvm::any_of(op.getOperands(),
                                 [&](Value v) { return varied.count(v); });
      }
      if (fromParam)
        for (Value r : op.getResults())
          if (isFloatTensor(r))
            varied.insert(r);
    }
    useful.insert(lossValue);
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (llvm::any_of(op.getResults(),
                       [&](Value r) { return useful.count(r); }))
        for (Value v : op.getOperands())
          useful.insert(v);

    // 2. Reverse sweep, building the backward graph before the return.
    OpBuilder b(ret);
    Location loc = fn.getLoc();
    llvm::DenseMap<Value, Value> adjoint;
    // Under dynamic loss scaling backward starts from the scale, not 1, so
    // that small 16-bit gradients do not flush to zero; dt-optimizer divides
    // it out again.
    auto lossType = llvm::cast<RankedTensorType>(lossValue.getType());
    if (std::optional<LossScaling> scaling = getLossScaling(module)) {
      FailureOr<Value> scale = buildLossScale(b, loc, module, *scaling);
      if (failed(scale))
        return failure();
      adjoint[lossValue] =
          scale->getType() == lossType
              ? *scale
              : b.create<ConvertOp>(loc, lossType, *scale).getResult();
    } else {
      adjoint[lossValue] = createSplat(b, loc, lossType, 1.0);
    }
    auto accumulate = [&](Value v, Value g) {
      Value &slot = adjoint[v];
      slot = slot ? b.create<AddOp>(g.getLoc(), slot, g).getResult() : g;
    };

    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);
    bool pipelined = module->hasAttr(names::kPipelineAttr);
    // Marks the ops built since `after` as backward's, of `stage` (if >= 0).
    auto markBackward = [&](Operation *after, int64_t stage) {
      if (!pipelined)
        return;
      for (Operation *op = ret->getPrevNode(); op && op != after;
           op = op->getPrevNode()) {
        op->setAttr(names::kBackwardAttr, b.getUnitAttr());
        if (stage >= 0)
          op->setAttr(names::kStageAttr, b.getI64IntegerAttr(stage));
        else
          op->removeAttr(names::kStageAttr);
      }
    };
    markBackward(forward.back(), -1);
    llvm::DenseSet<Operation *> forwardOps(forward.begin(), forward.end());
    Recomputer recompute(module, forward);
    for (Operation *op : llvm::reverse(forward)) {
      Operation *before = ret->getPrevNode();
      bool active = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return varied.count(v); }) &&
                    llvm::any_of(op->getResults(),
                                 [&](Value r) { return useful.count(r); });
      if (!active)
        continue;
      SmallVector<Value> resultGrads;
      for (Value r : op->getResults())
        resultGrads.push_back(adjoint.lookup(r));
      if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
        continue;
      auto diff = llvm::dyn_cast<DifferentiableOpInterface>(
          recompute.forVJP(op, b));
      if (!diff)
        return op->emitError("cannot differentiate '")
               << op->getName() << "': it has no vector-Jacobian product";
      SmallVector<bool> needed;
      for (Value v : op->getOperands())
        needed.push_back(varied.count(v) > 0);
      SmallVector<Value> operandGrads;
      if (failed(diff.buildVJP(b, resultGrads, needed, operandGrads)))
        return failure();
      for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g)
          accumulate(v, g);
      if (llvm::isa<AttentionOp>(op))
        retakeHeadTransposes(before, ret, forwardOps);
      markBackward(before, stageOf(op));
    }

    recompute.eraseUnused();

    // 3. One gradient per parameter, summed over its loads; per stage in a
    // pipeline, each stage adding its own part.
    llvm::MapVector<std::pair<GlobalOp, int64_t>, Value> grads;
    for (Operation *op : forward)
      if (auto load = llvm::dyn_cast<LoadOp>(op))
        if (Value g = adjoint.lookup(load.getResult())) {
          GlobalOp param = lookupGlobal(module, load.getGlobal());
          int64_t stage = pipelined ? stageOf(load) : -1;
          Value &slot = grads[{param, stage}];
          Operation *before = ret->getPrevNode();
          slot = slot ? b.create<AddOp>(loc, slot, g).getResult() : g;
          markBackward(before, stage);
        }

    int64_t accumulation = 1;
    if (auto attr = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
      accumulation = attr.getInt();

    FailureOr<GlobalOp> lossOut = getOrCreateGlobal(
        module, names::kLoss, llvm::cast<RankedTensorType>(lossValue.getType()),
        Role::output);
    if (failed(lossOut))
      return failure();
    auto lossStore = b.create<StoreOp>(loc, lossValue, lossOut->getSymName());
    // Forward's last stage stores the loss of each micro-batch.
    if (Operation *def = lossValue.getDefiningOp(); def && pipelined)
      lossStore->setAttr(names::kStageAttr,
                         b.getI64IntegerAttr(stageOf(def)));

    SmallVector<GlobalOp> params;
    for (GlobalOp global : module.getOps<GlobalOp>())
      if (global.getRole() == Role::param &&
          !global->hasAttr(names::kFrozenAttr))
        params.push_back(global);
    for (GlobalOp param : params) {
      SmallVector<std::pair<int64_t, Value>> parts;
      for (auto &[key, g] : grads)
        if (key.first == param)
          parts.push_back({key.second, g});
      if (parts.empty()) {
        // A parameter the loss does not reach still gets a (zero) gradient, so
        // that the optimizer and checkpoints see every parameter; say so, it is
        // usually a mistake.
        param.emitWarning("parameter '")
            << param.getSymName() << "' does not affect the loss";
        Operation *before = ret->getPrevNode();
        parts.push_back(
            {-1, createSplat(b, loc, param.getTensorType(), 0.0)});
        markBackward(before, pipelined ? 0 : -1);
      }
      FailureOr<GlobalOp> gradGlobal =
          getOrCreateGlobal(module, names::gradOf(param.getSymName()),
                            param.getTensorType(), Role::grad);
      if (failed(gradGlobal))
        return failure();
      setOwner(*gradGlobal, param);
      if (Attribute rank = param->getAttr(names::kPipelineRankAttr))
        (*gradGlobal)->setAttr(names::kPipelineRankAttr, rank);
      for (auto [stage, g] : parts) {
        Operation *before = ret->getPrevNode();
        // Every pipeline stage adds its part: the optimizer zeroes the
        // gradients after each step.
        if (accumulation > 1 || pipelined) {
          Value old = b.create<LoadOp>(loc, param.getTensorType(),
                                       gradGlobal->getSymName());
          g = b.create<AddOp>(loc, old, g);
        }
        b.create<StoreOp>(loc, g, gradGlobal->getSymName());
        markBackward(before, stage < 0 ? 0 : stage);
      }
    }

    // The entry point returns nothing: results live in globals.
    b.create<func::ReturnOp>(loc);
    ret.erase();
    fn.setType(FunctionType::get(fn.getContext(), {}, {}));
    fn.setSymName(names::kGradStep);
    return success();
  }
};

} // namespace
