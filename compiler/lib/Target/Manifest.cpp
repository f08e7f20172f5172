//===- Manifest.cpp - the program manifest ------------------------------===//
//
// Serialises the planned arena and the job description to the JSON of
// docs/abi.md. The job description is already a dictionary attribute (built by
// MLIRGen), so this is a direct attribute-to-JSON conversion plus one entry per
// dt.global.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/Manifest.h"
#include "dt/Analysis/Cost.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Pipeline/Schedule.h"
#include "dt/Transforms/OffloadInfo.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace dt;

namespace {

/// JSON for an attribute of a job description (dictionaries, arrays, scalars).
FailureOr<llvm::json::Value> toJSON(Attribute attr, Operation *owner) {
  if (!attr || llvm::isa<UnitAttr>(attr))
    return llvm::json::Value(nullptr);
  if (auto s = llvm::dyn_cast<StringAttr>(attr))
    return llvm::json::Value(s.getValue().str());
  if (auto b = llvm::dyn_cast<BoolAttr>(attr))
    return llvm::json::Value(b.getValue());
  if (auto i = llvm::dyn_cast<IntegerAttr>(attr))
    return llvm::json::Value(i.getInt());
  if (auto f = llvm::dyn_cast<FloatAttr>(attr))
    return llvm::json::Value(f.getValueAsDouble());
  if (auto a = llvm::dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (Attribute e : a) {
      FailureOr<llvm::json::Value> v = toJSON(e, owner);
      if (failed(v))
        return failure();
      out.push_back(std::move(*v));
    }
    return llvm::json::Value(std::move(out));
  }
  if (auto d = llvm::dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object out;
    for (NamedAttribute n : d) {
      FailureOr<llvm::json::Value> v = toJSON(n.getValue(), owner);
      if (failed(v))
        return failure();
      out[n.getName().str()] = std::move(*v);
    }
    return llvm::json::Value(std::move(out));
  }
  return owner->emitError("cannot describe ") << attr << " in the manifest",
         failure();
}

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(32))
    return "i32";
  return "i64";
}

/// A layout as the manifest writes it: axes by index into the mesh.
llvm::json::Object layoutJSON(const dt::Sharding &s) {
  llvm::json::Array dims;
  for (const dt::DimSharding &d : s.dims)
    dims.push_back(llvm::json::Object{
        {"axes", llvm::json::Array(d.axes)},
        {"blocks", d.isSplit() ? d.blocks : 1}});
  return llvm::json::Object{{"dims", std::move(dims)},
                            {"partial", llvm::json::Array(s.partial)}};
}

} // namespace

void dt::numberCollectives(ModuleOp module) {
  int64_t next = 0;
  module.walk([&](Operation *op) {
    if (auto id = op->getAttrOfType<IntegerAttr>("dt.id"))
      next = std::max(next, id.getInt() + 1);
  });
  module.walk([&](Operation *op) {
    if (collectiveKind(op) && !op->hasAttr("dt.id"))
      op->setAttr("dt.id",
                  IntegerAttr::get(IntegerType::get(op->getContext(), 64),
                                   next++));
  });
}

/// Whether `op` repeats a forward op for backward (`recompute`): marked by
/// dt-autodiff, or a fused region made of such ops only.
static bool isRecomputed(Operation *op) {
  if (op->hasAttr(names::kRecomputedAttr))
    return true;
  auto fused = llvm::dyn_cast<FusedOp>(op);
  if (!fused)
    return false;
  bool any = false;
  for (Operation &inner : fused.getBody().front()) {
    if (inner.hasTrait<OpTrait::IsTerminator>() || isa<ConstantOp>(inner))
      continue;
    if (!inner.hasAttr(names::kRecomputedAttr))
      return false;
    any = true;
  }
  return any;
}

/// The FLOPs of `fn`'s ops that the model needs: all but recomputation's.
static double modelFlops(func::FuncOp fn) {
  double flops = 0;
  for (Operation &op : fn.getBody().front())
    if (!isRecomputed(&op))
      flops += costOf(&op).flops;
  return flops;
}

/// What a span's op is, for people: its name without the dialect, and for a
/// fused region the ops of its body (the first few).
static std::string spanOpName(Operation *op) {
  std::string name = op->getName().stripDialect().str();
  auto fused = llvm::dyn_cast<FusedOp>(op);
  if (!fused)
    return name;
  constexpr int kShown = 4;
  int shown = 0, rest = 0;
  name += "(";
  for (Operation &inner : fused.getBody().front()) {
    if (inner.hasTrait<OpTrait::IsTerminator>() || isa<ConstantOp>(inner))
      continue;
    if (shown == kShown) {
      ++rest;
      continue;
    }
    name += (shown++ ? "," : "") + inner.getName().stripDialect().str();
  }
  if (rest)
    name += llvm::formatv(",+{0}", rest).str();
  return name + ")";
}

