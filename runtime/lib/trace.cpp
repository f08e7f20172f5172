//===- trace.cpp - Per-rank traces of chosen steps ------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/trace.h"

#include "dtrt/file.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace dtrt {

/// The trace's thread of a GPU's stream (1: the rank's, 2: communication).
constexpr int32_t kGpuThread = 3;

namespace {

Tracer *currentTracer = nullptr;

/// The rounds of the clock handshake; the median of their estimates is the
/// offset.
constexpr int kClockRounds = 16;

/// Runtime spans: their names.
const char *runtimeSpanName(int32_t id) {
  switch (RuntimeSpan(id)) {
  case RuntimeSpan::Step:
    return "step";
  case RuntimeSpan::Input:
    return "input";
  case RuntimeSpan::GradStep:
    return "dt_grad_step";
  case RuntimeSpan::ApplyStep:
    return "dt_apply_step";
  case RuntimeSpan::Exchange:
    return "exchange step times";
  }
  return "runtime";
}

std::string jsonString(const std::string &s) {
  return nlohmann::json(s).dump();
}

} // namespace

int64_t steadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void setProgramTracer(Tracer *tracer) { currentTracer = tracer; }
Tracer *programTracer() { return currentTracer; }

SpanBudget spanBudget(const Manifest &m) {
  SpanBudget b;
  int64_t micro = m.pipeline ? m.pipeline->microbatches : m.train.accumulation;
  // step, apply, exchange; per micro-batch: input, grad step.
  b.computeThread = 3 + 2 * micro;
  for (const SpanDesc &s : m.spans) {
    int64_t calls = m.callsPerStep(s.entry);
    b.computeThread += calls;
    if (s.collective >= 0)
      b.commThread += calls;
  }
  return b;
}

double Tracer::bufferBytes(const Manifest &m, int64_t steps) {
  SpanBudget b = spanBudget(m);
  return double(b.computeThread + b.commThread) * double(steps) *
         double(sizeof(Record));
}

Tracer::Tracer(const Manifest &m, Setup setup, const Mesh &mesh)
    : m_(m), setup_(std::move(setup)), mesh_(mesh) {
  path_ = fmt::format("{}/rank_{}.pt.trace.json", setup_.dir, setup_.rank);
  budget_ = spanBudget(m);
  int64_t steps = setup_.last - setup_.first + 1;
  compute_.resize(size_t(budget_.computeThread * steps));
  comm_.resize(size_t(budget_.commThread * steps));
  open_.resize(16);
}

Status Tracer::alignClocks(Communicator *comm) {
  auto epochNow = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  if (!comm) {
    zeroNs_ = steadyNanos();
    zeroEpochNs_ = epochNow();
    return Status::ok();
  }
  // Every rank leaves a barrier at nearly the same moment: the difference of
  // two ranks' clocks read just after it estimates their offset, off by the
  // barrier's release skew. The median over rounds drops the rounds that a
  // descheduled rank spoiled; their spread bounds the error.
  int world = comm->worldSize();
  std::vector<int64_t> mine(kClockRounds + 2);
  for (int k = 0; k < kClockRounds; ++k) {
    if (Status st = comm->barrier("the trace's clock handshake"); !st)
      return st;
    mine[size_t(k)] = steadyNanos();
  }
  mine[kClockRounds] = steadyNanos();
  mine[kClockRounds + 1] = epochNow();
  std::vector<int64_t> all(mine.size() * size_t(world));
  if (Status st = comm->allGather(mine.data(), all.data(), int64_t(mine.size()),
                                  DType::I64, comm->mesh().allAxes(),
                                  "the trace's clock handshake");
      !st)
    return st;
  const int64_t *zero = &all[0];
  std::vector<int64_t> diffs;
  for (int k = 0; k < kClockRounds; ++k)
    diffs.push_back(mine[size_t(k)] - zero[k]);
  std::sort(diffs.begin(), diffs.end());
  offsetNs_ = diffs[diffs.size() / 2];
  offsetErrorNs_ = (diffs[diffs.size() * 3 / 4] - diffs[diffs.size() / 4]) / 2;
  zeroNs_ = zero[kClockRounds];
  zeroEpochNs_ = zero[kClockRounds + 1];
  return Status::ok();
}

void Tracer::beginStep(int64_t step) {
  step_ = step;
  if (step >= setup_.first && step <= setup_.last && !written_)
    recording_.store(true, std::memory_order_relaxed);
}

void Tracer::endStep(int64_t step) {
  recording_.store(false, std::memory_order_relaxed);
  depth_ = 0;
  if (step == setup_.last && !written_)
    write();
}

