//===- Layouts.h - What the sharding passes share ---------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The vocabulary of dt-shard-propagation and dt-spmd-partition: layouts of
// values as the IR records them, factor assignments (mesh axes per factor of
// an op's ShardingRule) and their reading as operand and result layouts, and
// resharding plans (the collectives between two layouts) with their cost.
// Propagation prices plans; the partitioner emits the same plans, so what is
// chosen is what runs.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_SHARDING_LAYOUTS_H
#define DT_TRANSFORMS_SHARDING_LAYOUTS_H

#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"

#include "mlir/IR/BuiltinOps.h"

namespace dt {

/// Attribute names of the sharding passes.
namespace layout {
/// On an op: one #dt.shard per result.
inline constexpr llvm::StringLiteral kResults = "dt.sharding";
/// On an op: one #dt.shard per operand, where some operand is needed in
/// another layout than it has (a reshard point).
inline constexpr llvm::StringLiteral kOperands = "dt.operand_shardings";
/// On a collective: the value it moves, for run-time messages.
inline constexpr llvm::StringLiteral kWhat = "dt.what";
} // namespace layout

/// How one factor of a rule is split: over `axes`, each of `blocks` blocks of
/// it separately (see #dt.shard).
struct FactorSplit {
  AxisList axes;
  int64_t blocks = 1;

  bool isSplit() const { return !axes.empty(); }
  bool operator==(const FactorSplit &o) const {
    return axes == o.axes && (axes.empty() || blocks == o.blocks);
  }
};
using FactorAssignment = llvm::SmallVector<FactorSplit, 6>;

/// The factor of `dims` (one dimension's factors, major first) that `layout`
/// splits, and how, when the layout is such a split. Fails for a layout no
/// factor split describes (e.g. `dims` = (b, t) split over more ranks than b
/// has). `allowPadding` accepts uneven splits of a dimension of one factor.
struct DimReading {
  /// -1: the dimension is not split.
  int64_t factor = -1;
  FactorSplit split;
};
std::optional<DimReading> readDim(const DimSharding &layout,
                                  llvm::ArrayRef<int64_t> dims,
                                  const ShardingRule &rule,
                                  const MeshInfo &mesh, bool allowPadding);

/// The layout of the dimension made of `dims` under `assignment`, or nullopt
/// when two of its factors are split.
std::optional<DimSharding> layoutOfDim(llvm::ArrayRef<int64_t> dims,
                                       const FactorAssignment &assignment,
                                       const ShardingRule &rule);

/// The layout (without partial sums) of a value whose dimensions are `dims`.
std::optional<Sharding> layoutOf(const ShardingRule::Dims &dims,
                                 const FactorAssignment &assignment,
                                 const ShardingRule &rule);

/// The axes over which result `index` is a partial sum because of split
/// factors it does not have (a contraction, a reduced dimension).
AxisList summedAxes(const ShardingRule &rule,
                    const FactorAssignment &assignment, unsigned index);

/// One step of a resharding plan.
struct ReshardStep {
  enum class Kind {
    /// Sum a partial value over `axes`.
    AllReduce,
    /// Sum over `axes` (one axis) and keep this rank's piece of `dim`.
    ReduceScatter,
    /// Join the pieces of `dim` over `axes` (its innermost axis).
    AllGather,
    /// Join the pieces of `dim` over `axes` (one axis, its innermost) and split
    /// `toDim` over it instead, in one exchange of blocks: what a gather and
    /// a slice do with 1/k of the traffic.
    AllToAll,
    /// Keep this rank's piece of `dim` (no communication).
    Slice,
    /// Make every rank's copy a summand over `axes`: divide it by their
    /// size (no communication).
    Distribute,
  };
  Kind kind;
  AxisList axes;
  int64_t dim = -1;
  /// AllToAll: the dimension the axis splits afterwards.
  int64_t toDim = -1;
  /// The layout after the step.
  Sharding after;
};

/// A resharding plan: its steps in order (rarely more than two).
using ReshardPlan = llvm::SmallVector<ReshardStep, 2>;

/// The steps that turn `from` into `to` for a tensor of `shape`: sums of
/// partial axes `to` does not keep (a reduce-scatter when the summed axis
/// then splits a dimension), gathers of axes `to` does not split that way (an
/// all-to-all when `to` splits another dimension by the axis next, evenly),
/// slices for the new splits, and a division where `to` is a partial sum over
/// axes `from` is whole over.
llvm::FailureOr<ReshardPlan>
planReshard(const Sharding &from, const Sharding &to,
            llvm::ArrayRef<int64_t> shape, const MeshInfo &mesh);

/// What a plan costs one rank: bytes it sends or receives (a ring's volume)
/// plus, per collective, the latency of `kLatencyBytes`; slices cost a copy's
/// fraction. Infinite when no plan exists.
double reshardCost(const Sharding &from, const Sharding &to,
                   llvm::ArrayRef<int64_t> shape, mlir::Type elementType,
                   const MeshInfo &mesh);
inline constexpr double kLatencyBytes = 8192;

/// Bytes per element of a tensor element type.
int64_t elementBytes(mlir::Type type);

/// The ranked tensor type of a value of the dt dialect (all of them are).
inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

/// The layout a value has in a propagated program (its producer's
/// `dt.sharding`), or nullopt.
std::optional<Sharding> layoutOfValue(mlir::Value value, const MeshInfo &mesh);
/// Records `layouts` as `op`'s result layouts.
void setResultLayouts(mlir::Operation *op, llvm::ArrayRef<Sharding> layouts,
                      const MeshInfo &mesh);
/// The storage layout of `global` (replicated when it has none).
mlir::FailureOr<Sharding> storageLayout(GlobalOp global, const MeshInfo &mesh);

} // namespace dt

#endif // DT_TRANSFORMS_SHARDING_LAYOUTS_H