/// The manifest's `spans`: per op that dt-number-spans numbered, in number
/// order, its entry point, op, layer and cost, and the collective it issues
/// or waits for.
static llvm::json::Array spansJSON(ModuleOp module) {
  llvm::json::Array spans;
  module.walk([&](func::FuncOp fn) {
    for (Operation &op : fn.getBody().front()) {
      auto span = op.getAttrOfType<IntegerAttr>(names::kSpanAttr);
      if (!span)
        continue;
      Cost cost = costOf(&op);
      llvm::json::Object s{{"id", span.getInt()},
                           {"entry", fn.getSymName().str()},
                           {"op", spanOpName(&op)},
                           {"flops", cost.flops},
                           {"bytes", cost.bytes}};
      if (StringRef layer = layerOf(op.getLoc()); !layer.empty())
        s["layer"] = layer.str();
      // The kernel call the prediction times on the machine (a product,
      // attention), with its size arguments.
      if (std::optional<TimedKernel> k = timedKernel(&op))
        s["kernel"] = llvm::json::Object{{"name", k->kernel},
                                         {"args", llvm::json::Array(k->args)}};
      Operation *collective = &op;
      if (auto w = llvm::dyn_cast<WaitOp>(op))
        collective = w.getPending().getDefiningOp();
      if (collective && collectiveKind(collective))
        if (auto id = collective->getAttrOfType<IntegerAttr>("dt.id"))
          s["collective"] = id.getInt();
      spans.push_back(std::move(s));
    }
  });
  return spans;
}

/// The manifest's `pipeline`: per virtual stage its entry points and pipe
/// buffers, and per pipeline rank the order of its passes (docs/abi.md).
static FailureOr<std::optional<llvm::json::Object>>
pipelineJSON(ModuleOp module) {
  FailureOr<std::optional<PipelineInfo>> info = PipelineInfo::get(module);
  if (failed(info))
    return failure();
  if (!*info)
    return std::optional<llvm::json::Object>();
  const PipelineInfo &p = **info;
  FailureOr<pipeline::Schedule> schedule = dt::buildSchedule(module, p);
  if (failed(schedule))
    return failure();

  auto list = [](func::FuncOp fn, StringRef attr) {
    llvm::json::Array names;
    if (auto a = fn->getAttrOfType<ArrayAttr>(attr))
      for (auto s : a.getAsValueRange<StringAttr>())
        names.push_back(s.str());
    return names;
  };
  llvm::json::Array stages;
  for (int64_t s = 0; s < p.numStages(); ++s) {
    auto fwd = module.lookupSymbol<func::FuncOp>(("pipe_fwd_" + Twine(s)).str());
    auto bwd = module.lookupSymbol<func::FuncOp>(("pipe_bwd_" + Twine(s)).str());
    if (!fwd || !bwd)
      return module.emitError("the manifest needs @pipe_fwd_")
                 << s << " and @pipe_bwd_" << s << " (dt-pipeline-split)",
             failure();
    // The forward reads the batch: the runtime stages the micro-batch first.
    bool readsBatch = false;
    fwd.walk([&](LoadOp load) {
      if (GlobalOp g = lookupGlobal(module, load.getGlobal()))
        readsBatch |= g.getRole() == Role::input && g->hasAttr(names::kBatchAttr);
    });
    // The stash keeps one micro-batch per forward whose backward has not run.
    int64_t slots = schedule->peakInFlight(s);
    llvm::json::Object stage{
        {"forward", ("dt_" + fwd.getSymName()).str()},
        {"backward", ("dt_" + bwd.getSymName()).str()},
        {"reads_batch", readsBatch},
        {"send", list(fwd, "dt.pipe_send")},
        {"recv", list(fwd, "dt.pipe_recv")},
        {"grad_send", list(bwd, "dt.pipe_send")},
        {"grad_recv", list(bwd, "dt.pipe_recv")},
        {"stash", list(fwd, "dt.pipe_stash")},
        {"stash_slots", slots}};
    // The slot of the stash each pass uses: the runtime writes it first.
    if (auto index = module.lookupSymbol<GlobalOp>(
            ("pipe/s" + Twine(s) + "/slot").str()))
      stage["slot_index"] = index.getSymName().str();
    if (auto eval = module.lookupSymbol<func::FuncOp>(
            ("pipe_eval_" + Twine(s)).str())) {
      bool evalReadsBatch = false;
      eval.walk([&](LoadOp load) {
        if (GlobalOp g = lookupGlobal(module, load.getGlobal()))
          evalReadsBatch |=
              g.getRole() == Role::input && g->hasAttr(names::kBatchAttr);
      });
      stage["eval"] = ("dt_" + eval.getSymName()).str();
      stage["eval_reads_batch"] = evalReadsBatch;
      stage["eval_send"] = list(eval, "dt.pipe_send");
      stage["eval_recv"] = list(eval, "dt.pipe_recv");
    }
    stages.push_back(std::move(stage));
  }
  llvm::json::Array apply, actions;
  for (int64_t r = 0; r < p.ranks; ++r) {
    apply.push_back(("dt_" + names::kApplyStep + "_pp" + Twine(r)).str());
    llvm::json::Array mine;
    for (const pipeline::Action &a : schedule->perRank[size_t(r)])
      mine.push_back(llvm::json::Array{a.forward ? "F" : "B", a.microbatch,
                                       a.stage, a.slot});
    actions.push_back(std::move(mine));
  }
  return std::optional<llvm::json::Object>(llvm::json::Object{
      {"axis", p.axis},
      {"schedule", p.schedule},
      {"microbatches", p.microbatches},
      {"chunks", p.chunks},
      {"slots", schedule->slots},
      {"stages", std::move(stages)},
      {"apply", std::move(apply)},
      {"actions", std::move(actions)}});
}

