//===- dtrt/manifest.h - The program manifest, checked ----------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `dt_manifest` describes the arena (every named buffer with its role, dtype,
// shape and offset), the training recipe and the data sources
// (docs/abi.md). It is parsed once at start and validated hard: a bad manifest
// is a compiler bug, and catching it here (misaligned or overlapping buffers,
// an unknown role, a missing `step` counter) turns silent memory corruption
// into a message that names the buffer.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_MANIFEST_H
#define DTRT_MANIFEST_H

#include "dtrt/error.h"

#include "dtrt/peaks_cache.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrt {

/// The version of the manifest/arena contract (docs/abi.md) this runtime
/// implements; a manifest with another `abi` is refused.
inline constexpr int kAbiVersion = 1;

/// Element types of arena buffers.
enum class DType { F32, I32, I64, BF16, F16 };

/// Bytes per element of `type`.
size_t dtypeSize(DType type);
/// The manifest's spelling of `type` ("f32", ...).
const char *dtypeName(DType type);
/// Parses a manifest dtype spelling.
std::optional<DType> parseDType(std::string_view name);

/// What a buffer is for (docs/abi.md, "Buffers").
enum class Role { Param, Grad, State, Input, Output, Pipe };

/// The manifest's spelling of `role`.
const char *roleName(Role role);

/// How a `param` buffer is initialised.
struct InitSpec {
  enum class Kind { Uniform, Normal, Constant };
  Kind kind = Kind::Constant;
  /// Uniform: low/high. Normal: mean/std. Constant: value in `a`.
  double a = 0.0, b = 0.0;
  /// The initialiser the program named (reports only).
  std::string from;
};

/// How one dimension of a buffer is laid out over the mesh (docs/abi.md,
/// "Layouts"): split by `axes` one after another, outermost first, each of its
/// `blocks` blocks separately.
struct DimLayout {
  std::vector<int> axes;
  int64_t blocks = 1;
};

/// A buffer's layout over the mesh.
struct Layout {
  std::vector<DimLayout> dims;
  /// Axes over which every rank holds a summand of the value.
  std::vector<int> partial;
};

/// The device mesh: named axes with sizes, outermost first. Empty for a
/// program of one rank.
struct MeshSpec {
  std::vector<std::string> names;
  std::vector<int> sizes;

  int worldSize() const;
};

/// One collective the program issues, as generated code names it (by id).
struct CollectiveDesc {
  int64_t id = 0;
  /// "all-reduce", "reduce-scatter", "all-gather" or "shard".
  std::string kind;
  /// The value it moves: "grad/fc1.weight".
  std::string what;
  /// The mesh axes of its group.
  std::vector<std::string> axes;
  /// The entry point that issues it, and the bytes it hands over per call.
  std::string entry;
  int64_t bytes = 0;
  /// The elements it hands over and their type ("f32"; "" when the
  /// manifest does not say).
  int64_t elements = 0;
  std::string dtype;
};

/// One op of the program that is a span of a trace (dt-number-spans): what
/// generated code's dtrt_span_begin/end(id) bracket.
struct SpanDesc {
  int64_t id = 0;
  /// The entry point it belongs to ("grad_step").
  std::string entry;
  /// The op ("matmul", "fused(mul,add)", "all_reduce") and the layer it
  /// computes for ("" for the loss and the optimizer).
  std::string op, layer;
  /// The cost model's count of one call.
  double flops = 0, bytes = 0;
  /// The collective it issues or waits for, or -1.
  int64_t collective = -1;
  /// The kernel call whose time the prediction measures (dtrt/peaks.h),
  /// for the ops a roofline prices badly (matrix products, attention).
  std::optional<KernelCall> kernel;
};

/// One named region of the arena.
struct BufferDesc {
  std::string name;
  Role role = Role::Param;
  DType dtype = DType::F32;
  /// Row-major; empty for a scalar.
  std::vector<int64_t> shape;
  /// Bytes from the arena base.
  size_t offset = 0;
  /// Number of elements (1 for a scalar).
  int64_t elements = 1;
  /// elements * dtypeSize(dtype).
  size_t bytes = 0;
  /// Only for `param` buffers.
  std::optional<InitSpec> init;
  /// A `param` declared `@buffer` (running statistics): state the program
  /// updates, not a trained parameter.
  bool buffer = false;
  /// The whole tensor's shape (`shape` is this rank's shard of it); equal to
  /// `shape` without a layout.
  std::vector<int64_t> globalShape;
  /// The layout over the mesh; absent in programs of one rank.
  std::optional<Layout> layout;
  /// In a pipelined program, the one pipeline rank that uses the buffer (a
  /// parameter of its stages, its gradient and state, its pipe buffers);
  /// -1: every rank does. Buffers of different pipeline ranks may share
  /// bytes of the arena.
  int ppRank = -1;
};

