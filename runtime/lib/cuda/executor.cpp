//===- executor.cpp - runs a program's GPU plan ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/executor.h"

#include "dtrt/collectives.h" // addProgramCollectiveSeconds
#include "dtrt/cuda/blas.h"
#include "dtrt/peaks.h" // addToPeaksCache
#include "dtrt/peaks_cache.h"
#include "dtrt/trace.h"

#include "dtk/cuda_kernels.h"

#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace dtrt::cuda {

namespace {

/// The _typed kernels' code for data the plan marks 16-bit (F32 and TF32:
/// f32).
int elementType(Operands type) {
  return type == Operands::BF16  ? DTK_CUDA_BF16
         : type == Operands::F16 ? DTK_CUDA_F16
                                 : DTK_CUDA_F32;
}

/// The products of a convolution's kernels (dtk_cuda_gemm) through cuBLAS,
/// in f32; the first failure is kept for the message.
struct ConvProducts {
  Blas *blas;
  std::optional<Error> failure;

  static int gemm(void *ctx, const float *a, const float *b, float *c,
                  int64_t batch, int64_t m, int64_t n, int64_t k,
                  int32_t transA, int32_t transB, int32_t accumulate) {
    auto *self = static_cast<ConvProducts *>(ctx);
    Status s = self->blas->matmul(a, b, c, batch, m, n, k, transA != 0,
                                  transB != 0, accumulate != 0, Operands::F32);
    if (s)
      return 0;
    self->failure = s.error();
    return 1;
  }
};

/// A bf16 attention with 16-bit inputs or results that its kernels do not
/// take (dtc checks the width and the alignment; a plan from elsewhere
/// might not).
Error typedAttentionRefused(const Thunk &t) {
  return Error(fmt::format(
      "the GPU plan's {} reads or writes bf16 with heads {} wide, or at "
      "offsets (or layouts' strides) not 16-byte aligned, which the bf16 "
      "attention kernels do not take (heads of 32, 64 or 128); rebuild the "
      "program with this runtime's dtc",
      kindName(t.kind), t.i[2]));
}

/// The plan's layouts of a strided attention, as its kernels take them:
/// one per pointer but the log-sum-exp's (the fifth, always [slices, t]).
std::vector<dtk_attention_layout> layoutsOf(const Thunk &t) {
  std::vector<dtk_attention_layout> layouts;
  for (size_t i = 0; i < t.layouts.size(); ++i)
    if (i != 4) {
      const std::array<int64_t, 4> &l = t.layouts[i];
      layouts.push_back(dtk_attention_layout{l[0], l[1], l[2], l[3]});
    }
  return layouts;
}

} // namespace

Expected<std::unique_ptr<Executor>>
Executor::create(const std::string &image, const std::string &planText,
                 const ExecutorSetup &setup) {
  Mesh oneRank;
  Communicator *host = setup.collectives.host;
  Expected<Plan> plan =
      readPlan(planText, setup.manifest, host ? host->mesh() : oneRank,
               host ? host->rank() : 0);
  if (!plan)
    return plan.error();
  std::unique_ptr<Executor> e(new Executor);
  cudaError_t err = cudaStreamCreate(&e->stream_);
  if (err != cudaSuccess)
    return cudaFailure("cannot create a CUDA stream", err);
  Expected<KernelLibrary> library = KernelLibrary::load(image);
  if (!library)
    return library.error();
  e->library_ = std::make_unique<KernelLibrary>(std::move(*library));
  Expected<ProductEngine> engine = productEngineFromEnvironment();
  if (!engine)
    return engine.error();
  // DTRT_CUDA_ATTENTION_PIPELINE=0: attention loads each tile once the last
  // is done, as before its tiles were prefetched (to compare; same bits).
  if (const char *pipeline = std::getenv("DTRT_CUDA_ATTENTION_PIPELINE")) {
    std::string v = pipeline;
    if (v != "0" && v != "1")
      return Error(
          fmt::format("DTRT_CUDA_ATTENTION_PIPELINE={} is not 0 or 1", v));
    dtk_cuda_attention_pipeline(v == "1");
  }
  // DTRT_CUDA_ATTENTION_WARP_ROWS=16: the forward's warps own 16 query rows
  // each, as before they owned 32 (to compare; same bits).
  if (const char *rows = std::getenv("DTRT_CUDA_ATTENTION_WARP_ROWS")) {
    std::string v = rows;
    if (v != "16" && v != "32")
      return Error(
          fmt::format("DTRT_CUDA_ATTENTION_WARP_ROWS={} is not 16 or 32", v));
    dtk_cuda_attention_warp_rows(std::stoi(v));
  }
  Expected<std::unique_ptr<Blas>> blas = Blas::open(e->stream_, *engine);
  if (!blas)
    return blas.error();
  e->blas_ = std::move(*blas);

  const char *profile = std::getenv("DTRT_CUDA_PROFILE");
  e->profile_ = profile && std::string(profile) == "1";
  const char *graphs = std::getenv("DTRT_CUDA_GRAPHS");
  if (!graphs || std::string(graphs) != "0")
    e->graphs_.emplace();
  e->arenaBytes_ = plan->arenaBytes - plan->deviceFrom;
  e->deviceFrom_ = plan->deviceFrom;
  if (plan->scratchBytes > 0 &&
      (err = cudaMalloc(reinterpret_cast<void **>(&e->scratch_),
                        size_t(plan->scratchBytes))) != cudaSuccess)
    return cudaFailure(fmt::format("cannot allocate {} bytes of kernel "
                                   "scratch on the GPU",
                                   plan->scratchBytes),
                       err);
  // The generated kernels, each loaded once.
  std::map<std::string, cudaKernel_t> kernels;
  for (auto &[name, thunks] : plan->entries)
    for (Thunk &t : thunks) {
      if (t.kind != Thunk::Kernel)
        continue;
      auto it = kernels.find(t.name);
      if (it == kernels.end()) {
        Expected<cudaKernel_t> k = e->library_->kernel(t.name);
        if (!k)
          return k.error();
        it = kernels.emplace(t.name, *k).first;
      }
      t.kernel = it->second;
    }
  e->entries_ = std::move(plan->entries);
  if (!plan->groups.empty()) {
    if (!host)
      return Error("the program's GPU plan has collectives, but the program "
                   "runs one rank; rebuild it with this runtime's dtc");
    Expected<std::unique_ptr<DeviceCollectives>> engine = openDeviceCollectives(
        setup.collectives.engine, *host, plan->groups,
        setup.collectives.timeout, setup.ncclObstacle, &e->collectivesNote_);
    if (!engine)
      return engine.error();
    e->collectives_ = std::move(*engine);
  }
  // Asynchronous collectives (dtc --overlap) run on a stream of their own,
  // beside the step's work until their dt.wait.
  bool async = false;
  for (const auto &[name, thunks] : e->entries_)
    for (const Thunk &t : thunks)
      async |= t.async;
  if (async) {
    if ((err = cudaStreamCreate(&e->commStream_)) != cudaSuccess ||
        (err = cudaEventCreateWithFlags(&e->ready_, cudaEventDisableTiming)) !=
            cudaSuccess)
      return cudaFailure("cannot make the collectives' stream", err);
  }
  return e;
}

