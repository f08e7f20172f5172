//===- ZeroCopyInfo.h - conversions a GPU can do without --------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A mixed-precision program converts around every product, attention, layer
// norm and loss: its 16-bit activations are widened to f32 for them, and
// their f32 results are narrowed back. On the CPU those are real passes. A
// GPU's products, bf16 attention kernels, layer norm and loss kernels read
// and write 16-bit values themselves, so there two kinds of conversion are
// pure copies:
//
//   - a widening whose readers can all read its 16-bit source instead;
//   - a narrowing right after such an op, which the op can write straight
//     into.
//
// This header finds them from the program's ops alone. Whether a GPU plan
// takes one also depends on where the memory plan put the buffers
// (dt/Target's CudaZeroCopy proves that it is safe): the widening's source
// must survive until its last reader, and a narrowing's buffer must not
// overlap what its op reads. dt-plan-memory with `gpu-zero-copies` keeps
// those buffers alive that long, so that the proof succeeds.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_ZEROCOPYINFO_H
#define DT_TRANSFORMS_ZEROCOPYINFO_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace dt {

/// The 16-bit type (bf16, f16) whose values `v` holds widened to f32, or
/// null: through reshapes, `v` is a result of an elementwise dt.fused whose
/// yielded value is a dt.convert from that type, which is how a
/// mixed-precision program feeds its products and attention.
mlir::Type widenedFrom(mlir::Value v);

/// The widenings whose kernels store the 16-bit values instead: a
/// non-reducing dt.fused of one f32 result that yields a dt.convert from
/// bf16 or f16, every use of which (through reshapes) is an operand of a
/// product whose other operand is such a widening of the same type. The
/// product then multiplies the 16-bit values on tensor cores (exact, f32
/// sums: cuBLAS's GemmEx), and the f32 copy is never written: the 16-bit
/// values sit at the start of its buffer.
llvm::DenseSet<mlir::Operation *> narrowedWidenings(mlir::ModuleOp module);

/// The 16-bit type both operands of product `op` have in narrowed
/// widenings, or null.
mlir::Type narrowedOperands(mlir::Operation *op,
                            const llvm::DenseSet<mlir::Operation *> &narrowed);

/// Whether the bf16 attention kernels take heads `d` wide with bf16 inputs
/// or results (kernels/cuda/attention_bf16.cu's withTypedWidth).
inline bool typedAttentionWidth(int64_t d) {
  return d == 32 || d == 64 || d == 128;
}

/// The operands of attention (or its gradient) `op` that hold activations:
/// all but the gradient's log-sum-exp, which is f32 whatever the program's
/// precision.
llvm::SmallVector<mlir::Value> activationOperands(mlir::Operation *op);

/// Whether attention (or its gradient) `op` can run on the bf16 kernels
/// reading and writing bf16: every input widened from bf16, heads of a
/// width those kernels take.
bool typedAttentionCapable(mlir::Operation *op);

/// Whether `user` can read `v`, a widening's result, as the 16-bit data it
/// widens, wherever it reads it: the loss's logits, the layer and RMS norms'
/// x, their gradients' x and dy.
bool readsSixteenBit(mlir::Operation *user, mlir::Value v);

/// Whether `v` is a result that its op's kernel can write as 16-bit data of
/// either type, for a narrowing after it: the loss's gradient, the layer and
/// RMS norms' y and their gradients' dx. (A product's and bf16 attention's
/// results have conditions of their own: ZeroCopyCandidates.)
bool writesSixteenBit(mlir::Value v);

