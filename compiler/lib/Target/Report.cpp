//===- Report.cpp - What each rank's program costs, before it runs -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Every rank runs the same program (SPMD), so every rank's plan is the one in
// the module; shards of uneven size are padded to the same capacity, which the
// figures include (they are what each rank allocates). The bytes a collective
// moves are a ring's: an all-reduce of B bytes over k ranks sends and receives
// 2 (k - 1) / k B per rank, a reduce-scatter or an all-gather (k - 1) / k of
// the whole; taking a shard moves nothing.
//
//===----------------------------------------------------------------------===//

#include "dt/Target/Report.h"
#include "dt/Analysis/Cost.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"
#include "dt/Pipeline/Schedule.h"
#include "dt/Target/Manifest.h"
#include "dt/Target/Predict.h"
#include "dt/Transforms/Passes.h"
#include "dt/Transforms/PipelineInfo.h"
#include "dtrt/roofline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cstring>
#include <map>

using namespace mlir;
using namespace dt;

namespace {

int64_t bytesOf(RankedTensorType t) {
  return t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
}

/// Bytes of one rank and of the whole model, per kind of state.
struct Memory {
  int64_t params = 0, grads = 0, optimizer = 0, buffers = 0;
};

struct Collective {
  int64_t id;
  /// The pipeline rank whose program issues it (-1: every rank's).
  int64_t ppRank = -1;
  std::string kind, what, entry;
  std::vector<std::string> axes;
  /// What this rank hands the collective per call, and the group's size.
  int64_t bytes, group;
  /// Calls per optimizer step (0 for evaluation).
  int64_t calls;
  /// Bytes this rank sends (and receives) per call, as a ring moves them.
  double moved;
};

std::string mib(double bytes) {
  return llvm::formatv("{0,10:f3} MiB", bytes / 1048576.0).str();
}

/// One pipeline rank's memory.
struct StageMemory {
  int64_t ppRank = 0;
  /// Its parameters, gradients, optimizer state and buffers (the shared
  /// ones and its own).
  Memory state;
  /// The most any of its entry points needs beyond the persistent region.
  int64_t activations = 0;
  /// The stash ring: micro-batches in flight times what each stage keeps.
  int64_t stash = 0, inFlight = 0;
};

struct PipelineStages {
  std::string axis, schedule;
  double bubble = 0;
  std::vector<StageMemory> ranks;
  /// Per virtual stage, the FLOPs of one micro-batch's forward and backward
  /// (dt/Analysis/Cost.h), and per pipeline rank the idle fraction the
  /// schedule gives stages of those relative costs.
  std::vector<double> forwardFlops, backwardFlops, idleByFlops;
};

FailureOr<std::optional<PipelineStages>> pipelineStages(ModuleOp module) {
  FailureOr<std::optional<PipelineInfo>> info = PipelineInfo::get(module);
  if (failed(info))
    return failure();
  if (!*info)
    return std::optional<PipelineStages>();
  const PipelineInfo &p = **info;
  FailureOr<pipeline::Schedule> schedule = dt::buildSchedule(module, p);
  if (failed(schedule))
    return failure();
  PipelineStages out;
  out.axis = p.axis;
  out.schedule = llvm::formatv("{0} over {1}, {2} ranks x {3} stage(s), {4} "
                               "micro-batches",
                               p.schedule, p.axis, p.ranks, p.chunks,
                               p.microbatches)
                     .str();
  out.bubble = schedule->bubbleFormula();
  for (int64_t s = 0; s < p.numStages(); ++s)
    for (auto [prefix, flops] :
         {std::pair("pipe_fwd_", &out.forwardFlops),
          std::pair("pipe_bwd_", &out.backwardFlops)}) {
      auto fn =
          module.lookupSymbol<func::FuncOp>((prefix + Twine(s)).str());
      flops->push_back(fn ? costOf(fn).flops : 0.0);
    }
  out.idleByFlops = schedule->idleWith(out.forwardFlops, out.backwardFlops);
  std::vector<int64_t> inFlight = schedule->peakInFlight();
  for (int64_t r = 0; r < p.ranks; ++r) {
    StageMemory m;
    m.ppRank = r;
    m.inFlight = inFlight[size_t(r)];
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      int64_t owner = pipelineRankOf(g);
      if (owner >= 0 && owner != r)
        continue;
      int64_t bytes = bytesOf(g.getTensorType());
      switch (g.getRole()) {
      case Role::param:
        m.state.params += bytes;
        break;
      case Role::grad:
        m.state.grads += bytes;
        break;
      case Role::state:
        m.state.optimizer += bytes;
        break;
      case Role::input:
      case Role::output:
      case Role::pipe:
        // A stash ring is the stash column's (all its slots).
        if (!g->hasAttr(names::kSlotsAttr))
          m.state.buffers += bytes;
        break;
      }
    }
    for (auto fn : module.getOps<func::FuncOp>()) {
      int64_t owner = pipelineRankOf(fn);
      auto transient = fn->getAttrOfType<IntegerAttr>("dt.transient_bytes");
      if ((owner < 0 || owner == r) && transient)
        m.activations = std::max(m.activations, transient.getInt());
    }
    // Each of its stages keeps its stash for as many micro-batches as the
    // schedule has in flight there: a ring of that many slots in the arena.
    for (int64_t s = r; s < p.numStages(); s += p.ranks) {
      auto fwd =
          module.lookupSymbol<func::FuncOp>(("pipe_fwd_" + Twine(s)).str());
      int64_t slotBytes = 0;
      if (auto stash = fwd ? fwd->getAttrOfType<ArrayAttr>("dt.pipe_stash")
                           : ArrayAttr())
        for (auto name : stash.getAsValueRange<StringAttr>())
          if (GlobalOp g = lookupGlobal(module, name))
            slotBytes += bytesOf(g.getTensorType());
      m.stash += schedule->peakInFlight(s) * slotBytes;
    }
    out.ranks.push_back(m);
  }
  return std::optional<PipelineStages>(std::move(out));
}

} // namespace

