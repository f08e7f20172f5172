//===- Job.h - The checked training job -------------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Design note. Sema's output is a `Job`: the `train` block with every value
// evaluated, every default filled in and every reference resolved, plus the
// `parallel` and `deploy` blocks. The model is an instance tree (one
// `ModelInstance` per layer, lists expanded), and every learnable tensor is a
// `ParamInfo` with its qualified name, concrete shape and initialiser reduced
// to uniform/normal/constant (`kaiming_uniform` is already its bounds). Later
// stages read plain values with locations; they never evaluate an expression,
// resolve a name or apply a shape rule. To build the computation itself they
// call `traceLoss` (Trace.h), which elaborates the loss through the same
// evaluator Sema checked it with.
//
// A Job refers to the AST and the SourceMgr it was checked from (through
// `Program`, Sema.h): keep those alive while the Job is used.
//
//===----------------------------------------------------------------------===//

#ifndef DT_SEMA_JOB_H
#define DT_SEMA_JOB_H

#include "dt/Sema/Types.h"

#include <memory>
#include <optional>

namespace dt {

namespace sema {
class TraceContext;
} // namespace sema

/// Tensor-parallel layouts a member can ask for (LANGUAGE.md, annotations).
enum class Annotation { Column, Row, Vocab };

/// `column`, `row`, `vocab`.
llvm::StringRef toString(Annotation annotation);

/// A parameter's initial distribution, evaluated.
struct Initializer {
  enum class Kind { Uniform, Normal, Constant };
  Kind kind = Kind::Constant;
  double low = 0, high = 0; ///< Uniform.
  double mean = 0, std = 0; ///< Normal.
  double value = 0;         ///< Constant.
  /// The initialiser the program named (`kaiming_uniform`, `zeros`, ...),
  /// for reports.
  std::string from;
};

struct ModelInstance;

/// One learnable tensor.
struct ParamInfo {
  /// Qualified by the instance path: `blocks.0.attn.qkv.weight`.
  std::string name;
  /// The master copy's type (always f32, whatever the compute precision).
  TensorType type;
  Initializer init;
  /// The dimension split over the tensor-parallel axis when the job names one
  /// (from `@column`/`@row`/`@vocab` on the parameter or its layer), else
  /// nullopt. Recorded whether or not a tensor axis exists.
  std::optional<unsigned> tensorDim;
  /// The annotation `tensorDim` comes from.
  std::optional<Annotation> annotation;
  /// Named by the train block's `freeze`: it does not train.
  bool frozen = false;
  /// `@buffer`: state an op updates (batch_norm's running statistics), never
  /// trained; saved, loaded and exported like a parameter.
  bool buffer = false;
  /// Named by the optimizer's `no_decay`: no weight decay, even as a matrix.
  bool noDecay = false;
  /// A LoRA factor (`lora_A`, `lora_B`) of a layer `adapters` adapted.
  bool adapter = false;
  /// The parameter's declaration.
  Location loc;
  /// The layer that owns it.
  const ModelInstance *owner = nullptr;
  /// Position in Job::params.
  unsigned index = 0;
};

/// One layer of the model: the root (`path` empty) or a submodule.
struct ModelInstance {
  /// The model as the program names it: `GPT`, `nn.Linear`.
  std::string model;
  /// The dotted path from the root: `blocks.0.attn`; empty for the root.
  std::string path;
  /// Every argument, defaults filled in, in declaration order.
  std::vector<NamedConstant> args;
  /// This layer's own present parameters (indices into Job::params), in
  /// declaration order. Absent `param ... if false` members are omitted.
  std::vector<unsigned> params;

  /// A submodule member: one layer, or a list of `n` copies (`* n`).
  struct Child {
    std::string name;
    bool isList = false;
    std::vector<std::unique_ptr<ModelInstance>> items;
    /// Annotations written on the member.
    std::vector<Annotation> annotations;
    Location loc;
  };
  std::vector<Child> children;

  /// Annotations written on the member that created this instance.
  std::vector<Annotation> annotations;
  /// The member (or the train block's `model =`) that created it.
  Location loc;
  const ModelInstance *parent = nullptr;

  /// The child named `name`, or null.
  const Child *findChild(llvm::StringRef name) const;
};

/// One field of a data source's sample: `x: f32[784]`, `y: i32`.
struct SampleField {
  std::string name;
  DType dtype = DType::F32;
  /// Per-sample shape (empty for a scalar per sample). Run-time sizes (the
  /// IDX image size) are already unified with the model's input.
  llvm::SmallVector<int64_t, 2> shape;
};

/// A data source: `nn.tokens(path = "...", seq = 1024)`.
struct DataSource {
  /// The reader: `idx`, `tokens` or `synthetic`.
  std::string kind;
  /// Every argument, defaults filled in.
  std::vector<NamedConstant> args;
  std::vector<SampleField> fields;
  Location loc;

