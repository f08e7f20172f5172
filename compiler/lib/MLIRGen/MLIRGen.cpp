//===- MLIRGen.cpp - checked job to the dt dialect ------------------------===//
//
// Implements Sema's GraphBuilder with dt ops: the tracer calls `param`,
// `input`, `constant` and `op` in evaluation order and MLIRGen emits one or a
// few dt ops per call into the function being built. Names, shapes and
// broadcasting are already resolved by the tracer; the only decisions here are
// how each primitive maps to the dialect (e.g. `x[B, T, C] @ w[C, N]` becomes
// one 2-D matmul between reshapes, `mean` a sum and a scale) and which features
// code generation does not support yet.
//
//===----------------------------------------------------------------------===//

#include "dt/MLIRGen/MLIRGen.h"
#include "dt/Dialect/DT/IR/DTBuilder.h"
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Sema/Trace.h"
#include "dt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace dt {
namespace {

/// Builds one function from a trace.
class FunctionBuilder : public GraphBuilder {
public:
  FunctionBuilder(ModuleOp module, OpBuilder &b,
                  const llvm::StringMap<Attribute> &layouts = {})
      : module(module), b(b), layouts(layouts) {}

  /// Makes this a train trace's builder: its dropouts drop, their masks
  /// keyed by `seed` (an eval trace's pass x through), and its batch norms
  /// normalise by the statistics of `statGroups` equal groups of the batch
  /// (one per data-parallel rank, as DDP's BatchNorm; 1 for SyncBatchNorm).
  void setTraining(int64_t seed, int64_t statGroups) {
    dropoutSeed = seed;
    this->statGroups = statGroups;
  }
  /// Whether building failed after reporting an error.
  bool hasFailed() const { return globalsClash || batchNormFailed; }

  TraceValue param(const ParamInfo &param) override {
    RankedTensorType type = tensorType(param.type);
    if (!lookupGlobal(module, param.name)) {
      OpBuilder::InsertionGuard guard(b);
      setGlobalInsertionPoint();
      auto g = b.create<GlobalOp>(location(param.loc), param.name, type,
                                  Role::param, initializer(param.init),
                                  IntegerAttr(), /*sharding=*/nullptr,
                                  /*global_type=*/nullptr);
      if (param.tensorDim)
        g->setAttr(names::kTensorDimAttr,
                   b.getI64IntegerAttr(*param.tensorDim));
      // A buffer is not trained: to differentiation and the optimizer it is
      // a frozen parameter.
      if (param.frozen || param.buffer)
        g->setAttr(names::kFrozenAttr, b.getUnitAttr());
      if (param.buffer)
        g->setAttr(names::kBufferParamAttr, b.getUnitAttr());
      if (param.noDecay)
        g->setAttr(names::kNoDecayAttr, b.getUnitAttr());
      if (Attribute layout = layouts.lookup(param.name))
        g->setAttr("dt.layout", layout);
    }
    return add(b.create<LoadOp>(location(param.loc), type, param.name));
  }

  TraceValue input(DataRole dataRole, StringRef field,
                   const TensorType &t) override {
    std::string name = ("in/" + toString(dataRole) + "." + field).str();
    RankedTensorType type = tensorType(t);
    if (!lookupGlobal(module, name)) {
      OpBuilder::InsertionGuard guard(b);
      setGlobalInsertionPoint();
      auto g = b.create<GlobalOp>(module.getLoc(), name, type, Role::input,
                                  DictionaryAttr(), IntegerAttr(),
                                  /*sharding=*/nullptr,
                                  /*global_type=*/nullptr);
      // Dimension 0 is the batch, which data parallelism splits.
      g->setAttr(names::kBatchAttr, b.getUnitAttr());
    }
    return add(b.create<LoadOp>(module.getLoc(), type, name));
  }

  TraceValue constant(double value, DType dtype) override {
    return add(createSplat(b, b.getUnknownLoc(),
                           RankedTensorType::get({}, elementType(dtype)),
                           value));
  }

  TraceValue constant(int64_t value, DType dtype) override {
    auto type = RankedTensorType::get({}, elementType(dtype));
    return add(b.create<ConstantOp>(
        b.getUnknownLoc(),
        DenseElementsAttr::get(type,
                               b.getIntegerAttr(elementType(dtype), value))));
  }

  SmallVector<TraceValue, 1> op(PrimOp kind, ArrayRef<TraceValue> operandIds,
                                const PrimAttrs &attrs,
                                ArrayRef<TensorType> resultTypes,
                                const Location &where,
                                StringRef scope) override {
    mlir::Location loc = location(where, scope);
    SmallVector<Value> x;
    for (TraceValue id : operandIds)
      x.push_back(values[id.id]);
    SmallVector<Type> types;
    for (const TensorType &t : resultTypes)
      types.push_back(tensorType(t));
    SmallVector<Value> results = build(kind, x, attrs, types, loc);
    SmallVector<TraceValue, 1> ids;
    for (Value r : results)
      ids.push_back(add(r));
    return ids;
  }

  Value get(TraceValue id) const { return values[id.id]; }

