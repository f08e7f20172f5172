//===- Passes.h - dt transformation passes ----------------------*- C++ -*-===//
//
// Declarations and registration of the passes between MLIRGen and lowering.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_PASSES_H
#define DT_TRANSFORMS_PASSES_H

#include "dt/Dialect/DT/IR/DTOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace dt {

#define GEN_PASS_DECL
#include "dt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dt/Transforms/Passes.h.inc"

/// Names of the entry points and well-known globals shared by the passes,
/// MLIRGen and the manifest (see docs/abi.md).
namespace names {
inline constexpr llvm::StringLiteral kLossFn = "loss";
inline constexpr llvm::StringLiteral kGradStep = "grad_step";
inline constexpr llvm::StringLiteral kApplyStep = "apply_step";
inline constexpr llvm::StringLiteral kEvalStep = "eval_step";
inline constexpr llvm::StringLiteral kStep = "step";
inline constexpr llvm::StringLiteral kTotalSteps = "in/total_steps";
/// Which micro-batch of the optimizer step dt_grad_step takes (dropout).
inline constexpr llvm::StringLiteral kMicroIndex = "in/micro_index";
inline constexpr llvm::StringLiteral kLoss = "out/loss";
inline constexpr llvm::StringLiteral kLr = "out/lr";
inline constexpr llvm::StringLiteral kGradNorm = "out/grad_norm";
inline constexpr llvm::StringLiteral kEvalLoss = "out/eval_loss";
inline constexpr llvm::StringLiteral kEvalCorrect = "out/eval_correct";
/// On a gradient or optimizer-state global: the parameter it belongs to.
inline constexpr llvm::StringLiteral kOwnerAttr = "dt.param";
/// On the module: the parallel recipe dt-shard-globals reads.
inline constexpr llvm::StringLiteral kParallelAttr = "dt.parallel";
/// On a parameter: the dimension its `@column`/`@row`/`@vocab` annotation
/// splits over the tensor axis.
inline constexpr llvm::StringLiteral kTensorDimAttr = "dt.tensor_dim";
/// On a parameter: `freeze` names it, so it gets no gradient, no optimizer
/// state and no gradient communication; it stays as initialised (or loaded).
inline constexpr llvm::StringLiteral kFrozenAttr = "dt.frozen";
/// On a parameter (also `dt.frozen`): declared `@buffer`, state the forward
/// updates with a `dt.store` (batch_norm's running statistics) rather than a
/// trained value. dt-autocast leaves its loads in @loss f32.
inline constexpr llvm::StringLiteral kBufferParamAttr = "dt.buffer_param";
/// On a parameter: the optimizer's `no_decay` names it, so no weight decay
/// applies to it even if it is a matrix.
inline constexpr llvm::StringLiteral kNoDecayAttr = "dt.no_decay";
/// On the module: `offload = "optimizer"`, the optimizer state and its update
/// kept in host memory (dt/Transforms/OffloadInfo.h; the CPU backend's memory
/// is all host memory).
inline constexpr llvm::StringLiteral kOffloadAttr = "dt.offload";
/// On the module, from dt-plan-memory with `offload = "optimizer"`: the bytes
/// at the arena's start that only @apply_step touches, which stay in host
/// memory (dt/Transforms/OffloadInfo.h).
inline constexpr llvm::StringLiteral kHostBytesAttr = "dt.host_bytes";
/// On an input global: it holds samples of a batch (dimension 0).
inline constexpr llvm::StringLiteral kBatchAttr = "dt.batch";
/// On the module: the pipeline, `{axis, schedule, microbatches, chunks,
/// stages = [[layer paths of stage 0], ...]}` (stages in model order: virtual
/// stage s runs on pipeline rank s mod ranks).
inline constexpr llvm::StringLiteral kPipelineAttr = "dt.pipeline";
/// On an op of @loss and @grad_step in a pipelined program: the (virtual)
/// stage it belongs to (dt-pipeline-stages; dt-autodiff gives each VJP the
/// stage of the op it differentiates).
inline constexpr llvm::StringLiteral kStageAttr = "dt.stage";
/// On an op of @grad_step that dt-autodiff built: it belongs to backward.
inline constexpr llvm::StringLiteral kBackwardAttr = "dt.backward";
/// On a global of a pipelined program: the one pipeline rank that holds it
/// (parameters used by one rank's stages, their gradients and optimizer
/// state, the stages' pipe buffers). Globals without it are on every rank.
inline constexpr llvm::StringLiteral kPipelineRankAttr = "dt.pp_rank";
/// On a global: it is a ring of this many copies (slots), and the entry
/// points address the copy the scalar i64 global named by kSlotIndexAttr
/// holds (set by the runtime before each call). A pipeline stage's stash is
/// one: each micro-batch in flight keeps its activations in its own slot, so
/// nothing is ever copied aside. dt-plan-memory lays the slots out one after
/// another, each kSlotBytesAttr bytes (64-byte aligned).
inline constexpr llvm::StringLiteral kSlotsAttr = "dt.slots";
inline constexpr llvm::StringLiteral kSlotIndexAttr = "dt.slot_index";
inline constexpr llvm::StringLiteral kSlotBytesAttr = "dt.slot_bytes";
/// On the module: the paths of the layers whose activations backward
/// recomputes (`recompute = ...`). An op belongs to the layer its location's
/// name says (MLIRGen's NameLoc), or to one below it.
inline constexpr llvm::StringLiteral kRecomputeAttr = "dt.recompute";
/// On an op dt-autodiff cloned to recompute an activation for backward: the
/// layer it recomputes. Being an attribute, it also keeps CSE from merging the
/// copy back into the forward op it repeats.
inline constexpr llvm::StringLiteral kRecomputedAttr = "dt.recomputed";
/// Dynamic loss scaling (`precision = f16`): the module attribute
/// `{init = S0, growth_interval = N}` turns it on. The scale is S0 * 2^e with e
/// the state `amp/scale_exp` (0 at the start: state starts at zero), which a
/// step that overflows lowers by one and N clean steps in a row raise by one.
inline constexpr llvm::StringLiteral kLossScaleAttr = "dt.loss_scale";
inline constexpr llvm::StringLiteral kScaleExp = "amp/scale_exp";
inline constexpr llvm::StringLiteral kCleanSteps = "amp/clean_steps";
inline constexpr llvm::StringLiteral kSkippedSteps = "amp/skipped_steps";
inline constexpr llvm::StringLiteral kLossScaleOut = "out/loss_scale";
inline constexpr llvm::StringLiteral kSkippedOut = "out/skipped_steps";
/// On an op of an entry point: its number among the ops that become work
/// (dt-number-spans), what traces and per-op timings call it.
inline constexpr llvm::StringLiteral kSpanAttr = "dt.span";
/// The gradient global of parameter `param`.
inline std::string gradOf(llvm::StringRef param) {
  return ("grad/" + param).str();
}
} // namespace names

