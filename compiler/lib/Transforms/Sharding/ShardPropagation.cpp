//===- ShardPropagation.cpp - A layout for every value --------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// GSPMD-style propagation over each straight-line entry point, with the
// costs of resharding deciding conflicts. The algorithm:
//
//   1. Seeds. A dt.load yields its global's layout. In an entry point that
//      reads a batch, the data axes belong to the batch: a parameter split
//      over them (ZeRO-3) is loaded as a shard and gathered for its users.
//   2. Preferences, backward. A value stored into a global prefers the
//      global's layout; ops that keep their operands' layout (elementwise,
//      broadcasts, reshapes, transposes, splits) pass a preference on to their
//      operands, so an optimizer update is computed where its state lives.
//      Contractions and kernels do not: the gradient a matmul makes is summed
//      after it, not forced into the matmul.
//   3. Choices, forward. For each op, every combination of mesh axes per
//      factor of its ShardingRule that its operands (and, for the ops of step
//      2, its results' preferences) offer is priced: the resharding of each
//      operand into what the combination needs, and of each result into its
//      preference, in bytes a rank moves plus a latency per collective
//      (Layouts.h). Partial sums may pass through linear ops. The cheapest
//      wins; ties go to the more split results (less work per rank), then to
//      the earlier combination.
//   4. Splits sink into producers whose users all want the same piece and
//      that can make it by slicing their own operands: broadcasts of a bias
//      over a batch split, splat constants, elementwise chains of replicated
//      state that meet sharded state.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"
#include "dt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <limits>

namespace dt {
#define GEN_PASS_DEF_SHARDPROPAGATION
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// Ops whose results are laid out like their operands (up to a permutation
/// or regrouping of dimensions): preferences flow back through them.
bool keepsLayout(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() ||
         isa<BroadcastToOp, ReshapeOp, TransposeOp, SplitOp, ConcatOp, SliceOp,
             PadOp>(op);
}

/// Ops that make any block of a result dimension that no operand has, at a
/// cost that shrinks with the block: an embedding's gradient computes the
/// rows its user wants (a vocabulary-parallel table's), not the whole table.
bool makesResultBlocks(Operation *op) { return isa<EmbeddingGradOp>(op); }

/// Ops that partial sums pass through: sums, products and scatter-adds
/// (an embedding's gradient is as much a sum of summands as its input). The
/// other kernels get summed operands, as Megatron gives its layer norms.
bool passesPartialSums(Operation *op) {
  return keepsLayout(op) || isa<ReduceSumOp, MatmulOp, EmbeddingGradOp>(op);
}

/// Ops that may compute on padded shards: the padding stays where it is (a
/// reshape that merges a padded dimension keeps it as padded blocks), and
/// dt-spmd-partition checks that a sum over it adds zeros. Other ops take
/// padding only in the factors their rules mark uneven.
bool toleratesPadding(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() ||
         isa<BroadcastToOp, ReduceSumOp, ConstantOp, ReshapeOp, TransposeOp>(
             op);
}

/// What a point of an op's iteration space (an element of an elementwise
/// op, a multiply-add of a matmul) costs, against a byte sent: enough to
/// prefer computing a shard over computing the whole and dropping most of it,
/// and to keep a contraction split (a partial sum) rather than gather its
/// operands to contract them whole on every rank. A core multiply-adds in
/// about the time it sends a few bytes.
constexpr double kWorkWeight = 0.2;

/// Values this small are latency-bound: dividing one into summands to save a
/// collective is worth its rounding.
constexpr int64_t kSmallElements = 1024;

double bytesOf(const Sharding &s, Value v, const MeshInfo &mesh) {
  double n = elementBytes(tensorType(v).getElementType());
  for (int64_t d : s.localShape(tensorType(v).getShape(), mesh))
    n *= d;
  return n;
}

/// Producers made anew on any piece at no cost: splat constants and
/// broadcasts (step 4 moves the split into them).
bool isCheapToSplit(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast_or_null<ConstantOp>(def))
    return cast<DenseElementsAttr>(c.getValue()).isSplat();
  return isa_and_nonnull<BroadcastToOp>(def);
}

