//===- ParallelCheck.cpp - The parallel block -----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The mesh first (named axes, positive sizes), then every key that names axes
// against it: data, zero, tensor, pipeline (stages are model paths, one per
// rank of the pipeline axis, in model order and disjoint), and explicit shard
// layouts (one entry per dimension, each dimension divisible by the axes it is
// split over). Tensor parallelism also needs every @column/@row parameter's
// split dimension divisible by the tensor axis (an @vocab table is padded). The batch arithmetic that involves
// the data axes is in TrainCheck.cpp.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "llvm/ADT/StringSet.h"

#include <functional>
#include <map>

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {
class ParallelChecker {
public:
  ParallelChecker(SemaContext &ctx, const ModuleScope &main,
                  const ast::ParallelDecl &decl, Job &job, const Instance *root)
      : ctx(ctx), decl(decl), job(job), p(job.parallel), root(root),
        keys(ctx, main) {}

  LogicalResult run();

private:
  LogicalResult checkMesh(const ast::Expr &expr);
  /// Requires `name` to be a mesh axis; `role` says who names it.
  LogicalResult requireAxis(llvm::StringRef name, llvm::SMLoc loc,
                            llvm::StringRef role);
  FailureOr<std::vector<std::pair<std::string, llvm::SMLoc>>>
  axisList(const ast::Expr &expr, llvm::StringRef what);
  LogicalResult checkPipeline(const ast::Expr &expr);
  LogicalResult checkShard(const ast::ShardEntry &shard);
  LogicalResult checkTensorSplits(llvm::SMLoc tensorLoc);
  std::string meshText() const;

  SemaContext &ctx;
  const ast::ParallelDecl &decl;
  Job &job;
  ParallelConfig &p;
  const Instance *root;
  KeyEvaluator keys;
  bool hasMesh = false;
};
} // namespace

std::string ParallelChecker::meshText() const {
  std::string text;
  for (const MeshAxis &axis : p.mesh)
    text += (text.empty() ? "" : ", ") + axis.name + " = " +
            std::to_string(axis.size);
  return text;
}

LogicalResult ParallelChecker::checkMesh(const ast::Expr &expr) {
  const auto *tuple = llvm::dyn_cast<ast::TupleExpr>(&expr);
  if (!tuple || tuple->getItems().empty() ||
      llvm::any_of(tuple->getItems(),
                   [](const ast::Field &f) { return !f.isNamed(); })) {
    ctx.error(expr.getLoc(), "'mesh' must name its axes with their sizes, "
                             "such as (dp = 4, tp = 2)");
    return failure();
  }
  int64_t world = 1;
  for (const ast::Field &item : tuple->getItems()) {
    if (llvm::any_of(p.mesh,
                     [&](const MeshAxis &a) { return a.name == item.name; })) {
      ctx.error(item.nameLoc, "the mesh names axis '" + item.name + "' twice");
      return failure();
    }
    if (item.name == "_") {
      ctx.error(item.nameLoc, "'_' means replicated and cannot name an axis");
      return failure();
    }
    FailureOr<int64_t> size =
        keys.integer(*item.value, "the size of axis '" + item.name + "'", 1);
    if (failed(size))
      return failure();
    if (llvm::MulOverflow(world, *size, world) || world > (1 << 20)) {
      ctx.error(item.value->getLoc(), "the mesh has more than 1048576 ranks");
      return failure();
    }
    p.mesh.push_back({item.name, *size, ctx.diag.resolve(item.nameLoc)});
  }
  hasMesh = true;
  return success();
}

LogicalResult ParallelChecker::requireAxis(llvm::StringRef name,
                                           llvm::SMLoc loc,
                                           llvm::StringRef role) {
  if (llvm::any_of(p.mesh, [&](const MeshAxis &a) { return a.name == name; }))
    return success();
  if (!hasMesh) {
    ctx.error(loc, role + " names axis '" + name +
                       "', but the parallel block has no 'mesh'");
    return failure();
  }
  std::vector<std::string> names;
  for (const MeshAxis &axis : p.mesh)
    names.push_back(axis.name);
  ctx.error(loc, role + " names axis '" + name + "', which the mesh (" +
                     meshText() + ") does not have" + suggest(name, names));
  return failure();
}

