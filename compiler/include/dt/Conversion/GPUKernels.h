//===- GPUKernels.h - which planned ops become generated GPU kernels -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// convert-dt-fused-to-gpu generates one kernel per planned op that is
// elementwise or moves data (fused regions, transposes, splits and concats,
// slices and pads, sums over axes, iota, splat constants, the learning-rate
// schedule); libraries and kernels/cuda do the rest. The PTX emitter, the
// GPU plan (dt/Target/CudaPlan.h) and the tests that run kernels one by one
// must agree on which ops those are and what each kernel is called: this is
// where they do.
//
//===----------------------------------------------------------------------===//

#ifndef DT_CONVERSION_GPUKERNELS_H
#define DT_CONVERSION_GPUKERNELS_H

#include "dt/Transforms/ZeroCopyInfo.h" // widenedFrom, narrowedWidenings

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu

namespace dt {

class ScheduleOp;

/// Threads per block of every generated kernel's launch (the runtime's
/// KernelLibrary launches them so; docs/abi.md). A reduction's kernel sums
/// in workgroup memory of this many elements.
inline constexpr int64_t kGpuThreadsPerBlock = 256;

/// Elements a thread of an elementwise or copying kernel loads before it
/// stores any (FusedToGPU's gridLoopUnrolled), in kernels of at least
/// kGpuUnrollFrom elements: at 8 blocks of 256 threads per multiprocessor,
/// one 4-byte load a thread keeps 8 KiB in flight on each, about a third of
/// what an H100's or H200's bandwidth needs by Little's law (about 3 MB in
/// flight over 132 multiprocessors at ~700 ns).
inline constexpr int64_t kGpuUnroll = 4;
inline constexpr int64_t kGpuUnrollFrom = 1024;

/// Whether the kernel of a reduction of `outputs` sums of `perOutput` terms
/// each gives every output a block (rather than a thread).
inline bool reducesByBlock(int64_t outputs, int64_t perOutput) {
  (void)outputs;
  return perOutput >= 32;
}

/// How the kernel of a reduction by blocks cuts each output's terms:
/// `chunks` blocks of `chunk` terms per output. Few outputs of many terms
/// (a gradient's square norm: one output, millions of terms) would leave all
/// but a few multiprocessors idle, so each chunk's block writes its partial
/// sums past the arena and the block that finishes an output's last chunk
/// adds them, in chunk order: the same bits whichever block is last.
struct ReductionSplit {
  int64_t chunks = 1, chunk = 0;
  bool split() const { return chunks > 1; }
};
ReductionSplit splitReduction(int64_t outputs, int64_t perOutput);

/// The outputs of a column sum that one block takes side by side: a warp's
/// lanes, so that each load of a warp reads one row's consecutive elements.
inline constexpr int64_t kGpuColumnTile = 32;

/// Whether `op`, a reduction by blocks, sums columns: its reduced axes are
/// its leading ones and it keeps at least kGpuColumnTile outputs (a bias's
/// gradient, the sum of a [rows, width] matrix's rows). A block per output
/// would have each warp read 32 rows' one element each (a 32-byte sector for
/// 2 or 4 useful bytes); a column sum's block takes kGpuColumnTile outputs
/// instead, its warps taking every eighth row of a chunk.
bool sumsColumns(mlir::Operation *op);

/// How the kernel of `op`, a reduction by blocks, cuts each output's terms:
/// splitReduction's way, or for a column sum, into as many chunks of rows
/// as make about eight blocks a multiprocessor, all the GPU holds at once
/// (each block summing at least 256 rows of its tile).
ReductionSplit reductionSplit(mlir::Operation *op);

/// The outputs and terms per output of a generated reduction kernel's op (a
/// dt.fused with reduce_axes, a dt.reduce_sum), or nothing for other ops.
std::optional<std::pair<int64_t, int64_t>> reductionShape(mlir::Operation *op);

/// Where the kernel of a split reduction keeps its scratch: at arena byte
/// `offset`, `outputs` 32-bit counters (padded to 8 bytes), then the
/// partial sums, 8 bytes each, by output, chunk and result. Every split
/// reduction of the module has its own span past dt.arena_bytes, so the GPU
/// arena is `gpuArenaBytes` (the counters start at zero and each output's
/// last block puts its counter back to zero).
struct ReductionScratch {
  int64_t offset = 0, bytes = 0;
};
llvm::DenseMap<mlir::Operation *, ReductionScratch>
reductionScratch(mlir::ModuleOp module);
int64_t gpuArenaBytes(mlir::ModuleOp module);

/// Whether convert-dt-fused-to-gpu makes a kernel of `op`.
bool isGeneratedKernelOp(mlir::Operation *op);

/// Calls `fn(op, name)` for every such op of every entry point, in order;
/// the kernel of the n-th in entry point `E` is called `E_k<n>`.
void forEachGeneratedKernel(
    mlir::ModuleOp module,
    llvm::function_ref<void(mlir::Operation *op, const std::string &name)> fn);

/// The bytes a generated kernel's vector load or store moves at most.
inline constexpr int64_t kGpuVectorBytes = 16;

/// How many consecutive elements a thread of `op`'s kernel takes as one
/// group: it loads each operand's elements of the group with one vector load
/// (up to kGpuVectorBytes; one scalar for an operand broadcast along the last
/// dimension), computes them and stores them with one vector store, which
/// moves as many bytes with a quarter to an eighth of the instructions. Taken
/// by elementwise regions, and by transposes that keep the last dimension,
/// splits, concats and slices, when that width divides every last dimension
/// (and each piece's start) the groups walk and every operand's offset is
/// aligned to its vector; otherwise, and with `unroll` below 2 (dtc
/// --gpu-unroll=1, the one-at-a-time kernels to measure against), 1.
int64_t vectorWidth(mlir::Operation *op, int64_t unroll = kGpuUnroll);

/// How many elements (or vectorWidth groups) the kernel of `op` walks in its
/// longest grid-stride loop: a launch of that many threads has one each.
int64_t launchElements(mlir::Operation *op, int64_t unroll = kGpuUnroll);

/// Generated kernels that one launch runs side by side (the GPU plan's
/// "kernel" launch with a "grid"): member i takes `blocks[i]` blocks after
/// the members before it, and sees them as its whole grid.
struct MergedKernel {
  std::string name;
  std::vector<std::string> members;
  std::vector<int64_t> blocks;
};

/// Kernels of at most this many blocks may share a launch, each with as
/// many as its elements ask (one thread each: launchElements); the runtime
/// launches a larger one alone, its grid capped at a few blocks per
/// multiprocessor, each thread looping. Large enough that a weight's
/// rounding or a residual sum (GPT-2's take 1728 to 6144 blocks) takes the
/// bias's or the norm parameters' rounding beside it into its launch.
inline constexpr int64_t kGpuMergeBlocks = 8192;

/// Adds each of `merged` to `kernels` (which holds their members, as
/// convert-dt-fused-to-gpu built them): MergeKernels.cpp.
mlir::LogicalResult mergeKernels(mlir::gpu::GPUModuleOp kernels,
                                 llvm::ArrayRef<MergedKernel> merged);

/// The learning rate of schedule `s` at step `step` of `total` (both f64),
/// in f64: what the CPU lowering and the GPU kernel compute, as the
/// interpreter does.
mlir::Value buildScheduleRate(mlir::OpBuilder &b, mlir::Location loc,
                              ScheduleOp s, mlir::Value step,
                              mlir::Value total);

} // namespace dt

#endif // DT_CONVERSION_GPUKERNELS_H
