//===- PipelineInfo.h - a pipelined module's stages -------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What the passes of a pipelined program read from the module attribute
// `dt.pipeline` (MLIRGen): the stages as layer paths, the pipeline axis and
// the schedule. Virtual stage s runs on pipeline rank s mod ranks, as chunk
// s / ranks of that rank (Megatron-LM's interleaving; one chunk otherwise).
//
//===----------------------------------------------------------------------===//

#ifndef DT_TRANSFORMS_PIPELINEINFO_H
#define DT_TRANSFORMS_PIPELINEINFO_H

#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Pipeline/Schedule.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace dt {

struct PipelineInfo {
  std::string axis;
  std::string schedule;
  int64_t ranks = 1, chunks = 1, microbatches = 1;
  /// Per virtual stage, in model order: the layer paths it runs.
  std::vector<std::vector<std::string>> stages;
  MeshInfo mesh;

  /// The module's pipeline, nullopt without `dt.pipeline`; an error for a
  /// malformed attribute or an axis the mesh lacks.
  static mlir::FailureOr<std::optional<PipelineInfo>> get(mlir::ModuleOp module);

  int64_t numStages() const { return int64_t(stages.size()); }
  /// The pipeline rank that runs virtual stage `stage`.
  int64_t rankOf(int64_t stage) const { return stage % ranks; }
  /// The virtual stage whose layers hold `layer` (a dotted instance path, as
  /// in an op's location), or -1.
  int64_t stageOfLayer(llvm::StringRef layer) const;
  /// The ranks of the world whose coordinate on the pipeline axis is
  /// `ppRank` (ranks are row-major over the mesh).
  std::vector<int64_t> worldRanksAt(int64_t ppRank) const;
};

/// The static schedule of a pipelined module's `dt.pipeline` (an error at the
/// module if it cannot be built).
mlir::FailureOr<pipeline::Schedule> buildSchedule(mlir::ModuleOp module,
                                                  const PipelineInfo &info);

/// The layer path in an op's location (MLIRGen names ops after the layer whose
/// forward emitted them; rewrites keep or fuse locations), or "".
llvm::StringRef layerOf(mlir::Location loc);

/// The pipeline stage an op carries (`dt.stage`), or -1.
int64_t stageOf(mlir::Operation *op);

/// The pipeline rank that holds a global (`dt.pp_rank`), or -1 for every rank.
int64_t pipelineRankOf(mlir::Operation *global);

} // namespace dt

#endif // DT_TRANSFORMS_PIPELINEINFO_H