/// The zero copies an entry point could have on a GPU, judged by its ops
/// alone (no offsets).
struct ZeroCopyCandidates {
  /// Widenings whose readers could all read the 16-bit source: those of
  /// narrowed products or of ops that readsSixteenBit (`forReaders`), and
  /// those that only bf16 attention reads, all of an attention's inputs or
  /// none (`forAttention`).
  llvm::SmallVector<mlir::Operation *> forReaders, forAttention;
  /// An op (a narrowed product, bf16 attention, the loss's gradient, the
  /// layer norm or its gradient) and the narrowings that it could write its
  /// results into, one per result it writes so (all of attention's; the
  /// first of the others').
  struct Writer {
    mlir::Operation *op;
    llvm::SmallVector<std::pair<mlir::Value, mlir::Operation *>> into;
    /// For bf16 attention, which writes with strides: per result (as
    /// `into`), the head merge (isHeadTranspose) that reads its narrowing
    /// (alone, or with `savedReads`), which the kernels could write into
    /// instead; empty unless
    /// every result has one. And `concat`, when the merges' results are
    /// all the inputs of one concat along the last dimension that alone
    /// reads them (dQ, dK and dV back into one [B, T, 3C] gradient): the
    /// kernels could write into that directly.
    llvm::SmallVector<mlir::Operation *> merges;
    mlir::Operation *concat = nullptr;
    /// For a forward attention with a merge: the widenings of its narrowed
    /// O that only attention gradients read (as their `result`). On the GPU
    /// they read O where the merge's buffer holds it, so that buffer must
    /// live until they run.
    llvm::SmallVector<mlir::Operation *> savedReads;
  };
  llvm::SmallVector<Writer> writers;
  /// Head splits (isHeadTranspose) whose result only forAttention widenings
  /// read, for one bf16 attention: it could read the split's input, a
  /// [B, T, H, D] tensor, with strides (attention's dO).
  llvm::SmallVector<mlir::Operation *> headReads;
  /// Splits of a bf16 tensor along its last axis whose results only
  /// headReads splits read (GPT-2's Q, K and V out of the [B, T, 3C] qkv
  /// product): attention could read each piece where the split's input
  /// holds it, its rows as wide as the input's, and the split would copy
  /// nothing (a pass over the product's result a layer).
  llvm::SmallVector<mlir::Operation *> splitReads;
  /// Narrowed products whose GELU (or GELU's gradient) the region right
  /// after them computes from their f32 sums (geluEpilogueOf): cuBLASLt's
  /// epilogue could write the region's results instead, and the product's
  /// f32 sums and the region's launch would go.
  struct Epilogue {
    mlir::Operation *product, *region;
    bool grad;
  };
  llvm::SmallVector<Epilogue> epilogues;
  /// Narrowed products whose A (transposed) the region right after them
  /// sums over k into f32 (sumsProductRows: a weight gradient's product and
  /// its bias's gradient): cuBLASLt's BGRADB epilogue could write the
  /// region's result beside the product, and the region's pass over A
  /// would go.
  struct BiasGrad {
    mlir::Operation *product, *region;
  };
  llvm::SmallVector<BiasGrad> biasGrads;
  /// Narrowings that a product of one batch or the loss's gradient could
  /// write into whose 16-bit rows, 64 elements or more, are not a multiple
  /// of 16 bytes (GPT-2's logits and their gradient, 50 257 wide), with a
  /// row pitch, in
  /// elements, that makes them so: cuBLAS's fast kernels need aligned rows
  /// (and so does the loss's kernel to read them fast). The memory plan
  /// gives their buffers room for the pitch (`dt.pitch` on the narrowing);
  /// a GPU plan lays the rows out so where every launch that touches them
  /// can (CudaZeroCopy).
  llvm::SmallVector<std::pair<mlir::Operation *, int64_t>> pitches;
  /// 16-bit matrices, written by a region, that products alone read
  /// (through widenings they leave out) and whose rows, 64 or more, are not
  /// a multiple of 8, with that count rounded up: a kept weight copy, GPT-2's
  /// 50 257 rows of its tied table. A product padded to 16-byte extents reads
  /// rows past its end and zeroes them (dt/Target's CudaPadding.h). The
  /// memory plan gives their buffers room for those rows (`dt.rows` on the
  /// region).
  llvm::SmallVector<std::pair<mlir::Operation *, int64_t>> rowRooms;

