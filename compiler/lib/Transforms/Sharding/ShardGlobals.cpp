//===- ShardGlobals.cpp - Layouts of the program's state ------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Data parallelism and ZeRO are layouts of the state, nothing else
// (DESIGN.md, "Sharding is one mechanism"): a gradient that every data rank
// holds a summand of is a partial sum over the data axes; ZeRO-1 splits the
// optimizer state over them, ZeRO-2 the gradients too, ZeRO-3 the parameters
// too. Propagation and partitioning then derive every collective. The
// algorithm:
//
//   1. A parameter's compute layout: its explicit `dt.layout` (the program's
//      `shard PATH = [...]`), else its `dt.tensor_dim` split over the tensor
//      axis (in blocks where its users split that dimension into pieces: a
//      fused q/k/v projection), else replicated. Its storage adds the data
//      axes to dimension 0 under ZeRO-3.
//   2. A gradient or optimizer state (`dt.param` names its parameter) takes
//      the parameter's compute layout. With several micro-batches per step,
//      the data axes make a gradient partial (ZeRO < 2: each rank accumulates
//      its summand, summed once by the optimizer step) or split its dimension
//      0 (ZeRO >= 2: reduce-scattered as each micro-batch's is added). With
//      one micro-batch, the gradient is summed where backward stores it, as
//      DDP does, so the sum can travel while backward goes on: whole (ZeRO 0,
//      an all-reduce) or split (ZeRO >= 1, a reduce-scatter: ZeRO-1 then
//      keeps only its shard of the gradients, as ZeRO-2 does). The data axes
//      split the state's dimension 0 under ZeRO >= 1.
//   3. A batch input splits its sample dimension over the data axes.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"
#include "dt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace dt {
#define GEN_PASS_DEF_SHARDGLOBALS
#include "dt/Transforms/Passes.h.inc"
} // namespace dt

using namespace mlir;
using namespace dt;

namespace {

/// The module's `dt.parallel` recipe, with axes resolved against the mesh.
struct Recipe {
  AxisList data;
  int64_t zero = 0;
  std::optional<AxisId> tensor;
};

FailureOr<Recipe> readRecipe(ModuleOp module, const MeshInfo &mesh) {
  Recipe r;
  auto dict = module->getAttrOfType<DictionaryAttr>(names::kParallelAttr);
  if (!dict)
    return r;
  auto axis = [&](Attribute a) -> FailureOr<AxisId> {
    auto name = dyn_cast<StringAttr>(a);
    std::optional<AxisId> found =
        name ? mesh.find(name.getValue()) : std::nullopt;
    if (!found)
      return module.emitError("dt.parallel names ")
             << a << ", which is not an axis of the mesh";
    return *found;
  };
  if (auto data = dict.getAs<ArrayAttr>("data"))
    for (Attribute a : data) {
      FailureOr<AxisId> found = axis(a);
      if (failed(found))
        return failure();
      // An axis of one rank splits nothing.
      if (mesh.size(*found) > 1)
        r.data.push_back(*found);
    }
  if (auto zero = dict.getAs<IntegerAttr>("zero"))
    r.zero = zero.getInt();
  if (Attribute tensor = dict.get("tensor")) {
    FailureOr<AxisId> found = axis(tensor);
    if (failed(found))
      return failure();
    if (mesh.size(*found) > 1)
      r.tensor = *found;
  }
  return r;
}

/// `layout` with `axes` appended to the split of dimension 0 (those it does
/// not use yet): ZeRO's sharding of state over the data axes.
Sharding splitOverData(Sharding layout, ArrayRef<AxisId> axes) {
  if (layout.rank() == 0)
    return layout;
  for (AxisId a : axes)
    if (!layout.uses(a))
      layout.dims[0].axes.push_back(a);
  return layout;
}

/// The blocks a tensor-parallel split of dimension `dim` of `param` needs:
/// the split must land where the users of the parameter's values split their
/// dimensions. A fused projection whose output is `split` into 3 pieces (q, k
/// and v) must split each piece over the tensor axis, not the whole (`3 x tp`,
/// Megatron's per-head layout). Follows the dimension from each load through
/// the ops that carry it as one factor, a few ops deep, to the first op that
/// sees it as a product of factors; 1 when none does.
int64_t blocksFor(GlobalOp param, int64_t dim, int64_t ranks) {
  ModuleOp module = param->getParentOfType<ModuleOp>();
  SmallVector<std::tuple<Value, int64_t, int>> todo;
  module.walk([&](LoadOp load) {
    if (load.getGlobal() == param.getSymName())
      todo.push_back({load.getResult(), dim, 0});
  });
  while (!todo.empty()) {
    auto [value, d, depth] = todo.pop_back_val();
    if (depth > 8)
      continue;
    for (OpOperand &use : value.getUses()) {
      auto user = dyn_cast<ShardableOpInterface>(use.getOwner());
      if (!user)
        continue;
      ShardingRule rule = user.getShardingRule();
      const ShardingRule::Dim &factors =
          rule.operands[use.getOperandNumber()][d];
      if (factors.empty())
        continue;
      if (factors.size() > 1) {
        // A product: the split goes on the first factor that takes it, and
        // the factors before it count the blocks.
        int64_t before = 1;
        for (int64_t f : factors) {
          const ShardingRule::Factor &factor = rule.factors[f];
          if (factor.kind != ShardingRule::FactorKind::Whole &&
              factor.size % ranks == 0)
            return before;
          before *= factor.size;
        }
        continue;
      }
      int64_t f = factors[0];
      if (rule.factors[f].kind == ShardingRule::FactorKind::Whole)
        continue;
      for (auto [k, dims] : llvm::enumerate(rule.results))
        for (auto [e, resultFactors] : llvm::enumerate(dims))
          if (resultFactors.size() == 1 && resultFactors[0] == f)
            todo.push_back({user->getResult(k), int64_t(e), depth + 1});
    }
  }
  return 1;
}

struct ShardGlobalsPass : public dt::impl::ShardGlobalsBase<ShardGlobalsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshInfo> mesh = MeshInfo::get(module);
    if (failed(mesh))
      return signalPassFailure();
    if (mesh->rank() == 0)
      return;
    FailureOr<Recipe> recipe = readRecipe(module, *mesh);
    if (failed(recipe))
      return signalPassFailure();

