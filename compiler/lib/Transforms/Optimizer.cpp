//===- Optimizer.cpp - the apply_step entry point -------------------------===//
//
// Builds `@apply_step` from the training recipe in the module attributes.
// Everything is ordinary dt IR: scalar math on 0-d tensors for the schedule and
// bias corrections, and elementwise updates per parameter that
// dt-fuse-elementwise turns into a single pass over each parameter and its
// state. The update formulas are PyTorch's (torch.optim.SGD, Adam, AdamW).
// Weight decay applies to parameters of rank >= 2 only (matrices and
// embeddings, not biases and norm gains), as nanoGPT, llm.c and Megatron do,
// and not to those the optimizer's `no_decay` names (`dt.no_decay`); a PyTorch
// script that puts the others in a no-decay parameter group takes the same
// steps (bench/mlp_fashion_torch.py does).
//
// Frozen parameters (`dt.frozen`) have no gradient and no state: the update
// leaves them alone, and the gradient norm is over the trainable ones.
//
// In a pipelined program each pipeline rank holds the parameters of its own
// stages (`dt.pp_rank`), so there is one `@apply_step` variant per pipeline
// rank (`dt.entry = "apply_step"`, `dt.ranks`): it updates that rank's
// parameters and those every rank holds, whose gradient parts it first sums
// over the pipeline axis (`dt.pipeline_sum`); the squared norm of the
// gradients is a sum of each rank's part (the shared ones counted on rank 0).
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTBuilder.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/IR/Builders.h"

#include <limits>

namespace dt {
#define GEN_PASS_DEF_OPTIMIZER
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// Reads typed entries of a configuration dictionary, reporting wrong types.
class Config {
public:
  Config(Operation *owner, StringRef what, DictionaryAttr dict)
      : owner(owner), what(what), dict(dict) {}

  FailureOr<double> number(StringRef key, std::optional<double> fallback) {
    Attribute a = dict ? dict.get(key) : Attribute();
    if (!a) {
      if (fallback)
        return *fallback;
      return owner->emitError() << what << " needs '" << key << "'", failure();
    }
    if (auto f = llvm::dyn_cast<FloatAttr>(a))
      return f.getValueAsDouble();
    if (auto i = llvm::dyn_cast<IntegerAttr>(a))
      return static_cast<double>(i.getInt());
    return owner->emitError() << what << " '" << key << "' must be a number",
           failure();
  }

  FailureOr<bool> flag(StringRef key, bool fallback) {
    Attribute a = dict ? dict.get(key) : Attribute();
    if (!a)
      return fallback;
    if (auto b = llvm::dyn_cast<BoolAttr>(a))
      return b.getValue();
    return owner->emitError() << what << " '" << key << "' must be a bool",
           failure();
  }

  FailureOr<StringRef> kind() {
    auto k = dict ? dict.getAs<StringAttr>("kind") : StringAttr();
    if (!k)
      return owner->emitError() << what << " needs a string 'kind'", failure();
    return k.getValue();
  }

private:
  Operation *owner;
  StringRef what;
  DictionaryAttr dict;
};

/// The optimizer recipe, with PyTorch's defaults.
struct Recipe {
  StringRef kind;
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0,
             momentum = 0;
  bool nesterov = false;
};

struct OptimizerPass : public dt::impl::OptimizerBase<OptimizerPass> {
  void runOnOperation() override {
    if (failed(build(getOperation())))
      signalPassFailure();
  }

