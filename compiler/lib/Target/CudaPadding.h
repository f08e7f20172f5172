//===- CudaPadding.h - 16-bit products computed on aligned extents -*- C++ -*-//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// cuBLAS's fast tensor-core kernels want every matrix's contiguous extent to
// be a multiple of 16 bytes. GPT-2's vocabulary is 50 257 wide, and on an
// H200 its products run at a fifth of the speed they reach at 50 264
// (bench/results/gpu-2026-11-28b-h200.md: 13.3 ms against 1.85 ms for the
// logits). PyTorch's compiler pads such products for the same reason.
//
// A 16-bit product of one batch computes with n or k rounded up to 8 where
// the buffers allow it without a copy:
//
//   - n (the result's rows, always contiguous): the result's buffer lies in
//     rows a pitch apart (the memory plan's dt.pitch) at least that wide,
//     and B can be read that far: rows past its end in a narrowed widening's
//     buffer (an f32 buffer holding 16-bit values in its first half) or in
//     a buffer the memory plan gave room for them (a kept weight copy's:
//     `dt.rows`), or columns under its own pitch. The extra columns of the
//     result hold whatever the extra rows of B held; nothing reads them (a
//     pitch's columns are never read).
//   - k (contiguous in A unless A is transposed, in B if B is): both
//     operands can be read that far, the same way, and their extra rows or
//     columns are zeroed right before the product, so the extra terms add
//     exactly nothing (0 x 0; garbage could hold an inf, and 0 x inf is a
//     NaN).
//
// The zeroed bytes lie in the operand's own buffer, past its values: the
// memory plan gives no one else those bytes while the operand lives.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_CUDAPADDING_H
#define DT_TARGET_CUDAPADDING_H

#include "CudaZeroCopy.h"

#include "dt/Dialect/DT/IR/DTOps.h"

#include <array>
#include <optional>

namespace dt {

/// The extents and layout a padded product runs with.
struct ProductPadding {
  /// The n and k cuBLAS computes with (the product's own where unpadded).
  int64_t n = 0, k = 0;
  /// A's, B's and C's row pitches in elements, always given (the packed
  /// widths where the plan had none), so that none is read off n or k.
  std::array<int64_t, 3> ld{};
  /// Bytes to zero before the product: {offset, width, rows, pitch}, rows
  /// of `width` bytes `pitch` apart from arena offset `offset`.
  llvm::SmallVector<std::array<int64_t, 4>, 2> zeros;
};

/// How product `m` (a dt.matmul of 16-bit operands, one batch) can run on
/// aligned extents given where the GPU plan reads and writes it (`zero`),
/// or nothing when it need not or cannot. `narrowed`: the module's narrowed
/// widenings.
std::optional<ProductPadding>
padProduct(MatmulOp m, const ZeroCopies &zero,
           const llvm::DenseSet<mlir::Operation *> &narrowed);

} // namespace dt

#endif // DT_TARGET_CUDAPADDING_H