    // 1. Parameters.
    llvm::DenseMap<Operation *, Sharding> compute;
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      if (g.getRole() != Role::param)
        continue;
      FailureOr<Sharding> layout = computeLayout(g, *mesh, *recipe);
      if (failed(layout))
        return signalPassFailure();
      compute[g] = *layout;
      if (recipe->zero >= 3)
        set(g, splitOverData(*layout, recipe->data), *mesh);
      else
        set(g, *layout, *mesh);
    }

    // 2. Gradients and optimizer state; 3. batches; the rest replicated.
    int64_t accumulation = 1;
    if (auto a = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
      accumulation = a.getInt();
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      if (g.getRole() == Role::param)
        continue;
      int64_t rank = g.getGlobalTensorType().getRank();
      Sharding layout = Sharding::replicated(rank);
      GlobalOp param = getOwner(g);
      if (param && compute.count(param) &&
          compute[param].rank() == rank) {
        layout = compute[param];
        bool grad = g.getRole() == Role::grad;
        if (grad && accumulation > 1 && recipe->zero < 2) {
          for (AxisId a : recipe->data)
            if (!layout.uses(a))
              layout.partial.push_back(a);
          llvm::sort(layout.partial);
        } else if ((grad && (accumulation > 1 || recipe->zero >= 1)) ||
                   (!grad && recipe->zero >= 1)) {
          layout = splitOverData(layout, recipe->data);
        }
      } else if ((g.getRole() == Role::input || g.getRole() == Role::pipe) &&
                 g->hasAttr(names::kBatchAttr) &&
                 rank > 0) {
        layout.dims[0].axes = recipe->data;
      }
      set(g, layout, *mesh);
    }
  }

  /// A parameter's layout in forward and backward.
  FailureOr<Sharding> computeLayout(GlobalOp g, const MeshInfo &mesh,
                                    const Recipe &recipe) {
    RankedTensorType type = g.getGlobalTensorType();
    if (auto explicitLayout = g->getAttrOfType<ShardingAttr>("dt.layout")) {
      FailureOr<Sharding> s = Sharding::fromAttr(explicitLayout, mesh,
                                                 [&] { return g.emitError(); });
      if (failed(s) || failed(s->verify(type.getShape(), mesh,
                                        [&] { return g.emitError(); })))
        return failure();
      return *s;
    }
    Sharding s = Sharding::replicated(type.getRank());
    if (auto dim = g->getAttrOfType<IntegerAttr>(names::kTensorDimAttr);
        dim && recipe.tensor) {
      if (dim.getInt() < 0 || dim.getInt() >= type.getRank())
        return g.emitError("dt.tensor_dim ")
               << dim.getInt() << " is not a dimension of " << type;
      DimSharding &d = s.dims[dim.getInt()];
      d.axes = {*recipe.tensor};
      d.blocks = blocksFor(g, dim.getInt(), mesh.size(*recipe.tensor));
    }
    return s;
  }

  void set(GlobalOp g, const Sharding &layout, const MeshInfo &mesh) {
    if (!g.getSharding())
      g.setShardingAttr(layout.toAttr(g.getContext(), mesh));
  }
};

} // namespace