Executor::~Executor() {
  // A step that failed in its collectives aborted them; one that still
  // runs ends with them.
  if (stream_ && collectives_)
    (void)collectives_->synchronize(stream_);
  else if (stream_)
    cudaStreamSynchronize(stream_);
  collectives_.reset();
  if (profile_)
    printProfile();
  for (cudaEvent_t e : events_)
    cudaEventDestroy(e);
  if (graphs_)
    for (auto &[entry, graph] : *graphs_)
      cudaGraphExecDestroy(graph.exec);
  for (auto [begin, end] : commTimes_) {
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
  }
  for (auto &[id, done] : done_)
    cudaEventDestroy(done);
  if (ready_)
    cudaEventDestroy(ready_);
  if (commStream_)
    cudaStreamDestroy(commStream_);
  blas_.reset();
  cudnn_.reset(); // its handle works on stream_
  if (scratch_)
    cudaFree(scratch_);
  if (stream_)
    cudaStreamDestroy(stream_);
}

bool Executor::has(const std::string &name) const {
  for (const auto &entry : entries_)
    if (entry.first == name)
      return true;
  return false;
}

Status Executor::run(const std::string &name, char *arena) {
  for (const auto &[entry, thunks] : entries_) {
    if (entry != name)
      continue;
    // Host-side ranges: Nsight Systems ties the launches queued inside one
    // to it.
    nvtxRangePushA(entry.c_str());
    struct PopRange {
      ~PopRange() { nvtxRangePop(); }
    } entryRange;
    Tracer *tracer = programTracer();
    bool tracing = tracer && tracer->recording() && !profile_;
    if (graphs_ && !tracing && !profile_ && capturable(thunks))
      return runGraph(entry, thunks, arena);
    return launchAll(entry, thunks, arena, tracing);
  }
  return Error("the GPU plan has no entry point " + name);
}

bool Executor::capturable(const std::vector<Thunk> &thunks) const {
  // Collectives stay out of graphs: the host engine's are host calls, and a
  // sharded step's shards and block starts copy from host memory.
  return std::all_of(thunks.begin(), thunks.end(),
                     [](const Thunk &t) { return t.kind < Thunk::AllReduce; });
}

Status Executor::runGraph(const std::string &entry,
                          const std::vector<Thunk> &thunks, char *arena) {
  auto it = graphs_->find(entry);
  if (it == graphs_->end() || it->second.arena != arena) {
    if (it != graphs_->end()) {
      cudaGraphExecDestroy(it->second.exec);
      graphs_->erase(it);
    }
    // Capture records the launches without running them; a capture that
    // fails leaves nothing run, so the entry runs launch by launch instead
    // (and from then on), saying why once.
    cudaError_t e =
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
    Status launched = e == cudaSuccess
                          ? launchAll(entry, thunks, arena, false)
                          : cudaFailure("cannot begin capturing", e);
    cudaGraph_t graph = nullptr;
    if (e == cudaSuccess)
      e = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    if (launched && e == cudaSuccess)
      e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    if (!launched || e != cudaSuccess) {
      cudaGetLastError(); // the capture's error is reported here, not later
      std::string why =
          launched ? cudaGetErrorString(e) : launched.error().message();
      fmt::print(stderr,
                 "note: {} runs launch by launch: capturing it as a CUDA "
                 "graph failed ({})\n",
                 entry, why);
      graphs_.reset();
      return launchAll(entry, thunks, arena, false);
    }
    it = graphs_->emplace(entry, Graph{arena, exec}).first;
  }
  cudaError_t e = cudaGraphLaunch(it->second.exec, stream_);
  if (e != cudaSuccess)
    return cudaFailure(
        fmt::format("{}: launching its CUDA graph failed", entry), e);
  return Status::ok();
}

Status Executor::launchAll(const std::string &name,
                           const std::vector<Thunk> &thunks, char *arena,
                           bool tracing) {
  struct PopRange {
    ~PopRange() { nvtxRangePop(); }
  };
  // A traced step's launches each sit between two events; the anchor is
  // recorded on an idle stream, so it runs at the host time beside it.
  if (profile_) { // (a profile is never traced)
    eventsUsed_ = 0;
    if (Status s = traceEvents(2 * thunks.size()); !s)
      return s;
  }
  if (tracing) {
    if (Status s = synchronize(); !s)
      return s;
    if (Status s = traceEvents(1 + 2 * thunks.size()); !s)
      return s;
    anchors_.push_back({events_[eventsUsed_++], steadyNanos()});
    cudaEventRecord(anchors_.back().first, stream_);
  }
  for (const Thunk &t : thunks) {
    nvtxRangePushA(t.range.c_str());
    PopRange launchRange;
    if (Status s = startOnCommStream(t); !s)
      return s;
    bool traced = tracing && (t.span >= 0 || t.collective >= 0);
    if (traced) {
      traced_.push_back({t.span, t.collective, anchors_.size() - 1,
                         events_[eventsUsed_], events_[eventsUsed_ + 1],
                         t.members.empty() ? nullptr : &t.members});
      eventsUsed_ += 2;
      cudaEventRecord(traced_.back().begin, streamOf(t));
    }
    if (profile_)
      cudaEventRecord(events_[eventsUsed_++], streamOf(t));
    if (Status s = launch(t, arena); !s)
      return s.error().withContext(name);
    if (traced)
      cudaEventRecord(traced_.back().end, streamOf(t));
    if (profile_)
      cudaEventRecord(events_[eventsUsed_++], streamOf(t));
  }
  if (const char *e = dtk_cuda_last_error())
    return Error(fmt::format("{}: a GPU kernel failed to launch: {}", name, e));
  return profile_ ? countProfile(thunks) : Status::ok();
}