/// Whether `v` is a constant of zeros: a partial sum of zeros in any layout.
bool isZeroSplat(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return false;
  auto value = cast<DenseElementsAttr>(c.getValue());
  if (!value.isSplat())
    return false;
  Attribute e = value.getSplatValue<Attribute>();
  if (auto f = dyn_cast<FloatAttr>(e))
    return f.getValue().isZero();
  return cast<IntegerAttr>(e).getValue().isZero();
}

/// Splats and broadcasts of scalars: made anew, locally, in any layout.
bool isMadeAnywhere(Value v) {
  if (auto c = v.getDefiningOp<ConstantOp>())
    return cast<DenseElementsAttr>(c.getValue()).isSplat();
  auto b = v.getDefiningOp<BroadcastToOp>();
  return b && shapeOf(b.getInput()).empty();
}

/// Whether `steps` only slice (no communication, no change of partial sums).
bool onlySlices(ArrayRef<ReshardStep> steps) {
  return llvm::all_of(steps, [](const ReshardStep &s) {
    return s.kind == ReshardStep::Kind::Slice;
  });
}

/// One candidate of an op: its factor assignment and what follows from it.
struct Choice {
  FactorAssignment factors;
  SmallVector<Sharding> operands, results;
  double cost = 0;
  int64_t splits = 0;
};

class FunctionPropagation {
public:
  FunctionPropagation(func::FuncOp fn, const MeshInfo &mesh)
      : fn(fn), ctx(fn.getContext()), mesh(mesh) {}

  LogicalResult run();

private:
  LogicalResult seed(LoadOp load);
  void prefer(Operation *op);
  void sink(Operation *op);
  /// The cost of fetching `v` in `layout` for an op, given what earlier ops
  /// already fetched (the partitioner reuses those).
  double fetchCost(Value v, const Sharding &layout) const;
  /// Records `op`'s operand layouts, and marks reshards.
  void setOperandLayouts(Operation *op, ArrayRef<Sharding> needed);
  /// The layout `op` needs operand `i` in.
  Sharding needed(Operation *op, unsigned i) const;
  LogicalResult choose(Operation *op, ShardingRule rule);
  void evaluate(Operation *op, const ShardingRule &rule,
                const FactorAssignment &factors, std::optional<Choice> &best);
  Sharding current(Value v) const {
    auto it = layouts.find(v);
    return it != layouts.end() ? it->second
                               : Sharding::replicated(tensorType(v).getRank());
  }

  func::FuncOp fn;
  MLIRContext *ctx;
  const MeshInfo &mesh;
  /// The axes that split the batch this entry point reads (none: it reads no
  /// batch).
  AxisList data;
  llvm::DenseMap<Value, Sharding> layouts, preferences;
  /// The layouts earlier ops fetched each value in.
  llvm::DenseMap<Value, SmallVector<Sharding, 1>> fetched;
};