FailureOr<std::vector<std::pair<std::string, llvm::SMLoc>>>
ParallelChecker::axisList(const ast::Expr &expr, llvm::StringRef what) {
  std::vector<std::pair<std::string, llvm::SMLoc>> axes;
  std::vector<const ast::Expr *> items;
  if (const auto *tuple = llvm::dyn_cast<ast::TupleExpr>(&expr)) {
    for (const ast::Field &f : tuple->getItems())
      items.push_back(f.value.get());
  } else if (const auto *list = llvm::dyn_cast<ast::ListExpr>(&expr)) {
    for (const ast::ExprPtr &e : list->getItems())
      items.push_back(e.get());
  } else {
    items.push_back(&expr);
  }
  for (const ast::Expr *item : items) {
    FailureOr<std::string> name = keys.name(*item, what);
    if (failed(name))
      return failure();
    if (llvm::any_of(axes, [&](const auto &a) { return a.first == *name; })) {
      ctx.error(item->getLoc(), what + " names axis '" + *name + "' twice");
      return failure();
    }
    axes.push_back({*name, item->getLoc()});
  }
  return axes;
}

LogicalResult ParallelChecker::checkPipeline(const ast::Expr &expr) {
  FailureOr<std::vector<const ast::Field *>> fields =
      keys.record(expr, "'pipeline'",
                  {{"axis", true},
                   {"stages", true},
                   {"schedule", false},
                   {"microbatches", true}});
  if (failed(fields))
    return failure();
  PipelineConfig config;
  config.loc = ctx.diag.resolve(expr.getLoc());
  const ast::Expr &axisExpr = *(*fields)[0]->value;
  FailureOr<std::string> axis = keys.name(axisExpr, "the pipeline axis");
  if (failed(axis) ||
      failed(requireAxis(*axis, axisExpr.getLoc(), "pipeline parallelism")))
    return failure();
  if (llvm::is_contained(p.dataAxes, *axis) || p.tensorAxis == *axis) {
    ctx.error(axisExpr.getLoc(), "axis '" + *axis +
                                     "' cannot carry the pipeline and also "
                                     "data or tensor parallelism");
    return failure();
  }
  config.axis = *axis;

  std::string schedule = "1f1b";
  if (const ast::Field *field = (*fields)[2]) {
    FailureOr<std::string> s =
        keys.string(*field->value, "the pipeline schedule");
    if (failed(s))
      return failure();
    schedule = *s;
  }
  if (schedule == "gpipe")
    config.schedule = PipelineConfig::Schedule::GPipe;
  else if (schedule == "1f1b")
    config.schedule = PipelineConfig::Schedule::OneFOneB;
  else if (schedule == "interleaved")
    config.schedule = PipelineConfig::Schedule::Interleaved;
  else {
    ctx.error((*fields)[2]->value->getLoc(),
              "unknown pipeline schedule \"" + schedule +
                  "\"; expected \"gpipe\", \"1f1b\" or \"interleaved\"" +
                  suggest(schedule, {"gpipe", "1f1b", "interleaved"}));
    return failure();
  }
  FailureOr<int64_t> microbatches =
      keys.integer(*(*fields)[3]->value, "'microbatches'", 1);
  if (failed(microbatches))
    return failure();
  config.microbatches = *microbatches;

  const ast::Expr &stagesExpr = *(*fields)[1]->value;
  const auto *list = llvm::dyn_cast<ast::ListExpr>(&stagesExpr);
  if (!list || list->getItems().empty()) {
    ctx.error(stagesExpr.getLoc(), "'stages' must list model paths, such as "
                                   "[model.blocks[0:4], model.blocks[4:8]]");
    return failure();
  }
  int64_t ranks = p.getAxisSize(*axis);
  int64_t count = list->getItems().size();
  bool interleaved = config.schedule == PipelineConfig::Schedule::Interleaved;
  if (interleaved ? count % ranks != 0 || count == ranks : count != ranks) {
    ctx.error(stagesExpr.getLoc(),
              "the pipeline lists " + std::to_string(count) + " stage" +
                  (count == 1 ? "" : "s") + " but axis '" + *axis + "' has " +
                  std::to_string(ranks) + " ranks" +
                  (interleaved ? "; an interleaved schedule needs a multiple "
                                 "(two or more stages per rank)"
                               : ""));
    return failure();
  }
  // Interleaving walks the micro-batches in groups of one per pipeline rank.
  if (interleaved && config.microbatches % ranks != 0) {
    ctx.error((*fields)[3]->value->getLoc(),
              "the interleaved schedule needs a number of micro-batches that "
              "the " +
                  std::to_string(ranks) + " ranks of axis '" + *axis +
                  "' divide, not " + std::to_string(config.microbatches));
    return failure();
  }
  if (!root) {
    p.pipeline = config;
    return success();
  }
  // Layers in depth-first (execution) order: stage k must run after stage k-1.
  std::map<const Instance *, unsigned> order;
  std::function<void(const Instance &)> number = [&](const Instance &inst) {
    order[&inst] = order.size();
    for (const InstanceChild &child : inst.children)
      for (const std::unique_ptr<Instance> &item : child.items)
        number(*item);
  };
  number(*root);
  std::map<const Instance *, llvm::SMLoc> owner;
  unsigned previousLast = 0;
  llvm::SMLoc previousLoc;
  for (const ast::ExprPtr &item : list->getItems()) {
    FailureOr<PathTarget> target = resolvePath(ctx, *item, *root);
    if (failed(target))
      return failure();
    if (target->kind == PathTarget::Kind::Param) {
      ctx.error(item->getLoc(), "a pipeline stage is a set of layers, but '" +
                                    target->text + "' is a parameter");
      return failure();
    }
    PipelineStage stage;
    stage.path = target->text;
    stage.loc = ctx.diag.resolve(item->getLoc());
    for (const Instance *layer : target->layers()) {
      // A layer may not be in two stages, nor inside another stage's layer.
      for (const Instance *up = layer; up; up = up->parent) {
        auto it = owner.find(up);
        if (it != owner.end()) {
          ctx.error(item->getLoc(), "'" + layer->path +
                                        "' is in two pipeline "
                                        "stages");
          ctx.note(it->second, "the other stage");
          return failure();
        }
      }
      owner[layer] = item->getLoc();
      stage.instances.push_back(job.findInstance(layer->path));
    }
    // Stages run one after another: each must start after the previous one ends.
    auto layers = target->layers();
    if (!layers.empty()) {
      unsigned first = order[layers.front()], last = order[layers.back()];
      if (!config.stages.empty() && first < previousLast) {
        ctx.error(item->getLoc(), "pipeline stage '" + target->text +
                                      "' runs before the previous stage's "
                                      "layers; list stages in model order");
        ctx.note(previousLoc, "the previous stage");
        return failure();
      }
      previousLast = last;
      previousLoc = item->getLoc();
    }
    config.stages.push_back(std::move(stage));
  }
  // A list the stages slice is covered: a layer of it in no stage would have
  // no rank to run it.
  for (const auto &[layer, loc] : owner) {
    const Instance *parent = layer->parent;
    if (!parent)
      continue;
    for (const InstanceChild &child : parent->children) {
      if (!child.isList ||
          llvm::none_of(child.items, [&, l = layer](const auto &item) {
            return item.get() == l;
          }))
        continue;
      for (const std::unique_ptr<Instance> &item : child.items)
        if (!owner.count(item.get())) {
          ctx.error(list->getLoc(), "'" + item->path +
                                        "' is in no pipeline stage: the "
                                        "stages must cover the layers they "
                                        "slice");
          return failure();
        }
    }
  }
  p.pipeline = std::move(config);
  return success();
}