Status Executor::countProfile(const std::vector<Thunk> &thunks) {
  // The launches were queued without waiting, as a graph's would run: the
  // host keeps ahead of all but the shortest kernels, so each pair of
  // events brackets its launch's GPU time and not the host's round trip
  // (waiting after each launch added about 10 us to every one of them).
  if (Status s = synchronize(); !s)
    return s;
  for (size_t k = 0; k < thunks.size(); ++k) {
    float ms = 0;
    cudaEventElapsedTime(&ms, events_[2 * k], events_[2 * k + 1]);
    const Thunk &t = thunks[k];
    profiled_[describe(t)].add(ms, t);
    if (t.kind == Thunk::Kernel)
      generated_[t.range.substr(0, t.range.find(' '))].add(ms, t);
  }
  eventsUsed_ = 0;
  return Status::ok();
}

std::string Executor::collectivesEngine() const {
  if (!collectives_)
    return "";
  if (collectivesNote_.empty())
    return collectives_->engine();
  // The first line: the rest lists where NCCL was looked for.
  return fmt::format("{} ({})", collectives_->engine(),
                     collectivesNote_.substr(0, collectivesNote_.find('\n')));
}

Status Executor::synchronize() {
  if (collectives_) {
    if (Status s = collectives_->synchronize(stream_); !s)
      return s;
    if (Status s = countCommTimes(); !s)
      return s;
    return flushTrace();
  }
  cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess)
    return cudaFailure("a GPU step failed (an id out of range traps a "
                       "kernel: check the data's vocabulary)",
                       e);
  return flushTrace();
}

Status Executor::traceEvents(size_t count) {
  while (events_.size() < eventsUsed_ + count) {
    cudaEvent_t e = nullptr;
    cudaError_t err = cudaEventCreate(&e);
    if (err != cudaSuccess)
      return cudaFailure("cannot make the events that trace the GPU", err);
    events_.push_back(e);
  }
  return Status::ok();
}

Status Executor::flushTrace() {
  if (traced_.empty() && anchors_.empty())
    return Status::ok();
  Tracer *tracer = programTracer();
  for (const Traced &t : traced_) {
    auto [anchor, anchorNs] = anchors_[t.anchor];
    float begin = 0, end = 0;
    if (cudaEventElapsedTime(&begin, anchor, t.begin) != cudaSuccess ||
        cudaEventElapsedTime(&end, anchor, t.end) != cudaSuccess || !tracer)
      continue;
    int64_t b = anchorNs + int64_t(double(begin) * 1e6),
            e = anchorNs + int64_t(double(end) * 1e6);
    if (t.collective >= 0)
      tracer->deviceCollective(t.collective, b, e);
    else if (t.members)
      tracer->deviceSpans(*t.members, b, e);
    else
      tracer->deviceSpan(t.span, b, e);
  }
  traced_.clear();
  anchors_.clear();
  eventsUsed_ = 0;
  return Status::ok();
}

std::string Executor::describe(const Thunk &t) const {
  if (t.kind == Thunk::Kernel)
    return t.name;
  // Products by shape, operands and library: where cuBLAS's time goes.
  if (t.kind == Thunk::Matmul || t.kind == Thunk::MatmulBias) {
    static const char *const operands[] = {"f32", "tf32", "bf16", "f16"};
    static const char *const epilogues[] = {"", " + gelu", " * gelu'",
                                            " + bias gradient"};
    return fmt::format("{} {}{}x{}x{}{}{} {}{}{}{} ({})",
                       t.kind == Thunk::Matmul ? "matmul" : "matmul_bias",
                       t.i[0] > 1 ? fmt::format("{}x ", t.i[0]) : "", t.i[1],
                       t.i[2], t.i[3], t.i[4] ? " A^T" : "",
                       t.i[5] ? " B^T" : "", operands[int(t.operands)],
                       t.result == Operands::F32
                           ? ""
                           : fmt::format(" -> {}", operands[int(t.result)]),
                       t.pad.empty() ? ""
                                     : fmt::format(", padded to n {} k {}",
                                                   t.pad[0], t.pad[1]),
                       epilogues[int(t.epilogue)], blas_->lastEngine());
  }
  // Attention on cuDNN's kernels, or reading or writing bf16 where the
  // conversions around it would have.
  if ((t.kind == Thunk::Attention || t.kind == Thunk::AttentionGrad) &&
      cudnnPlans_.count(&t))
    return fmt::format("{} ({})", kindName(t.kind), attentionEngine_);
  if ((t.kind == Thunk::Attention || t.kind == Thunk::AttentionGrad) &&
      (t.in != Operands::F32 || t.result != Operands::F32))
    return fmt::format("{} ({} in, {} out)", kindName(t.kind),
                       t.in == Operands::F32 ? "f32" : "bf16",
                       t.result == Operands::F32 ? "f32" : "bf16");
  return kindName(t.kind);
}

void *Executor::auxOf(const Thunk &t, char *arena) {
  return t.epilogue == Epilogue::None ? nullptr : arena + t.p.back();
}

Product Executor::productOf(const Thunk &t) {
  const std::vector<int64_t> &i = t.i;
  Product p{i[0],      i[1],  i[2],       i[3],    i[4] != 0,
            i[5] != 0, false, t.operands, t.result};
  p.bias = t.bias;
  p.epilogue = t.epilogue;
  if (!t.ld.empty()) {
    p.lda = t.ld[0];
    p.ldb = t.ld[1];
    p.ldc = t.ld[2];
  }
  if (!t.pad.empty()) {
    p.n = t.pad[0];
    p.k = t.pad[1];
  }
  return p;
}