  static Type elementTypeOf(MLIRContext *ctx, DType dtype) {
    switch (dtype) {
    case DType::F32:
      return Float32Type::get(ctx);
    case DType::BF16:
      return BFloat16Type::get(ctx);
    case DType::F16:
      return Float16Type::get(ctx);
    case DType::I32:
      return IntegerType::get(ctx, 32);
    case DType::I64:
      return IntegerType::get(ctx, 64);
    }
    llvm_unreachable("unknown dtype");
  }

  mlir::Location location(const Location &where, StringRef scope = {}) {
    if (where.file.empty())
      return b.getUnknownLoc();
    mlir::Location loc =
        FileLineColLoc::get(b.getContext(), where.file, where.line, where.col);
    // The layer an op belongs to travels with it, for recomputation and
    // pipeline stages.
    return scope.empty() ? loc : NameLoc::get(b.getStringAttr(scope), loc);
  }

private:
  ModuleOp module;
  OpBuilder &b;
  /// The program's `shard PATH = [...]` layouts, by parameter.
  const llvm::StringMap<Attribute> &layouts;
  std::vector<Value> values;
  /// Training: the dropouts' key, and the next dropout's site.
  std::optional<int64_t> dropoutSeed;
  int64_t dropoutSites = 0;
  /// Whether a global the dropouts read clashed with one of the program's.
  bool globalsClash = false;
  /// Training: the groups of the batch a batch norm takes statistics over.
  int64_t statGroups = 1;
  bool batchNormFailed = false;

  /// `v[C]` shaped to broadcast along dim `axis` of `full`.
  Value alongAxis(DTBuilder &e, Value v, int64_t axis,
                  RankedTensorType full) {
    SmallVector<int64_t> shape(full.getRank(), 1);
    shape[axis] = full.getDimSize(axis);
    return e.broadcast(e.reshape(v, shape), full);
  }

  /// PyTorch's batch_norm built from reductions and elementwise ops, so that
  /// differentiation, sharding and fusion need nothing new: the batch
  /// [N, C, ...] is viewed as [G, N/G, C, S] and each of the G groups is
  /// normalised by its own statistics. G splits like the batch, so with one
  /// group per data-parallel rank the statistics stay on their rank, and with
  /// one group (sync_batchnorm) their sums are all-reduced by the
  /// partitioner. Group 0's statistics (rank 0's, which DDP broadcasts to
  /// every rank) move the running ones, by a `dt.store` that nothing
  /// differentiates.
  Value batchNorm(mlir::Location loc, ArrayRef<Value> x,
                  const PrimAttrs &attrs) {
    DTBuilder e{b, loc};
    auto type = llvm::cast<RankedTensorType>(x[0].getType());
    Value weight = x[1], bias = x[2], runningMean = x[3], runningVar = x[4];
    int64_t n = type.getDimSize(0), c = type.getDimSize(1);
    auto eps = [&](Value v) { return e.add(v, e.like(v, attrs.eps)); };
    if (!dropoutSeed) {
      // Eval: y = x * scale + shift per channel.
      Value scale = e.div(weight, e.sqrt(eps(runningVar)));
      Value shift = e.sub(bias, e.mul(runningMean, scale));
      return e.add(e.mul(x[0], alongAxis(e, scale, 1, type)),
                   alongAxis(e, shift, 1, type));
    }
    int64_t groups = n % statGroups == 0 ? statGroups : 1;
    int64_t spatial = type.getNumElements() / (n * c);
    int64_t count = n / groups * spatial;
    if (count < 2) {
      mlir::emitError(loc) << "batch_norm in training needs more than one "
                              "value per channel, but each statistic is over "
                           << count
                           << " (samples per rank and micro-batch times the "
                              "other dimensions); raise batch or micro_batch";
      batchNormFailed = true;
      return x[0];
    }
    auto grouped = RankedTensorType::get({groups, n / groups, c, spatial},
                                         type.getElementType());
    Value xg = e.reshape(x[0], grouped.getShape());
    auto mean = [&](Value v) {
      Value s = e.sum(v, {1, 3});
      return e.mul(s, e.like(s, 1.0 / double(count)));
    };
    Value mu = mean(xg);
    Value centred = e.sub(xg, e.unreduce(mu, {1, 3}, grouped));
    Value var = mean(e.mul(centred, centred));
    Value inv = e.div(e.like(var, 1.0), e.sqrt(eps(var)));
    Value y = e.mul(centred, e.unreduce(inv, {1, 3}, grouped));
    y = e.add(e.mul(y, alongAxis(e, weight, 2, grouped)),
              alongAxis(e, bias, 2, grouped));

    // Running statistics: (1 - m) * running + m * group 0's, the variance
    // unbiased as PyTorch's.
    auto groupZero = [&](Value v) {
      auto t = llvm::cast<RankedTensorType>(v.getType());
      if (groups > 1)
        v = b.create<SliceOp>(loc, RankedTensorType::get({1, c}, t.getElementType()),
                              v, b.getI64IntegerAttr(0), b.getI64IntegerAttr(0));
      return e.reshape(v, {c});
    };
    auto update = [&](Value running, Value batch) {
      // Sema admits only a `@buffer` parameter read as it is, which the
      // tracer hands over as that parameter's load.
      auto load = running.getDefiningOp<LoadOp>();
      if (!load) {
        mlir::emitError(loc) << "batch_norm's running statistics must be "
                                "parameters read as they are";
        batchNormFailed = true;
        return;
      }
      Value moved =
          e.add(e.mul(running, e.like(running, 1.0 - attrs.momentum)),
                e.mul(batch, e.like(batch, attrs.momentum)));
      b.create<StoreOp>(loc, moved, load.getGlobal());
    };
    update(runningMean, groupZero(mu));
    Value unbiased = groupZero(var);
    update(runningVar,
           e.mul(unbiased, e.like(unbiased, double(count) / (count - 1))));
    return e.reshape(y, type.getShape());
  }

