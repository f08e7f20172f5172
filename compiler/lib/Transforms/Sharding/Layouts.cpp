//===- Layouts.cpp - What the sharding passes share -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "Layouts.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

using namespace mlir;
using namespace dt;

std::optional<DimReading> dt::readDim(const DimSharding &layout,
                                      ArrayRef<int64_t> dims,
                                      const ShardingRule &rule,
                                      const MeshInfo &mesh, bool allowPadding) {
  if (!layout.isSplit())
    return DimReading{};
  int64_t ranks = mesh.size(layout.axes);
  // The split is on factor j when the factors before it make up whole blocks
  // of the layout: blocks = (their product) * (blocks within factor j).
  int64_t before = 1;
  for (int64_t f : dims) {
    int64_t size = rule.factors[f].size;
    if (layout.blocks % before == 0) {
      int64_t within = layout.blocks / before;
      if (size % within == 0) {
        int64_t block = size / within;
        if (block % ranks == 0 ||
            ((allowPadding || rule.factors[f].uneven) && dims.size() == 1))
          return DimReading{f, {layout.axes, within}};
      }
    }
    before *= size;
    if (before > layout.blocks)
      break;
  }
  return std::nullopt;
}

std::optional<DimSharding> dt::layoutOfDim(ArrayRef<int64_t> dims,
                                           const FactorAssignment &assignment,
                                           const ShardingRule &rule) {
  DimSharding layout;
  int64_t before = 1;
  for (int64_t f : dims) {
    const FactorSplit &split = assignment[f];
    if (split.isSplit()) {
      if (layout.isSplit())
        return std::nullopt;
      layout.axes = split.axes;
      layout.blocks = before * split.blocks;
    }
    before *= rule.factors[f].size;
  }
  if (!layout.isSplit())
    layout.blocks = 1;
  return layout;
}

std::optional<Sharding> dt::layoutOf(const ShardingRule::Dims &dims,
                                     const FactorAssignment &assignment,
                                     const ShardingRule &rule) {
  Sharding s;
  for (const ShardingRule::Dim &dim : dims) {
    std::optional<DimSharding> d = layoutOfDim(dim, assignment, rule);
    if (!d)
      return std::nullopt;
    s.dims.push_back(*d);
  }
  return s;
}

AxisList dt::summedAxes(const ShardingRule &rule,
                        const FactorAssignment &assignment, unsigned index) {
  llvm::SmallSetVector<int64_t, 8> present;
  for (const ShardingRule::Dim &dim : rule.results[index])
    for (int64_t f : dim)
      present.insert(f);
  AxisList axes;
  for (auto [f, split] : llvm::enumerate(assignment))
    if (split.isSplit() && !present.contains(f) &&
        rule.factors[f].kind != ShardingRule::FactorKind::Combined)
      axes.append(split.axes.begin(), split.axes.end());
  llvm::sort(axes);
  return axes;
}

//===----------------------------------------------------------------------===//
// Resharding plans
//===----------------------------------------------------------------------===//

/// Whether `a`'s split is the start of `b`'s (so `b` splits `a`'s pieces
/// further).
static bool isPrefix(const DimSharding &a, const DimSharding &b) {
  if (a.axes.size() > b.axes.size())
    return false;
  if (!a.axes.empty() && a.blocks != b.blocks)
    return false;
  return llvm::equal(a.axes, ArrayRef(b.axes).take_front(a.axes.size()));
}