Status Executor::tuneProducts(char *deviceMemory) {
  auto start = std::chrono::steady_clock::now();
  char *arena = deviceMemory - deviceFrom_;
  size_t products = 0;
  // Choices timed by an earlier run on this machine, kept with its peaks
  // (dtrt/peaks_cache.h): a resumed run computes with the same kernels.
  bool tuned = blas_->engine() == ProductEngine::Tuned;
  std::string dir = peaksCacheDir();
  if (tuned && !dir.empty())
    blas_->preferChoices(readPeaksCache(dir + "/peaks.json"));
  for (const auto &[name, thunks] : entries_)
    for (const Thunk &t : thunks) {
      Status s = Status::ok();
      if (t.kind == Thunk::Matmul)
        s = blas_->tune(productOf(t), arena + t.p[0], arena + t.p[1],
                        arena + t.p[2], nullptr, auxOf(t, arena));
      else if (t.kind == Thunk::MatmulBias)
        s = blas_->tune(productOf(t), arena + t.p[0], arena + t.p[1],
                        arena + t.p[3], arena + t.p[2], auxOf(t, arena));
      else
        continue;
      if (!s)
        return s.error().withContext(name);
      ++products;
    }
  if (Status s = synchronize(); !s)
    return s;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!tuned)
    return Status::ok();
  std::string kept;
  if (!blas_->timedChoices().empty())
    kept = addToPeaksCache(blas_->timedChoices());
  std::string reused =
      blas_->reusedChoices() > 0
          ? fmt::format(", {} shapes' choices taken from an earlier run's",
                        blas_->reusedChoices())
          : "";
  fmt::print(stderr,
             "note: cuBLASLt's candidates for the plan's {} products timed in "
             "{:.1f} s{}{} (DTRT_CUDA_PRODUCTS=lt takes its heuristic's first "
             "instead)\n",
             products, seconds, reused,
             kept.empty() ? "" : fmt::format("; kept in {}", kept));
  return Status::ok();
}

Status Executor::prepareAttention(char *deviceMemory) {
  std::string mode = "auto";
  if (const char *v = std::getenv("DTRT_CUDA_ATTENTION"); v && *v)
    mode = v;
  if (mode != "auto" && mode != "cudnn" && mode != "dt")
    return Error(
        fmt::format("DTRT_CUDA_ATTENTION={} is not auto, cudnn or dt", mode));
  std::vector<const Thunk *> calls;
  for (const auto &[name, thunks] : entries_)
    for (const Thunk &t : thunks)
      if ((t.kind == Thunk::Attention || t.kind == Thunk::AttentionGrad) &&
          t.operands == Operands::BF16)
        calls.push_back(&t);
  if (mode == "dt" || calls.empty())
    return Status::ok();
  auto start = std::chrono::steady_clock::now();
  // Where cuDNN is missing or refuses, dt's kernels run: said once, with
  // the first reason, unless DTRT_CUDA_ATTENTION=cudnn asks for cuDNN only.
  auto refuse = [&](const std::string &why) -> Status {
    if (mode == "cudnn")
      return Error(fmt::format("DTRT_CUDA_ATTENTION=cudnn: {}", why));
    fmt::print(stderr, "note: attention runs on dt's kernels: {}\n", why);
    cudnnPlans_.clear();
    cudnn_.reset(); // and its workspace
    return Status::ok();
  };
  // DTRT_CUDA_DETERMINISTIC=1: cuDNN's gradient sums dQ in a fixed order,
  // so that two runs (a resumed one too) give the same bits, as dt's kernels
  // do.
  std::string fixed = "0";
  if (const char *v = std::getenv("DTRT_CUDA_DETERMINISTIC"); v && *v)
    fixed = v;
  if (fixed != "0" && fixed != "1")
    return Error(
        fmt::format("DTRT_CUDA_DETERMINISTIC={} is not 0 or 1", fixed));
  Expected<std::unique_ptr<Cudnn>> cudnn = Cudnn::open(stream_);
  if (!cudnn)
    return refuse(cudnn.error().message());
  cudnn_ = std::move(*cudnn);
  for (const Thunk *t : calls) {
    Expected<Sdpa> a = Sdpa::of(*t);
    if (a)
      a->deterministic = fixed == "1";
    Expected<int> plan = a ? cudnn_->prepare(*a) : Expected<int>(a.error());
    if (!plan)
      return refuse(fmt::format("cuDNN does not take {} {}: {}",
                                kindName(t->kind), t->range,
                                plan.error().message()));
    cudnnPlans_[t] = *plan;
  }
  if (Status s = cudnn_->allocateWorkspace(); !s)
    return refuse(s.error().message());
  // Each plan runs once now, on its first call's operands (whatever the
  // arena holds): cuDNN initialises some of its engines at their first
  // run, which must not fall inside a CUDA graph's capture.
  char *arena = deviceMemory - deviceFrom_;
  std::set<int> warmed;
  for (const auto &[t, plan] : cudnnPlans_)
    if (warmed.insert(plan).second)
      if (Status s = runCudnn(*t, plan, arena); !s)
        return refuse(s.error().message());
  if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
    return refuse(fmt::format("cuDNN's attention failed on its first run: {}",
                              cudaGetErrorString(e)));
  if (Status s = checkCudnn(arena); !s)
    return refuse(s.error().message());
  attentionEngine_ = cudnn_->version();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  fmt::print(stderr,
             "note: attention runs on {}'s fused kernels: {} launches, {} "
             "plans built in {:.1f} s (DTRT_CUDA_ATTENTION=dt runs dt's "
             "own)\n",
             attentionEngine_, calls.size(), cudnn_->plans(), seconds);
  return Status::ok();
}

