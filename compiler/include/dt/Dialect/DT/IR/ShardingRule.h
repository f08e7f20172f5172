//===- ShardingRule.h - How an op's dimensions may be split -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Every dt op that computes describes its dimensions in *factors*, as
// OpenXLA's Shardy does: a matmul `[m, k] x [k, n] -> [m, n]` has factors m, n
// and k; its operands' and result's dimensions are lists of factors. Sharding
// propagation chooses mesh axes per factor, which fixes the layout of every
// operand and result at once, and the partitioner clones the op on local
// shapes. A factor split over axes that a result does not have makes that
// result a partial sum over those axes (k above: one all-reduce later).
//
// A dimension lists several factors, major first, when it is a product of
// others: `reshape [b, t, c] -> [b * t, c]` maps result dim 0 to (b, t), and
// `split [.., 3 * c] -> 3 x [.., c]` maps the operand's last dim to (3, c),
// whose layout `3 x tp` splits every piece over tp (#dt.shard's blocks).
//
//===----------------------------------------------------------------------===//

#ifndef DT_DIALECT_DT_IR_SHARDINGRULE_H
#define DT_DIALECT_DT_IR_SHARDINGRULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace dt {

struct ShardingRule {
  enum class FactorKind {
    /// May be split over any axes. A result without the factor is a partial
    /// sum over them, so only sums may leave a factor out of a result.
    Free,
    /// Must stay whole: a softmax axis, a layer norm's features, an
    /// attention's sequence, the rows of a table read by ids.
    Whole,
    /// Positions the op averages over (cross-entropy's): may be split, and
    /// the partitioner then divides by the count over all ranks.
    Mean,
    /// Classes of logits (cross-entropy's, arg-max's): may be split, and the
    /// partitioner then combines the ranks' statistics of their classes (a
    /// vocabulary-parallel cross-entropy). A result without the factor is
    /// whole, not a partial sum.
    Combined,
  };
  struct Factor {
    int64_t size;
    FactorKind kind;
    /// Whether it may be split into padded shards (an uneven vocabulary): the
    /// op's kernels mask the padding, or dt-spmd-partition proves it zero
    /// where it is summed. Elementwise ops take padding in every factor.
    bool uneven = false;
  };
  /// What an op does with operands that are partial sums.
  enum class Linearity {
    /// It needs their sums first.
    None,
    /// It is linear in its listed operands together (add, reshape): the
    /// result is partial when every listed operand is, over the same axes.
    Joint,
    /// It is linear in each listed operand alone (mul, matmul): one of them
    /// may be partial.
    Separate,
  };
  /// A dimension: its factors, major first; none for a size-1 dimension that
  /// broadcasts (never split).
  using Dim = llvm::SmallVector<int64_t, 2>;
  using Dims = llvm::SmallVector<Dim, 4>;

  llvm::SmallVector<Factor, 6> factors;
  llvm::SmallVector<Dims, 4> operands;
  llvm::SmallVector<Dims, 2> results;
  Linearity linearity = Linearity::None;
  /// One entry per operand: whether a partial sum may pass through it.
  llvm::SmallVector<bool, 4> linearOperands;

  /// A new factor; returns its index.
  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::Free,
                    bool uneven = false) {
    factors.push_back({size, kind, uneven});
    return factors.size() - 1;
  }
  /// One factor per dimension of `shape`: the elementwise pattern.
  Dims addFactors(llvm::ArrayRef<int64_t> shape,
                  FactorKind kind = FactorKind::Free) {
    Dims dims;
    for (int64_t size : shape)
      dims.push_back({addFactor(size, kind)});
    return dims;
  }
  /// Marks every operand as linear in the `kind` way.
  void setLinear(Linearity kind, llvm::ArrayRef<bool> which) {
    linearity = kind;
    linearOperands.assign(which.begin(), which.end());
  }
  bool isLinearIn(unsigned operand) const {
    return linearity != Linearity::None && operand < linearOperands.size() &&
           linearOperands[operand];
  }
};

} // namespace dt

#endif // DT_DIALECT_DT_IR_SHARDINGRULE_H
