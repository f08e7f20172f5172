//===- ArenaPlan.h - the memory plan in lowered code ------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// convert-dt-to-kernels erases the dt ops that carried dt-plan-memory's
// offsets; what the arena checks need of the plan survives as two attributes:
//
//   dt.plan   = array<i64: off, bytes, ...>  on each lowered entry point:
//               every buffer of its plan (globals and computed values);
//   dt.buffer = array<i64: off, bytes>       on each memref.view and
//               llvm.getelementptr of the arena: the buffer it is meant to
//               address.
//
// The addresses themselves (a view's shift, a GEP's index) are made
// separately, so dt-verify-arena can compare what the code does with what the
// plan says.
//
//===----------------------------------------------------------------------===//

#ifndef DT_CONVERSION_ARENAPLAN_H
#define DT_CONVERSION_ARENAPLAN_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <optional>

namespace dt {

inline constexpr llvm::StringLiteral kPlanAttr = "dt.plan";
inline constexpr llvm::StringLiteral kBufferAttr = "dt.buffer";
/// On a loop outlined from an entry point to run on the kernels' thread pool,
/// `func(%arena, %begin, %end)`: the n of its [0, n), which holds every range
/// [begin, end) it is called with.
inline constexpr llvm::StringLiteral kParallelRangeAttr = "dt.parallel_range";

/// Bytes [offset, offset + bytes) of the arena.
struct ArenaSpan {
  int64_t offset = 0, bytes = 0;

  int64_t end() const { return offset + bytes; }
  /// Whether `inner` lies inside this span (an empty span anywhere inside or
  /// at the end counts).
  bool contains(const ArenaSpan &inner) const {
    return inner.offset >= offset && inner.bytes >= 0 &&
           inner.offset <= end() && inner.bytes <= end() - inner.offset;
  }
};

/// The bytes of a statically shaped memref of scalars (what a view of the
/// arena covers), or nullopt for any other memref or on overflow.
inline std::optional<int64_t> staticBytes(mlir::MemRefType type) {
  if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bytes = (type.getElementTypeBitWidth() + 7) / 8;
  for (int64_t d : type.getShape())
    if (llvm::MulOverflow(bytes, d, bytes))
      return std::nullopt;
  return bytes;
}

/// The buffer `op` is tagged with (dt.buffer), if any.
inline std::optional<ArenaSpan> getBufferTag(mlir::Operation *op) {
  auto tag = op->getAttrOfType<mlir::DenseI64ArrayAttr>(kBufferAttr);
  if (!tag || tag.size() != 2)
    return std::nullopt;
  return ArenaSpan{tag[0], tag[1]};
}

/// The buffers of the plan recorded on entry point `fn` (dt.plan), or nullopt
/// when it has none.
inline std::optional<llvm::SmallVector<ArenaSpan>>
getPlan(mlir::Operation *fn) {
  auto plan = fn->getAttrOfType<mlir::DenseI64ArrayAttr>(kPlanAttr);
  if (!plan || plan.size() % 2 != 0)
    return std::nullopt;
  llvm::SmallVector<ArenaSpan> spans;
  for (int64_t i = 0; i < plan.size(); i += 2)
    spans.push_back({plan[i], plan[i + 1]});
  return spans;
}

/// The n of an outlined parallel loop's [0, n) (dt.parallel_range), or
/// nullopt for an entry point.
inline std::optional<int64_t> getParallelRange(mlir::Operation *fn) {
  auto n = fn->getAttrOfType<mlir::IntegerAttr>(kParallelRangeAttr);
  if (!n)
    return std::nullopt;
  return n.getInt();
}

} // namespace dt

#endif // DT_CONVERSION_ARENAPLAN_H