LogicalResult ParallelChecker::checkShard(const ast::ShardEntry &shard) {
  FailureOr<PathTarget> target = resolvePath(ctx, *shard.path, *root);
  if (failed(target))
    return failure();
  if (target->kind != PathTarget::Kind::Param) {
    ctx.error(shard.path->getLoc(), "'shard' lays out one parameter, but '" +
                                        target->text + "' is a layer");
    return failure();
  }
  const InstanceParam &param = *target->param;
  const ast::Expr &layoutExpr = *shard.layout;
  const auto *layout = llvm::dyn_cast<ast::ListExpr>(&layoutExpr);
  if (!layout) {
    ctx.error(layoutExpr.getLoc(), "a shard layout is a list with one entry "
                                   "per dimension, such as [tp, _]");
    return failure();
  }
  if (layout->getItems().size() != param.dims.size()) {
    ctx.error(layoutExpr.getLoc(),
              "'" + target->text + "' has rank " +
                  std::to_string(param.dims.size()) + " but the layout lists " +
                  std::to_string(layout->getItems().size()) + " entr" +
                  (layout->getItems().size() == 1 ? "y" : "ies"));
    return failure();
  }
  if (llvm::any_of(p.shards, [&](const ShardSpec &s) {
        return s.param == target->text;
      })) {
    ctx.error(shard.loc, "'" + target->text + "' is laid out twice");
    return failure();
  }
  ShardSpec spec;
  spec.param = target->text;
  spec.paramIndex = param.jobIndex < 0 ? 0 : param.jobIndex;
  spec.loc = ctx.diag.resolve(shard.loc);
  llvm::StringSet<> used;
  for (size_t d = 0; d < layout->getItems().size(); ++d) {
    const ast::Expr &entry = *layout->getItems()[d];
    std::vector<std::string> axes;
    if (const auto *name = llvm::dyn_cast<ast::NameExpr>(&entry);
        name && name->getName() == "_") {
      spec.dims.push_back({});
      continue;
    }
    FailureOr<std::vector<std::pair<std::string, llvm::SMLoc>>> list =
        axisList(entry, "a shard entry");
    if (failed(list))
      return failure();
    int64_t parts = 1;
    for (const auto &[axis, loc] : *list) {
      if (failed(
              requireAxis(axis, loc, "the layout of '" + target->text + "'")))
        return failure();
      if (!used.insert(axis).second) {
        ctx.error(loc, "axis '" + axis + "' splits two dimensions of '" +
                           target->text + "'");
        return failure();
      }
      parts *= p.getAxisSize(axis);
      axes.push_back(axis);
    }
    int64_t size = ctx.syms.resolve(param.dims[d]).getConstant().value_or(0);
    if (size % parts != 0) {
      ctx.error(entry.getLoc(),
                "dimension " + std::to_string(d) + " of '" + target->text +
                    "' (" + std::to_string(size) + ") is not divisible by " +
                    std::to_string(parts) + " shards");
      return failure();
    }
    spec.dims.push_back(std::move(axes));
  }
  p.shards.push_back(std::move(spec));
  return success();
}