  FailureOr<Recipe> readRecipe(ModuleOp module) {
    auto dict = module->getAttrOfType<DictionaryAttr>("dt.optimizer");
    if (!dict)
      return module.emitError(
                 "dt-optimizer needs the module attribute dt.optimizer"),
             failure();
    Config c(module, "dt.optimizer", dict);
    Recipe r;
    FailureOr<StringRef> kind = c.kind();
    if (failed(kind))
      return failure();
    r.kind = *kind;
    if (r.kind != "sgd" && r.kind != "adam" && r.kind != "adamw")
      return module.emitError("unknown optimizer '") << r.kind << "'",
             failure();
    double defaultDecay = r.kind == "adamw" ? 0.01 : 0.0;
    FailureOr<double> lr = c.number("lr", std::nullopt),
                      b1 = c.number("beta1", 0.9),
                      b2 = c.number("beta2", 0.999),
                      eps = c.number("eps", 1e-8),
                      wd = c.number("weight_decay", defaultDecay),
                      mom = c.number("momentum", 0.0);
    FailureOr<bool> nesterov = c.flag("nesterov", false);
    if (failed(lr) || failed(b1) || failed(b2) || failed(eps) || failed(wd) ||
        failed(mom) || failed(nesterov))
      return failure();
    r.lr = *lr, r.beta1 = *b1, r.beta2 = *b2, r.eps = *eps, r.weightDecay = *wd;
    r.momentum = *mom, r.nesterov = *nesterov;
    return r;
  }

  /// dt.schedule's attributes from the module's dt.schedule dictionary.
  FailureOr<ScheduleOp> buildSchedule(ModuleOp module, OpBuilder &b,
                                      Location loc, Value step, Value total,
                                      double lr) {
    auto dict = module->getAttrOfType<DictionaryAttr>("dt.schedule");
    Config c(module, "dt.schedule", dict);
    StringRef kind = "constant";
    if (dict) {
      FailureOr<StringRef> k = c.kind();
      if (failed(k))
        return failure();
      kind = *k;
    }
    FailureOr<double> warmup = c.number("warmup", 0.0),
                      min = c.number("min", 0.0), fin = c.number("final", 0.0),
                      every = c.number("every", 1.0),
                      gamma = c.number("gamma", 1.0);
    if (failed(warmup) || failed(min) || failed(fin) || failed(every) ||
        failed(gamma))
      return failure();
    auto op = b.create<ScheduleOp>(
        loc, RankedTensorType::get({}, b.getF32Type()), step, total,
        b.getStringAttr(kind), b.getF64FloatAttr(lr),
        b.getI64IntegerAttr(static_cast<int64_t>(*warmup)),
        b.getF64FloatAttr(*min), b.getF64FloatAttr(*fin),
        b.getI64IntegerAttr(static_cast<int64_t>(*every)),
        b.getF64FloatAttr(*gamma));
    if (failed(op.verify()))
      return failure();
    return op;
  }

  /// The scale's exponent falls by one after a step that overflowed and
  /// rises by one after `growthInterval` clean steps in a row (PyTorch's
  /// GradScaler with its default factors of 2 and 1/2).
  LogicalResult updateLossScale(ModuleOp module, DTBuilder &e,
                                const LossScaling &scaling, Value finite) {
    auto f32 = RankedTensorType::get({}, e.b.getF32Type());
    FailureOr<GlobalOp> expG = getOrCreateGlobal(module, names::kScaleExp, f32,
                                                 Role::state),
                        cleanG = getOrCreateGlobal(module, names::kCleanSteps,
                                                   f32, Role::state),
                        skippedG = getOrCreateGlobal(
                            module, names::kSkippedSteps, f32, Role::state),
                        scaleOut = getOrCreateGlobal(
                            module, names::kLossScaleOut, f32, Role::output),
                        skippedOut = getOrCreateGlobal(
                            module, names::kSkippedOut, f32, Role::output);
    if (failed(expG) || failed(cleanG) || failed(skippedG) ||
        failed(scaleOut) || failed(skippedOut))
      return failure();
    Value one = e.splat(f32, 1.0), overflowed = e.sub(one, finite);
    Value clean = e.add(e.load(*cleanG), one);
    // 1 when this clean step completes an interval (clean >= N, in halves so
    // that no rounding decides it).
    Value grow = e.mul(
        finite, e.b.create<StepOp>(
                    e.loc, e.sub(clean, e.splat(f32, scaling.growthInterval -
                                                         0.5))));
    Value exp = e.add(e.sub(e.load(*expG), overflowed), grow);
    e.store(exp, *expG);
    e.store(e.mul(e.mul(finite, clean), e.sub(one, grow)), *cleanG);
    Value skipped = e.add(e.load(*skippedG), overflowed);
    e.store(skipped, *skippedG);
    e.store(e.mul(e.splat(f32, scaling.init),
                  e.b.create<PowOp>(e.loc, e.splat(f32, 2.0), exp)),
            *scaleOut);
    e.store(skipped, *skippedOut);
    return success();
  }