namespace {

/// Where operand `i` of attention launch `t` lies: each of its slices x t
/// rows of d elements, as element offsets from the operand's start (the
/// plan's layout, or [slices, t, d]).
std::vector<int64_t> rowStarts(const Thunk &t, size_t i) {
  int64_t slices = t.i[0], steps = t.i[1], d = t.i[2];
  std::array<int64_t, 4> l{1, steps * d, 0, d};
  if (!t.layouts.empty())
    l = t.layouts[i];
  std::vector<int64_t> starts;
  for (int64_t s = 0; s < slices; ++s)
    for (int64_t r = 0; r < steps; ++r)
      starts.push_back(s / l[0] * l[1] + s % l[0] * l[2] + r * l[3]);
  return starts;
}

/// The bf16 values of operand `i` of `t` (its rows' elements in order).
std::vector<float> readRows(const Thunk &t, size_t i, const char *arena) {
  std::vector<int64_t> starts = rowStarts(t, i);
  int64_t d = t.i[2], last = *std::max_element(starts.begin(), starts.end());
  std::vector<uint16_t> raw(size_t(last + d));
  cudaMemcpy(raw.data(), arena + t.p[i], raw.size() * 2,
             cudaMemcpyDeviceToHost);
  std::vector<float> values;
  for (int64_t at : starts)
    for (int64_t c = 0; c < d; ++c) {
      uint32_t w = uint32_t(raw[size_t(at + c)]) << 16;
      float f;
      std::memcpy(&f, &w, 4);
      values.push_back(f);
    }
  return values;
}

/// Fills operand `i` of `t` (everything from its first row's start to its
/// last row's end) with bf16 values in [-2, 2).
void fillRows(const Thunk &t, size_t i, char *arena, std::mt19937 &rng) {
  std::vector<int64_t> starts = rowStarts(t, i);
  int64_t last = *std::max_element(starts.begin(), starts.end());
  std::vector<uint16_t> raw(size_t(last + t.i[2]));
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  for (uint16_t &x : raw) {
    float f = uniform(rng);
    uint32_t w;
    std::memcpy(&w, &f, 4);
    x = uint16_t(w >> 16);
  }
  cudaMemcpy(arena + t.p[i], raw.data(), raw.size() * 2,
             cudaMemcpyHostToDevice);
}

/// The largest difference between `got` and `want`, against the largest of
/// `want`: "" when within a few bf16 roundings, else what is off.
std::string compareRows(const char *what, const std::vector<float> &got,
                        const std::vector<float> &want) {
  float largest = 0, worst = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    largest = std::max(largest, std::abs(want[k]));
    float d = std::abs(got[k] - want[k]);
    worst = std::isfinite(got[k]) ? std::max(worst, d)
                                  : std::numeric_limits<float>::infinity();
  }
  if (worst <= 0.02f * largest + 1e-3f)
    return "";
  return fmt::format("{} differs from dt's kernels' by up to {} (largest "
                     "value {})",
                     what, worst, largest);
}

} // namespace

Status Executor::checkCudnn(char *arena) {
  // The first forward, and the gradient that reads what it writes (the
  // same Q, K, V, O and lse: O and lse must be the forward's for the
  // gradient to mean anything).
  const Thunk *forward = nullptr, *grad = nullptr;
  for (const auto &[name, thunks] : entries_)
    for (const Thunk &t : thunks)
      if (cudnnPlans_.count(&t) && t.kind == Thunk::Attention && !forward)
        forward = &t;
  if (!forward)
    return Status::ok();
  for (const auto &[name, thunks] : entries_)
    for (const Thunk &t : thunks)
      if (cudnnPlans_.count(&t) && t.kind == Thunk::AttentionGrad && !grad &&
          std::equal(forward->p.begin(), forward->p.end(), t.p.begin()))
        grad = &t;
  // dt's kernels for `t` (as if cuDNN had not taken it).
  auto own = [&](const Thunk &t) {
    int plan = cudnnPlans_.at(&t);
    cudnnPlans_.erase(&t);
    Status s = launch(t, arena);
    cudnnPlans_[&t] = plan;
    return s;
  };
  auto sync = [&](const char *what) -> Status {
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess)
      return cudaFailure(fmt::format("checking cuDNN's {} failed", what), e);
    return Status::ok();
  };
  auto lse = [&](const Thunk &t) {
    std::vector<float> v(size_t(t.i[0] * t.i[1]));
    cudaMemcpy(v.data(), arena + t.p[4], v.size() * 4, cudaMemcpyDeviceToHost);
    return v;
  };
  std::mt19937 rng(20261128);
  for (size_t i = 0; i < 3; ++i)
    fillRows(*forward, i, arena, rng);
  if (Status s = own(*forward); !s)
    return s;
  if (Status s = sync("attention"); !s)
    return s;
  std::vector<float> o = readRows(*forward, 3, arena), l = lse(*forward);
  if (Status s = runCudnn(*forward, cudnnPlans_.at(forward), arena); !s)
    return s;
  if (Status s = sync("attention"); !s)
    return s;
  std::string off =
      compareRows("its attention's O", readRows(*forward, 3, arena), o);
  std::vector<float> cudnnLse = lse(*forward);
  float worst = 0;
  for (size_t k = 0; k < l.size(); ++k)
    worst = std::max(worst, std::abs(cudnnLse[k] - l[k]));
  if (off.empty() && !(worst <= 2e-3f))
    off = fmt::format("its attention's log-sum-exp differs from dt's "
                      "kernels' by up to {}",
                      worst);
  if (!off.empty() || !grad)
    return off.empty() ? Status::ok() : Status(Error(off));
  // The gradient from dt's O and lse (in place again), for a random dO.
  if (Status s = own(*forward); !s)
    return s;
  fillRows(*grad, 5, arena, rng);
  if (Status s = own(*grad); !s)
    return s;
  if (Status s = sync("attention gradient"); !s)
    return s;
  std::vector<std::vector<float>> want;
  for (size_t i = 6; i < 9; ++i)
    want.push_back(readRows(*grad, i, arena));
  if (Status s = runCudnn(*grad, cudnnPlans_.at(grad), arena); !s)
    return s;
  if (Status s = sync("attention gradient"); !s)
    return s;
  const char *names[] = {"its attention gradient's dQ", "dK", "dV"};
  for (size_t i = 6; i < 9; ++i)
    if (std::string e =
            compareRows(names[i - 6], readRows(*grad, i, arena), want[i - 6]);
        !e.empty())
      return Error(e);
  return Status::ok();
}

Status Executor::runCudnn(const Thunk &t, int plan, char *arena) {
  std::vector<void *> pointers;
  for (int64_t offset : t.p)
    pointers.push_back(arena + offset);
  return cudnn_->run(plan, pointers);
}