void Tracer::finish() {
  recording_.store(false, std::memory_order_relaxed);
  if (!written_ && (computeUsed_ > 0 || commUsed_ > 0))
    write();
}

void Tracer::push(std::vector<Record> &into, size_t &used, Record r) {
  if (used == into.size()) {
    ++dropped_;
    return;
  }
  into[used++] = r;
}

void Tracer::begin(int32_t id) {
  if (depth_ == open_.size()) {
    ++dropped_;
    return;
  }
  open_[depth_++] = {id, steadyNanos()};
}

void Tracer::end(int32_t id) {
  int64_t now = steadyNanos();
  if (depth_ == 0 || open_[depth_ - 1].id != id) {
    ++dropped_;
    return;
  }
  const Open &o = open_[--depth_];
  push(compute_, computeUsed_, {id, 1, step_, o.beginNs, now});
}

void Tracer::collective(int32_t collective, int64_t beginNs, int64_t endNs) {
  // A collective runs on the communication thread, or on the rank's own
  // when that one was idle; never on both at once (queue.h).
  int32_t thread = std::this_thread::get_id() == mainThread_ ? 1 : 2;
  push(comm_, commUsed_, {collective, thread, step_, beginNs, endNs});
}

void Tracer::deviceSpan(int32_t id, int64_t beginNs, int64_t endNs) {
  push(compute_, computeUsed_, {id, kGpuThread, step_, beginNs, endNs});
}

void Tracer::deviceSpans(const std::vector<int32_t> &ids, int64_t beginNs,
                         int64_t endNs) {
  if (ids.empty())
    return;
  if (ids.size() == 1)
    return deviceSpan(ids.front(), beginNs, endNs);
  auto found = std::find(groups_.begin(), groups_.end(), ids);
  int32_t group = int32_t(found - groups_.begin());
  if (found == groups_.end())
    groups_.push_back(ids);
  push(compute_, computeUsed_,
       {ids.front(), kGpuThread, step_, beginNs, endNs, group});
}

void Tracer::deviceCollective(int32_t collective, int64_t beginNs,
                              int64_t endNs) {
  push(comm_, commUsed_, {collective, kGpuThread, step_, beginNs, endNs});
}