  /// A dropout keyed by the seed, its site, the optimizer step and the
  /// micro-batch within it (dt.dropout).
  Value dropout(mlir::Location loc, Value x, double p) {
    auto i64 = RankedTensorType::get({}, b.getI64Type());
    FailureOr<GlobalOp> step =
        getOrCreateGlobal(module, names::kStep, i64, Role::state);
    FailureOr<GlobalOp> micro =
        getOrCreateGlobal(module, names::kMicroIndex, i64, Role::input);
    // A parameter of the program may have taken the name (reported at it).
    if (failed(step) || failed(micro)) {
      globalsClash = true;
      return x;
    }
    Value stepValue = b.create<LoadOp>(loc, i64, step->getSymName());
    Value microValue = b.create<LoadOp>(loc, i64, micro->getSymName());
    auto type = llvm::cast<RankedTensorType>(x.getType());
    return b.create<DropoutOp>(loc, x, stepValue, microValue, ValueRange{},
                               b.getF64FloatAttr(p),
                               b.getI64IntegerAttr(*dropoutSeed),
                               b.getI64IntegerAttr(dropoutSites++),
                               b.getDenseI64ArrayAttr(type.getShape()));
  }

  /// Attention with dropout on its probabilities (a train pass): the
  /// probabilities in full, softmax(q kᵀ / √d + mask), dropped, times v, as
  /// transformers computes attention dropout. The fused kernel never holds
  /// them, so it cannot drop them; the causal mask (-inf where key j comes
  /// after query i) is built from positions, so no [T, T] table is stored.
  Value attentionWithDropout(mlir::Location loc, Value q, Value k, Value v,
                             const PrimAttrs &attrs) {
    DTBuilder e{b, loc};
    auto type = llvm::cast<RankedTensorType>(q.getType());
    int64_t rank = type.getRank(), t = type.getDimSize(rank - 2),
            d = type.getDimSize(rank - 1);
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = t;
    auto scoresType = RankedTensorType::get(shape, type.getElementType());
    Value scores = e.matmul(q, k, /*transposeLhs=*/false,
                            /*transposeRhs=*/true, scoresType);
    scores = e.mul(scores, e.like(scores, 1.0 / std::sqrt(double(d))));
    if (attrs.causal) {
      auto square = RankedTensorType::get({t, t}, type.getElementType());
      auto line = RankedTensorType::get({t}, type.getElementType());
      Value pos = b.create<ConvertOp>(
          loc, line,
          b.create<IotaOp>(loc, RankedTensorType::get({t}, b.getI32Type())));
      Value later =
          b.create<StepOp>(loc, square,
                           e.sub(e.broadcast(e.reshape(pos, {1, t}), square),
                                 e.broadcast(e.reshape(pos, {t, 1}), square)));
      Value mask = b.create<SelectOp>(
          loc, square, later,
          e.splat(square, -std::numeric_limits<double>::infinity()),
          e.splat(square, 0.0));
      SmallVector<int64_t> ones(rank - 2, 1);
      ones.append({t, t});
      scores = e.add(scores, e.broadcast(e.reshape(mask, ones), scoresType));
    }
    Value probs = b.create<SoftmaxOp>(loc, scores, rank - 1);
    return e.matmul(dropout(loc, probs, attrs.p), v, false, false, type);
  }

  TraceValue add(Value v) {
    values.push_back(v);
    return TraceValue{values.size() - 1};
  }

  Type elementType(DType dtype) { return elementTypeOf(b.getContext(), dtype); }

  RankedTensorType tensorType(const TensorType &t) {
    return RankedTensorType::get(t.shape, elementType(t.dtype));
  }

  /// Globals go at the top of the module, in order of first use.
  void setGlobalInsertionPoint() {
    GlobalOp last;
    for (GlobalOp g : module.getOps<GlobalOp>())
      last = g;
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(module.getBody());
  }