void Executor::printProfile() const {
  // A row's rate by the cost model: what its time makes of its FLOPs (a
  // product, attention) or else its bytes.
  auto rate = [](const Profiled &p) -> std::string {
    double seconds = p.ms / 1e3;
    if (seconds <= 0)
      return "";
    if (p.flops > 0 && p.flops / std::max(p.bytes, 1.0) > 8)
      return fmt::format("{:7.1f} TFLOP/s", p.flops / seconds / 1e12);
    if (p.bytes > 0)
      return fmt::format("{:7.0f} GB/s   ", p.bytes / seconds / 1e9);
    return "";
  };
  auto print = [&](const std::map<std::string, Profiled> &sums,
                   const char *title, size_t most) {
    std::vector<std::pair<double, std::string>> rows;
    Profiled all;
    for (const auto &[name, p] : sums) {
      rows.push_back({p.ms, name});
      all.ms += p.ms;
      all.bytes += p.bytes;
    }
    std::sort(rows.rbegin(), rows.rend());
    fmt::print(stderr, "{}: {:.1f} ms in {} kinds{}; the longest:\n", title,
               all.ms, rows.size(),
               all.bytes > 0 ? fmt::format(", {:.1f} GB by the cost model",
                                           all.bytes / 1e9)
                             : "");
    for (size_t r = 0; r < rows.size() && r < most; ++r) {
      const Profiled &p = sums.at(rows[r].second);
      fmt::print(stderr, "  {:10.2f} ms {:5.1f}%  {:6} x  {:15}  {}\n",
                 rows[r].first, 100 * rows[r].first / std::max(all.ms, 1e-9),
                 p.count, rate(p), rows[r].second);
    }
  };
  print(profiled_, "GPU profile", 40);
  if (!generated_.empty())
    print(generated_, "Generated kernels by op", 15);
}

