//===- dtrt/cuda/executor.h - Runs a program's GPU plan ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The GPU half of an emitted program: the launch sequence dtc wrote for each
// entry point (dt/Target/CudaPlan.h, docs/abi.md "The GPU plan"), replayed on
// one stream over the device arena. Generated kernels come from the
// program's PTX (KernelLibrary), the rest from kernels/cuda and cuBLAS, which
// is loaded when the executor is made (dlopen: a program never needs it on a
// machine without a GPU). Everything is resolved once, when the plan is read:
// a step only launches.
//
// Built only where the CUDA toolkit was found (DT_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_EXECUTOR_H
#define DTRT_CUDA_EXECUTOR_H

#include "dtrt/cuda/blas.h"
#include "dtrt/cuda/collectives.h"
#include "dtrt/cuda/cudnn.h"
#include "dtrt/cuda/library.h"
#include "dtrt/cuda/plan.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtrt::cuda {

class Blas;

/// What an executor needs beyond its plan.
struct ExecutorSetup {
  /// The program's manifest: the names of spans (NVTX ranges) and
  /// collectives.
  std::string manifest;
  /// The rank's host communicator (its mesh and rank place the rank's
  /// shards, and it starts the engine of a plan's collectives; null for a
  /// program of one rank), the engine asked for and the step's timeout.
  CollectiveSetup collectives;
  /// Why this rank cannot use NCCL ("" when it can).
  std::string ncclObstacle;
};

class Executor {
public:
  /// Reads `plan`, loads `image` and cuBLAS, allocates the scratch the
  /// plan asks for, on the current device, and starts the engine of its
  /// collectives, if it has any.
  static Expected<std::unique_ptr<Executor>>
  create(const std::string &image, const std::string &plan,
         const ExecutorSetup &setup = {});
  ~Executor();

  /// The bytes of device memory the arena needs: the planned arena's from
  /// the plan's device_from (0 unless the optimizer is offloaded) and, past
  /// it, the split reductions' counters and partial sums (zeros at start).
  int64_t arenaBytes() const { return arenaBytes_; }
  /// Whether the plan has entry point `name` (grad_step, apply_step, ...).
  bool has(const std::string &name) const;
  /// Queues entry point `name` over the device arena at `arena`; errors of
  /// the launches themselves surface at the next synchronize. An entry
  /// point without collectives is captured as a CUDA graph at its first run
  /// and replayed after (one launch instead of hundreds; DTRT_CUDA_GRAPHS=0
  /// turns it off, as do --trace and DTRT_CUDA_PROFILE, which time each
  /// launch). The entry point and each launch run eagerly are NVTX ranges
  /// (NVTX 3: no-ops unless a tool such as Nsight Systems is attached),
  /// named as the trace's spans.
  Status run(const std::string &name, char *arena);
  /// Waits for everything queued; the first failure of any launch, or of
  /// the collectives (which end after the setup's timeout).
  Status synchronize();
  /// The engine of the plan's collectives ("NCCL 2.28.3"), and why it is
  /// not NCCL when NCCL could not load; "" for a plan without any.
  std::string collectivesEngine() const;
  cudaStream_t stream() const { return stream_; }
  /// The products' cuBLAS, on stream().
  Blas &blas() { return *blas_; }
  /// Chooses every planned product's algorithm before the first step, on
  /// the device memory just allocated for the arena (`deviceMemory`, at the
  /// plan's device_from), which must hold nothing yet: with
  /// DTRT_CUDA_PRODUCTS=tuned the products run there, timed. Says on stderr
  /// how long tuning took.
  Status tuneProducts(char *deviceMemory);
  /// Builds cuDNN's plans for the plan's bf16 attentions and their
  /// gradients (DTRT_CUDA_ATTENTION: auto, the default, where cuDNN loads
  /// and takes them, falling back to dt's kernels and saying why; cudnn,
  /// failing instead; dt, never), before the first step, which may be
  /// captured as a CUDA graph. `deviceMemory` is where the arena starts:
  /// each plan runs once there, and the first attention and its gradient
  /// run on random inputs there by both dt's kernels and cuDNN, which must
  /// agree within bf16's rounding (else, in auto, dt's kernels run): it
  /// must hold nothing of value yet.
  Status prepareAttention(char *deviceMemory);
  /// Which attention runs ("cuDNN 9.19.0", "dt's kernels"), for the
  /// run's notes.
  const std::string &attentionEngine() const { return attentionEngine_; }

