//===- PipelineInfo.cpp - a pipelined module's stages ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dt/Transforms/PipelineInfo.h"
#include "dt/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace dt;

FailureOr<std::optional<PipelineInfo>> PipelineInfo::get(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(names::kPipelineAttr);
  if (!dict)
    return std::optional<PipelineInfo>();
  PipelineInfo p;
  auto axis = dict.getAs<StringAttr>("axis");
  auto schedule = dict.getAs<StringAttr>("schedule");
  auto microbatches = dict.getAs<IntegerAttr>("microbatches");
  auto chunks = dict.getAs<IntegerAttr>("chunks");
  auto stages = dict.getAs<ArrayAttr>("stages");
  if (!axis || !schedule || !microbatches || !chunks || !stages ||
      stages.empty())
    return module.emitError("dt.pipeline needs axis, schedule, microbatches, "
                            "chunks and stages"),
           failure();
  FailureOr<MeshInfo> mesh = MeshInfo::get(module);
  if (failed(mesh))
    return failure();
  std::optional<AxisId> id = mesh->find(axis.getValue());
  if (!id)
    return module.emitError("the pipeline axis '")
               << axis.getValue() << "' is not an axis of the mesh",
           failure();
  p.axis = axis.getValue().str();
  p.schedule = schedule.getValue().str();
  p.ranks = mesh->size(*id);
  p.chunks = chunks.getInt();
  p.microbatches = microbatches.getInt();
  p.mesh = *mesh;
  for (Attribute stage : stages) {
    auto paths = llvm::dyn_cast<ArrayAttr>(stage);
    if (!paths)
      return module.emitError("dt.pipeline stages must be lists of paths"),
             failure();
    std::vector<std::string> list;
    for (Attribute path : paths)
      if (auto s = llvm::dyn_cast<StringAttr>(path))
        list.push_back(s.getValue().str());
    p.stages.push_back(std::move(list));
  }
  if (p.numStages() != p.ranks * p.chunks)
    return module.emitError("dt.pipeline lists ")
               << p.numStages() << " stages for " << p.ranks << " ranks of "
               << p.chunks << " chunks",
           failure();
  return std::optional<PipelineInfo>(std::move(p));
}

int64_t PipelineInfo::stageOfLayer(StringRef layer) const {
  if (layer.empty())
    return -1;
  for (auto [s, paths] : llvm::enumerate(stages))
    for (const std::string &path : paths)
      if (layer == path ||
          (layer.starts_with(path) && layer[path.size()] == '.'))
        return int64_t(s);
  return -1;
}

std::vector<int64_t> PipelineInfo::worldRanksAt(int64_t ppRank) const {
  AxisId id = *mesh.find(axis);
  // Row-major: the stride of an axis is the product of the sizes after it.
  int64_t stride = 1;
  for (size_t a = id + 1; a < mesh.rank(); ++a)
    stride *= mesh.size(AxisId(a));
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < mesh.worldSize(); ++r)
    if ((r / stride) % mesh.size(id) == ppRank)
      ranks.push_back(r);
  return ranks;
}

StringRef dt::layerOf(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().getValue();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (StringRef layer = layerOf(inner); !layer.empty())
        return layer;
  if (auto call = llvm::dyn_cast<CallSiteLoc>(loc))
    return layerOf(call.getCallee());
  return "";
}

int64_t dt::stageOf(Operation *op) {
  auto a = op->getAttrOfType<IntegerAttr>(names::kStageAttr);
  return a ? a.getInt() : -1;
}

int64_t dt::pipelineRankOf(Operation *global) {
  auto a = global->getAttrOfType<IntegerAttr>(names::kPipelineRankAttr);
  return a ? a.getInt() : -1;
}

FailureOr<pipeline::Schedule> dt::buildSchedule(ModuleOp module,
                                               const PipelineInfo &info) {
  std::optional<pipeline::Kind> kind = pipeline::parseKind(info.schedule);
  if (!kind)
    return module.emitError("unknown pipeline schedule '")
               << info.schedule << "'",
           failure();
  llvm::Expected<pipeline::Schedule> schedule = pipeline::buildSchedule(
      *kind, info.ranks, info.microbatches, info.chunks);
  if (!schedule)
    return module.emitError(llvm::toString(schedule.takeError())), failure();
  return std::move(*schedule);
}