void Tracer::write() {
  written_ = true;
  auto ts = [&](int64_t ns) {
    return double(ns - offsetNs_ - zeroNs_) / 1000.0;
  };
  int pid = setup_.rank;
  fmt::memory_buffer out;
  auto add = [&](auto &&...args) {
    fmt::format_to(std::back_inserter(out), args...);
  };
  nlohmann::json dist = {
      {"backend", setup_.backend.empty() ? "none" : setup_.backend},
      {"rank", setup_.rank},
      {"world_size", setup_.worldSize}};
  nlohmann::json dt = {
      {"program", m_.name},
      {"steps", {setup_.first, setup_.last}},
      {"clock_offset_us", double(offsetNs_) / 1000.0},
      {"clock_offset_error_us", double(offsetErrorNs_) / 1000.0},
      {"spans_per_step", budget_.computeThread + budget_.commThread},
      {"spans_dropped", dropped_}};
  add("{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n"
      "  \"distributedInfo\": {},\n  \"displayTimeUnit\": \"ms\",\n"
      "  \"baseTimeNanoseconds\": {},\n  \"traceName\": {},\n  \"dt\": {},\n"
      "  \"traceEvents\": [\n",
      dist.dump(), zeroEpochNs_, jsonString(path_), dt.dump());
  add("  {{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {0}, \"tid\": "
      "0, "
      "\"args\": {{\"name\": \"rank {0}\"}}}},\n"
      "  {{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": {0}, "
      "\"tid\": 0, \"args\": {{\"sort_index\": {0}}}}},\n"
      "  {{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {0}, \"tid\": 1, "
      "\"args\": {{\"name\": \"compute\"}}}},\n"
      "  {{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {0}, \"tid\": 2, "
      "\"args\": {{\"name\": \"communication\"}}}}",
      pid);
  auto onGpu = [](const Record &r) { return r.thread == kGpuThread; };
  if (std::any_of(compute_.begin(), compute_.begin() + computeUsed_, onGpu) ||
      std::any_of(comm_.begin(), comm_.begin() + commUsed_, onGpu))
    add(",\n  {{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {}, "
        "\"tid\": {}, \"args\": {{\"name\": \"GPU stream\"}}}}",
        pid, kGpuThread);
  for (size_t i = 0; i < computeUsed_; ++i) {
    const Record &r = compute_[i];
    double dur = double(r.endNs - r.beginNs) / 1000.0;
    if (r.id < 0) {
      std::string name = runtimeSpanName(r.id);
      if (RuntimeSpan(r.id) == RuntimeSpan::Step)
        name = fmt::format("ProfilerStep#{}", r.step);
      add(",\n  {{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": {}, "
          "\"pid\": {}, \"tid\": 1, \"ts\": {:.3f}, \"dur\": {:.3f}, "
          "\"args\": {{\"step\": {}}}}}",
          jsonString(name), pid, ts(r.beginNs), dur, r.step);
      continue;
    }
    if (r.group >= 0) {
      // One launch of several ops: named for them all, their costs summed.
      nlohmann::json ids = nlohmann::json::array(),
                     names = nlohmann::json::array();
      double flops = 0, bytes = 0;
      for (int32_t id : groups_[size_t(r.group)]) {
        const SpanDesc &s = m_.spans[size_t(id)];
        ids.push_back(id);
        names.push_back(s.layer.empty() ? s.op : s.op + " " + s.layer);
        flops += s.flops;
        bytes += s.bytes;
      }
      add(",\n  {{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": {}, "
          "\"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, "
          "\"args\": {{\"op_ids\": {}, \"ops\": {}, \"step\": {}, "
          "\"entry\": {}, \"flops\": {}, \"bytes\": {}}}}}",
          jsonString(fmt::format("merged launch ({} ops)", ids.size())), pid,
          r.thread, ts(r.beginNs), dur, ids.dump(), names.dump(), r.step,
          jsonString(m_.spans[size_t(r.id)].entry), flops, bytes);
      continue;
    }
    const SpanDesc &s = m_.spans[size_t(r.id)];
    std::string name = s.layer.empty() ? s.op : s.op + " " + s.layer;
    // An op that ran on the GPU is a "kernel", as Kineto files a device's.
    add(",\n  {{\"ph\": \"X\", \"cat\": \"{}\", \"name\": {}, \"pid\": {}, "
        "\"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{\"op_id\": "
        "{}, \"step\": {}, \"entry\": {}, \"flops\": {}, \"bytes\": {}",
        onGpu(r) ? "kernel" : "cpu_op", jsonString(name), pid, r.thread,
        ts(r.beginNs), dur, r.id, r.step, jsonString(s.entry), s.flops,
        s.bytes);
    if (s.collective >= 0)
      add(", \"collective\": {}", s.collective);
    add("}}}}");
  }
  for (size_t i = 0; i < commUsed_; ++i) {
    const Record &r = comm_[i];
    const CollectiveDesc &c = m_.collectives[size_t(r.id)];
    AxisMask axes = 0;
    for (const std::string &name : c.axes)
      for (size_t a = 0; a < mesh_.axisCount(); ++a)
        if (mesh_.axisName(a) == name)
          axes |= AxisMask(1) << a;
    std::vector<int> group = mesh_.group(setup_.rank, axes);
    // The names Kineto gives a collective's arguments, which Holistic Trace
    // Analysis keys on, then dt's own.
    nlohmann::json args = {{"Collective name", c.kind},
                           {"dtype", c.dtype},
                           {"In msg nelems", c.elements},
                           {"Group size", group.size()},
                           {"Process Group Ranks", group},
                           {"collective_id", c.id},
                           {"what", c.what},
                           {"bytes", c.bytes},
                           {"step", r.step}};
    add(",\n  {{\"ph\": \"X\", \"cat\": \"collective\", \"name\": {}, "
        "\"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, "
        "\"args\": {}}}",
        jsonString(c.kind + " " + c.what), pid, r.thread, ts(r.beginNs),
        double(r.endNs - r.beginNs) / 1000.0, args.dump());
  }
  add("\n  ]\n}}\n");

  // Written beside, then renamed: a reader never sees half a trace. A trace
  // that cannot be written is a warning; training goes on.
  std::error_code ec;
  std::filesystem::create_directories(setup_.dir, ec);
  std::string tmp = path_ + ".tmp";
  Status st = writeFileSynced(tmp, std::string(out.data(), out.size()));
  if (st)
    st = renameSynced(tmp, path_);
  if (!st) {
    std::fprintf(stderr,
                 "warning: cannot write the trace %s: %s; training "
                 "continues without it\n",
                 path_.c_str(), st.error().message().c_str());
    return;
  }
  if (dropped_)
    std::fprintf(stderr,
                 "warning: the trace %s dropped %lld spans beyond its "
                 "buffers (please report it)\n",
                 path_.c_str(), (long long)dropped_);
}

} // namespace dtrt

using namespace dtrt;

extern "C" void dtrt_span_begin(int32_t id) {
  if (currentTracer && currentTracer->recording())
    currentTracer->begin(id);
}

extern "C" void dtrt_span_end(int32_t id) {
  if (currentTracer && currentTracer->recording())
    currentTracer->end(id);
}