FailureOr<std::string> dt::buildManifest(ModuleOp module) {
  numberCollectives(module);
  FailureOr<MeshInfo> mesh = MeshInfo::get(module);
  if (failed(mesh))
    return failure();
  auto arena = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
  auto job = module->getAttrOfType<DictionaryAttr>("dt.job");
  if (!arena || !job)
    return module.emitError("the manifest needs a planned module with dt.job"),
           failure();

  FailureOr<llvm::json::Value> jobJson = toJSON(job, module);
  if (failed(jobJson))
    return failure();
  llvm::json::Object manifest = std::move(*jobJson->getAsObject());
  manifest["abi"] = 1;
  manifest["arena"] =
      llvm::json::Object{{"bytes", arena.getInt()}, {"align", 64}};
  if (auto offload = module->getAttrOfType<StringAttr>(names::kOffloadAttr)) {
    // What the runtime needs to keep the state in host memory: where the
    // device's part of the arena starts, and which ranges the host mirrors
    // and copies each step (a pipeline's modules have no split).
    llvm::json::Object split{{"what", offload.getValue().str()}};
    auto hostBytes = module->getAttrOfType<IntegerAttr>(names::kHostBytesAttr);
    if (std::optional<OffloadInfo> info = OffloadInfo::get(module);
        info && hostBytes) {
      auto ranges = [](const std::vector<GlobalOp> &globals) {
        llvm::json::Array list;
        for (auto [offset, bytes] : OffloadInfo::ranges(globals))
          list.push_back(llvm::json::Array{offset, bytes});
        return list;
      };
      split["host_bytes"] = hostBytes.getInt();
      split["mirrored"] = ranges(info->mirrored);
      split["down"] = ranges(info->down);
      split["up"] = ranges(info->up);
      split["zero"] = ranges(info->zeroed);
    }
    manifest["offload"] = std::move(split);
  }

  if (mesh->rank() > 0) {
    llvm::json::Array axes;
    for (size_t a = 0; a < mesh->rank(); ++a)
      axes.push_back(llvm::json::Object{{"name", mesh->name(a).str()},
                                        {"size", mesh->size(a)}});
    manifest["mesh"] = llvm::json::Object{{"axes", std::move(axes)}};
  }

  // The FLOPs the cost model counts in one optimizer step of this rank (its
  // micro-batches' forward and backward, then the update) and the precision
  // they run in: what MFU divides by the device's peak. A pipeline's ranks
  // differ: it counts their mean (each stage's passes once per micro-batch
  // and each pipeline rank's update, over the pipeline's ranks), so that MFU
  // is the job's.
  std::optional<std::pair<double, double>> stepFlops;
  if (auto grad = module.lookupSymbol<func::FuncOp>("grad_step")) {
    int64_t micro = 1;
    if (auto a = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
      micro = a.getInt();
    stepFlops = {costOf(grad).flops * double(micro),
                 modelFlops(grad) * double(micro)};
    if (auto apply = module.lookupSymbol<func::FuncOp>("apply_step")) {
      stepFlops->first += costOf(apply).flops;
      stepFlops->second += modelFlops(apply);
    }
  } else if (FailureOr<std::optional<PipelineInfo>> pipeline =
                 PipelineInfo::get(module);
             succeeded(pipeline) && *pipeline) {
    const PipelineInfo &p = **pipeline;
    stepFlops = {0.0, 0.0};
    for (auto fn : module.getOps<func::FuncOp>()) {
      StringRef name = fn.getSymName();
      double calls =
          name.starts_with("pipe_fwd_") || name.starts_with("pipe_bwd_")
              ? double(p.microbatches)
          : name.starts_with("apply_step") ? 1.0
                                           : 0.0;
      if (fn.isExternal() || calls == 0)
        continue;
      stepFlops->first += calls * costOf(fn).flops / double(p.ranks);
      stepFlops->second += calls * modelFlops(fn) / double(p.ranks);
    }
  }
  if (stepFlops) {
    auto [flops, model] = *stepFlops;
    std::string precision = "f32";
    if (auto p = module->getAttrOfType<StringAttr>("dt.precision"))
      precision = p.getValue().str();
    // Hardware FLOPs (what runs, recomputation included: HFU) and model
    // FLOPs (what the model needs: MFU).
    manifest["cost"] = llvm::json::Object{{"flops_per_step", flops},
                                          {"model_flops_per_step", model},
                                          {"precision", precision}};
  }

  llvm::json::Array buffers;
  for (GlobalOp g : module.getOps<GlobalOp>()) {
    RankedTensorType t = g.getTensorType();
    llvm::json::Object b{{"name", g.getSymName().str()},
                         {"role", stringifyRole(g.getRole()).str()},
                         {"dtype", dtypeName(t.getElementType())},
                         {"shape", llvm::json::Array(t.getShape())},
                         {"offset", *g.getOffset()}};
    if (g.getSharding() && mesh->rank() > 0) {
      FailureOr<Sharding> layout = Sharding::fromAttr(
          *g.getSharding(), *mesh, [&] { return g.emitError(); });
      if (failed(layout))
        return failure();
      b["global_shape"] = llvm::json::Array(g.getGlobalTensorType().getShape());
      b["sharding"] = layoutJSON(*layout);
    }
    if (int64_t rank = pipelineRankOf(g); rank >= 0)
      b["pp_rank"] = rank;
    if (g->hasAttr(names::kBufferParamAttr))
      b["buffer"] = true;
    if (auto init = g.getInit()) {
      FailureOr<llvm::json::Value> v = toJSON(*init, g);
      if (failed(v))
        return failure();
      b["init"] = std::move(*v);
    }
    buffers.push_back(std::move(b));
  }
  manifest["buffers"] = std::move(buffers);

  // The collectives, by dt.id: what each moves, over which axes, from which
  // entry point, and the bytes this rank hands it per call.
  llvm::json::Array collectives;
  for (auto fn : module.getOps<func::FuncOp>())
    fn.walk([&](Operation *op) {
      const char *kind = collectiveKind(op);
      if (!kind)
        return;
      auto in = cast<RankedTensorType>(op->getOperand(0).getType());
      int64_t bytes =
          in.getNumElements() * ((in.getElementTypeBitWidth() + 7) / 8);
      llvm::json::Array axes;
      ArrayRef<int16_t> groupAxes = dt::collectiveAxes(op).value();
      for (int16_t a : groupAxes)
        axes.push_back(mesh->name(a).str());
      auto what = op->getAttrOfType<StringAttr>("dt.what");
      collectives.push_back(llvm::json::Object{
          {"id", op->getAttrOfType<IntegerAttr>("dt.id").getInt()},
          {"kind", kind},
          {"what", what ? what.getValue().str() : std::string(kind)},
          {"axes", std::move(axes)},
          {"entry", fn.getSymName().str()},
          {"bytes", bytes},
          {"elements", in.getNumElements()},
          {"dtype", dtypeName(in.getElementType())},
          {"async", op->hasAttr(dt::kAsyncAttr)}});
    });
  llvm::sort(collectives, [](const llvm::json::Value &a,
                             const llvm::json::Value &b) {
    return *a.getAsObject()->getInteger("id") <
           *b.getAsObject()->getInteger("id");
  });
  if (!collectives.empty())
    manifest["collectives"] = std::move(collectives);
  if (llvm::json::Array spans = spansJSON(module); !spans.empty())
    manifest["spans"] = std::move(spans);
  FailureOr<std::optional<llvm::json::Object>> pipe = pipelineJSON(module);
  if (failed(pipe))
    return failure();
  if (*pipe)
    manifest["pipeline"] = std::move(**pipe);

  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return text;
}