  DictionaryAttr initializer(const Initializer &init) {
    SmallVector<NamedAttribute> attrs;
    auto f = [&](StringRef key, double v) {
      attrs.push_back(b.getNamedAttr(key, b.getF64FloatAttr(v)));
    };
    switch (init.kind) {
    case Initializer::Kind::Uniform:
      attrs.push_back(b.getNamedAttr("kind", b.getStringAttr("uniform")));
      f("low", init.low);
      f("high", init.high);
      break;
    case Initializer::Kind::Normal:
      attrs.push_back(b.getNamedAttr("kind", b.getStringAttr("normal")));
      f("mean", init.mean);
      f("std", init.std);
      break;
    case Initializer::Kind::Constant:
      attrs.push_back(b.getNamedAttr("kind", b.getStringAttr("constant")));
      f("value", init.value);
      break;
    }
    if (!init.from.empty())
      attrs.push_back(b.getNamedAttr("from", b.getStringAttr(init.from)));
    return b.getDictionaryAttr(attrs);
  }

  SmallVector<Value> build(PrimOp kind, ArrayRef<Value> x,
                           const PrimAttrs &attrs, ArrayRef<Type> types,
                           mlir::Location loc) {
    DTBuilder e{b, loc};
    Type t0 = types.empty() ? Type() : types[0];
    switch (kind) {
    case PrimOp::Add:
      return {b.create<AddOp>(loc, x[0], x[1])};
    case PrimOp::Sub:
      return {b.create<SubOp>(loc, x[0], x[1])};
    case PrimOp::Mul:
      return {b.create<MulOp>(loc, x[0], x[1])};
    case PrimOp::Div:
      return {b.create<DivOp>(loc, x[0], x[1])};
    case PrimOp::Neg:
      return {b.create<NegOp>(loc, x[0])};
    case PrimOp::Relu:
      return {b.create<ReluOp>(loc, x[0])};
    case PrimOp::Gelu:
      return {b.create<GeluOp>(loc, x[0])};
    case PrimOp::GeluErf:
      return {b.create<GeluErfOp>(loc, x[0])};
    case PrimOp::Tanh:
      return {b.create<TanhOp>(loc, x[0])};
    case PrimOp::Sigmoid:
      return {b.create<SigmoidOp>(loc, x[0])};
    case PrimOp::Exp:
      return {b.create<ExpOp>(loc, x[0])};
    case PrimOp::Log:
      return {b.create<LogOp>(loc, x[0])};
    case PrimOp::Sqrt:
      return {b.create<SqrtOp>(loc, x[0])};
    case PrimOp::BroadcastTo:
      return {b.create<BroadcastToOp>(loc, t0, x[0])};
    case PrimOp::Reshape:
      return {b.create<ReshapeOp>(loc, t0, x[0])};
    case PrimOp::Transpose:
      return {b.create<TransposeOp>(loc, t0, x[0],
                                    b.getDenseI64ArrayAttr(attrs.perm))};
    case PrimOp::MatMul:
      return {matmul(loc, x[0], x[1], llvm::cast<RankedTensorType>(t0))};
    case PrimOp::Softmax:
      return {b.create<SoftmaxOp>(loc, x[0], attrs.axis)};
    case PrimOp::LayerNorm: {
      // A layer norm without a bias adds zeros.
      Value bias = x.size() > 2 ? x[2] : e.like(x[1], 0.0);
      return {b.create<LayerNormOp>(loc, t0, x[0], x[1], bias,
                                    b.getF64FloatAttr(attrs.eps))};
    }
    case PrimOp::Rope:
      return {b.create<RopeOp>(
          loc, x[0], b.getF64FloatAttr(attrs.theta), UnitAttr(),
          attrs.ropeScaling.empty()
              ? DenseF64ArrayAttr()
              : b.getDenseF64ArrayAttr(attrs.ropeScaling))};
    case PrimOp::Conv2d:
      return {b.create<Conv2dOp>(loc, t0, x[0], x[1],
                                 b.getDenseI64ArrayAttr(attrs.stride),
                                 b.getDenseI64ArrayAttr(attrs.padding),
                                 b.getDenseI64ArrayAttr(attrs.dilation),
                                 b.getI64IntegerAttr(attrs.groups))};
    case PrimOp::MaxPool2d:
      return {b.create<MaxPool2dOp>(loc, t0, x[0],
                                    b.getDenseI64ArrayAttr(attrs.kernel),
                                    b.getDenseI64ArrayAttr(attrs.stride),
                                    b.getDenseI64ArrayAttr(attrs.padding))};
    case PrimOp::AvgPool2d:
      return {b.create<AvgPool2dOp>(loc, t0, x[0],
                                    b.getDenseI64ArrayAttr(attrs.kernel),
                                    b.getDenseI64ArrayAttr(attrs.stride),
                                    b.getDenseI64ArrayAttr(attrs.padding))};
    case PrimOp::BatchNorm:
      return {batchNorm(loc, x, attrs)};
    case PrimOp::Dropout:
      if (!dropoutSeed || attrs.p == 0)
        return {x[0]};
      return {dropout(loc, x[0], attrs.p)};
    case PrimOp::RmsNorm:
      return {b.create<RMSNormOp>(loc, t0, x[0], x[1],
                                  b.getF64FloatAttr(attrs.eps))};
    case PrimOp::Embedding:
      return {b.create<EmbeddingOp>(loc, t0, x[0], x[1])};
    case PrimOp::Split: {
      auto split = b.create<SplitOp>(loc, types, x[0], attrs.axis);
      return SmallVector<Value>(split.getResults());
    }
    case PrimOp::Concat:
      return {b.create<ConcatOp>(loc, t0, x, attrs.axis)};
    case PrimOp::Slice:
      return {b.create<SliceOp>(loc, t0, x[0], b.getI64IntegerAttr(attrs.axis),
                                b.getI64IntegerAttr(attrs.start))};
    case PrimOp::Iota:
      return {b.create<IotaOp>(loc, t0)};
    case PrimOp::Attention: {
      if (dropoutSeed && attrs.p != 0)
        return {attentionWithDropout(loc, x[0], x[1], x[2], attrs)};
      auto op = b.create<AttentionOp>(loc, t0, AttentionOp::lseType(t0), x[0],
                                      x[1], x[2]);
      op.setCausal(attrs.causal);
      return {op.getResult()};
    }
    case PrimOp::Sum:
      return {b.create<ReduceSumOp>(loc, t0, x[0],
                                    b.getDenseI64ArrayAttr({attrs.axis}))};
    case PrimOp::Mean: {
      int64_t n =
          llvm::cast<RankedTensorType>(x[0].getType()).getDimSize(attrs.axis);
      Value sum = b.create<ReduceSumOp>(loc, t0, x[0],
                                        b.getDenseI64ArrayAttr({attrs.axis}));
      return {b.create<MulOp>(loc, sum, e.like(sum, 1.0 / n))};
    }
    case PrimOp::CrossEntropy:
      return {b.create<CrossEntropyOp>(loc, t0, x[0], x[1])};
    case PrimOp::Mse: {
      // mean((pred - target)^2) over every element, in f32 whatever the
      // compute precision (dt-autocast keeps a conversion's type).
      Value pred = x[0], target = x[1];
      if (module->hasAttr("dt.precision")) {
        pred = b.create<ConvertOp>(loc, pred.getType(), pred);
        target = b.create<ConvertOp>(loc, target.getType(), target);
      }
      Value d = b.create<SubOp>(loc, pred, target);
      Value s = e.sumAll(e.mul(d, d));
      int64_t n = llvm::cast<RankedTensorType>(x[0].getType()).getNumElements();
      return {b.create<MulOp>(loc, s, e.like(s, 1.0 / n))};
    }
    }
    llvm_unreachable("unknown primitive op");
  }

