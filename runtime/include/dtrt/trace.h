//===- dtrt/trace.h - Per-rank traces of chosen steps -----------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `--trace DIR` (with `--trace-steps A:B`): every rank writes the spans of the
// chosen steps as DIR/rank_<r>.pt.trace.json, a Chrome trace in the layout
// PyTorch's profiler (Kineto) writes, so that Perfetto opens it and Holistic
// Trace Analysis reads it (docs/operations.md, "Traces").
//
// A span is one op of the program (the compiler numbered it: its `op_id`,
// the same on every rank, with what it is in the manifest's `spans`), one
// collective as the communicator ran it, or a phase of the runtime's step
// (input staging, the entry points, the exchange after the step). Generated
// code brackets each op with dtrt_span_begin/end; while no trace records they
// return after one test of a flag.
//
// Buffers are sized once, from the manifest's span counts: nothing is
// allocated while steps run. Spans beyond the size (a program whose pipeline
// schedule calls an entry point more often than the bound assumes) are
// counted as dropped, and the trace says how many.
//
// Clocks: each rank measures its steady clock's offset from rank 0's at start
// (a handshake of barriers) and writes its times on rank 0's clock, so the
// ranks' files line up when opened together; the offset and its uncertainty
// are in each file.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_TRACE_H
#define DTRT_TRACE_H

#include "dtrt/comm.h"
#include "dtrt/error.h"
#include "dtrt/manifest.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace dtrt {

/// The runtime's own spans: negative ids (the program's are 0 and up).
enum class RuntimeSpan : int32_t {
  Step = -1,      // one optimizer step
  Input = -2,     // staging a micro-batch into the arena
  GradStep = -3,  // dt_grad_step, or a pipeline's passes of one step
  ApplyStep = -4, // dt_apply_step
  Exchange = -5,  // the ranks' exchange of step times after the step
};

/// The spans per optimizer step a rank records at most: its entry points'
/// spans times their calls, the collectives they run, the runtime's own.
struct SpanBudget {
  int64_t computeThread = 0, commThread = 0;
};
SpanBudget spanBudget(const Manifest &m);

class Tracer {
public:
  struct Setup {
    std::string dir;
    /// The steps recorded, inclusive, numbered as the progress line does.
    int64_t first = 0, last = 0;
    int rank = 0, worldSize = 1;
    /// "mpi", "local", ... (the communicator's engine), "" for one rank.
    std::string backend;
  };

  Tracer(const Manifest &m, Setup setup, const Mesh &mesh);
  /// The bytes of the buffers that tracing `steps` steps of `m` takes.
  static double bufferBytes(const Manifest &m, int64_t steps);
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;

  /// Measures this rank's clock offset from rank 0's. Every rank calls it at
  /// the same point; `comm` is null for one rank.
  Status alignClocks(Communicator *comm);

  /// Around step `step` (1-based): records it when it is in the window.
  void beginStep(int64_t step);
  /// After the step: writes the file once the window's last step is done.
  void endStep(int64_t step);
  /// At the end of the run: writes what a window cut short recorded.
  void finish();

  /// The runtime's and generated code's spans, on the calling thread.
  void begin(int32_t id);
  void end(int32_t id);
  /// Collective `collective` ran from `beginNs` to `endNs` (steady clock).
  void collective(int32_t collective, int64_t beginNs, int64_t endNs);
  /// Op `id` (a span of the manifest), or collective `collective`, ran on
  /// the GPU's stream from `beginNs` to `endNs` (steady clock): the trace's
  /// "GPU stream" thread, as Kineto lists a device's kernels.
  void deviceSpan(int32_t id, int64_t beginNs, int64_t endNs);
  void deviceCollective(int32_t collective, int64_t beginNs, int64_t endNs);
  /// Ops `ids` ran together in one launch on the GPU's stream (a GPU plan's
  /// merged kernels, side by side in their blocks): one "kernel" event
  /// naming them all, with their FLOPs and bytes summed, since the launch's
  /// time is not theirs one by one.
  void deviceSpans(const std::vector<int32_t> &ids, int64_t beginNs,
                   int64_t endNs);

  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  const std::string &path() const { return path_; }
  int64_t dropped() const { return dropped_; }

private:
  struct Record {
    int32_t id;
    /// 1: the rank's thread, 2: its communication thread, 3: its GPU's
    /// stream.
    int32_t thread;
    int64_t step;
    int64_t beginNs, endNs;
    /// For a launch of several ops (deviceSpans): their list in `groups_`.
    int32_t group = -1;
  };
  struct Open {
    int32_t id;
    int64_t beginNs;
  };
  void push(std::vector<Record> &into, size_t &used, Record r);
  void write();

  const Manifest &m_;
  Setup setup_;
  const Mesh &mesh_;
  std::string path_;
  std::thread::id mainThread_ = std::this_thread::get_id();
  std::atomic<bool> recording_{false};
  bool written_ = false;
  int64_t step_ = 0;
  std::vector<Record> compute_, comm_;
  /// The op lists of merged launches, each once (a plan has a fixed few).
  std::vector<std::vector<int32_t>> groups_;
  size_t computeUsed_ = 0, commUsed_ = 0;
  std::vector<Open> open_;
  size_t depth_ = 0;
  int64_t dropped_ = 0;
  SpanBudget budget_;
  /// This rank's clock minus rank 0's (ns), half the spread of the
  /// handshake's estimates, and rank 0's clock at its start (the trace's
  /// zero) with the wall-clock time then.
  int64_t offsetNs_ = 0, offsetErrorNs_ = 0, zeroNs_ = 0, zeroEpochNs_ = 0;
};

/// The tracer generated code's spans and the collectives go to; null (the
/// default) records nothing.
void setProgramTracer(Tracer *tracer);
Tracer *programTracer();

/// The steady clock in nanoseconds.
int64_t steadyNanos();

/// Records a runtime span over its lifetime (nothing without a tracer).
class TraceScope {
public:
  explicit TraceScope(RuntimeSpan span) : id_(int32_t(span)) {
    if (Tracer *t = programTracer(); t && t->recording())
      t->begin(id_);
  }
  ~TraceScope() {
    if (Tracer *t = programTracer(); t && t->recording())
      t->end(id_);
  }
  TraceScope(const TraceScope &) = delete;
  TraceScope &operator=(const TraceScope &) = delete;

private:
  int32_t id_;
};

} // namespace dtrt

extern "C" {
/// Generated code: op `id` (the manifest's spans[id]) begins / ends.
void dtrt_span_begin(int32_t id);
void dtrt_span_end(int32_t id);
}

#endif // DTRT_TRACE_H
