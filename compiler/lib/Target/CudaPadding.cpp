//===- CudaPadding.cpp - 16-bit products computed on aligned extents ------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "CudaPadding.h"

#include "dt/Transforms/Passes.h"
#include "dt/Transforms/ZeroCopyInfo.h"

using namespace mlir;

namespace dt {

namespace {

/// 16 bytes of 16-bit elements.
constexpr int64_t kAlign = 8;

int64_t roundUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

/// An operand as the GPU reads it: a row-major matrix of 16-bit values.
struct Operand {
  int64_t offset, rows, cols;
  /// The row pitch, in elements: the plan's, else the packed width.
  int64_t ld;
  /// Whether rows a pitch apart are laid out (columns past `cols` exist).
  bool pitched;
  /// The bytes of its buffer (a narrowed widening's: f32-sized, 16-bit
  /// values in the first half; a region's with room for rows), or 0 when
  /// nothing past its values is its.
  int64_t room;

  bool canGrowRows(int64_t to) const { return 2 * to * ld <= room; }
  bool canGrowCols(int64_t to) const { return pitched && to <= ld; }
  std::array<int64_t, 4> zeroRows(int64_t to) const {
    int64_t width = 2 * (to - rows) * ld;
    return {offset + 2 * rows * ld, width, 1, width};
  }
  std::array<int64_t, 4> zeroCols(int64_t to) const {
    return {offset + 2 * cols, 2 * (to - cols), rows, 2 * ld};
  }
};

Operand operandOf(Value operand, const ZeroCopies &zero,
                  const llvm::DenseSet<Operation *> &narrowed) {
  auto shape = llvm::cast<RankedTensorType>(operand.getType()).getShape();
  Value read = zero.readFrom(operand);
  Operand o;
  o.offset = plannedOffset(read);
  o.rows = shape[shape.size() - 2];
  o.cols = shape.back();
  int64_t pitch = zero.pitchOf(read);
  o.pitched = pitch != 0;
  o.ld = pitch ? pitch : o.cols;
  // Read where a narrowed widening wrote it: its buffer is f32-sized and
  // holds no one else's bytes while the product reads it. Or where a region
  // wrote it whose buffer the memory plan gave room for rows (a kept weight
  // copy: ZeroCopyCandidates::rowRooms).
  Operation *def = viewRoot(read).getDefiningOp();
  auto f32 = llvm::cast<RankedTensorType>(viewRoot(read).getType());
  o.room = 0;
  if (def && narrowed.contains(def) && !zero.bypassed.count(def) &&
      f32.getElementType().isF32())
    o.room = f32.getNumElements() * 4;
  else if (def && def->hasAttr(kRowsAttr) && !o.pitched)
    o.room = plannedBytes(read);
  return o;
}

} // namespace

std::optional<ProductPadding>
padProduct(MatmulOp m, const ZeroCopies &zero,
           const llvm::DenseSet<Operation *> &narrowed) {
  auto c = llvm::cast<RankedTensorType>(m.getResult().getType()).getShape();
  if (c.size() != 2 || !narrowedOperands(m, narrowed))
    return std::nullopt;
  bool ta = m.getTransposeLhs(), tb = m.getTransposeRhs();
  Operand a = operandOf(m.getLhs(), zero, narrowed),
          b = operandOf(m.getRhs(), zero, narrowed);
  int64_t n = c[1], k = ta ? a.rows : a.cols;
  // The result: a 16-bit narrowing's buffer, in rows a pitch apart, or f32
  // sums packed.
  Operation *narrowing = zero.narrowingOf(m.getResult());
  int64_t ldc = narrowing ? zero.pitchOf(narrowing->getResult(0)) : 0;

  ProductPadding pad;
  pad.n = n;
  pad.k = k;
  // n: contiguous in C (and in B unless B is transposed).
  int64_t n8 = roundUp(n);
  if (n8 != n && ldc >= n8 &&
      (tb ? b.canGrowRows(n8) : b.canGrowCols(n8)))
    pad.n = n8;
  // k: contiguous in A unless A is transposed, and in B if B is. Worth it
  // only where it is some operand's contiguous extent.
  int64_t k8 = roundUp(k);
  if (k8 != k && (!ta || tb) && (ta ? a.canGrowRows(k8) : a.canGrowCols(k8)) &&
      (tb ? b.canGrowCols(k8) : b.canGrowRows(k8))) {
    pad.k = k8;
    pad.zeros.push_back(ta ? a.zeroRows(k8) : a.zeroCols(k8));
    pad.zeros.push_back(tb ? b.zeroCols(k8) : b.zeroRows(k8));
  }
  if (pad.n == n && pad.k == k)
    return std::nullopt;
  pad.ld = {a.ld, b.ld, ldc ? ldc : n};
  return pad;
}

} // namespace dt