/// The layer at `path` in the tree under `root`.
static const Instance *findLayer(const Instance *root, llvm::StringRef path) {
  if (!root || root->path == path)
    return root;
  for (const InstanceChild &child : root->children)
    for (const auto &item : child.items)
      if (path == item->path || path.starts_with(item->path + "."))
        return findLayer(item.get(), path);
  return nullptr;
}

LogicalResult ParallelChecker::checkTensorSplits(llvm::SMLoc tensorLoc) {
  int64_t tp = p.getAxisSize(p.tensorAxis);
  for (const ParamInfo &param : job.params) {
    if (!param.tensorDim)
      continue;
    // A vocabulary that the axis does not divide is padded, as Megatron pads
    // it: the padded rows and logits are masked (DESIGN.md, "Uneven sizes are
    // normal"). Split features or heads would change meaning.
    int64_t size = param.type.shape[*param.tensorDim];
    if (size % tp == 0 || param.annotation == Annotation::Vocab)
      continue;
    ctx.error(tensorLoc, "tensor parallelism over '" + p.tensorAxis + "' (" +
                             std::to_string(tp) + ") splits dimension " +
                             std::to_string(*param.tensorDim) + " of '" +
                             param.name + "' (" + std::to_string(size) +
                             "), which " + std::to_string(tp) +
                             " does not divide");
    if (const Instance *owner = findLayer(root, param.owner->path))
      for (const InstanceParam &p : owner->params)
        if (p.jobIndex == static_cast<int>(param.index))
          ctx.note(
              p.member->getLoc(),
              "'" + param.name + "' is split by @" +
                  toString(*param.annotation) + " on " +
                  (p.member->getAnnotations().empty() ? "its layer" : "it"));
    return failure();
  }
  return success();
}