/// One virtual stage of a pipeline (docs/abi.md, "Pipelines").
struct PipelineStage {
  /// Entry points (names in `dt_entries`).
  std::string forward, backward;
  /// Whether forward reads the batch (the micro-batch is staged first).
  bool readsBatch = false;
  /// Buffers forward sends to the next stage and receives from the previous
  /// one; backward's gradients the other way; what forward keeps for
  /// backward.
  std::vector<std::string> send, recv, gradSend, gradRecv, stash;
  /// Micro-batches whose stash is kept at once (the slots of its ring), and
  /// the i64 buffer naming the slot a pass uses ("" without a stash).
  int64_t stashSlots = 0;
  std::string slotIndex;
  /// Evaluation's forward (empty without an eval source), what it sends to
  /// the next stage and receives from the previous one.
  std::string eval;
  bool evalReadsBatch = false;
  std::vector<std::string> evalSend, evalRecv;
};

/// One pass of a pipeline rank's schedule.
struct PipelineAction {
  bool forward = true;
  int64_t microbatch = 0, stage = 0, slot = 0;
};

/// The manifest's `pipeline`.
struct PipelineSpec {
  std::string axis;
  std::string schedule;
  int64_t microbatches = 1, chunks = 1, slots = 0;
  /// Virtual stage s runs on pipeline rank s % ranks.
  std::vector<PipelineStage> stages;
  /// Per pipeline rank: its @apply_step variant and its passes in order.
  std::vector<std::string> apply;
  std::vector<std::vector<PipelineAction>> actions;
};

/// The kinds of data sources (docs/abi.md, "Data sources").
enum class DataKind { Idx, Tokens, TokenClasses, Synthetic };

/// One data source as the manifest (and --data overrides) describe it. Only
/// the members of its kind are meaningful.
struct DataSpec {
  DataKind kind = DataKind::Synthetic;
  // idx
  std::string images, labels;
  double scale = 1.0;
  /// `image = true`: samples are [1, rows, cols] images, not flat rows.
  bool image = false;
  // tokens, token_classes
  std::string path;
  int64_t seq = 0;
  // synthetic
  int64_t features = 0, classes = 0, count = 0;
  uint64_t seed = 0;
};

/// The manifest's `train.log` key.
struct LogSpec {
  int64_t every = 0; // 0: not given
  std::string dir;   // empty: not given
};

/// The manifest's `train.checkpoint` key.
struct CheckpointSpec {
  int64_t every = 0; // 0: only at the end of training and on a stop signal
  std::string dir;
  int64_t keep = 0; // 0: keep all
};

/// The manifest's `train` object.
struct TrainSpec {
  /// `batch` = `microBatch` (per rank) x `accumulation` x `dataParallel`.
  int64_t batch = 0, microBatch = 0, accumulation = 1;
  /// Ranks the batch is split over.
  int64_t dataParallel = 1;
  /// Exactly one is set.
  std::optional<int64_t> steps, epochs;
  uint64_t seed = 0;
  int64_t evalEvery = 0;
  /// `eval_partial`: true for "pad", false for "drop".
  bool evalPad = true;
  bool classifier = false;
  std::optional<LogSpec> log;
  std::optional<CheckpointSpec> checkpoint;
};

/// A parameter's name in a Hugging Face checkpoint (docs/abi.md,
/// "Pretrained weights"): before the file's own prefix, and whether the file
/// stores it transposed.
struct CheckpointName {
  std::string param, name;
  bool transposed = false;
};

/// The manifest's `init`: the parameters start from a safetensors
/// checkpoint.
struct PretrainedSpec {
  /// As the program names it; --init overrides it.
  std::string path;
  /// fnmatch globs of file tensors to skip.
  std::vector<std::string> ignore;
};