Status Executor::launch(const Thunk &t, char *arena) {
  auto f32 = [&](size_t k) {
    return reinterpret_cast<float *>(arena + t.p[k]);
  };
  auto i32 = [&](size_t k) {
    return reinterpret_cast<const int32_t *>(arena + t.p[k]);
  };
  auto i64 = [&](size_t k) {
    return reinterpret_cast<const int64_t *>(arena + t.p[k]);
  };
  const std::vector<int64_t> &i = t.i;
  dtk_stream s = reinterpret_cast<dtk_stream>(stream_);
  float *scratch = reinterpret_cast<float *>(scratch_);
  switch (t.kind) {
  case Thunk::Kernel:
    if (t.grid > 0)
      return library_->launchBlocks(t.kernel, arena, t.grid, stream_);
    return library_->launch(t.kernel, arena, i[0], stream_);
  case Thunk::Copy: {
    cudaError_t e =
        cudaMemcpyAsync(arena + t.p[1], arena + t.p[0], size_t(i[0]),
                        cudaMemcpyDeviceToDevice, stream_);
    if (e != cudaSuccess)
      return cudaFailure("a copy in the arena failed", e);
    return Status::ok();
  }
  case Thunk::Matmul:
    // A padded product's extra terms are zeros (CudaPadding.h).
    for (const auto &z : t.zeros) {
      cudaError_t e = cudaMemset2DAsync(arena + z[0], size_t(z[3]), 0,
                                        size_t(z[1]), size_t(z[2]), stream_);
      if (e != cudaSuccess)
        return cudaFailure("zeroing a padded product's extra terms failed", e);
    }
    return blas_->matmul(productOf(t), arena + t.p[0], arena + t.p[1],
                         arena + t.p[2], nullptr, auxOf(t, arena));
  case Thunk::MatmulBias:
    // cuBLASLt adds the bias in its epilogue.
    return blas_->matmul(productOf(t), arena + t.p[0], arena + t.p[1],
                         arena + t.p[3], arena + t.p[2], auxOf(t, arena));
  case Thunk::Softmax:
    dtk_cuda_softmax_f32(f32(0), f32(1), i[0], i[1], i[2], s);
    return Status::ok();
  case Thunk::LayerNorm:
    dtk_cuda_layer_norm_typed(arena + t.p[0], elementType(t.in), f32(1), f32(2),
                              arena + t.p[3], elementType(t.result), i[0], i[1],
                              float(t.f[0]), s);
    return Status::ok();
  case Thunk::LayerNormGrad:
    dtk_cuda_layer_norm_grad_typed(
        arena + t.p[0], elementType(t.in), f32(1), arena + t.p[2],
        elementType(t.gradIn), arena + t.p[3], elementType(t.result), f32(4),
        f32(5), scratch, i[0], i[1], float(t.f[0]), s);
    return Status::ok();
  case Thunk::RMSNorm:
    dtk_cuda_rms_norm_typed(arena + t.p[0], elementType(t.in), f32(1),
                            arena + t.p[2], elementType(t.result), i[0], i[1],
                            float(t.f[0]), s);
    return Status::ok();
  case Thunk::RMSNormGrad:
    dtk_cuda_rms_norm_grad_typed(arena + t.p[0], elementType(t.in), f32(1),
                                 arena + t.p[2], elementType(t.gradIn),
                                 arena + t.p[3], elementType(t.result), f32(4),
                                 scratch, i[0], i[1], float(t.f[0]), s);
    return Status::ok();
  case Thunk::Rope:
    dtk_cuda_rope_f32(f32(0), f32(1), scratch, i[0], i[1], i[2], float(t.f[0]),
                      float(t.f[1]), float(t.f[2]), float(t.f[3]),
                      float(t.f[4]), int32_t(i[3]), s);
    return Status::ok();
  case Thunk::Dropout: {
    // The step, the micro-batch and the block's offsets are i64 scalars in
    // the arena; an absent offset has stride 0.
    auto scalar = [&](size_t k) {
      return reinterpret_cast<const int64_t *>(arena + t.p[k]);
    };
    dtk_cuda_dropout_f32(f32(0), f32(1), scalar(2), scalar(3), scalar(4),
                         scalar(5), scalar(6), scalar(7), i[0], i[1], i[2],
                         i[3], i[4], i[5], i[6], i[7], i[8], i[9], i[10], i[11],
                         i[12], i[13], i[14], float(t.f[0]), s);
    return Status::ok();
  }
  case Thunk::Conv2d:
  case Thunk::Conv2dInputGrad:
  case Thunk::Conv2dWeightGrad: {
    ConvProducts products{blas_.get(), std::nullopt};
    auto kernel = t.kind == Thunk::Conv2d ? dtk_cuda_conv2d_f32
                  : t.kind == Thunk::Conv2dInputGrad
                      ? dtk_cuda_conv2d_input_grad_f32
                      : dtk_cuda_conv2d_weight_grad_f32;
    if (kernel(f32(0), f32(1), f32(2), scratch, i[0], i[1], i[2], i[3], i[4],
               i[5], i[6], i[7], i[8], i[9], i[10], i[11], i[12], i[13], i[14],
               i[15], ConvProducts::gemm, &products, s) != 0)
      return products.failure ? *products.failure
                              : Error("a convolution's product failed");
    return Status::ok();
  }
  case Thunk::MaxPool:
    dtk_cuda_max_pool2d_f32(f32(0), f32(1), i[0], i[1], i[2], i[3], i[4], i[5],
                            i[6], i[7], i[8], i[9], i[10], s);
    return Status::ok();
  case Thunk::MaxPoolGrad:
    dtk_cuda_max_pool2d_grad_f32(f32(0), f32(1), f32(2), i[0], i[1], i[2], i[3],
                                 i[4], i[5], i[6], i[7], i[8], i[9], i[10], s);
    return Status::ok();
  case Thunk::AvgPool:
    dtk_cuda_avg_pool2d_f32(f32(0), f32(1), i[0], i[1], i[2], i[3], i[4], i[5],
                            i[6], i[7], i[8], i[9], i[10], s);
    return Status::ok();
  case Thunk::AvgPoolGrad:
    dtk_cuda_avg_pool2d_grad_f32(f32(0), f32(1), i[0], i[1], i[2], i[3], i[4],
                                 i[5], i[6], i[7], i[8], i[9], i[10], s);
    return Status::ok();
  case Thunk::Embedding:
    dtk_cuda_embedding_f32(f32(0), i32(1), f32(2), i[0], i[1], i[2], s);
    return Status::ok();
  case Thunk::EmbeddingGrad:
    dtk_cuda_embedding_grad_f32(i32(0), f32(1), f32(2), i[0], i[1], i[2], s);
    return Status::ok();
  case Thunk::CrossEntropy:
    // Rows a pitch apart where the plan says ("ld"), else packed.
    dtk_cuda_cross_entropy_pitched(arena + t.p[0], elementType(t.operands),
                                   t.ld.empty() ? i[1] : t.ld[0], i32(1),
                                   f32(2), scratch, i[0], i[1], s);
    return Status::ok();
  case Thunk::CrossEntropyGrad:
    dtk_cuda_cross_entropy_grad_pitched(
        arena + t.p[0], elementType(t.operands), t.ld.empty() ? i[1] : t.ld[0],
        i32(1), f32(2), arena + t.p[3], elementType(t.result),
        t.ld.empty() ? i[1] : t.ld[1], scratch, i[0], i[1], s);
    return Status::ok();
  case Thunk::CrossEntropyWithGrad:
    dtk_cuda_cross_entropy_with_grad_pitched(
        arena + t.p[0], elementType(t.operands), t.ld.empty() ? i[1] : t.ld[0],
        i32(1), f32(2), arena + t.p[3], elementType(t.result),
        t.ld.empty() ? i[1] : t.ld[1], f32(4), scratch, i[0], i[1], s);
    return Status::ok();
  case Thunk::CountCorrect:
    dtk_cuda_count_correct_f32(f32(0), i32(1), f32(2), scratch, i[0], i[1], s);
    return Status::ok();
  case Thunk::Attention:
    if (auto plan = cudnnPlans_.find(&t); plan != cudnnPlans_.end())
      return runCudnn(t, plan->second, arena);
    if (!t.layouts.empty()) {
      std::vector<dtk_attention_layout> layouts = layoutsOf(t);
      if (dtk_cuda_attention_bf16_strided(
              arena + t.p[0], arena + t.p[1], arena + t.p[2], arena + t.p[3],
              f32(4), elementType(t.in), elementType(t.result), layouts.data(),
              i[0], i[1], i[2], int32_t(i[3]), s) != 0)
        return typedAttentionRefused(t);
      return Status::ok();
    }
    if (t.in != Operands::F32 || t.result != Operands::F32) {
      if (dtk_cuda_attention_bf16_typed(
              arena + t.p[0], arena + t.p[1], arena + t.p[2], arena + t.p[3],
              f32(4), elementType(t.in), elementType(t.result), i[0], i[1],
              i[2], int32_t(i[3]), s) != 0)
        return typedAttentionRefused(t);
      return Status::ok();
    }
    (t.operands == Operands::BF16 ? dtk_cuda_attention_bf16
     : t.operands == Operands::F32
         ? dtk_cuda_attention_f32
         : dtk_cuda_attention_tf32)(f32(0), f32(1), f32(2), f32(3), f32(4),
                                    i[0], i[1], i[2], int32_t(i[3]), s);
    return Status::ok();
  case Thunk::AttentionGrad:
    if (auto plan = cudnnPlans_.find(&t); plan != cudnnPlans_.end())
      return runCudnn(t, plan->second, arena);
    if (!t.layouts.empty()) {
      std::vector<dtk_attention_layout> layouts = layoutsOf(t);
      if (dtk_cuda_attention_grad_bf16_strided(
              arena + t.p[0], arena + t.p[1], arena + t.p[2], arena + t.p[3],
              f32(4), arena + t.p[5], arena + t.p[6], arena + t.p[7],
              arena + t.p[8], elementType(t.in), elementType(t.result),
              layouts.data(), scratch, i[0], i[1], i[2], int32_t(i[3]), s) != 0)
        return typedAttentionRefused(t);
      return Status::ok();
    }
    if (t.in != Operands::F32 || t.result != Operands::F32) {
      if (dtk_cuda_attention_grad_bf16_typed(
              arena + t.p[0], arena + t.p[1], arena + t.p[2], arena + t.p[3],
              f32(4), arena + t.p[5], arena + t.p[6], arena + t.p[7],
              arena + t.p[8], elementType(t.in), elementType(t.result), scratch,
              i[0], i[1], i[2], int32_t(i[3]), s) != 0)
        return typedAttentionRefused(t);
      return Status::ok();
    }
    (t.operands == Operands::BF16  ? dtk_cuda_attention_grad_bf16
     : t.operands == Operands::F32 ? dtk_cuda_attention_grad_f32
                                   : dtk_cuda_attention_grad_tf32)(
        f32(0), f32(1), f32(2), f32(3), f32(4), f32(5), f32(6), f32(7), f32(8),
        scratch, i[0], i[1], i[2], int32_t(i[3]), s);
    return Status::ok();
  case Thunk::EmbeddingShard:
    dtk_cuda_embedding_shard_f32(f32(0), i32(1), f32(2), i[0], i64(3), i[1],
                                 i[2], i[3], s);
    return Status::ok();
  case Thunk::EmbeddingGradShard:
    dtk_cuda_embedding_grad_shard_f32(i32(0), f32(1), f32(2), i[0], i64(3),
                                      i[1], i[2], i[3], s);
    return Status::ok();
  case Thunk::ClassStats:
    dtk_cuda_class_stats_f32(f32(0), i32(1), f32(2), i[0], i[1], i64(3), i[2],
                             s);
    return Status::ok();
  case Thunk::CrossEntropyStats:
    dtk_cuda_cross_entropy_stats_f32(f32(0), i32(1), f32(2), scratch, i[0],
                                     i[1], s);
    return Status::ok();
  case Thunk::CountCorrectStats:
    dtk_cuda_count_correct_stats_f32(f32(0), i32(1), f32(2), scratch, i[0],
                                     i[1], s);
    return Status::ok();
  case Thunk::CrossEntropyGradShard:
    dtk_cuda_cross_entropy_grad_shard_f32(f32(0), i32(1), f32(2), f32(3),
                                          f32(4), scratch, i[0], i[1], i[2],
                                          i64(5), i[3], s);
    return Status::ok();
  case Thunk::AllReduce:
  case Thunk::ReduceScatter:
  case Thunk::AllGather:
  case Thunk::AllToAll:
    return collective(t, arena);
  case Thunk::TakeShard: {
    // i[5..7]: the shard's first byte, the bytes it holds, the padding.
    cudaError_t e =
        cudaMemcpyAsync(arena + t.p[1], arena + t.p[0] + i[5], size_t(i[6]),
                        cudaMemcpyDeviceToDevice, stream_);
    if (e == cudaSuccess && i[7] > 0)
      e = cudaMemsetAsync(arena + t.p[1] + i[6], 0, size_t(i[7]), stream_);
    if (e != cudaSuccess)
      return cudaFailure(fmt::format("the shard copy of '{}' failed", t.what),
                         e);
    return Status::ok();
  }
  case Thunk::ShardStart: {
    // The start was worked out when the plan was read; it lives in the
    // thunk as long as the executor.
    cudaError_t e = cudaMemcpyAsync(arena + t.p[0], &t.i[1], sizeof(int64_t),
                                    cudaMemcpyHostToDevice, stream_);
    if (e != cudaSuccess)
      return cudaFailure("writing a shard's start failed", e);
    return Status::ok();
  }
  case Thunk::Wait: {
    // The step's stream waits for the asynchronous collective; the time it
    // stalls there is the communication the step did not hide.
    auto done = done_.find(int32_t(i[0]));
    if (done == done_.end())
      return Status::ok(); // it ran on the step's stream
    Expected<std::pair<cudaEvent_t, cudaEvent_t>> timed = commTiming();
    if (!timed)
      return timed.error();
    cudaEventRecord(timed->first, stream_);
    cudaError_t e = cudaStreamWaitEvent(stream_, done->second, 0);
    cudaEventRecord(timed->second, stream_);
    if (e != cudaSuccess)
      return cudaFailure("waiting for a collective failed", e);
    return Status::ok();
  }
  }
  return Error("unknown launch kind");
}