LogicalResult FunctionPropagation::run() {
  // The data axes: those that split the samples of the batches this entry
  // point reads.
  Block &body = fn.getBody().front();
  for (Operation &op : body)
    if (auto load = dyn_cast<LoadOp>(op))
      if (GlobalOp g = lookupGlobal(load, load.getGlobal());
          g &&
          (g.getRole() == Role::input || g.getRole() == Role::pipe) &&
          g->hasAttr(names::kBatchAttr) &&
          g.getGlobalTensorType().getRank() > 0) {
        FailureOr<Sharding> layout = storageLayout(g, mesh);
        if (failed(layout))
          return failure();
        for (AxisId a : layout->dims[0].axes)
          if (!llvm::is_contained(data, a))
            data.push_back(a);
      }

  // 2. Preferences, from the stores back.
  for (Operation &op : llvm::reverse(body)) {
    if (auto store = dyn_cast<StoreOp>(op)) {
      GlobalOp g = lookupGlobal(store, store.getGlobal());
      FailureOr<Sharding> layout = storageLayout(g, mesh);
      if (failed(layout))
        return failure();
      preferences.try_emplace(store.getValue(), *layout);
      continue;
    }
    if (keepsLayout(&op) && isa<ShardableOpInterface>(op))
      prefer(&op);
  }

  // 1 and 3, in program order.
  for (Operation &op : body) {
    if (auto load = dyn_cast<LoadOp>(op)) {
      if (failed(seed(load)))
        return failure();
      continue;
    }
    if (isa<StoreOp, func::ReturnOp>(op))
      continue;
    auto shardable = dyn_cast<ShardableOpInterface>(op);
    if (!shardable)
      return op.emitOpError("has no sharding rule; dt-shard-propagation "
                            "cannot lay it out over the mesh");
    if (failed(choose(&op, shardable.getShardingRule())))
      return failure();
  }

  // 4. Splits sink into producers that can make the piece their users want
  //    from what they already have, without communication: a bias broadcast
  //    over a batch split is broadcast over the rank's rows only.
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->getNumResults() == 1 && isa<ShardableOpInterface>(op) &&
        (keepsLayout(op) || isa<ConstantOp>(op)))
      sink(op);
  return success();
}

double FunctionPropagation::fetchCost(Value v, const Sharding &layout) const {
  Sharding cur = current(v);
  auto earlier = fetched.find(v);
  if (cur == layout ||
      (earlier != fetched.end() && llvm::is_contained(earlier->second, layout)))
    return 0;
  // Splats and broadcasts of scalars are made anew in any layout.
  if (isMadeAnywhere(v) &&
      (layout.partial.empty() || v.getDefiningOp<ConstantOp>()))
    return 0;
  if (isCheapToSplit(v)) {
    FailureOr<ReshardPlan> plan =
        planReshard(cur, layout, tensorType(v).getShape(), mesh);
    if (succeeded(plan) && onlySlices(*plan))
      return 0;
  }
  // From the value's own layout, or by slicing a layout an earlier op
  // fetched it in (a gradient summed whole for the norm is sliced for the
  // update, not summed again).
  double cost = reshardCost(cur, layout, tensorType(v).getShape(),
                            tensorType(v).getElementType(), mesh);
  if (earlier != fetched.end())
    for (const Sharding &from : earlier->second) {
      FailureOr<ReshardPlan> plan =
          planReshard(from, layout, tensorType(v).getShape(), mesh);
      if (succeeded(plan) && onlySlices(*plan))
        cost = std::min(cost, reshardCost(from, layout,
                                          tensorType(v).getShape(),
                                          tensorType(v).getElementType(), mesh));
    }
  return cost;
}

Sharding FunctionPropagation::needed(Operation *op, unsigned i) const {
  if (auto attrs = op->getAttrOfType<ArrayAttr>(layout::kOperands)) {
    FailureOr<Sharding> s =
        Sharding::fromAttr(cast<ShardingAttr>(attrs[i]), mesh,
                           [&] { return op->emitError(); });
    if (succeeded(s))
      return *s;
  }
  return current(op->getOperand(i));
}

void FunctionPropagation::setOperandLayouts(Operation *op,
                                            ArrayRef<Sharding> needed) {
  SmallVector<Attribute> attrs;
  bool reshards = false;
  for (auto [v, s] : llvm::zip(op->getOperands(), needed)) {
    Attribute attr = s.toAttr(op->getContext(), mesh);
    attrs.push_back(attr);
    if (s != current(v)) {
      reshards = true;
      SmallVector<Sharding, 1> &list = fetched[v];
      if (!llvm::is_contained(list, s))
        list.push_back(s);
    }
  }
  if (reshards)
    op->setAttr(layout::kOperands, ArrayAttr::get(op->getContext(), attrs));
  else
    op->removeAttr(layout::kOperands);
}

