//===- dtrt/cuda/plan.h - A GPU plan, read for one rank ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The launch sequence dtc wrote for each entry point (dt/Target/CudaPlan.h,
// docs/abi.md "The GPU plan"), read and checked for one rank of its mesh:
// each launch's arguments counted, its collectives' groups checked against
// the mesh, a shard's bytes and a block's first row worked out for the rank.
// Nothing here touches a GPU, so tests read plans anywhere; the executor
// then loads the generated kernels the plan names.
//
// Built only where the CUDA toolkit was found (DT_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_PLAN_H
#define DTRT_CUDA_PLAN_H

#include "dtrt/comm.h"
#include "dtrt/cuda/blas.h" // Operands

#include <cuda_runtime_api.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace dtrt::cuda {

/// One recorded launch, its arguments resolved.
struct Thunk {
  enum Kind {
    Kernel,
    Copy,
    Matmul,
    MatmulBias,
    Softmax,
    LayerNorm,
    LayerNormGrad,
    RMSNorm,
    RMSNormGrad,
    Rope,
    Dropout,
    Conv2d,
    Conv2dInputGrad,
    Conv2dWeightGrad,
    MaxPool,
    MaxPoolGrad,
    AvgPool,
    AvgPoolGrad,
    Embedding,
    EmbeddingGrad,
    CrossEntropy,
    CrossEntropyGrad,
    CrossEntropyWithGrad,
    CountCorrect,
    Attention,
    AttentionGrad,
    EmbeddingShard,
    EmbeddingGradShard,
    ClassStats,
    CrossEntropyStats,
    CountCorrectStats,
    CrossEntropyGradShard,
    AllReduce,
    ReduceScatter,
    AllGather,
    AllToAll,
    TakeShard,
    ShardStart,
    Wait
  } kind = Kernel;
  /// A generated kernel (the executor loads it by name).
  cudaKernel_t kernel = nullptr;
  /// The generated kernel's name (profiles).
  std::string name;
  /// A kernel that runs several generated kernels at once: its exact
  /// number of blocks (the plan's "grid"; 0: as `n` asks).
  int64_t grid = 0;
  std::vector<int64_t> p, i;
  std::vector<double> f;
  /// The plan's "tf32" (TF32) or "half" (BF16, F16: 16-bit operands), or an
  /// attention's "bf16" (BF16: bf16 tensor cores on bf16-valued inputs).
  Operands operands = Operands::F32;
  /// A product's result: f32, or (the plan's "out", with 16-bit operands)
  /// the operands' 16-bit type, written where the plan's narrowing of it
  /// would have put it; so too a bf16 attention's results ("out": "bf16")
  /// and a norm's y or dx ("out": either 16-bit type).
  Operands result = Operands::F32;
  /// How a bf16 attention's inputs, or a norm's x, are stored: f32
  /// (16-bit values widened), or (the plan's "in") 16-bit where the
  /// widenings' sources lie.
  Operands in = Operands::F32;
  /// How a norm gradient's dy is stored: f32, or (the plan's
  /// "grad_in") 16-bit where its widening's source lies.
  Operands gradIn = Operands::F32;
  /// How a 16-bit product's bias is stored: f32, or (the plan's "bias") in
  /// the operands' type where its widening's source lies.
  Operands bias = Operands::F32;
  /// A 16-bit product's epilogue (the plan's "epilogue": "gelu" or
  /// "gelu_grad", whose pre-activation is its last pointer; "bias_grad",
  /// whose f32 sums of A are).
  Epilogue epilogue = Epilogue::None;
  /// A bf16 attention's operands' layouts (the plan's "layouts": heads,
  /// batch, head and row strides, one per pointer: dtk_attention_layout),
  /// or none: every operand [slices, t, d].
  std::vector<std::array<int64_t, 4>> layouts;
  /// Row pitches, in elements, where the plan gives them ("ld"): a
  /// product's A, B and C (0: packed), or the loss's logits (and its
  /// gradient's dlogits); empty: every row packed.
  std::vector<int64_t> ld;
  /// A 16-bit product's n and k rounded up where the plan says ("pad"),
  /// computed with extra rows or columns of its operands (given pitches:
  /// dt/Target's CudaPadding.h); empty: its own.
  std::vector<int64_t> pad;
  /// Bytes the launch zeroes first ("zero": {offset, width, rows, pitch},
  /// rows of `width` bytes `pitch` apart): a padded product's extra terms.
  std::vector<std::array<int64_t, 4>> zeros;
  /// Its NVTX range's name: the trace's for the op's span ("matmul fc",
  /// "fused(mul,add) bn"), else the launch's kind.
  std::string range;
  /// A collective's value ("grad/fc1.weight"), for messages.
  std::string what;
  /// Its op's span in the manifest (the trace's op_id), or -1; a
  /// collective's id, or -1.
  int32_t span = -1, collective = -1;
  /// A merged launch's kernels' spans, which the trace names together.
  std::vector<int32_t> members;
  /// The cost model's bytes and FLOPs of its span (0 without one): what
  /// DTRT_CUDA_PROFILE divides by the measured time.
  int64_t bytes = 0;
  double flops = 0;
  /// A collective that runs beside the step's work until its dt.wait
  /// (dtc --overlap).
  bool async = false;
};

/// The name of a launch kind in the plan ("matmul").
const char *kindName(Thunk::Kind kind);

struct Plan {
  /// The bytes the device arena needs (docs/abi.md) and the executor's
  /// scratch.
  int64_t arenaBytes = 0, scratchBytes = 0;
  /// Where the device's part of the arena starts: the bytes before it are
  /// the host's alone (offload = "optimizer"; 0 otherwise).
  int64_t deviceFrom = 0;
  /// Each entry point's launches, in order.
  std::vector<std::pair<std::string, std::vector<Thunk>>> entries;
  /// The sets of axes the collectives run over, in the plan's order.
  std::vector<AxisMask> groups;
};

/// Reads `plan` for `rank` of `mesh`. `manifest` (the program's) names the
/// spans (a launch's NVTX range) and the collectives (messages).
Expected<Plan> readPlan(const std::string &plan, const std::string &manifest,
                        const Mesh &mesh, int rank);

} // namespace dtrt::cuda

#endif // DTRT_CUDA_PLAN_H