LogicalResult ParallelChecker::run() {
  p.loc = ctx.diag.resolve(decl.getLoc());
  std::vector<std::string> known = {"mesh", "data", "zero", "tensor",
                                    "pipeline", "sync_batchnorm", "offload"};
  std::map<std::string, const ast::KeyValue *> entries;
  bool ok = true;
  for (const ast::KeyValue &kv : decl.getEntries()) {
    if (!llvm::is_contained(known, kv.key)) {
      ctx.error(kv.keyLoc, "unknown parallel key '" + kv.key + "'" +
                               suggest(kv.key, known));
      ok = false;
      continue;
    }
    auto [it, inserted] = entries.try_emplace(kv.key, &kv);
    if (!inserted) {
      ctx.error(kv.keyLoc, "'" + kv.key + "' is given twice");
      ctx.note(it->second->keyLoc, "first given here");
      ok = false;
    }
  }
  if (!ok)
    return failure();
  auto get = [&](llvm::StringRef key) -> const ast::Expr * {
    auto it = entries.find(key.str());
    return it == entries.end() ? nullptr : it->second->value.get();
  };

  if (const ast::Expr *mesh = get("mesh"))
    if (failed(checkMesh(*mesh)))
      return failure();
  if (const ast::Expr *data = get("data")) {
    FailureOr<std::vector<std::pair<std::string, llvm::SMLoc>>> axes =
        axisList(*data, "'data'");
    if (failed(axes))
      return failure();
    for (const auto &[axis, loc] : *axes) {
      if (failed(requireAxis(axis, loc, "data parallelism")))
        return failure();
      p.dataAxes.push_back(axis);
    }
  }
  if (const ast::Expr *zero = get("zero")) {
    FailureOr<int64_t> level = keys.integer(*zero, "'zero'", 0);
    if (failed(level))
      return failure();
    if (*level > 3) {
      ctx.error(zero->getLoc(),
                "'zero' is 0, 1, 2 or 3, not " + std::to_string(*level));
      return failure();
    }
    if (*level > 0 && p.dataAxes.empty()) {
      ctx.error(zero->getLoc(), "ZeRO shards over the data axes, but 'data' "
                                "names none");
      return failure();
    }
    p.zero = *level;
  }
  if (const ast::Expr *sync = get("sync_batchnorm")) {
    FailureOr<bool> on = keys.boolean(*sync, "'sync_batchnorm'");
    if (failed(on))
      return failure();
    if (*on && p.dataAxes.empty()) {
      ctx.error(sync->getLoc(), "sync_batchnorm takes batch statistics over "
                                "the data axes, but 'data' names none");
      return failure();
    }
    p.syncBatchNorm = *on;
  }
  if (const ast::Expr *offload = get("offload")) {
    FailureOr<std::string> what = keys.name(*offload, "'offload'");
    if (failed(what))
      return failure();
    if (*what != "optimizer") {
      ctx.error(offload->getLoc(),
                "'offload' moves the optimizer state and its update to host "
                "memory, so it is \"optimizer\", not \"" +
                    *what + "\"");
      return failure();
    }
    p.offloadOptimizer = true;
  }
  llvm::SMLoc tensorLoc;
  if (const ast::Expr *tensor = get("tensor")) {
    FailureOr<std::string> axis = keys.name(*tensor, "'tensor'");
    if (failed(axis) ||
        failed(requireAxis(*axis, tensor->getLoc(), "tensor parallelism")))
      return failure();
    if (llvm::is_contained(p.dataAxes, *axis)) {
      ctx.error(tensor->getLoc(), "axis '" + *axis +
                                      "' cannot carry both "
                                      "data and tensor "
                                      "parallelism");
      return failure();
    }
    p.tensorAxis = *axis;
    tensorLoc = tensor->getLoc();
  }
  if (const ast::Expr *pipeline = get("pipeline"))
    if (failed(checkPipeline(*pipeline)))
      return failure();
  // The statistics' partial sums would cross stages unevenly sharded.
  if (p.syncBatchNorm && p.pipeline) {
    ctx.error(get("sync_batchnorm")->getLoc(),
              "sync_batchnorm in a pipelined program is not supported yet: "
              "remove one of 'sync_batchnorm' and 'pipeline' (without "
              "sync_batchnorm each data rank keeps its own statistics, as "
              "DDP does)");
    return failure();
  }
  if (!root)
    return success();
  if (!p.tensorAxis.empty() && failed(checkTensorSplits(tensorLoc)))
    return failure();
  for (const ast::ShardEntry &shard : decl.getShards())
    if (failed(checkShard(shard)))
      ok = false;
  return success(ok);
}

LogicalResult sema::checkParallel(SemaContext &ctx, const ModuleScope &main,
                                  const ast::ParallelDecl &decl, Job &job,
                                  const Instance *root) {
  return ParallelChecker(ctx, main, decl, job, root).run();
}