/// Where the parameters start from: the checkpoint of `init`, and what dtc
/// found in it when it could read it.
static void printInit(ModuleOp module, size_t params, llvm::raw_ostream &os) {
  auto job = module->getAttrOfType<DictionaryAttr>("dt.job");
  auto init = job ? job.getAs<DictionaryAttr>("init") : DictionaryAttr();
  if (!init)
    return;
  os << "init: " << init.getAs<StringAttr>("path").getValue();
  auto checked = init.getAs<BoolAttr>("checked");
  if (!checked || !checked.getValue()) {
    os << " (not there when dtc ran; the program checks it when it starts)\n";
    return;
  }
  auto fresh = init.getAs<ArrayAttr>("fresh");
  auto skipped = init.getAs<IntegerAttr>("skipped");
  os << " (headers checked): " << params - fresh.size() << " of " << params
     << " parameters from the file";
  if (skipped && skipped.getInt())
    os << ", " << skipped.getInt() << " file tensors skipped";
  os << "\n";
  if (!fresh.empty()) {
    os << "  initialised as declared (not in the file):\n";
    for (Attribute name : fresh)
      os << "    " << llvm::cast<StringAttr>(name).getValue() << "\n";
  }
}

/// The LoRA adapters, if the job has them.
static void printAdapters(ModuleOp module, llvm::raw_ostream &os) {
  auto job = module->getAttrOfType<DictionaryAttr>("dt.job");
  auto a = job ? job.getAs<DictionaryAttr>("adapters") : DictionaryAttr();
  if (!a)
    return;
  auto layers = a.getAs<ArrayAttr>("layers");
  os << "adapters: LoRA of rank " << a.getAs<IntegerAttr>("rank").getInt()
     << llvm::format(", alpha %g (scale %g)",
                     a.getAs<FloatAttr>("alpha").getValueAsDouble(),
                     a.getAs<FloatAttr>("scale").getValueAsDouble())
     << " on " << layers.size() << " Linear layer"
     << (layers.size() == 1 ? "" : "s") << "; only they train\n";
}

/// What --trace records of one optimizer step on a rank: the numbered ops
/// (dt-number-spans) times their entry point's calls, the collectives they
/// run, and the runtime's own spans (as dtrt's spanBudget counts them), with
/// the JSON that takes (each event's fixed part and its names).
struct TraceSize {
  int64_t spans = 0, ops = 0, collectives = 0, runtime = 0, bytes = 0;
};

/// How often one optimizer step calls entry point `entry` (evaluation's
/// entry points: never), as the runtime counts it.
static int64_t callsPerStep(StringRef entry, int64_t micro) {
  return dtrt::entryCallsPerStep(std::string_view(entry.data(), entry.size()),
                                 micro);
}