  /// `a[..., m, k] @ b[k, n]` is one 2-D product over the flattened leading
  /// dims (the dialect's matmul takes operands of one rank); a batched `b` maps
  /// directly.
  Value matmul(mlir::Location loc, Value a, Value w, RankedTensorType result) {
    auto at = llvm::cast<RankedTensorType>(a.getType());
    auto wt = llvm::cast<RankedTensorType>(w.getType());
    if (at.getRank() == wt.getRank())
      return b.create<MatmulOp>(loc, result, a, w);
    int64_t k = at.getShape().back(), n = wt.getShape().back();
    int64_t rows = at.getNumElements() / k;
    DTBuilder e{b, loc};
    Value flat = e.reshape(a, {rows, k});
    Value product = b.create<MatmulOp>(
        loc, RankedTensorType::get({rows, n}, result.getElementType()), flat,
        w);
    return e.reshape(product, result.getShape());
  }
};

/// Attribute for a compile-time constant in the job description.
Attribute constantAttr(Builder &b, const Constant &c) {
  switch (c.getKind()) {
  case Constant::Kind::Int:
    return b.getI64IntegerAttr(c.getInt());
  case Constant::Kind::Float:
    return b.getF64FloatAttr(c.getNumber());
  case Constant::Kind::Bool:
    return b.getBoolAttr(c.getBool());
  case Constant::Kind::String:
  case Constant::Kind::Symbol:
    return b.getStringAttr(c.getString());
  case Constant::Kind::Tuple:
  case Constant::Kind::List: {
    SmallVector<Attribute> items;
    for (const Constant &item : c.getItems())
      items.push_back(constantAttr(b, item));
    return b.getArrayAttr(items);
  }
  case Constant::Kind::Record: {
    SmallVector<NamedAttribute> items;
    for (auto [key, item] : llvm::zip(c.getKeys(), c.getItems()))
      items.push_back(b.getNamedAttr(key, constantAttr(b, item)));
    return b.getDictionaryAttr(items);
  }
  }
  llvm_unreachable("unknown constant kind");
}

DictionaryAttr sourceAttr(Builder &b, const DataSource &source) {
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("kind", b.getStringAttr(source.kind))};
  for (const NamedConstant &arg : source.args)
    attrs.push_back(b.getNamedAttr(arg.name, constantAttr(b, arg.value)));
  return b.getDictionaryAttr(attrs);
}

