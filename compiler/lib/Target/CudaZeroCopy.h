//===- CudaZeroCopy.h - conversions a GPU plan leaves out -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A mixed-precision program converts around every product: its 16-bit
// activations are widened to f32 for the product, and the product's f32
// result is narrowed back. On the CPU those are real passes; on a GPU,
// whose products take 16-bit operands and may write a 16-bit result
// (cuBLAS's GemmEx), two kinds are pure copies the plan can leave out:
//
//   - a narrowed widening (narrowedWidenings) that only converts a planned
//     16-bit tensor: its products read that tensor where it lies; and so
//     does the loss (cross_entropy and its gradient), which reads 16-bit
//     logits as well;
//   - a narrowing that only converts a 16-bit product's f32 result to the
//     operands' type, right after it: the product writes its result in
//     that type straight into the narrowing's buffer; as does the loss's
//     gradient, narrowed to any 16-bit type.
//
// Attention on bf16 values (the bf16 tensor-core kernels) takes both kinds
// too, all its inputs or none (typedIn), all its results or none: Q, K, V
// (and dO) where their widenings' bf16 sources lie, and O (or dQ, dK, dV)
// as bf16 in the narrowings' buffers, for the head widths the typed kernels
// take (typedAttentionWidth) and 16-byte aligned buffers. Its kernels take
// strides as well, so two more kinds go: the head merge after a narrowed
// result (a transpose of [B, H, T, D] to [B, T, H, D]), whose buffer the
// kernel writes with [B, T, H, D] strides (and the concat of dQ, dK and dV
// after their merges, whose buffer they go to directly), and the head split
// before dO (or Q, K, V), whose input the kernel reads untransposed; and when
// Q, K and V are pieces of one split along the last axis (GPT-2's qkv
// product), that split too: the kernels read each piece where the product
// wrote it, in rows as wide as the product's. A gradient takes the
// forward's O back: where the merge's buffer holds it, with the same strides,
// when the forward wrote it there.
//
// A narrowed product whose GELU, or GELU's gradient, the region right after
// it computes (dt-fuse-epilogues) computes it in cuBLASLt's epilogue
// instead: the activation and the pre-activation that backward reads
// (GELU_AUX), or the gradient from that pre-activation (DGELU), in the
// region's buffers; the region and the product's f32 sums go.
//
// The candidates come from dt/Transforms/ZeroCopyInfo.h, by the ops alone.
// The memory plan placed buffers for the CPU's order of reads and writes, so
// each is taken only where the plan proves it safe: nothing between the
// widening and its last product writes over the tensor (nor does the product
// itself), and the narrowing's buffer overlaps none of the product's
// operands. A program compiled with GPU code plans its memory so that these
// hold (dt-plan-memory's gpu-zero-copies); this check keeps every plan
// honest. In GPT-2 124M these are the passes over the 16384 x 50257 logits,
// the widened activations before each product and attention's inputs and
// results.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TARGET_CUDAZEROCOPY_H
#define DT_TARGET_CUDAZEROCOPY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <array>
#include <utility>

namespace dt {

/// Bytes [first, second) of the arena.
using ArenaRange = std::pair<int64_t, int64_t>;

/// The arena bytes that planned value `v`'s buffer spans (with the room of
/// a row pitch the memory plan gave it), and whether two ranges overlap.
ArenaRange arenaRangeOf(mlir::Value v);
inline bool overlap(ArenaRange a, ArenaRange b) {
  return a.first < b.second && b.first < a.second;
}

/// Where bf16 attention reads an input or writes a result with strides: in
/// the buffer of `at`, `offset` elements in, slice s (of batch b = s /
/// heads, head h = s % heads) at b * batch + h * head, its rows `row` apart
/// (`layout`: {heads, batch, head, row}, the kernels' dtk_attention_layout).
struct Strided {
  mlir::Value at;
  int64_t offset = 0;
  std::array<int64_t, 4> layout{};
};

struct ZeroCopies {
  /// Widening -> the 16-bit tensor it converts.
  llvm::DenseMap<mlir::Operation *, mlir::Value> bypassed;
  /// A product's (loss gradient's, attention's) result -> the narrowing
  /// the op writes it into.
  llvm::DenseMap<mlir::Value, mlir::Operation *> narrowedInto;
  llvm::DenseSet<mlir::Operation *> narrowings;
  /// Attention ops that read every input as bf16 where it lies.
  llvm::DenseSet<mlir::Operation *> typedIn;
  /// A head split's result (attention's dO, bf16), or a forward's narrowed
  /// O that its gradient reads back -> where attention reads it instead:
  /// the split's input, or the merge's buffer the forward wrote O into.
  llvm::DenseMap<mlir::Value, Strided> readStrided;
  /// An attention result -> where attention writes it with strides instead
  /// of its narrowing's buffer: its head merge's, or their concat's.
  llvm::DenseMap<mlir::Value, Strided> writtenStrided;
  /// The head splits, merges and concats that those leave out.
  llvm::DenseSet<mlir::Operation *> merged;
  /// 16-bit tensors whose rows lie a pitch apart, in elements (the memory
  /// plan's dt.pitch): narrowings that a product or the loss's gradient
  /// writes into and that only products and the loss read (GPT-2's logits
  /// and their gradient).
  llvm::DenseMap<mlir::Value, int64_t> pitched;
  /// A narrowed product -> the region after it whose results its GELU
  /// epilogue writes (ZeroCopyCandidates::Epilogue): the region launches
  /// nothing, and the product's f32 sums are never written.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> epilogues;
  llvm::DenseSet<mlir::Operation *> epilogueRegions;

  /// A narrowed weight gradient's product -> the region after it whose
  /// sums of the product's A (its bias's gradient) the product's BGRADB
  /// epilogue writes (ZeroCopyCandidates::BiasGrad): the region launches
  /// nothing (it is among epilogueRegions).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> biasGrads;

  /// The region whose results product `op`'s GELU epilogue writes, or null.
  mlir::Operation *epilogueOf(mlir::Operation *op) const {
    return epilogues.lookup(op);
  }
  /// The region whose sums product `op`'s BGRADB epilogue writes, or null.
  mlir::Operation *biasGradOf(mlir::Operation *op) const {
    return biasGrads.lookup(op);
  }

  /// The row pitch of `v`'s rows (through reshapes), or 0: packed.
  int64_t pitchOf(mlir::Value v) const;

  /// The narrowing `result`'s op writes it into, or null.
  mlir::Operation *narrowingOf(mlir::Value result) const {
    return narrowedInto.lookup(result);
  }

  /// Whether `op` launches nothing.
  bool skips(mlir::Operation *op) const {
    return bypassed.count(op) || narrowings.contains(op) ||
           merged.contains(op) || epilogueRegions.contains(op);
  }
  /// Where a product reads operand `v`: the tensor a bypassed widening
  /// converts, else `v` itself.
  mlir::Value readFrom(mlir::Value v) const;

  /// The zero copies of entry point `fn` (planned), given the module's
  /// narrowed widenings.
  static ZeroCopies find(mlir::func::FuncOp fn,
                         const llvm::DenseSet<mlir::Operation *> &narrowed);
};

} // namespace dt

#endif // DT_TARGET_CUDAZEROCOPY_H