static TraceSize traceSize(ModuleOp module, int64_t micro) {
  // Measured on traces dtrt wrote: an op's event is ~180 bytes and its
  // names, a collective's ~300 and its name twice.
  constexpr int64_t kOpEvent = 180, kCollectiveEvent = 300, kRuntimeEvent = 130;
  TraceSize t;
  t.runtime = 3 + 2 * micro;
  t.bytes = t.runtime * kRuntimeEvent;
  module.walk([&](func::FuncOp fn) {
    StringRef entry = fn.getSymName();
    int64_t calls = callsPerStep(entry, micro);
    if (fn.isExternal() || !calls)
      return;
    for (Operation &op : fn.getBody().front()) {
      if (!op.hasAttr(names::kSpanAttr))
        continue;
      int64_t names = int64_t(op.getName().getStringRef().size() +
                              layerOf(op.getLoc()).size() + entry.size());
      t.ops += calls;
      t.bytes += calls * (kOpEvent + names);
      if (const char *kind = collectiveKind(&op)) {
        auto what = op.getAttrOfType<StringAttr>("dt.what");
        t.collectives += calls;
        t.bytes += calls * (kCollectiveEvent + 2 * int64_t(strlen(kind)) +
                            2 * int64_t(what ? what.size() : 0));
      }
    }
  });
  t.spans = t.ops + t.collectives + t.runtime;
  return t;
}

/// "0.4 s", "2:05", "1:02:05".
static std::string formatDuration(double seconds) {
  if (seconds < 60)
    return llvm::formatv("{0:f1} s", seconds).str();
  auto s = int64_t(seconds + 0.5);
  if (s < 3600)
    return llvm::formatv("{0}:{1:d2}", s / 60, s % 60).str();
  return llvm::formatv("{0}:{1:d2}:{2:d2}", s / 3600, s / 60 % 60, s % 60)
      .str();
}

/// "70.3k", "9.01M".
static std::string formatCount(double n) {
  if (n >= 1e9)
    return llvm::formatv("{0:f2}G", n / 1e9).str();
  if (n >= 1e6)
    return llvm::formatv("{0:f2}M", n / 1e6).str();
  if (n >= 1e3)
    return llvm::formatv("{0:f1}k", n / 1e3).str();
  return llvm::formatv("{0:f1}", n).str();
}

namespace {
/// The report's prediction (dt/Target/Predict.h), or why there is none.
struct Prediction {
  std::string missing;
  MachineRates rates;
  StepPrediction step;
  double seconds() const { return step.seconds(); }
  bool commPredicted() const {
    return rates.ranks <= 1 || rates.linkBytesPerS.has_value();
  }
};
} // namespace

static Prediction predict(ModuleOp module, int64_t world) {
  Prediction p;
  RatesLookup lookup = cachedRates(int(world));
  if (!lookup.rates) {
    p.missing = lookup.missing;
    return p;
  }
  p.rates = *lookup.rates;
  std::optional<StepPrediction> step = predictStep(module, p.rates, p.missing);
  if (step)
    p.step = *step;
  if (step && p.seconds() <= 0)
    p.missing = "the program has no ops to price";
  return p;
}

static llvm::json::Object predictionJSON(const Prediction &p,
                                         const ReportJob &job) {
  if (!p.missing.empty())
    return llvm::json::Object{{"missing", p.missing}};
  const MachineRates &r = p.rates;
  llvm::json::Object o{
      {"step_s", p.seconds()},
      {"compute_s", p.step.compute},
      {"comm_s", p.commPredicted() ? llvm::json::Value(p.step.comm)
                                   : llvm::json::Value(nullptr)},
      {"bubble_s", p.step.bubble},
      {"ops_per_step", p.step.ops},
      {"timed_calls_per_step", p.step.timedCalls},
      {"collectives_per_step", p.step.collectives},
      {"peak_flops", r.peakFlops},
      {"copy_bytes_per_s", r.memoryBytesPerS},
      {"link_bytes_per_s", r.linkBytesPerS ? llvm::json::Value(*r.linkBytesPerS)
                                           : llvm::json::Value(nullptr)},
      {"threads", r.threads},
      {"ranks", r.ranks},
      {"peaks_cache", r.cachePath},
      {"samples_per_s", double(job.samplesPerStep) / p.seconds()}};
  if (!p.step.pipeline.empty())
    o["pipeline"] = p.step.pipeline;
  if (job.tokensPerSample)
    o["tokens_per_s"] =
        double(job.samplesPerStep * job.tokensPerSample) / p.seconds();
  if (job.steps) {
    o["steps"] = *job.steps;
    o["time_s"] = double(*job.steps) * p.seconds();
    llvm::json::Array costs;
    for (const ReportJob::Price &price : job.prices)
      costs.push_back(
          llvm::json::Object{{"target", price.target},
                             {"price_per_hour", price.perHour},
                             {"hosts", price.hosts},
                             {"usd", double(*job.steps) * p.seconds() / 3600 *
                                         price.perHour * double(price.hosts)}});
    o["cost"] = std::move(costs);
  }
  return o;
}