  /// With DTRT_CUDA_PROFILE=1 in the environment, every launch is timed
  /// with CUDA events (without a graph, but queued as one would run them,
  /// the stream waited for once an entry point) and this prints the launches
  /// that took longest, summed over the run, to stderr, each with the rate
  /// its span's cost (by the compiler's cost model) gives: TFLOP/s for
  /// products and attention, GB/s for the rest; then the generated kernels
  /// by their op.
  void printProfile() const;

private:
  Executor() = default;
  Status launch(const Thunk &t, char *arena);
  /// The name a profile gives a launch: its kernel's or its kind's.
  std::string describe(const Thunk &t) const;
  /// A product launch's shape and operands.
  static Product productOf(const Thunk &t);
  /// A product launch's epilogue's auxiliary matrix, or null.
  static void *auxOf(const Thunk &t, char *arena);

  /// Under --trace, a traced step's launches between CUDA events, and the
  /// anchors that put the events on the host's clock: the stream was idle
  /// when an anchor was recorded, at the host time beside it.
  struct Traced {
    int32_t span, collective;
    size_t anchor;
    cudaEvent_t begin, end;
    /// A merged launch's spans (its thunk's, which the plan keeps).
    const std::vector<int32_t> *members = nullptr;
  };
  Status traceEvents(size_t count);
  /// Hands the traced launches that have run to the tracer.
  Status flushTrace();
  std::vector<cudaEvent_t> events_;
  size_t eventsUsed_ = 0;
  std::vector<std::pair<cudaEvent_t, int64_t>> anchors_;
  std::vector<Traced> traced_;

  /// A collective's launch: on the step's stream, or (asynchronous) on the
  /// collectives' stream until its dt.wait.
  Status collective(const Thunk &t, char *arena);
  cudaStream_t streamOf(const Thunk &t) const;
  /// Makes the collectives' stream wait for the step's work so far, before
  /// an asynchronous collective.
  Status startOnCommStream(const Thunk &t);
  /// A pair of events around the time a step waits for a collective (the
  /// collective, or its dt.wait), summed into the program's communication
  /// at synchronize.
  Expected<std::pair<cudaEvent_t, cudaEvent_t>> commTiming();
  Status countCommTimes();
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> commTimes_;
  size_t commTimesUsed_ = 0;
  cudaStream_t commStream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  /// Each asynchronous collective's end, by id.
  std::map<int32_t, cudaEvent_t> done_;

  /// Runs an entry point's launches one by one (under --trace, timed).
  Status launchAll(const std::string &name, const std::vector<Thunk> &thunks,
                   char *arena, bool tracing);
  /// Whether a CUDA graph may hold an entry point's launches.
  bool capturable(const std::vector<Thunk> &thunks) const;
  /// Replays the entry point's CUDA graph, captured at its first run (for
  /// this arena).
  Status runGraph(const std::string &entry, const std::vector<Thunk> &thunks,
                  char *arena);
  struct Graph {
    char *arena;
    cudaGraphExec_t exec;
  };
  /// The entry points' graphs; none when DTRT_CUDA_GRAPHS=0, or since a
  /// capture failed.
  std::optional<std::map<std::string, Graph>> graphs_;

  bool profile_ = false;
  /// The profile's sums for a launch's name (describe), and for the
  /// generated kernels by their op ("fused(convert)").
  struct Profiled {
    double ms = 0;
    int64_t count = 0;
    double bytes = 0, flops = 0;
    void add(double launchMs, const Thunk &t) {
      ms += launchMs;
      ++count;
      bytes += double(t.bytes);
      flops += t.flops;
    }
  };
  std::map<std::string, Profiled> profiled_, generated_;
  /// Adds the times between each launch's pair of events (the first 2 x
  /// thunks.size() of events_) to the profile, once the stream is done.
  Status countProfile(const std::vector<Thunk> &thunks);

  std::unique_ptr<DeviceCollectives> collectives_;
  std::string collectivesNote_;
  std::unique_ptr<KernelLibrary> library_;
  std::unique_ptr<Blas> blas_;
  /// cuDNN's attention (dtrt/cuda/cudnn.h), and the plan each attention
  /// launch runs there; a launch without one runs dt's kernels.
  std::unique_ptr<Cudnn> cudnn_;
  std::map<const Thunk *, int> cudnnPlans_;
  std::string attentionEngine_ = "dt's kernels";
  Status runCudnn(const Thunk &t, int plan, char *arena);
  /// The first attention and its gradient, on random inputs in the arena,
  /// by dt's kernels and by cuDNN's: an Error says how far apart they are
  /// when beyond bf16's rounding (cuDNN reading the graphs otherwise than
  /// dt means them).
  Status checkCudnn(char *arena);
  std::vector<std::pair<std::string, std::vector<Thunk>>> entries_;
  cudaStream_t stream_ = nullptr;
  char *scratch_ = nullptr;
  int64_t arenaBytes_ = 0;
  /// The plan's device_from: the device memory starts this far into the
  /// arena.
  int64_t deviceFrom_ = 0;
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_EXECUTOR_H