/// The module's dynamic loss scaling recipe, if it has one.
struct LossScaling {
  double init;
  int64_t growthInterval;
};
std::optional<LossScaling> getLossScaling(mlir::ModuleOp module);
/// Builds the current loss scale, S0 * 2^e, as an f32 scalar at `b`'s
/// insertion point (creating the `amp/scale_exp` state).
mlir::FailureOr<mlir::Value> buildLossScale(mlir::OpBuilder &b,
                                            mlir::Location loc,
                                            mlir::ModuleOp module,
                                            const LossScaling &scaling);

/// The passes that turn MLIRGen's @loss into the train step: canonicalisation,
/// dt-autodiff, dt-optimizer, canonicalisation and CSE (`dtc --emit=train-step`
/// prints the result).
void buildTrainStepPipeline(mlir::OpPassManager &pm);

/// The default size of the buckets small collectives are fused into.
inline constexpr int64_t kDefaultBucketBytes = int64_t(4) << 20;

/// dt-shard-globals and dt-shard-propagation: every global and every value
/// gets its layout over the mesh (`dtc --emit=sharded`). No-ops without a
/// mesh.
void buildShardingPipeline(mlir::OpPassManager &pm);

/// dt-spmd-partition, canonicalisation, dt-bucket-collectives (buckets of
/// `bucketBytes`), dt-overlap-collectives when `overlap`, and
/// dt-verify-collectives: the program of one rank (`dtc --emit=partitioned`).
void buildPartitionPipeline(mlir::OpPassManager &pm,
                            int64_t bucketBytes = kDefaultBucketBytes,
                            bool overlap = false);

/// The passes that prepare the train step for lowering: dt-fuse-elementwise and
/// dt-fuse-epilogues on every entry point, then dt-plan-memory (with
/// gpu-zero-copies when the program also carries GPU code).
void buildFuseAndPlanPipeline(mlir::OpPassManager &pm, bool gpu = false);

/// Registers the pipelines with dt-opt (`dt-train-step`, `dt-shard`,
/// `dt-partition`, `dt-fuse-and-plan`).
void registerDTPipelines();

/// Records that `global` (a gradient or optimizer state) belongs to `param`.
void setOwner(GlobalOp global, GlobalOp param);
/// The parameter `global` belongs to, or null.
GlobalOp getOwner(GlobalOp global);

/// The arena byte offset dt-plan-memory gave `v` (its op's `dt.offsets`), the
/// offset code generation, the GPU plan and the kernels address it by. `v`
/// must be a planned op's result.
int64_t plannedOffset(mlir::Value v);

/// Returns the global named `name`, creating it (at the end of the module's
/// globals) with `type` and `role` if it does not exist. Fails with an error if
/// it exists with another type or role.
mlir::FailureOr<GlobalOp> getOrCreateGlobal(mlir::ModuleOp module,
                                            llvm::StringRef name,
                                            mlir::RankedTensorType type,
                                            Role role);

} // namespace dt

#endif // DT_TRANSFORMS_PASSES_H