static void printPrediction(const Prediction &p, const ReportJob &job,
                            llvm::raw_ostream &os) {
  if (!p.missing.empty()) {
    os << "predicted step: none: " << p.missing << "\n";
    return;
  }
  const MachineRates &r = p.rates;
  std::string comm;
  if (r.ranks <= 1)
    comm = "";
  else if (r.linkBytesPerS)
    comm = llvm::formatv(" + communication {0:f3} ms ({1} collectives at "
                         "{2:f2} GB/s)",
                         p.step.comm * 1e3, p.step.collectives,
                         *r.linkBytesPerS / 1e9)
               .str();
  else
    comm = llvm::formatv(" + communication not predicted (no all-reduce "
                         "bandwidth measured over {0} ranks on this machine "
                         "yet: a run of the program on {0} ranks here "
                         "measures it)",
                         r.ranks)
               .str();
  std::string timed =
      p.step.timedCalls
          ? llvm::formatv(", {0} of them products and attention at their "
                          "own measured time",
                          p.step.timedCalls)
                .str()
          : "";
  std::string bubble = p.step.pipeline.empty()
                           ? ""
                           : llvm::formatv(" + pipeline bubble {0:f3} ms ({1})",
                                           p.step.bubble * 1e3, p.step.pipeline)
                                 .str();
  os << llvm::formatv("predicted step on this machine: {0:f3} ms = compute "
                      "{1:f3} ms ({2} ops at the roofline of sgemm {3:f2} "
                      "GFLOP/s and copy {4:f2} GB/s{5}){6}{7}; no overlap "
                      "credited\n",
                      p.seconds() * 1e3, p.step.compute * 1e3, p.step.ops,
                      r.peakFlops / 1e9, r.memoryBytesPerS / 1e9, timed, comm,
                      bubble);
  os << llvm::formatv("  rates: measured by a run of {0} thread{1} x {2} "
                      "rank{3} on this machine, cached in {4}\n",
                      r.threads, r.threads == 1 ? "" : "s", r.ranks,
                      r.ranks == 1 ? "" : "s", r.cachePath);
  double samples = double(job.samplesPerStep) / p.seconds();
  std::string tokens =
      job.tokensPerSample
          ? " (" + formatCount(samples * double(job.tokensPerSample)) +
                " tokens/s)"
          : "";
  os << "  throughput: " << formatCount(samples) << " samples/s" << tokens;
  if (job.steps)
    os << "; the run's " << *job.steps << " steps take "
       << formatDuration(double(*job.steps) * p.seconds())
       << " of training (evaluation and checkpoints not counted)";
  else
    os << "; time to finish: " << job.stepsUnknown;
  os << "\n";
  if (!job.steps)
    return;
  for (const ReportJob::Price &price : job.prices) {
    double usd = double(*job.steps) * p.seconds() / 3600 * price.perHour *
                 double(price.hosts);
    // Cents for real jobs; two significant digits for the tiny ones.
    std::string cost =
        llvm::formatv("{0}", llvm::format(usd >= 1 ? "%.2f" : "%.2g", usd));
    os << llvm::formatv("  cost: ${0} for deploy {1} (price_per_hour {2} x "
                        "{3} host{4}), at this machine's speed\n",
                        cost, price.target, llvm::format("%g", price.perHour),
                        price.hosts, price.hosts == 1 ? "" : "s");
  }
}