void FunctionPropagation::sink(Operation *op) {
  Value r = op->getResult(0);
  if (r.use_empty())
    return;
  // Every user must want the same piece, reachable by slicing alone.
  std::optional<Sharding> wanted;
  for (OpOperand &use : r.getUses()) {
    Operation *user = use.getOwner();
    if (isa<StoreOp>(user))
      return;
    Sharding s = needed(user, use.getOperandNumber());
    if (wanted && *wanted != s)
      return;
    wanted = s;
  }
  Sharding cur = current(r);
  if (*wanted == cur)
    return;
  ArrayRef<int64_t> shape = tensorType(r).getShape();
  FailureOr<ReshardPlan> plan =
      planReshard(cur, *wanted, shape, mesh);
  if (failed(plan) || !onlySlices(*plan))
    return;

  // The op's factors under the wanted layout, and what its operands then need.
  ShardingRule rule = cast<ShardableOpInterface>(op).getShardingRule();
  FactorAssignment factors(rule.factors.size());
  for (auto [d, dim] : llvm::enumerate(rule.results[0])) {
    std::optional<DimReading> reading =
        readDim(wanted->dims[d], dim, rule, mesh, toleratesPadding(op));
    if (!reading)
      return;
    if (reading->factor >= 0)
      factors[reading->factor] = reading->split;
  }
  SmallVector<Sharding> operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    std::optional<Sharding> s = layoutOf(rule.operands[i], factors, rule);
    if (!s)
      return;
    s->partial = needed(op, i).partial;
    FailureOr<ReshardPlan> fetch =
        planReshard(current(v), *s, tensorType(v).getShape(), mesh);
    if (failed(fetch) || !onlySlices(*fetch))
      return;
    operands.push_back(*s);
  }
  layouts[r] = *wanted;
  setResultLayouts(op, {*wanted}, mesh);
  setOperandLayouts(op, operands);
  for (Operation *user : r.getUsers()) {
    SmallVector<Sharding> userNeeds;
    for (unsigned i = 0; i < user->getNumOperands(); ++i)
      userNeeds.push_back(needed(user, i));
    setOperandLayouts(user, userNeeds);
  }
}

LogicalResult FunctionPropagation::seed(LoadOp load) {
  GlobalOp g = lookupGlobal(load, load.getGlobal());
  FailureOr<Sharding> layout = storageLayout(g, mesh);
  if (failed(layout))
    return failure();
  Sharding s = *layout;
  if (g.getRole() == Role::param)
    for (DimSharding &d : s.dims) {
      llvm::erase_if(d.axes,
                     [&](AxisId a) { return llvm::is_contained(data, a); });
      if (d.axes.empty())
        d.blocks = 1;
    }
  layouts[load.getResult()] = s;
  setResultLayouts(load, {s}, mesh);
  return success();
}

void FunctionPropagation::prefer(Operation *op) {
  ShardingRule rule = cast<ShardableOpInterface>(op).getShardingRule();
  FactorAssignment factors(rule.factors.size());
  bool any = false;
  AxisList partial;
  for (auto [j, r] : llvm::enumerate(op->getResults())) {
    auto it = preferences.find(r);
    if (it == preferences.end())
      continue;
    const Sharding &p = it->second;
    if (partial.empty())
      partial = p.partial;
    for (auto [d, dim] : llvm::enumerate(rule.results[j])) {
      std::optional<DimReading> reading =
          readDim(p.dims[d], dim, rule, mesh, /*allowPadding=*/true);
      if (!reading || reading->factor < 0 ||
          factors[reading->factor].isSplit())
        continue;
      factors[reading->factor] = reading->split;
      any = true;
    }
  }
  if (!any && partial.empty())
    return;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    if (preferences.count(v))
      continue;
    std::optional<Sharding> s = layoutOf(rule.operands[i], factors, rule);
    if (!s)
      continue;
    if (rule.linearity == ShardingRule::Linearity::Joint &&
        rule.isLinearIn(i) && isa<FloatType>(tensorType(v).getElementType()))
      s->partial = partial;
    if (!s->isReplicated())
      preferences[v] = *s;
  }
}