  static ZeroCopyCandidates
  find(mlir::func::FuncOp fn,
       const llvm::DenseSet<mlir::Operation *> &narrowed);
};

/// `v` = dt.convert(x) to `element`'s type (in a region's body): x, or null.
mlir::Value unconvert(mlir::Value v, mlir::Type element);

/// The region that reads product `op`'s f32 sums, its only reader, to
/// compute what cuBLASLt's GELU epilogues do, as dt-fuse-epilogues leaves it
/// in a mixed-precision program, or null:
///
///   - fused(p) { narrow(p), narrow(gelu(p)) }: the pre-activation, which
///     backward reads, and the activation (CUBLASLT_EPILOGUE_GELU_AUX);
///   - fused(p, pre) { narrow(p * gelu_deriv(widen(pre))) }, `op` a
///     dt.matmul and `pre` 16-bit: GELU's gradient (CUBLASLT_EPILOGUE_DGELU,
///     `grad`).
///
/// Both narrow to one 16-bit type, and `op`'s result is a matrix.
mlir::Operation *geluEpilogueOf(mlir::Operation *op, bool &grad);

/// The 16-bit tensor whose widened values region `r` sums over every axis
/// but the last into f32 (a bias's gradient in a mixed-precision program:
/// the column sums of dY), or null.
mlir::Value summedRows(mlir::Operation *r);

/// Whether region `r` sums rows (summedRows) that dt.matmul `p` reads,
/// through a widening and reshapes, as its transposed A (the weight's
/// gradient dY^T x): `r`'s result is then the sums over k of op(A), one per
/// row of `p`'s result, which cuBLASLt's BGRADB epilogue computes beside the
/// product from the operand it reads anyway.
bool sumsProductRows(mlir::Operation *r, mlir::Operation *p);

/// Drops from `widenings` (of bf16, each read only by attention) those whose
/// attention takes some input from elsewhere, until none changes: attention
/// reads all its inputs as bf16 or none.
void keepWholeAttention(llvm::DenseSet<mlir::Operation *> &widenings);

/// The value that holds `v`'s bytes, through reshapes (which move none).
mlir::Value viewRoot(mlir::Value v);

/// Every reader of `v`, through reshapes.
void readersOf(mlir::Value v, llvm::SmallVectorImpl<mlir::Operation *> &users);

/// Whether `op` is a dt.fused that only widens a 16-bit tensor to f32.
bool isWidening(mlir::Operation *op);

/// Whether `op` is a transpose [0, 2, 1, 3] of a rank-4 tensor: attention's
/// head split ([B, T, H, D] to [B, H, T, D]) or merge (back).
bool isHeadTranspose(mlir::Operation *op);

/// The attribute of a narrowing whose buffer the memory plan gave room for
/// rows `pitch` elements apart (ZeroCopyCandidates::pitches).
inline constexpr llvm::StringLiteral kPitchAttr = "dt.pitch";

/// The attribute of a region whose result's buffer the memory plan gave
/// room for this many rows (ZeroCopyCandidates::rowRooms).
inline constexpr llvm::StringLiteral kRowsAttr = "dt.rows";

/// The bytes of `v`'s buffer as the memory plan sizes it (at least 1):
/// with room for a row pitch (kPitchAttr) or for rows (kRowsAttr) where its
/// op, through reshapes, carries one.
int64_t plannedBytes(mlir::Value v);

/// Whether the GPU kernel of `op` takes its 16-bit rows a pitch apart: a
/// product of one batch (cuBLAS's leading dimensions), the loss and its
/// gradient (the logits' and dlogits' rows).
bool takesRowPitch(mlir::Operation *op);

/// The bytes of `type`'s rows laid `pitch` elements apart.
int64_t pitchedBytes(mlir::RankedTensorType type, int64_t pitch);

} // namespace dt

#endif // DT_TRANSFORMS_ZEROCOPYINFO_H