FailureOr<ReshardPlan> dt::planReshard(const Sharding &from,
                                       const Sharding &to,
                                       ArrayRef<int64_t> shape,
                                       const MeshInfo &mesh) {
  if (from.rank() != to.rank() ||
      static_cast<int64_t>(shape.size()) != from.rank())
    return failure();
  ReshardPlan steps;
  Sharding cur = from;
  auto step = [&](ReshardStep::Kind kind, AxisList axes, int64_t dim,
                  Sharding next, int64_t toDim = -1) {
    steps.push_back({kind, std::move(axes), dim, toDim, next});
    cur = std::move(next);
  };
  // Whether dimension d of `s` is split into equal pieces without padding.
  auto even = [&](const Sharding &s, int64_t d) {
    Sharding one = Sharding::replicated(s.rank());
    one.dims[d] = s.dims[d];
    return s.dims[d].blocks == 1 && !one.isPadded(shape, mesh);
  };

  AxisList distributed;
  for (AxisId a : to.partial)
    if (!llvm::is_contained(from.partial, a))
      distributed.push_back(a);

  // 1. Sums. One summed axis that `to` then splits a dimension by is a
  //    reduce-scatter: half an all-reduce's traffic.
  AxisList summed;
  for (AxisId a : from.partial)
    if (!llvm::is_contained(to.partial, a))
      summed.push_back(a);
  if (!summed.empty()) {
    bool scattered = false;
    if (summed.size() == 1) {
      AxisId a = summed[0];
      for (int64_t d = 0; d < cur.rank() && !scattered; ++d) {
        const DimSharding &c = cur.dims[d], &t = to.dims[d];
        size_t k = c.axes.size();
        if (t.axes.size() > k && isPrefix(c, t) && t.axes[k] == a) {
          Sharding next = cur;
          next.partial.erase(llvm::find(next.partial, a));
          next.dims[d].axes.push_back(a);
          next.dims[d].blocks = t.blocks;
          step(ReshardStep::Kind::ReduceScatter, {a}, d, next);
          scattered = true;
        }
      }
    }
    if (!scattered) {
      Sharding next = cur;
      next.partial = AxisList();
      for (AxisId a : cur.partial)
        if (!llvm::is_contained(summed, a))
          next.partial.push_back(a);
      step(ReshardStep::Kind::AllReduce, summed, -1, next);
    }
  }

  // 2. Gathers: every axis past the part of a dimension's split that `to`
  //    keeps, innermost first.
  for (int64_t d = 0; d < cur.rank(); ++d) {
    size_t keep = 0;
    const DimSharding &t = to.dims[d];
    while (keep < cur.dims[d].axes.size() && keep < t.axes.size() &&
           cur.dims[d].axes[keep] == t.axes[keep] &&
           cur.dims[d].blocks == t.blocks)
      ++keep;
    while (cur.dims[d].axes.size() > keep) {
      Sharding next = cur;
      AxisId a = next.dims[d].axes.pop_back_val();
      if (next.dims[d].axes.empty())
        next.dims[d].blocks = 1;
      // A dimension that `to` splits by `a` next takes it over in the same
      // exchange, when both splits are even.
      int64_t target = -1;
      for (int64_t e = 0; e < cur.rank() && target < 0; ++e) {
        const DimSharding &c = cur.dims[e], &t = to.dims[e];
        size_t k = c.axes.size();
        if (e != d && t.axes.size() > k && isPrefix(c, t) && t.axes[k] == a &&
            t.blocks == 1)
          target = e;
      }
      if (target >= 0 && even(cur, d)) {
        Sharding moved = next;
        moved.dims[target].axes.push_back(a);
        moved.dims[target].blocks = 1;
        if (even(moved, target)) {
          step(ReshardStep::Kind::AllToAll, {a}, d, moved, target);
          continue;
        }
      }
      step(ReshardStep::Kind::AllGather, {a}, d, next);
    }
  }

  // 3. Slices for the splits `to` adds, outermost first.
  for (int64_t d = 0; d < cur.rank(); ++d)
    while (cur.dims[d].axes.size() < to.dims[d].axes.size()) {
      Sharding next = cur;
      next.dims[d].axes.push_back(to.dims[d].axes[cur.dims[d].axes.size()]);
      next.dims[d].blocks = to.dims[d].blocks;
      step(ReshardStep::Kind::Slice, {next.dims[d].axes.back()}, d, next);
    }
  // 4. Summands of a whole value.
  if (!distributed.empty()) {
    Sharding next = cur;
    next.partial = to.partial;
    step(ReshardStep::Kind::Distribute, distributed, -1, next);
  }
  assert(cur == to && "a resharding plan must end at its target");
  return steps;
}

int64_t dt::elementBytes(Type type) {
  return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
}

double dt::reshardCost(const Sharding &from, const Sharding &to,
                       ArrayRef<int64_t> shape, Type elementType,
                       const MeshInfo &mesh) {
  if (from == to)
    return 0;
  FailureOr<ReshardPlan> plan =
      planReshard(from, to, shape, mesh);
  if (failed(plan))
    return std::numeric_limits<double>::infinity();
  auto bytes = [&](const Sharding &s) {
    double n = elementBytes(elementType);
    for (int64_t d : s.localShape(shape, mesh))
      n *= d;
    return n;
  };
  double cost = 0;
  Sharding cur = from;
  for (const ReshardStep &s : *plan) {
    double k = mesh.size(s.axes), ring = (k - 1) / k;
    switch (s.kind) {
    case ReshardStep::Kind::AllReduce:
      cost += 2 * ring * bytes(cur) + kLatencyBytes;
      break;
    case ReshardStep::Kind::ReduceScatter:
      cost += ring * bytes(cur) + kLatencyBytes;
      break;
    case ReshardStep::Kind::AllGather:
      cost += ring * bytes(s.after) + kLatencyBytes;
      break;
    case ReshardStep::Kind::AllToAll:
      cost += ring * bytes(cur) + kLatencyBytes;
      break;
    case ReshardStep::Kind::Distribute:
    case ReshardStep::Kind::Slice:
      // A local copy: cheap, but not free, so that layouts are not split for
      // nothing.
      cost += 0.05 * bytes(s.after);
      break;
    }
    cur = s.after;
  }
  return cost;
}

//===----------------------------------------------------------------------===//
// Layouts in the IR
//===----------------------------------------------------------------------===//

std::optional<Sharding> dt::layoutOfValue(Value value, const MeshInfo &mesh) {
  auto result = dyn_cast<OpResult>(value);
  if (!result)
    return std::nullopt;
  auto layouts = result.getOwner()->getAttrOfType<ArrayAttr>(layout::kResults);
  if (!layouts || layouts.size() <= result.getResultNumber())
    return std::nullopt;
  auto attr = dyn_cast<ShardingAttr>(layouts[result.getResultNumber()]);
  if (!attr)
    return std::nullopt;
  FailureOr<Sharding> s = Sharding::fromAttr(
      attr, mesh, [&] { return result.getOwner()->emitError(); });
  if (failed(s))
    return std::nullopt;
  return *s;
}

void dt::setResultLayouts(Operation *op, ArrayRef<Sharding> layouts,
                          const MeshInfo &mesh) {
  SmallVector<Attribute> attrs;
  for (const Sharding &s : layouts)
    attrs.push_back(s.toAttr(op->getContext(), mesh));
  op->setAttr(layout::kResults, ArrayAttr::get(op->getContext(), attrs));
}

FailureOr<Sharding> dt::storageLayout(GlobalOp global, const MeshInfo &mesh) {
  if (!global.getSharding())
    return Sharding::replicated(global.getGlobalTensorType().getRank());
  return Sharding::fromAttr(*global.getSharding(), mesh,
                            [&] { return global.emitError(); });
}