  const SampleField *findField(llvm::StringRef name) const;
};

/// `optimizer = ...`, every argument with its default.
struct OptimizerConfig {
  enum class Kind { SGD, Adam, AdamW };
  Kind kind = Kind::SGD;
  double lr = 0;
  double momentum = 0;    ///< SGD.
  bool nesterov = false;  ///< SGD.
  double beta1 = 0.9;     ///< Adam, AdamW.
  double beta2 = 0.999;   ///< Adam, AdamW.
  double eps = 1e-8;      ///< Adam, AdamW.
  double weightDecay = 0; ///< SGD, AdamW (AdamW's default is 0.01).
  Location loc;
};

/// `schedule = ...`; `constant()` when the program names none.
struct ScheduleConfig {
  enum class Kind { Constant, Cosine, Linear, Step };
  Kind kind = Kind::Constant;
  int64_t warmup = 0; ///< Cosine, Linear: linear warm-up steps from 0.
  double min = 0;     ///< Cosine: the final learning rate.
  double final = 0;   ///< Linear: the final learning rate.
  int64_t every = 0;  ///< Step: steps between decays.
  double gamma = 1;   ///< Step: the decay factor.
  Location loc;
};

/// `checkpoint = {every: N, dir: "...", keep: K}`.
struct CheckpointConfig {
  int64_t every = 0;
  std::string dir;
  int64_t keep = 0; ///< 0: keep every checkpoint.
  Location loc;
};

/// `log = {every: N, dir: "..."}`.
struct LogConfig {
  int64_t every = 0;
  std::string dir; ///< Empty: the program's default.
  Location loc;
};

/// One named axis of the device mesh.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  Location loc;
};

/// One pipeline stage: the layers it runs, by path.
struct PipelineStage {
  /// As written, normalised: `blocks[0:4]`.
  std::string path;
  /// The instances in the stage, in order.
  std::vector<const ModelInstance *> instances;
  Location loc;
};

/// `pipeline = {axis: pp, stages: [...], schedule: "1f1b", microbatches: M}`.
struct PipelineConfig {
  enum class Schedule { GPipe, OneFOneB, Interleaved };
  std::string axis;
  std::vector<PipelineStage> stages;
  Schedule schedule = Schedule::OneFOneB;
  int64_t microbatches = 1;
  Location loc;
};

/// `shard PATH = [axis-or-_, ...]`: an explicit layout of one parameter.
struct ShardSpec {
  /// The parameter's qualified name and index in Job::params.
  std::string param;
  unsigned paramIndex = 0;
  /// Per dimension: the mesh axes it is split over, outermost first (empty:
  /// replicated).
  std::vector<std::vector<std::string>> dims;
  Location loc;
};

/// The parallel block, evaluated. Without one: a single rank.
struct ParallelConfig {
  /// Outermost first; empty when the job runs on one rank.
  std::vector<MeshAxis> mesh;
  /// The axes the batch is split over.
  std::vector<std::string> dataAxes;
  int zero = 0;
  /// `sync_batchnorm`: batch norms take their statistics over the whole
  /// batch of every data rank (SyncBatchNorm), not each rank's own.
  bool syncBatchNorm = false;
  /// `offload = "optimizer"`: the optimizer state and its update live in
  /// host memory (ZeRO-Offload); the device holds the rest.
  bool offloadOptimizer = false;
  /// The tensor-parallel axis, or empty.
  std::string tensorAxis;
  std::optional<PipelineConfig> pipeline;
  std::vector<ShardSpec> shards;
  Location loc;

  /// The product of all axis sizes (1 without a mesh).
  int64_t getWorldSize() const;
  /// The size of axis `name` (1 when there is no such axis).
  int64_t getAxisSize(llvm::StringRef name) const;
  /// The product of the data axes' sizes.
  int64_t getDataParallelSize() const;
};

/// Seconds of a deploy duration ("24h", "90m", "3600s", "2d"); nullopt if
/// malformed.
std::optional<int64_t> parseDuration(llvm::StringRef text);

/// One deploy block: its target and keys as evaluated constants.
struct DeployConfig {
  /// `sagemaker`, `vertex`, `slurm` or `kubernetes`.
  std::string target;
  std::vector<NamedConstant> keys;
  Location loc;

  const Constant *get(llvm::StringRef key) const { return lookup(keys, key); }
};

/// A parameter's name in a Hugging Face checkpoint, read by `init` and
/// written by the program's --export.
struct CheckpointName {
  /// Before the file's own prefix: `h.0.attn.c_attn.weight`.
  std::string name;
  /// Whether the file stores it transposed (GPT-2's Conv1D keeps [in, out]).
  bool transposed = false;
};