LogicalResult FunctionPropagation::choose(Operation *op, ShardingRule rule) {
  bool padding = toleratesPadding(op);
  size_t nf = rule.factors.size();
  // The splits each factor is offered: none, and what operands (and
  // preferred results of layout-keeping ops) have.
  SmallVector<SmallVector<FactorSplit, 3>> offers(nf, {FactorSplit()});
  auto offer = [&](const Sharding &s, const ShardingRule::Dims &dims) {
    for (auto [d, dim] : llvm::enumerate(dims)) {
      std::optional<DimReading> reading =
          readDim(s.dims[d], dim, rule, mesh, padding);
      if (!reading || reading->factor < 0)
        continue;
      auto &list = offers[reading->factor];
      if (rule.factors[reading->factor].kind !=
              ShardingRule::FactorKind::Whole &&
          !llvm::is_contained(list, reading->split))
        list.push_back(reading->split);
    }
  };
  // Splats and broadcasts of scalars take any layout at no cost, so theirs
  // says nothing (they are often shared by unrelated users).
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (!isMadeAnywhere(v))
      offer(current(v), rule.operands[i]);
  if (keepsLayout(op) || makesResultBlocks(op))
    for (auto [j, r] : llvm::enumerate(op->getResults()))
      if (auto it = preferences.find(r); it != preferences.end())
        offer(it->second, rule.results[j]);

  // Every combination, axes used once; a bound keeps pathological ops cheap
  // (they fall back to the first offer of each factor beyond it).
  std::optional<Choice> best;
  FactorAssignment factors(nf);
  int64_t budget = 4096;
  std::function<void(size_t, AxisList &)> search = [&](size_t f,
                                                       AxisList &used) {
    if (f == nf) {
      evaluate(op, rule, factors, best);
      --budget;
      return;
    }
    for (const FactorSplit &split : offers[f]) {
      if (llvm::any_of(split.axes, [&](AxisId a) {
            return llvm::is_contained(used, a);
          }))
        continue;
      factors[f] = split;
      used.append(split.axes.begin(), split.axes.end());
      search(f + 1, used);
      used.resize(used.size() - split.axes.size());
      if (budget <= 0 && best)
        break;
    }
    factors[f] = FactorSplit();
  };
  AxisList used;
  search(0, used);
  if (!best)
    return op->emitOpError("dt-shard-propagation found no layout for it");

  setOperandLayouts(op, best->operands);
  for (auto [j, r] : llvm::enumerate(op->getResults()))
    layouts[r] = best->results[j];
  setResultLayouts(op, best->results, mesh);
  return success();
}