Status Executor::collective(const Thunk &t, char *arena) {
  const std::vector<int64_t> &i = t.i;
  // A synchronous collective's time on the step's stream is communication
  // the step waits for; an asynchronous one's is counted at its wait.
  std::optional<std::pair<cudaEvent_t, cudaEvent_t>> timed;
  if (!t.async) {
    Expected<std::pair<cudaEvent_t, cudaEvent_t>> pair = commTiming();
    if (!pair)
      return pair.error();
    timed = *pair;
    cudaEventRecord(timed->first, stream_);
  }
  cudaStream_t on = streamOf(t);
  const char *src = arena + t.p[0];
  char *dst = arena + t.p[1];
  Status s = t.kind == Thunk::AllReduce
                 ? collectives_->allReduceSum(src, dst, i[0], DType(i[1]),
                                              AxisMask(i[2]), t.what, on)
             : t.kind == Thunk::ReduceScatter
                 ? collectives_->reduceScatterSum(src, dst, i[0], DType(i[2]),
                                                  AxisMask(i[3]), t.what, on)
             : t.kind == Thunk::AllGather
                 ? collectives_->allGather(src, dst, i[0], DType(i[2]),
                                           AxisMask(i[3]), t.what, on)
                 : collectives_->allToAll(src, dst, i[0], DType(i[2]),
                                          AxisMask(i[3]), t.what, on);
  if (!s)
    return s;
  if (timed)
    cudaEventRecord(timed->second, stream_);
  if (t.async) {
    // Its dt.wait makes the step's stream wait for this event.
    auto [done, fresh] = done_.try_emplace(t.collective, nullptr);
    if (fresh) {
      cudaError_t e =
          cudaEventCreateWithFlags(&done->second, cudaEventDisableTiming);
      if (e != cudaSuccess)
        return cudaFailure("cannot make an event for a collective", e);
    }
    cudaEventRecord(done->second, commStream_);
  }
  return Status::ok();
}

cudaStream_t Executor::streamOf(const Thunk &t) const {
  return t.async ? commStream_ : stream_;
}

Status Executor::startOnCommStream(const Thunk &t) {
  if (!t.async)
    return Status::ok();
  // The collective's operands are the step's work so far.
  cudaError_t e = cudaEventRecord(ready_, stream_);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(commStream_, ready_, 0);
  if (e != cudaSuccess)
    return cudaFailure("starting an asynchronous collective failed", e);
  return Status::ok();
}

Expected<std::pair<cudaEvent_t, cudaEvent_t>> Executor::commTiming() {
  if (commTimesUsed_ == commTimes_.size()) {
    cudaEvent_t begin = nullptr, end = nullptr;
    cudaError_t e = cudaEventCreate(&begin);
    if (e == cudaSuccess)
      e = cudaEventCreate(&end);
    if (e != cudaSuccess)
      return cudaFailure("cannot make the events that time collectives", e);
    commTimes_.push_back({begin, end});
  }
  return commTimes_[commTimesUsed_++];
}

Status Executor::countCommTimes() {
  double ms = 0;
  for (size_t k = 0; k < commTimesUsed_; ++k) {
    float each = 0;
    cudaError_t e =
        cudaEventElapsedTime(&each, commTimes_[k].first, commTimes_[k].second);
    if (e != cudaSuccess)
      return cudaFailure("timing a collective failed", e);
    ms += each;
  }
  commTimesUsed_ = 0;
  addProgramCollectiveSeconds(ms / 1e3);
  return Status::ok();
}

} // namespace dtrt::cuda