/// `init = nn.safetensors("PATH", names = {...}, ignore = [...])`: the
/// parameters start from a Hugging Face checkpoint.
struct PretrainedConfig {
  /// As written; a relative path resolves against the working directory of
  /// dtc and of the program.
  std::string path;
  /// fnmatch globs of file tensors that no parameter takes, to skip.
  std::vector<std::string> ignore;
  /// Whether dtc found the file and checked its headers; then what it found:
  /// the file's prefix, the parameters the file lacks (initialised as
  /// declared) and the file tensors skipped.
  bool checked = false;
  std::string prefix;
  std::vector<unsigned> fresh;
  std::vector<std::string> skipped;
  Location loc;
};

/// `adapters = nn.lora(rank, alpha, targets)`: low-rank adapters (LoRA) on
/// the Linear layers the targets name, which become nn.LoraLinear; only the
/// adapters train.
struct AdapterConfig {
  int64_t rank = 8;
  double alpha = 8;
  /// Dropout on the adapters' input (PEFT's lora_dropout), while training.
  double dropout = 0;
  /// The adapted layers, by path (`blocks.0.attn.qkv`).
  std::vector<std::string> layers;
  /// What PEFT puts before a layer's name in `adapter_model.safetensors`:
  /// `base_model.model.` and the model's own prefix (`transformer.`).
  std::string peftPrefix;
  /// PEFT's `adapter_config.json`, written beside the adapters.
  std::string peftConfig;
  Location loc;
};

/// The checked `train` block and everything it refers to.
struct Job {
  Job();
  Job(Job &&);
  Job &operator=(Job &&);
  ~Job();

  /// The train block's name, or the file's stem when it has none.
  std::string name;
  Location loc;

  std::unique_ptr<ModelInstance> model;
  /// Every present parameter, depth-first in declaration order.
  std::vector<ParamInfo> params;

  DataSource data;
  std::optional<DataSource> eval;

  /// Samples per optimizer step over all ranks.
  int64_t batch = 0;
  /// Samples per rank per forward/backward.
  int64_t microBatch = 0;
  /// Micro-batches per optimizer step on each rank:
  /// batch / (microBatch * data-parallel size).
  int64_t accumulation = 1;
  /// Exactly one of steps and epochs is set.
  std::optional<int64_t> steps;
  std::optional<int64_t> epochs;

  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  /// Global gradient-norm clip.
  std::optional<double> clip;
  /// Compute precision (master weights and optimiser state stay f32).
  DType precision = DType::F32;
  /// Where `precision` and `recompute` are written (invalid when absent), for
  /// later stages that cannot honour them to point at.
  Location precisionLoc, recomputeLoc;
  /// Paths of the layers whose activations are recomputed in backward, one
  /// per instance (`blocks` becomes `blocks.0`, `blocks.1`, ...); ops whose
  /// trace scope equals or is below one of them are recomputed.
  std::vector<std::string> recompute;
  int64_t seed = 0;
  std::optional<PretrainedConfig> pretrained;
  std::optional<AdapterConfig> adapters;
  /// Per parameter (as `params`): its name in a checkpoint, by the standard
  /// library's Hugging Face names and `init`'s `names`.
  std::vector<CheckpointName> checkpointNames;
  /// Tensors a checkpoint of this model may carry that are no parameters
  /// of it and are skipped on loading (a tied LLaMA's `lm_head.weight`, a
  /// copy of the embedding table), with `init` or --init.
  std::vector<std::string> checkpointSkip;
  /// The Hugging Face `config.json` --export writes beside the weights when
  /// the model is one transformers knows (GPT-2); empty otherwise.
  std::string hfConfig;
  std::optional<CheckpointConfig> checkpoint;
  std::optional<LogConfig> log;
  /// Steps between evaluations; 0: only at the end of training.
  int64_t evalEvery = 0;
  /// Whether the loss is a top-level cross_entropy over class logits (eval
  /// then reports accuracy).
  bool classifier = false;

  ParallelConfig parallel;
  std::vector<DeployConfig> deploys;

  /// The instance at `path` (`blocks.0.attn`; empty: the root), or null.
  const ModelInstance *findInstance(llvm::StringRef path) const;
  /// The parameter named `name`, or null.
  const ParamInfo *findParam(llvm::StringRef name) const;

  /// What traceLoss needs from Sema: the loss expression and the evaluator's
  /// view of the instance tree.
  std::shared_ptr<const sema::TraceContext> traceContext;
};

} // namespace dt

#endif // DT_SEMA_JOB_H