void FunctionPropagation::evaluate(Operation *op, const ShardingRule &rule,
                                   const FactorAssignment &factors,
                                   std::optional<Choice> &best) {
  Choice c;
  c.factors = factors;
  for (const ShardingRule::Dims &dims : rule.operands) {
    std::optional<Sharding> s = layoutOf(dims, factors, rule);
    if (!s)
      return;
    c.operands.push_back(*s);
  }
  for (const ShardingRule::Dims &dims : rule.results) {
    std::optional<Sharding> s = layoutOf(dims, factors, rule);
    if (!s)
      return;
    c.results.push_back(*s);
  }
  AxisList usedAxes;
  for (const FactorSplit &f : factors)
    usedAxes.append(f.axes.begin(), f.axes.end());

  // The partial sums that may pass through: none, or the partial axes of one
  // of the linear operands (those of the others are then summed, or, for a
  // whole operand of a joint op, divided into summands).
  SmallVector<AxisList, 2> passes{AxisList()};
  if (passesPartialSums(op) && rule.linearity != ShardingRule::Linearity::None)
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      AxisList p = current(v).partial;
      if (!rule.isLinearIn(i) || p.empty() || llvm::is_contained(passes, p) ||
          llvm::any_of(p, [&](AxisId a) {
            return llvm::is_contained(usedAxes, a);
          }))
        continue;
      passes.push_back(p);
    }

  for (const AxisList &pass : passes) {
    Choice v = c;
    if (!pass.empty()) {
      if (rule.linearity == ShardingRule::Linearity::Joint) {
        // Every operand must already be such a summand, or zeros, or small:
        // a large whole value is not divided into summands to save a sum (a
        // bias is added after the sum, as Megatron does), but a handful of
        // numbers is, when that saves a collective (the squared norms of
        // gradients split over different axes add up to one sum).
        bool joins = true;
        for (auto [i, operand] : llvm::enumerate(op->getOperands()))
          if (rule.isLinearIn(i) &&
              isa<FloatType>(tensorType(operand).getElementType())) {
            const AxisList &has = current(operand).partial;
            bool within = llvm::all_of(
                has, [&](AxisId a) { return llvm::is_contained(pass, a); });
            joins &= has == pass || isZeroSplat(operand) ||
                     (within && tensorType(operand).getNumElements() <=
                                    kSmallElements);
            v.operands[i].partial = pass;
          }
        if (!joins)
          continue;
      } else {
        // Separate: the largest operand that has these partial axes keeps
        // them.
        int64_t keeper = -1;
        double keeperBytes = -1;
        for (auto [i, operand] : llvm::enumerate(op->getOperands()))
          if (rule.isLinearIn(i) && current(operand).partial == pass &&
              bytesOf(current(operand), operand, mesh) > keeperBytes) {
            keeper = i;
            keeperBytes = bytesOf(current(operand), operand, mesh);
          }
        v.operands[keeper].partial = pass;
      }
    }
    for (auto [j, r] : llvm::enumerate(op->getResults())) {
      AxisList partial = summedAxes(rule, factors, j);
      partial.append(pass.begin(), pass.end());
      llvm::sort(partial);
      v.results[j].partial = partial;
    }
    // Fetching the operands (each distinct one once), the rank's work and
    // turning the results into what their users prefer.
    v.cost = 0;
    SmallVector<std::pair<Value, Sharding>> counted;
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      const Sharding &layout = v.operands[i];
      Value value = operand;
      if (llvm::any_of(counted, [&](const auto &c) {
            return c.first == value && c.second == layout;
          }))
        continue;
      counted.push_back({value, layout});
      v.cost += fetchCost(value, layout);
    }
    // The rank's part of the op's iteration space.
    double work = 1;
    for (auto [f, split] : llvm::enumerate(factors))
      work *= std::ceil(double(rule.factors[f].size) /
                        double(split.isSplit() ? mesh.size(split.axes) : 1));
    v.cost += kWorkWeight * work;
    v.splits = 0;
    for (auto [j, r] : llvm::enumerate(op->getResults())) {
      v.splits += v.results[j].splitAxes().size();
      auto it = preferences.find(r);
      if (it == preferences.end())
        continue;
      double toPreference =
          reshardCost(v.results[j], it->second, tensorType(r).getShape(),
                      tensorType(r).getElementType(), mesh);
      // A preference no layout reaches is not this op's to meet.
      if (toPreference != std::numeric_limits<double>::infinity())
        v.cost += toPreference;
    }
    if (v.cost == std::numeric_limits<double>::infinity())
      continue;
    if (!best || v.cost < best->cost ||
        (v.cost == best->cost && v.splits > best->splits))
      best = std::move(v);
  }
}

struct ShardPropagationPass
    : public dt::impl::ShardPropagationBase<ShardPropagationPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshInfo> mesh = MeshInfo::get(module);
    if (failed(mesh))
      return signalPassFailure();
    if (mesh->rank() == 0)
      return;
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError("dt-shard-propagation needs single-block entry points");
        return signalPassFailure();
      }
      if (failed(FunctionPropagation(fn, *mesh).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