/// The manifest's description of the run (docs/abi.md), as an attribute.
DictionaryAttr jobAttr(Builder &b, const Job &job, StringRef sourcePath) {
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto optional = [&](std::optional<int64_t> v) -> Attribute {
    return v ? Attribute(i64(*v)) : Attribute(b.getUnitAttr());
  };
  Attribute log = b.getUnitAttr(), checkpoint = b.getUnitAttr();
  if (job.log)
    log = b.getDictionaryAttr(
        {b.getNamedAttr("every", i64(job.log->every)),
         b.getNamedAttr("dir", b.getStringAttr(job.log->dir))});
  if (job.checkpoint)
    checkpoint = b.getDictionaryAttr(
        {b.getNamedAttr("every", i64(job.checkpoint->every)),
         b.getNamedAttr("dir", b.getStringAttr(job.checkpoint->dir)),
         b.getNamedAttr("keep", i64(job.checkpoint->keep))});
  DictionaryAttr train = b.getDictionaryAttr({
      b.getNamedAttr("batch", i64(job.batch)),
      b.getNamedAttr("micro_batch", i64(job.microBatch)),
      b.getNamedAttr("accumulation", i64(job.accumulation)),
      b.getNamedAttr("data_parallel", i64(job.parallel.getDataParallelSize())),
      b.getNamedAttr("steps", optional(job.steps)),
      b.getNamedAttr("epochs", optional(job.epochs)),
      b.getNamedAttr("seed", i64(job.seed)),
      b.getNamedAttr("eval_every", i64(job.evalEvery)),
      // Padding rows carry label -1, which only cross-entropy knows to ignore.
      b.getNamedAttr("eval_partial",
                     b.getStringAttr(job.classifier ? "pad" : "drop")),
      b.getNamedAttr("classifier", b.getBoolAttr(job.classifier)),
      b.getNamedAttr("log", log),
      b.getNamedAttr("checkpoint", checkpoint),
  });
  SmallVector<NamedAttribute> data{
      b.getNamedAttr("train", sourceAttr(b, job.data))};
  if (job.eval)
    data.push_back(b.getNamedAttr("eval", sourceAttr(b, *job.eval)));
  // Every parameter's name in a Hugging Face checkpoint (what `init` reads
  // and --export writes), and where the parameters start from.
  SmallVector<Attribute> names;
  for (size_t i = 0; i < job.checkpointNames.size(); ++i)
    names.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("param", b.getStringAttr(job.params[i].name)),
         b.getNamedAttr("name",
                        b.getStringAttr(job.checkpointNames[i].name)),
         b.getNamedAttr("transposed",
                        b.getBoolAttr(job.checkpointNames[i].transposed))}));
  Attribute init = b.getUnitAttr();
  if (const std::optional<PretrainedConfig> &p = job.pretrained) {
    SmallVector<Attribute> ignore;
    for (const std::string &glob : p->ignore)
      ignore.push_back(b.getStringAttr(glob));
    // What dtc found when the file was there, for --report.
    SmallVector<Attribute> fresh;
    for (unsigned i : p->fresh)
      fresh.push_back(b.getStringAttr(job.params[i].name));
    init = b.getDictionaryAttr(
        {b.getNamedAttr("path", b.getStringAttr(p->path)),
         b.getNamedAttr("ignore", b.getArrayAttr(ignore)),
         b.getNamedAttr("checked", b.getBoolAttr(p->checked)),
         b.getNamedAttr("fresh", b.getArrayAttr(fresh)),
         b.getNamedAttr("skipped", i64(int64_t(p->skipped.size())))});
  }
  // The LoRA layers: their weight and factors, which --export merges or
  // writes alone in PEFT's layout.
  Attribute adapters = b.getUnitAttr();
  if (const std::optional<AdapterConfig> &a = job.adapters) {
    SmallVector<Attribute> layers;
    for (const std::string &layer : a->layers)
      layers.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("weight", b.getStringAttr(layer + ".weight")),
           b.getNamedAttr("a", b.getStringAttr(layer + ".lora_A")),
           b.getNamedAttr("b", b.getStringAttr(layer + ".lora_B"))}));
    adapters = b.getDictionaryAttr(
        {b.getNamedAttr("rank", i64(a->rank)),
         b.getNamedAttr("alpha", b.getF64FloatAttr(a->alpha)),
         b.getNamedAttr("scale", b.getF64FloatAttr(a->alpha / double(a->rank))),
         b.getNamedAttr("peft_prefix", b.getStringAttr(a->peftPrefix)),
         b.getNamedAttr("peft_config", b.getStringAttr(a->peftConfig)),
         b.getNamedAttr("layers", b.getArrayAttr(layers))});
  }
  return b.getDictionaryAttr(
      {b.getNamedAttr("name", b.getStringAttr(job.name)),
       b.getNamedAttr("source", b.getStringAttr(sourcePath)),
       b.getNamedAttr("train", train),
       b.getNamedAttr("init", init),
       b.getNamedAttr("adapters", adapters),
       b.getNamedAttr("checkpoint_names", b.getArrayAttr(names)),
       b.getNamedAttr("checkpoint_skip",
                      b.getStrArrayAttr(
                          llvm::to_vector_of<StringRef>(job.checkpointSkip))),
       b.getNamedAttr("hf_config", b.getStringAttr(job.hfConfig)),
       b.getNamedAttr("data", b.getDictionaryAttr(data))});
}

