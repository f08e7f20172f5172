//===- Shape.h - Symbolic tensor shapes and their rules ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A tensor's shape during checking: symbolic dimensions, optionally after a
// leading "any number of dims" variable (the `...` of `f32[..., in]`), or an
// unknown rank when generic checking cannot say (nothing is then reported
// about it). The NumPy broadcasting and matrix-product rules live here, once:
// both generic checks and concrete traces use them.
//
//===----------------------------------------------------------------------===//

#ifndef DT_LIB_SEMA_SHAPE_H
#define DT_LIB_SEMA_SHAPE_H

#include "SymExpr.h"

#include "dt/Sema/Types.h"

namespace dt::sema {

/// A shape: `[...E, d0, d1]`, `[d0, d1]`, or of unknown rank.
struct Shape {
  bool unknownRank = false;
  /// The leading dims variable, or -1.
  int ellipsis = -1;
  /// The dims after the ellipsis (all dims when there is none).
  llvm::SmallVector<SymExpr, 4> dims;

  static Shape unknown() {
    Shape s;
    s.unknownRank = true;
    return s;
  }
  static Shape scalar() { return Shape(); }
  /// Whether the rank is known (no ellipsis, not unknown).
  bool hasRank() const { return !unknownRank && ellipsis < 0; }
  size_t getRank() const { return dims.size(); }
  /// The concrete shape, when every dim is a constant.
  std::optional<llvm::SmallVector<int64_t, 4>> getConcrete() const;
};

/// `[B, T, 768]`, `[..., in]`, `[?]`.
std::string str(const Shape &shape, const SymContext &syms);
/// `f32[B, 256]`.
std::string str(DType dtype, const Shape &shape, const SymContext &syms);

/// The NumPy broadcast of `a` and `b`. On a provable mismatch returns
/// nullopt and sets `mismatch` to the offending dims of a and b.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b,
                                     SymContext &syms,
                                     std::pair<SymExpr, SymExpr> *mismatch);

/// The result of `a @ b` (NumPy matmul). Sets `error` to a message and returns
/// nullopt on a provable mismatch.
std::optional<Shape> matmulShape(const Shape &a, const Shape &b,
                                 SymContext &syms, std::string &error);

/// The dims of `shape` as written, with `...` spelled out for an ellipsis.
std::string dimsStr(const Shape &shape, const SymContext &syms);

} // namespace dt::sema

#endif // DT_LIB_SEMA_SHAPE_H