  LogicalResult build(ModuleOp module) {
    FailureOr<Recipe> recipe = readRecipe(module);
    if (failed(recipe))
      return failure();
    if (module.lookupSymbol(names::kApplyStep))
      return module.emitError("the module already has an @apply_step");
    int64_t accumulation = 1;
    if (auto a = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
      accumulation = a.getInt();
    std::optional<double> clip;
    if (auto c = module->getAttrOfType<FloatAttr>("dt.clip"))
      clip = c.getValueAsDouble();

    // Parameters paired with their gradients (made by dt-autodiff).
    SmallVector<std::pair<GlobalOp, GlobalOp>> params;
    for (GlobalOp g : module.getOps<GlobalOp>())
      if (g.getRole() == Role::param && !g->hasAttr(names::kFrozenAttr)) {
        GlobalOp grad = lookupGlobal(module, names::gradOf(g.getSymName()));
        if (!grad)
          return g.emitError(
              "parameter has no gradient global; run dt-autodiff first");
        params.push_back({g, grad});
      }

    MLIRContext *ctx = module.getContext();
    FailureOr<std::optional<PipelineInfo>> pipe = PipelineInfo::get(module);
    if (failed(pipe))
      return failure();
    if (!*pipe)
      return buildApply(module, *recipe, params, names::kApplyStep,
                        accumulation, clip, std::nullopt);
    OpBuilder b(ctx);
    for (int64_t r = 0; r < (*pipe)->ranks; ++r) {
      SmallVector<std::pair<GlobalOp, GlobalOp>> mine;
      for (auto pair : params) {
        int64_t owner = pipelineRankOf(pair.first);
        if (owner < 0 || owner == r)
          mine.push_back(pair);
      }
      std::string name = (names::kApplyStep + "_pp" + Twine(r)).str();
      if (failed(buildApply(module, *recipe, mine, name, accumulation, clip,
                            PipelineRank{(*pipe)->axis, r})))
        return failure();
      auto fn = module.lookupSymbol<func::FuncOp>(name);
      fn->setAttr("dt.entry", b.getStringAttr(names::kApplyStep));
      fn->setAttr("dt.ranks",
                  b.getDenseI64ArrayAttr((*pipe)->worldRanksAt(r)));
      fn->setAttr(names::kPipelineRankAttr, b.getI64IntegerAttr(r));
    }
    return success();
  }

  /// One rank of the pipeline axis, for its variant of @apply_step.
  struct PipelineRank {
    std::string axis;
    int64_t rank;
  };

  LogicalResult
  buildApply(ModuleOp module, const Recipe &recipeIn,
             ArrayRef<std::pair<GlobalOp, GlobalOp>> params, StringRef name,
             int64_t accumulation, std::optional<double> clip,
             const std::optional<PipelineRank> &pipe) {
    MLIRContext *ctx = module.getContext();
    auto i64 = RankedTensorType::get({}, IntegerType::get(ctx, 64));
    auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
    auto global = [&](StringRef name, RankedTensorType t, Role role) {
      return getOrCreateGlobal(module, name, t, role);
    };
    FailureOr<GlobalOp> stepG = global(names::kStep, i64, Role::state),
                        totalG = global(names::kTotalSteps, i64, Role::input),
                        lrG = global(names::kLr, f32, Role::output),
                        normG = global(names::kGradNorm, f32, Role::output);
    if (failed(stepG) || failed(totalG) || failed(lrG) || failed(normG))
      return failure();
    const Recipe *recipe = &recipeIn;

    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto fn = b.create<func::FuncOp>(loc, name, FunctionType::get(ctx, {}, {}));
    b.setInsertionPointToStart(fn.addEntryBlock());
    DTBuilder e{b, loc};
    auto sumOverPipeline = [&](Value v) -> Value {
      return b.create<PipelineSumOp>(loc, v, b.getStringAttr(pipe->axis));
    };

    // The 1-based step this update makes, and its learning rate.
    Value t = e.add(e.load(*stepG), e.splat(i64, 1));
    FailureOr<ScheduleOp> lr =
        buildSchedule(module, b, loc, t, e.load(*totalG), recipe->lr);
    if (failed(lr))
      return failure();
    e.store(*lr, *lrG);
    Value tf = b.create<ConvertOp>(loc, f32, t);

    // Gradients, averaged over accumulated micro-batches (and divided by the
    // loss scale); their global norm; clipping.
    std::optional<LossScaling> scaling = getLossScaling(module);
    Value unscale;
    if (scaling) {
      FailureOr<Value> scale = buildLossScale(b, loc, module, *scaling);
      if (failed(scale))
        return failure();
      unscale = e.div(e.splat(f32, 1.0 / accumulation), *scale);
    }
    SmallVector<Value> grads;
    for (auto [param, grad] : params) {
      Value g = e.load(grad);
      // A parameter every pipeline rank holds has a part of its gradient on
      // each (a tied embedding: one from each stage that uses it).
      if (pipe && pipelineRankOf(param) < 0)
        g = sumOverPipeline(g);
      if (unscale)
        g = e.mul(g, e.broadcast(unscale, grad.getTensorType()));
      else if (accumulation > 1)
        g = e.mul(g, e.like(g, 1.0 / accumulation));
      grads.push_back(g);
    }
    Value normSq = e.splat(f32, 0.0);
    for (auto [k, g] : llvm::enumerate(grads))
      if (!pipe || pipe->rank == 0 || pipelineRankOf(params[k].first) >= 0)
        normSq = e.add(normSq, e.sumAll(e.mul(g, g)));
    if (pipe)
      normSq = sumOverPipeline(normSq);
    Value norm = e.sqrt(normSq);
    e.store(norm, *normG);

    // Under loss scaling a step whose gradients overflowed (an inf or NaN
    // makes the squared norm inf or NaN) changes no parameter and no
    // optimizer state: `keep` selects the old values, whatever the new ones
    // hold. The step counter, and with it the schedule and the data, moves
    // on.
    Value finite;
    if (scaling)
      finite = b.create<StepOp>(
          loc, e.sub(e.splat(f32, std::numeric_limits<float>::max()), normSq));
    auto keep = [&](Value updated, Value old) -> Value {
      if (!finite)
        return updated;
      return b.create<SelectOp>(loc, e.broadcast(finite, updated.getType()),
                                updated, old);
    };
    if (clip) {
      // PyTorch's clip_grad_norm_: scale by min(1, clip / (norm + 1e-6)).
      Value coef = e.div(e.splat(f32, *clip), e.add(norm, e.splat(f32, 1e-6)));
      coef = b.create<MinimumOp>(loc, coef, e.splat(f32, 1.0));
      for (Value &g : grads)
        g = e.mul(g,
                  e.broadcast(coef, llvm::cast<RankedTensorType>(g.getType())));
    }

    // Scalars shared by all parameters.
    const Recipe &r = *recipe;
    Value bc1, invBc2Sqrt;
    if (r.kind != "sgd") {
      // Adam counts the updates it made, as PyTorch's does: the steps loss
      // scaling skipped are not among them (the schedule counts every step).
      if (scaling) {
        FailureOr<GlobalOp> skippedG = getOrCreateGlobal(
            module, names::kSkippedSteps, f32, Role::state);
        if (failed(skippedG))
          return failure();
        tf = e.sub(tf, e.load(*skippedG));
      }
      bc1 = e.sub(e.splat(f32, 1),
                  b.create<PowOp>(loc, e.splat(f32, r.beta1), tf));
      Value bc2 = e.sub(e.splat(f32, 1),
                        b.create<PowOp>(loc, e.splat(f32, r.beta2), tf));
      // Its reciprocal, once: each element then multiplies by it. A division
      // per element would double the work of the divider, which bounds the
      // update's loop (sqrt(v) and m / denom already use it).
      invBc2Sqrt = e.div(e.splat(f32, 1), e.sqrt(bc2));
    }

    for (auto [k, pair] : llvm::enumerate(params)) {
      GlobalOp param = pair.first;
      RankedTensorType type = param.getTensorType();
      Value p = e.load(param), g = grads[k], p0 = p;
      bool decays = r.weightDecay != 0 && type.getRank() >= 2 &&
                    !param->hasAttr(names::kNoDecayAttr);
      auto state = [&](StringRef slot) {
        FailureOr<GlobalOp> g =
            global((r.kind + "." + slot + "/" + param.getSymName()).str(),
                   type, Role::state);
        if (succeeded(g)) {
          setOwner(*g, param);
          if (Attribute rank = param->getAttr(names::kPipelineRankAttr))
            (*g)->setAttr(names::kPipelineRankAttr, rank);
        }
        return g;
      };

      if (r.kind == "sgd") {
        Value d = decays ? e.add(g, e.mul(p, e.splat(type, r.weightDecay))) : g;
        if (r.momentum != 0) {
          FailureOr<GlobalOp> bufG = state("momentum");
          if (failed(bufG))
            return failure();
          Value buf0 = e.load(*bufG);
          Value buf = e.add(e.mul(buf0, e.splat(type, r.momentum)), d);
          e.store(keep(buf, buf0), *bufG);
          d = r.nesterov ? e.add(d, e.mul(buf, e.splat(type, r.momentum)))
                         : buf;
        }
        e.store(keep(e.sub(p, e.mul(e.broadcast(*lr, type), d)), p0), param);
        continue;
      }

      // Adam and AdamW. Adam's weight decay is L2 (added to the gradient),
      // AdamW's is decoupled (the parameter shrinks by lr * wd before the
      // step).
      FailureOr<GlobalOp> mG = state("m"), vG = state("v");
      if (failed(mG) || failed(vG))
        return failure();
      if (decays && r.kind == "adam")
        g = e.add(g, e.mul(p, e.splat(type, r.weightDecay)));
      if (decays && r.kind == "adamw") {
        Value shrink =
            e.sub(e.splat(f32, 1), e.mul(*lr, e.splat(f32, r.weightDecay)));
        p = e.mul(p, e.broadcast(shrink, type));
      }
      Value m0 = e.load(*mG), v0 = e.load(*vG);
      Value m = e.add(e.mul(m0, e.splat(type, r.beta1)),
                      e.mul(g, e.splat(type, 1 - r.beta1)));
      Value v = e.add(e.mul(v0, e.splat(type, r.beta2)),
                      e.mul(e.mul(g, g), e.splat(type, 1 - r.beta2)));
      Value denom = e.add(e.mul(e.sqrt(v), e.broadcast(invBc2Sqrt, type)),
                          e.splat(type, r.eps));
      Value stepSize = e.div(*lr, bc1);
      e.store(keep(e.sub(p, e.div(e.mul(e.broadcast(stepSize, type), m),
                                  denom)),
                   p0),
              param);
      e.store(keep(m, m0), *mG);
      e.store(keep(v, v0), *vG);
    }

    if (scaling && failed(updateLossScale(module, e, *scaling, finite)))
      return failure();

    // Gradients accumulate from zero (a pipeline's stages always add theirs).
    if (accumulation > 1 || pipe)
      for (auto [param, grad] : params)
        e.store(e.splat(grad.getTensorType(), 0.0), grad);
    e.store(t, *stepG);
    b.create<func::ReturnOp>(loc);
    return success();
  }
};

} // namespace