/// The recipe the optimizer pass reads.
void setRecipe(ModuleOp module, Builder &b, const Job &job) {
  const OptimizerConfig &o = job.optimizer;
  StringRef kind = o.kind == OptimizerConfig::Kind::SGD    ? "sgd"
                   : o.kind == OptimizerConfig::Kind::Adam ? "adam"
                                                           : "adamw";
  module->setAttr(
      "dt.optimizer",
      b.getDictionaryAttr(
          {b.getNamedAttr("kind", b.getStringAttr(kind)),
           b.getNamedAttr("lr", b.getF64FloatAttr(o.lr)),
           b.getNamedAttr("beta1", b.getF64FloatAttr(o.beta1)),
           b.getNamedAttr("beta2", b.getF64FloatAttr(o.beta2)),
           b.getNamedAttr("eps", b.getF64FloatAttr(o.eps)),
           b.getNamedAttr("weight_decay", b.getF64FloatAttr(o.weightDecay)),
           b.getNamedAttr("momentum", b.getF64FloatAttr(o.momentum)),
           b.getNamedAttr("nesterov", b.getBoolAttr(o.nesterov))}));
  const ScheduleConfig &s = job.schedule;
  StringRef schedule = s.kind == ScheduleConfig::Kind::Constant ? "constant"
                       : s.kind == ScheduleConfig::Kind::Cosine ? "cosine"
                       : s.kind == ScheduleConfig::Kind::Linear ? "linear"
                                                                : "step";
  module->setAttr(
      "dt.schedule",
      b.getDictionaryAttr(
          {b.getNamedAttr("kind", b.getStringAttr(schedule)),
           b.getNamedAttr("warmup", b.getI64IntegerAttr(s.warmup)),
           b.getNamedAttr("min", b.getF64FloatAttr(s.min)),
           b.getNamedAttr("final", b.getF64FloatAttr(s.final)),
           b.getNamedAttr("every",
                          b.getI64IntegerAttr(std::max<int64_t>(1, s.every))),
           b.getNamedAttr("gamma", b.getF64FloatAttr(s.gamma))}));
  if (job.clip)
    module->setAttr("dt.clip", b.getF64FloatAttr(*job.clip));
  module->setAttr("dt.accumulation", b.getI64IntegerAttr(job.accumulation));
  if (!job.recompute.empty()) {
    SmallVector<Attribute> paths;
    for (const std::string &path : job.recompute)
      paths.push_back(b.getStringAttr(path));
    module->setAttr(names::kRecomputeAttr, b.getArrayAttr(paths));
  }
}

/// Rejects what code generation cannot do yet, at the program's own locations.
LogicalResult checkSupported(MLIRContext &ctx, const Job &job,
                             FunctionBuilder &locs) {
  const ParallelConfig &p = job.parallel;
  if (p.pipeline && p.getWorldSize() == 1)
    return emitError(locs.location(p.pipeline->loc))
           << "a pipeline over one rank runs its stages one after another "
              "on it: remove the pipeline key, or give axis '"
           << p.pipeline->axis << "' two or more ranks";
  return success();
}

/// `dt.pipeline`: the stages as layer paths, and the schedule.
void setPipeline(ModuleOp module, OpBuilder &b, const PipelineConfig &p,
                 int64_t ranks) {
  SmallVector<Attribute> stages;
  for (const PipelineStage &stage : p.stages) {
    SmallVector<Attribute> paths;
    for (const ModelInstance *layer : stage.instances)
      paths.push_back(b.getStringAttr(layer->path));
    stages.push_back(b.getArrayAttr(paths));
  }
  StringRef schedule =
      p.schedule == PipelineConfig::Schedule::GPipe       ? "gpipe"
      : p.schedule == PipelineConfig::Schedule::OneFOneB ? "1f1b"
                                                          : "interleaved";
  int64_t chunks = int64_t(p.stages.size()) / ranks;
  module->setAttr(
      names::kPipelineAttr,
      b.getDictionaryAttr(
          {b.getNamedAttr("axis", b.getStringAttr(p.axis)),
           b.getNamedAttr("schedule", b.getStringAttr(schedule)),
           b.getNamedAttr("microbatches", b.getI64IntegerAttr(p.microbatches)),
           b.getNamedAttr("chunks", b.getI64IntegerAttr(chunks)),
           b.getNamedAttr("stages", b.getArrayAttr(stages))}));
}

/// The mesh (`mesh.mesh @mesh` with named axes) and the parallel recipe
/// dt-shard-globals reads; returns the explicit layouts by parameter.
llvm::StringMap<Attribute> setMesh(ModuleOp module, OpBuilder &b,
                                   const Job &job) {
  const ParallelConfig &p = job.parallel;
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  for (const MeshAxis &axis : p.mesh) {
    names.push_back(axis.name);
    sizes.push_back(axis.size);
  }
  MeshInfo::create(module, names, sizes);
  MeshInfo mesh(names, sizes);
  SmallVector<Attribute> data;
  for (const std::string &axis : p.dataAxes)
    data.push_back(b.getStringAttr(axis));
  SmallVector<NamedAttribute> recipe{
      b.getNamedAttr("data", b.getArrayAttr(data)),
      b.getNamedAttr("zero", b.getI64IntegerAttr(p.zero))};
  if (!p.tensorAxis.empty())
    recipe.push_back(b.getNamedAttr("tensor", b.getStringAttr(p.tensorAxis)));
  module->setAttr(names::kParallelAttr, b.getDictionaryAttr(recipe));

  llvm::StringMap<Attribute> layouts;
  for (const ShardSpec &spec : p.shards) {
    Sharding s;
    for (const std::vector<std::string> &dim : spec.dims) {
      DimSharding d;
      for (const std::string &axis : dim)
        d.axes.push_back(*mesh.find(axis));
      s.dims.push_back(d);
    }
    layouts[spec.param] = s.toAttr(b.getContext(), mesh);
  }
  return layouts;
}

} // namespace