LogicalResult dt::printReport(ModuleOp module, bool json, llvm::raw_ostream &os,
                              const ReportJob *job) {
  auto arenaAttr = module->getAttrOfType<IntegerAttr>("dt.arena_bytes");
  auto persistentAttr =
      module->getAttrOfType<IntegerAttr>("dt.persistent_bytes");
  if (!arenaAttr || !persistentAttr)
    return module.emitError("--report needs a planned module");
  int64_t arena = arenaAttr.getInt(),
          activations = arena - persistentAttr.getInt();
  FailureOr<MeshInfo> mesh = MeshInfo::get(module);
  if (failed(mesh))
    return failure();
  numberCollectives(module);

  // Memory: this rank's shard and the whole model, per kind.
  Memory rank, whole;
  int64_t paramCount = 0, frozenCount = 0, frozenBytes = 0;
  std::vector<std::pair<std::string, int64_t>> params;
  for (GlobalOp g : module.getOps<GlobalOp>()) {
    // In a pipeline, "this rank" is a rank of pipeline rank 0; the pipeline
    // table gives each pipeline rank's figures.
    int64_t local = pipelineRankOf(g) > 0 ? 0 : bytesOf(g.getTensorType()),
            all = bytesOf(g.getGlobalTensorType());
    auto add = [&](int64_t Memory::*field) {
      rank.*field += local;
      whole.*field += all;
    };
    switch (g.getRole()) {
    case Role::param: {
      add(&Memory::params);
      // A `@buffer` (running statistics) is state kept with the parameters,
      // not one of them, as PyTorch counts.
      bool buffer = g->hasAttr(names::kBufferParamAttr);
      params.push_back(
          {(g.getSymName() + (buffer ? " (buffer)"
                              : g->hasAttr(names::kFrozenAttr) ? " (frozen)"
                                                               : ""))
               .str(),
           g.getGlobalTensorType().getNumElements()});
      if (buffer)
        break;
      paramCount += g.getGlobalTensorType().getNumElements();
      if (g->hasAttr(names::kFrozenAttr)) {
        frozenCount += g.getGlobalTensorType().getNumElements();
        frozenBytes += local;
      }
      break;
    }
    case Role::grad:
      add(&Memory::grads);
      break;
    case Role::state:
      add(&Memory::optimizer);
      break;
    case Role::input:
    case Role::output:
    case Role::pipe:
      add(&Memory::buffers);
      break;
    }
  }

  // Collectives, in the order the program issues them.
  int64_t accumulation = 1;
  if (auto a = module->getAttrOfType<IntegerAttr>("dt.accumulation"))
    accumulation = a.getInt();
  std::vector<Collective> collectives;
  for (auto fn : module.getOps<func::FuncOp>())
    fn.walk([&](Operation *op) {
      const char *kind = collectiveKind(op);
      if (!kind)
        return;
      Collective c;
      c.id = op->getAttrOfType<IntegerAttr>("dt.id").getInt();
      c.kind = kind;
      auto what = op->getAttrOfType<StringAttr>("dt.what");
      c.what = what ? what.getValue().str() : kind;
      c.entry = fn.getSymName().str();
      c.bytes = bytesOf(cast<RankedTensorType>(op->getOperand(0).getType()));
      c.group = 1;
      ArrayRef<int16_t> axes = collectiveAxes(op).value();
      for (int16_t a : axes) {
        c.axes.push_back(mesh->name(a).str());
        c.group *= mesh->size(a);
      }
      c.moved =
          dtrt::ringTrafficBytes(c.kind, double(c.group), double(c.bytes));
      c.ppRank = pipelineRankOf(fn);
      StringRef entry = c.entry;
      c.calls = callsPerStep(entry, accumulation);
      collectives.push_back(std::move(c));
    });
  double movedPerStep = 0;
  int64_t callsPerStep = 0;
  // What the ranks of pipeline rank 0 (all ranks, without a pipeline) issue.
  for (const Collective &c : collectives) {
    if (c.ppRank > 0)
      continue;
    movedPerStep += c.moved * double(c.calls);
    callsPerStep += c.calls;
  }
  FailureOr<std::optional<PipelineStages>> stages = pipelineStages(module);
  if (failed(stages))
    return failure();
  TraceSize trace = traceSize(module, accumulation);
  int64_t world = mesh->worldSize();
  std::optional<Prediction> prediction;
  if (job)
    prediction = predict(module, world);
  // ZeRO-Offload: the optimizer state is host memory, the rest device memory
  // (on the CPU backend both are the host's). dt-plan-memory put what only
  // the update touches first in the arena (a pipeline's stays where it is:
  // its state is counted).
  bool offload = module->hasAttr(names::kOffloadAttr);
  int64_t hostBytes = offload ? rank.optimizer : 0;
  if (auto split = module->getAttrOfType<IntegerAttr>(names::kHostBytesAttr))
    hostBytes = split.getInt();
  int64_t deviceBytes = arena - hostBytes;

  if (json) {
    auto memory = [&](const Memory &m) {
      return llvm::json::Object{{"params", m.params},
                                {"grads", m.grads},
                                {"optimizer", m.optimizer},
                                {"buffers", m.buffers}};
    };
    llvm::json::Array list;
    for (const Collective &c : collectives)
      list.push_back(llvm::json::Object{
          {"id", c.id},
          {"kind", c.kind},
          {"what", c.what},
          {"axes", llvm::json::Array(c.axes)},
          {"entry", c.entry},
          {"bytes", c.bytes},
          {"calls_per_step", c.calls},
          {"moved_bytes_per_call", c.moved}});
    llvm::json::Array ranks;
    for (int64_t r = 0; r < world; ++r) {
      llvm::json::Array coords;
      for (int64_t a = mesh->rank(), rest = r; a-- > 0;) {
        coords.insert(coords.begin(), rest % mesh->size(a));
        rest /= mesh->size(a);
      }
      llvm::json::Object entry = memory(rank);
      entry["rank"] = r;
      entry["coords"] = std::move(coords);
      entry["activations"] = activations;
      entry["arena"] = arena;
      entry["collectives"] = llvm::json::Array(list);
      entry["moved_bytes_per_step"] = movedPerStep;
      entry["device_bytes"] = deviceBytes;
      entry["host_bytes"] = hostBytes;
      ranks.push_back(std::move(entry));
    }
    llvm::json::Array axes;
    for (size_t a = 0; a < mesh->rank(); ++a)
      axes.push_back(llvm::json::Object{{"name", mesh->name(a).str()},
                                        {"size", mesh->size(a)}});
    // Every tensor of the state with its shard's bytes and its layout.
    llvm::json::Array tensors;
    for (GlobalOp g : module.getOps<GlobalOp>()) {
      std::string layout;
      if (auto s = g.getSharding()) {
        llvm::raw_string_ostream text(layout);
        text << *s;
      }
      tensors.push_back(llvm::json::Object{
          {"name", g.getSymName().str()},
          {"role", stringifyRole(g.getRole()).str()},
          {"bytes", bytesOf(g.getTensorType())},
          {"whole_bytes", bytesOf(g.getGlobalTensorType())},
          {"layout", layout}});
    }
    llvm::json::Object report{{"mesh", llvm::json::Object{{"axes",
                                                           std::move(axes)}}},
                              {"parameters", paramCount},
                              {"frozen_parameters", frozenCount},
                              {"whole", memory(whole)},
                              {"ranks", std::move(ranks)},
                              {"tensors", std::move(tensors)}};
    if (offload)
      report["offload"] = "optimizer";
    report["trace"] = llvm::json::Object{{"spans_per_step", trace.spans},
                                         {"bytes_per_step", trace.bytes}};
    if (prediction)
      report["prediction"] = predictionJSON(*prediction, *job);
    if (*stages) {
      llvm::json::Array perRank;
      for (const StageMemory &m : (*stages)->ranks) {
        llvm::json::Object o = memory(m.state);
        o["pp_rank"] = m.ppRank;
        o["activations"] = m.activations;
        o["stash"] = m.stash;
        o["in_flight"] = m.inFlight;
        perRank.push_back(std::move(o));
      }
      report["pipeline"] = llvm::json::Object{
          {"schedule", (*stages)->schedule},
          {"bubble", (*stages)->bubble},
          {"stage_forward_flops", llvm::json::Array((*stages)->forwardFlops)},
          {"stage_backward_flops",
           llvm::json::Array((*stages)->backwardFlops)},
          {"idle_by_flops", llvm::json::Array((*stages)->idleByFlops)},
          {"ranks", std::move(perRank)}};
    }
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
    return success();
  }

  if (world == 1) {
    os << "memory plan of one rank (static, from dt-plan-memory)\n";
  } else {
    std::string axes;
    for (size_t a = 0; a < mesh->rank(); ++a)
      axes += llvm::formatv("{0}{1}={2}", a ? ", " : "", mesh->name(a),
                            mesh->size(a))
                  .str();
    os << "memory plan of each of " << world << " ranks (mesh " << axes
       << "; static, from dt-plan-memory and dt-spmd-partition"
       << (*stages ? "; this rank: one on " + (*stages)->axis + "=0" : "")
       << ")\n";
    os << "                   this rank    whole model\n";
  }
  os << "  parameters      " << paramCount << " values\n";
  auto line = [&](llvm::StringRef name, int64_t mine, int64_t all) {
    os << "  " << llvm::left_justify(name, 14) << mib(double(mine));
    if (world > 1)
      os << mib(double(all));
    os << "\n";
  };
  line("param", rank.params, whole.params);
  line("grad", rank.grads, whole.grads);
  line(offload ? "state (host)" : "state", rank.optimizer, whole.optimizer);
  line("buffers", rank.buffers, whole.buffers);
  os << "  persistent    " << mib(double(persistentAttr.getInt()))
     << "  (all of the above, aligned)\n";
  os << "  activations   " << mib(double(activations))
     << "  (transient values of the largest entry point)\n";
  os << "  arena         " << mib(double(arena)) << "\n";
  if (offload)
    os << "  device        " << mib(double(deviceBytes))
       << "  (offload = \"optimizer\": the arena without the state)\n"
       << "  host          " << mib(double(hostBytes))
       << "  (the optimizer state and its update)\n";
  if (*stages) {
    const PipelineStages &p = **stages;
    os << llvm::formatv("pipeline: {0}; bubble {1:f1} % of each rank's step "
                        "((p - 1) / (v m + p - 1))\n",
                        p.schedule, 100.0 * p.bubble);
    os << "  rank       persistent   activations  stash (in flight)\n";
    for (const StageMemory &m : p.ranks)
      os << llvm::formatv("  {0}={1,-3}{2}{3}{4} ({5} micro-batch{6})\n",
                          p.axis, m.ppRank,
                          mib(double(m.state.params + m.state.grads +
                                     m.state.optimizer + m.state.buffers)),
                          mib(double(m.activations)), mib(double(m.stash)),
                          m.inFlight, m.inFlight == 1 ? "" : "es");
    // The formula assumes equal stages; the FLOPs say how equal they are.
    os << "  FLOPs of one micro-batch (forward + backward):";
    for (size_t s = 0; s < p.forwardFlops.size(); ++s)
      os << llvm::formatv("{0} stage {1} {2:f3} + {3:f3} GFLOP", s ? "," : "",
                          s, p.forwardFlops[s] / 1e9,
                          p.backwardFlops[s] / 1e9);
    os << "\n  idle by the schedule with stages of these FLOPs:";
    for (size_t r = 0; r < p.idleByFlops.size(); ++r)
      os << llvm::formatv("{0} {1}={2} {3:f1} %", r ? "," : "", p.axis, r,
                          100.0 * p.idleByFlops[r]);
    os << "\n";
  }
  if (!collectives.empty()) {
    os << llvm::formatv("collectives of each rank{0}: {1} calls and {2:f3} "
                        "MiB moved per optimizer step\n",
                        *stages ? " on " + (*stages)->axis +
                                      "=0 (the list has every pipeline "
                                      "rank's entry points)"
                                : "",
                        callsPerStep,
                        movedPerStep / 1048576.0);
    for (const Collective &c : collectives) {
      std::string axes;
      for (const std::string &a : c.axes)
        axes += (axes.empty() ? "" : ", ") + a;
      os << llvm::formatv("  {0,-10} {1,-14} x{2,-3} over ({3}) {4}  {5}\n",
                          c.entry, c.kind, c.calls, axes, mib(c.moved), c.what);
    }
  }
  if (prediction)
    printPrediction(*prediction, *job, os);
  os << llvm::formatv("trace (--trace): at most {0} spans a step per rank "
                      "({1} ops, {2} collectives, {3} of the runtime's), "
                      "about {4} KiB of trace a step\n",
                      trace.spans, trace.ops, trace.collectives, trace.runtime,
                      (trace.bytes + 1023) / 1024);
  os << "parameters";
  if (frozenCount)
    os << ": " << paramCount - frozenCount << " values train, " << frozenCount
       << " are frozen (no gradient or optimizer state for "
       << llvm::StringRef(mib(double(frozenBytes))).trim()
       << " of this rank's parameters)";
  os << "\n";
  for (auto &[name, count] : params)
    os << "  " << llvm::left_justify(name, 40)
       << llvm::format("%12lld", (long long)count) << "\n";
  printAdapters(module, os);
  printInit(module, params.size(), os);
  return success();
}