/// The manifest's `adapters`: LoRA layers, y = x W^T + b + (x A^T) B^T ·
/// scale, whose factors alone train.
struct AdapterSpec {
  struct Layer {
    /// The parameters: W [out, in], A [rank, in], B [out, rank].
    std::string weight, a, b;
  };
  int64_t rank = 0;
  double alpha = 0, scale = 0;
  /// Before a factor's checkpoint name in PEFT's adapter_model.safetensors.
  std::string peftPrefix;
  /// PEFT's adapter_config.json.
  std::string peftConfig;
  std::vector<Layer> layers;
};

/// Byte ranges [offset, offset + bytes) of the arena.
using ArenaRanges = std::vector<std::pair<int64_t, int64_t>>;

/// The manifest's `offload` split (dt/Transforms/OffloadInfo.h in dtc): the
/// arena's first `hostBytes` are touched by dt_apply_step alone and live in
/// host memory only; the device holds the rest. Of the device's ranges, the
/// host mirrors `mirrored` (what dt_apply_step reads or writes there),
/// copies `down` to itself before each update (the gradients) and `up` back
/// after it (the parameters); `zero` (what the update only clears: the
/// gradients, for the next step's accumulation) the device clears itself.
struct OffloadSplit {
  int64_t hostBytes = 0;
  ArenaRanges mirrored, down, up, zero;
};

/// The parsed, validated manifest.
struct Manifest {
  int abi = 0;
  std::string name;
  std::string source;
  size_t arenaBytes = 0;
  /// `offload = "optimizer"` (ZeRO-Offload): the optimizer state belongs in
  /// host memory. The CPU backend's arena is host memory already.
  bool offloadOptimizer = false;
  /// How the arena splits between host and device under offload (absent in
  /// a pipelined program's manifest): dtrt/offload.h.
  std::optional<OffloadSplit> offloadSplit;
  size_t arenaAlign = 64;
  /// The FLOPs of one optimizer step of this rank (the compiler's cost
  /// model; in a pipeline, the mean over its ranks) and the precision they
  /// run in.
  double flopsPerStep = 0;
  /// The same without the forward ops recomputation repeats (MFU's; equal
  /// to flopsPerStep without `recompute`).
  double modelFlopsPerStep = 0;
  std::string precision = "f32";
  MeshSpec mesh;
  /// Indexed by id.
  std::vector<CollectiveDesc> collectives;
  /// Indexed by id.
  std::vector<SpanDesc> spans;
  /// In manifest order (checkpoints store tensors in this order).
  std::vector<BufferDesc> buffers;
  TrainSpec train;
  std::optional<DataSpec> trainData;
  std::optional<DataSpec> evalData;
  std::optional<PipelineSpec> pipeline;
  std::optional<PretrainedSpec> pretrained;
  /// Every parameter's checkpoint name, in manifest order.
  std::vector<CheckpointName> checkpointNames;
  /// Checkpoint tensors loading skips: no parameters of this model (a tied
  /// LLaMA's `lm_head.weight`).
  std::vector<std::string> checkpointSkip;
  /// The Hugging Face config.json an export writes ("" for models
  /// transformers does not know).
  std::string hfConfig;
  std::optional<AdapterSpec> adapters;

  /// Whether the rank at `coords` holds `b`: every rank does, except in a
  /// pipeline, where a buffer with a `ppRank` is only that pipeline rank's
  /// (its bytes overlap the other ranks' own buffers in the arena).
  bool holds(const BufferDesc &b, const std::vector<int> &coords) const;
  /// The index of the pipeline's axis in the mesh, or -1.
  int pipelineAxis() const;

  /// How often one optimizer step calls entry point `entry` on a rank that
  /// runs it: the micro-batches' passes, the update once, evaluation never.
  int64_t callsPerStep(const std::string &entry) const;
  /// The buffer called `name`, or null.
  const BufferDesc *find(std::string_view name) const;
};

/// Parses and validates a manifest: ABI version, buffer roles, dtypes, shapes,
/// offsets (aligned, inside the arena, no overlap between named buffers), the
/// buffers every program has (`step`, `out/loss`), the train recipe and the
/// data sources.
Expected<Manifest> parseManifest(std::string_view text);

} // namespace dtrt

#endif // DTRT_MANIFEST_H