OwningOpRef<ModuleOp> mlirGen(MLIRContext &context, const Job &job,
                              StringRef sourcePath) {
  context.loadDialect<DTDialect, func::FuncDialect>();
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(
      FileLineColLoc::get(&context, job.loc.file, job.loc.line, job.loc.col),
      job.name);

  {
    FunctionBuilder probe(*module, b);
    if (failed(checkSupported(context, job, probe)))
      return nullptr;
  }
  // Before tracing: the traces read it (see PrimOp::Mse).
  if (job.precision != DType::F32)
    (*module)->setAttr("dt.precision",
                       b.getStringAttr(job.precision == DType::BF16 ? "bf16"
                                                                    : "f16"));
  // f16's range (up to 65504, normal down to 6e-5) needs dynamic loss
  // scaling; PyTorch's GradScaler defaults.
  if (job.precision == DType::F16)
    (*module)->setAttr(
        names::kLossScaleAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("init", b.getF64FloatAttr(65536.0)),
             b.getNamedAttr("growth_interval", b.getI64IntegerAttr(2000))}));
  llvm::StringMap<Attribute> layouts;
  if (job.parallel.getWorldSize() > 1)
    layouts = setMesh(*module, b, job);
  if (job.parallel.offloadOptimizer)
    (*module)->setAttr(names::kOffloadAttr, b.getStringAttr("optimizer"));
  if (const std::optional<PipelineConfig> &p = job.parallel.pipeline)
    setPipeline(*module, b, *p, job.parallel.getAxisSize(p->axis));
  // The traces cover one global micro-batch: micro_batch samples per data
  // rank (dt-shard-globals splits it over them).
  int64_t microBatch = job.microBatch * job.parallel.getDataParallelSize();

  // @loss: one micro-batch of the train source.
  b.setInsertionPointToEnd(module->getBody());
  auto lossFn = b.create<func::FuncOp>(module->getLoc(), names::kLossFn,
                                       b.getFunctionType({}, {}));
  b.setInsertionPointToStart(lossFn.addEntryBlock());
  FunctionBuilder train(*module, b, layouts);
  train.setTraining(job.seed, job.parallel.syncBatchNorm
                                  ? 1
                                  : job.parallel.getDataParallelSize());
  FailureOr<LossTrace> loss =
      traceLoss(job, DataRole::Train, microBatch, train);
  if (failed(loss) || train.hasFailed())
    return nullptr;
  // In a pipeline, dropout's micro-batch index is an input the runner sets
  // before each stage's forward (the backward takes it from the stash), and a
  // batch norm's running statistics move in the stage's forwards, which run
  // in micro-batch order as one rank's accumulation does.
  Value lossValue = train.get(loss->loss);
  b.create<func::ReturnOp>(module->getLoc(), lossValue);
  lossFn.setType(b.getFunctionType({}, {lossValue.getType()}));

  // @eval_step: one batch of the eval source, same size.
  if (job.eval) {
    b.setInsertionPointToEnd(module->getBody());
    auto evalFn = b.create<func::FuncOp>(module->getLoc(), names::kEvalStep,
                                         b.getFunctionType({}, {}));
    b.setInsertionPointToStart(evalFn.addEntryBlock());
    FunctionBuilder eval(*module, b, layouts);
    FailureOr<LossTrace> evalLoss =
        traceLoss(job, DataRole::Eval, microBatch, eval);
    if (failed(evalLoss))
      return nullptr;
    Value value = eval.get(evalLoss->loss);
    auto scalar = llvm::cast<RankedTensorType>(value.getType());
    FailureOr<GlobalOp> lossOut =
        getOrCreateGlobal(*module, names::kEvalLoss, scalar, Role::output);
    if (failed(lossOut))
      return nullptr;
    b.create<StoreOp>(module->getLoc(), value, lossOut->getSymName());
    if (job.classifier && evalLoss->logits.isValid()) {
      Value correct = b.create<CountCorrectOp>(module->getLoc(), scalar,
                                               eval.get(evalLoss->logits),
                                               eval.get(evalLoss->labels));
      FailureOr<GlobalOp> correctOut =
          getOrCreateGlobal(*module, names::kEvalCorrect, scalar, Role::output);
      if (failed(correctOut))
        return nullptr;
      b.create<StoreOp>(module->getLoc(), correct, correctOut->getSymName());
    }
    b.create<func::ReturnOp>(module->getLoc());
  }

  setRecipe(*module, b, job);
  (*module)->setAttr("dt.job", jobAttr(b, job, sourcePath));
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace dt
